//! The README's and the guide's programs cannot drift from the library:
//! each Rust block is a whole program, compiled and run as a doctest
//! (`lib.rs` includes the README and every page of `docs/` under
//! `cfg(doctest)`: checked here), but for "Enable, record, save", which
//! writes a trace: it is `examples/readme.rs` as it is (checked here),
//! built by `cargo test` and run here, with its trace directory set, as a
//! user would run it.

use std::path::{Path, PathBuf};
use std::process::Command;

const EXAMPLE: &str = include_str!("../examples/readme.rs");
const LIB: &str = include_str!("../src/lib.rs");

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README and the guide's pages (`docs/*.md`, in order): (path from
/// the root, text).
fn pages() -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    std::iter::once("README.md".to_owned())
        .chain(names.into_iter().map(|n| format!("docs/{n}")))
        .map(|p| {
            let text = std::fs::read_to_string(root().join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

/// The Rust blocks of the README and the guide: (info string, code).
fn rust_blocks() -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    for (_, text) in pages() {
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            let Some(info) = l.strip_prefix("```") else {
                continue;
            };
            let mut code = String::new();
            for l in lines.by_ref().take_while(|l| *l != "```") {
                code.push_str(l);
                code.push('\n');
            }
            if info.starts_with("rust") {
                blocks.push((info.to_owned(), code));
            }
        }
    }
    blocks
}

#[test]
fn every_page_is_compiled_by_the_doctests() {
    for (path, _) in pages() {
        let include = format!("#[doc = include_str!(\"../../../{path}\")]");
        assert!(LIB.contains(&include), "lib.rs's guide module lacks {path}");
    }
}

#[test]
fn the_readme_shows_the_example_as_it_is() {
    let blocks = rust_blocks();
    assert!(blocks.len() >= 4, "{blocks:?}");
    // Every block is a whole program, as a user would paste it (rustdoc
    // compiles it as it is: items outside `main`).
    for (_, code) in &blocks {
        assert!(code.contains("\nfn main()"), "{code}");
    }
    // The one that saves is run here, not by rustdoc (it writes a trace).
    let saving: Vec<_> = blocks.iter().filter(|(i, _)| i == "rust,no_run").collect();
    assert_eq!(saving.len(), 1, "{blocks:?}");
    assert_eq!(saving[0].1, EXAMPLE, "README and examples/readme.rs differ");
}

/// The example binary `cargo test` built beside this test.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    profile.join("examples").join("readme")
}

fn run(dir: &Path, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let _ = std::fs::remove_dir_all(dir);
    let mut cmd = Command::new(example());
    cmd.env("TAPE_TRACE_DIR", dir);
    for v in ["TAPE_TRACE", "TAPE_TRACE_BUFSZ", "TAPE_TRACE_MODE"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run examples/readme");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_readme_program_leaves_one_trace_with_its_events() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-run");
    let (code, stdout, stderr) = run(&dir, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let traces: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(traces.len(), 1, "{traces:?}\n{stderr}");
    let trace = traces[0].as_ref().unwrap().path();
    assert_eq!(stdout, format!("saved to {}\n", trace.display()));
    assert_eq!(stderr, "", "nothing to say");
    let t = tape_ctf::metadata::find_traces(&trace).unwrap();
    let mut events = 0;
    for mut s in tape_ctf::decode::open_streams(&t).unwrap() {
        events += s.count().unwrap().events;
    }
    assert_eq!(events, 1001);
}

#[test]
fn the_readme_program_prints_a_bad_variable_as_a_message() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-bad");
    let (code, _, stderr) = run(&dir, &[("TAPE_TRACE_BUFSZ", "4X")]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("Error: TAPE_TRACE_BUFSZ=\"4X\": at byte 1: unknown unit; accepted: "),
        "{stderr}"
    );
    assert!(!stderr.contains("kind"), "{stderr}");
}
