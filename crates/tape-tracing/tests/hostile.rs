//! What a traced program does at the edges, through tape-tracing: a thread
//! exits with a span still entered, and its thread-local destructors emit
//! events and enter spans after tape's and the layer's own thread-locals
//! may be gone. Nothing panics, what was recorded before is saved whole,
//! and the saved trace reads back (tape's reader and babeltrace2).

mod support;

use tracing_subscriber::layer::SubscriberExt;

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
    let traces = tape_ctf::metadata::read::find_traces(&trace).unwrap();
    let mut names = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        if let tape_ctf::merge::Record::Event(e) = r.unwrap() {
            names.push(e.class.name.clone());
        }
    }
    let count = |suffix: &str| names.iter().filter(|n| n.ends_with(suffix)).count();
    assert_eq!(count("open.entry"), 8, "{names:?}");
    assert_eq!(count("open.exit"), 0, "{names:?}");
    let events = names
        .iter()
        .filter(|n| n.starts_with("tracing.h.info.") && n.contains("hostile.rs"))
        .count();
    assert!(events >= 8, "{names:?}");
    support::babeltrace2(&trace);
    let _ = std::fs::remove_dir_all(&dir);
}
