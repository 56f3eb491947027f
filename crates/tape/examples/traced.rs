//! The function tracer: `#[tape::traced]` functions, methods and a module,
//! recorded on two threads and drawn by `tape graph` as ftrace's
//! function_graph draws a kernel's calls.
//!
//! ```text
//! cargo build --release -p tape --example traced -p tape-cli --bin tape
//! TAPE_TRACE='fn.*,app.*' TAPE_TRACE_DIR=/tmp/t target/release/examples/traced
//! target/release/tape graph /tmp/t/traced-*
//! ```
//!
//! Each thread serves `--requests N` requests (3 by default): a request is
//! parsed (a leaf), looked up in a store (a method, with a recursive
//! helper), and answered; an `app.reply` event inside the call shows as a
//! comment. A request whose key is 0 returns early; one whose key is 13
//! panics inside the store, caught by the caller: the exits are recorded all
//! the same. An async function polled twice shows as two polls of one
//! call (its call id). `parse` records its argument and its return value,
//! `Store::get` its return value (funcgraph-args, funcgraph-retval).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

tape::tracepoint! {
    /// A request was answered.
    #[format("key={key} value={value}")]
    pub fn reply(key: u64, value: u64) = "app.reply";
}

#[tape::traced(args(line), ret)]
fn parse(line: &str) -> u64 {
    line.trim().parse().unwrap_or(0)
}

struct Store;

#[tape::traced]
impl Store {
    #[tape::traced(ret)]
    fn get(&self, key: u64) -> u64 {
        if key == 13 {
            panic!("key 13 is unlucky");
        }
        self.fold(key % 4)
    }

    fn fold(&self, n: u64) -> u64 {
        if n == 0 {
            return 1;
        }
        n * self.fold(n - 1)
    }

    #[tape::notrace]
    fn name(&self) -> &'static str {
        "store"
    }
}

#[tape::traced]
mod serve {
    use super::*;

    pub fn request(store: &Store, line: &str) -> Option<u64> {
        let key = parse(line);
        if key == 0 {
            return None;
        }
        let value = std::panic::catch_unwind(|| store.get(key)).ok()?;
        reply(key, value);
        Some(value)
    }
}

/// Ready at its second poll.
struct Twice(bool);

impl Future for Twice {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[tape::traced]
async fn fetch(key: u64) -> u64 {
    Twice(false).await;
    key + 1
}

/// Polls `f` to completion on this thread.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn main() -> Result<(), tape::Error> {
    let _tape = tape::init()?;
    let mut requests = 3u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--requests" => {
                requests = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--requests N")
            }
            other => panic!("unknown argument {other}"),
        }
    }
    // The panic of key 13 is expected: keep its message off stderr.
    std::panic::set_hook(Box::new(|_| {}));
    let workers: Vec<_> = (0..2u64)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || {
                    let store = Store;
                    let _ = store.name();
                    let mut sum = 0;
                    for i in 0..requests {
                        let key = match i % 5 {
                            0 => 0,
                            3 => 13,
                            _ => i + t + 1,
                        };
                        sum += serve::request(&store, &format!("{key}\n")).unwrap_or(0);
                    }
                    sum + block_on(fetch(t))
                })
                .expect("spawn")
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}
