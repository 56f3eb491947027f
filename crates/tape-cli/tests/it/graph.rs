//! `#[tape::traced]` recorded by a real program (tape's
//! `examples/traced.rs`: two threads; nested, recursive, early-returning,
//! panicking and async functions; a method left out with `notrace`; an
//! event inside a call) and drawn by `tape graph`: each thread's lines
//! are the calls the program made, in ftrace's function_graph layout,
//! with a duration on every leaf and closing line and on no other. The
//! layout itself, column by column, is tested against golden files in
//! tape-ctf (`tests/it/graph.rs`).

use crate::pipeline;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use pipeline::TAPE;

/// The program's requests per thread (keys 0, t+2, t+3, 13, t+5).
const REQUESTS: u64 = 5;

/// Runs the example; its trace's directory.
fn record(dir: &Path) -> std::path::PathBuf {
    let mut c = Command::new(pipeline::example("traced"));
    c.args(["--requests", &REQUESTS.to_string()])
        .env("TAPE_TRACE", "fn.*,app.*");
    run(c, dir)
}

use pipeline::saved as run;

/// `tape ARGS`'s standard output (a failure, with its stderr, if it
/// fails).
fn tape(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(TAPE).args(args).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `worker-N` -> its thread id, from the stream files' names.
fn threads(trace: &Path) -> BTreeMap<String, i64> {
    std::fs::read_dir(trace)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let (thread, tid) = name.rsplit_once('-')?;
            Some((thread.to_owned(), tid.parse().ok()?))
        })
        .filter(|(t, _)| t.starts_with("worker-"))
        .collect()
}

