//! The parallel renderer (`tape show`) gives exactly what the one-thread
//! merge gives: the same events, texts, losses and order, and the same
//! first error at the same place, on 0, 1 and 3 worker threads, with
//! streams cut into parts at every packet and not cut, with and without
//! filters. Checked on every ctf-testsuite trace, babeltrace's test
//! traces, the DPDK and LTTng samples, a generated 4-stream trace of many
//! chunks, and seeded mutations of the samples (errors mid-stream).

use crate::shared;

use crate::mutate;

use std::path::{Path, PathBuf};

use tape_ctf::decode::{open_streams, Discard, TextBuf, TimeText};
use tape_ctf::merge::{Step, StreamMerge};
use tape_ctf::metadata::find_traces;
use tape_ctf::text::{
    render_merged, write_event_rest, write_line_prefix, Piece, Render, Seconds, Threads,
};
use tape_ctf::EventClass;

/// Which events are shown: all, even event ids, or a time window.
#[derive(Clone, Copy, Debug)]
enum Filter {
    All,
    EvenIds,
    Window(i128, i128),
}

impl Filter {
    fn shows(self, c: &EventClass, t: Option<i128>) -> bool {
        match self {
            Filter::All => true,
            Filter::EvenIds => c.id % 2 == 0,
            Filter::Window(a, b) => t.is_some_and(|t| a <= t && t <= b),
        }
    }
}

/// Records as text lines: `E time line`, `L stream n time`, `ERR message`;
/// the line with its time and its delta to the previous event shown.
fn one_thread(dir: &Path, filter: Filter) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(traces) = find_traces(dir) else {
        return vec!["OPEN".into()];
    };
    let Ok(mut merge) = StreamMerge::new(&traces) else {
        return vec!["PLAN".into()];
    };
    let mut prev: Option<i128> = None;
    while let Some(step) = merge.next() {
        match step {
            Err(e) => {
                out.push(format!("ERR {e}"));
                break;
            }
            Ok(Step::Lost(s, n, t)) => out.push(format!("L {} {n} {t:?}", s.path().display())),
            Ok(Step::Event(s, t)) => {
                let shown = s.class().is_some_and(|c| filter.shows(c, t));
                if !shown {
                    // A stream that fails ends; the others go on and the
                    // error comes last.
                    if let Err(e) = s.emit(&mut Discard) {
                        merge.fail(e);
                    }
                    continue;
                }
                let delta = match (prev, t) {
                    (Some(p), Some(t)) => Some(t - p),
                    _ => None,
                };
                let mut text = TextBuf::new();
                // No clock: no `[time] (+delta) `, as babeltrace2 prints.
                if let Some(ns) = t {
                    let mut time = TextBuf::new();
                    Seconds.write(&mut time, ns);
                    write_line_prefix(&mut text, time.as_slice(), delta);
                }
                match write_event_rest(&mut text, s) {
                    // Split as the runs of `threads` are (a name in the
                    // metadata may hold a newline).
                    Ok(()) => {
                        prev = t.or(prev);
                        out.extend(
                            text.as_slice()
                                .split_inclusive(|&b| b == b'\n')
                                .map(|l| format!("E {}", String::from_utf8_lossy(l))),
                        )
                    }
                    Err(e) => merge.fail(e),
                }
            }
        }
    }
    out
}

fn threads(dir: &Path, filter: Filter, threads: Threads) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(traces) = find_traces(dir) else {
        return vec!["OPEN".into()];
    };
    let Ok(streams) = open_streams(&traces) else {
        return vec!["PLAN".into()];
    };
    let r = render_merged(
        streams,
        Render::Text(Seconds),
        |c: &tape_ctf::EventClass, t: Option<i128>| filter.shows(c, t),
        threads,
        |piece| {
            match piece {
                // Runs of whole lines: one record per line (as `one_thread`
                // splits them).
                Piece::Lines(runs) => {
                    let text: Vec<u8> = runs.iter().flat_map(|r| r.iter().copied()).collect();
                    assert_eq!(text.last(), Some(&b'\n'), "a run ends a line");
                    for line in text.split_inclusive(|&b| b == b'\n') {
                        out.push(format!("E {}", String::from_utf8_lossy(line)));
                    }
                }
                Piece::Lost(p, k, t) => out.push(format!("L {} {k} {t:?}", p.display())),
            }
            true
        },
    );
    if let Err(e) = r {
        out.push(format!("ERR {e}"));
    }
    out
}

/// The parallel runs compared: 0, 1 and 3 workers with every packet a
/// part of its own (the most cuts), and 1 worker with streams not cut.
const RUNS: [Threads; 4] = [
    Threads {
        workers: 0,
        part_bytes: 0,
    },
    Threads {
        workers: 1,
        part_bytes: 0,
    },
    Threads {
        workers: 3,
        part_bytes: 0,
    },
    Threads {
        workers: 1,
        part_bytes: u64::MAX,
    },
];

