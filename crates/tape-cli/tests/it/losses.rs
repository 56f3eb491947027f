//! Losses by cause, from the emit to the reader: a trace whose threads lost
//! events for each of the four causes a program can provoke (overwritten,
//! full, big, busy), recorded by the library in this process, then read by
//! `tape stats`, `tape show` and babeltrace2.
//!
//! For every thread, `emitted = recorded + lost` in `tape::stats()`, cause
//! by cause; the trace holds exactly the recorded events and its losses
//! stream's `lost_<cause>` fields give the same counts; `events_discarded`
//! (their sum) is what babeltrace2 reports, and its event lines carry no
//! `lost_` field.

use crate::shared;

use std::path::{Path, PathBuf};
use std::process::Command;

tape::tracepoint! {
    /// A numbered event (18 bytes with its header).
    pub fn seq(n: u64) = "test.losses.seq";
    /// An event of any size.
    pub fn blob(data: &[u8]) = "test.losses.blob";
    /// An event whose field raises a signal while it is encoded: the
    /// handler's emit interrupts this one.
    pub fn outer(x: Reenter) = "test.losses.outer";
    /// What the signal handler emits.
    pub fn inner(n: u64) = "test.losses.inner";
}

const RING: usize = 64 << 10;
const PACKET: usize = 4 << 10;

/// A field that raises SIGUSR1 while it is encoded, so that the handler's
/// emit re-enters the emit in progress on the same thread, every time.
struct Reenter(u64);

// SAFETY: writes exactly the 8 bytes `max_size` states.
unsafe impl tape::Encode for Reenter {
    fn max_size(&self) -> usize {
        8
    }
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: raising a signal has no preconditions; the handler only
        // emits (the thread's ring exists: no allocation).
        unsafe { libc::raise(libc::SIGUSR1) };
        // SAFETY: the caller gives 8 writable bytes.
        unsafe { self.0.encode(dst) }
    }
}

impl tape::Field for Reenter {
    const FIXED_SIZE: usize = 8;
    fn describe(name: &str, out: &mut tape::Layout) {
        <u64 as tape::Field>::describe(name, out);
    }
}

/// What the signal handler emits: `inner`, or (when set) a `blob` too big
/// for what is left of the packet, which would need a packet switch under
/// the interrupted emit's reservation.
static BIG_IN_HANDLER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Nearly a packet: more than is left after any event, less than a slot.
static NEARLY_A_PACKET: [u8; PACKET - 20] = [0; PACKET - 20];

extern "C" fn on_signal(_: libc::c_int) {
    if BIG_IN_HANDLER.load(std::sync::atomic::Ordering::Relaxed) {
        blob(&NEARLY_A_PACKET);
    } else {
        inner(1);
    }
}

fn trace_path(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("losses");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// Runs `f` on a new thread; the thread's figures in `tape::stats()`.
fn on_thread(f: impl FnOnce() + Send + 'static) -> tape::ThreadStats {
    let tid = std::thread::spawn(move || {
        f();
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    })
    .join()
    .unwrap();
    tape::stats()
        .threads
        .into_iter()
        .find(|t| t.tid == tid)
        .expect("the thread's ring")
}

fn tape_cli(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tape"))
        .args(args)
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "tape {args:?}: {e}");
    (o, e)
}

