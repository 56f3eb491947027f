//! The reader's verdict on crafted traces, one row a case: the kinds of
//! damage the mutation run (`mutants.rs`) draws at random, each made on
//! purpose here, with `tape check`'s expected verdict and message and
//! babeltrace2's verdict (checked when babeltrace2 is installed). Where
//! babeltrace2 is wrong by the specification the row says so and why.

use crate::shared;

use std::path::{Path, PathBuf};
use std::process::Command;

const META: &str = "/* CTF 1.8 */
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; map = clock.c.value; } := clk_t;
trace {
\tmajor = 1;
\tminor = 8;
\tbyte_order = le;
\tpacket.header := struct { uint32_t magic; uint32_t stream_id; };
};
clock { name = c; freq = 1000000000; offset_s = 1700000000; };
stream { id = 0; event.header := struct { uint32_t id; clk_t timestamp; }; };
event { name = \"e\"; id = 0; stream_id = 0; fields := struct { uint8_t x; }; };
";

/// One packet (no packet context: the file is the packet) of events at
/// these clock values.
fn stream(times: &[u64]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&0xC1FC_1FC1u32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    for (i, t) in times.iter().enumerate() {
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&t.to_le_bytes());
        v.push(i as u8);
    }
    v
}

struct Case {
    name: &'static str,
    metadata: Vec<u8>,
    stream: Vec<u8>,
    /// `Ok(events)` or `Err(text the error must contain)`.
    tape: Result<u64, &'static str>,
    /// Text a warning of `tape check` must contain, if any.
    warning: Option<&'static str>,
    /// babeltrace2's verdict, and why it differs from tape's when it does.
    bt2_ok: bool,
    bt2_wrong: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let base = stream(&[1000, 2000, 3000]);
    let edit = |from: &str, to: &str| -> Vec<u8> {
        assert!(META.contains(from), "{from}");
        META.replacen(from, to, 1).into_bytes()
    };
    let case = |name, metadata, tape, bt2_ok| Case {
        name,
        metadata,
        stream: base.clone(),
        tape,
        warning: None,
        bt2_ok,
        bt2_wrong: None,
    };
    let mut nul = META.as_bytes().to_vec();
    nul.splice(2..2, *b"\0");
    let mut latin1 = META.as_bytes().to_vec();
    latin1.splice(14..14, *b"/* caf\xe9 */\n");
    vec![
        case("base", META.into(), Ok(3), true),
        case(
            "duplicate trace attribute",
            edit("\tminor = 8;\n", "\tminor = 8;\n\tminor = 8;\n"),
            Err("attribute `minor` is given twice"),
            false,
        ),
        case(
            "duplicate integer attribute",
            edit("size = 8; align = 8;", "size = 8; size = 8; align = 8;"),
            Err("attribute `size` is given twice"),
            false,
        ),
        case(
            "duplicate clock attribute",
            edit("freq = 1000000000;", "freq = 1000000000; freq = 1000;"),
            Err("attribute `freq` is given twice"),
            false,
        ),
        case(
            "missing `;` after a block",
            edit("\tbyte_order = le;\n\tpacket.header := struct { uint32_t magic; uint32_t stream_id; };\n};", "\tbyte_order = le;\n\tpacket.header := struct { uint32_t magic; uint32_t stream_id; };\n}"),
            Err("expected `;`"),
            false,
        ),
        case(
            "missing `;` after the last block",
            META.trim_end().trim_end_matches(';').into(),
            Err("expected `;`"),
            false,
        ),
        case(
            "missing `;` in a field list",
            edit("uint8_t x; }", "uint8_t x }"),
            Err("expected `;`"),
            false,
        ),
        case(
            "missing `;` after an attribute",
            edit("\tminor = 8;\n", "\tminor = 8\n"),
            Err("expected `;`"),
            false,
        ),
        case(
            "missing `;` after a typealias",
            edit(":= uint8_t;", ":= uint8_t"),
            Err("expected `;`"),
            false,
        ),
        case(
            "uuid not 16 bytes",
            edit("uint32_t stream_id; };", "uint32_t stream_id; uint8_t uuid[3]; };"),
            Err("`uuid` is not an array of 16"),
            false,
        ),
        case(
            "magic not first",
            edit("{ uint32_t magic; uint32_t stream_id; }", "{ uint32_t stream_id; uint32_t magic; }"),
            Err("`magic` is not the first member"),
            false,
        ),
        case(
            "magic not 32 bits",
            edit("{ uint32_t magic;", "{ uint8_t magic;"),
            Err("`magic` is not an unsigned 32-bit integer"),
            false,
        ),
        case(
            "map to a clock that does not exist",
            edit("map = clock.c.value", "map = clock.d.value"),
            Err("names no declared clock"),
            false,
        ),
        case(
            "a NUL byte ends the metadata",
            nul,
            Err("metadata does not start with"),
            false,
        ),
        case(
            "a byte that is not UTF-8 in a comment",
            latin1,
            Ok(3),
            true,
        ),
        Case {
            name: "a clock value past what 64-bit nanoseconds hold",
            metadata: edit("offset_s = 1700000000;", "offset_s = 9223372036;"),
            stream: stream(&[1000, 2000, 1 << 62]),
            tape: Err("out of range"),
            warning: None,
            bt2_ok: false,
            bt2_wrong: None,
        },
        Case {
            name: "a stream file of 0 bytes",
            metadata: META.into(),
            stream: Vec::new(),
            tape: Ok(0),
            warning: Some("the stream file is empty (0 bytes: no packet, no event)"),
            bt2_ok: true,
            bt2_wrong: None,
        },
        Case {
            name: "time going backwards in a stream",
            metadata: META.into(),
            stream: stream(&[1000, 3000, 2000]),
            tape: Ok(3),
            warning: Some("time goes backwards 1 time(s) in this stream"),
            bt2_ok: false,
            bt2_wrong: Some(
                "CTF 1.8 does not require increasing timestamps in a stream; the \
                 ctf-testsuite's stream/pass/lttng-modules-trace has them and expects success",
            ),
        },
    ]
}

