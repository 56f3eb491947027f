//! A traced function call, side by side in one run: `#[tape::traced]`
//! disabled and enabled, `#[tracing::instrument]` with the minimal
//! subscriber (`tracing_subscriber::registry()`, no layer), and with a
//! layer that records what tape records (a timestamp at enter and at exit,
//! into a thread-local ring), and through `tape-tracing`'s layer (the span's
//! creation, entry and exit recorded into tape's rings), and
//! `#[fastrace::trace]` under root spans with a reporter that drops what it
//! gets; `tape::latency::section!` around the same body (the latency tracer
//! off, on, on with the section's events recorded); next to an empty loop, a bare `rdtsc` and a bare `rdtsc` pair (what
//! an entry and an exit timestamp cost at the least). Same function body in
//! every row.
//!
//! ```text
//! cargo bench --manifest-path benches/peers/Cargo.toml --bench traced
//! ```
//!
//! Method: the harness's (`src/lib.rs`), ratios to the bare `rdtsc`
//! pair. The peers are dependencies of this crate only (not a workspace
//! member), so tape's build does not carry them.

use std::hint::black_box;
use std::time::Instant;

use tape_peers::{ticks, unrolled, Row};

const ITERS: u64 = 1 << 18;

fn timed(f: &dyn Fn(u64) -> u64) -> (u64, u64) {
    tape_peers::timed(f, ITERS)
}

// The same body everywhere: a little arithmetic on an argument.
#[inline(always)]
fn body(x: u64) -> u64 {
    black_box(x).wrapping_mul(3).wrapping_add(1)
}

#[tape::traced]
#[inline(never)]
fn tape_on(x: u64) -> u64 {
    body(x)
}

#[tape::traced]
#[inline(never)]
fn tape_off(x: u64) -> u64 {
    body(x)
}

#[inline(never)]
fn plain(x: u64) -> u64 {
    body(x)
}

// Latency sections around the same body: the tracer off; on with the
// section's events disabled (measured, not a new maximum); on with its
// events recorded too.
#[inline(never)]
fn section_off(x: u64) -> u64 {
    let _s = tape::latency::section!("bench.off");
    body(x)
}

#[inline(never)]
fn section_on(x: u64) -> u64 {
    let _s = tape::latency::section!("bench.on");
    body(x)
}

#[inline(never)]
fn section_recorded(x: u64) -> u64 {
    let _s = tape::latency::section!("bench.recorded");
    body(x)
}

/// Times `f` with the latency tracer on or off.
fn latency(on: bool, f: &dyn Fn(u64) -> u64) -> (u64, u64) {
    tape::latency::set_on(on);
    timed(f)
}

#[tracing::instrument(skip_all)]
#[inline(never)]
fn tracing_on(x: u64) -> u64 {
    body(x)
}

/// A layer that records what tape records for a call: a timestamp at the
/// span's enter and at its exit (with the span's id), into a ring of this
/// thread's (preallocated; the oldest entries overwritten), so that
/// `tracing` is measured doing the same job as a traced call.
struct Stamps;

const STAMPS: usize = 1 << 16;

thread_local! {
    static RING: std::cell::RefCell<(Vec<(u64, u64)>, usize)> =
        std::cell::RefCell::new((vec![(0, 0); STAMPS], 0));
}

fn stamp(id: &tracing::span::Id) {
    let t = ticks();
    RING.with(|r| {
        let mut r = r.borrow_mut();
        let i = r.1;
        r.0[i] = (id.into_u64(), t);
        r.1 = (i + 1) % STAMPS;
    });
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Stamps {
    fn on_enter(&self, id: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        stamp(id);
    }
    fn on_exit(&self, id: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        stamp(id);
    }
}

/// Times `f` with `dispatch` as this thread's subscriber.
fn with_subscriber(dispatch: &tracing::Dispatch, f: &dyn Fn(u64) -> u64) -> (u64, u64) {
    tracing::dispatcher::with_default(dispatch, || timed(f))
}

#[fastrace::trace]
#[inline(never)]
fn fastrace_on(x: u64) -> u64 {
    body(x)
}

/// A reporter that drops the spans (the collector's work is measured, not
/// an exporter's).
struct Drop;

impl fastrace::collector::Reporter for Drop {
    fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
        black_box(spans);
    }
}

