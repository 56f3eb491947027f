//! Triggers under hostile conditions: `traceon` / `traceoff` triggers
//! firing on four threads while another enables and disables through the
//! control plane and turns tracing on and off (the state words are changed
//! with no lock: at the end every tracepoint records exactly when it is
//! enabled and tracing is on); triggers firing inside a signal handler that
//! interrupts an emit on the same thread (the stack trace it would record is
//! dropped and counted, nothing is torn); and triggers in a forked child.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

tape::tracepoint! {
    pub fn on_hit(n: u64) = "test.race.on";
    pub fn off_hit(n: u64) = "test.race.off";
    pub fn target_a(n: u64) = "test.race.a";
    pub fn target_b(n: u64) = "test.race.b";
    pub fn in_signal(n: u64) = "test.race.signal";
    pub fn outer(seq: u64, text: &str) = "test.race.outer";
}

/// Each tracepoint's RECORD bit is WANTED while tracing is on.
fn consistent() -> Result<(), String> {
    let on = tape::registry::tracing_on();
    for p in tape::registry::tracepoints() {
        if p.is_recording() != (p.is_enabled() && on) {
            return Err(format!(
                "{}: recording {} but enabled {} and tracing {}",
                p.name(),
                p.is_recording(),
                p.is_enabled(),
                on
            ));
        }
    }
    Ok(())
}

#[test]
fn racing_triggers_and_control_leave_a_consistent_state() {
    let _g = tape::Config::new()
        .dir(common::trace_path("trigger-races"))
        .control(false)
        .init()
        .unwrap();
    tape::trigger::set("test.race.on", "traceon if n & 1").unwrap();
    tape::trigger::set("test.race.off", "traceoff if n & 1").unwrap();
    tape::trigger::set("test.race.on", "enable_event:test.race.b if n & 2").unwrap();
    tape::trigger::set("test.race.off", "disable_event:test.race.b if n & 2").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..4u64 {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut n = t;
            while !stop.load(Ordering::Relaxed) {
                if n % 2 == 0 {
                    on_hit(n >> 1);
                } else {
                    off_hit(n >> 1);
                }
                target_a(n);
                target_b(n);
                n += 1;
            }
        }));
    }
    let control = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match k % 4 {
                    0 => tape::enable_pattern("test.race.*").map(|_| ()).unwrap(),
                    1 => {
                        tape::registry::set_tracing(k % 8 == 1);
                    }
                    2 => tape::disable_pattern("test.race.[ab]").map(|_| ()).unwrap(),
                    _ => tape::enable("test.race.a").unwrap(),
                }
                k += 1;
            }
            k
        })
    };
    std::thread::sleep(Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let rounds = control.join().unwrap();
    assert!(rounds > 100, "the control thread ran {rounds} rounds");
    consistent().unwrap();
    let fired: u64 = ["test.race.on", "test.race.off"]
        .iter()
        .flat_map(|n| tape::trigger::list(tape::registry::lookup(n).unwrap()))
        .map(|t| t.fired())
        .sum();
    assert!(fired > 10, "triggers fired {fired} times");
    // Whatever the last writer was, one more change from either side
    // still leaves it consistent.
    tape::registry::set_tracing(true);
    consistent().unwrap();
    off_hit(1);
    assert!(!tape::registry::tracing_on());
    consistent().unwrap();
    on_hit(1);
    assert!(tape::registry::tracing_on());
    consistent().unwrap();
    tape::trigger::clear("test.race.*").unwrap();
    tape::disable_pattern("test.race.*").unwrap();

    signal_handler_triggers();
    forked_child_triggers();
}

static IN_HANDLER: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    IN_HANDLER.store(true, Ordering::Relaxed);
    in_signal(7);
    IN_HANDLER.store(false, Ordering::Relaxed);
}

/// A signal handler hits a tracepoint whose trigger records a stack trace,
/// while the interrupted thread is inside emits of its own: nothing torn
/// (the trace reads back), the stack traces taken mid-emit dropped and
/// counted (`busy`).
fn signal_handler_triggers() {
    tape::enable("test.race.outer").unwrap();
    tape::trigger::set("test.race.signal", "stacktrace").unwrap();
    // SAFETY: installing a handler that only emits (what tape supports in
    // handlers) for SIGUSR1, restored below.
    let old = unsafe {
        libc::signal(
            libc::SIGUSR1,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let me_addr = me as usize;
    let signaller = std::thread::spawn(move || {
        let mut sent = 0u64;
        while !s2.load(Ordering::Relaxed) {
            // SAFETY: the target thread is alive until `stop` is set and
            // this thread joined.
            unsafe { libc::pthread_kill(me_addr as libc::pthread_t, libc::SIGUSR1) };
            sent += 1;
            std::thread::sleep(Duration::from_micros(50));
        }
        sent
    });
    let before = tape::trigger::stats().stacktraces;
    let t = Instant::now();
    let mut seq = 0u64;
    while t.elapsed() < Duration::from_millis(300) {
        outer(seq, "0123456789abcdef");
        seq += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let sent = signaller.join().unwrap();
    // SAFETY: restores the previous disposition.
    unsafe { libc::signal(libc::SIGUSR1, old) };
    let taken = tape::trigger::stats().stacktraces - before;
    assert!(sent > 100 && taken > 0, "sent {sent}, stack traces {taken}");
    let dir = common::trace_path("trigger-signal");
    tape::save_to(&dir).unwrap();
    let text = common::tape_text(&dir).expect("the trace reads");
    let evs = common::events(&text.stdout);
    let outers: Vec<u64> = evs
        .iter()
        .filter(|e| e.name == "test.race.outer")
        .map(|e| common::field_u64(&e.payload, "seq"))
        .collect();
    assert!(
        outers.windows(2).all(|w| w[1] == w[0] + 1),
        "a torn or lost outer event"
    );
    assert!(evs.iter().any(|e| e.name == "tape.stacktrace"));
    tape::trigger::clear("test.race.signal").unwrap();
    tape::disable("test.race.outer").unwrap();
}

/// In a forked child, triggers fire (tracing off and on again) without
/// touching the parent's state.
fn forked_child_triggers() {
    tape::trigger::set("test.race.off", "traceoff:1").unwrap();
    assert!(tape::registry::tracing_on());
    // SAFETY: the child only calls tape (async-signal-safe paths and
    // atomics) and _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        off_hit(1);
        let code = if tape::registry::tracing_on() { 1 } else { 0 };
        // SAFETY: ends the child without running the parent's atexit.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child: {status}"
    );
    assert!(
        tape::registry::tracing_on(),
        "the parent's tracing is its own"
    );
    let t = &tape::trigger::list(tape::registry::lookup("test.race.off").unwrap())[0];
    assert_eq!(
        t.left(),
        Some(1),
        "the child's firing used the child's count"
    );
    tape::trigger::clear("test.race.*").unwrap();
}