fn write(dir: &Path, c: &Case) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("metadata"), &c.metadata).unwrap();
    std::fs::write(dir.join("stream"), &c.stream).unwrap();
}

#[test]
fn crafted_traces_get_the_expected_verdicts() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("reader-table");
    let bt2 = shared::babeltrace2("checking babeltrace2's verdicts");
    let mut failures = Vec::new();
    for (i, c) in cases().iter().enumerate() {
        let dir = root.join(format!("{i:02}"));
        write(&dir, c);
        let out = Command::new(env!("CARGO_BIN_EXE_tape"))
            .arg("check")
            .arg(&dir)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        match c.tape {
            Ok(n) => {
                if !out.status.success() || !stdout.contains(&format!(", {n} events,")) {
                    failures.push(format!("{}: expected {n} events: {stdout}{stderr}", c.name));
                }
            }
            Err(m) => {
                if out.status.code() != Some(1) || !stderr.contains(m) {
                    failures.push(format!(
                        "{}: expected an error with {m:?}: {} {stdout}{stderr}",
                        c.name, out.status
                    ));
                }
            }
        }
        if let Some(w) = c.warning {
            if !stderr.contains(w) {
                failures.push(format!("{}: expected a warning {w:?}: {stderr}", c.name));
            }
        }
        if bt2 {
            let b = Command::new("babeltrace2").arg(&dir).output().unwrap();
            if b.status.success() != c.bt2_ok {
                failures.push(format!(
                    "{}: babeltrace2 {} (expected {})",
                    c.name,
                    b.status,
                    if c.bt2_ok { "success" } else { "failure" }
                ));
            }
            let agree = c.tape.is_ok() == c.bt2_ok;
            if !agree && c.bt2_wrong.is_none() {
                failures.push(format!(
                    "{}: tape and babeltrace2 disagree unexplained",
                    c.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A trace with no clock: no `[time] (+delta)` on its lines, as babeltrace2
/// prints them (tape printed `[??:??:??.?????????] (+?.?????????)`).
#[test]
fn events_without_a_clock_have_no_time() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("reader-table-no-clock");
    let metadata = META
        .replace("map = clock.c.value; ", "")
        .replace(
            "clock { name = c; freq = 1000000000; offset_s = 1700000000; };\n",
            "",
        )
        .replace(
            "uint32_t id; clk_t timestamp;",
            "uint32_t id; uint32_t stamp;",
        );
    // Events: id (u32), stamp (u32), x (u8).
    let mut stream = Vec::new();
    stream.extend_from_slice(&0xC1FC_1FC1u32.to_le_bytes());
    stream.extend_from_slice(&0u32.to_le_bytes());
    for x in 0..3u8 {
        stream.extend_from_slice(&0u32.to_le_bytes());
        stream.extend_from_slice(&7u32.to_le_bytes());
        stream.push(x);
    }
    let c = Case {
        name: "no clock",
        metadata: metadata.into_bytes(),
        stream,
        tape: Ok(3),
        warning: None,
        bt2_ok: true,
        bt2_wrong: None,
    };
    write(&root, &c);
    let tape = Command::new(env!("CARGO_BIN_EXE_tape"))
        .arg("show")
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&tape.stdout);
    assert!(
        tape.status.success(),
        "{}",
        String::from_utf8_lossy(&tape.stderr)
    );
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().all(|l| l.starts_with("e: { x = ")), "{text}");
    if let Ok(b) = Command::new("babeltrace2").arg(&root).output() {
        assert_eq!(
            text,
            String::from_utf8_lossy(&b.stdout),
            "babeltrace2's text"
        );
    }
}
