//! Emit-path benchmark: what a tracepoint costs, in TSC ticks and
//! nanoseconds per event, next to baseline rows measured in the same run.
//!
//! ```text
//! cargo bench -p tape --bench emit              # every row (~10 s)
//! cargo bench -p tape --bench emit -- discard   # rows whose name contains "discard"
//! ```
//!
//! The baseline rows (empty loop, bare `rdtsc`, bare relaxed load) always
//! run, whatever the filter, since the other rows are read against them.
//! Without `--bench` (which `cargo bench` passes; `cargo test --benches`
//! does not) every row runs a few short samples only, as a smoke test.
//!
//! # Method
//!
//! A row measures one operation (an [`Op`]). A sample times `Plan::iters`
//! operations in a loop unrolled `UNROLL` times, with `rdtsc` and
//! [`Instant`] read before and after; a row takes one warm-up sample and
//! then `Plan::reps` samples, and reports the median and the minimum ticks
//! per operation. The empty-loop row runs the same unrolled loop around an
//! empty operation, so its cost is the loop overhead included in every other
//! row (not subtracted). Ticks are converted to nanoseconds with the TSC
//! rate measured over every sample of the run (ticks over `Instant` time).
//! Arguments go through [`black_box`] so the compiler cannot hoist them out
//! of the loop. The machine's load from other processes and the hypervisor's
//! steal time during the run are printed with the results: medians resist
//! noise, but not a machine that is busy all along.
//!
//! Overwrite rows emit on the main thread into a 1 MiB ring (the default
//! geometry: 16 packets of 64 KiB) that keeps cycling, so packet switches
//! are included at their real rate. Discard rows run on a fresh thread
//! whose ring is large enough for all their samples, so no event is dropped;
//! the "ring full" rows run on a thread whose small ring is already full, so
//! every event is dropped and counted: that is the cost of a drop. The drop
//! counters are checked after each row and printed under the table. (Rings
//! of exited threads stay allocated until a save, so the run ends holding
//! about 250 MB of rings.)
//!
//! The two-thread row runs the enabled `u64` loop on two threads at once,
//! each with its own ring, next to a bare `rdtsc` on two threads at once:
//! on a virtual machine the counter read itself may slow down when both
//! vCPUs run, and that is not tape's doing.
//!
//! The output is Markdown, ready to paste into `benches/RESULTS.md`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use tape::Mode;

