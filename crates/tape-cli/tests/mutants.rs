//! Differential mutation run: real traces (the DPDK and LTTng samples, the
//! ctf-testsuite's passing traces) mutated at random, then read by
//! `tape check`, `tape show`, `tape stats` and by babeltrace2, the oracle.
//!
//! For every mutant:
//! * no tape command crashes, panics (status 101) or hangs (10 s);
//! * the three commands agree: all succeed, with the same event count (no
//!   success with truncated output), or all fail;
//! * `tape check`'s verdict equals babeltrace2's, except where babeltrace2
//!   is wrong by the CTF 1.8 specification: the kinds of [`BT2_WRONG`],
//!   each recognised from the mutant itself and argued with the spec's
//!   words. Any other disagreement fails the test with the mutant kept on
//!   disk to look at.
//!
//! `TAPE_MUTANTS=N` sets the number of mutants; the seed is fixed, so a
//! run is repeatable. The default, 500 (about 100 s on 2 cores), keeps the
//! README's test command short; CI runs 2,100 (`.ci/run`), as this test
//! always did before the test command was halved (issue 37). The first 500
//! mutants are the same in both runs.

use tape_test_support::{mutate, shared};

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mutate::{mutate, Rng};

/// A trace to mutate: its metadata and stream files.
struct Source {
    dir: PathBuf,
    metadata: Vec<u8>,
    streams: Vec<(String, Vec<u8>)>,
}

fn corpus(root: &Path) -> Vec<Source> {
    let mut dirs = vec![
        root.join("samples/dpdk/overwrite/ctf"),
        root.join("samples/lttng/snapshot/trace/snapshot-1-20261121-200353-0/ust/uid/0/64-bit"),
        root.join("samples/lttng/discard/trace/ust/uid/0/64-bit"),
    ];
    let pass = root.join("ctf-testsuite/tests/1.8/regression/stream/pass");
    let mut suite: Vec<PathBuf> = std::fs::read_dir(&pass)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    suite.sort();
    dirs.extend(suite);
    dirs.retain(|d| d.join("metadata").is_file());
    dirs.into_iter()
        .map(|dir| {
            let metadata = std::fs::read(dir.join("metadata")).unwrap();
            let mut streams: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .filter(|e| e.path().is_file() && e.file_name() != "metadata")
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect();
            streams.sort();
            Source {
                dir,
                metadata,
                streams,
            }
        })
        .collect()
}

/// How a mutant was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// Random bytes of one stream file (flips, overwrites, truncation...).
    StreamBytes,
    /// One stream file cut at a random byte.
    StreamTruncated,
    /// Random bytes of the (text) metadata.
    MetadataBytes,
    /// One `;` of the metadata removed.
    MissingSemicolon,
    /// One `name = value;` attribute line of the metadata written twice.
    DuplicateAttribute,
    /// One number of the metadata replaced by a huge or odd one.
    OddNumber,
}

const KINDS: [Kind; 6] = [
    Kind::StreamBytes,
    Kind::StreamTruncated,
    Kind::MetadataBytes,
    Kind::MissingSemicolon,
    Kind::DuplicateAttribute,
    Kind::OddNumber,
];

/// Makes mutant `kind` of `src` in `out` (a new directory); a description.
fn make(rng: &mut Rng, kind: Kind, src: &Source, out: &Path) -> String {
    let mut meta = src.metadata.clone();
    let mut streams = src.streams.clone();
    let text_meta = meta.starts_with(b"/* CTF");
    let what = match kind {
        Kind::StreamBytes | Kind::StreamTruncated if !streams.is_empty() => {
            let i = rng.below(streams.len());
            let (name, bytes) = &mut streams[i];
            if kind == Kind::StreamBytes {
                mutate(rng, bytes);
                format!("bytes of {name}")
            } else {
                let at = rng.below(bytes.len().max(1));
                bytes.truncate(at);
                format!("{name} cut at byte {at}")
            }
        }
        Kind::MissingSemicolon | Kind::DuplicateAttribute | Kind::OddNumber if text_meta => {
            let text = String::from_utf8_lossy(&meta).into_owned();
            let (t, what) = mutate_text(rng, kind, &text);
            meta = t.into_bytes();
            what
        }
        _ => {
            mutate(rng, &mut meta);
            "bytes of the metadata".into()
        }
    };
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(out.join("metadata"), &meta).unwrap();
    for (name, bytes) in &streams {
        std::fs::write(out.join(name), bytes).unwrap();
    }
    what
}

