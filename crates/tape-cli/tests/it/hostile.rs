//! The reader under hostile input and hostile output, through the `tape`
//! binary: every case runs `check`, `show` and `stats` with a time limit
//! and must end with the expected status and message, never a signal, a
//! panic (status 101) or a hang.
//!
//! Inputs are generated: metadata that nests deep, aliases that expand
//! exponentially, symbolic links that loop; outputs that fail: a full disk
//! (`/dev/full`) and a reader that closes the pipe.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HEAD: &str = "/* CTF 1.8 */\n\
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n\
trace { major = 1; minor = 8; byte_order = le; };\n";

/// A trace whose one event class has `fields`, and a stream of `bytes`
/// bytes of 7 (a whole number of events).
fn trace(name: &str, fields: &str, bytes: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("hostile-reader")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let meta = format!("{HEAD}event {{ name = \"e\"; fields := {fields}; }};\n");
    std::fs::write(dir.join("metadata"), meta).unwrap();
    std::fs::write(dir.join("stream"), vec![7u8; bytes]).unwrap();
    dir
}

/// `depth` structs, one inside the other, around a `uint8_t`.
fn nested(kind: &str, depth: usize) -> String {
    let mut s = String::new();
    for i in 0..depth {
        match kind {
            "struct" => s.push_str("struct { "),
            _ => s.push_str(&format!(
                "struct {{ enum : uint8_t {{ x = 7 }} t{i}; variant <t{i}> {{ "
            )),
        }
    }
    s.push_str("uint8_t x; ");
    for i in (0..depth).rev() {
        match kind {
            "struct" => s.push_str(if i == 0 { "}" } else { "} a; " }),
            // The option is named after the tag's one label.
            _ => s.push_str(if i == 0 { "} v; }" } else { "} v; } x; " }),
        }
    }
    s
}

/// Runs `tape ARGS`, stdout to `stdout`; (status, stderr).
fn tape(args: &[&str], stdout: Stdio) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tape"))
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tape");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("tape {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status.code(), reader.join().unwrap())
}

#[test]
fn adversarial_metadata_is_a_clean_error() {
    let deep_dims = format!("struct {{ uint8_t x{}; }}", "[1]".repeat(100_000));
    let mut chain = String::new();
    for i in 1..=1000 {
        chain.push_str(&format!("typealias struct {{ A{} x; }} := A{i};\n", i - 1));
    }
    let mut doubling = String::new();
    for i in 1..=40 {
        doubling.push_str(&format!(
            "typealias struct {{ B{0} a; B{0} b; }} := B{i};\n",
            i - 1
        ));
    }
    let enum_chain = format!(
        "struct {{ {}uint8_t{} x; }}",
        "enum : ".repeat(5000),
        " { a = 7 }".repeat(5000)
    );
    // (name, extra metadata before the event, fields, expected message)
    let cases: Vec<(&str, String, String, &str)> = vec![
        (
            "structs-5000",
            String::new(),
            nested("struct", 5000),
            "nest more than 256",
        ),
        (
            "variants-5000",
            String::new(),
            nested("variant", 5000),
            "nest more than 256",
        ),
        (
            "dimensions-100000",
            String::new(),
            deep_dims,
            "nest more than 256",
        ),
        (
            "alias-chain-1000",
            "typealias uint8_t := A0;\n".to_owned() + &chain,
            "struct { A1000 x; }".into(),
            "nest more than 256",
        ),
        (
            "aliases-doubling-40",
            "typealias uint8_t := B0;\n".to_owned() + &doubling,
            "struct { B40 x; }".into(),
            "expand to more than",
        ),
        (
            "enum-containers-5000",
            String::new(),
            enum_chain,
            "nest more than 256",
        ),
    ];
    for (name, extra, fields, message) in cases {
        let dir = trace(name, "struct { uint8_t x; }", 1);
        let meta = format!("{HEAD}{extra}event {{ name = \"e\"; fields := {fields}; }};\n");
        std::fs::write(dir.join("metadata"), meta).unwrap();
        let d = dir.to_str().unwrap();
        for cmd in ["check", "show", "stats"] {
            let start = Instant::now();
            let (code, err) = tape(&[cmd, d], Stdio::null());
            assert_eq!(code, Some(1), "{name}: tape {cmd}: {err}");
            assert!(err.contains(message), "{name}: tape {cmd}: {err}");
            assert!(err.contains("line "), "{name}: no position: {err}");
            assert!(start.elapsed() < Duration::from_secs(5), "{name}: slow");
        }
    }
}

/// Metadata of 400,000 comments on one line (2.8 MB; babeltrace2 reads
/// it in 0.2 s): read in linear time (the lexer once looked back to the
/// line's start after each comment: 50 s), and the position of an error
/// after them is right.
#[test]
fn many_comments_are_read_in_linear_time() {
    let dir = trace("comments-400000", "struct { uint8_t x; }", 7);
    let comments = "/* c */".repeat(400_000);
    let meta =
        format!("{HEAD}{comments}event {{ name = \"e\"; fields := struct {{ uint8_t x; }}; }};\n");
    std::fs::write(dir.join("metadata"), &meta).unwrap();
    let start = Instant::now();
    let (code, err) = tape(&["check", dir.to_str().unwrap()], Stdio::null());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    // An error after them names its line and column (the comments' bytes,
    // the last of two lines, two spaces, then the error).
    let two_lines = "/* a\nb */".repeat(2);
    std::fs::write(
        dir.join("metadata"),
        format!("{HEAD}{comments}{two_lines}  @"),
    )
    .unwrap();
    let (code, err) = tape(&["check", dir.to_str().unwrap()], Stdio::null());
    assert_eq!(code, Some(1), "{err}");
    let line = HEAD.lines().count() + 1 + 2;
    let column = "b */".len() + 2 + 1;
    assert!(
        err.contains(&format!("line {line}, column {column}")),
        "{err}"
    );
}