tape::tracepoint! {
    /// One `u64` field.
    pub fn bench_u64(v: u64) = "bench.emit.u64";
    /// Three `u64` fields and a string.
    pub fn bench_mixed(a: u64, b: u64, c: u64, s: &str) = "bench.emit.mixed";
    /// Never enabled: the disabled rows.
    pub fn bench_off(v: u64) = "bench.emit.off";
    /// Never enabled: the disabled rows.
    pub fn bench_off_mixed(a: u64, b: u64, c: u64, s: &str) = "bench.emit.off_mixed";
    /// A 64-byte sequence: 16 `u32`.
    pub fn bench_seq(v: &[u32]) = "bench.emit.seq";
    /// An enum (u8 repr).
    pub fn bench_enum(op: BenchOp) = "bench.emit.enum";
    /// A nested struct of four fields.
    pub fn bench_struct(hdr: &BenchHdr) = "bench.emit.struct";
    /// Not recording; a typed probe attached.
    pub fn bench_probe_typed(v: u64) = "bench.probe.typed";
    /// Recording, and a typed probe attached.
    pub fn bench_probe_recorded(v: u64) = "bench.probe.recorded";
    /// Not recording; an untyped probe attached that reads the view's
    /// timestamp and payload size.
    pub fn bench_probe_untyped(v: u64) = "bench.probe.untyped";
    /// Not recording; an untyped probe attached that decodes a field by name.
    pub fn bench_probe_field(v: u64) = "bench.probe.field";
    /// Filtered: `v > 10` (matches) / `v < 10` (does not).
    pub fn bench_filter_match(v: u64) = "bench.filter.match";
    /// Filtered: `v < 10`, which 42 does not match.
    pub fn bench_filter_miss(v: u64) = "bench.filter.miss";
    /// Filtered with three comparisons, matching.
    pub fn bench_filter3_match(a: u64, b: u64, c: u64, s: &str) = "bench.filter.match3";
    /// Filtered with three comparisons, not matching (the last fails).
    pub fn bench_filter3_miss(a: u64, b: u64, c: u64, s: &str) = "bench.filter.miss3";
    /// Filtered with three integer comparisons, the last failing.
    pub fn bench_filter3_int_miss(a: u64, b: u64, c: u64, s: &str) = "bench.filter.miss3int";
    /// Filtered with one string glob, failing.
    pub fn bench_filter_glob_miss(a: u64, b: u64, c: u64, s: &str) = "bench.filter.missglob";
    /// Recording, with a trigger that does not fire: `traceoff if v > 1000`.
    pub fn bench_trigger_recorded(v: u64) = "bench.trigger.recorded";
    /// Not recording (the trigger alone makes it active, "soft mode"),
    /// with `traceoff if v > 1000`: encoded on the stack to be tested.
    pub fn bench_trigger_soft(v: u64) = "bench.trigger.soft";
    /// Recording, with `traceon` (no condition; tracing is on, so it has
    /// nothing to do).
    pub fn bench_trigger_idle(v: u64) = "bench.trigger.idle";
    /// The fields of `bench_mixed`, in a class with a read-time format.
    #[format("a={a} b={b:#x} c={c:08} s={s}")]
    pub class bench_class(a: u64, b: u64, c: u64, s: &str) {
        pub fn bench_formatted = "bench.emit.formatted";
    }
}

/// The enum of the enum row.
#[derive(Clone, Copy, tape::Enum)]
#[repr(u8)]
pub enum BenchOp {
    /// A read.
    Read = 1,
    /// A write.
    Write = 2,
}

/// The struct of the nested-struct row: 15 bytes.
#[derive(Clone, Copy, tape::Fields)]
pub struct BenchHdr {
    len: u16,
    op: BenchOp,
    id: u32,
    ts: u64,
}

/// The sequence of the sequence row: 64 bytes.
static SEQ64: [u32; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// The string argument of the mixed rows: 16 bytes.
const STR16: &str = "0123456789abcdef";

/// Encoded size of a `bench_u64` event: 10-byte header + 8.
const U64_EVENT: usize = 10 + 8;
/// Encoded size of a `bench_mixed` event: header + 3 * 8 + 16 + NUL.
const MIXED_EVENT: usize = 10 + 24 + 17;

/// Ring of the overwrite rows (the library's default).
const OVERWRITE_RING: usize = 1 << 20;
/// Ring of the "ring full" rows: small, so it fills at once.
const FULL_RING: usize = 64 << 10;

/// Times each operation is written out in the timed loop.
const UNROLL: u64 = 8;

/// The word read by the relaxed-load baseline.
static WORD: AtomicU64 = AtomicU64::new(0);

/// The counter the ticks come from, and the name of its baseline row.
#[cfg(target_arch = "x86_64")]
const COUNTER: &str = "rdtsc";
#[cfg(not(target_arch = "x86_64"))]
const COUNTER: &str = "tape::clock::now()";

/// The time-stamp counter (`tape::clock::now()`, the virtual counter or the
/// monotonic clock, off x86_64).
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86_64 CPU and has no preconditions.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        tape::clock::now()
    }
}

/// How much to measure.
#[derive(Clone, Copy)]
struct Plan {
    /// Operations per sample, a multiple of `UNROLL`.
    iters: u64,
    /// Samples per row (after one warm-up sample).
    reps: usize,
}

/// `cargo bench`.
const FULL: Plan = Plan {
    iters: 1 << 21,
    reps: 21,
};

