//! The parallel renderer (`tape show`) gives exactly what the one-thread
//! merge gives: the same events, texts, losses and order, and the same
//! first error at the same place, on 0, 1 and 3 worker threads, with and
//! without filters. Checked on every ctf-testsuite trace, babeltrace's test
//! traces, the DPDK and LTTng samples, a generated 4-stream trace of many
//! chunks, and seeded mutations of the samples (errors mid-stream).

#[path = "support/shared.rs"]
mod shared;

#[path = "support/mutate.rs"]
mod mutate;

use std::path::{Path, PathBuf};

use tape_ctf::fast::{open_streams, write_event_rest, write_line_prefix, FastMerge, Step};
use tape_ctf::line::TextBuf;
use tape_ctf::parallel::{render_merged, Piece, Render, Seconds, TimeText};
use tape_ctf::plan::Discard;
use tape_ctf::read::find_traces;
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
    let Ok(mut merge) = FastMerge::new(&traces) else {
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
                    if let Err(e) = s.emit(&mut Discard) {
                        out.push(format!("ERR {e}"));
                        break;
                    }
                    continue;
                }
                let mut time = TextBuf::new();
                match t {
                    Some(ns) => Seconds.write(&mut time, ns),
                    None => time.put(b"??:??:??.?????????"),
                }
                let delta = match (prev, t) {
                    (Some(p), Some(t)) => Some(t - p),
                    _ => None,
                };
                prev = t.or(prev);
                let mut text = TextBuf::new();
                write_line_prefix(&mut text, time.as_slice(), delta);
                match write_event_rest(&mut text, s) {
                    Ok(()) => out.push(format!(
                        "E {t:?} {}",
                        String::from_utf8_lossy(text.as_slice())
                    )),
                    Err(e) => {
                        out.push(format!("ERR {e}"));
                        break;
                    }
                }
            }
        }
    }
    out
}

fn threads(dir: &Path, filter: Filter, n: usize) -> Vec<String> {
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
        |c, t| filter.shows(c, t),
        n,
        |piece| {
            out.push(match piece {
                Piece::Event(t, text) => format!("E {t:?} {}", String::from_utf8_lossy(text)),
                Piece::Lost(p, k, t) => format!("L {} {k} {t:?}", p.display()),
            });
            true
        },
    );
    if let Err(e) = r {
        out.push(format!("ERR {e}"));
    }
    out
}

/// Compares both ways on `dir`; returns the number of records.
fn same(dir: &Path) -> usize {
    let all = one_thread(dir, Filter::All);
    // A window over the middle third of the event times.
    let times: Vec<i128> = all
        .iter()
        .filter_map(|l| l.strip_prefix("E Some("))
        .filter_map(|l| l.split(')').next()?.parse().ok())
        .collect();
    let window = match (times.iter().min(), times.iter().max()) {
        (Some(&a), Some(&b)) => Filter::Window(a + (b - a) / 3, b - (b - a) / 3),
        _ => Filter::Window(0, 0),
    };
    for filter in [Filter::All, Filter::EvenIds, window] {
        let want = one_thread(dir, filter);
        for n in [0, 1, 3] {
            let got = threads(dir, filter, n);
            assert_eq!(
                got.len(),
                want.len(),
                "{}: {filter:?}, {n} threads: record count",
                dir.display()
            );
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g,
                    w,
                    "{}: {filter:?}, {n} threads: record {k}",
                    dir.display()
                );
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
        "{} traces, {records} records: same on 0, 1 and 3 worker threads",
        dirs.len()
    );
    assert!(dirs.len() > 150, "only {} traces found", dirs.len());
}

#[test]
fn same_as_one_thread_on_many_chunks() {
    let Some(tools) = shared::suite("../tools/gen_lttng_like_trace.py") else {
        return;
    };
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("parallel-4-streams");
    let _ = std::fs::remove_dir_all(&out);
    let ok = std::process::Command::new("python3")
        .arg(&tools)
        .arg(&out)
        .args(["40000", "4"])
        .output();
    match ok {
        Ok(o) if o.status.success() => {}
        _ if std::env::var("TAPE_REQUIRE_TOOLS").as_deref() == Ok("1") => {
            panic!(
                "python3 {} failed and TAPE_REQUIRE_TOOLS=1",
                tools.display()
            )
        }
        _ => {
            eprintln!(
                "NOTICE: python3 could not run {}: skipping",
                tools.display()
            );
            return;
        }
    }
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
        "{runs} mutated traces ({errors} with a decoding error): same on 0, 1 and 3 worker threads"
    );
    assert!(errors > 0, "no mutation gave a decoding error");
}
