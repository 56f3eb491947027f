//! A span's callsite is found at its enter and close without the registry
//! (`tape_tracing::layer()` keeps each span it saw made, on the creating
//! thread, until it closes): spans made on one thread and closed on
//! another, their ids given again by the registry to the next spans, some
//! of a callsite tape does not record (made only because another layer
//! wants them, so tape never sees them made): every entry, exit and close
//! tape records is of the span it names, none of a span tape was not
//! told of, and none is missing.
//!
//! And the hazard itself, forced: a span of a recorded callsite is made
//! and entered on one thread and closed on another; then the first thread
//! makes spans of a callsite tape does not record until the registry gives
//! one of them the first span's id: entered, it is not taken for the first
//! span (`made`'s count of closes elsewhere makes that entry stale).
//!
//! Then what the layer does for a span made while tape did not want its
//! callsite: it is recorded from its first entry after tape wants it (its
//! `.new` is not in the trace); a span whose tracepoints are disabled after
//! it was made is not.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Wants every span: the spans tape does not want are made for it.
struct Count(Arc<AtomicU64>);
impl<S: tracing::Subscriber> Layer<S> for Count {
    fn on_new_span(
        &self,
        _: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: Context<'_, S>,
    ) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Rounds of the hand-over.
const ROUNDS: u64 = 20_000;

/// The tests share the process's rings and its save: one at a time, each
/// reading its own target's events.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// tape recording in discard mode into rings that hold every event of
/// these tests (once for the process).
fn tape_recording() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let dir = std::env::temp_dir().join(format!("tape-tracing-moved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        tape::Config::new()
            .dir(&dir)
            .control(false)
            .shared_rings(false)
            .mode(tape::Mode::Discard)
            .buffer_size(16 << 20)
            .init()
            .expect("init")
            .disarm();
    });
}

/// Events of target `target` of the trace saved now, none dropped.
fn saved(target: &str) -> Vec<(String, Vec<(String, tape_ctf::Value)>)> {
    let trace = tape::save().expect("save");
    assert_eq!(tape::stats().drops.total(), 0, "the rings held every event");
    let prefix = format!("tracing.{target}.");
    let events = support::events(&trace);
    let _ = std::fs::remove_dir_all(&trace);
    events
        .into_iter()
        .filter(|(n, _)| n.starts_with(&prefix))
        .collect()
}

fn call(fields: &[(String, tape_ctf::Value)]) -> u64 {
    let v = &fields.iter().find(|(n, _)| n == "call").expect("call").1;
    match v {
        tape_ctf::Value::UInt(x, _) => *x,
        v => panic!("{v:?}"),
    }
}

#[test]
fn spans_moved_between_threads_and_their_ids_given_again_are_recorded_as_themselves() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tape_recording();
    // `a` and `c` recorded; `b` not (and never told to tape).
    tape::enable_pattern("tracing.m.info.a.*").unwrap();
    tape::enable_pattern("tracing.m.info.c.*").unwrap();
    let made = Arc::new(AtomicU64::new(0));
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tape_tracing::layer())
            .with(Count(made.clone())),
    );
    let (tx, rx) = std::sync::mpsc::sync_channel::<[tracing::Span; 2]>(4);
    std::thread::scope(|s| {
        let d = dispatch.clone();
        s.spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                for _ in 0..ROUNDS {
                    let a = tracing::info_span!(target: "m", "a");
                    let b = tracing::info_span!(target: "m", "b");
                    let c = tracing::info_span!(target: "m", "c");
                    for s in [&a, &b, &c] {
                        s.in_scope(|| {});
                    }
                    // `c` closes here, `a` and `b` on the other thread.
                    tx.send([a, b]).unwrap();
                    drop(c);
                }
            })
        });
        let d = dispatch.clone();
        s.spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                for spans in rx {
                    for s in &spans {
                        s.in_scope(|| {});
                    }
                    drop(spans);
                }
            })
        });
    });
    assert_eq!(made.load(Ordering::Relaxed), 3 * ROUNDS);
    let events = saved("m");

    // By call id, in time order: each `.new` opens a span; its later
    // events name the same span until its `.close`.
    let mut live: BTreeMap<u64, String> = BTreeMap::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut calls = BTreeSet::new();
    for (name, fields) in &events {
        let (span, what) = name.rsplit_once('.').expect("a span's event");
        let id = call(fields);
        *counts.entry(name.clone()).or_default() += 1;
        match what {
            "new" => {
                calls.insert(id);
                let old = live.insert(id, span.to_owned());
                assert!(old.is_none(), "{id} made again while open ({old:?})");
            }
            "close" => {
                let open = live.remove(&id);
                assert_eq!(open.as_deref(), Some(span), "{name} of call {id}");
            }
            _ => assert_eq!(
                live.get(&id).map(String::as_str),
                Some(span),
                "{name} of {id}"
            ),
        }
    }
    assert!(live.is_empty(), "spans never closed: {}", live.len());
    let n = |name: &str| counts.get(name).copied().unwrap_or(0);
    for (span, entries) in [("tracing.m.info.a", 2), ("tracing.m.info.c", 1)] {
        assert_eq!(n(&format!("{span}.new")), ROUNDS, "{span}");
        assert_eq!(n(&format!("{span}.entry")), entries * ROUNDS, "{span}");
        assert_eq!(n(&format!("{span}.exit")), entries * ROUNDS, "{span}");
        assert_eq!(n(&format!("{span}.close")), ROUNDS, "{span}");
    }
    assert!(
        counts.keys().all(|k| !k.starts_with("tracing.m.info.b")),
        "{counts:?}"
    );
    assert!(!calls.is_empty());
}

