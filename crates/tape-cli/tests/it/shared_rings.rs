//! Rings in shared files (the default; `TAPE_SHM=on` says when one cannot
//! be): a real
//! multi-threaded program (the pipeline example) makes one file per
//! thread's ring in a private directory (0700, files 0600, each starting
//! with the `TAPERING` header); a normal exit removes the directory, a
//! `kill -9` leaves it; the trace the program saves is the same as with
//! private rings.

use crate::pipeline;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn run(shm: &Path, traces: &Path) -> Command {
    let mut c = Command::new(pipeline::binary());
    c.env("TAPE_SHM", "on")
        .env("TAPE_SHM_DIR", shm)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_TRACE", "pipeline.*")
        .env("TAPE_TRACE_DIR", traces)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn ring_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn rings_live_in_private_files_that_outlive_a_kill() {
    let base =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("shm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    // SAFETY: geteuid has no preconditions.
    let user = base.join(format!("tape-{}", unsafe { libc::geteuid() }));

    // A normal exit: the trace is saved, the directory removed.
    let out = run(&base, &base.join("traces"))
        .args(["--seconds", "0.3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("not shared"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        ring_files(&user).is_empty(),
        "left: {:?}",
        ring_files(&user)
    );
    let traces = ring_files(&base.join("traces"));
    assert_eq!(traces.len(), 1);
    let shown = Command::new(pipeline::TAPE)
        .args(["stats", traces[0].to_str().unwrap()])
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&shown.stdout);
    assert!(stats.contains("pipeline.worker.done"), "{stats}");

    // Killed: the rings stay, one file per thread, private.
    let mut child = run(&base, &base.join("traces-killed"))
        .args(["--seconds", "30"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let dir = user.join(pid.to_string());
    let t = std::time::Instant::now();
    while ring_files(&dir).len() < 6 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let files: Vec<PathBuf> = ring_files(&dir)
        .into_iter()
        .filter(|f| {
            f.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("ring-")
        })
        .collect();
    assert!(files.len() >= 4, "{files:?}");
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&user).unwrap().mode() & 0o777, 0o700);
    for f in &files {
        let m = std::fs::metadata(f).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600, "{}", f.display());
        let bytes = std::fs::read(f).unwrap();
        assert_eq!(&bytes[..8], b"TAPERING", "{}", f.display());
        let pid_in = u32::from_ne_bytes(bytes[16..20].try_into().unwrap());
        assert_eq!(pid_in, pid);
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn past_the_cap_rings_are_made_in_private_memory_with_a_notice() {
    let base =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("shm-cap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    // SAFETY: geteuid has no preconditions.
    let user = base.join(format!("tape-{}", unsafe { libc::geteuid() }));
    // Rings of 64 KiB (72 KiB files with the header and slot metadata):
    // a cap of 100 KiB holds one.
    let out = run(&base, &base.join("traces"))
        .env("TAPE_TRACE_BUFSZ", "64K")
        .env("TAPE_SHM_MAX", "100K")
        .args(["--seconds", "0.3"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.matches("not shared (TAPE_SHM)").count(),
        1,
        "one notice: {err}"
    );
    assert!(
        err.contains("would pass TAPE_SHM_MAX (102400 bytes"),
        "{err}"
    );
    // Every thread traced all the same: the saved trace has the 4 streams.
    assert!(ring_files(&user).is_empty(), "removed at exit");
    let traces = ring_files(&base.join("traces"));
    let streams = std::fs::read_dir(&traces[0])
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name() != "metadata")
        .count();
    assert_eq!(streams, 4);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn by_default_rings_past_the_cap_are_private_quietly_and_said_by_status_and_recover() {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shm-quiet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    // No TAPE_SHM: shared rings are the default; the cap holds one ring of
    // the pipeline's 4.
    let mut cmd = run(&base, &base.join("traces"));
    cmd.env_remove("TAPE_SHM")
        .env_remove("TAPE_CONTROL")
        .env("XDG_RUNTIME_DIR", &base)
        .env("TAPE_TRACE_BUFSZ", "64K")
        .env("TAPE_SHM_MAX", "100K")
        .args(["--seconds", "30"]);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let ctl = |args: &[&str]| {
        Command::new(pipeline::TAPE)
            .args(args)
            .env("XDG_RUNTIME_DIR", &base)
            .env("TAPE_SHM_DIR", &base)
            .output()
            .unwrap()
    };
    let start = std::time::Instant::now();
    let status = loop {
        let out = ctl(&["ctl", &pid.to_string(), "status"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains("rings in private memory: 3 (")
            || start.elapsed() > Duration::from_secs(20)
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.contains("rings in private memory: 3 (") && status.contains("TAPE_SHM_MAX"),
        "{status}"
    );
    child.kill().unwrap();
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(!err.contains("not shared"), "quiet by default: {err}");
    let recovered = base.join("recovered");
    let out = ctl(&[
        "recover",
        &pid.to_string(),
        "-o",
        recovered.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("  streams: 1\n"), "{said}");
    assert!(
        said.contains("rings in private memory (not seen: past TAPE_SHM_MAX, or no room): 3;"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&base);
}