/// `cargo test --benches`: a smoke test.
const QUICK: Plan = Plan {
    iters: 1 << 12,
    reps: 3,
};

/// The operation a row measures. `run` is `#[inline(always)]` and called
/// as `O::run()`, so the loop of `timed_loop::<O>` contains it inlined (a
/// closure or fn item called through `Fn::call` may stay a call when its
/// body is large, adding a call and six register saves per operation).
trait Op: Copy + Send + Sync {
    fn run();
}

macro_rules! ops {
    ($($(#[$doc:meta])* $name:ident => $body:block)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy)]
        struct $name;
        impl Op for $name {
            #[inline(always)]
            fn run() $body
        }
    )*};
}

ops! {
    /// The empty-loop baseline: nothing but a compiler barrier, which keeps
    /// the loop (and emits no instruction).
    Empty => { black_box(()); }
    /// The counter-read baseline.
    Ticks => { black_box(ticks()); }
    /// The relaxed-load baseline: the load a disabled tracepoint does.
    RelaxedLoad => { black_box(black_box(&WORD).load(Ordering::Relaxed)); }
    /// A disabled tracepoint.
    Disabled => { bench_off(black_box(42)); }
    /// A disabled tracepoint with the arguments of `Mixed`: what passing
    /// them through `black_box` costs in this loop.
    DisabledMixed => {
        bench_off_mixed(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// A `u64` event.
    U64 => { bench_u64(black_box(42)); }
    /// A filter that matches.
    FilterMatch => { bench_filter_match(black_box(42)); }
    /// A filter that does not match.
    FilterMiss => { bench_filter_miss(black_box(42)); }
    /// Three comparisons, matching.
    Filter3Match => {
        bench_filter3_match(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// Three comparisons, the last failing.
    Filter3Miss => {
        bench_filter3_miss(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// A trigger whose condition is false, recording.
    TriggerRecorded => { bench_trigger_recorded(black_box(42)); }
    /// A trigger whose condition is false, not recording.
    TriggerSoft => { bench_trigger_soft(black_box(42)); }
    /// A trigger with nothing to do, recording.
    TriggerIdle => { bench_trigger_idle(black_box(42)); }
    /// Three integer comparisons, the last failing.
    Filter3IntMiss => {
        bench_filter3_int_miss(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// One glob, failing.
    FilterGlobMiss => {
        bench_filter_glob_miss(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// A typed probe, not recording.
    ProbeTyped => { bench_probe_typed(black_box(42)); }
    /// Recording plus a typed probe.
    ProbeRecorded => { bench_probe_recorded(black_box(42)); }
    /// An untyped probe (view only), not recording.
    ProbeUntyped => { bench_probe_untyped(black_box(42)); }
    /// An untyped probe decoding a field, not recording.
    ProbeField => { bench_probe_field(black_box(42)); }
    /// A 3 x `u64` + 16-byte `&str` event.
    Mixed => {
        bench_mixed(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// The same fields, an event of a class with a format.
    Formatted => {
        bench_formatted(black_box(1), black_box(2), black_box(3), black_box(STR16));
    }
    /// A 64-byte `&[u32]` sequence.
    Seq => { bench_seq(black_box(&SEQ64[..])); }
    /// An enum.
    EnumOp => { bench_enum(black_box(BenchOp::Write)); }
    /// A nested struct.
    Nested => {
        bench_struct(&black_box(BenchHdr { len: 60, op: BenchOp::Read, id: 7, ts: 42 }));
    }
}

/// One timed loop.
#[derive(Clone, Copy)]
struct Sample {
    ticks: u64,
    ns: u64,
    /// `Instant`s around the loop, for the overlap of the two-thread row.
    start: Instant,
    end: Instant,
}

/// Runs `op` `iters` times, unrolled `UNROLL` times. Not inlined, so each
/// row's loop is a separate function in the disassembly (search for
/// `emit::timed_loop`).
#[inline(never)]
fn timed_loop<O: Op>(iters: u64, _: O) -> Sample {
    let start = Instant::now();
    let t0 = ticks();
    for _ in 0..iters / UNROLL {
        O::run();
        O::run();
        O::run();
        O::run();
        O::run();
        O::run();
        O::run();
        O::run();
    }
    let t1 = ticks();
    let end = Instant::now();
    Sample {
        ticks: t1.wrapping_sub(t0),
        ns: end.duration_since(start).as_nanos() as u64,
        start,
        end,
    }
}

/// A warm-up loop, then `reps` timed loops.
fn sample<O: Op>(iters: u64, reps: usize, op: O) -> Vec<Sample> {
    timed_loop(iters, op);
    (0..reps).map(|_| timed_loop(iters, op)).collect()
}

/// Runs `work` on a new thread whose ring (created before `work` starts)
/// has `ring` bytes.
fn on_fresh_thread<T: Send>(ring: usize, work: impl FnOnce() -> T + Send) -> T {
    tape::config::set_buffer_size(ring, None).expect("ring size");
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            tape::register_thread();
            work()
        })
        .join()
        .expect("bench thread")
    });
    tape::config::set_buffer_size(OVERWRITE_RING, None).expect("ring size");
    out
}

/// Operations per sample of the discard rows that must not fill their
/// (default-sized) ring: three quarters of it, in the larger event.
fn discard_iters(plan: Plan) -> u64 {
    let fit = (OVERWRITE_RING * 3 / 4 / MIXED_EVENT) as u64 / UNROLL * UNROLL;
    fit.min(plan.iters)
}

/// Events dropped so far because a ring was full.
fn dropped_full() -> u64 {
    tape::stats().drops.full
}

/// A measured row.
struct Row {
    name: String,
    /// Ticks per operation, sorted.
    per_op: Vec<f64>,
}

impl Row {
    fn median(&self) -> f64 {
        let v = &self.per_op;
        let m = v.len() / 2;
        if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        }
    }

    fn min(&self) -> f64 {
        self.per_op[0]
    }
}

/// The run: its plan, filters, rows and notes.
struct Bench {
    plan: Plan,
    filters: Vec<String>,
    rows: Vec<Row>,
    notes: Vec<String>,
    /// TSC ticks and `Instant` nanoseconds summed over every sample.
    total_ticks: u128,
    total_ns: u128,
}

impl Bench {
    /// Whether a row (or group of rows) is selected by the filters.
    fn wants(&self, name: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| name.contains(f.as_str()))
    }

    /// Records a row from its samples.
    fn add(&mut self, name: &str, iters: u64, samples: &[Sample]) {
        let mut per_op: Vec<f64> = samples
            .iter()
            .map(|s| s.ticks as f64 / iters as f64)
            .collect();
        per_op.sort_by(f64::total_cmp);
        for s in samples {
            self.total_ticks += u128::from(s.ticks);
            self.total_ns += u128::from(s.ns);
        }
        self.rows.push(Row {
            name: name.to_owned(),
            per_op,
        });
    }

    /// Measures `op` on the calling thread, if selected.
    fn row<O: Op>(&mut self, name: &str, op: O) {
        if self.wants(name) {
            let s = sample(self.plan.iters, self.plan.reps, op);
            self.add(name, self.plan.iters, &s);
        }
    }

    fn ticks_of(&self, name: &str) -> Option<f64> {
        self.rows.iter().find(|r| r.name == name).map(Row::median)
    }

    /// Measured TSC rate in GHz (ticks per nanosecond).
    fn ghz(&self) -> f64 {
        self.total_ticks as f64 / self.total_ns.max(1) as f64
    }

    /// A drop-counter check for the notes.
    fn check_drops(&mut self, name: &str, dropped: u64, expected: u64) {
        let ok = dropped == expected;
        let line = format!(
            "{}{name}: {dropped} events dropped as `full`, {expected} expected",
            if ok { "" } else { "**WARNING** " }
        );
        if !ok {
            eprintln!("{line}");
        }
        self.notes.push(line);
    }

    /// Measures `op` on two threads at once (each with its own ring), their
    /// samples pooled, and notes the ratio to the one-thread row `single`.
    fn two_threads<O: Op>(&mut self, name: &str, single: &str, op: O) {
        let (iters, reps) = (self.plan.iters, self.plan.reps);
        let barrier = Barrier::new(2);
        let per_thread: Vec<Vec<Sample>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        tape::register_thread();
                        barrier.wait();
                        timed_loop(iters, op);
                        (0..reps)
                            .map(|_| {
                                barrier.wait();
                                timed_loop(iters, op)
                            })
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("bench thread"))
                .collect()
        });
        // How much of the longer loop ran while the other one did too.
        let mut overlap: Vec<f64> = per_thread[0]
            .iter()
            .zip(&per_thread[1])
            .map(|(x, y)| {
                let both = x
                    .end
                    .min(y.end)
                    .saturating_duration_since(x.start.max(y.start));
                let longest = (x.end - x.start).max(y.end - y.start);
                both.as_secs_f64() / longest.as_secs_f64().max(1e-12)
            })
            .collect();
        overlap.sort_by(f64::total_cmp);
        self.add(name, iters, &per_thread.concat());
        let pair = |n: &str| {
            self.rows
                .iter()
                .find(|r| r.name == n)
                .map(|r| (r.median(), r.min()))
        };
        let ratio = match (pair(name), pair(single)) {
            (Some(two), Some(one)) => format!(
                "{:.2}x the 1-thread row by median, {:.2}x by min",
                two.0 / one.0,
                two.1 / one.1
            ),
            _ => "the 1-thread row was not measured".to_owned(),
        };
        self.notes.push(format!(
            "{name}: {ratio}; the two loops overlapped {:.0}% of the time (median of {} \
             samples; both threads' samples are pooled in the row)",
            overlap[overlap.len() / 2] * 100.0,
            overlap.len(),
        ));
    }

    /// Measures `op` in discard mode, each sample on a fresh thread with a
    /// fresh default-sized ring that the sample does not fill.
    fn discard_fresh_row<O: Op>(&mut self, name: &str, iters: u64, op: O) {
        if !self.wants(name) {
            return;
        }
        let before = dropped_full();
        let samples: Vec<Sample> = (0..=self.plan.reps)
            .map(|_| on_fresh_thread(OVERWRITE_RING, || timed_loop(iters, op)))
            .skip(1) // the first is the warm-up
            .collect();
        self.add(name, iters, &samples);
        self.check_drops(name, dropped_full() - before, 0);
    }

    /// Measures `op` in discard mode on a fresh thread with a ring of `ring`
    /// bytes, after `fill` untimed calls; every timed event must be dropped
    /// (`drops`) or none.
    fn discard_row<O: Op>(
        &mut self,
        name: &str,
        ring: usize,
        fill: u64,
        iters: u64,
        drops: bool,
        op: O,
    ) {
        if !self.wants(name) {
            return;
        }
        let reps = self.plan.reps;
        let (samples, dropped) = on_fresh_thread(ring, || {
            timed_loop(fill.next_multiple_of(UNROLL), op);
            let before = dropped_full();
            let samples = sample(iters, reps, op);
            (samples, dropped_full() - before)
        });
        self.add(name, iters, &samples);
        let expected = if drops { iters * (reps as u64 + 1) } else { 0 };
        self.check_drops(name, dropped, expected);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; other flags are ignored; any other
    // argument is a filter on row names.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan = if args.iter().any(|a| a == "--bench") {
        FULL
    } else {
        QUICK
    };
    let filters = args.into_iter().filter(|a| !a.starts_with('-')).collect();
    let guard = tape::Config::new()
        .dir(std::env::temp_dir())
        .buffer_size(OVERWRITE_RING)
        .init()
        .expect("tape init");
    tape::enable("bench.emit.u64").expect("enable");
    tape::enable("bench.emit.mixed").expect("enable");
    for name in ["seq", "enum", "struct", "formatted"] {
        tape::enable(&format!("bench.emit.{name}")).expect("enable");
    }
    let mut b = Bench {
        plan,
        filters,
        rows: Vec::new(),
        notes: Vec::new(),
        total_ticks: 0,
        total_ns: 0,
    };
    let rdtsc_row = format!("bare {COUNTER} (baseline)");
    let cpu_before = cpu_times();

    // Baselines: always measured.
    let all = std::mem::take(&mut b.filters);
    b.row("empty loop (baseline)", Empty);
    b.row(&rdtsc_row, Ticks);
    b.row("bare relaxed load of an AtomicU64 (baseline)", RelaxedLoad);
    b.filters = all;

    b.row("disabled tracepoint, u64", Disabled);
    b.row("disabled tracepoint, 3 x u64 + 16-byte &str", DisabledMixed);

    // Overwrite mode, main thread, ring cycling.
    tape::register_thread();
    let (before, rows_before) = (dropped_full(), b.rows.len());
    let u64_overwrite = "enabled, u64, overwrite";
    b.row(u64_overwrite, U64);
    b.row("enabled, 3 x u64 + 16-byte &str, overwrite", Mixed);
    b.row(
        "enabled, 3 x u64 + 16-byte &str, class event with a format, overwrite",
        Formatted,
    );
    b.row("enabled, 64-byte &[u32] sequence, overwrite", Seq);
    b.row("enabled, enum (u8), overwrite", EnumOp);
    b.row(
        "enabled, nested struct (u16, enum, u32, u64), overwrite",
        Nested,
    );
    if b.rows.len() > rows_before {
        let dropped = dropped_full() - before;
        b.check_drops("overwrite rows", dropped, 0);
    }

    // Event filters (the cold path of a tracepoint with a filter).
    tape::enable_pattern("bench.filter.*").expect("enable");
    tape::filter::set("bench.filter.match", "v > 10").expect("filter");
    tape::filter::set("bench.filter.miss", "v < 10").expect("filter");
    tape::filter::set("bench.filter.match3", "a > 0 && c != 7 && s ~ \"0123*\"").expect("filter");
    tape::filter::set("bench.filter.miss3", "a > 0 && c != 7 && s ~ \"x*\"").expect("filter");
    b.row("filter matches (1 comparison), u64, overwrite", FilterMatch);
    b.row("filter does not match (1 comparison), u64", FilterMiss);
    b.row(
        "filter matches (3 comparisons), 3 x u64 + 16-byte &str, overwrite",
        Filter3Match,
    );
    b.row(
        "filter does not match (3 comparisons), 3 x u64 + 16-byte &str",
        Filter3Miss,
    );
    tape::filter::set("bench.filter.miss3int", "a > 0 && c != 7 && b > 100").expect("filter");
    tape::filter::set("bench.filter.missglob", "s ~ \"x*\"").expect("filter");
    b.row(
        "filter does not match (3 integer comparisons), 3 x u64 + 16-byte &str",
        Filter3IntMiss,
    );
    b.row(
        "filter does not match (1 string glob), 3 x u64 + 16-byte &str",
        FilterGlobMiss,
    );

    // Triggers that do not fire (the cold path of a tracepoint with a
    // trigger).
    tape::enable("bench.trigger.recorded").expect("enable");
    tape::enable("bench.trigger.idle").expect("enable");
    tape::trigger::set("bench.trigger.recorded", "traceoff if v > 1000").expect("trigger");
    tape::trigger::set("bench.trigger.soft", "traceoff if v > 1000").expect("trigger");
    tape::trigger::set("bench.trigger.idle", "traceon").expect("trigger");
    b.row(
        "trigger that does not fire (traceoff if v > 1000), recording, u64, overwrite",
        TriggerRecorded,
    );
    b.row(
        "trigger that does not fire, not recording (soft mode), u64",
        TriggerSoft,
    );
    b.row(
        "trigger with nothing to do (traceon while on), recording, u64, overwrite",
        TriggerIdle,
    );
    assert!(tape::registry::tracing_on(), "no trigger fired");

    // Probes (the cold path of a tracepoint with probes attached).
    static PROBE_SUM: AtomicU64 = AtomicU64::new(0);
    let probes = [
        bench_probe_typed::attach(|v| {
            black_box(*v);
        }),
        bench_probe_recorded::attach(|v| {
            black_box(*v);
        }),
    ];
    let untyped = [
        tape::probe::attach("bench.probe.untyped", |e| {
            black_box((e.timestamp(), e.payload().len()));
        })
        .expect("attach"),
        tape::probe::attach("bench.probe.field", |e| {
            if let Some(v) = e.field("v").and_then(|v| v.as_u64()) {
                PROBE_SUM.fetch_add(v, Ordering::Relaxed);
            }
        })
        .expect("attach"),
    ];
    tape::enable("bench.probe.recorded").expect("enable");
    b.row("typed probe attached, not recording, u64", ProbeTyped);
    b.row("recording + one typed probe, u64, overwrite", ProbeRecorded);
    b.row(
        "untyped probe attached (timestamp, payload), not recording, u64",
        ProbeUntyped,
    );
    b.row(
        "untyped probe decoding a field by name, not recording, u64",
        ProbeField,
    );
    for p in probes {
        p.detach();
    }
    for p in untyped {
        p.detach();
    }
    tape::probe::synchronize();

    // Two threads emitting at once, each into its own ring; and the bare
    // counter read on two threads, to tell the cost of the shared CPU
    // (hypervisor, SMT siblings) from the cost of tape.
    let two = "enabled, u64, overwrite, 2 threads at once (per thread)";
    if b.wants(two) {
        let name = format!("bare {COUNTER}, 2 threads at once (per thread) (baseline)");
        b.two_threads(&name, &rdtsc_row, Ticks);
        b.two_threads(two, u64_overwrite, U64);
    }

    // Discard mode. Until the ring is full: a fresh ring per row, large
    // enough for every sample of the row. Then a small ring, filled first:
    // every event is dropped and counted.
    tape::config::set_mode(Mode::Discard);
    let iters = b.plan.iters;
    // Each sample on a fresh thread with a default-sized (1 MiB) ring, as
    // the overwrite rows use, and few enough events to fit it: the same
    // cache footprint, so the rows compare.
    let di = discard_iters(b.plan);
    b.discard_fresh_row("enabled, u64, discard (ring not full)", di, U64);
    b.discard_fresh_row(
        "enabled, 3 x u64 + 16-byte &str, discard (ring not full)",
        di,
        Mixed,
    );
    let fill = (2 * FULL_RING / U64_EVENT) as u64;
    b.discard_row(
        "discard, ring full, u64 (event dropped)",
        FULL_RING,
        fill,
        iters,
        true,
        U64,
    );
    let fill = (2 * FULL_RING / MIXED_EVENT) as u64;
    b.discard_row(
        "discard, ring full, 3 x u64 + 16-byte &str (event dropped)",
        FULL_RING,
        fill,
        iters,
        true,
        Mixed,
    );
    tape::config::set_mode(Mode::Overwrite);

    let load = cpu_before
        .zip(cpu_times())
        .map(|(a, z)| Noise::between(&a, &z));
    print_report(&b, &rdtsc_row, load);
    guard.disarm();
}

/// CPU time of the machine (all CPUs) and of this process, in `USER_HZ`
/// ticks, from `/proc/stat` and `/proc/self/stat`.
struct CpuTimes {
    total: u64,
    busy: u64,
    steal: u64,
    ours: u64,
}

fn cpu_times() -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, steal] = v[..] else {
        return None;
    };
    let me = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name: state is field 3, utime 14, stime 15.
    let f: Vec<&str> = me.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(CpuTimes {
        total: v.iter().sum(),
        busy: user + nice + system + irq + softirq,
        steal,
        ours: utime + stime,
    })
}

/// How busy the machine was with other work during the run, as fractions
/// of all CPUs' time.
struct Noise {
    others: f64,
    steal: f64,
}

impl Noise {
    fn between(a: &CpuTimes, z: &CpuTimes) -> Noise {
        let total = z.total.saturating_sub(a.total).max(1) as f64;
        let busy = z.busy.saturating_sub(a.busy);
        let ours = z.ours.saturating_sub(a.ours);
        Noise {
            others: busy.saturating_sub(ours) as f64 / total,
            steal: z.steal.saturating_sub(a.steal) as f64 / total,
        }
    }
}

/// Prints the machine, the table and the notes, in Markdown.
fn print_report(b: &Bench, rdtsc_row: &str, load: Option<Noise>) {
    let ghz = b.ghz();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        cpuinfo
            .lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
    };
    let model = field("model name").unwrap_or_else(|| "unknown CPU".to_owned());
    let logical = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cores = field("cpu cores").map_or(String::new(), |c| format!(", {c} cores per socket"));
    let family = match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!(" (family {f}, model {m})"),
        _ => String::new(),
    };
    let virt = if field("flags").is_some_and(|f| f.split(' ').any(|x| x == "hypervisor")) {
        ", virtual machine"
    } else {
        ""
    };
    let rustc = std::process::Command::new(std::env::var_os("RUSTC").unwrap_or("rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    #[cfg(target_arch = "x86_64")]
    let invariant = if tape::clock::invariant_tsc() {
        "invariant TSC"
    } else {
        "TSC not invariant"
    };
    #[cfg(not(target_arch = "x86_64"))]
    let invariant = "no TSC";

    println!("### tape emit path");
    println!();
    println!("- CPU: {model}{family}, {logical} logical CPUs{cores}{virt}");
    println!(
        "- TSC: {ghz:.3} GHz measured in this run ({invariant}; tape clock: {})",
        tape::clock::source().name()
    );
    if let Some(r) = rustc {
        println!("- {r}");
    }
    if let Some(l) = load {
        println!(
            "- during the run: other processes used {:.0}% of the CPUs' time, hypervisor \
             steal {:.1}% (from /proc/stat; a quiet machine shows ~0%)",
            l.others * 100.0,
            l.steal * 100.0
        );
    }
    println!(
        "- {} iterations per sample ({} for the discard rows that must not fill their ring: \
         each sample on a fresh thread and ring), loop unrolled x{UNROLL}, {} samples per row \
         after one warm-up; rings {} KiB (default packets)",
        b.plan.iters,
        discard_iters(b.plan),
        b.plan.reps,
        OVERWRITE_RING >> 10,
    );
    if b.plan.iters == QUICK.iters {
        println!("- **smoke test** (no `--bench` argument): numbers are not meaningful");
    }
    println!();
    println!("| benchmark | ticks/op (median) | ns/op (median) | ticks/op (min) | ratio to bare {COUNTER} |");
    println!("|---|--:|--:|--:|--:|");
    let base = b.ticks_of(rdtsc_row).unwrap_or(f64::NAN);
    for r in &b.rows {
        let m = r.median();
        println!(
            "| {} | {m:.2} | {:.2} | {:.2} | {:.2} |",
            r.name,
            m / ghz,
            r.min(),
            m / base,
        );
    }
    println!();
    println!(
        "Ticks are TSC ticks (constant rate, not core cycles); ns/op = ticks/op / {ghz:.3}. \
         Every row includes the empty-loop overhead and the `black_box` of its arguments \
         (not subtracted; the disabled rows show what the arguments cost)."
    );
    for n in &b.notes {
        println!("- {n}");
    }
}
