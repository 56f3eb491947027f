//! The real traces in `../shared/ctf-suites/samples` (DPDK overwrite, LTTng
//! snapshot and discard): `tape show` prints, line for line, what
//! babeltrace2 printed for them (stored beside each trace), lost events
//! aside: tape prints them in order as `[LOST n EVENTS]` lines, where
//! babeltrace2 prints warnings on stderr; their counts must agree.

#[path = "../../tape-ctf/tests/support/shared.rs"]
mod shared;

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

#[test]
fn samples_match_babeltrace2() {
    let Some(root) = samples() else {
        return;
    };
    // (trace directory, babeltrace2's stdout, babeltrace2's stderr if any)
    let cases = [
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
    for (trace, want, want_err) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_tape"))
            .args(["show"])
            .arg(root.join(trace))
            .env("TZ", "UTC")
            .output()
            .expect("run tape");
        assert!(
            out.status.success(),
            "{trace}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = String::from_utf8(out.stdout).unwrap();
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
