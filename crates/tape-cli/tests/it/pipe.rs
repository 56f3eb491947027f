//! `tape pipe` (issue 16): a running program (tape's `flight` example, 4
//! threads emitting numbered, checksummed events at a steady rate into
//! shared rings) read live by another process.
//!
//! * every event printed exactly once, whole, each within 100 ms of its
//!   time (the test notes when each line arrives; plus any delay the
//!   machine imposed on every thread meanwhile, measured beside it), in
//!   time order across threads, also when the pipe is stopped inside its
//!   turns; the pipe ends when the program exits, after its last events;
//! * overwrite mode, the reader stopped (SIGSTOP) while the threads lap
//!   their rings: `[LOST n EVENTS]` lines whose counts are exactly the
//!   events missing from each thread's numbers.

use crate::flight;
use crate::pipeline;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flight::{base, checksum, flight_command, text, user_dir, wait_for_rings};
use pipeline::TAPE;

/// Runs the flight program with `env` and `args`, and `tape pipe --format
/// json` on it once its rings are made, stopping the pipe for `stop`
/// after `stop_after`; every line with the time it arrived (ns since the
/// epoch), and the program's count of events emitted. `stops`: each a
/// wait, then how long the pipe is stopped (SIGSTOP, SIGCONT). The tests
/// that call it hold [`crate::ALONE`]: each test's threads, reader and
/// checks get the machine's cores.
fn piped(
    tag: &str,
    env: &[(&str, &str)],
    args: &[&str],
    stops: &[(Duration, Duration)],
) -> (Vec<(i128, serde_json::Value)>, u64) {
    let base = base(tag);
    let mut c = flight_command(&base, env.first().map_or("overwrite", |e| e.1));
    for (k, v) in &env[1..] {
        c.env(k, v);
    }
    let mut program = c.args(args).spawn().unwrap();
    wait_for_rings(&user_dir(&base).join(program.id().to_string()), 4);
    let mut pipe = Command::new(TAPE)
        .args(["pipe", &program.id().to_string(), "--format", "json"])
        .env("TAPE_SHM_DIR", &base)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = pipe.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as i128;
            lines.push((now, serde_json::from_str(&line.unwrap()).unwrap()));
        }
        lines
    });
    for &(after, how_long) in stops {
        std::thread::sleep(after);
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(pipe.id() as i32, libc::SIGSTOP) };
        std::thread::sleep(how_long);
        // SAFETY: as above.
        unsafe { libc::kill(pipe.id() as i32, libc::SIGCONT) };
    }
    let total = emitted(&mut program);
    // The pipe ends by itself once the program exited.
    let out = pipe.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&base);
    (lines, total)
}

