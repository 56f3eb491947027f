//! Dump on crash, with real crashing children (`examples/pipeline.rs
//! --crash KIND`): a panic in a thread, a null pointer read, an abort, a
//! stack overflow, and an abort sent while the program saves in a loop.
//! Each must die exactly as it does with `TAPE_DUMP=off` (same exit code or
//! signal), and leave `<trace dir>/pipeline-crash-<pid>` that `tape check`
//! accepts and babeltrace2 reads with no warning, holding the events up to
//! the crash and, last in the crashing thread's stream, `tape.crash`.

use crate::pipeline;
use crate::shared;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use pipeline::TAPE;

fn fresh(tag: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("crash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Run {
    status: ExitStatus,
    pid: u32,
    stderr: String,
}

/// Runs the pipeline with `args`, recording, traces under `dir`; waits at
/// most 60 s (a hang is a failure).
fn run(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    signal_after: Option<(Duration, i32)>,
) -> Run {
    let mut cmd = Command::new(pipeline::binary());
    cmd.args(args)
        .env("TAPE_TRACE", "pipeline.*")
        .env("TAPE_TRACE_DIR", dir)
        .env("XDG_RUNTIME_DIR", dir)
        // The rings a crash leaves go with the test's directory.
        .env("TAPE_SHM_DIR", dir)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let start = Instant::now();
    let mut sent = false;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return Run {
                status,
                pid,
                stderr,
            };
        }
        if let Some((after, sig)) = signal_after {
            // With --save-loop: once the loop has begun (its directory is
            // made by its first save), and `after` has passed.
            let saving = !args.contains(&"--save-loop") || dir.join("loop").exists();
            if !sent && saving && start.elapsed() >= after {
                // The main thread (tid = pid): the one saving in a loop.
                // SAFETY: tgkill to our own child's main thread.
                unsafe { libc::syscall(libc::SYS_tgkill, pid as i64, pid as i64, sig as i64) };
                sent = true;
            }
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("pipeline {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How a process ended, comparably: exit code or signal.
fn ending(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(sig)) => format!("signal {sig}"),
        _ => format!("{s:?}"),
    }
}

/// Checks the dump of `run` in `dir`; returns babeltrace2's (or tape's)
/// text of it.
fn check_dump(dir: &Path, r: &Run, signal: i32, what: &str, crashing_thread: Option<&str>) {
    let dump = dir.join(format!("pipeline-crash-{}", r.pid));
    assert!(
        dump.join("metadata").exists(),
        "no dump at {}: {}",
        dump.display(),
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("tape: crash dump saved to {}", dump.display())),
        "{}",
        r.stderr
    );
    let check = Command::new(TAPE).arg("check").arg(&dump).output().unwrap();
    assert!(
        check.status.success(),
        "tape check: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let meta = std::fs::read_to_string(dump.join("metadata")).unwrap();
    assert!(
        meta.contains(&format!("tape_crash_signal = {signal};")),
        "{meta}"
    );
    assert!(meta.contains(what), "{what} not in the metadata's env");
    let text = if shared::babeltrace2("the crash dump read by babeltrace2") {
        let bt = Command::new("babeltrace2").arg(&dump).output().unwrap();
        assert!(bt.status.success());
        let err = String::from_utf8_lossy(&bt.stderr);
        assert!(err.is_empty(), "babeltrace2 warned: {err}");
        String::from_utf8_lossy(&bt.stdout).into_owned()
    } else {
        String::from_utf8_lossy(
            &Command::new(TAPE)
                .arg("show")
                .arg(&dump)
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    };
    let pipeline_events = text.lines().filter(|l| l.contains(" pipeline.")).count();
    assert!(
        pipeline_events > 50,
        "only {pipeline_events} events before the crash"
    );
    if let Some(thread) = crashing_thread {
        let own: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&format!("thread_name = \"{thread}\"")))
            .collect();
        let last = own.last().expect("the crashing thread's events");
        assert!(
            last.contains(" tape.crash: "),
            "last event of {thread}: {last}"
        );
        assert!(last.contains(&format!("signal = {signal},")), "{last}");
        assert!(last.contains(what), "{last}");
        assert_eq!(text.matches(" tape.crash: ").count(), 1);
    }
}

/// (kind, signal in the dump, text of the reason)
const CASES: &[(&str, i32, &str)] = &[
    ("panic", 0, "panicked at crates/tape/examples/pipeline.rs"),
    ("segv", libc::SIGSEGV, "SIGSEGV: address not mapped"),
    ("abort", libc::SIGABRT, "SIGABRT: aborted"),
    (
        "overflow",
        libc::SIGSEGV,
        "SIGSEGV: invalid permissions for the mapped address",
    ),
];

