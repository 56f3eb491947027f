//! A tape program seen by a USDT tool (issue 40): it waits until a tool
//! (bpftrace, perf, gdb) attaches to its `usdt_demo.request` tracepoint's
//! SDT probe (and, with `--go-line`, until a line on its stdin: the kernel
//! counts a uprobe in the probe's semaphore slightly before the tool's
//! program runs at it), emits `--events N` (default 100) events, then
//! waits until the tool detaches and says its tracepoint's state word
//! before and after. `--bench N` times N events instead (the same one, in
//! a loop: `scripts/usdt-cost.sh` runs it with and without a tool) and
//! says the nanoseconds per event; with `--wait` it waits for a tool
//! first.
//!
//! ```text
//! cargo build --profile opt -p tape --example usdt
//! TAPE_TRACE='usdt_demo.*' target/opt/examples/usdt &
//! sudo bpftrace -e 'usdt:target/opt/examples/usdt:usdt_demo:request {
//!     printf("%d %s %d\n", arg0, str(arg1, arg2), arg3); }'
//! ```

use std::time::{Duration, Instant};

/// How a request ended.
#[derive(tape::Enum, Clone, Copy, Debug)]
#[repr(u8)]
pub enum Status {
    /// Served.
    Ok = 0,
    /// Nothing at that path.
    NotFound = 1,
    /// An error.
    Failed = 2,
}

tape::tracepoint! {
    /// A request served: its id, its path, how it ended.
    pub fn request(id: u64, path: &str, status: Status) = "usdt_demo.request";
}

/// Waits (at most `limit`) until the SDT probe's tool is attached (`on`)
/// or gone; whether it came to that.
fn wait_for(on: bool, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if tape::usdt::attached(&request::TRACEPOINT).is_some_and(|(_, _, a)| a == on) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn main() -> Result<(), tape::Error> {
    let _tape = tape::init()?;
    let mut events = 100u64;
    let mut go_line = false;
    let mut bench: Option<u64> = None;
    let mut wait = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => {
                events = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--events N")
            }
            "--go-line" => go_line = true,
            "--bench" => bench = args.next().and_then(|n| n.parse().ok()),
            "--wait" => wait = true,
            other => panic!("unknown argument {other}"),
        }
    }
    println!("{}", std::process::id());
    if let Some(n) = bench {
        if wait && !wait_for(true, Duration::from_secs(60)) {
            eprintln!("usdt: no tool attached within 60 s");
            std::process::exit(2);
        }
        let path = "/items/42";
        let t = Instant::now();
        for id in 0..n {
            request(
                std::hint::black_box(id),
                std::hint::black_box(path),
                Status::Ok,
            );
        }
        let ns = t.elapsed().as_nanos() as f64;
        eprintln!("usdt: {n} events, {:.1} ns/event", ns / n as f64);
        return Ok(());
    }
    let before = request::TRACEPOINT.state();
    if !wait_for(true, Duration::from_secs(60)) {
        eprintln!("usdt: no tool attached within 60 s");
        std::process::exit(2);
    }
    eprintln!("usdt: attached");
    if go_line {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    for id in 0..events {
        let status = [Status::Ok, Status::NotFound, Status::Failed][(id % 3) as usize];
        request(id, &format!("/items/{}", id * 7), status);
    }
    eprintln!("usdt: emitted {events}");
    let gone = wait_for(false, Duration::from_secs(60));
    let after = request::TRACEPOINT.state();
    eprintln!(
        "usdt: tool {}; state before {before:#x} after {after:#x}",
        if gone {
            "detached"
        } else {
            "still attached after 60 s"
        }
    );
    Ok(())
}