/// Calls under a root span collect at most 10240 spans (fastrace's
/// `DEFAULT_SPAN_QUEUE_SIZE`; past it, spans are dropped without a word),
/// so the fastrace row makes a new root every `FASTRACE_BATCH` calls, inside
/// the timed loop: the root's cost, shared by its calls, is part of what a
/// program pays. The collector's own thread (which receives the spans and
/// hands them to the reporter) runs on the other core, not counted.
const FASTRACE_BATCH: u64 = 8192;

#[inline(never)]
fn timed_fastrace() -> (u64, u64) {
    let start = Instant::now();
    let t0 = ticks();
    let mut i = 0;
    while i < ITERS {
        let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
        let guard = root.set_local_parent();
        unrolled(&fastrace_on, i, i + FASTRACE_BATCH);
        i += FASTRACE_BATCH;
        drop(guard);
        drop(root);
    }
    let t1 = ticks();
    (t1 - t0, start.elapsed().as_nanos() as u64)
}

fn main() {
    // Latency snapshots (the first maxima) go to a scratch directory.
    let scratch = std::env::temp_dir().join(format!("tape-peers-{}", std::process::id()));
    let _g = tape::Config::new()
        .enable("fn.*tape_on*")
        .enable("latency.bench.recorded.*")
        .dir(&scratch)
        .control(false)
        .shared_rings(false)
        .init()
        .expect("tape");
    _g.disarm();
    // Each tracing row runs with its subscriber as the thread's default
    // (the same dispatch path for both).
    use tracing_subscriber::layer::SubscriberExt;
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    let stamped = tracing::Dispatch::new(tracing_subscriber::registry().with(Stamps));
    // tape-tracing: every span's tracepoints (`.new` at creation, then
    // `.entry` and `.exit`), as `TAPE_TRACE='tracing.*'` would have them.
    tape::enable_pattern("tracing.*").expect("pattern");
    let tape_layer =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    fastrace::set_reporter(Drop, fastrace::collector::Config::default());

    let rows: Vec<Row> = vec![
        ("empty loop (baseline)", Box::new(|| timed(&|x| x))),
        (
            "bare rdtsc (baseline)",
            Box::new(|| timed(&|x| ticks() ^ x)),
        ),
        (
            "bare rdtsc pair (baseline)",
            Box::new(|| timed(&|x| ticks() ^ ticks() ^ x)),
        ),
        ("plain call, not traced", Box::new(|| timed(&plain))),
        ("#[tape::traced], disabled", Box::new(|| timed(&tape_off))),
        (
            "#[tape::traced], enabled (entry + exit)",
            Box::new(|| timed(&tape_on)),
        ),
        (
            "latency::section!, tracer off",
            Box::new(|| latency(false, &section_off)),
        ),
        (
            "latency::section!, tracer on (not a new maximum)",
            Box::new(|| latency(true, &section_on)),
        ),
        (
            "latency::section!, tracer on, entry + exit recorded",
            Box::new(|| latency(true, &section_recorded)),
        ),
        (
            "#[tracing::instrument], registry subscriber",
            Box::new(move || with_subscriber(&registry, &tracing_on)),
        ),
        (
            "#[tracing::instrument], registry + a layer timestamping enter/exit",
            Box::new(move || with_subscriber(&stamped, &tracing_on)),
        ),
        (
            "#[tracing::instrument], registry + tape-tracing (span new, entry, exit, close into tape's rings)",
            Box::new(move || with_subscriber(&tape_layer, &tracing_on)),
        ),
        (
            "#[fastrace::trace], a root span per 8192 calls",
            Box::new(timed_fastrace),
        ),
    ];
    tape_peers::run(&rows, ITERS, 2, "× rdtsc pair", &|| fastrace::flush());
    // The layer did record (its ring was written), and so did tape-tracing.
    if std::env::var_os("PEERS_ONLY").is_none() {
        assert!(RING.with(|r| r.borrow().0.iter().any(|&(_, t)| t != 0)));
    }
    assert_eq!(tape_tracing::unregistered_callsites(), 0);
    assert!(tape::registry::tracepoints()
        .iter()
        .any(|p| p.name().ends_with(".tracing_on.entry") && p.is_recording()));
    tape::latency::set_on(false);
    let _ = std::fs::remove_dir_all(&scratch);
    let s = tape::stats();
    println!(
        "tape: {} events in the ring at the end; {} overwritten as the 1 MiB ring cycled \
         (overwrite mode), {} dropped for other causes",
        s.recorded,
        s.drops.overwritten,
        s.drops.total() - s.drops.overwritten
    );
}