/// Waits for the flight program to end (a failure, with its stderr, if it
/// fails); the count of events it says it emitted.
fn emitted(program: &mut std::process::Child) -> u64 {
    let status = program.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(program.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    pipeline::number_after(
        err.lines().find(|l| l.starts_with("flight: ")).unwrap(),
        "flight: ",
    )
}

/// Per stream name: the events' sequence numbers, and the losses reported.
fn by_stream(lines: &[(i128, serde_json::Value)]) -> BTreeMap<String, (Vec<u64>, u64)> {
    let mut all: BTreeMap<String, (Vec<u64>, u64)> = BTreeMap::new();
    for (_, v) in lines {
        if let Some(n) = v.get("lost") {
            let s = v["stream"].as_str().unwrap().to_owned();
            all.entry(s).or_default().1 += n.as_u64().unwrap();
            continue;
        }
        let stream = v["stream"].as_str().unwrap();
        let name = stream.rsplit('/').next().unwrap().to_owned();
        let f = &v["fields"];
        let (thread, seq) = (f["thread"].as_u64().unwrap(), f["seq"].as_u64().unwrap());
        assert_eq!(
            f["sum"].as_u64().unwrap(),
            checksum(thread as u32, seq, f["text"].as_str().unwrap().as_bytes()),
            "a torn event: {v}"
        );
        all.entry(name).or_default().0.push(seq);
    }
    all
}

#[test]
fn every_event_once_in_order_within_100_ms() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    // 4 threads of 5 events a millisecond for 2 s: the pipe keeps up.
    // Meanwhile a thread here sleeps 1 ms at a time and notes its worst
    // wake-up delay: how long this machine itself held a runnable thread
    // off its cores (a shared VM's steal). That much lateness is the
    // machine's, not the pipe's; a pipe slow by itself fails the test.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let meter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = std::time::Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                worst = worst.max(t.elapsed().saturating_sub(Duration::from_millis(1)));
            }
            worst
        })
    };
    let (lines, total) = piped(
        "pipe-steady",
        &[("mode", "discard"), ("TAPE_TRACE_BUFSZ", "1M")],
        &["--delay", "300", "--seconds", "2", "--pace", "5"],
        &[],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stall = meter.join().unwrap().as_nanos() as i128;
    let streams = by_stream(&lines);
    assert_eq!(streams.len(), 4, "{:?}", streams.keys());
    let mut n = 0;
    for (name, (seqs, lost)) in &streams {
        assert_eq!(*lost, 0, "{name}");
        assert_eq!(seqs[0], 0, "{name}");
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "{name}: a gap or a line twice"
        );
        n += seqs.len() as u64;
    }
    assert_eq!(n, total, "every event emitted, printed once");
    // Latency: each line arrives within 100 ms of its event's time.
    let late: Vec<i128> = lines
        .iter()
        .map(|(at, v)| at - v["time_ns"].as_i64().unwrap() as i128)
        .collect();
    let worst = late.iter().max().unwrap();
    let t0 = lines[0].1["time_ns"].as_i64().unwrap() as i128;
    let slow: Vec<String> = lines
        .iter()
        .zip(&late)
        .filter(|(_, l)| **l > 50_000_000)
        .map(|((_, v), l)| {
            let t = v["time_ns"].as_i64().unwrap() as i128;
            format!(
                "{:.1} ms late at +{:.1} ms",
                *l as f64 / 1e6,
                (t - t0) as f64 / 1e6
            )
        })
        .collect();
    if !slow.is_empty() {
        eprintln!(
            "{} lines over 50 ms late: first {:?}, last {:?}",
            slow.len(),
            slow.first(),
            slow.last()
        );
    }
    let mut sorted = late.clone();
    sorted.sort();
    eprintln!(
        "{} events piped: latency median {:.1} ms, worst {:.1} ms; the machine's worst \
         wake-up delay meanwhile {:.1} ms",
        lines.len(),
        sorted[sorted.len() / 2] as f64 / 1e6,
        *worst as f64 / 1e6,
        stall as f64 / 1e6
    );
    assert!(
        *worst <= 100_000_000 + stall,
        "a line {:.1} ms late (the machine's own worst delay: {:.1} ms)",
        *worst as f64 / 1e6,
        stall as f64 / 1e6
    );
    in_time_order(&lines);
}

/// The lines are in time order across threads.
fn in_time_order(lines: &[(i128, serde_json::Value)]) {
    let times: Vec<i64> = lines
        .iter()
        .map(|(_, v)| v["time_ns"].as_i64().unwrap())
        .collect();
    let disorder = times.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(disorder, 0, "{disorder} lines before an earlier one");
}

#[test]
fn a_stopped_reader_gets_lost_lines_with_exact_counts() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    // 64 KiB rings lapped in a few milliseconds while the pipe is stopped.
    let (lines, total) = piped(
        "pipe-stopped",
        &[
            ("mode", "overwrite"),
            ("TAPE_TRACE_BUFSZ", "64K"),
            ("TAPE_TRACE_PACKETSZ", "4K"),
        ],
        &["--delay", "300", "--seconds", "2", "--pace", "20"],
        &[(Duration::from_millis(800), Duration::from_millis(400))],
    );
    let streams = by_stream(&lines);
    assert_eq!(streams.len(), 4);
    let mut n = 0;
    for (name, (seqs, lost)) in &streams {
        let missing: u64 = seqs.windows(2).map(|w| w[1] - w[0] - 1).sum::<u64>() + seqs[0];
        assert!(
            *lost > 0,
            "{name}: nothing lost while the reader was stopped"
        );
        assert_eq!(*lost, missing, "{name}: LOST lines against the numbers");
        assert!(
            seqs.windows(2).all(|w| w[1] > w[0]),
            "{name}: out of order or twice"
        );
        n += seqs.len() as u64 + lost;
    }
    assert_eq!(n, total, "emitted = printed + reported lost");
}

