//! The real traces in `../shared/ctf-suites/samples` (DPDK overwrite, LTTng
//! snapshot and discard): `tape show` prints, line for line, what
//! babeltrace2 printed for them (stored beside each trace), lost events
//! aside: tape prints them in order as `[LOST n EVENTS]` lines, where
//! babeltrace2 prints warnings on stderr; their counts must agree.

use crate::shared;

use std::process::Command;

fn samples() -> Option<std::path::PathBuf> {
    shared::suite("samples")
}

fn lost_in_warnings(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.strip_prefix("WARNING: Tracer discarded "))
        .filter_map(|l| l.split(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The three samples: (trace directory, babeltrace2's stdout, its stderr if any).
const CASES: [(&str, &str, Option<&str>); 3] = [
    ("dpdk/overwrite/ctf", "dpdk/overwrite/babeltrace2.txt", None),
    (
        "lttng/snapshot/trace",
        "lttng/snapshot/babeltrace2.txt",
        None,
    ),
    (
        "lttng/discard/trace",
        "lttng/discard/babeltrace2.txt",
        Some("lttng/discard/babeltrace2.stderr.txt"),
    ),
];

/// `tape CMD TRACE` (times in UTC, as babeltrace2's stored output): its
/// standard output; it must succeed.
fn tape(cmd: &str, trace: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tape"))
        .arg(cmd)
        .arg(trace)
        .env("TZ", "UTC")
        .output()
        .expect("run tape");
    assert!(
        out.status.success(),
        "{}: {}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The event name of one of babeltrace2's lines: the last word before the
/// first `": "` after the time and delta.
fn bt2_event_name(line: &str) -> &str {
    let rest = line.split(") ").nth(1).unwrap_or("");
    let head = rest.split(": ").next().unwrap_or("");
    head.rsplit(' ').next().unwrap_or("").trim_end_matches(':')
}

/// `tape stats` counts each stream on its own (in parallel), not through
/// the merge `tape show` uses: its totals, per-event counts and losses must
/// be those of babeltrace2's output.
#[test]
fn stats_count_what_babeltrace2_shows() {
    let Some(root) = samples() else {
        return;
    };
    for (trace, want, want_err) in CASES {
        let got = tape("stats", &root.join(trace));
        let want_text = std::fs::read_to_string(root.join(want)).unwrap();
        let mut want_counts = std::collections::BTreeMap::<String, u64>::new();
        for l in want_text.lines() {
            *want_counts.entry(bt2_event_name(l).to_owned()).or_default() += 1;
        }
        let want_lost = want_err
            .map(|p| lost_in_warnings(&std::fs::read_to_string(root.join(p)).unwrap()))
            .unwrap_or(0);
        let total = want_text.lines().count();
        assert!(
            got.contains(&format!("events: {total}, lost: {want_lost}\n")),
            "{trace}: totals\n{got}"
        );
        // Per-event rows: `COUNT  PERCENT  NAME`.
        let mut counts = std::collections::BTreeMap::<String, u64>::new();
        for l in got.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let [n, pct, name] = w.as_slice() {
                if let (Ok(n), true) = (n.parse::<u64>(), pct.contains('.')) {
                    counts.insert((*name).to_owned(), n);
                }
            }
        }
        assert_eq!(counts, want_counts, "{trace}: per-event counts\n{got}");
        eprintln!(
            "{trace}: {} event names, {total} events, {want_lost} lost",
            counts.len()
        );
    }
}

#[test]
fn samples_match_babeltrace2() {
    let Some(root) = samples() else {
        return;
    };
    for (trace, want, want_err) in CASES {
        let got = tape("show", &root.join(trace));
        let want_text = std::fs::read_to_string(root.join(want)).unwrap();
        let events: Vec<&str> = got.lines().filter(|l| !l.starts_with("[LOST ")).collect();
        let want_lines: Vec<&str> = want_text.lines().collect();
        assert_eq!(events.len(), want_lines.len(), "{trace}: event count");
        for (n, (g, w)) in events.iter().zip(&want_lines).enumerate() {
            assert_eq!(g, w, "{trace}: line {}", n + 1);
        }
        let lost: u64 = got
            .lines()
            .filter_map(|l| l.strip_prefix("[LOST "))
            .filter_map(|l| l.split(' ').next()?.parse::<u64>().ok())
            .sum();
        let want_lost = want_err
            .map(|p| lost_in_warnings(&std::fs::read_to_string(root.join(p)).unwrap()))
            .unwrap_or(0);
        assert_eq!(lost, want_lost, "{trace}: lost events");
        eprintln!(
            "{trace}: {} events identical to babeltrace2, {lost} lost",
            events.len()
        );
    }
}
