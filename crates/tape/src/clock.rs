//! The trace clock: what an event's timestamp counts, and how it maps to
//! wall-clock time.
//!
//! * **x86_64 with an invariant TSC** (CPUID leaf 0x8000_0007, EDX bit 8: the
//!   TSC ticks at a constant rate in every P-/C-state and is synchronised
//!   across cores): timestamps are raw `rdtsc` values, about 20-35 cycles,
//!   no syscall, no vDSO call.
//! * **aarch64**: the virtual counter `CNTVCT_EL0`.
//! * **otherwise** (or with `TAPE_TRACE_CLOCK=monotonic`):
//!   `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds (vDSO, no syscall).
//!
//! The source is chosen once, before the first ring exists, and never
//! changes, so every timestamp of a process counts the same thing.
//!
//! **Calibration.** At start-up an *anchor* pairs a counter value with
//! `CLOCK_MONOTONIC`. When a trace is saved, a second pair is taken (waiting,
//! if needed, until [`MIN_CALIBRATION`] has passed since the anchor) and the
//! frequency is the ratio of the two spans: with each pair bracketed to
//! ~50 ns, a 200 ms span bounds the error near 0.5 ppm, and it shrinks as
//! the program runs. The offset comes from a pair with `CLOCK_REALTIME` taken
//! at save time, so the times babeltrace2 prints are wall-clock times. The
//! CTF clock is written as
//!
//! ```text
//! ns since epoch = offset_s * 1e9 + (offset + value) * 1e9 / freq
//! ```
//!
//! with `offset_s` the whole seconds of the realtime of counter value 0 and
//! `offset` the remaining fraction of a second in cycles (both >= 0, since
//! babeltrace2 2.0.4 rejects a negative `offset`).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Shortest span between the anchor and the calibration pair of a save.
pub const MIN_CALIBRATION: Duration = Duration::from_millis(200);

/// Which counter timestamps come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// The x86_64 time-stamp counter (invariant TSC only).
    Tsc,
    /// The aarch64 virtual counter.
    VirtualCounter,
    /// `CLOCK_MONOTONIC` in nanoseconds.
    Monotonic,
}

impl ClockSource {
    /// Name written in the trace (`env.clock_source`, clock description).
    pub fn name(self) -> &'static str {
        match self {
            ClockSource::Tsc => "tsc",
            ClockSource::VirtualCounter => "cntvct",
            ClockSource::Monotonic => "monotonic",
        }
    }
}

const UNSET: u8 = 0;
const TSC: u8 = 1;
const CNTVCT: u8 = 2;
const MONOTONIC: u8 = 3;

/// The chosen source; written once by [`init`] before any ring exists
/// (rings are created after `init`, in the same thread or after the
/// registry's lock), read relaxed by [`now`].
static SOURCE: AtomicU8 = AtomicU8::new(UNSET);

static ANCHOR: OnceLock<Pair> = OnceLock::new();

/// A counter value and a clock reading taken at (nearly) the same instant.
#[derive(Clone, Copy, Debug)]
struct Pair {
    counter: u64,
    ns: i128,
}

/// Chooses the source (once) and takes the anchor. `prefer_monotonic`
/// forces the fallback (for `TAPE_TRACE_CLOCK=monotonic`); it has effect
/// only on the first call.
pub(crate) fn init(prefer_monotonic: bool) -> ClockSource {
    ANCHOR.get_or_init(|| {
        let s = if prefer_monotonic {
            MONOTONIC
        } else {
            detect()
        };
        SOURCE.store(s, Ordering::Relaxed);
        pair(libc::CLOCK_MONOTONIC)
    });
    source()
}

/// The source in use (chosen by `tape::init` or the first ring).
pub fn source() -> ClockSource {
    match SOURCE.load(Ordering::Relaxed) {
        TSC => ClockSource::Tsc,
        CNTVCT => ClockSource::VirtualCounter,
        _ => ClockSource::Monotonic,
    }
}

fn detect() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        if invariant_tsc() {
            TSC
        } else {
            MONOTONIC
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        CNTVCT
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        MONOTONIC
    }
}

