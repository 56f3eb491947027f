//! Any name a user gives reaches every reader (issue 47): field names,
//! targets, span and event names made at run time through tape-tracing
//! (tape-tracing's example `tracing_names`), the hostile ones of the
//! issue and random Unicode ones. babeltrace2 reads every event and
//! `tape show` prints its exact text; the JSON, the ftrace text and the
//! filters have the user's own names.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pipeline::{self, tape};

/// The names of issue 47 that made a whole trace unreadable, and the
/// edges of the escape.
const HOSTILE: &[&str] = &[
    "http.method",
    "k",
    "http.status_code",
    "otel.name",
    "db.statement",
    "a b",
    "a-b",
    "a:b",
    "a\"b",
    "a'b",
    "ü",
    "2xx",
    "\t",
    "",
    "}; event {",
    "/* c */",
    "app::db",
    "event",
    "_x",
    "x\\y",
    "\u{1}ctl",
    "\0nul",
    "line\nbreak",
    "`tick`",
    "call",
    "🦀",
];

/// `count` names of up to 12 characters drawn from pools that hold every
/// class of character (a fixed seed: the same names each run), and one
/// of 300 characters.
fn random_names(count: usize) -> Vec<String> {
    let pools: [&[char]; 7] = [
        &['a', 'z', 'A', 'Q', 'e', 'f'],
        &['0', '7', '9'],
        &[
            '_', '.', ' ', '-', ':', ';', '{', '}', '"', '\\', '/', '*', '=', ',', '[', ']',
        ],
        &['\u{1}', '\t', '\n', '\u{1f}', '\u{7f}', '\0'],
        &['ü', 'ß', 'é', '\u{301}', 'א', '中', '\u{200b}'],
        &['🦀', '\u{10ffff}', '\u{fffd}', '\u{e000}'],
        &['x', 'y', 'n'],
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out: Vec<String> = (0..count)
        .map(|_| {
            let len = (next() % 13) as usize;
            (0..len)
                .map(|_| {
                    let pool = pools[(next() % pools.len() as u64) as usize];
                    pool[(next() % pool.len() as u64) as usize]
                })
                .collect()
        })
        .collect();
    out.push("ü.".repeat(150));
    out
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(h: &str) -> String {
    let bytes: Vec<u8> = (0..h.len() / 2)
        .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// One event callsite of the example: its case, tracepoint and fields.
struct Case {
    k: u64,
    event: String,
    fields: Vec<String>,
}

/// Runs `tracing_names` on `names`: its trace, its cases and its stderr.
fn record(names: &[String], dir: &Path) -> (PathBuf, Vec<Case>, String) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("names");
    let text: String = names.iter().map(|n| hex(n) + "\n").collect();
    std::fs::write(&file, text).unwrap();
    let out_dir = dir.join("out");
    let mut example = Command::new(pipeline::example("tracing_names"));
    example.arg(&file).env("TAPE_TRACE", "tracing.*");
    let out = pipeline::run_saving(example, &out_dir);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let cases = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut parts = l.split('\t');
            let k = parts.next().unwrap().parse().unwrap();
            let event = unhex(parts.next().unwrap());
            Case {
                k,
                event,
                fields: parts.map(unhex).collect(),
            }
        })
        .collect();
    (pipeline::only_trace(&out_dir), cases, err)
}

fn temp(name: &str) -> PathBuf {
    pipeline::temp(&format!("names-{name}"))
}

/// The event of case `c` in JSON lines: its name, and its first field
/// holding `c.k`.
fn json_event<'a>(json: &'a [serde_json::Value], c: &Case) -> &'a serde_json::Value {
    json.iter()
        .find(|e| {
            e["name"] == c.event.as_str()
                && e["fields"].get(&c.fields[0]).and_then(|v| v.as_u64()) == Some(c.k)
        })
        .unwrap_or_else(|| {
            panic!(
                "no JSON event for case {} ({:?}, {:?})",
                c.k, c.event, c.fields
            )
        })
}