/// How many spans of the unrecorded callsite to make, at most, before the
/// registry gives the first span's id again: its slab's generation wraps
/// after 8,191 uses of a slot (13 bits of a 64-bit key), and a slot freed
/// by another thread is used again only when this thread has no other
/// free, so the spans of other slots are held.
const UNTIL_THE_ID_COMES_BACK: u64 = 1 << 20;

/// Whether two of the registry's span ids are of one slot of one thread's
/// shard (their generations aside): the key's low 32 bits.
fn same_slot(a: u64, b: u64) -> bool {
    (a ^ b) & 0xffff_ffff == 0
}

#[test]
fn a_span_given_the_id_of_one_closed_elsewhere_is_not_taken_for_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tape_recording();
    tape::enable_pattern("tracing.r.info.first.*").unwrap();
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tape_tracing::layer())
            .with(Count(Arc::new(AtomicU64::new(0)))),
    );
    let on = |f: &mut dyn FnMut()| tracing::dispatcher::with_default(&dispatch, f);
    let mut first = None;
    on(&mut || {
        let s = tracing::info_span!(target: "r", "first");
        s.in_scope(|| {});
        first = Some(s);
    });
    let id = first
        .as_ref()
        .and_then(|s| s.id())
        .expect("made")
        .into_u64();
    // Closed on another thread: this thread's note of it stays behind.
    std::thread::scope(|s| {
        s.spawn(|| on(&mut || drop(first.take())));
    });
    let mut tries = 0;
    on(&mut || {
        let mut held = Vec::new();
        while tries < UNTIL_THE_ID_COMES_BACK {
            tries += 1;
            let s = tracing::info_span!(target: "r", "other");
            let other = s.id().expect("made for the other layer").into_u64();
            if other == id {
                s.in_scope(|| {});
                break;
            }
            if !same_slot(other, id) {
                held.push(s);
            }
        }
    });
    assert!(
        tries < UNTIL_THE_ID_COMES_BACK,
        "the registry never gave id {id} again"
    );
    let names: Vec<String> = saved("r").into_iter().map(|(n, _)| n).collect();
    let first = "tracing.r.info.first";
    assert_eq!(
        names,
        [".new", ".entry", ".exit", ".close"].map(|w| format!("{first}{w}")),
        "the span of the same id ({tries} spans later) was taken for the first"
    );
}

#[test]
fn a_span_made_while_tape_did_not_want_it_is_recorded_from_its_next_entry() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tape_recording();
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tape_tracing::layer())
            .with(Count(Arc::new(AtomicU64::new(0)))),
    );
    tracing::dispatcher::with_default(&dispatch, || {
        // Made while tape wants neither; entered once before and once after
        // tape wants `late`.
        let late = tracing::info_span!(target: "w", "late");
        let gone = tracing::info_span!(target: "w", "gone");
        late.in_scope(|| {});
        tape::enable_pattern("tracing.w.info.late.*").unwrap();
        tape::enable_pattern("tracing.w.info.gone.*").unwrap();
        // Made while wanted, then no longer: not recorded from then on.
        let early = tracing::info_span!(target: "w", "gone");
        early.in_scope(|| {});
        tape::disable_pattern("tracing.w.info.gone.*").unwrap();
        late.in_scope(|| {});
        gone.in_scope(|| {});
        early.in_scope(|| {});
    });
    let names: Vec<String> = saved("w").into_iter().map(|(n, _)| n).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "tracing.w.info.gone.new",
            "tracing.w.info.gone.entry",
            "tracing.w.info.gone.exit",
            "tracing.w.info.late.entry",
            "tracing.w.info.late.exit",
            "tracing.w.info.late.close",
        ]
    );
}
