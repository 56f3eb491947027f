//! The shell blocks of the README and the guide (`docs/*.md`, in order)
//! that can run here, run as written, in order, in one shell, as a
//! newcomer following them would: each marked
//! `<!-- README test: runs as written -->` before its fence. They run in
//! a fresh home (so `~/tape-traces` holds only what they make), fresh
//! directories for shared rings and control sockets (`TAPE_SHM_DIR`,
//! `XDG_RUNTIME_DIR`: what the killed programs leave goes with it), and a
//! fresh working directory where `target` and `scripts` are the repository's,
//! with `target/opt` on the `PATH` (the README's one way to `tape`), after
//! the quickstart's program, as the README's first command runs it. Each
//! block must end with status 0 under `bash -e`; the blocks' background
//! programs are killed at the end. A block that begins `# as root` runs
//! only as root (skipped, said, otherwise). (The Rust blocks are compiled and run
//! by `tape/tests/readme.rs`.) A block is named by its page and line
//! (`docs/08-kernel.md:19`).

use crate::pipeline;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MARK: &str = "<!-- README test: runs as written -->";

/// The README, then the guide's pages in order: (path from the
/// repository's root, text).
fn pages(repo: &Path) -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    std::iter::once("README.md".to_owned())
        .chain(names.into_iter().map(|n| format!("docs/{n}")))
        .map(|p| {
            let text = std::fs::read_to_string(repo.join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

/// The marked blocks: (page:line of the fence, code).
fn marked_blocks(repo: &Path) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    for (page, text) in pages(repo) {
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if *l != MARK {
                continue;
            }
            let fence = lines.get(i + 1).copied().unwrap_or("");
            assert_eq!(
                fence,
                "```sh",
                "{page}:{}: the mark is not before a sh block",
                i + 1
            );
            let code: Vec<&str> = lines[i + 2..]
                .iter()
                .take_while(|l| **l != "```")
                .copied()
                .collect();
            blocks.push((format!("{page}:{}", i + 2), code.join("\n")));
        }
    }
    blocks
}

#[test]
fn the_readme_shell_blocks_run_as_written() {
    for tool in ["babeltrace2", "babeltrace"] {
        if Command::new(tool).arg("--help").output().is_err() {
            crate::shared::required(
                "the README's shell blocks (they run babeltrace2 and babeltrace)",
                "apt-get install babeltrace2 babeltrace",
            );
            return;
        }
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut blocks = marked_blocks(&repo);
    assert!(blocks.len() >= 10, "{} marked blocks", blocks.len());
    // The export's check needs Python's `perfetto` package.
    let perfetto = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !perfetto {
        crate::shared::required(
            "the README's check of an export (perfetto-summary.py)",
            "pip install perfetto==0.59.1",
        );
        blocks.retain(|(_, code)| !code.contains("perfetto-summary.py"));
    }
    // A block that begins `# as root` (the kernel's buffers are root's)
    // runs as root only: otherwise it is said, and a failure under
    // TAPE_REQUIRE_TOOLS=1.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        for (line, _) in blocks
            .iter()
            .filter(|(_, code)| code.starts_with("# as root"))
        {
            crate::shared::required(
                &format!("{line}'s block (it records the kernel, as root)"),
                "run the tests as root, as .ci/run does",
            );
        }
        blocks.retain(|(_, code)| !code.starts_with("# as root"));
    }
    let exe = pipeline::example("quickstart");
    let target = exe.ancestors().nth(3).unwrap().to_path_buf(); // target/
    let base = std::env::temp_dir().join(format!("tape-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (home, work) = (base.join("home"), base.join("work"));
    let (shm, run) = (base.join("shm"), base.join("run"));
    for d in [&home, &work, &shm, &run] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    std::os::unix::fs::symlink(&target, work.join("target")).unwrap();
    std::os::unix::fs::symlink(repo.join("scripts"), work.join("scripts")).unwrap();
    let mut script = String::from(
        "echo '--- the quickstart program' >&2\ntarget/opt/examples/quickstart > /dev/null\n",
    );
    for (line, code) in &blocks {
        script.push_str(&format!("echo '--- {line}' >&2\n{code}\n"));
    }
    let path = format!(
        "{}:{}",
        target.join("opt").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.args(["-e", "-c", &script])
        .current_dir(&work)
        .env("HOME", &home)
        .env("PATH", path)
        .env("XDG_RUNTIME_DIR", &run)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("TAPE_") {
            c.env_remove(k);
        }
    }
    c.env("TAPE_SHM_DIR", &shm);
    // SAFETY: setsid in the child before exec: async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        })
    };
    let mut child = c.spawn().unwrap();
    let group = child.id() as i32;
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(240) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The blocks' programs still running (the ctl block's is killed by
    // the block itself): the whole session goes.
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let status = status.unwrap_or_else(|| panic!("the README's blocks took over 240 s:\n{err}"));
    assert!(status.success(), "a README block failed ({status}):\n{err}");
    // Each ran.
    for (line, _) in &blocks {
        assert!(err.contains(&format!("--- {line}\n")), "{err}");
    }
    assert!(work.join("flight-recorded/metadata").is_file());
    assert!(work.join("traced.pftrace").is_file() && work.join("traced.json").is_file());
    assert!(!perfetto || work.join("summary.json").is_file());
    let _ = std::fs::remove_dir_all(&base);
}
