//! `tracing` events through `TapeLayer`, saved by tape and read back: one
//! tracepoint per callsite, named from its target and level and place;
//! every `tracing` value type recorded with its own type, as the
//! callsite's first event gives it (integers, floats, booleans, strings,
//! 128-bit integers as digits, `Debug`/`Display`/errors as text), so that
//! readers print `message = "query done", rows = 42`; a later value of
//! another type converted when it can be, else the event counted;
//! tape's patterns choose which callsites record, including callsites first
//! hit after the pattern was applied; babeltrace2 reads the trace.

mod support;

use std::collections::BTreeMap;

use tape_ctf::Value;
use tracing_subscriber::layer::SubscriberExt;

use support::field;

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
        // A field whose type varies (a `dyn Value`): the first event types
        // it (u64); a later i64 in range converts, a negative one or a
        // string does not: those events are counted, not recorded.
        for v in [&7u64 as &dyn tracing::Value, &8i64, &-1i64, &"x"] {
            tracing::info!(target: "app::vary", v);
        }
    });
    assert_eq!(tape_tracing::unregistered_callsites(), 0);
    assert_eq!(tape_tracing::cut_values(), 1);

    let trace = tape::save().expect("save");
    let traces = tape_ctf::metadata::find_traces(&trace).unwrap();
    /// An event: its name, its fields by name as (kind, value).
    type Recorded = (String, BTreeMap<String, (String, String)>);
    let mut events: Vec<Recorded> = Vec::new();
    let mut places = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        let tape_ctf::merge::Record::Event(e) = r.unwrap() else {
            continue;
        };
        let Value::Struct(fields) = e.payload() else {
            panic!()
        };
        let fields = fields.iter().map(|(n, v)| (n.clone(), field(v))).collect();
        events.push((e.class.name.clone(), fields));
        places.push((
            e.class.loglevel,
            e.class.emf_uri.clone().unwrap_or_default(),
        ));
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    // Named by target and level, the place in `model.emf.uri` and the
    // level in `loglevel` (LTTng's numbers).
    assert_eq!(
        names,
        [
            "tracing.app.db.info",
            "tracing.app.big.debug",
            "tracing.other.warn",
            "tracing.app.vary.info",
            "tracing.app.vary.info"
        ]
    );
    for ((level, uri), want) in places.iter().zip([6, 13, 4, 6, 6]) {
        assert_eq!(*level, Some(want), "{uri}");
        assert!(
            uri.starts_with("crates/tape-tracing/tests/events.rs:"),
            "{uri}"
        );
    }
    assert_eq!(events[3].1["v"], ("uint".to_owned(), "7".to_owned()));
    assert_eq!(events[4].1["v"], ("uint".to_owned(), "8".to_owned()));
    assert_eq!(
        tape_tracing::mistyped_events(),
        2,
        "the negative and the string"
    );
    let in_env = traces[0]
        .trace
        .env
        .iter()
        .find(|(k, _)| k == "events_lost_tracing_mistyped")
        .map(|(_, v)| v.clone());
    assert_eq!(in_env, Some(tape_ctf::EnvValue::Int(2)));

    let q = &events[0].1;
    let want: &[(&str, &str, &str)] = &[
        ("rows", "uint", "42"),
        ("delta", "int", "-7"),
        ("ratio", "float", "0.25"),
        ("ok", "enum", "true"),
        ("table", "string", "users"),
        ("big", "string", "340282366920938463463374607431768211454"),
        ("neg", "string", "-170141183460469231731687303715884105727"),
        ("point", "string", "Point { x: 3 }"),
        ("shown", "string", "disk on fire"),
        ("err", "string", "disk on fire"),
        ("message", "string", "query done"),
    ];
    for &(name, kind, value) in want {
        assert_eq!(
            q.get(name),
            Some(&(kind.to_owned(), value.to_owned())),
            "{name}: {q:?}"
        );
    }
    let (kind, long) = &events[1].1["long"];
    assert_eq!(kind, "string");
    // Cut at a character boundary, and marked as cut.
    let kept = long
        .strip_suffix(tape_tracing::CUT_MARK)
        .expect("the cut mark");
    assert!(long.len() <= tape_tracing::TEXT_BYTES && kept.chars().all(|c| c == 'é'));
    assert_eq!(events[2].1["n"], ("uint".to_owned(), "2".to_owned()));

    // babeltrace2 prints the values plain (when installed; required in CI).
    if let Some(text) = support::babeltrace2(&trace) {
        for want in [
            "{ message = \"query done\", rows = 42, delta = -7, ratio = 0.25, \
             ok = ( \"true\" : container = 1 ), table = \"users\", \
             big = \"340282366920938463463374607431768211454\", \
             neg = \"-170141183460469231731687303715884105727\", point = \"Point { x: 3 }\", \
             shown = \"disk on fire\", err = \"disk on fire\" }",
            "{ message = \"selected now\", n = 2 }",
            "{ v = 7 }",
            "{ v = 8 }",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
