//! The snapshot thread, `tape-trigger`: it saves the traces that the
//! features ask for from places that may not save themselves (a trigger
//! firing on the emitting thread, the latency tracer seeing a new worst
//! case), a few milliseconds later.
//!
//! A feature that takes snapshots is a [`Service`]: how to take what was
//! asked of it (`take`), and whether the thread must keep polling for it
//! (`polling`: its requests are counted on the emitting thread, which
//! never wakes a thread). The feature hands its service over with [`wake`]
//! from the control plane (a snapshot trigger set, the tracer turned on);
//! the thread then calls every service's `take` each [`SNAPSHOT_POLL`]
//! while one of them polls, and sleeps otherwise. At the program's end,
//! [`take_pending_at_exit`] takes what is still asked for before the last
//! save. The thread stands below its users, which reach it through the
//! services they register: it imports none of them.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How often the `tape-trigger` thread looks for snapshot requests while
/// a service polls (requests are counted on the emitting thread, which
/// never wakes a thread).
pub const SNAPSHOT_POLL: Duration = Duration::from_millis(5);

/// What a feature asks of the snapshot thread.
#[derive(Debug)]
pub(crate) struct Service {
    /// Takes the snapshots asked for and not yet taken (`true`: at the
    /// program's end, without waiting for any interval).
    pub(crate) take: fn(bool),
    /// Whether requests may come that no call of [`wake`] announces.
    pub(crate) polling: fn() -> bool,
}

/// The services handed over so far, in their order.
static SERVICES: Mutex<Vec<&'static Service>> = Mutex::new(Vec::new());

/// The `tape-trigger` thread (none if it could not be started).
static WORKER: OnceLock<Option<std::thread::Thread>> = OnceLock::new();

fn services() -> Vec<&'static Service> {
    SERVICES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Hands `service` to the thread (once), starts the thread (once) and
/// wakes it. Control plane only (it locks and may spawn).
pub(crate) fn wake(service: &'static Service) {
    {
        let mut all = SERVICES.lock().unwrap_or_else(|e| e.into_inner());
        if !all.iter().any(|s| std::ptr::eq(*s, service)) {
            all.push(service);
        }
    }
    let t = WORKER.get_or_init(|| {
        match std::thread::Builder::new()
            .name("tape-trigger".into())
            .spawn(worker)
        {
            Ok(h) => Some(h.thread().clone()),
            Err(e) => {
                eprintln!(
                    "tape: cannot start the trigger thread (snapshots will not be taken): {e}"
                );
                None
            }
        }
    });
    if let Some(t) = t {
        t.unpark();
    }
}

fn worker() {
    loop {
        let all = services();
        for s in &all {
            (s.take)(false);
        }
        if all.iter().any(|s| (s.polling)()) {
            std::thread::sleep(SNAPSHOT_POLL);
        } else {
            // Woken by the next `wake` (requests still pending were taken
            // just above).
            std::thread::park();
        }
    }
}

/// At the program's end (before its last save): the snapshots still asked
/// for, of every service, are taken now rather than lost with the
/// `tape-trigger` thread.
pub(crate) fn take_pending_at_exit() {
    for s in services() {
        (s.take)(true);
    }
}
