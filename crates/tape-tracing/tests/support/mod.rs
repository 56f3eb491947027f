//! What the tape-tracing tests share: tape recording into a temporary
//! directory, and babeltrace2 reading a trace (skipped with a notice when
//! it is not installed, a failure under `TAPE_REQUIRE_TOOLS=1`).

use std::path::{Path, PathBuf};

use tape_test_support::skipped;

/// tape recording into a fresh temporary directory named after `tag` (no
/// control socket, no shared rings, no save at exit); the directory.
#[allow(dead_code)] // not every test binary records so
pub fn tape_in(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tape-tracing-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    tape::Config::new()
        .dir(&dir)
        .control(false)
        .shared_rings(false)
        .init()
        .expect("init")
        .disarm();
    dir
}

/// babeltrace2's text of `trace` (checked to succeed), or `None` when it
/// is not installed.
#[allow(dead_code)] // not every test binary asks babeltrace2
pub fn babeltrace2(trace: &Path) -> Option<String> {
    match std::process::Command::new("babeltrace2")
        .arg(trace)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Err(_) => {
            skipped::required(
                "babeltrace2's reading of the tape-tracing traces",
                "apt-get install babeltrace2",
            );
            None
        }
    }
}

/// Every event of `trace`, in time order: its name and its payload's
/// fields (a failure on a loss: these tests lose nothing).
#[allow(dead_code)] // not every test binary reads events so
pub fn events(trace: &Path) -> Vec<(String, Vec<(String, tape_ctf::Value)>)> {
    let traces = tape_ctf::metadata::find_traces(trace).unwrap();
    let mut out = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        let tape_ctf::merge::Record::Event(e) = r.unwrap() else {
            panic!("a loss")
        };
        let tape_ctf::Value::Struct(fields) = e.payload() else {
            panic!("a payload that is not a struct")
        };
        out.push((e.class.name.clone(), fields.clone()));
    }
    out
}

/// A recorded field as the tests compare it: its CTF type and value (a
/// plain value, not a tagged one).
#[allow(dead_code)] // not every test binary compares fields so
pub fn field(v: &tape_ctf::Value) -> (String, String) {
    use tape_ctf::Value;
    let (kind, value) = match v {
        Value::UInt(x, _) => ("uint", x.to_string()),
        Value::SInt(x, _) => ("int", x.to_string()),
        Value::Float(x) => ("float", x.to_string()),
        Value::Str(s) => ("string", s.clone()),
        Value::Enum { labels, .. } => ("enum", labels.join("|")),
        v => panic!("not a plain value: {v:?}"),
    };
    (kind.to_owned(), value)
}