/// `tape graph` with `args`: per thread id, its lines as (duration column,
/// call text with its indentation).
fn graph(trace: &Path, args: &[&str]) -> BTreeMap<i64, Vec<(String, String)>> {
    let mut all = vec!["graph".as_ref(), trace.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    let text = tape(&all);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# tracer: function_graph"));
    let mut per: BTreeMap<i64, Vec<(String, String)>> = BTreeMap::new();
    for line in lines.skip(4) {
        let (tid, rest) = line.split_once(") ").unwrap_or_else(|| panic!("{line:?}"));
        let tid: i64 = tid.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        let (duration, call) = rest.split_once("|  ").unwrap_or(("", rest));
        per.entry(tid)
            .or_default()
            .push((duration.trim().to_owned(), call.to_owned()));
    }
    per
}

/// The lines thread `t` draws, as the program's logic says (durations
/// checked apart).
fn expected(t: u64) -> Vec<String> {
    let mut v = Vec::new();
    let ind = |d: usize, s: &str| format!("{}{s}", "  ".repeat(d));
    for i in 0..REQUESTS {
        let key = match i % 5 {
            0 => 0,
            3 => 13,
            _ => i + t + 1,
        };
        v.push(ind(0, "traced::serve::request() {"));
        // Its argument and its return value (funcgraph-args, -retval).
        v.push(ind(
            1,
            &format!(
                "traced::parse(line={:?}); /* = {key} */",
                format!("{key}\n")
            ),
        ));
        if key == 13 {
            // Panics at its start: a leaf, exited while unwinding, with no
            // return value.
            v.push(ind(1, "traced::Store::get();"));
        } else if key != 0 {
            let n = (key % 4) as usize;
            v.push(ind(1, "traced::Store::get() {"));
            for d in 0..n {
                v.push(ind(2 + d, "traced::Store::fold() {"));
            }
            v.push(ind(2 + n, "traced::Store::fold();"));
            for d in (0..n).rev() {
                v.push(ind(2 + d, "}"));
            }
            let value: u64 = (1..=key % 4).product();
            v.push(ind(1, &format!("}} /* traced::Store::get = {value} */")));
            // At depth 0 a comment is not indented (the kernel's
            // print_graph_comment).
            v.push(format!("/* app.reply: key={key} value={value} */"));
        }
        v.push(ind(0, "}"));
    }
    // The async fn: two polls, one call (its id: see `call_ids`).
    v.push("traced::fetch(call=N);".into());
    v.push("traced::fetch(call=N);".into());
    v
}

/// A line with its async call id replaced by `N`, and the id.
fn call_id(line: &str) -> (String, Option<u64>) {
    match line.split_once("(call=") {
        Some((head, rest)) => {
            let (id, tail) = rest.split_once(')').unwrap();
            (format!("{head}(call=N){tail}"), Some(id.parse().unwrap()))
        }
        None => (line.to_owned(), None),
    }
}

fn has_duration(d: &str) -> bool {
    let d = d.trim_start_matches(['+', '!', '#', '*', '@', '$', ' ']);
    d.strip_suffix(" us")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

#[test]
fn each_thread_draws_the_calls_it_made() {
    let dir = tempfile_dir("graph");
    let trace = record(&dir);
    let tids = threads(&trace);
    assert_eq!(tids.len(), 2, "{tids:?}");
    let per = graph(&trace, &[]);
    let mut async_calls = Vec::new();
    for (t, name) in ["worker-0", "worker-1"].iter().enumerate() {
        let lines = &per[&tids[*name]];
        let (calls, ids): (Vec<String>, Vec<Option<u64>>) =
            lines.iter().map(|(_, c)| call_id(c)).unzip();
        assert_eq!(calls, expected(t as u64), "{name}");
        // The async fn's two polls: one call, its id its own.
        let ids: Vec<u64> = ids.into_iter().flatten().collect();
        assert_eq!(ids.len(), 2, "{name}");
        assert_eq!(ids[0], ids[1], "{name}: two polls of one call");
        async_calls.push(ids[0]);
        for (d, c) in lines {
            let closing = c.contains(");") || c.trim_start().starts_with('}');
            assert_eq!(has_duration(d), closing, "{name}: {d:?} before {c:?}");
        }
    }
    assert_ne!(
        async_calls[0], async_calls[1],
        "each thread's call has its own id"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tracing_spans_draw_as_calls_nesting_with_traced_functions() {
    // tape-tracing's example: per worker, `request` spans holding a
    // `parse` span (with an event) and a traced function, then the
    // `fetch` span of a future polled on each worker.
    let dir = tempfile_dir("graph-spans");
    let mut c = Command::new(pipeline::example("tracing_spans"));
    c.args(["--requests", "2"])
        .env("TAPE_TRACE", "tracing.app.*.entry,tracing.app.*.exit,fn.*");
    let trace = run(c, &dir);
    let tids = threads(&trace);
    let per = graph(&trace, &[]);
    let mut fetch = Vec::new();
    for name in ["worker-0", "worker-1"] {
        let lines: Vec<(String, Option<u64>)> =
            per[&tids[name]].iter().map(|(_, c)| call_id(c)).collect();
        let calls: Vec<&str> = lines.iter().map(|(c, _)| c.as_str()).collect();
        let request = [
            "tracing::app::info::request(call=N) {",
            "  tracing::app::debug::parse(call=N);",
            "  tracing_spans::checksum();",
            "}",
        ];
        let mut want: Vec<&str> = request.iter().chain(&request).copied().collect();
        want.push("tracing::app::info::fetch(call=N);");
        assert_eq!(calls, want, "{name}");
        // Each request and parse its own call; the fetch's the same on both.
        let ids: Vec<u64> = lines.iter().filter_map(|(_, id)| *id).collect();
        assert_eq!(ids.len(), 2 * 2 + 1, "{name}");
        fetch.push(*ids.last().unwrap());
    }
    assert_eq!(
        fetch[0], fetch[1],
        "one future, one call, polled on both workers"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn max_depth_function_and_tail_options() {
    let dir = tempfile_dir("graph-options");
    let trace = record(&dir);
    let tid = threads(&trace)["worker-0"];
    let t = tid.to_string();

    // max_graph_depth 1: the outermost calls; a request whose inner calls
    // are hidden is a leaf unless an event is inside it.
    let per = graph(&trace, &["--max-depth", "1", "--thread", &t]);
    assert_eq!(per.len(), 1);
    let calls: Vec<String> = per[&tid].iter().map(|(_, c)| call_id(c).0).collect();
    let want: Vec<String> = expected(0)
        .into_iter()
        .filter(|l| !l.starts_with(' '))
        .collect::<Vec<_>>()
        .split(|l| l == "}")
        .flat_map(|group| match group {
            [open] if open.ends_with(" {") => vec![open.replace(" {", ";")],
            [open, rest @ ..] if open.ends_with(" {") => {
                let mut g = vec![open.clone()];
                g.extend(rest.iter().cloned());
                g.push("}".into());
                g
            }
            other => other.to_vec(),
        })
        .collect();
    assert_eq!(calls, want);

    // set_graph_function: only the store's get, drawn from depth 0, its
    // name after every brace with --tail.
    let per = graph(
        &trace,
        &["--function", "traced::Store::get", "--tail", "--thread", &t],
    );
    let calls: Vec<String> = per[&tid].iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(
        calls.first().map(String::as_str),
        Some("traced::Store::get() {")
    );
    assert!(calls.iter().all(|c| c.contains("Store::")), "{calls:?}");
    let closes = calls
        .iter()
        .filter(|c| c.trim_start().starts_with('}'))
        .count();
    assert!(closes > 0);
    assert!(
        calls
            .iter()
            .filter(|c| c.trim_start().starts_with('}'))
            .all(|c| c.contains("} /* traced::Store::")),
        "{calls:?}"
    );
    // Three gets that return (keys 2, 3, 5), one that panics (a leaf).
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.as_str() == "traced::Store::get() {")
            .count(),
        3
    );
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.as_str() == "traced::Store::get();")
            .count(),
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Parses a duration column (`1.382 us`) into ns.
fn ns(text: &str) -> f64 {
    text.trim_end_matches(" us").trim().parse::<f64>().unwrap() * 1000.0
}

#[test]
fn the_profile_counts_the_calls_the_program_made() {
    let dir = tempfile_dir("profile");
    let trace = record(&dir);
    let text = tape(&["profile".as_ref(), trace.as_os_str()]);
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("  Function "));
    assert!(lines.next().unwrap().starts_with("  -------- "));
    // Calls per function over both threads, from the program's logic.
    let mut want: BTreeMap<&str, u64> = BTreeMap::new();
    for t in 0..2u64 {
        for i in 0..REQUESTS {
            let key = match i % 5 {
                0 => 0,
                3 => 13,
                _ => i + t + 1,
            };
            *want.entry("traced::serve::request").or_default() += 1;
            *want.entry("traced::parse").or_default() += 1;
            if key != 0 {
                *want.entry("traced::Store::get").or_default() += 1;
            }
            if key != 0 && key != 13 {
                *want.entry("traced::Store::fold").or_default() += key % 4 + 1;
            }
        }
        *want.entry("traced::fetch").or_default() += 2;
    }
    let mut got: BTreeMap<&str, u64> = BTreeMap::new();
    let mut last_time = f64::INFINITY;
    for line in lines {
        // name, hits, then seven `N us` columns: time, avg, s^2, self,
        // p50, p99, max.
        let tokens: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(tokens.len(), 16, "{line:?}");
        assert!(
            tokens[3..].iter().step_by(2).all(|u| *u == "us"),
            "{line:?}"
        );
        got.insert(tokens[0], tokens[1].parse().unwrap());
        let d: Vec<f64> = tokens[2..].iter().step_by(2).map(|n| ns(n)).collect();
        let [time, avg, _s2, own, p50, p99, max] = [d[0], d[1], d[2], d[3], d[4], d[5], d[6]];
        assert!(time <= last_time, "sorted by total time: {line}");
        last_time = time;
        assert!(
            own <= time && avg <= max && p50 <= p99 && p99 <= max,
            "{line}"
        );
    }
    assert_eq!(got, want, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_thread_per_stream_draws_the_lines_of_one_merged_pass() {
    let dir = tempfile_dir("graph-parity");
    let trace = record(&dir);
    for args in [
        &[][..],
        &["--proc", "--abstime"],
        &["--max-depth", "2", "--tail"],
    ] {
        let run = |extra: &[&str]| {
            let mut all = vec!["graph".as_ref(), trace.as_os_str()];
            all.extend(args.iter().chain(extra).map(std::ffi::OsStr::new));
            tape(&all)
        };
        let (parallel, merged) = (run(&[]), run(&["--one-pass"]));
        assert!(parallel.lines().count() > 50, "{parallel}");
        assert_eq!(parallel, merged, "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Per thread id, the text of each event line of `tape show --format
/// ftrace` (`name: text`).
fn ftrace_texts(trace: &Path) -> BTreeMap<i64, Vec<String>> {
    let text = tape(&[
        "show".as_ref(),
        "--format".as_ref(),
        "ftrace".as_ref(),
        trace.as_os_str(),
    ]);
    let mut per: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let line = line.trim_start();
        let (task, rest) = line.split_once(' ').unwrap();
        let tid = task.rsplit_once('-').unwrap().1.parse().unwrap();
        let (_, event) = rest.split_once(": ").unwrap();
        per.entry(tid).or_default().push(event.to_owned());
    }
    per
}

/// Every event other than a traced function's is drawn as a comment with
/// the text `tape show --format ftrace` prints for it. The quickstart's
/// events have read-time formats, strings (non-ASCII too), enums, flags,
/// floats, addresses and zero-padded numbers; the readme's have none
/// (`name=value` pairs) and a byte sequence: the graph writes the flat
/// ones (integers and strings) as they decode and the others through
/// ftrace's writer; both must be ftrace's text.
#[test]
fn comments_are_the_ftrace_text_of_their_events() {
    let shapes: [(&str, &[&str]); 2] = [
        (
            "quickstart",
            &[
                "worker=2 path=/\u{fc}n\u{ef}code",
                "flags=HIT|DIRTY",
                "key=0x",
                "latency_us=",
            ],
        ),
        (
            "readme",
            &["app.net.rx: port=3 len=60 ifname=eth0", "app.net.tx: "],
        ),
    ];
    for (example, shapes) in shapes {
        let dir = tempfile_dir(&format!("graph-comments-{example}"));
        let trace = run(Command::new(pipeline::example(example)), &dir);
        let expected = ftrace_texts(&trace);
        let text = tape(&["graph".as_ref(), trace.as_os_str()]);
        let mut drawn: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for line in text.lines().filter(|l| l.contains("/* ")) {
            let (tid, rest) = line.split_once(')').unwrap();
            let comment = rest.split_once("/* ").unwrap().1;
            let comment = comment.strip_suffix(" */").unwrap();
            drawn
                .entry(tid.trim().parse().unwrap())
                .or_default()
                .push(comment.to_owned());
        }
        assert_eq!(drawn, expected, "{example}");
        let all: Vec<&String> = drawn.values().flatten().collect();
        for shape in shapes {
            assert!(
                all.iter().any(|c| c.contains(shape)),
                "{example}: no comment has {shape}: {all:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
