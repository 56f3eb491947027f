//! `tape export` (`--format perfetto`, `--format chrome`) against what
//! `tape show` reads from the
//! same trace, the file decoded with Perfetto's own schema
//! (`scripts/perfetto-summary.py`: the `perfetto` package's
//! `perfetto_trace_pb2`, trace_processor's rules for interning, defaults
//! and slices; an unknown field number is an error). Real programs (the
//! guide's example, the function tracer's) and generated traces of every
//! field type: every event is in the file, at its time, on its thread,
//! with its fields; every traced call is a slice with the entry's and
//! exit's times; calls without an exit or an entry are kept, marked.
//!
//! The decoder needs Python's `perfetto` package (`pip install
//! perfetto==0.59.1`, as `.ci/run` does): without it the tests print a
//! notice and skip, and fail under `TAPE_REQUIRE_TOOLS=1`.

use crate::gen;
use crate::pipeline;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline::{record, TAPE};
use serde_json::{json, Value};

/// The decoded summary of `file`, or `None` (after a notice) when Perfetto's
/// schema cannot be imported here.
pub(crate) fn summary(file: &Path) -> Option<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/perfetto-summary.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(file)
        .output()
        .expect("python3 runs");
    if out.status.code() == Some(2) {
        let why = String::from_utf8_lossy(&out.stderr);
        crate::shared::required(
            &format!(
                "the Perfetto decoding checks of tape export ({})",
                why.trim()
            ),
            "pip install perfetto==0.59.1",
        );
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "summary of {}: {e}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success() && v["errors"].as_array().is_some_and(Vec::is_empty),
        "{} does not decode cleanly: {}",
        file.display(),
        v["errors"]
    );
    Some(v)
}

/// `tape export TRACE -o FILE ARGS`: the file, and the summary on stderr.
pub(crate) fn export(trace: &Path, dir: &Path, args: &[&str]) -> (PathBuf, String) {
    let file = dir.join("trace.pftrace");
    let out = Command::new(TAPE)
        .arg("export")
        .arg(trace)
        .arg("-o")
        .arg(&file)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "tape export {}: {err}",
        trace.display()
    );
    (file, err)
}

/// `tape show --format json`'s events.
fn show(trace: &Path) -> Vec<Value> {
    let out = Command::new(TAPE)
        .args(["show", "--format", "json"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A value of `tape show`'s JSON as the file holds it: an enum by its
/// first label (its value when it has none); the rest as they are.
fn as_annotation(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.contains_key("labels") && m.contains_key("value") => {
            match m["labels"].as_array().and_then(|l| l.first()) {
                Some(label) => label.clone(),
                None => m["value"].clone(),
            }
        }
        // An annotation with no entries is one with no value: Perfetto
        // has no empty dictionary apart from an empty array.
        Value::Object(m) if m.is_empty() => json!([]),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), as_annotation(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(as_annotation).collect()),
        v => v.clone(),
    }
}

/// An event's args as the file should hold them: its payload fields, and
/// its contexts as dictionaries.
fn expected_args(e: &Value, skip: &[&str]) -> Value {
    let mut args = serde_json::Map::new();
    for scope in ["stream_context", "context"] {
        if let Some(v) = e.get(scope) {
            args.insert(scope.to_owned(), as_annotation(v));
        }
    }
    if let Some(Value::Object(fields)) = e.get("fields") {
        for (k, v) in fields {
            if !skip.contains(&k.as_str()) {
                args.insert(k.clone(), as_annotation(v));
            }
        }
    }
    Value::Object(args)
}

/// A line of `tape show --format json` as the file's instant holds it:
/// (time, thread id, thread name, name, args); a loss is `lost events`
/// with its `count`, on the thread of its stream (`<name>-<tid>`).
fn expected_instant(e: &Value) -> Value {
    if let Some(n) = e.get("lost") {
        let stream = Path::new(e["stream"].as_str().unwrap())
            .file_name()
            .unwrap();
        let (name, tid) = stream.to_str().unwrap().rsplit_once('-').unwrap();
        let tid: i64 = tid.parse().unwrap();
        return json!([e["time_ns"], tid, name, "lost events", {"count": n}]);
    }
    let pc = &e["packet_context"];
    json!([
        e["time_ns"],
        pc["tid"],
        pc["thread_name"],
        e["name"],
        expected_args(e, &[])
    ])
}

/// The file's instants as [`expected_instant`] gives them.
fn instants(s: &Value) -> Vec<Value> {
    let threads = thread_tracks(s);
    s["instants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let (tid, name) = &threads[&track_key(i)];
            json!([i["ts"], tid, name, i["name"], i["args"]])
        })
        .collect()
}

