//! A program instrumented with `tracing` (spans, events, an instrumented
//! future that moves between threads), recorded into tape's rings through
//! `tape-tracing` and saved as a tape trace at exit.
//!
//! ```text
//! cargo build --release -p tape-tracing --example tracing_spans -p tape-cli --bin tape
//! TAPE_TRACE='tracing.*' TAPE_TRACE_DIR=/tmp/t target/release/examples/tracing_spans
//! target/release/tape graph /tmp/t/tracing_spans-*       # spans as function_graph calls
//! target/release/tape export /tmp/t/tracing_spans-* --format perfetto -o spans.pftrace
//! ```
//!
//! Two worker threads each serve `--requests N` requests (3 by default):
//! a `request` span (fields `id`, then `status` recorded later) holding a
//! `parse` span, an event, and a `#[tape::traced]` function (which nests
//! under the spans: one depth for both). Then a future instrumented with a
//! `fetch` span is polled once on each worker: one span, one call id, two
//! running intervals on two threads. With `--seconds N` the workers serve
//! requests for N seconds (one a millisecond each) instead, for `tape ctl`
//! to enable and disable the callsites while it runs. With `--wait-usdt`
//! it first waits for a USDT tool on `tape:runtime_event`, the SDT probe of
//! tracepoints made at run time:
//!
//! ```text
//! target/release/examples/tracing_spans --wait-usdt &
//! sudo bpftrace -p $! -e 'usdt:target/release/examples/tracing_spans:tape:runtime_event {
//!     @[str(arg0, arg1)] = count(); }'        # then press Enter for the program
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tracing::Instrument;
use tracing_subscriber::prelude::*;

#[tape::traced]
fn checksum(line: &str) -> u64 {
    line.bytes().map(u64::from).sum()
}

fn serve(worker: u64, i: u64) -> u64 {
    let id = worker * 100 + i;
    let span = tracing::info_span!(target: "app", "request", id, status = tracing::field::Empty);
    let _in = span.enter();
    let line = format!("GET /item/{id}");
    let key = {
        let _p = tracing::debug_span!(target: "app", "parse").entered();
        let key = line.rsplit('/').next().and_then(|k| k.parse::<u64>().ok());
        tracing::debug!(target: "app", key, "parsed");
        key.unwrap_or(0)
    };
    let sum = checksum(&line);
    if key % 2 == 0 {
        tracing::info!(target: "app", key, sum, ok = true, "served");
    } else {
        tracing::warn!(target: "app", key, "odd key");
    }
    span.record("status", 200u64);
    sum
}

/// A future that is pending at its first poll, ready at its second.
struct TwoPolls(bool);

impl Future for TwoPolls {
    type Output = u64;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u64> {
        tracing::info!(target: "app", second = self.0, "polled");
        if self.0 {
            Poll::Ready(7)
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

type Task = Pin<Box<dyn Future<Output = u64> + Send>>;

/// Polls `task` once on this thread.
fn poll_once(task: &Mutex<Task>) -> Poll<u64> {
    let mut cx = Context::from_waker(Waker::noop());
    task.lock().unwrap().as_mut().poll(&mut cx)
}

fn main() -> Result<(), tape::Error> {
    let _tape = tape::init()?;
    tracing_subscriber::registry()
        .with(tape_tracing::layer())
        .init();
    let mut requests = 3u64;
    let mut seconds = None;
    let mut wait_usdt = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = || args.next().and_then(|v| v.parse().ok());
        match a.as_str() {
            "--requests" => requests = number().expect("--requests N"),
            "--seconds" => seconds = Some(number().expect("--seconds N")),
            "--wait-usdt" => wait_usdt = true,
            other => panic!("unknown argument {other}"),
        }
    }
    // `--wait-usdt`: says its pid, waits (at most 60 s) for a USDT tool on
    // `tape:runtime_event` (the events of `tracing`'s callsites), then for
    // a line on stdin (the tool's program runs slightly after the kernel
    // counts it in the probe's semaphore).
    if wait_usdt {
        println!("{}", std::process::id());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !tape::__private::usdt::attached(&tape::__private::usdt::runtime_event::TRACEPOINT)
            .is_some_and(|a| a.2)
        {
            if std::time::Instant::now() > until {
                eprintln!("tracing_spans: no USDT tool within 60 s");
                std::process::exit(2);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    // `--seconds N`: serve for N seconds, a request a millisecond per
    // worker, so that `tape ctl` can change what records meanwhile.
    let until = seconds.map(|s| {
        let pid = std::process::id();
        println!("tracing_spans: pid {pid}; control it with: tape ctl {pid} status");
        std::time::Instant::now() + std::time::Duration::from_secs(s)
    });
    let fetch: Task = Box::pin(
        TwoPolls(false).instrument(tracing::info_span!(target: "app", "fetch", item = 42u64)),
    );
    let fetch = Arc::new(Mutex::new(fetch));
    // Each worker serves its requests, then polls the shared future: the
    // first worker's poll is pending, the second's ready (they take turns).
    let turn = Arc::new((Mutex::new(0u64), std::sync::Condvar::new()));
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let (fetch, turn) = (fetch.clone(), turn.clone());
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    let sum: u64 = match until {
                        None => (0..requests).map(|i| serve(w, i)).sum(),
                        Some(until) => (0..)
                            .take_while(|_| std::time::Instant::now() < until)
                            .map(|i| {
                                std::thread::sleep(std::time::Duration::from_millis(1));
                                serve(w, i)
                            })
                            .sum(),
                    };
                    let (lock, cv) = &*turn;
                    let mut t = cv.wait_while(lock.lock().unwrap(), |t| *t != w).unwrap();
                    let polled = poll_once(&fetch);
                    *t += 1;
                    cv.notify_all();
                    sum + matches!(polled, Poll::Ready(_)) as u64
                })
                .expect("spawn")
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}
