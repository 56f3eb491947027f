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
//! environment: `TAPE_BENCH_PIN=1` pins each child to CPU 0;
//! `TAPE_BENCH_CHUNKS=1` makes each child print the ns/event of each tenth
//! of its run on stderr (is a slow process slow throughout?).
//!
//! Experiments, run one child at a time (`--child KIND [EVENTS]`, the
//! binary in `target/release/deps/processes-*`): `tape-u64` (the same
//! tracepoint without the string), `ring-published` (the hand-written ring
//! plus tape's re-entry flag and publication stores), `ring-odd` (51-byte
//! events, as tape's), `ring-call` (its emit not inlined) and `ring-nul`
//! (the string copied by tape's NUL-checking word loop). What they showed
//! is in `RESULTS.md` ("Issue 23").

use std::hint::black_box;
use std::process::Command;
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
            "ring" => child_ring(events),
            "ring-published" => child_ring_published(events),
            "tape-u64" => child_tape_u64(events),
            "ring-odd" => child_ring_odd(events),
            "ring-call" => child_ring_call(events),
            "ring-nul" => child_ring_nul(events),
            _ => panic!("--child tape|ring [EVENTS]"),
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

/// A tape tracepoint, as a program calls it.
fn child_tape(events: u64) -> f64 {
    // From the environment: TAPE_TRACE_BUFSZ and the others apply.
    tape::Config::from_env()
        .expect("TAPE_TRACE* variables")
        .enable("bench.processes.*")
        .init()
        .expect("init")
        .disarm();
    let emit = |i: u64| {
        request(
            black_box(i),
            black_box(7),
            black_box(42),
            black_box("/api/v1/objects!"),
        )
    };
    time(events, emit)
}

/// A tape tracepoint of 3 × u64 (no string).
fn child_tape_u64(events: u64) -> f64 {
    tape::Config::from_env()
        .expect("TAPE_TRACE* variables")
        .enable("bench.processes.*")
        .init()
        .expect("init")
        .disarm();
    let emit = |i: u64| request_u64(black_box(i), black_box(7), black_box(42));
    time(events, emit)
}

/// The hand-written ring: 4 MiB, pre-faulted, reached through two
/// thread-local cells (its base and the offset), as tape's writer state is.
fn child_ring(events: u64) -> f64 {
    use std::cell::Cell;
    const SIZE: usize = 4 << 20;
    thread_local! {
        static BASE: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static OFF: Cell<usize> = const { Cell::new(0) };
    }
    #[inline(always)]
    fn emit(a: u64, b: u64, c: u64, s: &str) {
        let need = 2 + 8 + 24 + 2 + s.len();
        let base = BASE.with(Cell::get);
        let mut off = OFF.with(Cell::get);
        if off + need > SIZE {
            off = 0;
        }
        // SAFETY: rdtsc has no preconditions on x86_64.
        #[cfg(target_arch = "x86_64")]
        let ts = unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        let ts = 0u64;
        // SAFETY: `base` is a live allocation of SIZE bytes (leaked below)
        // and `off + need <= SIZE`; unaligned writes.
        unsafe {
            let p = base.add(off);
            p.cast::<u16>().write_unaligned(7);
            p.add(2).cast::<u64>().write_unaligned(ts);
            p.add(10).cast::<u64>().write_unaligned(a);
            p.add(18).cast::<u64>().write_unaligned(b);
            p.add(26).cast::<u64>().write_unaligned(c);
            p.add(34).cast::<u16>().write_unaligned(s.len() as u16);
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.add(36), s.len());
        }
        OFF.with(|o| o.set(off + need));
    }
    // Pre-faulted: every page written once.
    let ring: &'static mut [u8] = Box::leak(vec![1u8; SIZE].into_boxed_slice());
    BASE.with(|b| b.set(ring.as_mut_ptr()));
    let emit = |i: u64| {
        emit(
            black_box(i),
            black_box(7),
            black_box(42),
            black_box("/api/v1/objects!"),
        )
    };
    time(events, emit)
}

/// The hand-written ring with a 1-byte string length: 51-byte events, as
/// tape's (an experiment: odd offsets, stores split across lines).
fn child_ring_odd(events: u64) -> f64 {
    use std::cell::Cell;
    const SIZE: usize = 4 << 20;
    thread_local! {
        static BASE: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static OFF: Cell<usize> = const { Cell::new(0) };
    }
    #[inline(always)]
    fn emit(a: u64, b: u64, c: u64, s: &str) {
        let need = 2 + 8 + 24 + 1 + s.len();
        let base = BASE.with(Cell::get);
        let mut off = OFF.with(Cell::get);
        if off + need > SIZE {
            off = 0;
        }
        // SAFETY: rdtsc has no preconditions on x86_64.
        #[cfg(target_arch = "x86_64")]
        let ts = unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        let ts = 0u64;
        // SAFETY: `base` is a live allocation of SIZE bytes (leaked below)
        // and `off + need <= SIZE`; unaligned writes.
        unsafe {
            let p = base.add(off);
            p.cast::<u16>().write_unaligned(7);
            p.add(2).cast::<u64>().write_unaligned(ts);
            p.add(10).cast::<u64>().write_unaligned(a);
            p.add(18).cast::<u64>().write_unaligned(b);
            p.add(26).cast::<u64>().write_unaligned(c);
            p.add(34).write(s.len() as u8);
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.add(35), s.len());
        }
        OFF.with(|o| o.set(off + need));
    }
    // Pre-faulted: every page written once.
    let ring: &'static mut [u8] = Box::leak(vec![1u8; SIZE].into_boxed_slice());
    BASE.with(|b| b.set(ring.as_mut_ptr()));
    let emit = |i: u64| {
        emit(
            black_box(i),
            black_box(7),
            black_box(42),
            black_box("/api/v1/objects!"),
        )
    };
    time(events, emit)
}

