//! `tape show` options on the real LTTng sample (two streams, lost events):
//! selection by event glob, stream glob and time range, `--format json`
//! (every line valid JSON, same events as the text), and bad options as
//! clear errors with exit status 1.

use crate::shared;

use std::path::PathBuf;
use std::process::Command;

fn sample() -> Option<PathBuf> {
    shared::suite("samples/lttng/discard/trace")
}

fn show(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tape"))
        .arg("show")
        .args(args)
        .env("TZ", "UTC")
        .output()
        .expect("run tape");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn events(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with("[LOST ")).collect()
}

#[test]
fn selection_and_json() {
    let Some(dir) = sample() else {
        return;
    };
    let d = dir.to_str().unwrap();
    let (rc, all, _) = show(&[d]);
    assert_eq!(rc, 0);
    let all = events(&all);
    assert_eq!(all.len(), 624);
    // Streams: chan_0 only.
    let (_, chan0, _) = show(&["--streams", "chan_0", d]);
    let chan0 = events(&chan0);
    assert_eq!(
        chan0.len(),
        all.iter().filter(|l| l.contains("cpu_id = 0 }")).count()
    );
    assert!(!chan0.is_empty() && chan0.len() < all.len());
    // Events: a glob that matches, one that does not.
    assert_eq!(events(&show(&["--events", "bench:*", d]).1).len(), 624);
    assert_eq!(events(&show(&["--events", "other:*", d]).1).len(), 0);
    // Time range: from the 100th event's time to the 200th's, inclusive.
    let (_, secs, _) = show(&["--clock-seconds", d]);
    let times: Vec<&str> = events(&secs)
        .iter()
        .map(|l| &l[1..l.find(']').unwrap()])
        .collect();
    let (b, e) = (times[99], times[199]);
    let (_, range, _) = show(&["--begin", b, "--end", e, d]);
    let expected = times.iter().filter(|t| **t >= b && **t <= e).count();
    assert_eq!(events(&range).len(), expected);
    // JSON: the same events, each line an object with the payload.
    let (rc, json, _) = show(&["--format", "json", d]);
    assert_eq!(rc, 0);
    let mut n = 0;
    for line in json.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v.get("lost").is_some() {
            continue;
        }
        assert_eq!(v["name"], "bench:mixed");
        assert!(v["fields"]["s"].is_string(), "{line}");
        assert!(v["stream_context"]["vtid"].is_u64(), "{line}");
        assert!(v["time_ns"].is_i64() || v["time_ns"].is_u64(), "{line}");
        n += 1;
    }
    assert_eq!(n, 624);
    assert_eq!(json.lines().filter(|l| l.contains("\"lost\":")).count(), 2);
}

