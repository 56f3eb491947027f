//! One event with the same three fields (`a: u64`, `b: u64`, a 16-byte
//! `&str`), side by side in one run: a tape tracepoint (disabled, enabled),
//! `tracing::info!` with no subscriber, with the minimal subscriber
//! (`tracing_subscriber::registry()`), with a layer that records what tape
//! records (a timestamp and the fields, into a thread-local ring), with
//! `tape-tracing`'s layer recording into tape's rings (and at a callsite
//! tape does not want), `tracing-subscriber`'s fmt layer writing to a file, `tracing-chrome` and
//! `tracing-perfetto` (files), a `fastrace` event under a root span, and
//! an LTTng-UST tracepoint through its C API (`lttng/`, built when
//! liblttng-ust-dev is installed; enabled when `run.sh` made a session);
//! next to an empty loop and a bare `rdtsc`.
//!
//! ```text
//! cargo bench --manifest-path benches/peers/Cargo.toml --bench events
//! ```
//!
//! Method: the harness's (`src/lib.rs`), ratios to tape's enabled row. Each `tracing` row runs with its
//! subscriber as this thread's default (`with_default`), so a callsite's
//! interest is "sometimes" and every event asks the subscriber: the cost a
//! program with more than one subscriber pays; a single global subscriber
//! caches the answer (a few ticks less). Files go to a scratch directory,
//! removed at the end.

use std::hint::black_box;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Instant;

use tape_peers::{ticks, unrolled, Row};

const ITERS: u64 = 1 << 14;
/// The string field: 16 bytes.
const TEXT: &str = "GET /index.html";

tape::tracepoint! {
    /// The event of every row.
    pub fn request(a: u64, b: u64, s: &str) = "bench.peers.request";
    /// Never enabled.
    pub fn request_off(a: u64, b: u64, s: &str) = "bench.peers.off";
}

#[inline(never)]
fn tape_on(x: u64) -> u64 {
    request(x, x ^ 7, black_box(TEXT));
    x
}

#[inline(never)]
fn tape_off(x: u64) -> u64 {
    request_off(x, x ^ 7, black_box(TEXT));
    x
}

#[inline(never)]
fn tracing_event(x: u64) -> u64 {
    let s = black_box(TEXT);
    tracing::info!(a = x, b = x ^ 7, s);
    x
}

/// The same event at a callsite tape-tracing's layer does not want
/// (`tracing.events_off.*` is never enabled).
#[inline(never)]
fn tracing_event_off(x: u64) -> u64 {
    let s = black_box(TEXT);
    tracing::info!(target: "events_off", a = x, b = x ^ 7, s);
    x
}

#[inline(never)]
fn fastrace_event(x: u64) -> u64 {
    let s = black_box(TEXT);
    fastrace::local::LocalSpan::add_event(fastrace::Event::new("request").with_properties(|| {
        [
            ("a", x.to_string()),
            ("b", (x ^ 7).to_string()),
            ("s", s.to_owned()),
        ]
    }));
    x
}

// The same event through LTTng-UST's C API (`lttng/tp.c`, built when
// liblttng-ust-dev is installed): enabled when `run.sh` has started a
// session with `bench:request` enabled (`PEERS_LTTNG_SESSION` says so);
// `bench:request_off` never is.
#[cfg(lttng_ust)]
extern "C" {
    fn tape_peers_lttng_request(a: u64, b: u64, s: *const std::ffi::c_char);
    fn tape_peers_lttng_request_off(a: u64, b: u64, s: *const std::ffi::c_char);
}

/// The string field, NUL-terminated for C.
#[cfg(lttng_ust)]
const CTEXT: &std::ffi::CStr = c"GET /index.html";

#[cfg(lttng_ust)]
#[inline(never)]
fn lttng_on(x: u64) -> u64 {
    // SAFETY: CTEXT is a NUL-terminated string that outlives the call; the
    // function only reads it.
    unsafe { tape_peers_lttng_request(x, x ^ 7, black_box(CTEXT).as_ptr()) };
    x
}