#[test]
fn each_crash_leaves_a_trace_and_dies_as_it_would_have() {
    for &(kind, signal, what) in CASES {
        let args = ["--crash", kind, "--crash-after", "300", "--seconds", "30"];
        let off_dir = fresh(&format!("{kind}-off"));
        let off = run(&off_dir, &args, &[("TAPE_DUMP", "off")], None);
        let dir = fresh(kind);
        let on = run(&dir, &args, &[], None);
        assert_eq!(
            ending(on.status),
            ending(off.status),
            "{kind}: the exit differs with the dump\n{}",
            on.stderr
        );
        assert!(
            !off_dir.join(format!("pipeline-crash-{}", off.pid)).exists(),
            "{kind}: TAPE_DUMP=off dumped"
        );
        if kind == "overflow" {
            assert!(
                on.stderr.contains("has overflowed its stack"),
                "{}",
                on.stderr
            );
        }
        check_dump(&dir, &on, signal, what, Some("worker-0"));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&off_dir);
    }
}

#[test]
fn two_threads_crashing_at_once_leave_one_whole_dump() {
    let args = [
        "--crash",
        "segv-both",
        "--crash-after",
        "300",
        "--seconds",
        "30",
    ];
    let off_dir = fresh("both-off");
    let off = run(&off_dir, &args, &[("TAPE_DUMP", "off")], None);
    let dir = fresh("both");
    let r = run(&dir, &args, &[], None);
    assert_eq!(ending(r.status), ending(off.status), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("tape: crash dump saved").count(),
        1,
        "{}",
        r.stderr
    );
    let dump = dir.join(format!("pipeline-crash-{}", r.pid));
    let meta = std::fs::read_to_string(dump.join("metadata")).unwrap();
    let tid: String = meta
        .lines()
        .find_map(|l| l.trim().strip_prefix("tape_crash_tid = "))
        .unwrap()
        .trim_end_matches(';')
        .to_owned();
    // The thread that dumped is one of the workers; its last event says so.
    let stats = Command::new(TAPE).arg("show").arg(&dump).output().unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    let crashed = text
        .lines()
        .filter(|l| l.contains(" tape.crash: "))
        .collect::<Vec<_>>();
    assert_eq!(crashed.len(), 1, "{crashed:?}");
    assert!(
        crashed[0].contains(&format!("tid = {tid},")),
        "{}",
        crashed[0]
    );
    check_dump(&dir, &r, libc::SIGSEGV, "SIGSEGV: address not mapped", None);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&off_dir);
}

#[test]
fn a_crash_during_a_save_never_hangs() {
    let dir = fresh("during-save");
    let r = run(
        &dir,
        &["--save-loop", "--seconds", "30"],
        &[],
        Some((Duration::from_millis(500), libc::SIGABRT)),
    );
    assert_eq!(
        ending(r.status),
        format!("signal {}", libc::SIGABRT),
        "{}",
        r.stderr
    );
    // The main thread (saving, no ring of its own) crashed: the reason is in
    // the env; its streams are whole.
    check_dump(&dir, &r, libc::SIGABRT, "SIGABRT: aborted", None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn text_mode_prints_each_threads_last_events_on_stderr() {
    for (kind, crash_line) in [
        (
            "segv",
            "tape.crash: signal=11 code=1 addr=0 what=SIGSEGV: address not mapped",
        ),
        (
            "panic",
            "tape.crash: signal=0 code=0 addr=0 what=panicked at",
        ),
    ] {
        let dir = fresh(&format!("text-{kind}"));
        let r = run(
            &dir,
            &["--crash", kind, "--crash-after", "300", "--seconds", "30"],
            &[("TAPE_DUMP", "text")],
            None,
        );
        let err = &r.stderr;
        let at = err
            .find("tape: the last events of each thread (16 at most), from ")
            .unwrap_or_else(|| panic!("{kind}: no text dump in:\n{err}"));
        // The first dump's text (a panic in a worker makes main panic too,
        // and that is a second dump).
        let text = &err[at..];
        let text = tape_test_support::text::before_first(
            text,
            &["\ntape: crash dump saved", "\nthread '"],
        );
        assert!(text.contains("#           TASK-TID"), "{text}");
        for thread in ["worker-0", "worker-1", "sink", "source"] {
            let n = text
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{thread}-")))
                .count();
            assert!(
                (1..=16).contains(&n),
                "{kind}: {n} lines of {thread}:\n{text}"
            );
        }
        let last_worker0 = text
            .lines()
            .rfind(|l| l.trim_start().starts_with("worker-0-"))
            .unwrap();
        assert!(last_worker0.contains(crash_line), "{kind}: {last_worker0}");
        check_dump(
            &dir,
            &r,
            if kind == "segv" { libc::SIGSEGV } else { 0 },
            if kind == "segv" {
                "SIGSEGV: address not mapped"
            } else {
                "panicked at"
            },
            Some("worker-0"),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
