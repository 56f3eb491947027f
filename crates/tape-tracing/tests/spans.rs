//! `tracing` spans through `tape_tracing::layer()`, saved by tape and read
//! back: each enter/exit a running interval (entry and exit with the
//! span's id as the call, at the thread's depth); a span entered on two
//! threads, and an instrumented future polled on two threads, stay one
//! call; nested spans nest; a span exited out of order closes its own
//! interval only; past `MAX_OPEN` open spans a thread's entries are not
//! recorded and are counted, and what is recorded still pairs; the span's
//! fields are its `.new` event, and `Span::record`'s its `.record` event,
//! with the same call.

mod support;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tape_ctf::Value;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// A future pending at its first poll, ready at its second.
struct TwoPolls(bool);

impl Future for TwoPolls {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

fn uint(v: &Value) -> u64 {
    match v {
        Value::UInt(x, _) => *x,
        v => panic!("{v:?}"),
    }
}

/// A field of a tape-tracing value as text: plain (typed by the
/// callsite's first event), or tagged (`none` when not recorded).
fn tagged(v: &Value) -> String {
    let m = match v {
        Value::UInt(x, _) => return x.to_string(),
        Value::Str(s) => return s.clone(),
        Value::Struct(m) => m,
        v => panic!("{v:?}"),
    };
    match &m[1].1 {
        Value::Variant(_, inner) => match inner.as_ref() {
            Value::UInt(x, _) => x.to_string(),
            Value::Str(s) => s.clone(),
            Value::Struct(m) if m.is_empty() => "none".into(),
            v => format!("{v:?}"),
        },
        v => panic!("{v:?}"),
    }
}

/// One recorded event: name, stream (its thread), fields by name.
struct Recorded {
    name: String,
    stream: PathBuf,
    fields: BTreeMap<String, Value>,
}

fn read(trace: &std::path::Path) -> Vec<Recorded> {
    let traces = tape_ctf::metadata::find_traces(trace).unwrap();
    let mut out = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        let tape_ctf::merge::Record::Event(e) = r.unwrap() else {
            panic!("a loss")
        };
        let Value::Struct(fields) = e.payload() else {
            panic!()
        };
        out.push(Recorded {
            name: e.class.name.clone(),
            stream: e.stream.clone(),
            fields: fields.iter().cloned().collect(),
        });
    }
    out
}

