//! A damaged flight recording shows every intact event, then the error:
//! real traces (the LTTng samples) with one stream file cut at a random
//! byte, 50 times. For each cut:
//!
//! * `tape show` prints exactly what it prints for the same trace cut
//!   cleanly at the damaged packet's start (the other streams to their
//!   end), then the error with that packet's offset, status 1;
//! * `tape stats` prints the clean cut's figures, then says where it
//!   stopped, status 1;
//! * the clean cut is a valid trace: babeltrace2 prints the same lines.

use crate::shared;

use crate::mutate;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tape(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tape"))
        .args(args)
        .arg(dir)
        .env("TZ", "UTC")
        .output()
        .expect("run tape")
}

fn copy_trace(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// `packet at byte N` of an error message.
fn packet_offset(stderr: &str) -> Option<u64> {
    let i = stderr.find("packet at byte ")? + "packet at byte ".len();
    let digits: String = stderr[i..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[test]
fn truncated_streams_show_every_intact_event_then_the_error() {
    let Some(root) = shared::suite("samples") else {
        return;
    };
    // Traces whose packets have sizes, so that a packet's start is where a
    // clean cut goes. (DPDK's packets have none: a stream file is one
    // packet, and a cut inside it keeps the events before the cut, which
    // `tape show` prints too, as babeltrace2 does.)
    let sources = [
        root.join("lttng/discard/trace/ust/uid/0/64-bit"),
        root.join("lttng/snapshot/trace/snapshot-1-20261121-200353-0/ust/uid/0/64-bit"),
    ];
    let bt2 = shared::babeltrace2("comparing the clean cuts with babeltrace2");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("truncation");
    let mut rng = mutate::Rng(0x7e57_c0de_0000_0050);
    let (mut damaged, mut whole) = (0, 0);
    for round in 0..50 {
        let src = &sources[round % sources.len()];
        let mut streams: Vec<PathBuf> = std::fs::read_dir(src)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "metadata"))
            .collect();
        streams.sort();
        let stream = &streams[rng.below(streams.len())];
        let name = stream.file_name().unwrap();
        let bytes = std::fs::read(stream).unwrap();
        let cut = rng.below(bytes.len()) as u64;
        let at = format!("round {round}: {} cut at byte {cut}", stream.display());
        let cut_dir = work.join(format!("{round:02}-cut"));
        copy_trace(src, &cut_dir);
        std::fs::write(cut_dir.join(name), &bytes[..cut as usize]).unwrap();

        let show = tape(&["show"], &cut_dir);
        let stderr = String::from_utf8_lossy(&show.stderr).into_owned();
        // Where the damaged packet starts: from the error, checked below
        // (the clean cut there must be a valid trace).
        let clean_at = if show.status.success() {
            whole += 1;
            cut
        } else {
            damaged += 1;
            assert_eq!(show.status.code(), Some(1), "{at}: {stderr}");
            let b = packet_offset(&stderr).unwrap_or_else(|| panic!("{at}: {stderr}"));
            assert!(b <= cut, "{at}: damage at {b}");
            b
        };
        let clean_dir = work.join(format!("{round:02}-clean"));
        copy_trace(src, &clean_dir);
        std::fs::write(clean_dir.join(name), &bytes[..clean_at as usize]).unwrap();
        let clean = tape(&["show"], &clean_dir);
        assert!(
            clean.status.success(),
            "{at}: the clean cut at {clean_at} fails: {}",
            String::from_utf8_lossy(&clean.stderr)
        );
        // (`[LOST n EVENTS] in DIR/stream` lines name the directory.)
        let (got, want) = (
            String::from_utf8_lossy(&show.stdout).replace(&cut_dir.display().to_string(), "DIR"),
            String::from_utf8_lossy(&clean.stdout).replace(&clean_dir.display().to_string(), "DIR"),
        );
        assert!(
            got == want,
            "{at}: {} lines, the clean cut {}",
            got.lines().count(),
            want.lines().count()
        );
        if bt2 && clean_at > 0 {
            let b = Command::new("babeltrace2")
                .arg(&clean_dir)
                .env("TZ", "UTC")
                .output()
                .unwrap();
            assert!(b.status.success(), "{at}: babeltrace2 on the clean cut");
            let events = |t: &str| t.lines().filter(|l| !l.starts_with("[LOST")).count();
            assert_eq!(
                events(&want),
                events(&String::from_utf8_lossy(&b.stdout)),
                "{at}"
            );
        }

        let stats = tape(&["stats"], &cut_dir);
        let clean_stats = tape(&["stats"], &clean_dir);
        let body = |o: &Output, dir: &Path| {
            String::from_utf8_lossy(&o.stdout).replace(&dir.display().to_string(), "DIR")
        };
        assert_eq!(
            body(&stats, &cut_dir),
            body(&clean_stats, &clean_dir),
            "{at}: stats"
        );
        if !show.status.success() {
            let e = String::from_utf8_lossy(&stats.stderr);
            assert_eq!(stats.status.code(), Some(1), "{at}: stats: {e}");
            assert!(
                e.contains(&format!("packet at byte {clean_at}")),
                "{at}: {e}"
            );
            assert!(
                e.contains("the figures above count what was read before"),
                "{e}"
            );
        }
    }
    eprintln!("50 cuts: {damaged} inside a packet, {whole} at a packet boundary");
    assert!(damaged >= 40, "only {damaged} cuts damaged a packet");
}
