//! The latency tracers: a section's worst case and a wakeup pair's, each
//! kept with a snapshot of the rings taken when it happened.
//!
//! ```text
//! cargo build --release -p tape --example latency -p tape-cli --bin tape
//! TAPE_TRACE_DIR=/tmp/t target/release/examples/latency
//! target/release/tape ctl PID latency          # while it runs (--forever)
//! target/release/tape show /tmp/t/latency-*-latency/request.handle-*
//! ```
//!
//! A dispatcher (the main thread) hands a request to one of `--workers`
//! threads every 200 µs (`app.req.arrive`, keyed by its id); the worker
//! handles it inside the section `request.handle` (`app.step` events at
//! its start and end, a short spin between), then replies
//! (`app.req.reply`). Two requests are made slow on purpose, so the worst
//! cases are known in advance: request `--worst-request` spins
//! `--worst-ms` inside its section (the section's maximum), and request
//! `--slow-reply` waits `--slow-reply-ms` after its section, before its
//! reply (the wakeup pair `request`'s maximum, from arrive to reply).
//! The latency tracer is on and the pair set up unless the environment
//! says otherwise (`TAPE_LATENCY`, `TAPE_WAKEUP`, `TAPE_TRACE`).
//! `--no-wait` ends as soon as the workers are done, without waiting for
//! the snapshots (`tape::latency::wait_for_snapshots`) nor printing the
//! table: tape takes the pending snapshots at the exit.
//!
//! It prints its pid first; at the end, each worker's thread id, then
//! `tape ctl`'s latency table.

use std::sync::mpsc;
use std::time::{Duration, Instant};

tape::tracepoint! {
    /// A step of a request's handling.
    #[format("request={request} stage={stage}")]
    pub fn step(request: u64, stage: u32) = "app.step";
    /// A request arrived (the dispatcher).
    pub fn arrive(id: u64) = "app.req.arrive";
    /// A request was answered (a worker).
    pub fn reply(id: u64) = "app.req.reply";
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

struct Args {
    requests: u64,
    workers: u64,
    worst_request: u64,
    worst: Duration,
    slow_reply: u64,
    slow_reply_wait: Duration,
    forever: bool,
    /// End at once, without waiting for the snapshots nor printing the
    /// table (as a program that knows nothing of them).
    no_wait: bool,
}

fn args() -> Args {
    let mut a = Args {
        requests: 600,
        workers: 3,
        worst_request: 301,
        worst: Duration::from_millis(20),
        slow_reply: 452,
        slow_reply_wait: Duration::from_millis(40),
        forever: false,
        no_wait: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{flag} takes a number"))
        };
        match flag.as_str() {
            "--requests" => a.requests = value(),
            "--workers" => a.workers = value().max(1),
            "--worst-request" => a.worst_request = value(),
            "--worst-ms" => a.worst = Duration::from_millis(value()),
            "--slow-reply" => a.slow_reply = value(),
            "--slow-reply-ms" => a.slow_reply_wait = Duration::from_millis(value()),
            "--forever" => a.forever = true,
            "--no-wait" => a.no_wait = true,
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn main() -> Result<(), tape::Error> {
    // The environment's settings, else these.
    let mut config = tape::Config::from_env()?;
    if std::env::var_os("TAPE_TRACE").is_none() {
        config = config.enable("app.*").enable("latency.*");
    }
    if std::env::var_os("TAPE_LATENCY").is_none() {
        config = config.latency(tape::config::Latency {
            on: Some(true),
            ..Default::default()
        });
    }
    if std::env::var_os("TAPE_WAKEUP").is_none() {
        config = config.wakeup("request", "app.req.arrive", "app.req.reply", "id");
    }
    let _tape = config.init()?;
    let a = args();
    println!("latency: pid {}", std::process::id());
    std::io::Write::flush(&mut std::io::stdout()).ok();
    let (tids_tx, tids_rx) = mpsc::channel();
    let mut queues = Vec::new();
    let mut workers = Vec::new();
    for w in 0..a.workers {
        let (tx, rx) = mpsc::channel::<u64>();
        queues.push(tx);
        let tids_tx = tids_tx.clone();
        let (worst_request, worst) = (a.worst_request, a.worst);
        let (slow_reply, slow_reply_wait) = (a.slow_reply, a.slow_reply_wait);
        workers.push(
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    let tid = unsafe { libc::gettid() };
                    tids_tx.send((w, tid)).unwrap();
                    for id in rx {
                        {
                            let _s = tape::latency::section!("request.handle");
                            step(id, 0);
                            spin(if id == worst_request {
                                worst
                            } else {
                                Duration::from_micros(20 + id % 7 * 10)
                            });
                            step(id, 1);
                        }
                        if id == slow_reply {
                            std::thread::sleep(slow_reply_wait);
                        }
                        reply(id);
                    }
                })
                .expect("a worker thread"),
        );
    }
    drop(tids_tx);
    let mut tids: Vec<(u64, i32)> = tids_rx.iter().take(a.workers as usize).collect();
    tids.sort();
    let mut id = 0;
    while a.forever || id < a.requests {
        arrive(id);
        queues[(id % a.workers) as usize].send(id).unwrap();
        id += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    drop(queues);
    for w in workers {
        w.join().unwrap();
    }
    if a.no_wait {
        return Ok(());
    }
    if !tape::latency::wait_for_snapshots(Duration::from_secs(10)) {
        eprintln!("latency: snapshots still pending after 10 s");
    }
    for (w, tid) in tids {
        println!("worker {w} tid {tid}");
    }
    print!("{}", tape::latency::report());
    Ok(())
}
