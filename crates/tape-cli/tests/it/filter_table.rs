//! One table of filter expressions (`tape-test-support/src/filter_table.rs`),
//! three places that run them, the same selection: set with `tape ctl PID
//! filter` on a running program (`examples/filter_rows.rs`) that then
//! emits the table's two rows, and with `tape show --filter` / `tape stats
//! --filter` on a trace of the same rows. The library's own evaluation (on
//! the bytes, and `Filter::for_reader`) is checked against the same table
//! in `tape/tests/filters.rs`. Invalid expressions get the same reason and
//! caret from `tape ctl` and from `tape show`.

use crate::filter_table_rows as table;
use crate::pipeline;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use pipeline::TAPE;

struct Program {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: String,
    runtime: PathBuf,
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Program {
    fn emit(&mut self) {
        writeln!(self.stdin, "emit").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "emitted\n");
    }

    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(TAPE)
            .args(["ctl", &self.pid])
            .args(args)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .output()
            .unwrap()
    }

    fn save(&self, name: &str) -> PathBuf {
        let dir = self.runtime.join(name);
        let out = self.ctl(&["save", dir.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    }
}

fn tape(args: &[&str]) -> Output {
    Command::new(TAPE).args(args).output().unwrap()
}

/// Rows A (`a = 1`) and B (`a = 255`) in `tape show`'s output.
fn rows(text: &str) -> (usize, usize) {
    let lines = || text.lines().filter(|l| l.contains("test.filter.every:"));
    (
        lines().filter(|l| l.contains("{ a = 1,")).count(),
        lines().filter(|l| l.contains("{ a = 255,")).count(),
    )
}

fn shown(trace: &Path, filter: Option<&str>) -> (usize, usize) {
    let mut args = vec![
        "show",
        "--events",
        "test.filter.every",
        trace.to_str().unwrap(),
    ];
    if let Some(f) = filter {
        args.extend(["--filter", f]);
    }
    let out = tape(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rows(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn the_same_rows_in_process_through_tape_ctl_and_at_read_time() {
    let runtime = PathBuf::from(format!("/tmp/tape-filter-table-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&runtime);
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut child = Command::new(pipeline::example("filter_rows"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("TAPE_SHM_DIR", &runtime)
        .env("TAPE_TRACE", "test.filter.every")
        .env("TAPE_TRACE_DIR", runtime.join("traces"))
        .env_remove("TAPE_CONTROL")
        .env_remove("TAPE_FILTER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let pid = first
        .trim()
        .strip_prefix("filter_rows: pid ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    let mut p = Program {
        child,
        stdin,
        stdout,
        pid,
        runtime: runtime.clone(),
    };

    // The rows, unfiltered: the trace the readers filter.
    p.emit();
    let all = p.save("all");
    assert_eq!(shown(&all, None), (1, 1));
    // What is printed can be typed back: each row's duration as the
    // ftrace text prints it (`took=6.643us`) selects that row.
    let ftrace = tape(&["show", "--format", "ftrace", all.to_str().unwrap()]);
    let ftrace = String::from_utf8_lossy(&ftrace.stdout);
    let printed: Vec<&str> = ftrace
        .lines()
        .filter_map(|l| l.split(" took=").nth(1)?.split_whitespace().next())
        .collect();
    assert_eq!(printed.len(), 2, "{ftrace}");
    for (took, want) in printed.iter().zip([(1, 0), (0, 1)]) {
        let expr = format!("took == {took}");
        assert_eq!(
            shown(&all, Some(&expr)),
            want,
            "tape show --filter {expr:?}"
        );
    }

    let mut before = (1, 1);
    for (k, &(expr, a, b)) in table::SELECTS.iter().enumerate() {
        let want = (usize::from(a), usize::from(b));
        // Set in the running program: the rows it records next.
        let out = p.ctl(&["filter", "test.filter.every", expr]);
        assert!(
            out.status.success(),
            "{expr}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        p.emit();
        let now = shown(&p.save(&format!("round-{k}")), None);
        assert_eq!(
            (now.0 - before.0, now.1 - before.1),
            want,
            "tape ctl filter {expr:?}"
        );
        before = now;
        // At read time, on the unfiltered trace, which has no CPU: a
        // filter that compares it is an error there (tests/it/filter_formats.rs).
        if expr.contains("common_cpu") {
            let out = tape(&["show", all.to_str().unwrap(), "--filter", expr]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && err.contains("these events carry no CPU"),
                "{expr}: {err}"
            );
            continue;
        }
        assert_eq!(shown(&all, Some(expr)), want, "tape show --filter {expr:?}");
        let stats = tape(&["stats", all.to_str().unwrap(), "--filter", expr]);
        let text = String::from_utf8_lossy(&stats.stdout);
        let counted = text
            .lines()
            .find_map(|l| l.strip_prefix("events: "))
            .and_then(|l| l.split(',').next())
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            counted,
            (want.0 + want.1).to_string(),
            "tape stats --filter {expr:?}"
        );
    }
    let out = p.ctl(&["filter", "test.filter.every", "--clear"]);
    assert!(out.status.success());

    // Invalid: the same reason and caret, from the program and the reader.
    for &(expr, why, col) in table::INVALID {
        let caret = format!("\n  {expr}\n  {}^", " ".repeat(col));
        let out = p.ctl(&["filter", "test.filter.every", expr]);
        assert!(!out.status.success(), "{expr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("filter for test.filter.every: "),
            "{expr}: {err}"
        );
        assert!(err.contains(why) && err.contains(&caret), "{expr}: {err}");
        let out = tape(&[
            "show",
            all.to_str().unwrap(),
            "--events",
            "test.filter.every",
            "--filter",
            expr,
        ]);
        assert!(!out.status.success(), "{expr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("tape: error: --filter: "), "{expr}: {err}");
        // The fields listed are the trace's: no `common_cpu`.
        let why = why.replace(", common_cpu)", ")");
        assert!(err.contains(&why) && err.contains(&caret), "{expr}: {err}");
    }
    drop(p);
    let _ = std::fs::remove_dir_all(&runtime);
}
