//! `tape record` (issue 16): a running program (tape's `flight` example,
//! 4 threads of numbered, checksummed events in shared rings) streamed to
//! a trace on disk by another process, for longer than its rings hold.
//!
//! * discard mode, the recorder keeping up: every event emitted is in the
//!   trace, exactly once, none lost (the program's own count of events
//!   emitted against the trace's);
//! * overwrite mode, the recorder stopped (SIGSTOP) while the program
//!   laps its rings: the losses counted exactly (`emitted = recorded +
//!   counted`, per thread) and where they happened, as babeltrace2 reports
//!   them;
//! * one recorder per process; a recorder killed mid-recording leaves the
//!   rings to the next (its claim broken) and the program's own save at
//!   exit works; `--duration` ends a recording of a running process.

use crate::flight;
use crate::pipeline;
use crate::shared;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use flight::{base, flight_command, streams_of, tape, text, user_dir, wait_for_rings};
use pipeline::TAPE;

fn record(shm: &Path, pid: u32, out: &Path, extra: &[&str]) -> Child {
    let mut c = reader(
        shm,
        &["record", &pid.to_string(), "-o", out.to_str().unwrap()],
    );
    c.args(extra).spawn().unwrap()
}

/// `tape args…` reading the rings under `shm`, its output captured.
fn reader(shm: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(TAPE);
    c.args(args)
        .env("TAPE_SHM_DIR", shm)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The events the flight program says it emitted.
fn emitted(stderr: &str) -> u64 {
    pipeline::number_after(
        stderr
            .lines()
            .find(|l| l.starts_with("flight: "))
            .unwrap_or_else(|| panic!("{stderr}")),
        "flight: ",
    )
}

fn stopped(c: Child) -> (String, String) {
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

#[test]
fn discard_mode_records_every_event_once_while_the_recorder_keeps_up() {
    let base = base("rec-discard");
    let shm = base.clone();
    // 1 MiB rings: a run of 2 s holds many times that.
    let mut program = flight_command(&shm, "discard")
        .env("TAPE_TRACE_BUFSZ", "1M")
        .env("TAPE_TRACE_PACKETSZ", "64K")
        .args(["--delay", "300", "--seconds", "2", "--pace", "50"])
        .spawn()
        .unwrap();
    wait_for_rings(&user_dir(&shm).join(program.id().to_string()), 4);
    let out = base.join("trace");
    let recorder = record(&shm, program.id(), &out, &[]);
    let status = program.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(program.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let total = emitted(&err);
    let (said, _) = stopped(recorder);
    assert!(said.contains("(the process exited)"), "{said}");
    assert!(said.contains("lost: 0\n"), "{said}");
    // Longer than the rings: 4 threads x 1 MiB.
    let bytes = pipeline::number_after(&said, "bytes: ");
    assert!(bytes > 8 << 20, "{said}");
    let check = tape(&["check", out.to_str().unwrap()], &shm);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let streams = streams_of(&out);
    assert_eq!(streams.len(), 4);
    let mut recorded = 0;
    for (name, s) in &streams {
        assert_eq!(s.seqs[0], 0, "{name}");
        assert!(
            s.seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "{name}: a gap or a duplicate"
        );
        assert_eq!(s.last_discarded, 0, "{name}");
        recorded += s.seqs.len() as u64;
    }
    assert_eq!(recorded, total, "every event emitted, once");
    assert_eq!(pipeline::number_after(&said, "events: "), total, "{said}");
    if shared::babeltrace2("babeltrace2's reading of the recorded trace") {
        assert!(flight::babeltrace2_losses(&out, "discard").is_empty());
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn overwrite_mode_losses_while_the_recorder_is_stopped_are_counted_exactly() {
    let base = base("rec-overwrite");
    let shm = base.clone();
    let mut program = flight_command(&shm, "overwrite")
        .env("TAPE_TRACE_BUFSZ", "256K")
        .env("TAPE_TRACE_PACKETSZ", "16K")
        .args(["--delay", "300", "--seconds", "2", "--pace", "20"])
        .spawn()
        .unwrap();
    wait_for_rings(&user_dir(&shm).join(program.id().to_string()), 4);
    let out = base.join("trace");
    let recorder = record(&shm, program.id(), &out, &[]);
    // The recorder stopped for 0.5 s: the program laps its 256 KiB rings
    // meanwhile (about 80 events of ~40 bytes a millisecond a thread).
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: as above.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGCONT) };
    let status = program.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(program.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let total = emitted(&err);
    let (said, _) = stopped(recorder);
    let streams = streams_of(&out);
    assert_eq!(streams.len(), 4);
    let bt = shared::babeltrace2("babeltrace2's count of the losses");
    let bt_lost = if bt {
        flight::babeltrace2_losses(&out, "overwrite")
    } else {
        BTreeMap::new()
    };
    let (mut recorded, mut lost) = (0, 0);
    for (name, s) in &streams {
        let last = *s.seqs.last().unwrap();
        let n = s.seqs.len() as u64;
        // Every event of the thread: recorded, or counted lost.
        assert_eq!(last + 1, n + s.last_discarded, "{name}");
        assert!(s.last_discarded > 0, "{name}: the stop lost nothing");
        // The losses are where the gaps are: a gap in the numbers is a
        // packet that says so (its events_discarded grew).
        let gaps: u64 = s.seqs.windows(2).map(|w| w[1] - w[0] - 1).sum::<u64>() + s.seqs[0];
        assert_eq!(gaps, s.last_discarded, "{name}");
        if bt {
            let file = name.rsplit('/').next().unwrap();
            assert_eq!(bt_lost.get(file).copied(), Some(s.last_discarded), "{name}");
        }
        recorded += n;
        lost += s.last_discarded;
    }
    assert_eq!(recorded + lost, total);
    assert!(
        said.contains(&format!("lost: {lost} (overwritten {lost})")),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn one_recorder_at_a_time_and_a_killed_one_leaves_the_rings_usable() {
    let base = base("rec-hostile");
    let shm = base.clone();
    let mut program = flight_command(&shm, "discard")
        .env("TAPE_TRACE_BUFSZ", "256K")
        .env("TAPE_TRACE_PACKETSZ", "16K")
        .env("TAPE_CONTROL", "on")
        .args(["--seconds", "3", "--pace", "10"])
        .spawn()
        .unwrap();
    let pid = program.id();
    wait_for_rings(&user_dir(&shm).join(pid.to_string()), 4);
    let mut first = record(&shm, pid, &base.join("first"), &[]);
    std::thread::sleep(Duration::from_millis(300));
    // A second recorder is refused, naming the first.
    let second = Command::new(TAPE)
        .args([
            "record",
            &pid.to_string(),
            "-o",
            base.join("second").to_str().unwrap(),
        ])
        .env("TAPE_SHM_DIR", &shm)
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(
        text(&second.stderr).contains(&format!(
            "already read by tape record or tape pipe (pid {})",
            first.id()
        )),
        "{}",
        text(&second.stderr)
    );
    // The program names its recorder.
    let status = Command::new(TAPE)
        .args(["ctl", &pid.to_string(), "status"])
        .output()
        .unwrap();
    assert!(
        text(&status.stdout).contains(&format!("(streamed by tape record, pid {})", first.id())),
        "{}{}",
        text(&status.stdout),
        text(&status.stderr)
    );
    // Killed mid-recording: a third one takes over, for a while.
    first.kill().unwrap();
    first.wait().unwrap();
    let third = record(&shm, pid, &base.join("third"), &["--duration", "0.5"]);
    let (said, _) = stopped(third);
    assert!(said.contains("(--duration reached)"), "{said}");
    assert!(
        program.try_wait().unwrap().is_none(),
        "the program still runs"
    );
    let c = tape(&["check", base.join("third").to_str().unwrap()], &shm);
    assert!(c.status.success(), "{}", text(&c.stderr));
    // The program ends normally and saves its own trace.
    let status = program.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(program.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success() && err.contains("trace saved to"), "{err}");
    // A process that is not running is not recorded.
    let r = Command::new(TAPE)
        .args([
            "record",
            &pid.to_string(),
            "-o",
            base.join("late").to_str().unwrap(),
        ])
        .env("TAPE_SHM_DIR", &shm)
        .output()
        .unwrap();
    assert!(!r.status.success());
    let _ = std::fs::remove_dir_all(&base);
}

/// A recorder's walk of a ring (`Ring::write_packets`) takes the packets
/// closed when it began, not those its owner closes meanwhile: one that
/// chased them held a ring for as long as its writes barely kept up with
/// the owner, and the recorder's other rings filled and dropped (seen: a
/// walk of 320 ms while the other ring of two dropped 1.78 M events).
/// Here the walk's "write" takes 5 ms a packet while the program fills a
/// packet in well under 1 ms: a chasing walk never ends (this one stops it
/// after 100 packets), a bounded one hands at most the ring's packets.
#[test]
fn a_recorders_walk_takes_the_packets_closed_when_it_began() {
    let shm = base("rec-walk");
    let mut program = flight_command(&shm, "discard")
        .args(["--threads", "1", "--seconds", "30", "--rate", "400000"])
        .spawn()
        .unwrap();
    let dir = user_dir(&shm).join(program.id().to_string());
    wait_for_rings(&dir, 1);
    let ring_file = &tape::__consumer::shm::ring_files(&dir).unwrap()[0];
    let ring = tape::__consumer::Ring::open_live(ring_file).unwrap();
    let packets = ring.capacity() / ring.packet_capacity();
    // Its 64 KiB ring full (discard mode: it waits for the reader).
    std::thread::sleep(Duration::from_millis(300));
    let mut handed = 0;
    let until = std::time::Instant::now() + Duration::from_secs(1);
    let walked = ring.write_packets((0, 0), false, true, until, |_, _, _, _| {
        handed += 1;
        std::thread::sleep(Duration::from_millis(5));
        handed < 100
    });
    let still_running = program.try_wait().unwrap().is_none();
    let _ = program.kill();
    let _ = program.wait();
    assert!(walked.is_ok(), "the walk stopped: {walked:?}");
    assert!(still_running, "the program ended during the walk");
    assert!(
        (1..=packets).contains(&handed),
        "{handed} packets handed by one walk of a ring of {packets}"
    );
    let _ = std::fs::remove_dir_all(&shm);
}

/// Where the events dropped after the last event a reader took are
/// counted: `-o`'s trace, the relay's trace, `tape pipe`'s `[LOST]` lines.
#[derive(Clone, Copy, Debug)]
enum Sink {
    Dir,
    Relay,
    Pipe,
}

/// Events dropped after the last event a reader took, the program ending
/// then (flight's `--tail`: events too large for a packet, counted `big`):
/// no later packet carries their count, yet every reader counts them. The
/// relay's feed skipped a chunk without events, losses and all, so a
/// stream ending in drops lost their count (here 0 of 6 counted before
/// the fix; likely, not proven, the loss without a count seen at 10 M
/// events/s: docs/13).
#[test]
fn losses_after_the_last_event_taken_are_counted_by_every_reader() {
    const THREADS: u64 = 2;
    const TAIL: u64 = 3;
    for sink in [Sink::Dir, Sink::Relay, Sink::Pipe] {
        let tag = format!("rec-tail-{sink:?}").to_lowercase();
        let (base, relayd, shm) = match sink {
            Sink::Relay => match crate::relay::set_up(&tag) {
                Some((base, relayd, shm)) => (base, Some(relayd), shm),
                None => continue,
            },
            _ => {
                let base = base(&tag);
                (base.clone(), None, base)
            }
        };
        // Rings that hold the whole run (~25,000 events of ~60 bytes a
        // thread): the only losses are the tail's.
        let mut program = flight_command(&shm, "discard")
            .env("TAPE_TRACE_BUFSZ", "4M")
            .args([
                "--threads",
                &THREADS.to_string(),
                "--tail",
                &TAIL.to_string(),
            ])
            .args(["--delay", "300", "--seconds", "0.5", "--pace", "50"])
            .spawn()
            .unwrap();
        wait_for_rings(
            &user_dir(&shm).join(program.id().to_string()),
            THREADS as usize,
        );
        let pid = program.id().to_string();
        let trace = base.join("trace");
        let consumer = match sink {
            Sink::Dir => record(&shm, program.id(), &trace, &[]),
            Sink::Relay => {
                let url = relayd.as_ref().expect("set up above").url();
                reader(&shm, &["record", &pid, "--relayd", &url, "--hostname", "h"])
                    .spawn()
                    .unwrap()
            }
            // Into a file: a pipe the test read only at the end would
            // stop `tape pipe`, and the rings would drop what it could
            // not take.
            Sink::Pipe => reader(&shm, &["pipe", &pid, "--format", "json"])
                .stdout(std::fs::File::create(base.join("pipe.json")).unwrap())
                .spawn()
                .unwrap(),
        };
        let status = program.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(program.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{err}");
        let total = emitted(&err);
        let out = consumer.wait_with_output().unwrap();
        let said = text(&out.stdout);
        assert!(
            out.status.success(),
            "{sink:?}: {said}{}",
            text(&out.stderr)
        );
        let (events, lost) = match sink {
            Sink::Pipe => {
                let (mut events, mut lost) = (0, 0);
                let lines = std::fs::read_to_string(base.join("pipe.json")).unwrap();
                for line in lines.lines() {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    match v.get("lost") {
                        Some(n) => lost += n.as_u64().unwrap(),
                        None => events += 1,
                    }
                }
                (events, lost)
            }
            Sink::Dir | Sink::Relay => {
                let on_disk = relayd.as_ref().map_or(trace.clone(), |r| r.out.join("h"));
                let stats = tape(&["stats", on_disk.to_str().unwrap()], &shm);
                let stats = text(&stats.stdout);
                if shared::babeltrace2("babeltrace2's reading of the losses at the end") {
                    let by_bt2: u64 = flight::babeltrace2_losses(&on_disk, "tail").values().sum();
                    assert_eq!(by_bt2, THREADS * TAIL, "{sink:?}: babeltrace2's count");
                }
                let line = stats.lines().find(|l| l.starts_with("events: ")).unwrap();
                (
                    pipeline::number_after(line, "events: "),
                    pipeline::number_after(line, "lost: "),
                )
            }
        };
        assert_eq!(lost, THREADS * TAIL, "{sink:?}: the losses at the end");
        assert_eq!(
            events + lost,
            total,
            "{sink:?}: every event taken or counted"
        );
        drop(relayd);
        let _ = std::fs::remove_dir_all(&base);
    }
}
