//! What a new user meets in the first hour (issue 38), each with the text
//! they see asserted: a filter's error names the event that has the fields
//! and why it refuses them; a duration is typed back as tape prints it.

use crate::pipeline;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The quickstart example's trace, saved into `dir`.
fn quickstart(dir: &Path) -> PathBuf {
    pipeline::record("quickstart", &[], &[], dir)
}

use pipeline::tape;

fn temp(name: &str) -> PathBuf {
    pipeline::temp(&format!("first-hour-{name}"))
}

/// The quickstart's trace as babeltrace2 prints it: each line's packet
/// context names the stream (`tid`, `thread_name`) and carries no loss
/// counter; tape show prints the same lines.
#[test]
fn the_quickstart_lines_carry_no_loss_counters() {
    if !crate::shared::babeltrace2("the quickstart's lines as babeltrace2 prints them") {
        return;
    }
    let dir = temp("lines");
    let trace = quickstart(&dir);
    let out = Command::new("babeltrace2").arg(&trace).output().unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success() && err.is_empty(), "{err}");
    assert!(text.lines().count() > 100, "{text}");
    for line in text.lines() {
        let context = line
            .split(": { ")
            .nth(1)
            .and_then(|c| c.split(" }, {").next())
            .unwrap_or_else(|| panic!("no packet context: {line}"));
        let (tid, name) = context
            .split_once(", thread_name = \"")
            .unwrap_or_else(|| panic!("{line}"));
        assert!(
            tid.strip_prefix("tid = ")
                .is_some_and(|t| t.parse::<u32>().is_ok())
                && name.ends_with('"')
                && !name.contains(','),
            "a packet context of more than tid and thread_name: {line}"
        );
    }
    let (rc, shown, _) = tape(&["show", trace.to_str().unwrap()]);
    assert_eq!((rc, shown.as_str()), (0, text.as_ref()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Over all events, a filter that one event has the fields for but
/// refuses (a label its enum lacks) is reported for that event, with its
/// labels; not as the first event's missing field.
#[test]
fn a_filter_refused_names_the_event_that_has_its_fields() {
    let dir = temp("filter");
    let trace = quickstart(&dir);
    let t = trace.to_str().unwrap();
    let (rc, out, err) = tape(&["show", t, "--filter", "status == NotFund"]);
    assert_eq!((rc, out.as_str()), (1, ""), "{err}");
    assert_eq!(
        err,
        "tape: error: --filter: the one event selected that has its fields refuses it:\n\
         filter for quickstart.request.done: `status` has no label `NotFund` (labels: Ok, NotFound)\n\
         \x20 status == NotFund\n\
         \x20           ^\n"
    );
    // No event has the field: said as such, with the first one's fields.
    let (rc, _, err) = tape(&["show", t, "--filter", "statuss == 1"]);
    assert_eq!(rc, 1);
    assert!(
        err.starts_with(
            "tape: error: --filter: none of the 10 events selected has the fields it compares; \
             the first: filter for quickstart."
        ) && err.contains("no field `statuss` (fields: "),
        "{err}"
    );
    // The label as written selects the events that have it.
    let (rc, out, err) = tape(&["show", t, "--filter", "status == NotFound"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        !out.is_empty() && out.lines().all(|l| l.contains("NotFound")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tracing` values arrive plain (tape-tracing's example): the same line
/// in babeltrace2 and `tape show`, `message = "parsed", key = 0`, named by
/// target and level.
#[test]
fn tracing_values_print_plain_in_both_readers() {
    if !crate::shared::babeltrace2("tracing values as babeltrace2 prints them") {
        return;
    }
    let dir = temp("tracing");
    let trace = pipeline::record("tracing_spans", &[], &[("TAPE_TRACE", "tracing.*")], &dir);
    let bt = Command::new("babeltrace2").arg(&trace).output().unwrap();
    let bt = String::from_utf8_lossy(&bt.stdout).into_owned();
    let (rc, shown, err) = tape(&["show", trace.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(shown, bt);
    assert!(
        bt.lines()
            .any(|l| l.contains(" tracing.app.debug: { tid = ")
                && l.ends_with(", { message = \"parsed\", key = 0 }")),
        "{bt}"
    );
    assert!(!bt.contains("kind = ( \"text\""), "a tagged message: {bt}");
    let _ = std::fs::remove_dir_all(&dir);
}
