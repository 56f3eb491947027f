//! The `tape` command's files by floor (issue 51), by the rule of
//! `tape_test_support::layout` (tape's and the consumer's too): each file
//! uses only its own floor and the floors below it, and no two files use
//! each other, even through others; nothing below uses `main.rs`, whose
//! items (the command line) no subcommand needs: what they share is
//! `output.rs`'s.
//!
//! | floor | modules | what they are |
//! |---|---|---|
//! | shared | `output`, `time`, `filter`, `symbols`, `reader`, `select` | writing the output, times, `--filter`, symbols, readers of running processes, what a reading command selects |
//! | readers | `show`, `stats`, `check`, `graph`, `profile`, `export`, `ctl` | the commands that read a trace, and `tape ctl` |
//! | consumers | `relay`, `pipe`, `recover` | what reads other processes' rings: `tape record` (to a directory or a relay), `tape pipe`, `tape recover`, `tape ps` |
//! | top | `main.rs` | the command line |
//!
//! `TAPE_LAYOUT_PRINT=1 cargo test -p tape-cli --test it layout -- --nocapture`
//! prints every edge with its floors.

use std::path::Path;

use tape_test_support::layout::{check, Floors};

/// The command's floors (`crates/tape-cli/src`).
const FLOORS: Floors = &[
    (
        "shared",
        &["output", "time", "filter", "symbols", "reader", "select"],
    ),
    (
        "readers",
        &[
            "show", "stats", "check", "graph", "profile", "export", "ctl",
        ],
    ),
    ("consumers", &["relay", "pipe", "recover"]),
    ("top", &[""]),
];

#[test]
fn the_commands_files_keep_their_floors_and_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // The scan sees uses it must (an empty graph passes everything).
    let must = [("lib", "show"), ("recover", "relay"), ("show", "output")];
    check(&src, "tape_cli", FLOORS, &must);
}
