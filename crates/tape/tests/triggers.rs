//! Triggers: a table of trigger texts (valid ones with what they read back
//! as, invalid ones with the message and caret column), and the actions
//! fired in a real multi-threaded program: `traceoff:1 if ...` leaves the
//! matching event last on its thread, `snapshot:3` makes exactly three
//! traces, `enable_event` / `disable_event` / `traceon` change what is
//! recorded, `stacktrace` records the stack; counts read back.
//!
//! The actions change process-wide state (tracing on or off), so they run
//! one after another in one test.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Duration;

use tape::trigger;

tape::tracepoint! {
    pub fn work(t: u32, seq: u64, depth: u32) = "test.trig.work";
}
tape::tracepoint! {
    pub fn table(len: u32, name: &str) = "test.trig.table";
}
tape::tracepoint! {
    pub fn side(n: u32) = "test.trig.side";
}
tape::tracepoint! {
    pub fn target(len: u32, name: &str) = "test.trig.target";
}
tape::tracepoint! {
    pub fn one(n: u32) = "test.trig.one";
}
tape::tracepoint! {
    pub fn snap(n: u32) = "test.trig.snap";
}
tape::tracepoint! {
    pub fn big(data: &[u8], n: u32) = "test.trig.big";
}

/// (trigger, what the event's trigger list reads back as).
const VALID: &[(&str, &str)] = &[
    ("traceoff", "traceoff:unlimited"),
    ("traceoff:1", "traceoff:count=1"),
    ("traceoff:count=3", "traceoff:count=3"),
    (
        "traceoff:18446744073709551614",
        "traceoff:count=18446744073709551614",
    ),
    ("traceoff:unlimited", "traceoff:unlimited"),
    (
        "  snapshot:2   if   len > 10 ",
        "snapshot:count=2 if len > 10",
    ),
    (
        "stacktrace if name ~ \"eth*\"",
        "stacktrace:unlimited if name ~ \"eth*\"",
    ),
    ("traceon:5 if len == 0", "traceon:count=5 if len == 0"),
    (
        "enable_event:test.trig.side",
        "enable_event:test.trig.side:unlimited",
    ),
    (
        "enable_event:test.trig.s*:2",
        "enable_event:test.trig.s*:count=2",
    ),
    (
        "disable_event:/^test\\.trig\\.si/:count=1",
        "disable_event:/^test\\.trig\\.si/:count=1",
    ),
    (
        "disable_event:test.trig.side if len >= 3 && name != \"x\"",
        "disable_event:test.trig.side:unlimited if len >= 3 && name != \"x\"",
    ),
];

/// (trigger, a piece of the message, caret column).
const INVALID: &[(&str, &str, usize)] = &[
    ("", "no command", 0),
    ("snapshto", "unknown command \"snapshto\"", 0),
    ("traceoff:x", "\"x\" is not a count", 9),
    ("traceoff:0", "a count of 0 would never fire", 9),
    ("traceoff:1:2", "\"1:2\" is not a count", 9),
    ("traceoff:18446744073709551615", "is not a count", 9),
    ("traceoff:99999999999999999999999", "is not a count", 9),
    ("traceoff when len > 1", "expected `if`", 9),
    ("traceoff if", "`if` without a condition", 9),
    ("traceoff if   ", "`if` without a condition", 9),
    (
        "enable_event",
        "enable_event needs a tracepoint pattern",
        12,
    ),
    (
        "enable_event:",
        "enable_event needs a tracepoint pattern",
        13,
    ),
    ("enable_event:no.such.event", "no tracepoint is named", 13),
    ("disable_event:/(/", "regex", 14),
    ("snapshot if lenn > 3", "no field `lenn`", 12),
    ("snapshot:2 if len > \"a\"", "", 20),
    ("snapshot if len >", "", 17),
    ("!", "no command", 1),
];

#[test]
fn trigger_texts_read_back_as_the_kernel_prints_them_and_round_trip() {
    let tp = &table::TRACEPOINT;
    for (text, back) in VALID {
        trigger::clear("test.trig.table").unwrap();
        assert_eq!(trigger::set("test.trig.table", text), Ok(1), "{text}");
        let list = trigger::list(tp);
        assert_eq!(list.len(), 1, "{text}");
        assert_eq!(list[0].text(), *back, "{text}");
        // What is read back is accepted as input, and reads back the same.
        trigger::clear("test.trig.table").unwrap();
        trigger::set("test.trig.table", back).unwrap();
        assert_eq!(trigger::list(tp)[0].text(), *back, "round trip of {back}");
        // Removal names the command (and target); count and `if` ignored.
        let key = back.split(' ').next().unwrap();
        let key = key.rsplit_once(':').map(|(k, _)| k).unwrap_or(key);
        assert_eq!(
            trigger::set("test.trig.table", &format!("!{key}:7 if x")),
            Ok(1),
            "{key}"
        );
        assert!(trigger::list(tp).is_empty(), "{key}");
    }
    assert!(!tp.is_enabled(), "a trigger does not enable recording");
}