fn mutate_text(rng: &mut Rng, kind: Kind, text: &str) -> (String, String) {
    match kind {
        Kind::MissingSemicolon => {
            let at: Vec<usize> = text.match_indices(';').map(|(i, _)| i).collect();
            let i = at[rng.below(at.len())];
            let line = text[..i].lines().count();
            (
                format!("{}{}", &text[..i], &text[i + 1..]),
                format!("`;` removed on line {line}"),
            )
        }
        Kind::DuplicateAttribute => {
            let lines: Vec<&str> = text.lines().collect();
            let attrs: Vec<usize> = (0..lines.len())
                .filter(|&i| {
                    let l = lines[i].trim();
                    l.contains(" = ") && l.ends_with(';') && !l.contains('{') && !l.contains('}')
                })
                .collect();
            if attrs.is_empty() {
                return (text.to_owned(), "no attribute line".into());
            }
            let i = attrs[rng.below(attrs.len())];
            let mut out: Vec<&str> = lines.clone();
            out.insert(i + 1, lines[i]);
            (
                out.join("\n") + "\n",
                format!("line {} written twice: `{}`", i + 1, lines[i].trim()),
            )
        }
        _ => {
            let nums: Vec<(usize, usize)> = number_spans(text);
            if nums.is_empty() {
                return (text.to_owned(), "no number".into());
            }
            let (s, e) = nums[rng.below(nums.len())];
            let odd = [
                "18446744073709551615",
                "18446744073709551616",
                "340282366920938463463374607431768211456",
                "9223372036854775808",
                "4294967296",
                "0",
                "-1",
                "65",
                "3",
            ];
            let new = odd[rng.below(odd.len())];
            let line = text[..s].lines().count();
            (
                format!("{}{new}{}", &text[..s], &text[e..]),
                format!("`{}` on line {line} made `{new}`", &text[s..e]),
            )
        }
    }
}

/// Decimal numbers of `text` outside quotes and identifiers.
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut quoted) = (0, false);
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            quoted = !quoted;
        }
        let prev_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if !quoted && c.is_ascii_digit() && !prev_ident {
            let s = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            if b[s..i].iter().all(u8::is_ascii_digit) {
                out.push((s, i));
            }
            continue;
        }
        i += 1;
    }
    out
}

/// What a command did: its status (`None`: killed by a signal or the time
/// limit), stdout lines, stderr.
struct Run {
    status: Option<i32>,
    timed_out: bool,
    stdout: Vec<u8>,
    stderr: String,
}

fn run(cmd: &mut Command, limit: Duration) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    });
    let start = Instant::now();
    let (status, timed_out) = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break (s.code(), false);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break (None, true);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Run {
        status,
        timed_out,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

fn tape(args: &[&str], dir: &Path) -> Run {
    run(
        Command::new(env!("CARGO_BIN_EXE_tape")).args(args).arg(dir),
        Duration::from_secs(10),
    )
}

/// Events `tape show` printed (lines that are not `[LOST ...]`).
fn shown(r: &Run) -> usize {
    r.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.starts_with(b"[LOST "))
        .count()
}

/// `events: N` of `tape stats`, `N events` of `tape check`.
fn counted(r: &Run, before: &str, after: &str) -> Option<u64> {
    let text = String::from_utf8_lossy(&r.stdout);
    let i = text.find(before)? + before.len();
    let rest = &text[i..];
    let j = rest.find(after)?;
    rest[..j].trim().parse().ok()
}

/// Disagreements where babeltrace2 is wrong, recognised from the mutant and
/// babeltrace2's own output, with the specification's words.
const BT2_WRONG: &[(&str, &str)] = &[
    (
        "babeltrace2 crashed or hung",
        "a reader must not crash on any input; tape's verdict stands on its own",
    ),
    (
        "an enumerator out of its container's range, accepted by babeltrace2",
        "CTF 1.8 §4.1.8: an enumeration maps integer values of its container type; \
         the ctf-testsuite's metadata/fail/enum-*-out-of-range and enum-values-too-small \
         expect failure (babeltrace2 does not check)",
    ),
    (
        "time going backwards in a stream, rejected by babeltrace2's muxer",
        "CTF 1.8 does not require a stream's timestamps to increase; the ctf-testsuite's \
         stream/pass/lttng-modules-trace has such a stream and expects success (babeltrace \
         1.5 reads it); tape check warns, naming the stream and the first place",
    ),
    (
        "an integer wider than 64 bits, rejected by babeltrace2",
        "CTF 1.8 §4.1.5: an integer's size is any number of bits; the ctf-testsuite's \
         stream/pass/integer-large-size (1024 bits) expects success; babeltrace2 rejects \
         the metadata of any integer over 64 bits",
    ),
];

