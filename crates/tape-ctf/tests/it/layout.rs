//! The reader's layout by stage (`../shared/STYLE.md`, issue 19): the
//! metadata stage, then decode, then merge, then the outputs. A module
//! uses its own stage and the stages before it; an output (`output/text/`,
//! `json`, `ftrace`, `graph`, `profile`, `latency`, ...) never uses
//! another output, only the outputs' shared helpers (`output/mod.rs`,
//! `event_text`, `function`); and the graph of these units has no circle.
//! `lib.rs`, the door whose modules re-export what other crates use, is
//! above them all.
//!
//! Read from the source: every `crate::<stage>::<module>` path outside
//! comments is an edge from the file's unit to the path's. Uses that
//! break the rule would be listed in [`KNOWN`], each with its reason (none
//! today): the test fails on a new one, and on a listed one that is gone
//! (so the list only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tape_test_support::layout::rust_files;

/// Uses against the layout that remain, `from -> to`, each with its
/// reason. None: the text the stream reader writes while it decodes (line
/// programs, the value sinks for text and JSON, numbers and strings) is the
/// decode stage's (`decode/text/`, `decode/json.rs`).
const KNOWN: &[&str] = &[];

/// The outputs' shared helpers (not outputs themselves).
const HELPERS: &[&str] = &[
    "output",
    "output::calls",
    "output::event_text",
    "output::export",
    "output::function",
];

/// A unit's stage: its order, and whether it is an output.
fn stage(unit: &str) -> (u32, bool) {
    match unit.split("::").next() {
        Some("metadata") => (0, false),
        Some("decode") => (1, false),
        Some("merge") => (2, false),
        Some("output") if HELPERS.contains(&unit) => (3, false),
        Some("output") => (4, true),
        // lib.rs: the crate's door, naming what other crates use from
        // every stage and output (its facade modules), above them all.
        _ if unit == "lib" => (5, false),
        _ => (0, false),
    }
}

/// The unit of a module path (`["output", "text", "line"]`): a stage, or
/// under `output`, one output (or helper) with its submodules; an item of
/// `output/mod.rs` itself (`output::decimal`) is the helper `output`.
fn unit(path: &[&str], src: &Path) -> String {
    match path {
        ["output", name, ..]
            if src.join("output").join(format!("{name}.rs")).exists()
                || src.join("output").join(name).is_dir() =>
        {
            format!("output::{name}")
        }
        [stage, ..] => (*stage).to_owned(),
        [] => String::new(),
    }
}

/// Every unit's uses of other units, from the source under `src`.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().with_extension("");
        let mut path: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap()).collect();
        if path.last() == Some(&"mod") {
            path.pop();
        }
        let from = if path == ["lib"] {
            "lib".to_owned()
        } else {
            unit(&path, src)
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let used: Vec<&str> = rest
                    .split("::")
                    .map(|s| {
                        s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .unwrap()
                    })
                    .take_while(|s| {
                        !s.is_empty() && s.chars().all(|c| c.is_lowercase() || c == '_')
                    })
                    .collect();
                let to = unit(&used, src);
                if !["metadata", "decode", "merge", "output"]
                    .contains(&used.first().copied().unwrap_or(""))
                    || to == from
                {
                    continue;
                }
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// Whether `to` reaches `from` (a circle through `from -> to`).
fn reaches(edges: &BTreeMap<String, BTreeSet<String>>, to: &str, from: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![to.to_owned()];
    while let Some(u) = todo.pop() {
        if u == from {
            return true;
        }
        if seen.insert(u.clone()) {
            todo.extend(edges.get(&u).into_iter().flatten().cloned());
        }
    }
    false
}

#[test]
fn each_stage_uses_only_the_stages_before_it_and_no_output_another() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    // Sanity: the scan sees the uses it must (an empty graph passes
    // everything).
    assert!(edges["decode"].contains("metadata"), "{edges:?}");
    assert!(
        edges["output::graph"].contains("output::function"),
        "{edges:?}"
    );
    let mut against = BTreeSet::new();
    for (from, tos) in &edges {
        for to in tos {
            let ((a, from_output), (b, to_output)) = (stage(from), stage(to));
            if b > a || (from_output && to_output) {
                against.insert(format!("{from} -> {to}"));
            }
        }
    }
    let known: BTreeSet<String> = KNOWN.iter().map(|s| (*s).to_owned()).collect();
    let new: Vec<&String> = against.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&against).collect();
    assert!(new.is_empty(), "uses against the layout: {new:?}");
    assert!(gone.is_empty(), "fixed, take them out of KNOWN: {gone:?}");
    // No circle once the known uses are left out.
    let mut rest = edges.clone();
    for k in KNOWN {
        let (from, to) = k.split_once(" -> ").unwrap();
        rest.entry(from.to_owned()).or_default().remove(to);
    }
    for (from, tos) in &rest {
        for to in tos {
            assert!(
                !reaches(&rest, to, from),
                "a circle through {from} -> {to}: {rest:?}"
            );
        }
    }
}
