//! The flight recorder: threads that emit as fast as they can into shared
//! rings, a process that dies without saving, and its trace recovered.
//!
//! ```text
//! cargo build --release -p tape --example flight -p tape-cli --bin tape
//! TAPE_TRACE='flight.*' target/release/examples/flight &   # prints its pid
//! kill -9 $!                                     # no save, no dump: gone
//! target/release/tape ps --dead                  # its rings are left
//! target/release/tape recover PID                # -> flight-recovered-PID
//! target/release/tape show flight-recovered-PID | tail
//! ```
//!
//! Each of `--threads` threads (4 by default) emits `flight.event` with
//! its number, a sequence number counting from 0, a text of 0 to 47 bytes
//! made from both, and a checksum of all three: a reader can tell a torn
//! or misplaced event from a whole one, and count the missing ones from
//! the sequence numbers. `--seconds S` ends the program normally after S
//! seconds (it runs until killed without); `--pace N` sleeps 1 ms every N
//! events of a thread (as fast as it can without); `--rate R` keeps the
//! threads together at R events a second (each thread on its own share's
//! schedule, checked every 256 events: a steady rate whatever an event
//! costs, for comparing recorders); `--delay MS` waits
//! before the first event, the rings made (time for `tape record` to
//! attach); `--late MS` adds a thread (numbered after the others) that
//! makes its ring at the start and emits only after MS (a reader sees a
//! thread that stays silent, then speaks). `--tail N`: after its last
//! event, each thread waits 300 ms (a recorder has taken every event by
//! then), then emits N events too large for a packet (of rings up to
//! 16 MiB, `TAPE_TRACE_BUFSZ`'s largest here): dropped, counted as
//! lost (cause `big`) after the last event a recorder took, so a recorder
//! that counts losses only beside events misses them. At its end it says
//! how many events it emitted (those N included).

use std::time::{Duration, Instant};

tape::tracepoint! {
    /// One event of thread `thread`: the `seq`-th, with `text`, and `sum`
    /// = [`checksum`] of the three.
    pub fn flight_event(thread: u32, seq: u64, text: &str, sum: u64) = "flight.event";
}

/// FNV-1a of the thread, the sequence number and the text.
pub fn checksum(thread: u32, seq: u64, text: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in thread
        .to_le_bytes()
        .iter()
        .chain(seq.to_le_bytes().iter())
        .chain(text.iter())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The text of event `seq` of `thread`: its length and letters vary with
/// both.
fn text(thread: u32, seq: u64, buf: &mut [u8; 48]) -> usize {
    let len = ((seq.wrapping_mul(7) + u64::from(thread) * 13) % 48) as usize;
    for (i, b) in buf[..len].iter_mut().enumerate() {
        *b = b'a' + ((seq as usize + i + thread as usize) % 26) as u8;
    }
    len
}

fn main() -> Result<(), tape::Error> {
    let _tape = tape::init()?;
    let mut threads = 4u32;
    let mut seconds: Option<f64> = None;
    let mut pace: Option<u64> = None;
    let mut rate: Option<f64> = None;
    let mut delay = 0u64;
    let mut late: Option<u64> = None;
    let mut tail = 0u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| args.next().unwrap_or_else(|| panic!("{a} needs {what}"));
        match a.as_str() {
            "--threads" => threads = value("a count").parse().expect("--threads N"),
            "--seconds" => seconds = Some(value("seconds").parse().expect("--seconds S")),
            "--pace" => pace = Some(value("a count").parse().expect("--pace N")),
            "--rate" => rate = Some(value("events/s").parse().expect("--rate R")),
            "--delay" => delay = value("milliseconds").parse().expect("--delay MS"),
            "--late" => late = Some(value("milliseconds").parse().expect("--late MS")),
            "--tail" => tail = value("a count").parse().expect("--tail N"),
            other => panic!("unknown argument {other}"),
        }
    }
    println!("{}", std::process::id());
    let start = Instant::now() + Duration::from_millis(delay);
    let end = seconds.map(|s| start + Duration::from_secs_f64(s));
    let all = threads + u32::from(late.is_some());
    // Each thread's time between events when `--rate` is given.
    let gap = rate.map(|r| Duration::from_secs_f64(f64::from(threads) / r));
    let workers: Vec<_> = (0..all)
        .map(|t| {
            let begin = match late {
                Some(ms) if t == threads => start + Duration::from_millis(ms),
                _ => start,
            };
            std::thread::Builder::new()
                .name(format!("flight-{t}"))
                .spawn(move || {
                    tape::register_thread();
                    std::thread::sleep(begin.saturating_duration_since(Instant::now()));
                    let mut buf = [0u8; 48];
                    let mut seq = 0u64;
                    loop {
                        let n = text(t, seq, &mut buf);
                        let s = std::str::from_utf8(&buf[..n]).expect("ASCII letters");
                        flight_event(t, seq, s, checksum(t, seq, s.as_bytes()));
                        seq += 1;
                        if seq % 1024 == 0 && end.is_some_and(|e| Instant::now() >= e) {
                            break;
                        }
                        if pace.is_some_and(|p| seq % p == 0) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        if let Some(gap) = gap.filter(|_| seq % 256 == 0) {
                            let due = begin + gap.mul_f64(seq as f64);
                            let now = Instant::now();
                            if due > now {
                                std::thread::sleep(due - now);
                            }
                        }
                    }
                    if tail > 0 {
                        std::thread::sleep(Duration::from_millis(300));
                        // Larger than any packet of a ring up to 16 MiB
                        // (a packet is at most half its ring).
                        let big = "x".repeat(8 << 20 | 1);
                        for _ in 0..tail {
                            flight_event(t, seq, &big, 0);
                            seq += 1;
                        }
                    }
                    seq
                })
                .expect("spawn")
        })
        .collect();
    let mut total = 0;
    for w in workers {
        total += w.join().expect("a worker panicked");
    }
    eprintln!("flight: {total} events emitted");
    Ok(())
}
