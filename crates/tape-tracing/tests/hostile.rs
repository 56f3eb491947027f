//! What a traced program does at the edges, through tape-tracing: a thread
//! exits with a span still entered, and its thread-local destructors emit
//! events and enter spans after tape's and the layer's own thread-locals
//! may be gone. Nothing panics, what was recorded before is saved whole,
//! and the saved trace reads back (tape's reader and babeltrace2).

mod support;

use tracing_subscriber::layer::SubscriberExt;

/// The two tests share the process's rings: a save frees the rings of
/// threads that exited before it (their events are in that trace), so
/// one test's save could take the other's exited threads. They run one
/// after the other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Late(tracing::Dispatch);

impl Drop for Late {
    fn drop(&mut self) {
        tracing::dispatcher::with_default(&self.0, || {
            tracing::info!(target: "h", stage = "destructor");
            let _s = tracing::info_span!(target: "h", "late").entered();
        });
    }
}

thread_local! {
    static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) };
}

#[test]
fn threads_exit_with_spans_open_and_trace_from_their_destructors() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::tape_in("hostile");
    tape::enable_pattern("tracing.h.*").unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    for t in 0..8u64 {
        let d = dispatch.clone();
        std::thread::spawn(move || {
            LATE.with(|l| *l.borrow_mut() = Some(Late(d.clone())));
            tracing::dispatcher::with_default(&d, || {
                let span = tracing::info_span!(target: "h", "open", t);
                // Entered and never exited: the thread ends inside it.
                std::mem::forget(span.enter());
                std::mem::forget(span);
                tracing::info!(target: "h", t, "before exit");
            });
        })
        .join()
        .unwrap();
    }
    let trace = tape::save().expect("save");
    let traces = tape_ctf::metadata::find_traces(&trace).unwrap();
    let mut names = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        if let tape_ctf::merge::Record::Event(e) = r.unwrap() {
            names.push(e.class.name.clone());
        }
    }
    let count = |suffix: &str| names.iter().filter(|n| n.ends_with(suffix)).count();
    assert_eq!(count("open.entry"), 8, "{names:?}");
    assert_eq!(count("open.exit"), 0, "{names:?}");
    let events = names.iter().filter(|n| *n == "tracing.h.info").count();
    assert!(events >= 8, "{names:?}");
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the layer cannot record reaches the trace: a thread that leaked
/// 70 entered spans has its later spans counted as not recorded (entries
/// and exits); an exit on another thread than its entry is counted; both
/// in the trace's `env`. A value past the event's 2,048 bytes ends with
/// the cut mark.
#[test]
fn what_the_layer_cannot_record_is_counted_in_the_trace() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::tape_in("lost");
    tape::enable_pattern("tracing.lost.*").unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    let d = dispatch.clone();
    std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            for i in 0..70u64 {
                let span = tracing::info_span!(target: "lost", "leak", i);
                std::mem::forget(span.enter());
                std::mem::forget(span);
            }
            for _ in 0..3 {
                let _s = tracing::info_span!(target: "lost", "after").entered();
            }
            let big = "x".repeat(3000);
            tracing::info!(target: "lost", big = %big, "cut");
        });
    })
    .join()
    .unwrap();
    // Entered on one thread, exited on another.
    let span = tracing::dispatcher::with_default(
        &dispatch,
        || tracing::info_span!(target: "lost", "cross"),
    );
    let id = span.id().expect("an id");
    let d = dispatch.clone();
    let i = id.clone();
    std::thread::spawn(move || d.enter(&i)).join().unwrap();
    let before = tape_tracing::span_exits_not_recorded();
    let d = dispatch.clone();
    std::thread::spawn(move || d.exit(&id)).join().unwrap();
    assert_eq!(tape_tracing::span_exits_not_recorded(), before + 1);

    let trace = tape::save_to(dir.join("trace")).expect("save");
    let traces = tape_ctf::metadata::find_traces(&trace).unwrap();
    let mut names = Vec::new();
    let mut cut = None;
    for r in tape_ctf::merge::events(&traces).unwrap() {
        if let tape_ctf::merge::Record::Event(e) = r.unwrap() {
            if e.class.name == "tracing.lost.info" {
                let text = format!("{:?}", e.payload());
                if text.contains("xxxx") {
                    cut = Some(text);
                }
            }
            names.push(e.class.name.clone());
        }
    }
    let count = |suffix: &str| names.iter().filter(|n| n.ends_with(suffix)).count();
    assert_eq!(count("leak.entry"), 64, "{names:?}");
    assert_eq!(count("after.entry"), 0, "{names:?}");
    let cut = cut.expect("the event with the big value");
    assert!(
        cut.contains(&format!("x{}", tape_tracing::CUT_MARK)),
        "{cut}"
    );
    let env = |k: &str| {
        traces[0]
            .trace
            .env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    // 6 leaked entries and 3 "after" ones not recorded; the 3 exits of
    // "after" and the cross-thread one. (Other tests of this binary may
    // add theirs: at least.)
    let int = |k: &str| match env(k) {
        Some(tape_ctf::EnvValue::Int(n)) => n,
        v => panic!("no {k}: {v:?}"),
    };
    assert!(
        int("events_lost_tracing_span_entries") >= 9,
        "{:?}",
        traces[0].trace.env
    );
    assert!(
        int("events_lost_tracing_span_exits") >= 4,
        "{:?}",
        traces[0].trace.env
    );
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A value whose `Debug` panics, or emits an event, as the `n`-th says.
struct Weird(u64);

impl std::fmt::Debug for Weird {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            2 => panic!("a Debug that panics"),
            3 => {
                tracing::info!(target: "direct", nested = 1u64);
                write!(f, "w3")
            }
            n => write!(f, "w{n}"),
        }
    }
}

