//! The public surface of `tape`, `tape-tracing` and `tape-ctf`, checked
//! in (issue 51): `crates/<crate>/public-items.txt` lists every item
//! rustdoc documents (its list of all items: structs, enums, traits,
//! functions, macros, constants, statics, type aliases, by path), with
//! each struct's, enum's and union's fields, variants and inherent
//! methods, and each trait's methods. A change of surface then shows in
//! review as a change of that file; this test fails until it is made
//! (`TAPE_BLESS=1` writes the lists anew).
//!
//! What rustdoc hides is not listed: the `#[doc(hidden)]` doors
//! (`tape::__private`, the macros' expansions; `tape::__consumer`, the
//! consumer's), and the trait impls (`Debug`, `From`, ...). Read from
//! rustdoc's HTML (its JSON needs a nightly toolchain, which this
//! machine cannot fetch), written into a target directory of its own
//! (`target/public-items`): `cargo test` may hold the build directory's
//! lock while its tests run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates whose surface is kept: by package, by rustdoc's name, and
/// an item each list must have (the scan read the pages as they are).
const CRATES: [(&str, &str, &str); 3] = [
    (
        "tape",
        "tape",
        "struct tape::config::Config: method buffer_size",
    ),
    (
        "tape-tracing",
        "tape_tracing",
        "struct tape_tracing::TapeLayer: method new",
    ),
    (
        "tape-ctf",
        "tape_ctf",
        "struct tape_ctf::Clock: field absolute",
    ),
];

/// The sections of rustdoc's `all.html`, by its ids, and the word a line
/// of the list gives each.
const KINDS: [(&str, &str); 12] = [
    ("structs", "struct"),
    ("enums", "enum"),
    ("unions", "union"),
    ("traits", "trait"),
    ("functions", "fn"),
    ("macros", "macro"),
    ("attributes", "attribute macro"),
    ("derives", "derive macro"),
    ("constants", "const"),
    ("statics", "static"),
    ("types", "type"),
    ("traitaliases", "trait alias"),
];

/// The text between `from` and the next `to` in `s`, after `at`.
fn between<'a>(s: &'a str, at: usize, from: &str, to: &str) -> Option<(&'a str, usize)> {
    let i = s[at..].find(from)? + at + from.len();
    let j = s[i..].find(to)? + i;
    Some((&s[i..j], j + to.len()))
}

/// The `id="<prefix>NAME"` names in `s`, in order, each once (rustdoc
/// numbers a second one `NAME-1`).
fn ids(s: &str, prefix: &str) -> Vec<String> {
    let pat = format!("id=\"{prefix}");
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((name, next)) = between(s, at, &pat, "\"") {
        if !name.contains('-') && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        at = next;
    }
    out
}

/// The part of an item page with its inherent impls (not the trait,
/// auto-trait and blanket impls after it).
fn inherent(page: &str) -> &str {
    let Some(i) = page.find("id=\"implementations-list\"") else {
        return "";
    };
    let end = [
        "id=\"trait-implementations\"",
        "id=\"synthetic-implementations\"",
        "id=\"blanket-implementations\"",
    ]
    .iter()
    .filter_map(|m| page[i..].find(m).map(|j| i + j))
    .min()
    .unwrap_or(page.len());
    &page[i..end]
}

/// The lines of one crate's list, from its documentation at `doc`.
fn list(doc: &Path, name: &str) -> Vec<String> {
    let all = std::fs::read_to_string(doc.join("all.html"))
        .unwrap_or_else(|e| panic!("{}: {e}", doc.join("all.html").display()));
    let mut lines = BTreeSet::new();
    for (id, word) in KINDS {
        let Some((section, _)) = between(&all, 0, &format!("<h3 id=\"{id}\">"), "</ul>") else {
            continue;
        };
        let mut at = 0;
        while let Some((href, next)) = between(section, at, "<a href=\"", "\"") {
            let (path, next) = between(section, next, ">", "</a>").expect("a link's text");
            at = next;
            let path = format!("{name}::{path}");
            lines.insert(format!("{word} {path}"));
            if !matches!(word, "struct" | "enum" | "union" | "trait") {
                continue;
            }
            let page = std::fs::read_to_string(doc.join(href))
                .unwrap_or_else(|e| panic!("{}: {e}", doc.join(href).display()));
            let mut members: Vec<(&str, Vec<String>)> = vec![
                ("field", ids(&page, "structfield.")),
                ("variant", ids(&page, "variant.")),
            ];
            if word == "trait" {
                // Required, then provided methods; the impls on foreign
                // types and the implementors after.
                let own = tape_test_support::text::before_first(
                    &page,
                    &["id=\"foreign-impls\"", "id=\"implementors\""],
                );
                members.push(("method", ids(own, "tymethod.")));
                members.push(("method", ids(own, "method.")));
                members.push(("const", ids(own, "associatedconstant.")));
                members.push(("type", ids(own, "associatedtype.")));
            } else {
                members.push(("method", ids(inherent(&page), "method.")));
                members.push(("const", ids(inherent(&page), "associatedconstant.")));
            }
            for (what, names) in members {
                for n in names {
                    lines.insert(format!("{word} {path}: {what} {n}"));
                }
            }
        }
    }
    lines.into_iter().collect()
}

