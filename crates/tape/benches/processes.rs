//! The emit path as user code calls it, one process at a time: does some
//! process run the same tracepoint slower than others?
//!
//! `cargo bench -p tape --bench processes [-- STRETCHES PROCESSES EVENTS]`
//! (default 3 stretches of 20 processes per row, 20 M events each).
//!
//! Each process is this binary run again (`--child KIND`): a plain loop of
//! `EVENTS` events of 3 × u64 + a 16-byte `&str` (`black_box` arguments, a
//! closure, as a program calls it), timed with `Instant` after a warm-up
//! of a tenth as many. Two kinds, alternating (which goes first alternates
//! too), so that a slow stretch of the machine hits both:
//!
//! * `tape`: a tape tracepoint, enabled, overwrite mode, default 1 MiB ring;
//! * `ring`: a hand-written thread-local ring doing the same work (read the
//!   TSC, write a 2-byte id, the 8-byte timestamp, the fields and the
//!   string's length and bytes, wrap at the end), without publication: the
//!   least an emit can do.
//!
//! Per stretch and overall it prints min, median and max ns/event per row,
//! tape's median over the ring's and tape's worst process over the ring's
//! median: a slow mode shows in the max, not averaged away. Optional
//! environment: `TAPE_BENCH_KIND=ring` is the control: the ring against
//! a second series of ring processes, the same code, so what it shows
//! (the max over the median above all) is the host's spread, which the
//! tape row also carries; `TAPE_BENCH_PIN=1` pins each child to CPU 0;
//! `TAPE_BENCH_CHUNKS=1` makes each child print the ns/event of each tenth
//! of its run on stderr (is a slow process slow throughout?).
//!
//! Experiments, run one child at a time (`--child KIND [EVENTS]`, the
//! binary in `target/release/deps/processes-*`): `tape-u64` (the same
//! tracepoint without the string), `ring-published` (the hand-written ring
//! plus tape's re-entry flag and publication stores), `ring-odd` (51-byte
//! events, as tape's), `ring-call` (its emit not inlined) and `ring-nul`
//! (the string copied by tape's NUL-checking word loop), `ring-late` (the
//! counter read after the fields, as tape reads it), and `pair`: tape
//! and the ring in one process, alternating blocks of 100 000 events,
//! each pair of blocks' ns/event on stderr (a stretch in which the host
//! slows both shows in both: which slowdowns are tape's own). What they
//! showed is in `RESULTS.md` ("Issue 23").

use std::cell::Cell;
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};
use std::time::Instant;

tape::tracepoint! {
    /// The event of the benchmark.
    pub fn request(a: u64, b: u64, c: u64, path: &str) = "bench.processes.request";
    /// The same without the string (an experiment: `--child tape-u64`).
    pub fn request_u64(a: u64, b: u64, c: u64) = "bench.processes.request_u64";
}

const DEFAULT_STRETCHES: usize = 3;
const DEFAULT_PROCESSES: usize = 20;
const DEFAULT_EVENTS: u64 = 20_000_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let kind = args.get(i + 1).map(String::as_str).unwrap_or("");
        let events: u64 = args
            .get(i + 2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(DEFAULT_EVENTS);
        let ns = match kind {
            "tape" => child_tape(events),
            "tape-u64" => child_tape_u64(events),
            "pair" => child_pair(events),
            k if k.starts_with("ring") => child_ring(k, events),
            _ => panic!(
                "--child tape|tape-u64|pair|ring|ring-odd|ring-call|ring-nul|ring-late|ring-published [EVENTS]"
            ),
        };
        println!("{ns:.4}");
        return;
    }
    // Numbers among the arguments (cargo adds `--bench`).
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let stretches = nums.first().map_or(DEFAULT_STRETCHES, |&n| n as usize);
    let processes = nums.get(1).map_or(DEFAULT_PROCESSES, |&n| n as usize);
    let events = nums.get(2).copied().unwrap_or(DEFAULT_EVENTS);
    parent(stretches, processes, events);
}

/// The string of every event.
const PATH: &str = "/api/v1/objects!";

/// tape, enabled for this benchmark's tracepoints; the environment's
/// `TAPE_TRACE_BUFSZ` and the others apply.
fn init_tape() {
    tape::Config::from_env()
        .expect("TAPE_TRACE* variables")
        .enable("bench.processes.*")
        .init()
        .expect("init")
        .disarm();
}