/// A traced call whose depth is damaged (a flipped bit: 3,925,868,544) is
/// a clear error from `tape graph` and `tape profile`, naming the stream
/// and the position, not an abort allocating 44 GB or 800 MB of
/// indentation; a depth within the limit draws.
#[test]
fn a_damaged_call_depth_is_a_clear_error() {
    for (name, depth, ok) in [
        ("depth-ok", 3u32, true),
        ("depth-flipped", 3_925_868_544, false),
    ] {
        let dir = trace(name, "struct { uint8_t x; }", 0);
        let meta = format!(
            "{HEAD}typealias integer {{ size = 32; align = 8; signed = false; }} := uint32_t;\n\
             event {{ name = \"fn.app.f.entry\"; id = 0; fields := struct {{ uint32_t depth; }}; }};\n"
        );
        std::fs::write(dir.join("metadata"), meta).unwrap();
        let mut stream = Vec::new();
        for d in [0, depth] {
            stream.extend_from_slice(&d.to_le_bytes());
        }
        std::fs::write(dir.join("stream"), stream).unwrap();
        let d = dir.to_str().unwrap();
        for cmd in ["graph", "profile"] {
            let (code, err) = tape(&[cmd, d], Stdio::null());
            if ok {
                assert_eq!(code, Some(0), "{name}: tape {cmd}: {err}");
            } else {
                assert_eq!(code, Some(1), "{name}: tape {cmd}: {err}");
                assert!(
                    err.contains("depth 3925868544") && err.contains("stream: packet at byte 0"),
                    "{name}: tape {cmd}: {err}"
                );
            }
        }
    }
}

/// The deepest nesting allowed decodes everywhere, on the worker threads
/// of `tape show` too (their stacks are smaller than the main thread's).
#[test]
fn the_deepest_allowed_nesting_decodes() {
    // (kind, depth, bytes an event takes)
    for (kind, depth, size) in [("struct", 255, 1), ("variant", 127, 128)] {
        let dir = trace(
            &format!("{kind}-{depth}"),
            &nested(kind, depth),
            10_000 * size,
        );
        let d = dir.to_str().unwrap();
        let (code, err) = tape(&["check", d], Stdio::null());
        assert_eq!(code, Some(0), "{kind} {depth}: {err}");
        let out = Command::new(env!("CARGO_BIN_EXE_tape"))
            .args(["show", d])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 10_000);
    }
}

#[test]
fn symbolic_link_loops_are_walked_once() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-reader/loops");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let t = trace("loops-trace", "struct { uint8_t x; }", 281);
    let inner = root.join("trace");
    std::fs::rename(&t, &inner).unwrap();
    std::os::unix::fs::symlink(&root, root.join("up")).unwrap();
    std::os::unix::fs::symlink(&root, inner.join("back")).unwrap();
    std::os::unix::fs::symlink(&inner, root.join("again")).unwrap();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_tape"))
        .args(["check", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.trim(), "ok: 1 trace(s), 281 events, 0 lost");
}

/// A full disk is an error (status 1, a message); a closed pipe ends the
/// command quietly (status 0, nothing on stderr); in every subcommand and
/// format.
#[test]
fn output_errors_are_never_success_nor_panics() {
    let dir = trace("output", "struct { uint8_t x; }", 2_000_000);
    let d = dir.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["show", d],
        &["show", "--format", "json", d],
        &["show", "--format", "ftrace", d],
        &["stats", d],
        &["check", d],
    ];
    for args in commands {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let (code, err) = tape(args, Stdio::from(full));
        assert_eq!(code, Some(1), "{args:?} > /dev/full: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    // A reader that closes the pipe after some output (`| head -c 4096`),
    // or before any (`| true`): every subcommand, and clap's own output.
    let mut closing: Vec<&[&str]> = commands.to_vec();
    closing.extend([&["--help"][..], &["--version"], &["stats", "--help"]]);
    for args in closing {
        for read in [4096, 0] {
            let mut child = Command::new(env!("CARGO_BIN_EXE_tape"))
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut head = vec![0u8; read];
            let mut stdout = child.stdout.take().unwrap();
            // Short outputs end before 4096 bytes: then all was read.
            let _ = stdout.read_exact(&mut head);
            drop(stdout);
            let out = child.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{args:?} | head -c {read}");
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                "",
                "{args:?} | head -c {read}"
            );
        }
    }
}

/// Events a tape recorder lost outside any stream (its ring could not be
/// allocated...) are counted in the trace's `env`; `tape stats` adds them to
/// the losses and names their causes.
#[test]
fn stats_shows_the_losses_outside_streams() {
    let dir = trace("env-losses", "struct { uint8_t x; }", 5);
    let meta = format!(
        "{HEAD}env {{ tracer_name = \"tape\"; events_dropped_ring_alloc = 1000; \
         events_dropped_without_ring = 2; events_lost_with_exited_threads = 0; }};\n\
         event {{ name = \"e\"; fields := struct {{ uint8_t x; }}; }};\n"
    );
    std::fs::write(dir.join("metadata"), meta).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tape"))
        .args(["stats", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("events: 5, lost: 1002\n"), "{text}");
    assert!(
        text.contains(
            "lost outside any stream: 1002 (events_dropped_ring_alloc = 1000, \
             events_dropped_without_ring = 2)"
        ),
        "{text}"
    );
}