#[test]
fn a_reader_stopped_mid_turn_still_prints_in_time_order() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    // The pipe stopped 40 times for 15-35 ms, at moments that fall inside
    // its turns (between reading one ring and the next): lines come late,
    // never out of order, none lost (discard mode, rings big enough).
    let stops: Vec<(Duration, Duration)> = (0..40u64)
        .map(|i| {
            (
                Duration::from_millis(7 + i * 13 % 11),
                Duration::from_millis(15 + i * 7 % 21),
            )
        })
        .collect();
    let (lines, total) = piped(
        "pipe-stop-go",
        &[("mode", "discard"), ("TAPE_TRACE_BUFSZ", "1M")],
        &["--delay", "300", "--seconds", "2", "--pace", "5"],
        &stops,
    );
    let streams = by_stream(&lines);
    assert_eq!(streams.len(), 4);
    let n: u64 = streams.values().map(|(seqs, _)| seqs.len() as u64).sum();
    assert_eq!(n, total, "every event emitted, printed once");
    in_time_order(&lines);
}

#[test]
fn text_and_ftrace_lines_and_the_events_glob() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    for (format, glob, shown) in [
        ("text", "flight.*", true),
        ("text", "other.*", false),
        ("ftrace", "flight.*", true),
    ] {
        let base = base(&format!("pipe-{format}-{shown}"));
        let mut program = flight_command(&base, "overwrite")
            .args(["--delay", "200", "--seconds", "0.3", "--pace", "1"])
            .spawn()
            .unwrap();
        wait_for_rings(&user_dir(&base).join(program.id().to_string()), 4);
        let pipe = Command::new(TAPE)
            .args([
                "pipe",
                &program.id().to_string(),
                "--events",
                glob,
                "--format",
                format,
            ])
            .env("TAPE_SHM_DIR", &base)
            .output()
            .unwrap();
        assert!(program.wait().unwrap().success());
        assert!(pipe.status.success(), "{}", text(&pipe.stderr));
        let out = text(&pipe.stdout);
        if format == "ftrace" {
            // trace_pipe's lines: task-pid, seconds.microseconds, name, text.
            for l in out.lines() {
                let (task, rest) = l.trim_start().split_once(' ').unwrap();
                assert!(task.starts_with("flight-"), "{l}");
                let (time, text) = rest.trim_start().split_once(": ").unwrap();
                assert!(
                    time.split_once('.').is_some_and(|(_, us)| us.len() == 6),
                    "{l}"
                );
                assert!(text.starts_with("flight.event: thread="), "{l}");
            }
            assert!(!out.is_empty());
        } else if shown {
            let first = out.lines().next().unwrap();
            assert!(
                first.starts_with('[') && first.contains("(+?.?????????) "),
                "{first}"
            );
            assert!(
                out.lines().all(|l| l.contains(" flight.event: { tid = ")),
                "{out}"
            );
            assert!(out.lines().nth(1).unwrap().contains("] (+0."), "{out}");
        } else {
            // A glob that matches no event (yet): said, and the pipe goes
            // on (a tracepoint registered later may match it).
            assert!(out.is_empty(), "{out}");
            let err = text(&pipe.stderr);
            assert!(
                err.contains(&format!(
                    "tape pipe: --events {glob:?} matches no event of process {} yet",
                    program.id()
                )) && err.contains(": going on"),
                "{err}"
            );
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// The flight program paced (1 ms a step) for `seconds`, with rings of
/// `bufsz`, its rings made; it and its pid.
fn paced_flight(base: &Path, bufsz: &str, seconds: &str) -> (std::process::Child, String) {
    let program = flight_command(base, "overwrite")
        .env("TAPE_TRACE_BUFSZ", bufsz)
        .args(["--seconds", seconds, "--pace", "1"])
        .spawn()
        .unwrap();
    wait_for_rings(&user_dir(base).join(program.id().to_string()), 4);
    let pid = program.id().to_string();
    (program, pid)
}

/// `tape pipe PID --format json` with `extra` arguments, started.
fn json_pipe(base: &Path, pid: &str, extra: &[&str]) -> std::process::Child {
    Command::new(TAPE)
        .args(["pipe", pid, "--format", "json"])
        .args(extra)
        .env("TAPE_SHM_DIR", base)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Two JSON pipes of process `pid` in a row: the first (with `first`
/// arguments) for `run`, then stopped as `timeout` stops it (SIGTERM),
/// the second, unfiltered, until the program ends; their lines per stream.
#[allow(clippy::type_complexity)]
fn two_pipes(
    base: &Path,
    pid: &str,
    first: &[&str],
    run: Duration,
) -> (
    BTreeMap<String, (Vec<u64>, u64)>,
    BTreeMap<String, (Vec<u64>, u64)>,
) {
    let one = json_pipe(base, pid, first);
    std::thread::sleep(run);
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(one.id() as i32, libc::SIGTERM) };
    let one = one.wait_with_output().unwrap();
    assert!(one.status.success(), "{}", text(&one.stderr));
    let two = json_pipe(base, pid, &[]).wait_with_output().unwrap();
    assert!(two.status.success(), "{}", text(&two.stderr));
    (json_by_stream(&one.stdout), json_by_stream(&two.stdout))
}

/// A JSON pipe's lines, per stream ([`by_stream`]).
fn json_by_stream(out: &[u8]) -> BTreeMap<String, (Vec<u64>, u64)> {
    let lines: Vec<(i128, serde_json::Value)> = text(out)
        .lines()
        .map(|l| (0, serde_json::from_str(l).unwrap()))
        .collect();
    by_stream(&lines)
}

/// A pipe that selects (`--events`) consumes nothing: after one stopped
/// mid-run, the next, unfiltered, prints every event from the start, those
/// the first printed included, and the two agree on what both printed.
#[test]
fn a_filtered_pipe_leaves_every_event_to_the_next() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let base = base("peeked");
    let (mut program, pid) = paced_flight(&base, "4M", "2");
    let (a, b) = two_pipes(
        &base,
        &pid,
        &["--events", "flight.*"],
        Duration::from_millis(700),
    );
    let total = emitted(&mut program);
    let seen_a: usize = a.values().map(|(s, _)| s.len()).sum();
    assert!(seen_a > 0, "the filtered pipe printed nothing");
    let mut seen_b = 0u64;
    for (stream, (sb, lost)) in &b {
        assert_eq!(*lost, 0, "{stream}: the second pipe reports losses");
        // Every event of the stream, from its first, once.
        let wrong = sb.iter().zip(0..).find(|(s, k)| **s != *k);
        assert!(
            wrong.is_none(),
            "{stream}: not every event from 0: {wrong:?}"
        );
        let printed_first = a.get(stream).map_or(&[][..], |(s, _)| s.as_slice());
        assert!(
            printed_first.iter().all(|s| sb.binary_search(s).is_ok()),
            "{stream}: the first printed events the second did not find"
        );
        seen_b += sb.len() as u64;
    }
    assert_eq!(
        seen_b, total,
        "the second pipe alone: {seen_b} events of {total}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// `tape pipe` consumes, as `trace_pipe` does: a pipe stopped (SIGTERM,
/// as `timeout 1 tape pipe PID` stops it) leaves a mark in the rings
/// after the last event it printed, and the next pipe starts there. Two
/// pipes in a row print disjoint events whose union is every event the
/// program emitted, with no loss reported.
#[test]
fn two_pipes_in_a_row_print_disjoint_events_whose_union_is_all() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let base = base("consumed");
    let (mut program, pid) = paced_flight(&base, "1M", "3");
    let (a, b) = two_pipes(&base, &pid, &[], Duration::from_secs(1));
    let total = emitted(&mut program);
    let (mut seen_a, mut seen_b) = (0, 0);
    for (stream, (seqs, lost)) in &a {
        assert_eq!(*lost, 0, "{stream}: the first pipe reports losses");
        seen_a += seqs.len();
    }
    let mut union = 0u64;
    for stream in a
        .keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let none = (Vec::new(), 0);
        let (sa, _) = a.get(stream).unwrap_or(&none);
        let (sb, lost_b) = b.get(stream).unwrap_or(&none);
        assert_eq!(*lost_b, 0, "{stream}: the second pipe reports losses");
        seen_b += sb.len();
        // Disjoint, and together every number from 0 on, once.
        let mut all: Vec<u64> = sa.iter().chain(sb).copied().collect();
        all.sort_unstable();
        let n = all.len() as u64;
        let wrong = all.iter().zip(0..).find(|(s, k)| **s != *k);
        assert!(
            wrong.is_none(),
            "{stream}: not each event once: {} then {} events, the first amiss at {wrong:?}",
            sa.len(),
            sb.len()
        );
        // The first pipe's events come before the second's.
        if let (Some(last_a), Some(first_b)) = (sa.iter().max(), sb.iter().min()) {
            assert!(
                last_a < first_b,
                "{stream}: {last_a} printed by the first, {first_b} by the second"
            );
        }
        union += n;
    }
    assert!(seen_a > 0 && seen_b > 0, "{seen_a} then {seen_b} events");
    assert_eq!(
        union, total,
        "the two pipes together: {union} events of {total}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// Pipes killed (SIGKILL) mid-stream, one after another, on a program in
/// overwrite mode whose rings lap between some of them (issue 48, fault
/// 6; before, one round in ten had events printed by both pipes, and one
/// had 73,302 events printed by the killed pipe and counted lost by the
/// next): no event is both printed and counted lost, and every event
/// neither printed nor counted lost is among those said to be ones a
/// killed pipe may have printed before they were overwritten; events
/// printed twice (the one bound on "once": a pipe killed between a write
/// and the marks after it) are within a turn's events per pipe killed.
#[test]
fn pipes_killed_mid_stream_never_print_an_event_they_count_lost() {
    let _one = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let base = base("pipe-killed");
    let (mut program, pid) = paced_flight(&base, "64K", "11");
    let mut outputs: Vec<Vec<u8>> = Vec::new();
    let mut errors = String::new();
    let rounds = 8;
    for round in 0..rounds {
        let mut pipe = json_pipe(&base, &pid, &[]);
        // Read as it comes (a pipe blocked on a full stdout would be
        // killed inside its write far more often than a real one).
        let mut stdout = pipe.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stdout, &mut b);
            b
        });
        std::thread::sleep(Duration::from_millis(250 + 37 * round));
        pipe.kill().unwrap();
        let _ = pipe.wait();
        let mut out = reader.join().unwrap();
        // A line cut by the kill was not printed whole.
        let whole = out.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        out.truncate(whole);
        outputs.push(out);
        let mut err = String::new();
        std::io::Read::read_to_string(pipe.stderr.as_mut().unwrap(), &mut err).unwrap();
        errors.push_str(&err);
        // Every other gap laps the rings (about 1.3 s of events each).
        if round % 2 == 1 {
            std::thread::sleep(Duration::from_millis(1800));
        }
    }
    let last = json_pipe(&base, &pid, &[]).wait_with_output().unwrap();
    assert!(last.status.success(), "{}", text(&last.stderr));
    outputs.push(last.stdout);
    errors.push_str(&text(&last.stderr));
    let total = emitted(&mut program);
    let mut printed: BTreeMap<(String, u64), u32> = BTreeMap::new();
    let mut lost = 0u64;
    for out in &outputs {
        for (stream, (seqs, l)) in json_by_stream(out) {
            lost += l;
            for s in seqs {
                *printed.entry((stream.clone(), s)).or_default() += 1;
            }
        }
    }
    let maybe: u64 = errors
        .lines()
        .filter(|l| l.contains("that the pipe before may have printed"))
        .map(|l| pipeline::number_after(l, "tape pipe: "))
        .sum();
    let twice: u64 = printed.values().map(|&n| u64::from(n - 1)).sum();
    let distinct = printed.len() as u64;
    assert!(
        lost > 0,
        "the rings never lapped between two pipes: {errors}"
    );
    // No event both printed and counted lost; each one neither printed
    // nor counted lost is among those said maybe printed (which may have
    // been printed: the pipe was killed inside that write).
    let said = format!(
        "{distinct} printed + {lost} counted lost, {maybe} maybe printed, of {total} emitted \
         ({twice} printed twice)\n{errors}"
    );
    assert!(distinct + lost <= total, "{said}");
    assert!(total - (distinct + lost) <= maybe, "{said}");
    // One turn of 4 threads at about 1,000 events a second each: tens of
    // events; at most that for each pipe killed.
    assert!(
        twice <= 100 * rounds,
        "{twice} events printed twice over {rounds} pipes killed"
    );
    eprintln!(
        "pipes killed: {total} emitted, {distinct} printed ({twice} twice), {lost} lost, \
         {maybe} maybe printed"
    );
    let _ = std::fs::remove_dir_all(&base);
}
