//! Settings are read from the environment by their table's readers alone:
//! `config.rs` (`config::SETTINGS`, at `init`) and `knobs.rs` (the few read
//! where they are used, `knobs::READ_WHERE_USED`, rows of the same table),
//! never by a variable's name elsewhere (issue 51, item 3). Every other
//! read of the environment in the crates that ship is of a variable that
//! is not a setting, and is named here with its reason.

use std::path::Path;

/// The variables read outside `config.rs`, none of them a setting.
const NOT_SETTINGS: &[(&str, &str)] = &[
    ("HOME", "the default trace directory's parent"),
    (
        "XDG_RUNTIME_DIR",
        "where rings and sockets go without /dev/shm",
    ),
    (
        "TAPE_DUMP_SHOW",
        "the crash dump's own handshake: set by tape for the program it re-executes",
    ),
    (
        "TAPE_REQUIRE_TOOLS",
        "the tests' switch: a missing tool fails",
    ),
];

/// The read of the environment a line makes, if any: the variable named
/// (`None`: not a literal).
fn env_read(line: &str) -> Option<Option<String>> {
    let at = line.find("env::var")?;
    let rest = &line[at..];
    let open = rest.find('(')?;
    let arg = rest[open + 1..].trim_start();
    Some(
        arg.strip_prefix('"')
            .and_then(|a| a.split('"').next())
            .map(str::to_owned),
    )
}

#[test]
fn a_line_reading_the_environment_is_found_with_its_variable() {
    let cases: &[(&str, Option<Option<&str>>)] = &[
        (
            r#"std::env::var("TAPE_SHM_MAX")"#,
            Some(Some("TAPE_SHM_MAX")),
        ),
        (r#"match std::env::var_os( "HOME") {"#, Some(Some("HOME"))),
        ("Config::from_os_vars(|k| std::env::var_os(k))", Some(None)),
        ("let x = 1; // no read", None),
    ];
    for (line, want) in cases {
        let got = env_read(line);
        assert_eq!(got.as_ref().map(|v| v.as_deref()), *want, "{line}");
    }
}

#[test]
fn settings_are_read_through_the_table_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in [
        "tape",
        "tape-consumer",
        "tape-cli",
        "tape-tracing",
        "tape-ctf",
    ] {
        tape_test_support::layout::rust_files(&root.join(krate).join("src"), &mut files);
    }
    assert!(
        files.len() > 50,
        "{} files: the crates' sources",
        files.len()
    );
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let reader = f.ends_with("tape/src/config.rs") || f.ends_with("tape/src/knobs.rs");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let Some(var) = env_read(line) else { continue };
            let allowed = match &var {
                Some(v) => NOT_SETTINGS.iter().any(|(name, _)| name == v),
                // A variable passed in: the table's readers alone.
                None => reader,
            };
            if !allowed {
                wrong.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "read outside config.rs's table (a setting goes in config::SETTINGS, \
         another variable in NOT_SETTINGS with its reason):\n{}",
        wrong.join("\n")
    );
}