fn check_names(tag: &str, names: Vec<String>) {
    let _alone = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp(tag);
    let (trace, cases, _) = record(&names, &dir);
    let t = trace.to_str().unwrap();
    assert_eq!(cases.len(), names.len());
    // Each case: an event, and a span's new, entry, exit and close.
    let want_lines = 5 * names.len();

    // Lines: a name may hold a newline, which the text prints as it is.
    let events_in = |text: &str| text.matches("] (+").count();
    let (rc, shown, err) = tape(&["show", t]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(events_in(&shown), want_lines, "{shown}");
    if crate::shared::babeltrace2("hostile names read by babeltrace2") {
        let out = Command::new("babeltrace2").arg(&trace).output().unwrap();
        let bt = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(events_in(&bt), want_lines);
        // tape show prints babeltrace2's text, line for line.
        for (b, s) in bt.lines().zip(shown.lines()) {
            assert_eq!(b, s);
        }
        assert_eq!(bt.lines().count(), shown.lines().count());
    }
    let (rc, json, err) = tape(&["check", t]);
    assert_eq!(rc, 0, "{json}{err}");

    // JSON: the user's own names.
    let (rc, json, err) = tape(&["show", "--format", "json", t]);
    assert_eq!(rc, 0, "{err}");
    let json: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(json.len(), want_lines);
    for c in &cases {
        let e = json_event(&json, c);
        let got: BTreeSet<&str> = e["fields"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let want: BTreeSet<&str> = c.fields.iter().map(String::as_str).collect();
        assert_eq!(got, want, "case {}", c.k);
    }

    // The ftrace text: `name=value` with the user's name.
    let (rc, ftrace, err) = tape(&["show", "--format", "ftrace", t]);
    assert_eq!(rc, 0, "{err}");
    for c in &cases {
        // Left out of this check: a name with a line break (the text
        // breaks its line).
        if c.event.contains('\n') || c.fields[0].contains('\n') {
            continue;
        }
        let pair = format!(" {}={}", c.fields[0], c.k);
        assert!(
            ftrace
                .lines()
                .any(|l| l.contains(&c.event) && l.contains(&pair)),
            "no ftrace line for case {} with {pair:?}",
            c.k
        );
    }

    // Filters take the user's name, bare when it is a path's words,
    // else in backquotes, and the name babeltrace2 prints.
    let mut by_value: HashMap<&str, u64> = HashMap::new();
    for c in &cases {
        by_value.entry(c.fields[0].as_str()).or_insert(c.k);
    }
    let mut filtered = 0;
    for (name, k) in by_value {
        // A backquote ends a quoted name; a NUL cannot be in an argument.
        if name.contains('`') || name.contains('\0') {
            continue;
        }
        let mut spellings = vec![format!("`{name}`")];
        let bare = !name.is_empty()
            && name.split('.').all(|w| {
                w.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        if bare {
            spellings.push(name.to_owned());
        }
        let ident = tape_ctf::escape_name(name);
        // The identifier itself, and the name babeltrace2 prints.
        spellings.push(ident.clone());
        spellings.push(format!("`{}`", ident.strip_prefix('_').unwrap_or(&ident)));
        for s in spellings {
            let filter = format!("{s} == {k}");
            let (rc, out, err) = tape(&["show", "--format", "json", t, "--filter", &filter]);
            assert_eq!(rc, 0, "{filter}: {err}");
            let lines: Vec<serde_json::Value> = out
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert!(!lines.is_empty(), "{filter:?} matched nothing");
            // The field holds k: a number, or an enum's value (a
            // boolean, typed by another case's first event).
            for l in &lines {
                let v = &l["fields"][name];
                let got = v.as_u64().or_else(|| v["value"].as_u64());
                assert_eq!(got, Some(k), "{filter:?}: {l}");
            }
            filtered += 1;
        }
    }
    assert!(filtered >= names.len() / 2, "{filtered}");

    let (rc, stats, err) = tape(&["stats", t]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        stats.contains("lost: 0") || !stats.contains("lost:"),
        "{stats}"
    );
    for format in ["perfetto", "chrome"] {
        let out = dir.join(format!("export.{format}"));
        let (rc, _, err) = tape(&["export", t, "--format", format, "-o", out.to_str().unwrap()]);
        assert_eq!(rc, 0, "{format}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_names_read_in_every_reader() {
    check_names("hostile", HOSTILE.iter().map(|s| s.to_string()).collect());
}

#[test]
fn random_unicode_names_read_in_every_reader() {
    check_names("random", random_names(120));
}

/// A name past 256 bytes (a field's; a target and name, a tracepoint's)
/// is cut at a character boundary to its start and `…[cut]`, counted, and
/// said once on stderr; the trace reads in every reader (the cases above
/// hold such a name too).
#[test]
fn a_name_past_256_bytes_is_cut_and_said() {
    let dir = temp("long");
    let long = "ü.".repeat(150);
    let (trace, cases, err) = record(&["k".into(), long.clone(), "v".into()], &dir);
    assert_eq!(err.matches("is cut to 256").count(), 1, "{err}");
    let cut: Vec<&String> = cases
        .iter()
        .flat_map(|c| std::iter::once(&c.event).chain(&c.fields))
        .filter(|n| n.ends_with("…[cut]"))
        .collect();
    assert!(!cut.is_empty(), "nothing cut");
    for n in &cut {
        assert!(n.len() <= 256, "{} bytes", n.len());
        let kept = n.strip_suffix("…[cut]").unwrap();
        assert!(long.starts_with(kept) || kept.contains(&long[..60]), "{n}");
    }
    let t = trace.to_str().unwrap();
    let (rc, _, err) = tape(&["check", t]);
    assert_eq!(rc, 0, "{err}");
    if crate::shared::babeltrace2("a cut name read by babeltrace2") {
        let out = Command::new("babeltrace2").arg(&trace).output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tape stats`' totals of `trace`: (events, lost), and its text.
fn totals(trace: &Path) -> (u64, u64, String) {
    let (rc, stats, err) = tape(&["stats", trace.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    let line = stats
        .lines()
        .find(|l| l.starts_with("events: "))
        .unwrap_or_else(|| panic!("{stats}"));
    let events = pipeline::number_after(line, "events: ");
    let lost = pipeline::number_after(line, "lost: ");
    (events, lost, stats)
}

/// Runs `tracing_names --callsites n`: its trace and stderr.
fn many(tag: &str, n: usize) -> (PathBuf, String, PathBuf) {
    let dir = temp(tag);
    let mut example = Command::new(pipeline::example("tracing_names"));
    example
        .args(["--callsites", &n.to_string()])
        .env("TAPE_TRACE", "tracing.*")
        // Rings that hold every event: a loss here is the callsites'.
        .env("TAPE_TRACE_BUFSZ", "16M");
    let out = pipeline::run_saving(example, &dir);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (pipeline::only_trace(&dir), err, dir)
}

/// 10,000 callsites made at run time, one event each: all recorded (the
/// callsite table grows; it stopped at 8,192 and lost the rest without a
/// count).
#[test]
fn ten_thousand_callsites_are_all_recorded() {
    let (trace, err, dir) = many("10k", 10_000);
    let (events, lost, stats) = totals(&trace);
    assert_eq!((events, lost), (10_000, 0), "{stats}\n{err}");
    assert!(!err.contains("no tracepoint"), "{err}");
    if crate::shared::babeltrace2("10,000 callsites read by babeltrace2") {
        let out = Command::new("babeltrace2").arg(&trace).output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 10_000);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Past the registry's 65,535 event ids, a callsite gets no tracepoint:
/// its events are counted (`events_lost_tracing_unregistered`, in `tape
/// stats`' losses) and the first is said on stderr: recorded + lost =
/// every event.
#[test]
fn callsites_past_the_event_ids_are_counted() {
    let _alone = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let n = 70_000;
    let (trace, err, dir) = many("70k", n);
    let (events, lost, stats) = totals(&trace);
    assert_eq!(events + lost, n as u64, "{stats}");
    assert!(events > 60_000 && lost > 4_000, "{stats}");
    assert!(
        stats.contains(&format!("events_lost_tracing_unregistered = {lost}")),
        "{stats}"
    );
    assert_eq!(err.matches("gets no tracepoint").count(), 1, "{err}");
    assert!(err.contains("all 65535 event ids are given"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
