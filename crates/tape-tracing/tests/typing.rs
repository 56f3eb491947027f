//! A callsite's fields are typed by its first recorded event, unless tape
//! refuses the new description: a filter compiled against the fields the
//! callsite was registered with (before any event of it) keeps them, so
//! its events stay tagged values, whole and readable, and the filter
//! still applies.

mod support;

use tracing_subscriber::layer::SubscriberExt;

#[test]
fn a_filter_set_before_the_first_event_keeps_the_tagged_fields() {
    let dir = support::tape_in("typing");
    let subscriber = tracing_subscriber::registry().with(tape_tracing::TapeLayer::new());
    tracing::subscriber::with_default(subscriber, || {
        for n in 0..3u64 {
            // The first pass registers the two callsites (not enabled yet).
            if n == 1 {
                // A filter on the first: compiled against its registered
                // (tagged) fields, before any event of it.
                assert_eq!(
                    tape::filter::set("tracing.typing.kept.*", "n.kind == u64").unwrap(),
                    1
                );
                tape::enable_pattern("tracing.typing.*").unwrap();
            }
            tracing::info!(target: "typing::kept", n);
            tracing::info!(target: "typing::typed", n);
        }
    });
    let trace = tape::save().expect("save");
    let mut got = Vec::new();
    for (name, fields) in support::events(&trace) {
        let (_, n) = fields.iter().find(|(f, _)| f == "n").unwrap();
        let target = name.split('.').nth(2).unwrap().to_owned();
        got.push((target, format!("{n:?}")));
    }
    let tagged = |v: u64| {
        format!(
            "Struct([(\"kind\", Enum {{ value: 1, labels: [\"u64\"] }}), (\"value\", Variant(\"u64\", UInt({v}, Decimal)))])"
        )
    };
    let plain = |v: u64| format!("UInt({v}, Decimal)");
    // n = 1 and 2 of each (n = 0 came before the pattern); the filtered
    // callsite's pass its filter (a `u64`).
    let want = vec![
        ("kept".to_owned(), tagged(1)),
        ("typed".to_owned(), plain(1)),
        ("kept".to_owned(), tagged(2)),
        ("typed".to_owned(), plain(2)),
    ];
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}
