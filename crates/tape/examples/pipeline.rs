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

use std::sync::mpsc;
use std::time::{Duration, Instant};

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

fn main() -> Result<(), tape::Error> {
    let mut seconds: Option<f64> = None;
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
            other => {
                eprintln!("pipeline: unknown argument {other:?} (accepted: --seconds N)");
                std::process::exit(2);
            }
        }
    }
    let _tape = tape::init()?;
    println!(
        "pipeline: pid {}; control it with: tape ctl {} status",
        std::process::id(),
        std::process::id()
    );
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));

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
    let source = std::thread::Builder::new()
        .name("source".into())
        .spawn(move || {
            let mut seq = 0u64;
            while deadline.is_none_or(|d| Instant::now() < d) {
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
                std::thread::sleep(Duration::from_micros(200));
            }
            seq
        })
        .expect("spawn source");
    let made = source.join().expect("source");
    for w in workers {
        w.join().expect("worker");
    }
    let done = sink.join().expect("sink");
    println!("pipeline: {made} items made, {done} done");
    Ok(())
}
