//! The trace clock (monotonic): an event's absolute time, as babeltrace2 prints
//! it, is within 10 us of `clock_gettime(CLOCK_REALTIME)` read beside the
//! emit, and the frequency is within 10 ppm (see `common::check_event_times`
//! for how noise is handled). One test per binary: the clock source is
//! chosen once per process.

mod common;

tape::tracepoint! {
    /// Carries the realtime read just before the emit.
    pub fn stamp(rt: i64, i: u32) = "test.clock.stamp";
}

#[test]
fn event_times_match_realtime_monotonic() {
    common::clock_test(tape::ClockChoice::Monotonic, stamp);
}