#[test]
fn spans_are_calls_that_keep_their_id_across_threads_and_polls() {
    let dir = support::tape_in("spans");
    tape::enable_pattern("tracing.t.*").unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    let on = |f: &mut dyn FnMut()| tracing::dispatcher::with_default(&dispatch, f);

    let deep = tape_tracing::span::MAX_OPEN + 6;
    let (moved, job) = {
        let mut made = None;
        on(&mut || {
            // Nested, with fields, and a field recorded later.
            let outer =
                tracing::info_span!(target: "t", "outer", n = 1u64, status = tracing::field::Empty);
            {
                let _o = outer.enter();
                let _i = tracing::debug_span!(target: "t", "inner", s = "x").entered();
            }
            outer.record("status", 200u64);
            // Exited out of order: `a` first, then `b`.
            let a = tracing::info_span!(target: "t", "a");
            let b = tracing::info_span!(target: "t", "b");
            let ga = a.enter();
            let gb = b.enter();
            drop(ga);
            drop(gb);
            // Deeper than a thread's open spans are kept.
            let spans: Vec<_> = (0..deep)
                .map(|_| tracing::info_span!(target: "t", "deep"))
                .collect();
            let guards: Vec<_> = spans.iter().map(|s| s.enter()).collect();
            drop(guards);
            made = Some((
                tracing::info_span!(target: "t", "moved"),
                Box::pin(TwoPolls(false).instrument(tracing::info_span!(target: "t", "job"))),
            ));
        });
        made.unwrap()
    };
    let job = std::sync::Mutex::new(job);
    // One span entered on two threads, one future polled on two.
    for _ in 0..2 {
        std::thread::scope(|s| {
            s.spawn(|| {
                on(&mut || {
                    drop(moved.enter());
                    let mut cx = Context::from_waker(Waker::noop());
                    let _ = job.lock().unwrap().as_mut().poll(&mut cx);
                })
            });
        });
    }
    assert_eq!(
        tape_tracing::spans_not_recorded(),
        6,
        "the entries past MAX_OPEN"
    );
    // Dropping the instrumented future enters its span once more.
    let mut job = Some(job.into_inner().unwrap());
    on(&mut || drop(job.take()));
    let trace = tape::save().expect("save");
    let events = read(&trace);

    // Every entry has its exit on its thread, at its depth, with its call;
    // intervals by span name: (stream, depth, call).
    let mut open: Vec<(PathBuf, String, u64, u64)> = Vec::new();
    let mut intervals: BTreeMap<String, Vec<(PathBuf, u64, u64)>> = BTreeMap::new();
    let mut calls_of_new: BTreeMap<String, u64> = BTreeMap::new();
    for e in &events {
        let base = |suffix: &str| e.name.strip_suffix(suffix).map(str::to_owned);
        if let Some(span) = base(".entry") {
            let (depth, call) = (uint(&e.fields["depth"]), uint(&e.fields["call"]));
            open.push((e.stream.clone(), span, depth, call));
        } else if let Some(span) = base(".exit") {
            let (depth, call) = (uint(&e.fields["depth"]), uint(&e.fields["call"]));
            let i = open
                .iter()
                .rposition(|o| o.0 == e.stream && o.3 == call)
                .unwrap_or_else(|| panic!("an exit without its entry: {}", e.name));
            let o = open.remove(i);
            assert_eq!((o.1.as_str(), o.2), (span.as_str(), depth), "{}", e.name);
            intervals.entry(span).or_default().push((o.0, depth, call));
        } else if let Some(span) = base(".new") {
            calls_of_new.insert(span, uint(&e.fields["call"]));
        }
    }
    assert!(open.is_empty(), "entries without exits: {open:?}");

    let span = |n: &str| format!("tracing.t.{n}");
    let one = |n: &str| -> (PathBuf, u64, u64) {
        let v = &intervals[&span(n)];
        assert_eq!(v.len(), 1, "{n}: {v:?}");
        v[0].clone()
    };
    let (outer, inner) = (one("info.outer"), one("debug.inner"));
    assert_eq!((outer.1, inner.1), (0, 1), "inner nests in outer");
    assert_eq!(outer.2, calls_of_new[&span("info.outer")]);
    assert_eq!(inner.2, calls_of_new[&span("debug.inner")]);
    // Out of order: each closed at its own depth.
    assert_eq!((one("info.a").1, one("info.b").1), (0, 1));
    // MAX_OPEN recorded, each paired; the rest counted above.
    assert_eq!(
        intervals[&span("info.deep")].len(),
        tape_tracing::span::MAX_OPEN
    );
    // One call, two intervals on two threads (and the drop's on this one).
    for name in ["info.moved", "info.job"] {
        let v = &intervals[&span(name)];
        let calls: std::collections::BTreeSet<u64> = v.iter().map(|i| i.2).collect();
        let threads: std::collections::BTreeSet<&PathBuf> = v.iter().map(|i| &i.0).collect();
        assert_eq!(calls.len(), 1, "{name}: {v:?}");
        assert_eq!(calls.into_iter().next(), Some(calls_of_new[&span(name)]));
        let want = if name == "info.job" { 3 } else { 2 };
        assert_eq!((v.len(), threads.len()), (want, want), "{name}: {v:?}");
    }

    // The fields: at creation, then recorded.
    let event = |name: &str| events.iter().find(|e| e.name == span(name)).unwrap();
    let new = event("info.outer.new");
    assert_eq!(tagged(&new.fields["n"]), "1");
    assert_eq!(tagged(&new.fields["status"]), "none");
    let rec = event("info.outer.record");
    assert_eq!(uint(&rec.fields["call"]), outer.2);
    assert_eq!(tagged(&rec.fields["status"]), "200");
    assert_eq!(tagged(&rec.fields["n"]), "none");
    let inner_new = event("debug.inner.new");
    assert_eq!(tagged(&inner_new.fields["s"]), "x");
    let _ = std::fs::remove_dir_all(&dir);
}
