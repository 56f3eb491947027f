//! The program the control and crash tests drive: tape's
//! `examples/pipeline.rs`, built beside the tests by `cargo test
//! --workspace`.

#![allow(dead_code)] // each test uses what it needs

use std::path::{Path, PathBuf};

/// The `tape` binary under test.
pub const TAPE: &str = env!("CARGO_BIN_EXE_tape");

/// The pipeline example's binary (a clear failure if it was not built).
pub fn binary() -> PathBuf {
    example("pipeline")
}

/// The binary of tape's example `name`, built beside the tests by `cargo
/// test --workspace` (a clear failure if it was not).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let p = profile.join("examples").join(name);
    assert!(
        p.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (which builds tape's examples)",
        p.display()
    );
    p
}

/// Runs `example` (a tape example's command) saving into `dir`, with no
/// control socket and no shared rings; its trace (a failure, with its
/// stderr, if it fails).
pub fn saved(example: std::process::Command, dir: &Path) -> PathBuf {
    run_saving(example, dir);
    only_trace(dir)
}

/// Runs `example` as [`saved`] does; what it printed (a failure, with its
/// stderr, if it fails).
pub fn run_saving(mut example: std::process::Command, dir: &Path) -> std::process::Output {
    let out = example
        .env("TAPE_TRACE_DIR", dir)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `tape ARGS`: (exit status, stdout, stderr).
pub fn tape(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(TAPE)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh (removed if there) temporary directory path for a test:
/// `tape-<tag>-<pid>`.
pub fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tape-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs tape example `name` with `args` and `env`, saving into `dir`; its
/// trace ([`saved`]).
pub fn record(name: &str, args: &[&str], env: &[(&str, &str)], dir: &Path) -> PathBuf {
    let mut c = std::process::Command::new(example(name));
    c.args(args).envs(env.iter().copied());
    saved(c, dir)
}

/// The one trace a program saved into `dir` (a failure if there is not
/// exactly one).
pub fn only_trace(dir: &Path) -> PathBuf {
    let mut traces: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    traces.pop().unwrap()
}

/// The number written after `key` in an event's text line (`seq = 42,` or
/// `seq=42 `): the digits that follow it. Panics if there are none.
pub fn number_after(line: &str, key: &str) -> u64 {
    let rest = line
        .split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no {key:?} in {line}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {key:?} in {line}"))
}