/// `ring-odd` with its emit not inlined: a call per event (an experiment:
/// tape's emit with a `&str` is not inlined into the loop).
fn child_ring_call(events: u64) -> f64 {
    use std::cell::Cell;
    const SIZE: usize = 4 << 20;
    thread_local! {
        static BASE: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static OFF: Cell<usize> = const { Cell::new(0) };
    }
    #[inline(never)]
    fn emit(a: u64, b: u64, c: u64, s: &str) {
        let need = 2 + 8 + 24 + 1 + s.len();
        let base = BASE.with(Cell::get);
        let mut off = OFF.with(Cell::get);
        if off + need > SIZE {
            off = 0;
        }
        // SAFETY: rdtsc has no preconditions on x86_64.
        #[cfg(target_arch = "x86_64")]
        let ts = unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        let ts = 0u64;
        // SAFETY: `base` is a live allocation of SIZE bytes (leaked below)
        // and `off + need <= SIZE`; unaligned writes.
        unsafe {
            let p = base.add(off);
            p.cast::<u16>().write_unaligned(7);
            p.add(2).cast::<u64>().write_unaligned(ts);
            p.add(10).cast::<u64>().write_unaligned(a);
            p.add(18).cast::<u64>().write_unaligned(b);
            p.add(26).cast::<u64>().write_unaligned(c);
            p.add(34).write(s.len() as u8);
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.add(35), s.len());
        }
        OFF.with(|o| o.set(off + need));
    }
    // Pre-faulted: every page written once.
    let ring: &'static mut [u8] = Box::leak(vec![1u8; SIZE].into_boxed_slice());
    BASE.with(|b| b.set(ring.as_mut_ptr()));
    let emit = |i: u64| {
        emit(
            black_box(i),
            black_box(7),
            black_box(42),
            black_box("/api/v1/objects!"),
        )
    };
    time(events, emit)
}

/// `ring-call` copying the string as tape does, a word at a time with a
/// check for a NUL byte in each (an experiment).
fn child_ring_nul(events: u64) -> f64 {
    use std::cell::Cell;
    const SIZE: usize = 4 << 20;
    thread_local! {
        static BASE: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static OFF: Cell<usize> = const { Cell::new(0) };
    }
    #[inline(never)]
    fn emit(a: u64, b: u64, c: u64, s: &str) {
        let need = 2 + 8 + 24 + 1 + s.len();
        let base = BASE.with(Cell::get);
        let mut off = OFF.with(Cell::get);
        if off + need > SIZE {
            off = 0;
        }
        // SAFETY: rdtsc has no preconditions on x86_64.
        #[cfg(target_arch = "x86_64")]
        let ts = unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        let ts = 0u64;
        // SAFETY: `base` is a live allocation of SIZE bytes (leaked below)
        // and `off + need <= SIZE`; unaligned writes.
        unsafe {
            let p = base.add(off);
            p.cast::<u16>().write_unaligned(7);
            p.add(2).cast::<u64>().write_unaligned(ts);
            p.add(10).cast::<u64>().write_unaligned(a);
            p.add(18).cast::<u64>().write_unaligned(b);
            p.add(26).cast::<u64>().write_unaligned(c);
            p.add(34).write(s.len() as u8);
            copy_until_nul(s.as_bytes(), p.add(35));
        }
        OFF.with(|o| o.set(off + need));
    }
    // Pre-faulted: every page written once.
    let ring: &'static mut [u8] = Box::leak(vec![1u8; SIZE].into_boxed_slice());
    BASE.with(|b| b.set(ring.as_mut_ptr()));
    let emit = |i: u64| {
        emit(
            black_box(i),
            black_box(7),
            black_box(42),
            black_box("/api/v1/objects!"),
        )
    };
    time(events, emit)
}

/// tape's copy of a short string (`field.rs`): word by word, each checked
/// for a NUL byte before it is stored.
///
/// # Safety
/// `dst` valid for `src.len()` bytes.
#[inline(always)]
unsafe fn copy_until_nul(src: &[u8], dst: *mut u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let len = src.len();
    let mut i = 0;
    while i + 8 <= len {
        // SAFETY: i + 8 <= len.
        let w = unsafe { std::ptr::read_unaligned(src.as_ptr().add(i).cast::<u64>()) };
        if w.wrapping_sub(ONES) & !w & HIGHS != 0 {
            break;
        }
        // SAFETY: i + 8 <= len bytes of dst (caller).
        unsafe { std::ptr::write_unaligned(dst.add(i).cast::<u64>(), w) };
        i += 8;
    }
    while i < len && src[i] != 0 {
        // SAFETY: i < len (caller).
        unsafe { *dst.add(i) = src[i] };
        i += 1;
    }
    i
}

