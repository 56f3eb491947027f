//! The `stacktrace` trigger end to end: the pipeline example, run with
//! `TAPE_TRIGGER`, records `tape.stacktrace` events; `tape show --format
//! ftrace` prints them as ftrace prints a `<stack trace>`, symbolised from
//! the executable the trace names, and refuses (saying why) when that file
//! is no longer the binary that ran.

use crate::pipeline;

use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline::TAPE;

/// Runs a copy of the pipeline at `exe` for 0.3 s with a stacktrace
/// trigger; the trace it saved.
fn run(exe: &Path, traces: &Path) -> PathBuf {
    let out = Command::new(exe)
        .args(["--seconds", "0.3"])
        .env("TAPE_CONTROL", "off")
        .env("TAPE_TRACE_DIR", traces)
        .env("TAPE_TRACE", "pipeline.*")
        .env(
            "TAPE_TRIGGER",
            "pipeline.worker.done stacktrace:2 if seq >= 10",
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    pipeline::only_trace(traces)
}

fn ftrace(trace: &Path) -> (String, String) {
    let out = Command::new(TAPE)
        .args(["show", "--format", "ftrace", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn stack_traces_are_recorded_and_symbolised() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("stacktrace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("traces")).unwrap();
    let exe = tmp.join("pipeline");
    std::fs::copy(pipeline::binary(), &exe).unwrap();
    let trace = run(&exe, &tmp.join("traces"));

    let (text, err) = ftrace(&trace);
    assert!(err.is_empty(), "{err}");
    let lines: Vec<&str> = text.lines().collect();
    let stacks: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].ends_with("tape.stacktrace: <stack trace>"))
        .collect();
    assert_eq!(stacks.len(), 2, "{text}");
    for &i in &stacks {
        // After the worker's event that fired it: the last event of its
        // thread before it (other threads' may come between).
        let task = |l: &str| l.split_whitespace().next().unwrap().to_owned();
        let before = lines[..i]
            .iter()
            .rfind(|l| task(l) == task(lines[i]))
            .unwrap();
        assert!(before.contains("pipeline.worker.done:"), "{before}");
        let seq = pipeline::number_after(before, "seq=");
        assert!(seq >= 10, "{before}");
        // The first frame is the tracepoint's own (tape's frames are left
        // out), then the code that hit it, up to the thread's start.
        let frames: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.starts_with(" => "))
            .map(|l| &l[4..])
            .collect();
        assert_eq!(
            frames.first(),
            Some(&"pipeline::item_worked::__hit"),
            "{frames:?}"
        );
        assert!(
            frames.iter().any(|f| f.contains("thread_start")),
            "{frames:?}"
        );
        assert!(
            !frames.iter().any(|f| f.starts_with("tape::")),
            "{frames:?}"
        );
    }

    // The file at the recorded path is no longer that binary: no names,
    // and a warning that says why.
    std::fs::copy(TAPE, &exe).unwrap();
    let (text, err) = ftrace(&trace);
    assert!(err.contains("stack traces of"), "{err}");
    assert!(err.contains("build id"), "{err}");
    assert!(!text.contains(" => pipeline::"), "{text}");
    assert!(text.contains("<stack trace>\n => 0x"), "{text}");
    let _ = std::fs::remove_dir_all(&tmp);
}
