//! A long-running multi-threaded program to operate from outside: a source
//! thread makes work items, two worker threads process them, a sink thread
//! collects them, all through channels, with a tracepoint at each step.
//!
//! ```text
//! cargo run -p tape --example pipeline --release -- --seconds 600 &
//! tape ps                                   # it is listed, with its pid
//! tape ctl PID list                         # its tracepoints and their fields
//! tape ctl PID enable 'pipeline.*'          # record them now
//! tape ctl PID save                         # snapshot: prints the trace directory
//! tape show DIR | head
//! ```
//!
//! Nothing is recorded until something is enabled (by `TAPE_TRACE` or
//! `tape ctl`). It runs until `--seconds` have passed (forever without),
//! then saves as any program with `tape::init()` does.
//!
//! `--crash KIND` makes worker 0 crash after `--crash-after MS` (300 ms by
//! default): `panic`, `segv` (a null pointer read), `segv-both` (both
//! workers at once), `abort`, `overflow` (unbounded recursion), to see the
//! crash dump (`tape::crash`):
//!
//! ```text
//! TAPE_TRACE='pipeline.*' pipeline --crash segv   # dies of SIGSEGV, as it would
//! tape show ~/tape-traces/pipeline-crash-PID | tail -3   # ... tape.crash: { signal = 11, ... }
//! ```
//!
//! A stop (`kill -TERM`, Ctrl-C) saves the trace, then ends it by that
//! signal. For the tests of that: `--own-stop-handler` installs its own
//! SIGTERM handler after `tape::init()` (which then stops the source, and
//! the end of `main` saves); `--fork` forks a child that waits for a
//! signal, prints `pipeline: child PID`, and at the end prints how the
//! child ended.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set by the program's own SIGTERM handler (`--own-stop-handler`).
static STOPPED: AtomicBool = AtomicBool::new(false);

extern "C" fn own_stop(_: libc::c_int) {
    STOPPED.store(true, Ordering::Relaxed);
}

tape::tracepoint! {
    /// The source made an item.
    pub fn item_made(seq: u64, len: u32) = "pipeline.source.made";
    /// A worker processed an item.
    pub fn item_worked(worker: u8, seq: u64, checksum: u64) = "pipeline.worker.done";
    /// The sink received an item, `latency_ns` after it was made.
    pub fn item_done(seq: u64, latency_ns: u64) = "pipeline.sink.done";
    /// A worker's queue, when it took an item.
    pub fn queue_depth(worker: u8, depth: u32) = "pipeline.worker.queue";
}

struct Item {
    seq: u64,
    made: Instant,
    data: Vec<u8>,
}

/// How worker 0 crashes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Crash {
    Panic,
    Segv,
    /// Both workers at once: a second crash while the first dumps.
    SegvBoth,
    Abort,
    Overflow,
}

fn crash(kind: Crash, seq: u64) {
    match kind {
        Crash::Panic => panic!("worker 0 failed on item {seq}"),
        Crash::Segv | Crash::SegvBoth => {
            let p: *const u64 = std::hint::black_box(std::ptr::null());
            // SAFETY: none: this reads address 0 on purpose, to crash.
            let v = unsafe { std::ptr::read_volatile(p) };
            println!("{v}");
        }
        Crash::Abort => std::process::abort(),
        Crash::Overflow => println!("{}", deep(seq)),
    }
}

/// Recursion without end: a stack overflow.
#[allow(unconditional_recursion)]
fn deep(n: u64) -> u64 {
    let a = std::hint::black_box([n; 64]);
    deep(n + 1).wrapping_add(a[7])
}

