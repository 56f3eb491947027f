//! `tape recover` after `kill -9` (issue 16): a real program (tape's
//! `flight` example: 4 threads emitting checksummed, numbered events into
//! shared rings, `TAPE_SHM=on`) is killed with SIGKILL at a random moment,
//! 100 times; each time `tape recover` rebuilds a trace from the rings it
//! left, that `tape check` and babeltrace2 read without a word on stderr,
//! holding only whole events (every checksum right) and, per thread,
//! `emitted = recovered + counted drops` for the events emitted up to the
//! last one recovered (the sequence numbers count them). Also: `tape ps
//! --dead`, `tape recover --clean`, a running process refused, bad
//! directories and mutated ring files named in errors, never a panic.

use crate::flight;
use crate::pipeline;
use crate::shared;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use flight::{base, flight, ring_files, streams_of, tape, text, user_dir, Rng};
use pipeline::TAPE;

#[test]
fn a_hundred_kills_each_recovered_whole_and_accounted() {
    let base = base("kill");
    let user = user_dir(&base);
    let bt = shared::babeltrace2("babeltrace2's reading of the recovered traces");
    let seed = std::env::var("TAPE_RECOVER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()) * 2_654_435_761 + 1);
    eprintln!("kill -9 moments from seed {seed} (TAPE_RECOVER_SEED to repeat)");
    let mut rng = Rng(seed | 1);
    let (mut events, mut overwritten, mut full) = (0u64, 0u64, 0u64);
    for run in 0..100 {
        // One in four runs in discard mode: the rings fill, then drop.
        let mode = if run % 4 == 3 { "discard" } else { "overwrite" };
        let mut child = flight(&base, mode, &[]);
        let dir = user.join(child.id().to_string());
        let t = Instant::now();
        while ring_files(&dir) < 4 {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "run {run}: no 4 rings in {}",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // A random moment: the threads wrap their 64 KiB rings every few
        // milliseconds, so any point of the emit and switch paths.
        std::thread::sleep(Duration::from_micros(rng.next() % 20_000));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let out_dir = base.join(format!("recovered-{run}"));
        let r = tape(
            &[
                "recover",
                dir.to_str().unwrap(),
                "-o",
                out_dir.to_str().unwrap(),
            ],
            &base,
        );
        assert!(
            r.status.success(),
            "run {run}: {}{}",
            text(&r.stdout),
            text(&r.stderr)
        );
        assert!(text(&r.stderr).is_empty(), "run {run}: {}", text(&r.stderr));
        let check = tape(&["check", out_dir.to_str().unwrap()], &base);
        assert!(check.status.success(), "run {run}: {}", text(&check.stderr));
        // babeltrace2's only words on stderr: the losses it reports, per
        // stream, which must be the losses counted.
        let bt_lost = if bt {
            flight::babeltrace2_losses(&out_dir, &format!("run {run}"))
        } else {
            BTreeMap::new()
        };
        let streams = streams_of(&out_dir);
        assert_eq!(streams.len(), 4, "run {run}: {streams:?}");
        for (name, s) in &streams {
            let first = s.seqs[0];
            let last = *s.seqs.last().unwrap();
            assert!(
                s.seqs.windows(2).all(|w| w[1] > w[0]),
                "run {run} {name}: events out of order"
            );
            let recovered = s.seqs.len() as u64;
            match mode {
                // Every event from the first recovered to the last, none
                // missing between them; the events before the first were
                // overwritten, and counted as such in its packet.
                "overwrite" => {
                    assert!(
                        s.seqs.windows(2).all(|w| w[1] == w[0] + 1),
                        "run {run} {name}: a gap among {recovered} events"
                    );
                    assert_eq!(s.first_discarded, Some(first), "run {run} {name}");
                    assert_eq!(last + 1, recovered + s.last_discarded, "run {run} {name}");
                    overwritten += s.last_discarded;
                }
                // From the first event on; once the ring is full, an event
                // that does not fit in the last packet's room is dropped
                // and counted, a smaller one after it may still fit: the
                // missing ones are among those counted.
                _ => {
                    assert_eq!(first, 0, "run {run} {name}");
                    assert!(last + 1 - recovered <= s.lost_full, "run {run} {name}");
                    assert_eq!(s.last_discarded, s.lost_full, "run {run} {name}");
                    full += s.lost_full;
                }
            }
            if bt {
                let file = name.rsplit('/').next().unwrap();
                assert_eq!(
                    bt_lost.get(file).copied().unwrap_or(0),
                    s.last_discarded,
                    "run {run} {name}: babeltrace2's count of the losses"
                );
            }
            events += recovered;
        }
        let _ = std::fs::remove_dir_all(&out_dir);
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!(
        "100 kills: {events} events recovered, {overwritten} counted overwritten, {full} counted \
         dropped when full"
    );
    assert!(overwritten > 0 && full > 0);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn dead_processes_are_listed_cleaned_and_a_running_one_refused() {
    let base = base("ps");
    let user = user_dir(&base);
    let mut child = flight(&base, "overwrite", &["--pace", "64"]);
    let dir = user.join(child.id().to_string());
    let t = Instant::now();
    while ring_files(&dir) < 4 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Running: not dead, not recovered, not removed.
    let pid = child.id().to_string();
    let r = tape(
        &["recover", &pid, "-o", base.join("early").to_str().unwrap()],
        &base,
    );
    assert!(!r.status.success());
    assert!(
        text(&r.stderr).contains("is running"),
        "{}",
        text(&r.stderr)
    );
    assert!(!base.join("early").exists());
    let ps = tape(&["ps", "--dead"], &base);
    assert!(!text(&ps.stdout).contains(&pid), "{}", text(&ps.stdout));
    let clean = tape(&["recover", "--clean", &pid], &base);
    assert!(!clean.status.success(), "{}", text(&clean.stdout));
    assert!(dir.exists());

    child.kill().unwrap();
    child.wait().unwrap();
    let ps = tape(&["ps", "--dead"], &base);
    let listed = text(&ps.stdout);
    let line = listed
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        line.contains("flight") && line.contains(dir.to_str().unwrap()),
        "{line}"
    );
    // By pid, into the default name, from the current directory.
    let r = Command::new(TAPE)
        .args(["recover", &pid])
        .env("TAPE_SHM_DIR", &base)
        .current_dir(&base)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", text(&r.stderr));
    let said = text(&r.stdout);
    assert!(
        said.contains(&format!("recovered process {pid} (flight)")),
        "{said}"
    );
    assert!(said.contains("same boot"), "{said}");
    let trace = base.join(format!("flight-recovered-{pid}"));
    let meta = std::fs::read_to_string(trace.join("metadata")).unwrap();
    assert!(
        meta.contains(&format!("tape_source = \"process {pid} (flight) died")),
        "{meta}"
    );
    assert!(meta.contains("tape_last_event = \"20"), "{meta}");
    // The times are the wall clock's: the last event within the test's
    // minute.
    let shown = tape(&["show", "--clock-seconds", trace.to_str().unwrap()], &base);
    let last = text(&shown.stdout).lines().last().unwrap().to_owned();
    let secs: f64 = last[1..last.find(']').unwrap()].parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - secs).abs() < 60.0, "{last} vs now {now}");
    // `--clean` alone removes nothing: it needs the process or --all.
    let refused = tape(&["recover", "--clean"], &base);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains(
            "tape recover --clean: name the dead process whose rings to remove (its pid, or its \
             rings' directory: `tape ps --dead` lists them), or give --all"
        ),
        "{}",
        text(&refused.stderr)
    );
    assert!(dir.exists());
    // Cleaned: gone, and no longer listed.
    let clean = tape(&["recover", "--clean", "--all"], &base);
    assert!(clean.status.success(), "{}", text(&clean.stderr));
    assert!(text(&clean.stdout).contains(dir.to_str().unwrap()));
    assert!(!dir.exists());
    let ps = tape(&["ps", "--dead"], &base);
    assert_eq!(text(&ps.stdout).lines().count(), 1, "{}", text(&ps.stdout));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn bad_directories_and_mutated_ring_files_are_errors_naming_them() {
    let base = base("bad");
    let user = user_dir(&base);
    // Nothing there.
    let r = tape(&["recover", "4000000000"], &base);
    assert!(!r.status.success());
    assert!(
        text(&r.stderr).contains("no shared rings of process"),
        "{}",
        text(&r.stderr)
    );
    let r = tape(&["recover", "nonsense"], &base);
    assert!(
        text(&r.stderr).contains("neither a process id"),
        "{}",
        text(&r.stderr)
    );
    let r = tape(
        &["recover", base.to_str().unwrap(), "-o", "/nonexistent/x"],
        &base,
    );
    assert!(
        text(&r.stderr).contains("not a directory of shared rings"),
        "{}",
        text(&r.stderr)
    );

    // A real dead process's rings, then its files damaged.
    let mut child = flight(&base, "overwrite", &[]);
    let dir = user.join(child.id().to_string());
    let t = Instant::now();
    while ring_files(&dir) < 4 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(20));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut rings: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("ring-")
        })
        .collect();
    rings.sort();
    let original: Vec<Vec<u8>> = rings.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // Header damage: each file left out with its reason; the others
    // recovered.
    type Damage = fn(&mut Vec<u8>);
    let cases: [(&str, Damage); 5] = [
        ("no TAPERING magic", |b| b[0] = b'X'),
        ("layout version", |b| b[8] = 99),
        ("slots of", |b| {
            b[32..40].copy_from_slice(&1u64.to_ne_bytes())
        }),
        ("offsets", |b| {
            b[48..56].copy_from_slice(&12345u64.to_ne_bytes())
        }),
        ("shorter than", |b| b.truncate(b.len() / 2)),
    ];
    for (i, (why, damage)) in cases.iter().enumerate() {
        let mut bytes = original[0].clone();
        damage(&mut bytes);
        std::fs::write(&rings[0], &bytes).unwrap();
        let out = base.join(format!("damaged-{i}"));
        let r = tape(
            &[
                "recover",
                dir.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ],
            &base,
        );
        // The others are recovered, and the exit says one was left out.
        assert_eq!(r.status.code(), Some(1), "{why}: {}", text(&r.stderr));
        let err = text(&r.stderr);
        assert!(
            err.contains(rings[0].to_str().unwrap())
                && err.contains(why)
                && err.contains("1 ring file(s) left out"),
            "{why}: {err}"
        );
        assert!(
            text(&r.stdout).contains("streams: 3"),
            "{why}: {}",
            text(&r.stdout)
        );
    }
    // A ring the process was making when it died (nothing written yet,
    // its header last): empty, said so, not an error. (One whose header
    // alone is zero held events: left out, above's rule; issue 36.)
    let mut unborn = original[0].clone();
    unborn.fill(0);
    std::fs::write(&rings[0], &unborn).unwrap();
    let out = base.join("unborn");
    let r = tape(
        &[
            "recover",
            dir.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &base,
    );
    assert!(
        r.status.success() && r.stderr.is_empty(),
        "{}",
        text(&r.stderr)
    );
    let said = text(&r.stdout);
    assert!(
        said.contains("streams: 3") && said.contains("being made at the death (empty): 1"),
        "{said}"
    );
    std::fs::write(&rings[0], &original[0]).unwrap();
    // The ring's own words mutated (head, counters, gate, slot metadata):
    // a trace or an error, never a panic or a hang; `tape check` says
    // whether the trace is whole.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..40 {
        let mut bytes = original[1].clone();
        for _ in 0..(1 + rng.next() % 4) {
            // Within the parts before the packets (offset 4096 on).
            let at = 4096 + (rng.next() % 2048) as usize;
            bytes[at] = rng.next() as u8;
        }
        std::fs::write(&rings[1], &bytes).unwrap();
        let out = base.join(format!("mutated-{i}"));
        let r = Command::new(TAPE)
            .args([
                "recover",
                dir.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ])
            .env("TAPE_SHM_DIR", &base)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let r = wait_within(r, Duration::from_secs(30), i);
        assert!(
            !text(&r.stderr).contains("panicked"),
            "mutation {i}: {}",
            text(&r.stderr)
        );
        if out.exists() {
            let c = tape(&["check", out.to_str().unwrap()], &base);
            assert!(!text(&c.stderr).contains("panicked"), "mutation {i}");
        }
    }
    // A missing template is an error naming it.
    std::fs::remove_file(dir.join("metadata-template")).unwrap();
    let r = tape(
        &[
            "recover",
            dir.to_str().unwrap(),
            "-o",
            base.join("x").to_str().unwrap(),
        ],
        &base,
    );
    assert!(!r.status.success());
    assert!(
        text(&r.stderr).contains("metadata-template"),
        "{}",
        text(&r.stderr)
    );
    let _ = std::fs::remove_dir_all(&base);
}

fn wait_within(mut c: Child, limit: Duration, what: usize) -> Output {
    let t = Instant::now();
    loop {
        if c.try_wait().unwrap().is_some() {
            return c.wait_with_output().unwrap();
        }
        if t.elapsed() > limit {
            let _ = c.kill();
            panic!("mutation {what}: tape recover hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
