//! Selecting tracepoints at run time: by name, glob and regex; unknown
//! names and bad patterns are errors that name the input; lookup and
//! listing; `enabled()`; the fast-path form.

use tape::ErrorKind;

tape::tracepoint! {
    pub fn net_rx(port: u16, len: u32, ifname: &str) = "sel.net.rx";
    pub fn net_tx(port: u16, len: u32) = "sel.net.tx";
    pub fn disk_read(lba: u64) = "sel.disk.read";
    pub fn disk_write(lba: u64) = "sel.disk.write";
    /// Compiled in only with the `fast-path` feature.
    #[fast_path]
    pub fn hot(v: u64) = "sel.hot.loop";
}

const ALL: [&str; 5] = [
    "sel.disk.read",
    "sel.disk.write",
    "sel.hot.loop",
    "sel.net.rx",
    "sel.net.tx",
];

fn enabled_set() -> Vec<&'static str> {
    tape::tracepoints()
        .iter()
        .filter(|t| t.name().starts_with("sel.") && t.is_enabled())
        .map(|t| t.name())
        .collect()
}

fn reset() {
    tape::disable_glob("sel.*").unwrap();
}

/// One process-wide registry: the cases run in one test, in order.
#[test]
fn selection_by_name_glob_and_regex() {
    tape::registry::check().expect("no duplicates in this binary");
    // (operation, pattern, expected count, enabled afterwards)
    type Op = fn(&str) -> Result<usize, tape::Error>;
    let cases: &[(&str, Op, &str, usize, &[&str])] = &[
        (
            "glob",
            tape::enable_glob,
            "sel.net.*",
            2,
            &["sel.net.rx", "sel.net.tx"],
        ),
        (
            "glob-brace",
            tape::enable_glob,
            "sel.{disk,hot}.*",
            3,
            &["sel.disk.read", "sel.disk.write", "sel.hot.loop"],
        ),
        ("glob-none", tape::enable_glob, "nothing.*", 0, &[]),
        (
            "regex",
            tape::enable_regex,
            r"^sel\.disk\.(read|write)$",
            2,
            &["sel.disk.read", "sel.disk.write"],
        ),
        (
            "regex-unanchored",
            tape::enable_regex,
            "rx",
            1,
            &["sel.net.rx"],
        ),
        (
            "pattern-exact",
            tape::enable_pattern,
            "sel.net.tx",
            1,
            &["sel.net.tx"],
        ),
        (
            "pattern-glob",
            tape::enable_pattern,
            "sel.*.r*",
            2,
            &["sel.disk.read", "sel.net.rx"],
        ),
        (
            "pattern-regex",
            tape::enable_pattern,
            "/write$/",
            1,
            &["sel.disk.write"],
        ),
    ];
    for (what, op, pattern, count, want) in cases {
        reset();
        assert_eq!(op(pattern).unwrap(), *count, "{what}");
        assert_eq!(enabled_set(), *want, "{what}");
    }

    // Exact names, enable/disable, and enabled().
    reset();
    assert!(!net_rx::enabled());
    tape::enable("sel.net.rx").unwrap();
    assert!(net_rx::enabled());
    assert!(!net_tx::enabled());
    assert!(
        !hot::enabled(),
        "enabled() of a disabled fast-path tracepoint"
    );
    tape::enable("sel.hot.loop").unwrap();
    assert_eq!(hot::enabled(), tape::FAST_PATH);
    tape::disable("sel.net.rx").unwrap();
    assert!(!net_rx::enabled());
    tape::enable_glob("sel.*").unwrap();
    assert_eq!(tape::disable_regex("disk").unwrap(), 2);
    assert_eq!(tape::disable_pattern("sel.net.*").unwrap(), 2);
    assert_eq!(enabled_set(), ["sel.hot.loop"]);

    // A name no tracepoint has yet is pending (one registered later by
    // that name is enabled: a `tracing` callsite at its first event), as a
    // glob that matches nothing is; selecting it names it.
    tape::enable("sel.net.nope").unwrap();
    tape::disable("nope").unwrap();
    assert_eq!(tape::enable_pattern("sel.nope").unwrap(), 0);
    assert_eq!(enabled_set(), ["sel.hot.loop"]);
    let e = tape::registry::select("sel.net.nope").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.message().contains("\"sel.net.nope\""), "{e}");
    // Errors name the input.
    let e = tape::enable_glob("sel.[net").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadPattern);
    assert!(e.message().contains("sel.[net"), "{e}");
    let e = tape::enable_regex("sel.(net").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadPattern);
    assert!(e.message().contains("sel.(net"), "{e}");
    assert_eq!(
        tape::enable_pattern("/(/").unwrap_err().kind(),
        ErrorKind::BadPattern
    );

    // Lookup and listing.
    let tp = tape::lookup("sel.disk.read").expect("lookup");
    assert_eq!(tp.name(), "sel.disk.read");
    assert!(
        tp.location()
            .ends_with(&format!("selection.rs:{}", tp.desc().line)),
        "{}",
        tp.location()
    );
    assert_eq!(tp.desc().fields.len(), 1);
    assert_eq!(tp.desc().fields[0].name, "lba");
    assert!(tape::lookup("sel.disk").is_none());
    let names: Vec<&str> = tape::tracepoints()
        .iter()
        .map(|t| t.name())
        .filter(|n| n.starts_with("sel."))
        .collect();
    assert_eq!(names, ALL);
    // Ids are the index in the sorted list, and distinct.
    for (i, t) in tape::tracepoints().iter().enumerate() {
        assert_eq!(usize::from(t.id()), i);
    }
    // Emitting with everything off and on does not panic.
    reset();
    net_rx(1, 2, "x");
    hot(1);
    tape::enable_glob("sel.*").unwrap();
    net_rx(1, 2, "x");
    disk_read(1);
    disk_write(2);
    hot(1);
    reset();
}