/// The hand-written ring plus what tape's emit adds around the copy: a
/// thread-local re-entry flag set and cleared, and the publication (count
/// of events, last timestamp, a `Release` store of the position) on a
/// cache line of its own. An experiment: does the slow mode follow these
/// stores?
fn child_ring_published(events: u64) -> f64 {
    use std::cell::Cell;
    use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};
    const SIZE: usize = 4 << 20;
    #[repr(align(64))]
    struct Head {
        written: AtomicU64,
        last_ts: AtomicU64,
        pos: AtomicU64,
    }
    thread_local! {
        static BASE: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static OFF: Cell<usize> = const { Cell::new(0) };
        static BUSY: Cell<bool> = const { Cell::new(false) };
        static HEAD: Cell<*const Head> = const { Cell::new(std::ptr::null()) };
    }
    #[inline(always)]
    fn emit(a: u64, b: u64, c: u64, s: &str) {
        if BUSY.with(Cell::get) {
            return;
        }
        BUSY.with(|b| b.set(true));
        compiler_fence(Ordering::SeqCst);
        let need = 2 + 8 + 24 + 2 + s.len();
        let base = BASE.with(Cell::get);
        let mut off = OFF.with(Cell::get);
        if off + need > SIZE {
            off = 0;
        }
        // SAFETY: rdtsc has no preconditions on x86_64.
        #[cfg(target_arch = "x86_64")]
        let ts = unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        let ts = 0u64;
        // SAFETY: as in `child_ring`.
        unsafe {
            let p = base.add(off);
            p.cast::<u16>().write_unaligned(7);
            p.add(2).cast::<u64>().write_unaligned(ts);
            p.add(10).cast::<u64>().write_unaligned(a);
            p.add(18).cast::<u64>().write_unaligned(b);
            p.add(26).cast::<u64>().write_unaligned(c);
            p.add(34).cast::<u16>().write_unaligned(s.len() as u16);
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.add(36), s.len());
        }
        OFF.with(|o| o.set(off + need));
        // SAFETY: HEAD points to a leaked Head.
        let head = unsafe { &*HEAD.with(Cell::get) };
        let w = head.written.load(Ordering::Relaxed);
        head.written.store(w + 1, Ordering::Relaxed);
        head.last_ts.store(ts, Ordering::Relaxed);
        head.pos.store((off + need) as u64, Ordering::Release);
        compiler_fence(Ordering::SeqCst);
        BUSY.with(|b| b.set(false));
    }
    let ring: &'static mut [u8] = Box::leak(vec![1u8; SIZE].into_boxed_slice());
    BASE.with(|b| b.set(ring.as_mut_ptr()));
    let head: &'static Head = Box::leak(Box::new(Head {
        written: AtomicU64::new(0),
        last_ts: AtomicU64::new(0),
        pos: AtomicU64::new(0),
    }));
    HEAD.with(|h| h.set(head));
    let emit = |i: u64| {
        emit(
            black_box(i),
            black_box(7),
            black_box(42),
            black_box("/api/v1/objects!"),
        )
    };
    time(events, emit)
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
    println!(
        "### tape vs a hand-written ring, one process each ({stretches} stretches × {processes} processes per row, {events} events each, 3 × u64 + 16-byte &str)\n"
    );
    println!("| stretch | row | min ns | median ns | max ns | tape median / ring median | tape max / ring median |");
    println!("|---|---|--:|--:|--:|--:|--:|");
    let (mut all_tape, mut all_ring) = (Vec::new(), Vec::new());
    for s in 1..=stretches {
        let (mut t, mut r) = (Vec::new(), Vec::new());
        for i in 0..processes {
            if i % 2 == 0 {
                t.push(run_child("tape", events));
                r.push(run_child("ring", events));
            } else {
                r.push(run_child("ring", events));
                t.push(run_child("tape", events));
            }
        }
        report(&s.to_string(), &t, &r);
        println!("|  | tape, in order | {} |||||", list(&t));
        println!("|  | ring, in order | {} |||||", list(&r));
        all_tape.extend(t);
        all_ring.extend(r);
    }
    report("all", &all_tape, &all_ring);
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

fn report(stretch: &str, tape: &[f64], ring: &[f64]) {
    let (tmin, tmed, tmax) = stats(tape);
    let (rmin, rmed, rmax) = stats(ring);
    println!(
        "| {stretch} | tape | {tmin:.2} | {tmed:.2} | {tmax:.2} | {:.3} | {:.3} |",
        tmed / rmed,
        tmax / rmed
    );
    println!("| {stretch} | ring | {rmin:.2} | {rmed:.2} | {rmax:.2} | | |");
}
