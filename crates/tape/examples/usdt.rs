//! A tape program seen by a USDT tool (issue 40): it waits until a tool
//! (bpftrace, perf, gdb) attaches to its `usdt_demo.request` tracepoint's
//! SDT probe (`--list` says the program's probes, `provider:name`)
//! (with `--traced`, also to its traced function's entry,
//! `fn:usdt_serve_entry`) (and, with `--go-line`, until a line on its stdin: the kernel
//! counts a uprobe in the probe's semaphore slightly before the tool's
//! program runs at it), emits `--events N` (default 100) events, then
//! waits until the tool detaches and says its tracepoint's state word
//! before and after (with `--leave`, it ends at once: `perf record --
//! PROGRAM` detaches when the program ends). `--bench N` times N events instead (the same one, in
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

/// Serves one request: a traced function, whose entry and exit are the
/// SDT probes `fn:usdt_serve_entry` and `fn:usdt_serve_exit` (their
/// argument: the event's payload, a pointer and a size; here the call
/// depth, a `u32`).
#[tape::traced]
fn serve(id: u64) {
    let status = [Status::Ok, Status::NotFound, Status::Failed][(id % 3) as usize];
    request(id, &format!("/items/{}", id * 7), status);
}

/// The tracepoint of the SDT probe `provider:name`.
fn probe(provider: &str, name: &str) -> &'static tape::Tracepoint {
    tape::__private::usdt::USDT_SITES
        .iter()
        .find(|s| s.provider == provider && s.name == name)
        .map(|s| s.tracepoint)
        .expect("a probe of this program")
}

/// Waits (at most `limit`) until the tools of the SDT probes of `points`
/// are all attached (`on`) or all gone; whether it came to that.
fn wait_for(points: &[&tape::Tracepoint], on: bool, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if points
            .iter()
            .all(|tp| tape::__private::usdt::attached(tp).is_some_and(|(_, _, a)| a == on))
        {
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
    let mut leave = false;
    let mut watched: Vec<&tape::Tracepoint> = vec![&request::TRACEPOINT];
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
            "--leave" => leave = true,
            "--list" => {
                for s in tape::__private::usdt::USDT_SITES.iter() {
                    println!("{}:{}", s.provider, s.name);
                }
                _tape.disarm(); // a listing, not a run: nothing to save
                return Ok(());
            }
            "--traced" => watched.push(probe("fn", "usdt_serve_entry")),
            other => panic!("unknown argument {other}"),
        }
    }
    println!("{}", std::process::id());
    if let Some(n) = bench {
        if wait && !wait_for(&watched, true, Duration::from_secs(60)) {
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
    // The state words of the watched tracepoints, as `0x..,0x..`.
    let states = |points: &[&tape::Tracepoint]| {
        let words: Vec<String> = points
            .iter()
            .map(|tp| format!("{:#x}", tp.state()))
            .collect();
        words.join(",")
    };
    let before = states(&watched);
    if !wait_for(&watched, true, Duration::from_secs(60)) {
        eprintln!("usdt: no tool attached within 60 s");
        std::process::exit(2);
    }
    eprintln!("usdt: attached");
    if go_line {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    for id in 0..events {
        serve(id);
    }
    eprintln!("usdt: emitted {events}");
    if leave {
        return Ok(());
    }
    let gone = wait_for(&watched, false, Duration::from_secs(60));
    let after = states(&watched);
    eprintln!(
        "usdt: tool {}; state before {before} after {after}",
        if gone {
            "detached"
        } else {
            "still attached after 60 s"
        }
    );
    Ok(())
}