/// A tape tracepoint, as a program calls it.
fn child_tape(events: u64) -> f64 {
    init_tape();
    time(events, |i| {
        request(black_box(i), black_box(7), black_box(42), black_box(PATH))
    })
}

/// A tape tracepoint of 3 × u64 (no string).
fn child_tape_u64(events: u64) -> f64 {
    init_tape();
    time(events, |i| {
        request_u64(black_box(i), black_box(7), black_box(42))
    })
}

/// tape and the hand-written ring in one process, alternating blocks of
/// 100 000 events (~2-3 ms each): prints on stderr each pair of blocks'
/// ns/event (tape, ring); a stretch of the host's that slows both shows
/// in both, a mode of tape's own only in tape's. Returns tape's overall
/// ns/event over the ring's (a ratio, not ns).
fn child_pair(events: u64) -> f64 {
    init_tape();
    setup_ring();
    const BLOCK: u64 = 100_000;
    #[inline(always)]
    fn block(f: &mut impl FnMut(u64), i0: u64) -> f64 {
        let t = Instant::now();
        for i in i0..i0 + BLOCK {
            f(i);
        }
        t.elapsed().as_nanos() as f64 / BLOCK as f64
    }
    let mut tape_ev = |i: u64| request(black_box(i), black_box(7), black_box(42), black_box(PATH));
    let mut ring_ev = |i: u64| {
        let (a, b, c, s) = (black_box(i), black_box(7), black_box(42), black_box(PATH));
        ring_write(a, b, c, s, 2, StringCopy::Memcpy);
    };
    // Warm-up.
    block(&mut tape_ev, 0);
    block(&mut ring_ev, 0);
    let (mut tt, mut rt) = (0.0, 0.0);
    let mut lines = Vec::new();
    for k in 0..events / BLOCK / 2 {
        let (t, r) = if k % 2 == 0 {
            let t = block(&mut tape_ev, k * BLOCK);
            (t, block(&mut ring_ev, k * BLOCK))
        } else {
            let r = block(&mut ring_ev, k * BLOCK);
            (block(&mut tape_ev, k * BLOCK), r)
        };
        tt += t;
        rt += r;
        lines.push(format!("{t:.2} {r:.2}"));
    }
    eprintln!("{}", lines.join("\n"));
    tt / rt
}

/// Makes the hand-written ring (4 MiB, every page written once) and the
/// publication of `ring-published`.
fn setup_ring() {
    let ring: &'static mut [u8] = Box::leak(vec![1u8; RING_SIZE].into_boxed_slice());
    BASE.with(|b| b.set(ring.as_mut_ptr()));
    let head: &'static Head = Box::leak(Box::new(Head {
        written: AtomicU64::new(0),
        last_ts: AtomicU64::new(0),
        pos: AtomicU64::new(0),
    }));
    HEAD.with(|h| h.set(head));
}

/// The hand-written ring: 4 MiB, pre-faulted, reached through two
/// thread-local cells (its base and the offset), as tape's writer state is.
const RING_SIZE: usize = 4 << 20;

thread_local! {
    static BASE: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
    static OFF: Cell<usize> = const { Cell::new(0) };
}

/// How a variant of the hand-written ring copies the string.
#[derive(Clone, Copy, PartialEq)]
enum StringCopy {
    /// `memcpy` of its bytes.
    Memcpy,
    /// tape's own copy (word by word, each checked for a NUL byte).
    Tape,
}

/// Writes one event into the hand-written ring: a 2-byte id, the
/// timestamp, three u64, the string's length in `len_bytes` bytes (2, or 1
/// for tape's odd event sizes) and its bytes; wraps at the end. Returns
/// the new offset and the timestamp.
#[inline(always)]
fn ring_write(a: u64, b: u64, c: u64, s: &str, len_bytes: usize, copy: StringCopy) -> (usize, u64) {
    ring_write_ordered(a, b, c, s, len_bytes, copy, false)
}

/// `ring-late`: the hand-written ring with the counter read after the
/// fields and the string are written (tape's order, chosen for its
/// registers: `RESULTS.md`, "Issue 23").
#[inline(always)]
fn ring_late(a: u64, b: u64, c: u64, s: &str) {
    ring_write_ordered(a, b, c, s, 2, StringCopy::Memcpy, true);
}

