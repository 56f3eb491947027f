//! `tracing` events through `TapeLayer`, saved by tape and read back: one
//! tracepoint per callsite, named from its target and level and place;
//! every `tracing` value type recorded typed (integers, floats, booleans,
//! strings, 128-bit integers as digits, `Debug`/`Display`/errors as text);
//! tape's patterns choose which callsites record, including callsites first
//! hit after the pattern was applied; babeltrace2 reads the trace.

mod support;

use std::collections::BTreeMap;

use tape_ctf::decode::Value;
use tracing_subscriber::layer::SubscriberExt;

#[derive(Debug)]
#[allow(dead_code)] // read by its Debug text
struct Point {
    x: i32,
}

#[derive(Debug)]
struct Oops;

impl std::fmt::Display for Oops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "disk on fire")
    }
}

impl std::error::Error for Oops {}

/// A recorded field as the test compares it: its kind and value.
fn field(v: &Value) -> (String, String) {
    let Value::Struct(members) = v else {
        panic!("{v:?}")
    };
    let kind = match &members[0].1 {
        Value::Enum { labels, .. } => labels.first().cloned().unwrap_or_default(),
        v => panic!("{v:?}"),
    };
    let value = match &members[1].1 {
        Value::Variant(_, inner) => match inner.as_ref() {
            Value::UInt(x, _) => x.to_string(),
            Value::SInt(x, _) => x.to_string(),
            Value::Float(x) => x.to_string(),
            Value::Str(s) => s.clone(),
            Value::Struct(m) if m.is_empty() => String::new(),
            v => format!("{v:?}"),
        },
        v => panic!("{v:?}"),
    };
    (kind, value)
}

#[test]
fn events_of_every_value_type_are_recorded_typed_and_selected_by_pattern() {
    let dir = support::tape_in("events");
    // Before any callsite is registered: the pattern takes them in later.
    tape::enable_pattern("tracing.app.*").unwrap();

    let subscriber = tracing_subscriber::registry().with(tape_tracing::TapeLayer::new());
    tracing::subscriber::with_default(subscriber, || {
        let big = u128::MAX - 1;
        let neg = i128::MIN + 1;
        let err: &(dyn std::error::Error + 'static) = &Oops;
        tracing::info!(
            target: "app::db",
            rows = 42u64,
            delta = -7i64,
            ratio = 0.25f64,
            ok = true,
            table = "users",
            big,
            neg,
            point = ?Point { x: 3 },
            shown = %Oops,
            err,
            "query done"
        );
        tracing::warn!(target: "other", n = 1u64, "not selected");
        // A long string is cut at the event's text room, and counted.
        let long = "é".repeat(tape_tracing::TEXT_BYTES);
        tracing::debug!(target: "app::big", long = long.as_str());
        // Patterns applied after registration select too.
        tape::enable_pattern("tracing.other.*").unwrap();
        tracing::warn!(target: "other", n = 2u64, "selected now");
    });
    assert_eq!(tape_tracing::unregistered_callsites(), 0);
    assert_eq!(tape_tracing::cut_values(), 1);

    let trace = tape::save().expect("save");
    let traces = tape_ctf::metadata::read::find_traces(&trace).unwrap();
    /// An event: its name, its fields by name as (kind, value).
    type Recorded = (String, BTreeMap<String, (String, String)>);
    let mut events: Vec<Recorded> = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        let tape_ctf::merge::Record::Event(e) = r.unwrap() else {
            continue;
        };
        let Value::Struct(fields) = e.payload() else {
            panic!()
        };
        let fields = fields.iter().map(|(n, v)| (n.clone(), field(v))).collect();
        events.push((e.class.name.clone(), fields));
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].starts_with("tracing.app.db.info.") && names[0].contains("events.rs:"));
    assert!(names[1].starts_with("tracing.app.big.debug."));
    assert!(names[2].starts_with("tracing.other.warn."));

    let q = &events[0].1;
    let want: &[(&str, &str, &str)] = &[
        ("rows", "u64", "42"),
        ("delta", "i64", "-7"),
        ("ratio", "f64", "0.25"),
        ("ok", "bool", "1"),
        ("table", "str", "users"),
        ("big", "u128", "340282366920938463463374607431768211454"),
        ("neg", "i128", "-170141183460469231731687303715884105727"),
        ("point", "text", "Point { x: 3 }"),
        ("shown", "text", "disk on fire"),
        ("err", "text", "disk on fire"),
        ("message", "text", "query done"),
    ];
    for &(name, kind, value) in want {
        assert_eq!(
            q.get(name),
            Some(&(kind.to_owned(), value.to_owned())),
            "{name}: {q:?}"
        );
    }
    let (kind, long) = &events[1].1["long"];
    assert_eq!(kind, "str");
    // Cut at a character boundary, and marked as cut.
    let kept = long
        .strip_suffix(tape_tracing::CUT_MARK)
        .expect("the cut mark");
    assert!(long.len() <= tape_tracing::TEXT_BYTES && kept.chars().all(|c| c == 'é'));
    assert_eq!(events[2].1["n"], ("u64".to_owned(), "2".to_owned()));

    // babeltrace2 reads it (when installed; required in CI).
    if let Some(text) = support::babeltrace2(&trace) {
        for want in [
            "table = { kind = ( \"str\" : container = 5 ), value = { \"users\" } }",
            "rows = { kind = ( \"u64\" : container = 1 ), value = { 42 } }",
            "point = { kind = ( \"text\" : container = 8 ), value = { \"Point { x: 3 }\" } }",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
