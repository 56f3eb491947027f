//! Re-entry: a signal handler that emits while the interrupted thread is in
//! the middle of an emit. The inner event is dropped and counted (`busy`),
//! never written over the outer one; everything else is recorded, and
//! saved + lost = emitted, exactly.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

tape::tracepoint! {
    pub fn outer(seq: u64, text: &str) = "test.reentry.outer";
    pub fn inner(n: u64) = "test.reentry.inner";
}

static SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    let n = SIGNALS.fetch_add(1, Ordering::Relaxed);
    inner(n);
}

/// Sends SIGUSR1 to `target` (this test's thread only: a process-directed
/// signal could land on another thread) every ~50 us until `stop`.
fn signaller(target: libc::pthread_t, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let target = target as usize;
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: the target thread is alive until `stop` is set and this
            // thread joined.
            unsafe { libc::pthread_kill(target as libc::pthread_t, libc::SIGUSR1) };
            std::thread::sleep(Duration::from_micros(50));
        }
    })
}

#[test]
fn a_signal_handler_emitting_mid_emit_is_dropped_and_counted() {
    let _g = tape::Config::new()
        .enable("test.reentry.*")
        .buffer_size(16 << 20)
        .init()
        .expect("init");
    _g.disarm();
    tape::register_thread();
    // SAFETY: the handler only does async-signal-safe work: an atomic add
    // and an emit (no lock, no allocation: the ring exists already).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let busy_before = tape::stats().drops.busy;
    let stop = Arc::new(AtomicBool::new(false));
    // SAFETY: pthread_self has no preconditions.
    let sender = signaller(unsafe { libc::pthread_self() }, stop.clone());
    let text = "outer event text that takes a while to copy".repeat(4);
    let start = Instant::now();
    let mut seq = 0u64;
    while start.elapsed() < Duration::from_millis(300) {
        outer(seq, &text);
        seq += 1;
    }
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let signals = SIGNALS.load(Ordering::Relaxed);
    let busy = tape::stats().drops.busy - busy_before;
    assert!(signals > 100, "only {signals} signals arrived");
    assert!(
        busy > 0,
        "no signal landed inside an emit ({signals} signals)"
    );
    let dir = common::trace_path("reentry");
    tape::save_to(&dir).expect("save");
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let Some(out) = common::read(common::Reader::Bt2, &dir, &[]) else {
        return;
    };
    let ctx = format!("tid = {tid},");
    let mine: Vec<_> = common::events(&out.stdout)
        .into_iter()
        .filter(|e| e.context.starts_with(&ctx))
        .collect();
    let outers: Vec<u64> = mine
        .iter()
        .filter(|e| e.name == "test.reentry.outer")
        .map(|e| common::field_u64(&e.payload, "seq"))
        .collect();
    let inners = mine
        .iter()
        .filter(|e| e.name == "test.reentry.inner")
        .count() as u64;
    for e in mine.iter().filter(|e| e.name == "test.reentry.outer") {
        assert_eq!(
            common::field(&e.payload, "text"),
            Some(&*format!("\"{text}\""))
        );
    }
    assert!(
        outers.windows(2).all(|w| w[1] == w[0] + 1),
        "outer events lost or reordered"
    );
    let lost = common::discarded_reported(&out.stderr);
    assert_eq!(
        outers.len() as u64 + inners + lost,
        seq + signals,
        "saved + lost = emitted"
    );
    assert_eq!(
        lost,
        busy + (seq - outers.len() as u64) + (signals - busy - inners)
    );
    eprintln!("{seq} outer, {signals} signals, {busy} dropped as re-entrant, {inners} recorded from the handler");
}
