//! The recorder by layer (issue 37), and the consumer (`tape-consumer`,
//! issue 48) the same way: the files of `src/` stand on floors,
//! and each file uses only its own floor and the floors below it; no two
//! files use each other, even through others (no import circle).
//!
//! | floor | modules | what they are |
//! |---|---|---|
//! | base | `error`, `sys`, `knobs`, `clock`, `field`, `layer_losses` | errors, OS helpers, the settings every floor reads, time, field types |
//! | model | `point`, `registry`, `hooks` | the tracepoint, its state word, the set of them |
//! | schema | `metadata`, `template`, `view` | the CTF description of a trace, and an event read by it |
//! | storage | `ring`, `save` | per-thread rings, the emit path, snapshots, trace directories |
//! | features | `probe`, `filter`, `trigger`, `traced`, `latency`, `printk`, `snapshot_thread`, `usdt` | what runs at a tracepoint or beside the rings |
//! | control | `config`, `control`, `crash`, `dump_text`, `end` | starting, operating and ending the recorder |
//! | top | `lib.rs` | the public face |
//!
//! The rule and the scanner: `tape_test_support::layout`.
//!
//! `TAPE_LAYOUT_PRINT=1 cargo test -p tape --test it layout -- --nocapture`
//! prints every edge with its floors.

use std::path::Path;

use tape_test_support::layout::{check, Floors};

/// The recorder's floors (`crates/tape/src`).
const FLOORS: Floors = &[
    (
        "base",
        &["error", "sys", "knobs", "clock", "field", "layer_losses"],
    ),
    ("model", &["point", "registry", "hooks"]),
    ("schema", &["metadata", "template", "view"]),
    ("storage", &["ring", "save"]),
    (
        "features",
        &[
            "probe",
            "filter",
            "trigger",
            "traced",
            "latency",
            "printk",
            "snapshot_thread",
            "usdt",
        ],
    ),
    (
        "control",
        &["config", "control", "crash", "dump_text", "end"],
    ),
    ("top", &[""]),
];

/// The consumer's floors (`crates/tape-consumer/src`): the ring
/// directories and a dead process's trace, then the reader of a running one.
const CONSUMER_FLOORS: Floors = &[
    ("kernel", &["kernel"]),
    ("process", &["recover"]),
    ("reader", &["record"]),
    ("top", &[""]),
];

#[test]
fn each_file_uses_only_its_floor_and_those_below_and_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // The scan sees uses it must (an empty graph passes everything).
    let must = [("save", "ring"), ("ring::emit", "point"), ("lib", "config")];
    check(&src, "tape", FLOORS, &must);
}

/// The consumer (`tape-consumer`) by the same rule; its uses of the rings
/// go through `tape::__consumer`, another crate.
#[test]
fn the_consumers_files_keep_their_floors_and_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tape-consumer/src");
    check(
        &src,
        "tape_consumer",
        CONSUMER_FLOORS,
        &[("record", "recover")],
    );
}
