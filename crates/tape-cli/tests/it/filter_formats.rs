//! A read-time `--filter` keeps the same events in every output: for each
//! expression of a table (the common fields under their own and ftrace's
//! names, payload fields, both together, one that keeps nothing), on a
//! trace of tape's `examples/traced.rs` (two threads, traced calls and
//! events), the events kept per event name are the same in `tape show`'s
//! text, JSON and ftrace text and in `tape stats`, and their number is what
//! `tape export` says it wrote (perfetto and chrome). A thread's filter
//! draws the graph `--thread` draws and profiles what the thread's table
//! holds. In text every kept line is the unfiltered line, context
//! included (babeltrace2's line). A common field the trace does not carry
//! (`common_cpu`: a tape trace has no CPU) is an error naming the fields
//! there are, from every command.

use crate::pipeline;

use std::collections::BTreeMap;

use pipeline::tape;

/// The table: `{TID1}` is worker-1's thread id.
const FILTERS: &[&str] = &[
    r#"common_thread == "worker-0""#,
    r#"common_comm ~ "worker-*""#,
    "common_tid == {TID1}",
    "common_pid == {TID1}",
    "common_tid != {TID1} && depth >= 1",
    "depth == 1",
    "key > 3",
    "ret == 0",
    r#"common_thread == "nobody""#,
];

/// Per event name, how many of `text`'s lines are its events, as
/// `pattern(name)` finds them.
fn per_name(
    names: &[String],
    text: &str,
    pattern: impl Fn(&str) -> String,
) -> BTreeMap<String, usize> {
    names
        .iter()
        .map(|n| {
            let p = pattern(n);
            (n.clone(), text.lines().filter(|l| l.contains(&p)).count())
        })
        .filter(|(_, c)| *c > 0)
        .collect()
}

/// `tape stats`'s per-name table.
fn stats_table(text: &str) -> BTreeMap<String, usize> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [count, pct, name] if pct.contains('.') => {
                    Some((name.to_string(), count.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// A text line but its delta (`(+0.000001234) `).
fn without_delta(l: &str) -> String {
    match (l.find(" (+"), l.find(") ")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &l[..a], &l[b + 1..]),
        _ => l.to_owned(),
    }
}

fn ok(args: &[&str]) -> String {
    let (rc, out, err) = tape(args);
    assert_eq!(rc, 0, "tape {args:?}: {err}");
    out
}

#[test]
fn a_filter_keeps_the_same_events_in_every_output() {
    let dir = pipeline::temp("filter-formats");
    let trace = pipeline::record(
        "traced",
        &["--requests", "5"],
        &[("TAPE_TRACE", "fn.*,app.*")],
        &dir,
    );
    let t = trace.to_str().unwrap();
    let names: Vec<String> = stats_table(&ok(&["stats", t])).into_keys().collect();
    assert!(names.len() > 5, "{names:?}");
    let tids: BTreeMap<String, String> = std::fs::read_dir(&trace)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            let (thread, tid) = n.rsplit_once('-')?;
            tid.parse::<u32>().ok()?;
            Some((thread.to_owned(), tid.to_owned()))
        })
        .collect();
    let tid1 = &tids["worker-1"];
    let all_lines: std::collections::HashSet<String> =
        ok(&["show", t]).lines().map(without_delta).collect();
    let mut kept_any = 0;
    for f in FILTERS {
        let f = f.replace("{TID1}", tid1);
        let text = ok(&["show", t, "--filter", &f]);
        let json = ok(&["show", "--format", "json", t, "--filter", &f]);
        let ftrace = ok(&["show", "--format", "ftrace", t, "--filter", &f]);
        let stats = stats_table(&ok(&["stats", t, "--filter", &f]));
        let by_text = per_name(&names, &text, |n| format!(" {n}: "));
        let by_json = per_name(&names, &json, |n| format!("\"name\":\"{n}\""));
        let by_ftrace = per_name(&names, &ftrace, |n| format!(" {n}: "));
        assert_eq!(by_text, by_json, "{f}: text and JSON");
        assert_eq!(by_text, by_ftrace, "{f}: text and ftrace");
        assert_eq!(by_text, stats, "{f}: text and stats");
        // Every kept line is the unfiltered one, context included (but
        // the delta, which is to the previous line shown).
        for l in text.lines() {
            assert!(
                all_lines.contains(&without_delta(l)),
                "{f}: a line not in the unfiltered text: {l}"
            );
        }
        let total: usize = by_text.values().sum();
        kept_any += usize::from(total > 0);
        for format in ["perfetto", "chrome"] {
            let out = dir.join(format!("x.{format}"));
            let (rc, _, err) = tape(&[
                "export",
                "--format",
                format,
                "-o",
                out.to_str().unwrap(),
                t,
                "--filter",
                &f,
            ]);
            assert_eq!(rc, 0, "{f}: {err}");
            assert!(
                err.contains(&format!("tape export: {total} events ")),
                "{f}: {format}: {err}"
            );
        }
    }
    assert!(
        kept_any >= FILTERS.len() - 1,
        "the table's filters keep events"
    );
    // A thread's filter: the graph of `--thread`, the profile of the thread.
    for (thread, tid) in &tids {
        let f = format!("common_thread == \"{thread}\"");
        assert_eq!(
            ok(&["graph", t, "--filter", &f]),
            ok(&["graph", t, "--thread", tid]),
            "{f}"
        );
        let all = ok(&["profile", "--per-thread", t]);
        let own = all
            .split("\n\n")
            .find(|s| s.starts_with(&format!("thread {tid}:")))
            .unwrap_or_else(|| panic!("no table of {tid} in {all}"));
        let filtered = ok(&["profile", "--per-thread", t, "--filter", &f]);
        assert_eq!(filtered.trim_end(), own.trim_end(), "{f}");
    }
    // A common field the trace lacks: an error naming those it has.
    let cpu = "common_cpu == 0";
    let out = dir.join("cpu.pftrace");
    let commands: [Vec<&str>; 7] = [
        vec!["show", t],
        vec!["show", "--format", "json", t],
        vec!["show", "--format", "ftrace", t],
        vec!["stats", t],
        vec!["export", "-o", out.to_str().unwrap(), t],
        vec!["graph", t],
        vec!["profile", t],
    ];
    for mut args in commands {
        args.extend(["--filter", cpu]);
        let (rc, stdout, err) = tape(&args);
        assert_eq!(rc, 1, "{args:?}: {err}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(
            err.contains("no field `common_cpu`: these events carry no CPU")
                && err.contains("common_tid, common_thread)"),
            "{args:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