/// Once a callsite's fields are typed, its events are encoded into the
/// ring as `tracing` visits them: a `Debug` that panics there leaves the
/// thread recording, an event it emits is dropped and counted ("busy"), a
/// value too long or of another type gives the attempt up and the event is
/// recorded as before (cut, converted), and what is recorded reads as
/// the first event's typed fields.
#[test]
fn values_encoded_as_visited_give_up_whole_and_a_panic_leaves_the_thread_recording() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::tape_in("direct");
    tape::enable_pattern("tracing.direct.*").unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    let busy_before = tape::stats().drops.busy;
    std::thread::spawn(move || {
        tracing::dispatcher::with_default(&dispatch, || {
            let big = "y".repeat(3000);
            for i in 0..6u64 {
                let s = if i == 5 { big.as_str() } else { "abc" };
                let r = std::panic::catch_unwind(|| {
                    tracing::info!(target: "direct", n = i, s, d = ?Weird(i), "m{i}");
                });
                assert_eq!(r.is_err(), i == 2);
            }
        });
    })
    .join()
    .unwrap();
    assert!(
        tape::stats().drops.busy > busy_before,
        "the nested event counted"
    );
    let trace = tape::save_to(dir.join("trace")).expect("save");
    let traces = tape_ctf::metadata::find_traces(&trace).unwrap();
    let (mut events, mut lost) = (Vec::new(), 0);
    for r in tape_ctf::merge::events(&traces).unwrap() {
        match r.unwrap() {
            tape_ctf::merge::Record::Event(e) if e.class.name == "tracing.direct.info" => {
                let tape_ctf::Value::Struct(fields) = e.payload() else {
                    panic!("a payload")
                };
                let text: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                events.push(text.join(" "));
            }
            tape_ctf::merge::Record::Lost(_, n, _) => lost += n,
            _ => {}
        }
    }
    assert!(lost >= 1, "the nested event is a loss of the trace");
    // The nested event (m3's `Debug`) is dropped; m2 panicked.
    assert_eq!(events.len(), 5, "{events:#?}");
    for (e, i) in events.iter().zip([0, 1, 3, 4, 5]) {
        assert!(e.contains(&format!("message=Str(\"m{i}\")")), "{e}");
        assert!(e.contains(&format!("n=UInt({i},")), "{e}");
        if i != 5 {
            assert!(e.contains("s=Str(\"abc\")"), "{e}");
        }
    }
    assert!(events[2].contains("d=Str(\"w3\")"), "{}", events[2]);
    assert!(events[4].contains(tape_tracing::CUT_MARK), "{}", events[4]);
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}