#[cfg(lttng_ust)]
#[inline(never)]
fn lttng_off(x: u64) -> u64 {
    // SAFETY: as in `lttng_on`.
    unsafe { tape_peers_lttng_request_off(x, x ^ 7, black_box(CTEXT).as_ptr()) };
    x
}

/// A layer that records what tape records for an event: a timestamp and
/// the fields (two integers, the string's first 16 bytes), into a ring of
/// this thread's (preallocated; the oldest overwritten).
struct Record;

const SLOTS: usize = 1 << 14;

#[derive(Clone, Copy, Default)]
struct Slot {
    t: u64,
    a: u64,
    b: u64,
    s: [u8; 16],
}

thread_local! {
    static RING: std::cell::RefCell<(Vec<Slot>, usize)> =
        std::cell::RefCell::new((vec![Slot::default(); SLOTS], 0));
}

struct Fields(Slot);

impl tracing::field::Visit for Fields {
    fn record_u64(&mut self, f: &tracing::field::Field, v: u64) {
        match f.name() {
            "a" => self.0.a = v,
            "b" => self.0.b = v,
            _ => {}
        }
    }
    fn record_str(&mut self, _: &tracing::field::Field, v: &str) {
        let n = v.len().min(16);
        self.0.s[..n].copy_from_slice(&v.as_bytes()[..n]);
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Record {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut f = Fields(Slot {
            t: ticks(),
            ..Slot::default()
        });
        e.record(&mut f);
        RING.with(|r| {
            let mut r = r.borrow_mut();
            let i = r.1;
            r.0[i] = f.0;
            r.1 = (i + 1) % SLOTS;
        });
    }
}

fn timed(f: &dyn Fn(u64) -> u64) -> (u64, u64) {
    tape_peers::timed(f, ITERS)
}

/// Times `f` with `dispatch` as this thread's subscriber.
fn with_subscriber(dispatch: &tracing::Dispatch, f: &dyn Fn(u64) -> u64) -> (u64, u64) {
    tracing::dispatcher::with_default(dispatch, || timed(f))
}

/// fastrace records events only under a span: a root every
/// `FASTRACE_BATCH` events (its queue holds 10240 before it drops), inside
/// the timed loop.
const FASTRACE_BATCH: u64 = 4096;

#[inline(never)]
fn timed_fastrace() -> (u64, u64) {
    let start = Instant::now();
    let t0 = ticks();
    let mut i = 0;
    while i < ITERS {
        let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
        let guard = root.set_local_parent();
        let span = fastrace::local::LocalSpan::enter_with_local_parent("batch");
        unrolled(&fastrace_event, i, i + FASTRACE_BATCH);
        i += FASTRACE_BATCH;
        drop(span);
        drop(guard);
        drop(root);
    }
    let t1 = ticks();
    (t1 - t0, start.elapsed().as_nanos() as u64)
}

/// A reporter that drops the spans.
struct Drop;

impl fastrace::collector::Reporter for Drop {
    fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
        black_box(spans);
    }
}