/// Whether the CPU reports an invariant TSC (CPUID leaf 0x8000_0007, EDX bit 8).
#[cfg(target_arch = "x86_64")]
pub fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x8000_0000 returns the
    // highest extended leaf, and we only query 0x8000_0007 if it exists.
    #[allow(unused_unsafe)]
    let max_ext = unsafe { __cpuid(0x8000_0000) }.eax;
    if max_ext < 0x8000_0007 {
        return false;
    }
    // SAFETY: leaf 0x8000_0007 is supported (checked above).
    #[allow(unused_unsafe)]
    let edx = unsafe { __cpuid(0x8000_0007) }.edx;
    edx & (1 << 8) != 0
}

/// The current counter value: the timestamp of an event.
#[inline(always)]
pub fn now() -> u64 {
    if reads_counter() {
        counter()
    } else {
        monotonic_ns()
    }
}

/// Whether [`now`] reads the CPU's counter (the TSC, CNTVCT_EL0): one
/// instruction, no call. The emit path's leaf records only then; with the
/// fallback clock every event takes its out-of-line path.
#[inline(always)]
pub(crate) fn reads_counter() -> bool {
    let s = SOURCE.load(Ordering::Relaxed);
    (cfg!(target_arch = "x86_64") && s == TSC) || (cfg!(target_arch = "aarch64") && s == CNTVCT)
}

/// The CPU's counter, read inline: what [`now`] returns when
/// [`reads_counter`]; on other CPUs the fallback clock.
#[inline(always)]
pub(crate) fn counter() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC is available on every x86_64 CPU and has no
        // preconditions.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: CNTVCT_EL0 is readable from EL0 on Linux (the kernel
        // enables it for the vDSO); the instruction has no side effects.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        monotonic_ns()
    }
}

/// `clock_gettime(clock)` in nanoseconds.
fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used here
    // (MONOTONIC, REALTIME, BOOTTIME) always exist on Linux, so the call
    // cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// Out of line and cold: the fallback's call to `clock_gettime` would
/// otherwise make every emit save registers around it, TSC or not.
#[cold]
#[inline(never)]
fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) as u64
}