fn main() -> Result<(), tape::Error> {
    let mut seconds: Option<f64> = None;
    let mut crash_kind: Option<Crash> = None;
    let mut crash_after = Duration::from_millis(300);
    let mut save_loop = false;
    let mut own_stop_handler = false;
    let mut fork = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                let v = args.next().unwrap_or_default();
                match v.parse() {
                    Ok(s) => seconds = Some(s),
                    Err(_) => {
                        eprintln!("pipeline: --seconds {v:?}: expected a number of seconds");
                        std::process::exit(2);
                    }
                }
            }
            "--crash" => {
                crash_kind = match args.next().as_deref() {
                    Some("panic") => Some(Crash::Panic),
                    Some("segv") => Some(Crash::Segv),
                    Some("segv-both") => Some(Crash::SegvBoth),
                    Some("abort") => Some(Crash::Abort),
                    Some("overflow") => Some(Crash::Overflow),
                    other => {
                        eprintln!(
                            "pipeline: --crash {other:?}: accepted: panic, segv, segv-both, abort, \
                             overflow"
                        );
                        std::process::exit(2);
                    }
                }
            }
            "--save-loop" => save_loop = true,
            "--own-stop-handler" => own_stop_handler = true,
            "--fork" => fork = true,
            "--crash-after" => {
                let v = args.next().unwrap_or_default();
                match v.parse() {
                    Ok(ms) => crash_after = Duration::from_millis(ms),
                    Err(_) => {
                        eprintln!("pipeline: --crash-after {v:?}: expected milliseconds");
                        std::process::exit(2);
                    }
                }
            }
            other => {
                eprintln!(
                    "pipeline: unknown argument {other:?} (accepted: --seconds N, --crash KIND, \
                     --crash-after MS)"
                );
                std::process::exit(2);
            }
        }
    }
    let _tape = tape::init()?;
    if own_stop_handler {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            libc::signal(
                libc::SIGTERM,
                own_stop as extern "C" fn(libc::c_int) as usize,
            )
        };
    }
    println!(
        "pipeline: pid {}; control it with: tape ctl {} status",
        std::process::id(),
        std::process::id()
    );
    let child = fork.then(|| {
        // SAFETY: the child only calls pause (async-signal-safe) until a
        // signal ends it.
        match unsafe { libc::fork() } {
            0 => loop {
                // SAFETY: pause has no preconditions.
                unsafe { libc::pause() };
            },
            pid => {
                println!("pipeline: child {pid}");
                pid
            }
        }
    });
    let start = Instant::now();
    let deadline = seconds.map(|s| start + Duration::from_secs_f64(s));

    let (to_sink, sink_rx) = mpsc::channel::<Item>();
    let mut workers = Vec::new();
    let mut inputs = Vec::new();
    for w in 0..2u8 {
        let (tx, rx) = mpsc::channel::<Item>();
        inputs.push(tx);
        let to_sink = to_sink.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    let mut pending = 0u32;
                    for item in rx {
                        pending = pending.saturating_sub(1);
                        queue_depth(w, pending);
                        let checksum = item
                            .data
                            .iter()
                            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(*b));
                        item_worked(w, item.seq, checksum);
                        if let Some(kind) = crash_kind.filter(|k| w == 0 || *k == Crash::SegvBoth) {
                            if start.elapsed() >= crash_after {
                                crash(kind, item.seq);
                            }
                        }
                        if to_sink.send(item).is_err() {
                            break;
                        }
                    }
                })
                .expect("spawn worker"),
        );
    }
    drop(to_sink);
    let sink = std::thread::Builder::new()
        .name("sink".into())
        .spawn(move || {
            let mut n = 0u64;
            for item in sink_rx {
                item_done(item.seq, item.made.elapsed().as_nanos() as u64);
                n += 1;
            }
            n
        })
        .expect("spawn sink");
    // How many items the source has made: the save loop waits for some.
    let made_so_far = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let made_count = std::sync::Arc::clone(&made_so_far);
    let source = std::thread::Builder::new()
        .name("source".into())
        .spawn(move || {
            let mut seq = 0u64;
            while deadline.is_none_or(|d| Instant::now() < d) && !STOPPED.load(Ordering::Relaxed) {
                let len = 64 + (seq % 1024) as u32;
                item_made(seq, len);
                let item = Item {
                    seq,
                    made: Instant::now(),
                    data: vec![seq as u8; len as usize],
                };
                if inputs[(seq % 2) as usize].send(item).is_err() {
                    break;
                }
                seq += 1;
                // Relaxed: a progress count read by the save loop, nothing
                // published through it.
                made_count.store(seq, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
            seq
        })
        .expect("spawn source");
    if save_loop {
        // Saves one after the other until the source stops (a crash during
        // a save, for the tests).
        // It starts once the source has made 200 items, so that a crash
        // during a save has events to dump however slowly the host started
        // the program; the loop directory appearing tells the tests so.
        while made_so_far.load(std::sync::atomic::Ordering::Relaxed) < 200 && !source.is_finished()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let dir = tape::config::trace_dir().join("loop");
        let mut n = 0u64;
        while !source.is_finished() {
            let d = dir.join(n.to_string());
            tape::save_to(&d)?;
            let _ = std::fs::remove_dir_all(&d);
            n += 1;
        }
    }
    let made = source.join().expect("source");
    for w in workers {
        w.join().expect("worker");
    }
    let done = sink.join().expect("sink");
    println!("pipeline: {made} items made, {done} done");
    if let Some(pid) = child {
        let mut status = 0;
        // SAFETY: waits for this process's own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFSIGNALED(status) {
            println!("pipeline: child ended by signal {}", libc::WTERMSIG(status));
        } else {
            println!("pipeline: child exited {}", libc::WEXITSTATUS(status));
        }
    }
    Ok(())
}