/// The TSC (0 on other CPUs).
#[inline(always)]
fn counter() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    #[cfg(target_arch = "x86_64")]
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// [`ring_write`], the counter read first or, with `counter_last`, after
/// the fields and the string.
#[inline(always)]
fn ring_write_ordered(
    a: u64,
    b: u64,
    c: u64,
    s: &str,
    len_bytes: usize,
    copy: StringCopy,
    counter_last: bool,
) -> (usize, u64) {
    let need = 2 + 8 + 24 + len_bytes + s.len();
    let base = BASE.with(Cell::get);
    let mut off = OFF.with(Cell::get);
    if off + need > RING_SIZE {
        off = 0;
    }
    let mut ts = if counter_last { 0 } else { counter() };
    // SAFETY: `base` is a live allocation of RING_SIZE bytes (leaked by
    // `child_ring`) and `off + need <= RING_SIZE`; unaligned writes.
    unsafe {
        let p = base.add(off);
        p.cast::<u16>().write_unaligned(7);
        if !counter_last {
            p.add(2).cast::<u64>().write_unaligned(ts);
        }
        p.add(10).cast::<u64>().write_unaligned(a);
        p.add(18).cast::<u64>().write_unaligned(b);
        p.add(26).cast::<u64>().write_unaligned(c);
        if len_bytes == 1 {
            p.add(34).write(s.len() as u8);
        } else {
            p.add(34).cast::<u16>().write_unaligned(s.len() as u16);
        }
        let dst = p.add(34 + len_bytes);
        match copy {
            StringCopy::Memcpy => std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len()),
            StringCopy::Tape => {
                tape::__private::copy_short_until_nul(s.as_bytes(), dst);
            }
        }
        if counter_last {
            ts = counter();
            p.add(2).cast::<u64>().write_unaligned(ts);
        }
    }
    OFF.with(|o| o.set(off + need));
    (off + need, ts)
}

/// `ring-odd`'s write, not inlined: a call per event (tape's emit with a
/// `&str` is not inlined into the loop).
#[inline(never)]
fn ring_call(a: u64, b: u64, c: u64, s: &str) {
    ring_write(a, b, c, s, 1, StringCopy::Memcpy);
}

/// `ring-call` copying the string as tape does.
#[inline(never)]
fn ring_nul(a: u64, b: u64, c: u64, s: &str) {
    ring_write(a, b, c, s, 1, StringCopy::Tape);
}

/// The publication of `ring-published`, on a cache line of its own.
#[repr(align(64))]
struct Head {
    written: AtomicU64,
    last_ts: AtomicU64,
    pos: AtomicU64,
}

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
    static HEAD: Cell<*const Head> = const { Cell::new(std::ptr::null()) };
}

/// The hand-written ring plus what tape's emit adds around the copy: a
/// thread-local re-entry flag set and cleared, and the publication (count
/// of events, last timestamp, a `Release` store of the position).
#[inline(always)]
fn ring_published(a: u64, b: u64, c: u64, s: &str) {
    if BUSY.with(Cell::get) {
        return;
    }
    BUSY.with(|b| b.set(true));
    compiler_fence(Ordering::SeqCst);
    let (end, ts) = ring_write(a, b, c, s, 2, StringCopy::Memcpy);
    // SAFETY: HEAD points to a leaked Head (set by `child_ring`).
    let head = unsafe { &*HEAD.with(Cell::get) };
    let w = head.written.load(Ordering::Relaxed);
    head.written.store(w + 1, Ordering::Relaxed);
    head.last_ts.store(ts, Ordering::Relaxed);
    head.pos.store(end as u64, Ordering::Release);
    compiler_fence(Ordering::SeqCst);
    BUSY.with(|b| b.set(false));
}

