//! A stop saves the trace: a real program (`examples/pipeline.rs`, four
//! threads recording) stopped by SIGTERM, SIGINT or SIGHUP saves its trace
//! (its path on stderr, a trace `tape check` accepts holding the events up
//! to the stop), then dies of that signal, as it would have without tape
//! (128+N in a shell). The hostile cases: a second signal during the save
//! (dies at once, never hangs, never leaves a directory that looks like a
//! trace but is not one), a handler of the program's own (kept: the end of
//! `main` saves, exit 0), a signal ignored before the program started
//! (still ignored), a forked child stopped (dies as without tape, its
//! parent untouched), and `TAPE_SAVE_ON_STOP=off`.

use crate::pipeline;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The pipeline, recording into `dir`, running for `seconds` at most.
fn start(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut cmd = Command::new(pipeline::binary());
    cmd.args(["--seconds", "30"])
        .args(args)
        .env("TAPE_TRACE", "pipeline.*")
        .env("TAPE_TRACE_DIR", dir)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM", "off")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // Its first line comes after tape::init(): the handlers are in place.
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    (child, out)
}

/// Waits at most 20 s for `child` (a hang is a failure); its status and
/// stderr.
fn end(mut child: Child) -> (ExitStatus, String) {
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the program did not end within 20 s of its stop");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err)
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid as i32, sig) };
}

/// The trace directories `dir` holds (those with a metadata file) and the
/// others.
fn traces(dir: &Path) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .partition(|p| p.join("metadata").exists())
}

fn checked_events(trace: &Path) -> u64 {
    let (rc, _, err) = pipeline::tape(&["check", trace.to_str().unwrap()]);
    assert_eq!(rc, 0, "tape check {}: {err}", trace.display());
    let (_, stats, _) = pipeline::tape(&["stats", trace.to_str().unwrap()]);
    stats
        .lines()
        .find_map(|l| l.strip_prefix("events: "))
        .and_then(|l| l.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"))
}

#[test]
fn a_stop_saves_the_trace_then_dies_of_the_signal() {
    for (sig, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let dir = pipeline::temp(&format!("stop-{name}"));
        let (child, _out) = start(&dir, &[], &[]);
        std::thread::sleep(Duration::from_millis(300));
        kill(child.id(), sig);
        let (status, err) = end(child);
        assert_eq!(status.signal(), Some(sig), "{name}: {status:?}: {err}");
        assert!(
            err.contains(&format!("tape: {name} received: saving the trace")),
            "{err}"
        );
        let (saved, other) = traces(&dir);
        assert!(other.is_empty(), "{other:?}");
        assert_eq!(saved.len(), 1, "{name}: {err}");
        assert!(
            err.contains(&format!("tape: trace saved to {}", saved[0].display())),
            "{err}"
        );
        let n = checked_events(&saved[0]);
        assert!(n > 100, "{name}: only {n} events");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_second_signal_during_the_save_ends_the_program_at_once() {
    for second in [libc::SIGTERM, libc::SIGINT] {
        let dir = pipeline::temp(&format!("stop-twice-{second}"));
        // Big rings: the save takes long enough for the second signal.
        let (child, _out) = start(&dir, &[], &[("TAPE_TRACE_BUFSZ", "64M")]);
        std::thread::sleep(Duration::from_millis(300));
        let pid = child.id();
        kill(pid, libc::SIGTERM);
        kill(pid, second);
        let (status, err) = end(child);
        // Dies of one of the two, as without tape.
        assert!(
            status.signal() == Some(libc::SIGTERM) || status.signal() == Some(second),
            "{status:?}: {err}"
        );
        // A save cut short leaves no directory that looks like a trace
        // (the metadata is written last): what has one is whole.
        let (saved, _) = traces(&dir);
        for t in &saved {
            checked_events(t);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_handler_of_the_programs_own_is_kept() {
    let dir = pipeline::temp("stop-own");
    let (child, _out) = start(&dir, &["--own-stop-handler"], &[]);
    std::thread::sleep(Duration::from_millis(300));
    kill(child.id(), libc::SIGTERM);
    let (status, err) = end(child);
    assert_eq!(status.code(), Some(0), "{status:?}: {err}");
    assert!(!err.contains("received"), "{err}");
    let (saved, _) = traces(&dir);
    assert_eq!(saved.len(), 1, "{err}");
    checked_events(&saved[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_ignored_signal_stays_ignored_and_off_saves_nothing() {
    // SIGHUP ignored before the program starts (as `nohup` does).
    let dir = pipeline::temp("stop-ignored");
    let mut cmd = Command::new(pipeline::binary());
    cmd.args(["--seconds", "30"])
        .env("TAPE_TRACE", "pipeline.*")
        .env("TAPE_TRACE_DIR", &dir)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: signal is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    kill(child.id(), libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP ended it");
    kill(child.id(), libc::SIGTERM);
    let (status, err) = end(child);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{err}");
    assert_eq!(traces(&dir).0.len(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);

    // TAPE_SAVE_ON_STOP=off: dies as without tape, nothing saved or said.
    let dir = pipeline::temp("stop-off");
    let (child, _out) = start(&dir, &[], &[("TAPE_SAVE_ON_STOP", "off")]);
    std::thread::sleep(Duration::from_millis(200));
    kill(child.id(), libc::SIGTERM);
    let (status, err) = end(child);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{err}");
    assert!(err.is_empty(), "{err}");
    assert_eq!(traces(&dir), (vec![], vec![]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_forked_child_stopped_dies_as_without_tape() {
    let dir = pipeline::temp("stop-fork");
    let (child, mut out) = start(&dir, &["--fork", "--seconds", "1"], &[]);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let forked: u32 = line
        .trim()
        .strip_prefix("pipeline: child ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line:?}"));
    kill(forked, libc::SIGTERM);
    let (status, err) = end(child);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    // The parent: untouched, it ends at its time and saves once.
    assert_eq!(status.code(), Some(0), "{status:?}: {err}");
    assert!(
        rest.contains(&format!(
            "pipeline: child ended by signal {}",
            libc::SIGTERM
        )),
        "{rest}"
    );
    assert!(!err.contains("received"), "{err}");
    assert_eq!(traces(&dir).0.len(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn patterns_matching_nothing_are_said_at_start_and_again_at_the_stop() {
    let dir = pipeline::temp("stop-pending");
    // A typo of an exact name and of a glob, beside a pattern that matches:
    // the program runs; each typo is said at init with the nearest names,
    // and again when the stop ends the run.
    let (child, _out) = start(
        &dir,
        &[],
        &[(
            "TAPE_TRACE",
            "pipeline.sorce.made,pipline.*,pipeline.sink.*",
        )],
    );
    std::thread::sleep(Duration::from_millis(300));
    kill(child.id(), libc::SIGTERM);
    let (status, err) = end(child);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{err}");
    for p in ["pipeline.sorce.made", "pipline.*"] {
        assert!(
            err.contains(&format!(
                "tape: TAPE_TRACE: {p:?} matches no tracepoint yet: it enables the ones \
                 registered later (nearest: "
            )),
            "{p}: {err}"
        );
        assert!(
            err.contains(&format!(
                "tape: the pattern {p:?} matched no tracepoint in this run (nearest: "
            )),
            "{p}: {err}"
        );
    }
    assert!(err.contains("(nearest: pipeline.source.made"), "{err}");
    let (saved, _) = traces(&dir);
    assert_eq!(saved.len(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