/// Thread tracks by uuid: (tid, name).
fn thread_tracks(s: &Value) -> BTreeMap<String, (i64, String)> {
    s["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == "thread")
        .map(|(k, t)| {
            (
                k.clone(),
                (
                    t["tid"].as_i64().unwrap(),
                    t["name"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

fn track_key(v: &Value) -> String {
    v["track"].as_u64().unwrap().to_string()
}

#[test]
fn the_readme_example_exports_every_event_as_tape_show_reads_it() {
    let dir = tempdir("readme");
    let trace = record("quickstart", &[], &[], &dir.join("t"));
    let (file, said) = export(&trace, &dir, &[]);
    let Some(s) = summary(&file) else { return };
    let events = show(&trace);
    assert!(events.len() > 100, "{} events", events.len());
    assert!(said.contains(&format!("{} events", events.len())), "{said}");

    // Every event an instant on its thread's track, at its time, with its
    // fields; in the same order (by time, then as read).
    let got = instants(&s);
    let want: Vec<Value> = events.iter().map(expected_instant).collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert!(s["slices"].as_array().unwrap().is_empty());

    // The process, and the clock: REALTIME as tape's times, BOOTTIME and
    // MONOTONIC where the trace's env puts them.
    let metadata = std::fs::read_to_string(trace.join("metadata")).unwrap();
    let env = |key: &str| -> i128 {
        let line = metadata
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap();
        pipeline::number_after(line, "= ").into()
    };
    let process = s["tracks"]
        .as_object()
        .unwrap()
        .values()
        .find(|t| t["kind"] == "process")
        .unwrap();
    assert_eq!(process["pid"].as_i64().unwrap() as i128, env("pid ="));
    assert_eq!(process["name"], "quickstart");
    assert_eq!(s["clocks_used"], json!([1]));
    let snap = &s["clock_snapshots"][0]["clocks"];
    let real = snap["1"].as_u64().unwrap() as i128;
    assert_eq!(real, events[0]["time_ns"].as_i64().unwrap() as i128);
    assert_eq!(
        snap["6"].as_u64().unwrap() as i128,
        real - env("tape_realtime_minus_boottime_ns")
    );
    assert_eq!(
        snap["3"].as_u64().unwrap() as i128,
        real - env("tape_realtime_minus_monotonic_ns")
    );
}

#[test]
fn counters_are_the_fields_values_in_time_order() {
    let dir = tempdir("counter");
    let trace = record("quickstart", &[], &[], &dir.join("t"));
    let specs = ["quickstart.request.done.latency_us", "quickstart.*.bytes"];
    let mut args = Vec::new();
    for c in specs {
        args.extend(["--counter", c]);
    }
    let (file, _) = export(&trace, &dir, &args);
    let Some(s) = summary(&file) else { return };
    let events = show(&trace);
    for (spec, field) in specs.iter().zip(["latency_us", "bytes"]) {
        let (uuid, _) = s["tracks"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, t)| t["kind"] == "counter" && t["name"] == *spec)
            .unwrap_or_else(|| panic!("no counter track {spec}"));
        let got: Vec<Value> = s["counters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| track_key(c) == *uuid)
            .map(|c| json!([c["ts"], c["counter"]]))
            .collect();
        let want: Vec<Value> = events
            .iter()
            .filter(|e| e["name"] == "quickstart.request.done")
            .map(|e| json!([e["time_ns"], e["fields"][field]]))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want, "{spec}");
    }
}

#[test]
fn bad_counters_are_refused_by_name() {
    let dir = tempdir("badcounter");
    let trace = record("quickstart", &[], &[], &dir.join("t"));
    for (spec, says) in [
        ("nodot", "expected EVENT.FIELD"),
        ("no.such.event.x", "no event of the trace"),
        ("quickstart.request.done.nosuch", "numeric field \"nosuch\""),
        ("quickstart.request.queued.path", "numeric field \"path\""),
        ("quickstart.[.x", "--counter \"quickstart.[.x\""),
    ] {
        let out = Command::new(TAPE)
            .arg("export")
            .arg(&trace)
            .args(["-o", dir.join("x").to_str().unwrap(), "--counter", spec])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{spec}");
        assert!(
            err.contains(says) && err.contains(spec.split('.').next().unwrap()),
            "{spec}: {err}"
        );
        assert!(!dir.join("x").exists(), "{spec}: a file was left");
    }
}

/// What the file must hold of a thread's traced calls, read from `tape
/// show`'s events: (slices as (name, begin, end, args), calls with no
/// exit as (name, begin), calls open at the end, exits with no entry as
/// (name, time)).
#[derive(Debug, Default, PartialEq)]
struct Calls {
    slices: Vec<Value>,
    no_exit: Vec<Value>,
    open: Vec<Value>,
    no_entry: Vec<Value>,
}

/// A function tracer class name's function and role: `fn.a.B.f.entry` ->
/// (`a::B::f`, "entry").
fn role(name: &str) -> Option<(String, &str)> {
    // (`tape show` lines of losses have no name.) A `tracing` span's
    // (tape-tracing) entry and exit: `tracing.app.info.request.entry` ->
    // (`tracing::app::info::request`, "entry"); its other events are not
    // calls.
    if let Some(rest) = name.strip_prefix("tracing.") {
        let (f, role) = rest.rsplit_once('.')?;
        return matches!(role, "entry" | "exit")
            .then(|| (format!("tracing::{}", f.replace('.', "::")), role));
    }
    let rest = name.strip_prefix("fn.")?;
    let (f, role) = rest.rsplit_once('.')?;
    Some((f.replace('.', "::"), role))
}

fn expected_calls(events: &[Value]) -> BTreeMap<i64, Calls> {
    /// Per thread: what it gives, its open calls (depth, function, entry
    /// time, args), the return value read for the next exit.
    type Thread = (Calls, Vec<(u64, String, Value, Value)>, Option<Value>);
    let mut by_thread: BTreeMap<i64, Thread> = BTreeMap::new();
    for e in events.iter().filter(|e| e.get("lost").is_none()) {
        let tid = e["packet_context"]["tid"].as_i64().unwrap();
        let (calls, stack, ret) = by_thread.entry(tid).or_default();
        let Some((f, role)) = role(e["name"].as_str().unwrap()) else {
            continue;
        };
        let depth = e["fields"]["depth"].as_u64().unwrap_or(0);
        let t = e["time_ns"].clone();
        match role {
            "entry" => {
                while stack.last().is_some_and(|c| c.0 >= depth) {
                    let c = stack.pop().unwrap();
                    calls.no_exit.push(json!([c.1, c.2]));
                }
                stack.push((depth, f, t, expected_args(e, &["depth"])));
            }
            "ret" => *ret = Some(json!([f, e["fields"]["ret"]])),
            "exit" => {
                while stack.last().is_some_and(|c| c.0 > depth) {
                    let c = stack.pop().unwrap();
                    calls.no_exit.push(json!([c.1, c.2]));
                }
                let r = ret
                    .take()
                    .filter(|r| r[0] == f.as_str())
                    .map(|r| r[1].clone());
                if stack.last().is_some_and(|c| c.0 == depth && c.1 == f) {
                    let (_, f, begin, mut args) = stack.pop().unwrap();
                    // The exit's own fields and the return value join the
                    // slice's args.
                    if let Value::Object(own) = expected_args(e, &["depth"]) {
                        args.as_object_mut().unwrap().extend(own);
                    }
                    if let Some(r) = r {
                        args["ret"] = r;
                    }
                    calls.slices.push(json!([f, begin, t, args]));
                } else {
                    calls.no_entry.push(json!([f, t]));
                }
            }
            _ => {}
        }
    }
    by_thread
        .into_iter()
        .map(|(tid, (mut calls, stack, _))| {
            calls.open = stack.into_iter().map(|c| json!([c.1, c.2])).collect();
            (tid, calls)
        })
        .collect()
}

/// The calls the file holds, per thread id.
fn exported_calls(s: &Value) -> BTreeMap<i64, Calls> {
    let threads = thread_tracks(s);
    let tracks = s["tracks"].as_object().unwrap();
    let mut out: BTreeMap<i64, Calls> = threads
        .values()
        .map(|(t, _)| (*t, Calls::default()))
        .collect();
    for sl in s["slices"].as_array().unwrap() {
        let track = track_key(sl);
        let (name, begin) = (sl["name"].clone(), sl["ts"].clone());
        if let Some((tid, _)) = threads.get(&track) {
            let c = out.get_mut(tid).unwrap();
            if sl["dur"].is_null() {
                c.open.push(json!([name, begin]));
            } else if sl["args"]["exit_not_in_trace"] == true {
                // Begun early (a call inside it began in the same ns) and
                // found without an exit: ended where that showed, marked.
                c.no_exit.push(json!([name, begin]));
            } else {
                let end = begin.as_u64().unwrap() + sl["dur"].as_u64().unwrap();
                c.slices.push(json!([name, begin, end, sl["args"]]));
            }
        } else if let Some((tid, _)) = tracks[&track]["parent"]
            .as_u64()
            .and_then(|p| threads.get(&p.to_string()))
        {
            // A thread's no-exit track: begun, never ended, marked.
            assert!(sl["dur"].is_null(), "{sl}");
            assert_eq!(sl["args"]["exit_not_in_trace"], true, "{sl}");
            out.get_mut(tid).unwrap().no_exit.push(json!([name, begin]));
        }
    }
    for i in s["instants"].as_array().unwrap() {
        if i["args"]["entry_not_in_trace"] == true {
            let (tid, _) = &threads[&track_key(i)];
            out.get_mut(tid)
                .unwrap()
                .no_entry
                .push(json!([i["name"], i["ts"]]));
        }
    }
    for c in out.values_mut() {
        // The file holds slices by begin time; show's model by end (ties,
        // nested calls within one clock tick, by their text).
        c.slices
            .sort_by_key(|s| (s[2].as_u64(), s[1].as_u64(), s.to_string()));
        c.no_exit.sort_by_key(|s| s[1].as_u64());
        c.open.sort_by_key(|s| s[1].as_u64());
    }
    out
}

/// Runs the traced example with `env` and `args`, exports its trace and
/// checks the file's calls against `tape show`'s: the summary, the calls,
/// and what `tape export` said.
fn calls_match(
    tag: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Option<(Value, BTreeMap<i64, Calls>, String, PathBuf)> {
    calls_match_of("traced", tag, env, args)
}

/// [`calls_match`] for example `example`.
fn calls_match_of(
    example: &str,
    tag: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Option<(Value, BTreeMap<i64, Calls>, String, PathBuf)> {
    let dir = tempdir(tag);
    let trace = record(example, args, env, &dir.join("t"));
    let (file, said) = export(&trace, &dir, &[]);
    let s = summary(&file)?;
    let events = show(&trace);
    let mut want = expected_calls(&events);
    for c in want.values_mut() {
        c.slices
            .sort_by_key(|s| (s[2].as_u64(), s[1].as_u64(), s.to_string()));
        c.no_exit.sort_by_key(|s| s[1].as_u64());
    }
    let got = exported_calls(&s);
    assert_eq!(got, want, "{tag}");
    Some((s, want, said, trace))
}

#[test]
fn traced_calls_are_slices_with_their_args_and_return_values() {
    let env = [("TAPE_TRACE", "fn.*,app.*")];
    let Some((s, calls, _, _)) = calls_match("traced", &env, &["--requests", "5"]) else {
        return;
    };
    let slices: usize = calls.values().map(|c| c.slices.len()).sum();
    assert!(slices > 40, "{slices} slices");
    assert!(calls
        .values()
        .all(|c| c.no_exit.is_empty() && c.no_entry.is_empty()));
    // Arguments and return values arrived (`parse(line)` returns its key).
    let parse = s["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "traced::parse")
        .unwrap();
    assert!(
        parse["args"]["line"].is_string() && parse["args"]["ret"].is_u64(),
        "{parse}"
    );

    // Each async call: its polls on its own async track (a child of the
    // process), the same intervals as on the threads, joined by one flow.
    let tracks = s["tracks"].as_object().unwrap();
    let threads = thread_tracks(&s);
    let mut polls: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    let mut flows: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for sl in s["slices"].as_array().unwrap() {
        if sl["name"] != "traced::fetch" {
            continue;
        }
        let span = (sl["ts"].as_u64().unwrap(), sl["dur"].as_u64().unwrap());
        let track = track_key(sl);
        if threads.contains_key(&track) {
            let ids = sl["flows"].as_array().unwrap();
            assert_eq!(ids.len(), 1, "{sl}");
            flows
                .entry(ids[0].as_u64().unwrap())
                .or_default()
                .push(span);
        } else {
            assert_eq!(tracks[&track]["kind"], "track");
            assert_eq!(tracks[&track]["name"], "traced::fetch");
            polls.entry(track).or_default().push(span);
        }
    }
    assert!(!polls.is_empty());
    let mut by_call: Vec<Vec<(u64, u64)>> = polls.into_values().collect();
    let mut by_flow: Vec<Vec<(u64, u64)>> = flows.into_values().collect();
    by_call.sort();
    by_flow.sort();
    assert_eq!(by_call, by_flow);
    assert!(
        by_call.iter().all(|p| p.len() == 2),
        "each call polled twice: {by_call:?}"
    );
}

#[test]
fn tracing_spans_are_slices_on_their_threads_and_one_async_track_each() {
    // tape-tracing's example: `request` and `parse` spans with a traced
    // function inside, and a `fetch` span instrumenting a future polled
    // on both workers, then entered on main when it is dropped.
    let env = [("TAPE_TRACE", "tracing.*,fn.*")];
    let Some((s, calls, _, trace)) =
        calls_match_of("tracing_spans", "spans", &env, &["--requests", "3"])
    else {
        return;
    };
    // Per span: (slices on its threads, intervals on an async track), in
    // Perfetto's file and in the Chrome JSON (`X` and `b`): the same, each
    // span drawn once on its thread and, only when async, on its track.
    let threads = thread_tracks(&s);
    let mut perfetto: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for sl in s["slices"].as_array().unwrap() {
        let name = sl["name"].as_str().unwrap();
        if name.starts_with("tracing::") {
            let e = perfetto.entry(name.to_owned()).or_default();
            if threads.contains_key(&track_key(sl)) {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    let (events, _) = chrome(&trace, &tempdir("spans-chrome"), &[]);
    let mut chrome_counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for e in &events {
        let name = e["name"].as_str().unwrap_or("");
        if !name.starts_with("tracing::") {
            continue;
        }
        match e["ph"].as_str().unwrap() {
            "X" => chrome_counts.entry(name.to_owned()).or_default().0 += 1,
            "b" => chrome_counts.entry(name.to_owned()).or_default().1 += 1,
            _ => {}
        }
    }
    assert_eq!(
        chrome_counts, perfetto,
        "slices per span: Chrome against Perfetto"
    );
    assert_eq!(perfetto["tracing::app::info::request"], (6, 0));
    assert_eq!(perfetto["tracing::app::info::fetch"], (3, 3));
    let count = |name: &str| -> usize {
        calls
            .values()
            .flat_map(|c| &c.slices)
            .filter(|sl| sl[0] == name)
            .count()
    };
    assert_eq!(count("tracing::app::info::request"), 6);
    assert_eq!(count("tracing::app::debug::parse"), 6);
    assert_eq!(count("tracing_spans::checksum"), 6);
    assert_eq!(count("tracing::app::info::fetch"), 3);
    assert!(calls
        .values()
        .all(|c| c.no_exit.is_empty() && c.no_entry.is_empty() && c.open.is_empty()));
    // A synchronous span (`request`, `parse`: entered once, then closed)
    // is one slice on its thread's track: no async track, no flow.
    // `fetch`, entered on three threads, is one async track of its three
    // intervals, which are also its threads' slices, joined by one flow
    // (from its first interval, drawn on the async track once the second
    // came, through the others on their threads).
    let threads = thread_tracks(&s);
    let mut on_threads = Vec::new();
    let mut async_tracks: BTreeMap<String, Vec<(u64, u64, u64)>> = BTreeMap::new();
    let mut by_flow: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for sl in s["slices"].as_array().unwrap() {
        let name = sl["name"].as_str().unwrap();
        if !name.starts_with("tracing::") {
            continue;
        }
        let call = sl["args"]["call"].as_u64().unwrap();
        let span = (
            call,
            sl["ts"].as_u64().unwrap(),
            sl["dur"].as_u64().unwrap(),
        );
        let track = track_key(sl);
        let flows = sl["flows"].as_array().unwrap();
        if name != "tracing::app::info::fetch" {
            assert!(threads.contains_key(&track) && flows.is_empty(), "{sl}");
            continue;
        }
        if threads.contains_key(&track) {
            on_threads.push(span);
        } else {
            async_tracks.entry(track).or_default().push(span);
        }
        for id in flows {
            by_flow.entry(id.as_u64().unwrap()).or_default().push(span);
        }
    }
    assert_eq!(async_tracks.len(), 1, "one async track: {async_tracks:?}");
    let mut on_track = async_tracks.into_values().next().unwrap();
    on_track.sort();
    on_threads.sort();
    assert_eq!(on_track.len(), 3);
    assert_eq!(on_track, on_threads, "the same intervals");
    assert_eq!(by_flow.len(), 1, "one flow: {by_flow:?}");
    assert_eq!(by_flow.into_values().next().unwrap().len(), 3);
}

#[test]
fn calls_without_an_exit_move_to_a_child_track() {
    // The request's exit is not recorded: each request's entry is found
    // unexited by the next one's, the last stays open.
    let pattern =
        "app.*,fn.traced.serve.request.entry,fn.traced.parse.*,fn.traced.Store.*,fn.traced.fetch.*";
    let env = [("TAPE_TRACE", pattern)];
    let Some((_, calls, _, _)) = calls_match("noexit", &env, &["--requests", "4"]) else {
        return;
    };
    for c in calls.values() {
        // Each request but the last is found unexited by the next (the
        // last by the async call after it, or it stays open).
        assert!(c.no_exit.len() >= 3, "{c:?}");
        let requests = |v: &Vec<Value>| {
            v.iter()
                .filter(|x| x[0] == "traced::serve::request")
                .count()
        };
        assert_eq!(requests(&c.no_exit) + requests(&c.open), 4, "{c:?}");
    }
}

#[test]
fn an_overwritten_start_keeps_every_call_it_still_holds_and_marks_the_loss() {
    // A small ring in overwrite mode: the oldest packets are gone, with
    // entries whose exits remain (exits without an entry).
    let env = [
        ("TAPE_TRACE", "fn.*,app.*"),
        ("TAPE_TRACE_BUFSZ", "16K"),
        ("TAPE_TRACE_PACKETSZ", "1K"),
    ];
    let Some((s, calls, said, trace)) = calls_match("overwrite", &env, &["--requests", "3000"])
    else {
        return;
    };
    // Exits whose entries were overwritten: marked instants (checked
    // against show's events by `calls_match`).
    assert!(calls.values().any(|c| !c.no_entry.is_empty()), "{calls:?}");
    // Every other event and every loss as `tape show` has it.
    let got: Vec<Value> = instants(&s)
        .into_iter()
        .filter(|i| i[4].get("entry_not_in_trace").is_none())
        .collect();
    let want: Vec<Value> = show(&trace)
        .iter()
        .filter(|e| e.get("lost").is_some() || role(e["name"].as_str().unwrap()).is_none())
        .map(expected_instant)
        .collect();
    assert!(want.iter().any(|w| w[3] == "lost events"));
    assert_eq!(got, want);
    // The losses `tape stats` counts are the `lost events` instants' sum.
    let out = Command::new(TAPE)
        .arg("stats")
        .arg(&trace)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&out.stdout);
    let lost = pipeline::number_after(stats.lines().nth(1).unwrap(), "lost: ");
    assert!(lost > 0, "{stats}");
    let marked: u64 = s["instants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["name"] == "lost events")
        .map(|i| i["args"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(marked, lost);
    assert!(said.contains(&format!("{lost} events lost")), "{said}");
}

#[test]
fn generated_traces_of_every_field_type_export_every_event() {
    for seed in 0..40 {
        let dir = tempdir(&format!("gen-{seed}"));
        let trace = gen::generate(seed);
        let tdir = dir.join("trace");
        trace.write(&tdir).unwrap();
        let (file, _) = export(&tdir, &dir, &[]);
        let Some(s) = summary(&file) else { return };
        let events = show(&tdir);
        let mut got: Vec<Value> = s["instants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| json!([i["ts"], i["name"], i["args"]]))
            .collect();
        let mut want: Vec<Value> = events
            .iter()
            .map(|e| match e.get("lost") {
                Some(n) => json!([e["time_ns"], "lost events", {"count": n}]),
                None => json!([e["time_ns"], e["name"], expected_args(e, &[])]),
            })
            .collect();
        // An event without a time takes its thread's previous one (0 at
        // first), a time before the origin is 0 (Perfetto's are unsigned):
        // times are compared where every event has one at or after it.
        if events
            .iter()
            .any(|e| e["time_ns"].is_null() || e["time_ns"].as_i64().is_some_and(|t| t < 0))
        {
            for v in got.iter_mut().chain(want.iter_mut()) {
                v[0] = Value::Null;
            }
        }
        let key = |v: &Value| v.to_string();
        got.sort_by_key(key);
        want.sort_by_key(key);
        assert_eq!(got.len(), want.len(), "seed {seed}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "seed {seed}");
        }
    }
}

/// A fresh directory for one test.
fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tape-perfetto-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `tape export --format chrome` of `trace`: its JSON, checked to be one
/// object with `traceEvents`, and its time origin.
fn chrome(trace: &Path, dir: &Path, args: &[&str]) -> (Vec<Value>, u64) {
    let mut all = vec!["--format", "chrome"];
    all.extend(args);
    let (file, _) = export(trace, dir, &all);
    let v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let origin = v["otherData"]["tape_time_origin_ns"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (v["traceEvents"].as_array().unwrap().clone(), origin)
}

/// A Chrome time (microseconds after the origin, three decimals) in ns.
fn chrome_ns(v: &Value, origin: u64) -> u64 {
    origin + (v.as_f64().unwrap() * 1000.0).round() as u64
}

#[test]
fn chrome_json_holds_every_event_with_tape_shows_fields() {
    let dir = tempdir("chrome-readme");
    let trace = record("quickstart", &[], &[], &dir.join("t"));
    let (events, origin) = chrome(
        &trace,
        &dir,
        &["--counter", "quickstart.request.done.bytes"],
    );
    let shown = show(&trace);
    let names: BTreeMap<i64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_i64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let got: Vec<Value> = events
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| {
            let tid = e["tid"].as_i64().unwrap();
            json!([
                chrome_ns(&e["ts"], origin),
                tid,
                names[&tid],
                e["name"],
                e["args"]
            ])
        })
        .collect();
    let want: Vec<Value> = shown
        .iter()
        .map(|e| {
            let pc = &e["packet_context"];
            json!([e["time_ns"], pc["tid"], pc["thread_name"], e["name"], {"fields": e["fields"]}])
        })
        .collect();
    assert_eq!(got, want);
    let counters: Vec<Value> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| json!([chrome_ns(&e["ts"], origin), e["name"], e["args"]["value"]]))
        .collect();
    let want: Vec<Value> = shown
        .iter()
        .filter(|e| e["name"] == "quickstart.request.done")
        .map(|e| {
            json!([
                e["time_ns"],
                "quickstart.request.done.bytes",
                e["fields"]["bytes"]
            ])
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(counters, want);
}

#[test]
fn chrome_json_calls_are_complete_events_that_nest() {
    for (tag, env) in [
        ("chrome-calls", vec![("TAPE_TRACE", "fn.*,app.*")]),
        (
            "chrome-overwrite",
            vec![
                ("TAPE_TRACE", "fn.*,app.*"),
                ("TAPE_TRACE_BUFSZ", "16K"),
                ("TAPE_TRACE_PACKETSZ", "1K"),
            ],
        ),
    ] {
        let dir = tempdir(tag);
        let requests = if tag == "chrome-calls" { "5" } else { "3000" };
        let trace = record("traced", &["--requests", requests], &env, &dir.join("t"));
        let (events, origin) = chrome(&trace, &dir, &[]);
        let want = expected_calls(&show(&trace));
        let mut got: BTreeMap<i64, Calls> = BTreeMap::new();
        for e in events.iter().filter(|e| e["ph"] != "M") {
            let tid = e["tid"].as_i64().unwrap_or(0);
            let c = got.entry(tid).or_default();
            let (name, ts) = (e["name"].clone(), chrome_ns(&e["ts"], origin));
            match e["ph"].as_str().unwrap() {
                "X" => {
                    let end = ts + (e["dur"].as_f64().unwrap() * 1000.0).round() as u64;
                    c.slices.push(json!([name, ts, end]));
                }
                "B" => c.open.push(json!([name, ts])),
                "i" if e["args"]["exit_not_in_trace"] == true => c.no_exit.push(json!([name, ts])),
                "i" if e["args"]["entry_not_in_trace"] == true => {
                    c.no_entry.push(json!([name, ts]))
                }
                _ => {}
            }
        }
        got.retain(|_, c| *c != Calls::default());
        for c in got.values_mut() {
            c.slices
                .sort_by_key(|s| (s[2].as_u64(), s[1].as_u64(), s.to_string()));
        }
        let want: BTreeMap<i64, Calls> = want
            .into_iter()
            .map(|(tid, mut c)| {
                for s in &mut c.slices {
                    s.as_array_mut().unwrap().truncate(3);
                }
                c.slices
                    .sort_by_key(|s| (s[2].as_u64(), s[1].as_u64(), s.to_string()));
                (tid, c)
            })
            .filter(|(_, c)| *c != Calls::default())
            .collect();
        assert_eq!(got, want, "{tag}");
        // Slices of a thread nest: each starts after the one enclosing
        // it and ends before it ends.
        for c in got.values() {
            let mut spans: Vec<(u64, u64)> = c
                .slices
                .iter()
                .map(|s| (s[1].as_u64().unwrap(), s[2].as_u64().unwrap()))
                .collect();
            spans.sort_by_key(|&(b, e)| (b, std::cmp::Reverse(e)));
            let mut open: Vec<u64> = Vec::new();
            for (b, e) in spans {
                while open.last().is_some_and(|&end| end <= b) {
                    open.pop();
                }
                if let Some(&end) = open.last() {
                    assert!(
                        e <= end,
                        "{tag}: a slice {b}..{e} overlaps its parent ending {end}"
                    );
                }
                open.push(e);
            }
        }
    }
}

#[test]
fn a_full_disk_and_a_closed_pipe_end_the_export_cleanly() {
    let dir = tempdir("hostile");
    let trace = record("quickstart", &[], &[], &dir.join("t"));
    // Far more than a pipe holds (64 KiB): the reader leaves mid-export.
    let env = [("TAPE_TRACE", "fn.*,app.*"), ("TAPE_TRACE_BUFSZ", "64M")];
    let big = record("traced", &["--requests", "20000"], &env, &dir.join("big"));
    for format in ["perfetto", "chrome"] {
        // /dev/full: every write fails with ENOSPC; the error names the
        // file, and the device is not removed.
        let out = Command::new(TAPE)
            .arg("export")
            .arg(&trace)
            .args(["--format", format, "-o", "/dev/full"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{format}: {err}");
        assert!(
            err.contains("cannot write /dev/full") && err.contains("space"),
            "{format}: {err}"
        );
        assert!(Path::new("/dev/full").exists());
        // A reader that goes away: a quiet end, no panic.
        let mut child = Command::new(TAPE)
            .arg("export")
            .arg(&big)
            .args(["--format", format, "-o", "-"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {err}");
        assert!(!err.contains("panicked"), "{format}: {err}");
        // It did stop early: no summary of a complete export.
        assert!(!err.contains("tape export:"), "{format}: {err}");
    }
    // Not a trace: an error naming it.
    let out = Command::new(TAPE)
        .args(["export", "/nonexistent/trace", "-o"])
        .arg(dir.join("x"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/trace"));
}

#[test]
fn a_time_range_and_event_names_select_what_tape_show_selects() {
    let dir = tempdir("range");
    let trace = record("quickstart", &[], &[], &dir.join("t"));
    let all = show(&trace);
    let at = |i: usize| {
        let ns = all[i]["time_ns"].as_i64().unwrap();
        format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
    };
    let (begin, end) = (at(20), at(all.len() - 30));
    let options = [
        "--begin",
        &begin,
        "--end",
        &end,
        "--events",
        "quickstart.request.{start,done}",
    ];
    let (file, _) = export(&trace, &dir, &options);
    let Some(s) = summary(&file) else { return };
    let out = Command::new(TAPE)
        .args(["show", "--format", "json"])
        .args(options)
        .arg(&trace)
        .output()
        .unwrap();
    let want: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| expected_instant(&serde_json::from_str(l).unwrap()))
        .collect();
    assert!(
        want.len() > 20 && want.len() < all.len() - 50,
        "{}",
        want.len()
    );
    assert_eq!(instants(&s), want);
}
