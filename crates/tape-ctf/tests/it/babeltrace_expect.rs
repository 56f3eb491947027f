//! babeltrace's own test traces with a `.expect` file (babeltrace2's
//! `sink.text.details` output for them): tape decodes the same events —
//! same count, same names, same times (ns from origin), and the same
//! top-level payload values for integers and strings. babeltrace2's quirks
//! in that format are undone first: thousands separators (`2,118,208`),
//! grouped hexadecimal (`0x55bf:39b7:0000`).

use crate::shared;

use std::path::PathBuf;

use tape_ctf::merge::{events, Record};
use tape_ctf::Base;
use tape_ctf::Value;

fn root() -> Option<PathBuf> {
    shared::suite("babeltrace/tests/data")
}

/// (ns from origin, event name, [(member, value)]) for each event.
type Expected = Vec<(i128, String, Vec<(String, String)>)>;

fn parse_expect(text: &str) -> Expected {
    let mut out = Vec::new();
    let mut ns: Option<i128> = None;
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(rest) = l.strip_prefix('[') {
            if let Some(i) = rest.find(" cycles, ") {
                let after = &rest[i + " cycles, ".len()..];
                let n = after.split(" ns").next().unwrap().replace(',', "");
                ns = n.parse().ok();
            }
            continue;
        }
        let Some(rest) = l.strip_prefix("Event `") else {
            continue;
        };
        let name = rest[..rest.find('`').unwrap()].to_owned();
        let mut fields = Vec::new();
        let mut in_payload = false;
        while let Some(n) = lines.peek() {
            if n.is_empty() {
                break;
            }
            let n = lines.next().unwrap();
            if n.starts_with("  Payload:") {
                in_payload = true;
                continue;
            }
            if n.starts_with("  ") && !n.starts_with("    ") {
                in_payload = false;
                continue;
            }
            // Top-level payload members: exactly four spaces.
            if in_payload && n.starts_with("    ") && !n.starts_with("     ") {
                if let Some((k, v)) = n.trim().split_once(": ") {
                    fields.push((k.to_owned(), v.to_owned()));
                }
            }
        }
        out.push((ns.unwrap_or(i128::MIN), name, fields));
    }
    out
}

/// A value as babeltrace2's details format writes a scalar, normalised.
fn scalar(v: &Value) -> Option<String> {
    Some(match v {
        Value::UInt(x, Base::Hexadecimal) => format!("0x{x:x}"),
        Value::UInt(x, Base::Octal) => format!("0{x:o}"),
        Value::UInt(x, Base::Binary) => format!("0b{x:b}"),
        Value::UInt(x, _) => x.to_string(),
        Value::SInt(x, Base::Decimal) => x.to_string(),
        Value::Str(s) => s.clone(),
        _ => return None,
    })
}

fn normalise(v: &str) -> String {
    if let Some(h) = v.strip_prefix("0x") {
        let digits = h.replace(':', "");
        let trimmed = digits.trim_start_matches('0');
        return format!("0x{}", if trimmed.is_empty() { "0" } else { trimmed });
    }
    if v.chars()
        .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
    {
        return v.replace(',', "");
    }
    v.to_owned()
}

#[test]
fn babeltrace_expect_files() {
    let Some(root) = root() else {
        return;
    };
    let expects = root.join("plugins/src.ctf.fs/succeed");
    let mut checked = 0;
    let mut names: Vec<PathBuf> = std::fs::read_dir(&expects)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for e in names {
        let stem = e.file_stem().unwrap().to_string_lossy().into_owned();
        let name = stem.strip_prefix("trace-").unwrap_or(&stem);
        let trace = root.join("ctf-traces/succeed").join(name);
        if !trace.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(&e).unwrap();
        // Only the `sink.text.details` files (others list packet ends, or
        // nothing, for tests of other components).
        if !text.starts_with("Trace class:") {
            continue;
        }
        let want = parse_expect(&text);
        let traces =
            tape_ctf::metadata::find_traces(&trace).unwrap_or_else(|x| panic!("{name}: {x}"));
        let mut got: Expected = Vec::new();
        for r in events(&traces).unwrap_or_else(|x| panic!("{name}: {x}")) {
            match r.unwrap_or_else(|x| panic!("{name}: {x}")) {
                Record::Event(ev) => {
                    let fields = match ev.payload() {
                        Value::Struct(f) => f
                            .iter()
                            .filter_map(|(k, v)| scalar(v).map(|s| (k.clone(), s)))
                            .collect(),
                        _ => Vec::new(),
                    };
                    got.push((ev.ns.unwrap_or(i128::MIN), ev.class.name.clone(), fields));
                }
                Record::Lost(..) => {}
            }
        }
        assert_eq!(got.len(), want.len(), "{name}: event count");
        // Same events; ties in time may come in another order.
        let key = |x: &(i128, String, Vec<(String, String)>)| (x.0, x.1.clone());
        let mut want = want;
        want.sort_by_key(key);
        got.sort_by_key(key);
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!((g.0, &g.1), (w.0, &w.1), "{name}: event {n}");
            for (k, v) in &g.2 {
                if let Some((_, wv)) = w.2.iter().find(|(wk, _)| wk == k) {
                    assert_eq!(normalise(v), normalise(wv), "{name}: event {n}, field {k}");
                }
            }
        }
        eprintln!("{name}: {} events as babeltrace2 expects", got.len());
        checked += 1;
    }
    // Seven of the twelve .expect files are details output for a trace of
    // ctf-traces/succeed (the others have no such trace, or another format).
    assert_eq!(checked, 7, "traces checked");
}