#[test]
fn invalid_triggers_name_the_event_and_point_at_the_position() {
    for (text, piece, col) in INVALID {
        let e = trigger::set("test.trig.table", text).expect_err(text);
        eprintln!("{text:?}:\n{e}");
        assert_eq!(e.kind(), tape::ErrorKind::BadTrigger, "{text}: {e}");
        let msg = e.message();
        assert!(
            msg.starts_with("trigger for test.trig.table: "),
            "{text}: {msg}"
        );
        assert!(msg.contains(piece), "{text}: {msg}");
        let lines: Vec<&str> = msg.lines().collect();
        assert_eq!(lines.len(), 3, "{text}: {msg}");
        assert_eq!(lines[1], format!("  {text}"), "{text}");
        assert_eq!(lines[2].len() - 3, *col, "caret of {text}: {msg}");
    }
    assert!(trigger::list(&table::TRACEPOINT).is_empty());
}

#[test]
fn one_trigger_per_command_and_target() {
    trigger::set("test.trig.one", "snapshot:1 if n == 99999").unwrap();
    let e = trigger::set("test.trig.one", "snapshot").unwrap_err();
    assert!(
        e.message()
            .contains("already has the trigger snapshot:count=1 if n == 99999"),
        "{e}"
    );
    // Another command, or another target, is another trigger.
    trigger::set(
        "test.trig.one",
        "enable_event:test.trig.table if n == 99999",
    )
    .unwrap();
    trigger::set("test.trig.one", "enable_event:test.trig.snap if n == 99999").unwrap();
    assert_eq!(trigger::list(&one::TRACEPOINT).len(), 3);
    assert_eq!(
        trigger::set("test.trig.one", "!enable_event:test.trig.table"),
        Ok(1)
    );
    let left: Vec<String> = trigger::list(&one::TRACEPOINT)
        .iter()
        .map(|t| t.text())
        .collect();
    assert_eq!(
        left,
        [
            "snapshot:count=1 if n == 99999",
            "enable_event:test.trig.snap:unlimited if n == 99999"
        ]
    );
    assert_eq!(
        trigger::set("test.trig.one", "!traceoff"),
        Ok(0),
        "none to remove"
    );
    assert_eq!(trigger::clear("test.trig.one"), Ok(1));
}

/// Events of `name` in the trace at `dir`: the payloads, in time order.
fn payloads(dir: &Path, name: &str) -> Vec<String> {
    let out = common::tape_text(dir).expect("read the trace");
    common::events(&out.stdout)
        .into_iter()
        .filter(|e| e.name == name)
        .map(|e| e.payload)
        .collect()
}

/// The traces `save()` made in `dir` (named after the program).
fn traces_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("triggers"))
    });
    v.sort();
    v
}

