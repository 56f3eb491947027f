//! Conformance: `tape check`, `tape show` and `tape stats` on every trace of
//! the public CTF suites in
//! `../shared/ctf-suites` (ctf-testsuite's 1.8 regression traces and
//! babeltrace's test traces), driven by `manifest.tsv`: a `pass` trace must
//! exit 0, a `fail` trace exit 1 with a message; none may crash or take more
//! than 10 s; `show` and `stats` must end as `check` does. The traces are
//! GPL test data, used in place, never copied.
//!
//! Known deviations are listed below with their reason; the test fails if
//! one of them starts to conform (update the list) or if any other trace
//! deviates.

use crate::shared;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Traces where tape does not do what the manifest expects, and why.
const KNOWN: &[(&str, &str)] = &[(
    "babeltrace/tests/data/ctf-traces/deterministic-ordering/b-not-corrupted+c-corrupted",
    "traces with the same UUID are not merged into one (duplicate packets not dropped)",
)];

fn suites() -> Option<PathBuf> {
    shared::suite("manifest.tsv").map(|m| m.parent().unwrap().to_path_buf())
}

/// Runs `tape CMD` on `paths` with a time limit: exit code, or None on a
/// crash (signal) or time-out.
fn run(cmd: &str, paths: &[PathBuf]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tape"))
        .arg(cmd)
        .args(paths)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tape");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut err));
            return (status.code(), err);
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "timed out".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn ctf_suites_conform() {
    let Some(root) = suites() else {
        return;
    };
    let manifest = std::fs::read_to_string(root.join("manifest.tsv")).unwrap();
    let mut tally = std::collections::BTreeMap::<String, (u32, u32)>::new();
    let mut deviations = Vec::new();
    for line in manifest.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (rel, expected) = (cols[0], cols[1]);
        let path = root.join(rel);
        // `dir/a+b`: a run on two traces together.
        let paths = if path.exists() {
            vec![path]
        } else {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let dir = path.parent().unwrap();
            name.split('+').map(|n| dir.join(n)).collect()
        };
        let (code, err) = run("check", &paths);
        let want = match expected {
            "pass" | "pass(live)" => 0,
            _ => 1,
        };
        assert!(code.is_some(), "{rel}: crashed or hung: {err}");
        // `show` (parallel decoding) and `stats` (streams counted apart)
        // end the same way as `check`.
        for cmd in ["show", "stats"] {
            let (c, e) = run(cmd, &paths);
            assert_eq!(
                c, code,
                "{rel}: `tape {cmd}` ends otherwise than `tape check`: {e}"
            );
        }
        if code == Some(1) {
            assert!(
                err.contains("tape: error:"),
                "{rel}: exit 1 without a message"
            );
        }
        let kind = if want == 0 { "pass" } else { "fail" };
        let e = tally.entry(kind.into()).or_default();
        if code == Some(want) {
            e.0 += 1;
        } else {
            e.1 += 1;
            deviations.push(rel.to_owned());
        }
    }
    for (kind, (ok, bad)) in &tally {
        eprintln!("{kind} traces: {ok} as expected, {bad} not");
    }
    let known: Vec<&str> = KNOWN.iter().map(|(p, _)| *p).collect();
    for d in &deviations {
        assert!(
            known.contains(&d.as_str()),
            "{d}: does not do what the manifest expects"
        );
    }
    for k in &known {
        assert!(
            deviations.iter().any(|d| d == k),
            "{k} conforms now: remove it from KNOWN"
        );
    }
}