#[test]
fn the_public_items_are_the_checked_in_lists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace");
    let target: PathBuf = root.join("target/public-items");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut doc = Command::new(cargo);
    doc.current_dir(root)
        .args(["doc", "-q", "--no-deps", "--offline"])
        .arg("--target-dir")
        .arg(&target);
    for (package, _, _) in CRATES {
        doc.args(["-p", package]);
    }
    // The same rustdoc as the doc gate's, without its flags of warnings.
    doc.env_remove("RUSTDOCFLAGS");
    // Seconds on a built tree; a few minutes where nothing is built yet.
    let limit = std::time::Duration::from_secs(900);
    let out = tape_test_support::child::output_within(&mut doc, limit)
        .expect("cargo doc runs")
        .unwrap_or_else(|| panic!("cargo doc did not end within {limit:?}"));
    assert!(
        out.status.success(),
        "cargo doc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bless = std::env::var_os("TAPE_BLESS").is_some();
    let mut differ = Vec::new();
    for (package, name, must) in CRATES {
        let lines = list(&target.join("doc").join(name), name);
        assert!(
            lines.iter().any(|l| l == must),
            "{name}: the scan of rustdoc's pages missed {must:?} ({} lines read)",
            lines.len()
        );
        let text = lines.join("\n") + "\n";
        let file = root.join("crates").join(package).join("public-items.txt");
        let kept = std::fs::read_to_string(&file).unwrap_or_default();
        if kept == text {
            continue;
        }
        if bless {
            std::fs::write(&file, &text).expect("write the list");
            continue;
        }
        let (old, new): (BTreeSet<&str>, BTreeSet<&str>) =
            (kept.lines().collect(), text.lines().collect());
        let gone: Vec<&&str> = old.difference(&new).collect();
        let added: Vec<&&str> = new.difference(&old).collect();
        differ.push(format!(
            "{}: {} items now; gone: {gone:?}; new: {added:?}",
            file.display(),
            lines.len()
        ));
    }
    assert!(
        differ.is_empty(),
        "the public surface changed (TAPE_BLESS=1 writes the lists anew, to be \
         reviewed):\n{}",
        differ.join("\n")
    );
}

#[test]
fn the_page_scan_reads_members_as_rustdoc_writes_them() {
    let page = "<section id=\"structfield.a\"></section><div id=\"variant.B\"></div>\
        <div id=\"implementations-list\"><section id=\"method.new\"></section>\
        <section id=\"method.new-1\"></section></div>\
        <h2 id=\"trait-implementations\"></h2><div id=\"trait-implementations-list\">\
        <section id=\"method.fmt\"></section></div>";
    assert_eq!(ids(page, "structfield."), ["a"]);
    assert_eq!(ids(page, "variant."), ["B"]);
    assert_eq!(ids(inherent(page), "method."), ["new"]);
    assert_eq!(ids(page, "method."), ["new", "fmt"]);
}

/// tape's modules in sight are the chosen ones (issue 51: at most ten):
/// what an instrumented program uses. The rings, the saves, the points'
/// words, `printk!`'s, `#[traced]`'s and the USDT notes' machinery are
/// private; what macros and tape's other crates need of them goes through
/// the hidden doors, `__private` and `__consumer` (and `guide` is built for
/// doctests only).
#[test]
fn the_crate_shows_at_most_ten_modules() {
    let lib = include_str!("../../src/lib.rs");
    let mut hidden = false;
    let mut shown = Vec::new();
    // (Top-level declarations only: the doors' own modules are inside.)
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ") {
            let name = name.trim_end_matches([';', '{', ' ']);
            if !hidden {
                shown.push(name.to_owned());
            }
        }
        hidden = line == "#[doc(hidden)]" || line == "#[cfg(doctest)]";
    }
    assert_eq!(
        shown,
        [
            "clock", "config", "control", "crash", "field", "filter", "latency", "probe",
            "registry", "trigger"
        ],
        "the modules tape shows"
    );
}

/// tape-ctf's surface (issue 51): what the CLI and the tests use is
/// named at most one module below the root (`tape_ctf::decode::TextBuf`,
/// never the file it lives in, as `tape_ctf::decode::text::line::TextBuf`
/// once was), in at most ten modules: read from the checked-in list,
/// which the test above holds to rustdoc's pages.
#[test]
fn tape_ctf_is_named_at_most_one_module_down() {
    let list = include_str!("../../../tape-ctf/public-items.txt");
    let mut modules = BTreeSet::new();
    let mut deep = Vec::new();
    for line in list.lines() {
        // `struct tape_ctf::Clock: field absolute`: the item's path.
        let Some(path) = line.split(": ").next().and_then(|l| l.rsplit(' ').next()) else {
            continue;
        };
        let parts: Vec<&str> = path.split("::").collect();
        match parts.len() {
            2 => {}
            3 => {
                modules.insert(parts[1]);
            }
            _ => deep.push(path),
        }
    }
    assert!(deep.is_empty(), "named deeper than one module: {deep:?}");
    assert_eq!(
        modules.into_iter().collect::<Vec<_>>(),
        [
            "decode", "export", "ftrace", "graph", "latency", "merge", "metadata", "profile",
            "text"
        ],
        "the modules tape-ctf shows"
    );
}