/// The wall-clock time now, in nanoseconds since the epoch.
pub fn realtime_ns() -> i128 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `CLOCK_REALTIME` minus `clock` now, in nanoseconds (of several tries,
/// the one whose realtime readings around the `clock` read are closest):
/// written in a trace's `env` (`tape_realtime_minus_boottime_ns`, ...) so
/// a reader can put its times on the system's other clocks (the Perfetto
/// export's clock snapshot).
pub(crate) fn realtime_minus(clock: libc::clockid_t) -> i128 {
    let mut best = (i128::MAX, 0);
    for _ in 0..16 {
        let a = clock_ns(libc::CLOCK_REALTIME);
        let c = clock_ns(clock);
        let b = clock_ns(libc::CLOCK_REALTIME);
        if b - a < best.0 {
            best = (b - a, a + (b - a) / 2 - c);
        }
    }
    best.1
}

/// A counter value paired with `clock`: of several tries, the one whose
/// clock readings before and after the counter read are closest.
fn pair(clock: libc::clockid_t) -> Pair {
    pair_with(now, clock)
}

/// [`pair`] with the counter `read`.
fn pair_with(read: impl Fn() -> u64, clock: libc::clockid_t) -> Pair {
    let mut best = (i128::MAX, Pair { counter: 0, ns: 0 });
    for _ in 0..16 {
        let a = clock_ns(clock);
        let c = read();
        let b = clock_ns(clock);
        if b - a < best.0 {
            best = (
                b - a,
                Pair {
                    counter: c,
                    ns: a + (b - a) / 2,
                },
            );
        }
    }
    best.1
}

/// The source's code (its number in a process file: 1 tsc, 2 cntvct, 3
/// monotonic).
pub(crate) fn source_code() -> u8 {
    match source() {
        ClockSource::Tsc => TSC,
        ClockSource::VirtualCounter => CNTVCT,
        ClockSource::Monotonic => MONOTONIC,
    }
}

/// The anchor: (counter, `CLOCK_MONOTONIC` ns).
pub(crate) fn anchor() -> (u64, i128) {
    let a = *ANCHOR.get_or_init(|| pair(libc::CLOCK_MONOTONIC));
    (a.counter, a.ns)
}

/// A counter value paired with `CLOCK_MONOTONIC` now.
pub(crate) fn monotonic_pair() -> (u64, i128) {
    let p = pair(libc::CLOCK_MONOTONIC);
    (p.counter, p.ns)
}

/// A counter value paired with `CLOCK_REALTIME` now.
pub(crate) fn realtime_pair() -> (u64, i128) {
    let p = pair(libc::CLOCK_REALTIME);
    (p.counter, p.ns)
}

/// The counter of source `code` (of another process: a recovery), read
/// in this process, if this machine has it: (counter, monotonic ns) and
/// (counter, realtime ns) now.
pub fn pairs_of_source(code: u8) -> Option<((u64, i128), (u64, i128))> {
    let read: fn() -> u64 = match code {
        MONOTONIC => monotonic_ns,
        #[cfg(target_arch = "x86_64")]
        TSC if invariant_tsc() => || {
            // SAFETY: RDTSC is available on every x86_64 CPU.
            #[allow(unused_unsafe)]
            unsafe {
                core::arch::x86_64::_rdtsc()
            }
        },
        #[cfg(target_arch = "aarch64")]
        CNTVCT => || {
            let v: u64;
            // SAFETY: as in `now`.
            unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
            v
        },
        _ => return None,
    };
    let m = pair_with(read, libc::CLOCK_MONOTONIC);
    let r = pair_with(read, libc::CLOCK_REALTIME);
    Some(((m.counter, m.ns), (r.counter, r.ns)))
}

/// The frequency (Hz) of a counter read at two instants of
/// `CLOCK_MONOTONIC`, if they are apart.
pub fn frequency(from: (u64, i128), to: (u64, i128)) -> Option<u64> {
    let span = to.1 - from.1;
    if span <= 0 || to.0 <= from.0 {
        return None;
    }
    let cycles = i128::from(to.0 - from.0);
    u64::try_from((cycles * 1_000_000_000 + span / 2) / span)
        .ok()
        .filter(|&f| f > 0)
}

/// The CTF clock description of the trace being saved now.
pub(crate) fn ctf_clock() -> tape_ctf_model::Clock {
    let freq = frequency_hz();
    let rt = pair(libc::CLOCK_REALTIME);
    let (offset_s, offset) = offsets(rt.counter, rt.ns, freq);
    clock_description(freq, offset_s, offset)
}

/// The counter's frequency (Hz), measured against `CLOCK_MONOTONIC` since
/// the anchor (waiting for the calibration span if it is not past yet).
pub(crate) fn frequency_hz() -> u64 {
    let anchor = *ANCHOR.get_or_init(|| pair(libc::CLOCK_MONOTONIC));
    if source() == ClockSource::Monotonic {
        1_000_000_000
    } else {
        let elapsed = clock_ns(libc::CLOCK_MONOTONIC) - anchor.ns;
        let min = MIN_CALIBRATION.as_nanos() as i128;
        if elapsed < min {
            std::thread::sleep(Duration::from_nanos((min - elapsed) as u64));
        }
        let p = pair(libc::CLOCK_MONOTONIC);
        let cycles = i128::from(p.counter.wrapping_sub(anchor.counter));
        ((cycles * 1_000_000_000 + (p.ns - anchor.ns) / 2) / (p.ns - anchor.ns)) as u64
    }
}

/// The CTF description of tape's clock with these values.
pub fn clock_description(freq: u64, offset_s: i64, offset: i64) -> tape_ctf_model::Clock {
    let mut c = tape_ctf_model::Clock::new("tape", freq);
    c.description = Some(format!(
        "tape trace clock ({}), calibrated against CLOCK_MONOTONIC, offset from CLOCK_REALTIME",
        source().name()
    ));
    c.offset_s = offset_s;
    c.offset = offset;
    c.absolute = true;
    c.precision = 1;
    c
}

/// The clock's frequency and offsets (freq, offset_s, offset) now, for the
/// crash dump: as [`ctf_clock`] computes them, but without waiting for the
/// calibration span and without allocating (a signal handler calls it).
pub(crate) fn crash_clock() -> (u64, i64, i64) {
    let freq = match ANCHOR.get() {
        _ if source() == ClockSource::Monotonic => 1_000_000_000,
        None => 1_000_000_000,
        Some(anchor) => {
            let p = pair(libc::CLOCK_MONOTONIC);
            let span = p.ns - anchor.ns;
            if span <= 0 {
                1_000_000_000
            } else {
                let cycles = i128::from(p.counter.wrapping_sub(anchor.counter));
                ((cycles * 1_000_000_000 + span / 2) / span).max(1) as u64
            }
        }
    };
    let rt = pair(libc::CLOCK_REALTIME);
    let (offset_s, offset) = offsets(rt.counter, rt.ns, freq);
    (freq, offset_s, offset)
}

/// The CTF clock offsets so that `counter` maps to `realtime_ns`:
/// `offset_s` whole seconds and `offset` cycles (both >= 0 when the
/// realtime of counter 0 is after the epoch).
pub fn offsets(counter: u64, realtime_ns: i128, freq: u64) -> (i64, i64) {
    let f = i128::from(freq);
    // Realtime of counter value 0, scaled by freq (ns * Hz), exact.
    let base = realtime_ns * f - i128::from(counter) * 1_000_000_000;
    let offset_s = base.div_euclid(f * 1_000_000_000);
    let rest = base - offset_s * f * 1_000_000_000; // in [0, f * 1e9)
    let offset = (rest + 500_000_000) / 1_000_000_000;
    (offset_s as i64, offset as i64)
}

/// The civil date and time, UTC, of `secs` since the epoch: year, month,
/// day, hour, minute, second (Howard Hinnant's inverse of
/// `days_from_civil`). Arithmetic only: the crash dump calls it from a
/// signal handler.
pub fn civil_utc(secs: i64) -> [i64; 6] {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    [y, m, d, rem / 3600, rem / 60 % 60, rem % 60]
}

/// Converts a counter value to nanoseconds since the epoch with a clock
/// description (what a CTF reader computes).
pub fn to_realtime_ns(clock: &tape_ctf_model::Clock, value: u64) -> i128 {
    let f = i128::from(clock.freq);
    i128::from(clock.offset_s) * 1_000_000_000
        + (i128::from(clock.offset) + i128::from(value)) * 1_000_000_000 / f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip() {
        // (counter, realtime ns, freq)
        let cases = [
            (0u64, 1_700_000_000_123_456_789i128, 1_000_000_000u64),
            (123_456_789_012, 1_700_000_000_000_000_000, 2_800_000_000),
            (u64::MAX / 4, 1_800_000_000_999_999_999, 3_000_000_001),
            (5, 1_000_000_000, 1_000_000_000),
        ];
        for (counter, rt, freq) in cases {
            let (s, o) = offsets(counter, rt, freq);
            assert!(o >= 0 && (o as u64) < freq, "offset {o} out of range");
            let mut c = tape_ctf_model::Clock::new("t", freq);
            c.offset_s = s;
            c.offset = o;
            let back = to_realtime_ns(&c, counter);
            assert!((back - rt).abs() <= 1, "{counter} {rt} {freq}: got {back}");
        }
    }

    #[test]
    fn calibrated_frequency_is_plausible() {
        init(false);
        let c = ctf_clock();
        let a = now();
        let t0 = clock_ns(libc::CLOCK_MONOTONIC);
        std::thread::sleep(Duration::from_millis(20));
        let b = now();
        let t1 = clock_ns(libc::CLOCK_MONOTONIC);
        let measured = (b - a) as f64 * 1e9 / (t1 - t0) as f64;
        let err = (measured - c.freq as f64).abs() / c.freq as f64;
        assert!(err < 1e-3, "freq {} vs {measured}", c.freq);
    }
}