/// Compares both ways on `dir`; returns the number of records.
fn same(dir: &Path) -> usize {
    let all = one_thread(dir, Filter::All);
    // A window over the middle third of the event times (`[S.nnnnnnnnn]`).
    let times: Vec<i128> = all
        .iter()
        .filter_map(|l| l.strip_prefix("E ["))
        .filter_map(|l| {
            let (s, ns) = l.split(']').next()?.split_once('.')?;
            Some(s.parse::<i128>().ok()? * 1_000_000_000 + ns.parse::<i128>().ok()?)
        })
        .collect();
    let window = match (times.iter().min(), times.iter().max()) {
        (Some(&a), Some(&b)) => Filter::Window(a + (b - a) / 3, b - (b - a) / 3),
        _ => Filter::Window(0, 0),
    };
    for filter in [Filter::All, Filter::EvenIds, window] {
        let want = one_thread(dir, filter);
        for t in RUNS {
            let got = threads(dir, filter, t);
            assert_eq!(
                got.len(),
                want.len(),
                "{}: {filter:?}, {t:?}: record count",
                dir.display()
            );
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{}: {filter:?}, {t:?}: record {k}", dir.display());
            }
        }
    }
    all.len()
}

/// Every directory holding a `metadata` file under `root`.
fn trace_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if root.join("metadata").is_file() {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    dirs.sort();
    for d in dirs.iter().filter(|d| d.is_dir()) {
        trace_dirs(d, out);
    }
}

#[test]
fn same_as_one_thread_on_every_suite_trace() {
    let Some(root) = shared::suite("") else {
        return;
    };
    let mut dirs = Vec::new();
    for sub in ["ctf-testsuite", "babeltrace", "samples"] {
        trace_dirs(&root.join(sub), &mut dirs);
    }
    let mut records = 0;
    for d in &dirs {
        records += same(d);
    }
    eprintln!(
        "{} traces, {records} records: same on 0, 1 and 3 worker threads, streams cut at every packet and not cut",
        dirs.len()
    );
    assert!(dirs.len() > 150, "only {} traces found", dirs.len());
}

/// A trace of `events` events in `streams` streams from
/// `gen_lttng_like_trace.py`, in the test directory `name`.
fn generated(name: &str, events: u32, streams: u32) -> Option<PathBuf> {
    shared::generated_lttng_like(
        &PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name),
        events,
        streams,
    )
}

#[test]
fn streams_are_cut_at_packets() {
    let Some(out) = generated("parallel-cuts", 40_000, 2) else {
        return;
    };
    let traces = find_traces(&out).unwrap();
    let whole = open_streams(&traces).unwrap().remove(0);
    let len = std::fs::metadata(whole.path()).unwrap().len();
    let packets = len / 65536;
    assert!(packets >= 6, "{len} bytes: too few packets to cut");
    // (bytes per part at least, parts expected)
    let cases = [
        (0, packets),
        (1, packets),
        (65536, packets),
        (65537, packets.div_ceil(2)),
        (100_000, packets.div_ceil(2)),
        (3 * 65536, packets.div_ceil(3)),
        (len, 1),
        (u64::MAX, 1),
    ];
    let mut want = open_streams(&traces).unwrap().remove(0);
    let want = want.count().unwrap();
    for (bytes, n) in cases {
        let mut parts = vec![open_streams(&traces).unwrap().remove(0)];
        while let Some(rest) = parts.last_mut().unwrap().split_off(bytes) {
            parts.push(rest);
        }
        assert_eq!(parts.len() as u64, n, "parts of at least {bytes} bytes");
        let (mut events, mut lost) = (0, 0);
        for p in &mut parts {
            let c = p.count().unwrap();
            (events, lost) = (events + c.events, lost + c.lost);
            // A part read already is not cut again.
            assert!(p.split_off(0).is_none());
        }
        assert_eq!((events, lost), (want.events, want.lost), "{bytes} bytes");
    }
}

#[test]
fn same_as_one_thread_on_many_chunks() {
    let Some(out) = generated("parallel-4-streams", 40_000, 4) else {
        return;
    };
    assert_eq!(same(&out), 40_000);
    // A payload that fails mid-trace: the last string of stream 1's first
    // packet loses its NUL (its content size is at byte 40 of the packet,
    // in bits). The other streams' earlier events come out first.
    let path = out.join("channel0_1");
    let mut bytes = std::fs::read(&path).unwrap();
    let content = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) / 8;
    bytes[content as usize - 1] = b'x';
    std::fs::write(&path, bytes).unwrap();
    let want = one_thread(&out, Filter::All);
    assert!(want.last().unwrap().contains("no NUL"), "{:?}", want.last());
    same(&out);
}

#[test]
fn same_first_error_on_mutated_traces() {
    let Some(root) = shared::suite("samples") else {
        return;
    };
    let mut dirs = Vec::new();
    trace_dirs(&root, &mut dirs);
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("parallel-mutations-{}", std::process::id()));
    let mut rng = mutate::Rng(0x005e_ed0f_7a9e_0002);
    let (mut runs, mut errors) = (0, 0);
    for dir in &dirs {
        let files: Vec<(std::ffi::OsString, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
            .collect();
        for _ in 0..12 {
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).unwrap();
            for (name, bytes) in &files {
                let mut b = bytes.clone();
                if name != "metadata" {
                    mutate::mutate(&mut rng, &mut b);
                }
                std::fs::write(work.join(name), b).unwrap();
            }
            same(&work);
            runs += 1;
            if one_thread(&work, Filter::All)
                .last()
                .is_some_and(|l| l.starts_with("ERR"))
            {
                errors += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    eprintln!(
        "{runs} mutated traces ({errors} with a decoding error): same on 0, 1 and 3 worker threads, streams cut at every packet and not cut"
    );
    assert!(errors > 0, "no mutation gave a decoding error");
}