#[test]
fn every_cause_is_counted_exactly_in_stats_the_trace_and_the_readers() {
    tape::Config::new()
        .enable("test.losses.*")
        .buffer_size(RING)
        .packet_size(PACKET)
        .mode(tape::Mode::Overwrite)
        .init()
        .expect("init")
        .disarm();
    // SAFETY: the handler only emits (async-signal-safe in tape: no lock,
    // no allocation once the thread's ring exists).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }

    // Overwritten: a ring that wraps a hundred times.
    let laps = 100 * (RING / 18) as u64;
    let a = on_thread(move || (0..laps).for_each(seq));
    assert!(a.drops.overwritten > 0, "{a:?}");
    assert_eq!(a.recorded + a.drops.overwritten, laps, "{a:?}");
    assert_eq!(a.emitted(), laps, "nothing else lost: {a:?}");
    assert!(a.recorded <= (RING / 18) as u64, "{a:?}");

    // Busy: every `outer` re-entered by its signal handler, whose event
    // fits in what is left of the packet, or does not (it would need a
    // packet switch under the interrupted emit): the handler's event is
    // dropped and counted, the interrupted one kept.
    let c = on_thread(|| {
        tape::register_thread();
        (0..7).for_each(|n| outer(Reenter(n)));
        BIG_IN_HANDLER.store(true, std::sync::atomic::Ordering::Relaxed);
        (7..14).for_each(|n| outer(Reenter(n)));
        BIG_IN_HANDLER.store(false, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(c.drops.busy, 14, "{c:?}");
    assert_eq!(c.recorded, 14, "{c:?}");

    // Full and big: discard mode, a ring filled twice over, and events
    // larger than a packet.
    tape::config::set_mode(tape::Mode::Discard);
    let b = on_thread(move || {
        let big = vec![0u8; PACKET];
        for n in 0..2 * (RING / 18) as u64 {
            seq(n);
            if n % 1000 == 0 {
                blob(&big);
            }
        }
    });
    tape::config::set_mode(tape::Mode::Overwrite);
    let emitted_b = 2 * (RING / 18) as u64 + (2 * (RING / 18) as u64).div_ceil(1000);
    assert!(b.drops.full > 0 && b.drops.big > 0, "{b:?}");
    assert_eq!(b.emitted(), emitted_b, "{b:?}");
    assert_eq!(
        b.drops.overwritten + b.drops.busy + b.drops.saving,
        0,
        "{b:?}"
    );

    let dir = trace_path("all-causes");
    tape::save_to(&dir).expect("save");
    let threads = [a, b, c];
    let lost = threads.iter().map(|t| t.drops).fold([0; 5], |mut s, d| {
        for (s, (_, n)) in s.iter_mut().zip(d.by_cause()) {
            *s += n;
        }
        s
    });
    let recorded: u64 = threads.iter().map(|t| t.recorded).sum();
    let total: u64 = lost.iter().sum();
    let by_cause = format!(
        "overwritten = {}, full = {}, big = {}, busy = {}, saving = {}",
        lost[0], lost[1], lost[2], lost[3], lost[4]
    );

    // `tape stats`: the trace holds what the rings held, and the losses by
    // cause.
    let (out, _) = tape_cli(&["stats", dir.to_str().unwrap()]);
    assert!(
        out.contains(&format!("events: {recorded}, lost: {total}\n")),
        "{out}"
    );
    // Every `outer` is in the trace, whatever its handler did.
    let outers = out
        .lines()
        .find(|l| l.ends_with("  test.losses.outer"))
        .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok());
    assert_eq!(outers, Some(14), "{out}");
    let (checked, _) = tape_cli(&["check", dir.to_str().unwrap()]);
    assert!(checked.starts_with("ok: "), "{checked}");
    assert!(
        out.contains(&format!("lost in streams by cause: {by_cause}\n")),
        "{out}"
    );
    // `tape show`: the closing notice names the causes with losses.
    let (_, err) = tape_cli(&["show", dir.to_str().unwrap()]);
    let named = by_cause.replace(", saving = 0", "");
    assert!(
        err.contains(&format!(
            "tape: {total} events were lost (discarded by the tracer: {named})"
        )),
        "{err}"
    );
    // babeltrace2 reports `events_discarded`: the sum.
    if shared::babeltrace2("the losses reported by babeltrace2") {
        let out = Command::new("babeltrace2").arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let reported: u64 = err
            .lines()
            .filter_map(|l| l.split("Tracer discarded ").nth(1))
            .filter_map(|l| l.split(' ').next()?.parse::<u64>().ok())
            .sum();
        assert_eq!(reported, total, "{err}");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines = text.lines().count() as u64;
        assert_eq!(lines, recorded);
        // The losses stream prints nothing; the lines carry no counter.
        assert!(!text.contains("lost_"), "a line carries a loss counter");
        assert_eq!(
            err.lines()
                .filter(|l| !l.contains("Tracer discarded"))
                .count(),
            0,
            "babeltrace2 warns: {err}"
        );
    }
}
