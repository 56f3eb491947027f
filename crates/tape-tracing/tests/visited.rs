//! A callsite's events after its first are encoded into the ring as
//! `tracing` visits them (`tape_tracing::value::Direct`), its first through
//! the stack buffer that types the callsite: both read back as written.
//! A binary of its own: the tests of one binary share the process's rings
//! (the two here run one at a time).

mod support;

use std::collections::BTreeMap;

use support::field;

/// The tests share the process's rings: one at a time, so that no save
/// takes the rings of the other's threads.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A value whose `Debug` writes its text raw: a NUL in it reaches the
/// encoder as it is.
struct Raw(&'static str);

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // In pieces, as a formatter writes: the NUL may come in any.
        for piece in self.0.split_inclusive('b') {
            f.write_str(piece)?;
        }
        Ok(())
    }
}

/// A callsite's events after its first (typed) one are encoded as they
/// are visited, its first through the stack buffer: both give the same
/// values, edge values and strings with a NUL (cut there, as a C reader
/// would) or none included, in a `&str` and in a formatted value.
#[test]
fn every_event_of_a_typed_callsite_reads_as_written() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::tape_in("visited");
    tape::enable_pattern("tracing.visited.*").unwrap();
    let cases: Vec<(u64, i64, f64, bool, &str)> = vec![
        (0, 0, 0.0, false, ""),
        (u64::MAX, i64::MIN, -1.5, true, "a\0b"),
        (9, 9, 9.0, true, "a\0bcd"),
        (7, -7, f64::MAX, false, "ünï😀"),
        (1 << 40, i64::MAX, 1e-300, true, "}; event {"),
        (3, 3, 3.5, true, ""),
    ];
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(tape_tracing::layer());
    tracing::subscriber::with_default(subscriber, || {
        for (u, i, f, b, s) in &cases {
            let r = Raw(s);
            tracing::info!(target: "visited", u, i, f, b, s, d = ?(u, s), r = ?r, "{u}");
        }
    });
    let trace = tape::save_to(dir.join("trace")).expect("save");
    let got: Vec<BTreeMap<String, (String, String)>> = support::events(&trace)
        .into_iter()
        .filter(|(n, _)| n == "tracing.visited.info")
        .map(|(_, fields)| fields.iter().map(|(k, v)| (k.clone(), field(v))).collect())
        .collect();
    assert_eq!(got.len(), cases.len());
    for (g, (u, i, f, b, s)) in got.iter().zip(&cases) {
        let kept = s.split('\0').next().unwrap();
        let want: BTreeMap<String, (String, String)> = [
            ("message", ("string", u.to_string())),
            ("u", ("uint", u.to_string())),
            ("i", ("int", i.to_string())),
            ("f", ("float", f.to_string())),
            ("b", ("enum", if *b { "true" } else { "false" }.to_string())),
            ("s", ("string", kept.to_string())),
            ("r", ("string", kept.to_string())),
            (
                "d",
                (
                    "string",
                    format!("{:?}", (u, s))
                        .split('\0')
                        .next()
                        .unwrap()
                        .to_string(),
                ),
            ),
        ]
        .into_iter()
        .map(|(k, (t, v))| (k.to_string(), (t.to_string(), v)))
        .collect();
        assert_eq!(g, &want);
    }
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A span callsite's `.new` events after its first are written as their
/// values are visited too, after the call id: each reads as written, with
/// the call its `.close` carries.
#[test]
fn every_new_span_of_a_typed_callsite_reads_as_written() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::tape_in("visited-spans");
    tape::enable_pattern("tracing.vspans.*").unwrap();
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(tape_tracing::layer());
    let values = [(1u64, "a"), (u64::MAX, "b\0c"), (0, ""), (42, "ünï")];
    tracing::subscriber::with_default(subscriber, || {
        for (u, s) in values {
            tracing::info_span!(target: "vspans", "work", u, s).in_scope(|| {});
        }
    });
    let trace = tape::save_to(dir.join("trace")).expect("save");
    let events = support::events(&trace);
    let of = |suffix: &str| -> Vec<BTreeMap<String, (String, String)>> {
        events
            .iter()
            .filter(|(n, _)| n == &format!("tracing.vspans.info.work{suffix}"))
            .map(|(_, f)| f.iter().map(|(k, v)| (k.clone(), field(v))).collect())
            .collect()
    };
    let (new, close) = (of(".new"), of(".close"));
    assert_eq!(new.len(), values.len());
    assert_eq!(close.len(), values.len());
    for ((n, c), (u, s)) in new.iter().zip(&close).zip(values) {
        assert_eq!(n["call"], c["call"]);
        assert_eq!(n["u"], ("uint".to_string(), u.to_string()));
        assert_eq!(
            n["s"],
            (
                "string".to_string(),
                s.split('\0').next().unwrap().to_string()
            )
        );
    }
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The strings of an event share `TEXT_BYTES` bytes: exactly that many
/// are kept whole (encoded as visited); one more, and the last string is
/// cut, as the stack buffer cuts it.
#[test]
fn strings_up_to_the_text_bytes_are_whole_and_past_them_cut() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::tape_in("visited-text");
    tape::enable_pattern("tracing.vtext.*").unwrap();
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(tape_tracing::layer());
    let half = tape_tracing::TEXT_BYTES / 2;
    let (a, b) = ("a".repeat(half), "b".repeat(half));
    let b1 = "b".repeat(half + 1);
    let cases: [(&str, &str); 4] = [("x", "y"), (&a, &b), (&a, &b1), (&a, &b)];
    tracing::subscriber::with_default(subscriber, || {
        for (a, b) in cases {
            tracing::info!(target: "vtext", a, b);
        }
    });
    let trace = tape::save_to(dir.join("trace")).expect("save");
    let got: Vec<(String, String)> = support::events(&trace)
        .into_iter()
        .filter(|(n, _)| n == "tracing.vtext.info")
        .map(|(_, f)| (field(&f[0].1).1, field(&f[1].1).1))
        .collect();
    assert_eq!(got.len(), cases.len());
    for (i, ((ga, gb), (a, b))) in got.iter().zip(cases).enumerate() {
        assert_eq!(ga, a, "event {i}");
        if a.len() + b.len() <= tape_tracing::TEXT_BYTES {
            assert_eq!(gb, b, "event {i}");
        } else {
            assert!(gb.ends_with(tape_tracing::CUT_MARK), "event {i}: {gb}");
            assert!(a.len() + gb.len() <= tape_tracing::TEXT_BYTES, "event {i}");
        }
    }
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}
