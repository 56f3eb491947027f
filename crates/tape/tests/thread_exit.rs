//! Emitting while a thread exits: from a thread-local destructor, both on
//! a thread that never emitted before (no ring yet: the event is dropped
//! and counted, never a panic or an allocation during teardown) and on a
//! thread whose ring exists (recorded or counted, never corrupt).

mod common;

tape::tracepoint! {
    pub fn bye(n: u64) = "test.exit.bye";
}

struct EmitOnDrop(u64);

impl Drop for EmitOnDrop {
    fn drop(&mut self) {
        bye(self.0);
    }
}

thread_local! {
    static GUARD: std::cell::RefCell<Option<EmitOnDrop>> = const { std::cell::RefCell::new(None) };
}

/// The tests of this file count rings and events process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn emits_from_thread_local_destructors_never_panic() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _g = tape::Config::new()
        .enable("test.exit.*")
        .init()
        .expect("init");
    _g.disarm();
    let before = tape::stats();
    // A thread whose first event is emitted during its teardown.
    std::thread::spawn(|| GUARD.with(|g| *g.borrow_mut() = Some(EmitOnDrop(1))))
        .join()
        .expect("no panic in a thread-local destructor");
    // A thread with a ring, emitting again during its teardown.
    std::thread::spawn(|| {
        bye(2);
        GUARD.with(|g| *g.borrow_mut() = Some(EmitOnDrop(3)));
    })
    .join()
    .expect("no panic in a thread-local destructor");
    let after = tape::stats();
    let dir = common::trace_path("exit");
    tape::save_to(&dir).expect("save");
    let Some(text) = common::read_clean(common::Reader::Bt2, &dir) else {
        return;
    };
    let ns: Vec<u64> = common::events(&text)
        .iter()
        .filter(|e| e.name == "test.exit.bye")
        .map(|e| common::field_u64(&e.payload, "n"))
        .collect();
    // Every event is either in the trace or counted as dropped without a ring.
    let dropped = after.dropped_without_ring - before.dropped_without_ring;
    eprintln!("recorded {ns:?}, dropped without a ring: {dropped}");
    assert!(ns.contains(&2), "{ns:?}");
    assert_eq!(ns.len() as u64 + dropped, 3, "{ns:?}, {dropped} dropped");
}

/// Threads that come and go without a save: at most
/// `tape::__consumer::MAX_EXITED_RINGS` rings of exited threads are kept; the
/// events of the older ones are counted as lost, exactly.
#[test]
fn rings_of_exited_threads_are_bounded_and_their_loss_counted() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _g = tape::Config::new()
        .enable("test.exit.*")
        .buffer_size(16 << 10)
        .init()
        .expect("init");
    _g.disarm();
    let before = tape::stats();
    let threads = tape::__consumer::MAX_EXITED_RINGS + 40;
    for _ in 0..threads {
        std::thread::spawn(|| (0..10).for_each(bye)).join().unwrap();
    }
    let after = tape::stats();
    assert_eq!(after.exited_rings, tape::__consumer::MAX_EXITED_RINGS);
    let freed = (before.exited_rings + threads - tape::__consumer::MAX_EXITED_RINGS) as u64;
    assert_eq!(
        after.lost_with_exited_rings - before.lost_with_exited_rings,
        10 * freed
    );
    let dir = common::trace_path("exit-bounded");
    tape::save_to(&dir).expect("save");
    let meta = std::fs::read_to_string(dir.join("metadata")).unwrap();
    assert!(
        meta.contains(&format!(
            "events_lost_with_exited_threads = {};",
            after.lost_with_exited_rings
        )),
        "{meta}"
    );
    assert_eq!(
        tape::stats().exited_rings,
        0,
        "saved rings of exited threads are freed"
    );
}