fn main() {
    let scratch = std::env::temp_dir().join(format!("tape-peers-events-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let _g = tape::Config::new()
        .enable("bench.peers.request")
        .dir(&scratch)
        .control(false)
        .shared_rings(false)
        .init()
        .expect("tape");
    _g.disarm();

    use tracing_subscriber::layer::SubscriberExt;
    let none = tracing::Dispatch::none();
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    let recorded = tracing::Dispatch::new(tracing_subscriber::registry().with(Record));
    // tape-tracing's callsites are registered as `tracing` registers them:
    // enabled by pattern before they exist.
    tape::enable_pattern("tracing.events.*").expect("pattern");
    let tape_layer =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    let tape_layer_off = tape_layer.clone();
    let fmt_file = std::fs::File::create(scratch.join("fmt.log")).expect("fmt file");
    let fmt = tracing::Dispatch::new(
        tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(Mutex::new(fmt_file)),
        ),
    );
    let (chrome_layer, chrome_guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(scratch.join("chrome.json"))
        .build();
    let chrome = tracing::Dispatch::new(tracing_subscriber::registry().with(chrome_layer));
    let perfetto_file = std::fs::File::create(scratch.join("trace.pftrace")).expect("file");
    let perfetto = tracing::Dispatch::new(tracing_subscriber::registry().with(
        tracing_perfetto::PerfettoLayer::new(Mutex::new(perfetto_file)),
    ));
    fastrace::set_reporter(Drop, fastrace::collector::Config::default());

    let rows: Vec<Row> = vec![
        ("empty loop (baseline)", Box::new(|| timed(&|x| x))),
        (
            "bare rdtsc (baseline)",
            Box::new(|| timed(&|x| ticks() ^ x)),
        ),
        ("tape tracepoint, disabled", Box::new(|| timed(&tape_off))),
        ("tape tracepoint, enabled", Box::new(|| timed(&tape_on))),
        (
            "tracing::info!, no subscriber",
            Box::new(move || with_subscriber(&none, &tracing_event)),
        ),
        (
            "tracing::info!, registry (minimal subscriber)",
            Box::new(move || with_subscriber(&registry, &tracing_event)),
        ),
        (
            "tracing::info!, registry + a layer recording time and fields",
            Box::new(move || with_subscriber(&recorded, &tracing_event)),
        ),
        (
            "tracing::info!, registry + tape-tracing (into tape's rings)",
            Box::new(move || with_subscriber(&tape_layer, &tracing_event)),
        ),
        (
            "tracing::info!, registry + tape-tracing, callsite not enabled",
            Box::new(move || with_subscriber(&tape_layer_off, &tracing_event_off)),
        ),
        (
            "tracing::info!, fmt layer to a file",
            Box::new(move || with_subscriber(&fmt, &tracing_event)),
        ),
        (
            "tracing::info!, tracing-chrome (file, writer thread)",
            Box::new(move || with_subscriber(&chrome, &tracing_event)),
        ),
        (
            "tracing::info!, tracing-perfetto (file)",
            Box::new(move || with_subscriber(&perfetto, &tracing_event)),
        ),
        (
            "fastrace event (a root span per 4096)",
            Box::new(timed_fastrace),
        ),
    ];
    #[allow(unused_mut)]
    let mut rows = rows;
    #[cfg(lttng_ust)]
    {
        rows.push((
            "LTTng-UST tracepoint (C API), disabled",
            Box::new(|| timed(&lttng_off)),
        ));
        let on = if std::env::var_os("PEERS_LTTNG_SESSION").is_some() {
            "LTTng-UST tracepoint (C API), enabled (snapshot session)"
        } else {
            "LTTng-UST tracepoint (C API), no session (disabled)"
        };
        rows.push((on, Box::new(|| timed(&lttng_on))));
    }
    #[cfg(not(lttng_ust))]
    println!("notice: liblttng-ust-dev is not installed: no LTTng-UST rows\n");
    tape_peers::run(&rows, ITERS, 3, "× tape enabled", &|| fastrace::flush());
    // The rows did their work: tape recorded, the layer's ring was
    // written, the files grew.
    drop(chrome_guard);
    if std::env::var_os("PEERS_ONLY").is_none() {
        assert!(RING.with(|r| r.borrow().0.iter().any(|s| s.t != 0)));
        for f in ["fmt.log", "chrome.json", "trace.pftrace"] {
            let len = std::fs::metadata(scratch.join(f)).map_or(0, |m| m.len());
            assert!(len > 0, "{f} is empty");
        }
    }
    let s = tape::stats();
    assert!(s.recorded > 0);
    // tape-tracing recorded: its callsite's tracepoint was made, enabled.
    assert_eq!(tape_tracing::unregistered_callsites(), 0);
    assert!(tape::registry::tracepoints()
        .iter()
        .any(|p| p.name().starts_with("tracing.events.info") && p.is_recording()));
    let _ = std::io::stdout().flush();
    let _ = std::fs::remove_dir_all(&scratch);
}
