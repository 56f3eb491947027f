//! The trace clock (monotonic): an event's absolute time, as babeltrace2 prints
//! it, is within 10 us of `clock_gettime(CLOCK_REALTIME)` read beside the
//! emit, and the frequency is within 10 ppm (see `common::check_event_times`
//! for how noise is handled). One test per binary: the clock source is
//! chosen once per process.

mod common;

use std::time::Duration;

tape::tracepoint! {
    /// Carries the realtime read just before the emit.
    pub fn stamp(rt: i64, i: u32) = "test.clock.stamp";
}

fn realtime_ns() -> i64 {
    tape::clock::realtime_ns() as i64
}

#[test]
fn event_times_match_realtime_monotonic() {
    let _g = tape::Config::new()
        .enable("test.clock.*")
        .clock(tape::ClockChoice::Monotonic)
        .init()
        .expect("init");
    _g.disarm();
    let mut rts = Vec::new();
    for i in 0..40 {
        let rt = realtime_ns();
        stamp(rt, i);
        rts.push(rt);
        std::thread::sleep(Duration::from_millis(25));
    }
    let dir = common::trace_path("clock-monotonic");
    tape::save_to(&dir).expect("save");
    let meta = std::fs::read_to_string(dir.join("metadata")).unwrap();
    let want = if tape::ClockChoice::Monotonic == tape::ClockChoice::Monotonic
        || !cfg!(target_arch = "x86_64")
        || !tape::clock::invariant_tsc()
    {
        None
    } else {
        Some("clock_source = \"tsc\";")
    };
    if let Some(w) = want {
        assert!(meta.contains(w), "{meta}");
    }
    if tape::ClockChoice::Monotonic == tape::ClockChoice::Monotonic {
        assert!(meta.contains("clock_source = \"monotonic\";"), "{meta}");
        assert!(meta.contains("freq = 1000000000;"), "{meta}");
    }
    common::check_event_times(&dir, "test.clock.stamp", &rts);
}