/// A hand-written ring variant (`kind`, see the module docs) on a 4 MiB
/// pre-faulted ring.
fn child_ring(kind: &str, events: u64) -> f64 {
    setup_ring();
    let args = |i: u64| (black_box(i), black_box(7), black_box(42), black_box(PATH));
    match kind {
        "ring" => time(events, |i| {
            let (a, b, c, s) = args(i);
            ring_write(a, b, c, s, 2, StringCopy::Memcpy);
        }),
        "ring-odd" => time(events, |i| {
            let (a, b, c, s) = args(i);
            ring_write(a, b, c, s, 1, StringCopy::Memcpy);
        }),
        "ring-call" => time(events, |i| {
            let (a, b, c, s) = args(i);
            ring_call(a, b, c, s)
        }),
        "ring-nul" => time(events, |i| {
            let (a, b, c, s) = args(i);
            ring_nul(a, b, c, s)
        }),
        "ring-late" => time(events, |i| {
            let (a, b, c, s) = args(i);
            ring_late(a, b, c, s)
        }),
        "ring-published" => time(events, |i| {
            let (a, b, c, s) = args(i);
            ring_published(a, b, c, s)
        }),
        _ => panic!("unknown kind {kind}"),
    }
}

/// ns per call of `f` over `events` calls, after a warm-up of a tenth.
/// With `TAPE_BENCH_CHUNKS=1`, also prints (on stderr) the ns per call of
/// each tenth: whether a slow process is slow throughout.
#[inline(always)]
fn time(events: u64, mut f: impl FnMut(u64)) -> f64 {
    for i in 0..events / 10 {
        f(i);
    }
    let chunks = std::env::var("TAPE_BENCH_CHUNKS").as_deref() == Ok("1");
    let t = Instant::now();
    let mut marks = Vec::with_capacity(11);
    for c in 0..10 {
        marks.push(Instant::now());
        for i in c * events / 10..(c + 1) * events / 10 {
            f(i);
        }
    }
    let total = t.elapsed().as_nanos() as f64 / events as f64;
    if chunks {
        marks.push(Instant::now());
        let per: Vec<String> = marks
            .windows(2)
            .map(|w| {
                format!(
                    "{:.2}",
                    (w[1] - w[0]).as_nanos() as f64 / (events / 10) as f64
                )
            })
            .collect();
        eprintln!("{}", per.join(" "));
    }
    total
}

fn run_child(kind: &str, events: u64) -> f64 {
    let exe = std::env::current_exe().expect("this binary");
    let mut cmd = if std::env::var("TAPE_BENCH_PIN").as_deref() == Ok("1") {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let out = cmd
        .args(["--child", kind, &events.to_string()])
        .output()
        .expect("run a child");
    assert!(
        out.status.success(),
        "child {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the child's ns/event")
}

fn parent(stretches: usize, processes: usize, events: u64) {
    // The kind measured against the ring: `tape`, or `ring` for the control.
    let kind = std::env::var("TAPE_BENCH_KIND").unwrap_or_else(|_| "tape".into());
    println!(
        "### {kind} vs a hand-written ring, one process each ({stretches} stretches × {processes} processes per row, {events} events each, 3 × u64 + 16-byte &str)\n"
    );
    println!("| stretch | row | min ns | median ns | max ns | {kind} median / ring median | {kind} max / ring median |");
    println!("|---|---|--:|--:|--:|--:|--:|");
    let (mut all_tape, mut all_ring) = (Vec::new(), Vec::new());
    for s in 1..=stretches {
        let (mut t, mut r) = (Vec::new(), Vec::new());
        for i in 0..processes {
            if i % 2 == 0 {
                t.push(run_child(&kind, events));
                r.push(run_child("ring", events));
            } else {
                r.push(run_child("ring", events));
                t.push(run_child(&kind, events));
            }
        }
        report(&s.to_string(), &kind, &t, &r);
        println!("|  | {kind}, in order | {} |||||", list(&t));
        println!("|  | ring, in order | {} |||||", list(&r));
        all_tape.extend(t);
        all_ring.extend(r);
    }
    report("all", &kind, &all_tape, &all_ring);
}

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 0 {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    } else {
        s[n / 2]
    };
    (s[0], median, s[n - 1])
}

fn report(stretch: &str, kind: &str, tape: &[f64], ring: &[f64]) {
    let (tmin, tmed, tmax) = stats(tape);
    let (rmin, rmed, rmax) = stats(ring);
    println!(
        "| {stretch} | {kind} | {tmin:.2} | {tmed:.2} | {tmax:.2} | {:.3} | {:.3} |",
        tmed / rmed,
        tmax / rmed
    );
    println!("| {stretch} | ring | {rmin:.2} | {rmed:.2} | {rmax:.2} | | |");
}