#[test]
fn bad_options_are_errors() {
    let Some(dir) = sample() else {
        return;
    };
    let d = dir.to_str().unwrap();
    for (args, want) in [
        (vec!["--events", "[", d], "--events \"[\""),
        (vec!["--begin", "soon", d], "--begin \"soon\""),
        (vec!["--end", "1.1234567891", d], "--end"),
        (
            vec!["--begin", "10:61", d],
            "--begin \"10:61\": minutes out of range 00-59 at character 4 (accepted: \
             YYYY-MM-DD HH:MM[:SS[.NNNNNNNNN]] or HH:MM[:SS[.NNNNNNNNN]] in local time",
        ),
        (
            vec!["--end", "2026-11-24T10:00", d],
            "expected a space after the date at character 11",
        ),
        (vec!["/nonexistent/trace"], "/nonexistent/trace"),
    ] {
        let (rc, _, err) = show(&args);
        assert_eq!(rc, 1, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `--begin`/`--end` in every form babeltrace2 takes (a time as the lines
/// show it, with or without seconds and nanoseconds, a date and time, and
/// seconds since the epoch), in a time zone that is not UTC: `tape show`
/// keeps the same events as babeltrace2 given the same bounds.
#[test]
fn time_ranges_in_babeltrace2s_forms_keep_what_babeltrace2_keeps() {
    let Some(dir) = sample() else {
        return;
    };
    if !shared::babeltrace2("the time range forms against babeltrace2") {
        return;
    }
    let d = dir.to_str().unwrap();
    for tz in ["Asia/Kolkata", "America/New_York"] {
        let run = |cmd: &str, args: &[&str]| {
            let out = Command::new(cmd)
                .args(args)
                .env("TZ", tz)
                .output()
                .expect("run");
            assert!(out.status.success(), "{cmd} {args:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let shown = run(env!("CARGO_BIN_EXE_tape"), &["show", d]);
        let secs = run(env!("CARGO_BIN_EXE_tape"), &["show", "--clock-seconds", d]);
        let time = |l: &str| l[1..l.find(']').unwrap()].to_owned();
        let (shown, secs) = (events(&shown), events(&secs));
        let (b, e) = (time(shown[99]), time(shown[199]));
        let (bs, es) = (time(secs[99]), time(secs[199]));
        let date = |s: &str| {
            let whole = s.split('.').next().unwrap();
            run("date", &["-d", &format!("@{whole}"), "+%Y-%m-%d"])
                .trim()
                .to_owned()
        };
        // The second after the 200th event's (the sample spans less than one).
        let next = |s: &str| {
            let whole: i64 = s.split('.').next().unwrap().parse().unwrap();
            run("date", &["-d", &format!("@{}", whole + 1), "+%H:%M:%S"])
                .trim()
                .to_owned()
        };
        let forms = [
            (b[..5].to_owned(), "23:59".to_owned()),
            (b[..8].to_owned(), next(&es)),
            (b.clone(), e.clone()),
            (format!("{} {b}", date(&bs)), format!("{} {e}", date(&es))),
            (bs.clone(), es.clone()),
        ];
        for (begin, end) in forms {
            let args = ["--begin", &begin, "--end", &end, d];
            let ours = run(env!("CARGO_BIN_EXE_tape"), &[&["show"][..], &args].concat());
            let theirs = run("babeltrace2", &args);
            let ours: Vec<&str> = events(&ours);
            let theirs: Vec<&str> = theirs.lines().collect();
            assert!(!ours.is_empty(), "{tz} {begin:?}..{end:?}");
            assert_eq!(ours, theirs, "{tz} {begin:?}..{end:?}");
        }
    }
}

/// A read-time pattern that matches nothing (`--events` of `show` and
/// `export`, `--function` of `graph`) is an error naming it and the
/// nearest names, exit status 1 and nothing on stdout, as `grep` exits 1;
/// the same pattern spelled right selects.
#[test]
fn patterns_that_match_nothing_are_errors_with_the_nearest_names() {
    let dir = crate::pipeline::temp("patterns-none");
    let trace = crate::pipeline::record(
        "traced",
        &["--requests", "3"],
        &[("TAPE_TRACE", "fn.*,app.*")],
        &dir,
    );
    let t = trace.to_str().unwrap();
    let out = dir.join("x.pftrace");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str, &str)] = &[
        (&["show", t, "--events", "app.rply"], "--events \"app.rply\" matches no event of the traces (nearest: app.reply)", "app.reply"),
        (&["show", "--format", "json", t, "--events", "fn.traced.pars.*"], "--events \"fn.traced.pars.*\" matches no event of the traces (nearest: fn.traced.parse.entry", "fn.traced.parse.*"),
        (&["export", "-o", o, t, "--events", "ap.*"], "--events \"ap.*\" matches no event of the traces (nearest: app.reply)", "app.*"),
        (&["graph", t, "--function", "traced::pars"], "--function \"traced::pars\" matches no traced function of the traces (nearest: traced::parse", "traced::parse"),
        (&["show", t, "--events", "app.*", "--events", "zzz.*"], "--events \"zzz.*\" matches no event of the traces", "zzz.*"),
    ];
    for (args, said, right) in cases {
        let (rc, stdout, err) = crate::pipeline::tape(args);
        assert_eq!(rc, 1, "{args:?}: {err}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(err.contains(said), "{args:?}: {err}");
        if *right != "zzz.*" {
            let fixed: Vec<&str> = args
                .iter()
                .map(|a| {
                    if a.contains("pars") || a.contains("rply") || *a == "ap.*" {
                        *right
                    } else {
                        *a
                    }
                })
                .collect();
            let (rc, _, err) = crate::pipeline::tape(&fixed);
            assert_eq!(rc, 0, "{fixed:?}: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