/// Which [`BT2_WRONG`] entry explains a disagreement, if any: recognised
/// from both readers' own words, so that an entry never hides another cause.
fn bt2_wrong(bt2: &Run, check: &Run) -> Option<&'static str> {
    if bt2.timed_out || bt2.status.is_none() {
        return Some(BT2_WRONG[0].0);
    }
    if bt2.status == Some(0) && check.stderr.contains("is out of the container's range") {
        return Some(BT2_WRONG[1].0);
    }
    if check.status == Some(0)
        && check.stderr.contains("time goes backwards")
        && bt2
            .stderr
            .contains("timestamp is less than muxer's message iterator's last returned timestamp")
    {
        return Some(BT2_WRONG[2].0);
    }
    if check.status == Some(0)
        && bt2
            .stderr
            .contains("integer fields over 64 bits are not supported")
    {
        return Some(BT2_WRONG[3].0);
    }
    None
}

#[test]
fn mutants_tape_agrees_with_itself_and_with_babeltrace2() {
    let Some(root) = shared::suite("") else {
        return;
    };
    if !shared::babeltrace2("the mutation run") {
        return;
    }
    let sources = corpus(&root);
    let total: usize = std::env::var("TAPE_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mutants");
    let _ = std::fs::remove_dir_all(&work);
    // The mutants, made up front from one seeded generator (repeatable).
    let mut rng = Rng(0x5eed_0fb7_2a11_c0de);
    let mutants: Vec<(usize, Kind, PathBuf, String)> = (0..total)
        .map(|i| {
            let src = &sources[rng.below(sources.len())];
            let kind = KINDS[i % KINDS.len()];
            let dir = work.join(format!("{i:05}"));
            let what = make(&mut rng, kind, src, &dir);
            let what = format!("{}: {what}", src.dir.display());
            (i, kind, dir, what)
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    #[derive(Default)]
    struct Tally {
        /// (kind, tape verdict ok, bt2 verdict ok) -> count
        verdicts: BTreeMap<(Kind, bool, bool), usize>,
        explained: BTreeMap<&'static str, usize>,
        problems: Vec<String>,
    }
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((n, kind, dir, what)) = mutants.get(i) else {
                    break;
                };
                let check = tape(&["check"], dir);
                let show = tape(&["show"], dir);
                let stats = tape(&["stats"], dir);
                let bt2 = run(
                    Command::new("babeltrace2").arg(dir),
                    Duration::from_secs(10),
                );
                let mut problems = Vec::new();
                for (name, r) in [("check", &check), ("show", &show), ("stats", &stats)] {
                    match r.status {
                        Some(0) | Some(1) => {}
                        _ => problems.push(format!(
                            "tape {name} ended with {:?} (timed out: {}): {}",
                            r.status, r.timed_out, r.stderr
                        )),
                    }
                }
                let ok = check.status == Some(0);
                if (show.status == Some(0)) != ok || (stats.status == Some(0)) != ok {
                    problems.push(format!(
                        "check {:?}, show {:?}, stats {:?} disagree: {} / {} / {}",
                        check.status,
                        show.status,
                        stats.status,
                        check.stderr,
                        show.stderr,
                        stats.stderr
                    ));
                } else if ok {
                    let c = counted(&check, "trace(s), ", " events");
                    let t = counted(&stats, "events: ", ",");
                    let s = shown(&show) as u64;
                    if c != Some(s) || t != Some(s) {
                        problems.push(format!(
                            "event counts differ: check {c:?}, stats {t:?}, show {s}"
                        ));
                    }
                }
                let bt2_verdict = bt2.status == Some(0);
                let mut t = tally.lock().unwrap();
                *t.verdicts.entry((*kind, ok, bt2_verdict)).or_default() += 1;
                if ok != bt2_verdict {
                    match bt2_wrong(&bt2, &check) {
                        Some(why) => *t.explained.entry(why).or_default() += 1,
                        None => problems.push(format!(
                            "tape check says {}, babeltrace2 {}: tape: {} babeltrace2: {}",
                            if ok { "ok" } else { "invalid" },
                            if bt2_verdict { "ok" } else { "invalid" },
                            check.stderr.lines().last().unwrap_or(""),
                            bt2.stderr
                                .lines()
                                .find(|l| l.contains("ERROR") || l.contains("CAUSED BY"))
                                .unwrap_or("")
                        )),
                    }
                }
                if problems.is_empty() {
                    let _ = std::fs::remove_dir_all(dir);
                } else {
                    for p in problems {
                        t.problems.push(format!(
                            "mutant {n} ({kind:?}, {what}) {}: {p}",
                            dir.display()
                        ));
                    }
                }
            });
        }
    });
    let t = tally.into_inner().unwrap();
    eprintln!("{total} mutants; (kind, tape ok, babeltrace2 ok): count");
    for ((k, a, b), n) in &t.verdicts {
        eprintln!("  {k:?} tape {a} bt2 {b}: {n}");
    }
    for (why, n) in &t.explained {
        eprintln!("  babeltrace2 wrong ({why}): {n}");
    }
    for p in &t.problems {
        eprintln!("PROBLEM {p}");
    }
    assert!(
        t.problems.is_empty(),
        "{} problems (above)",
        t.problems.len()
    );
}