#[test]
fn actions_fire_in_a_multithreaded_program() {
    let dir = common::trace_path("trig-actions");
    let _guard = tape::Config::new()
        .dir(&dir)
        .control(false)
        .enable("test.trig.work")
        .enable("test.trig.snap")
        .enable("test.trig.big")
        .init()
        .unwrap();

    // traceoff:1 if ...: four threads emit; thread 2's event 5000 has
    // depth 7777, the only one. Its thread's last recorded event is it.
    trigger::set("test.trig.work", "traceoff:1 if depth == 7777").unwrap();
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let start = &start;
            s.spawn(move || {
                start.wait();
                for seq in 0..20_000u64 {
                    let depth = if t == 2 && seq == 5000 { 7777 } else { 1 };
                    work(t, seq, depth);
                }
            });
        }
    });
    assert!(!tape::registry::tracing_on(), "traceoff fired");
    let w = &trigger::list(&work::TRACEPOINT)[0];
    assert_eq!((w.fired(), w.left()), (1, Some(0)));
    assert_eq!(w.text(), "traceoff:count=0 if depth == 7777");
    let off = tape::save_to(dir.join("traceoff")).unwrap();
    let events = payloads(&off, "test.trig.work");
    let last2 = events
        .iter()
        .rfind(|p| common::field_u64(p, "t") == 2)
        .expect("thread 2 recorded");
    assert_eq!(common::field_u64(last2, "seq"), 5000, "{last2}");
    assert_eq!(common::field_u64(last2, "depth"), 7777);
    // Every thread recorded a prefix of its events, with no gap: tracing
    // stopped for all at once (each thread stops within a few events of
    // the firing, or had finished before it, or had not started).
    for t in 0..4 {
        let seqs: Vec<u64> = events
            .iter()
            .filter(|p| common::field_u64(p, "t") == t)
            .map(|p| common::field_u64(p, "seq"))
            .collect();
        assert!(
            seqs.iter().copied().eq(0..seqs.len() as u64),
            "thread {t}: a gap"
        );
    }
    // While tracing is off, traceoff does not fire (nor use a count).
    trigger::clear("test.trig.work").unwrap();
    trigger::set("test.trig.work", "traceoff:1").unwrap();
    work(0, 0, 0);
    assert_eq!(trigger::list(&work::TRACEPOINT)[0].left(), Some(1));
    trigger::clear("test.trig.work").unwrap();

    // traceon from an event that is not enabled (soft mode).
    assert!(!&side::TRACEPOINT.is_enabled());
    trigger::set("test.trig.side", "traceon:1 if n == 3").unwrap();
    side(2);
    assert!(!tape::registry::tracing_on());
    side(3);
    assert!(tape::registry::tracing_on(), "traceon fired");
    trigger::clear("test.trig.side").unwrap();

    // enable_event / disable_event, with counts.
    trigger::set(
        "test.trig.side",
        "enable_event:test.trig.target:1 if n == 1",
    )
    .unwrap();
    trigger::set("test.trig.side", "disable_event:test.trig.target if n == 2").unwrap();
    target(1, "before");
    side(1);
    assert!(&target::TRACEPOINT.is_enabled());
    target(2, "while enabled");
    side(2);
    assert!(!&target::TRACEPOINT.is_enabled());
    target(3, "after");
    side(1);
    assert!(
        !&target::TRACEPOINT.is_enabled(),
        "the count of 1 is used up"
    );
    let texts: Vec<(String, u64)> = trigger::list(&side::TRACEPOINT)
        .iter()
        .map(|t| (t.text(), t.fired()))
        .collect();
    assert_eq!(
        texts,
        [
            (
                "enable_event:test.trig.target:count=0 if n == 1".to_string(),
                1
            ),
            (
                "disable_event:test.trig.target:unlimited if n == 2".to_string(),
                1
            )
        ]
    );
    trigger::clear("test.trig.side").unwrap();

    // snapshot:3 makes exactly three traces, each in a new directory.
    // (They go where `save()` saves: the Config's directory.)
    trigger::set("test.trig.snap", "snapshot:3 if n >= 10").unwrap();
    let before = trigger::stats();
    for n in 0..40 {
        snap(n);
        if n % 10 == 9 {
            // The snapshots are taken by the trigger thread, not here.
            assert!(trigger::wait_for_snapshots(Duration::from_secs(20)));
        }
    }
    let after = trigger::stats();
    assert_eq!(after.snapshots_asked - before.snapshots_asked, 3);
    assert_eq!(after.snapshots_saved - before.snapshots_saved, 3);
    let made = traces_in(&dir);
    assert_eq!(made.len(), 3, "{made:?}");
    for t in &made {
        let n = payloads(t, "test.trig.snap");
        assert!(n.iter().any(|p| common::field_u64(p, "n") >= 10), "{t:?}");
    }
    let s = &trigger::list(&snap::TRACEPOINT)[0];
    assert_eq!((s.fired(), s.left()), (3, Some(0)));
    trigger::clear("test.trig.snap").unwrap();

    // stacktrace: a tape.stacktrace event after the triggering one.
    trigger::set("test.trig.snap", "stacktrace:2 if n == 5").unwrap();
    caller_of_snap();
    let st = tape::save_to(dir.join("stack")).unwrap();
    let stacks = payloads(&st, "tape.stacktrace");
    assert_eq!(stacks.len(), 1, "{stacks:?}");
    assert!(stacks[0].contains("frames = [ [0] = 0x"), "{}", stacks[0]);
    let frames = common::field_u64(&stacks[0], "_frames_len");
    assert!(frames >= 3, "{}", stacks[0]);
    assert_eq!(trigger::list(&snap::TRACEPOINT)[0].left(), Some(1));
    trigger::clear("test.trig.snap").unwrap();

    // A condition on an event too big for the stack buffer, not recorded:
    // not tested, counted; a trigger without condition fires all the same.
    tape::disable("test.trig.big").unwrap();
    trigger::set("test.trig.big", "enable_event:test.trig.side if n == 1").unwrap();
    trigger::set("test.trig.big", "stacktrace:1").unwrap();
    let before = trigger::stats();
    big(&[7u8; trigger::STACK_PAYLOAD + 1], 1);
    let after = trigger::stats();
    assert_eq!(after.unchecked - before.unchecked, 1);
    assert_eq!(after.stacktraces - before.stacktraces, 1);
    assert!(!&side::TRACEPOINT.is_enabled());
    // Recorded, the same event is tested on its bytes in the ring.
    tape::enable("test.trig.big").unwrap();
    big(&[7u8; trigger::STACK_PAYLOAD + 1], 1);
    assert!(&side::TRACEPOINT.is_enabled());
    assert_eq!(trigger::stats().unchecked, after.unchecked);
    trigger::clear("test.trig.big").unwrap();
    tape::disable("test.trig.side").unwrap();
}

#[inline(never)]
fn caller_of_snap() {
    for n in 0..10 {
        snap(std::hint::black_box(n));
    }
}
