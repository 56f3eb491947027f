//! The guide's three lines that add tape-tracing to a `tracing` program
//! (`docs/10-tracing.md`) are the crate's doc example, which compiles (a
//! doc test): the same lines, in the same order.

#[test]
fn the_readme_lines_are_the_doc_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/docs/10-tracing.md")).unwrap();
    let lib = std::fs::read_to_string(format!("{root}/crates/tape-tracing/src/lib.rs")).unwrap();
    let section = readme
        .split("## Programs already instrumented with `tracing`")
        .nth(1)
        .expect("the guide's tape-tracing section");
    let block = section
        // `rs`: a snippet, not one of the whole programs that tape's
        // guide test compiles (`rust` blocks).
        .split("```rs\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("its rust block");
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 3, "{block}");
    let doc: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter(|l| !l.starts_with('#'))
        .collect();
    let at = doc
        .windows(3)
        .position(|w| w == lines.as_slice())
        .unwrap_or_else(|| panic!("{lines:?} is not the doc example of lib.rs"));
    assert!(at < 10, "the doc example opens the crate's docs");
}
