//! Probes: typed and untyped, their order, detach and synchronize under
//! emitting threads, re-entry, depth, panics, and the untyped view's
//! values against the trace reader's decoding of the same events.

mod common;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use tape::probe::{self, Value};

#[derive(tape::Enum, Clone, Copy, Debug)]
#[repr(u8)]
enum Dir {
    In = 1,
    Out = 2,
}

#[derive(tape::Fields)]
struct Hdr<'a> {
    len: u16,
    dir: Dir,
    name: &'a str,
}

tape::tracepoint! {
    pub fn rx(port: u16, len: u32, ifname: &str) = "test.probe.rx";
    pub fn order(n: u32) = "test.probe.order";
    pub fn sync(n: u64, text: &str) = "test.probe.sync";
    pub fn again(n: u32) = "test.probe.again";
    pub fn ping(n: u32) = "test.probe.ping";
    pub fn pong(n: u32) = "test.probe.pong";
    pub fn boom(n: u32) = "test.probe.boom";
    pub fn nested(n: u32) = "test.probe.nested";
    pub fn shapes(
        a: u8, b: i64, c: f64, d: bool, e: char, f: &str, g: &[u16], h: [u8; 4],
        i: Option<u32>, j: tape::Hex<u32>, k: Ipv4Addr, l: Dir, m: &Hdr<'_>
    ) = "test.probe.shapes";
    pub class wake_class(comm: [u8; 16], pid: i32) {
        pub fn wake = "test.probe.class.wake";
        pub fn wake_new = "test.probe.class.wake_new";
    }
    pub fn deep0(n: u32) = "test.probe.deep.d0";
    pub fn deep1(n: u32) = "test.probe.deep.d1";
    pub fn deep2(n: u32) = "test.probe.deep.d2";
    pub fn deep3(n: u32) = "test.probe.deep.d3";
    pub fn deep4(n: u32) = "test.probe.deep.d4";
    pub fn deep5(n: u32) = "test.probe.deep.d5";
    pub fn deep6(n: u32) = "test.probe.deep.d6";
    pub fn deep7(n: u32) = "test.probe.deep.d7";
    pub fn deep8(n: u32) = "test.probe.deep.d8";
}

/// Recording set up once for the process; each test enables its own names.
fn setup() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        tape::Config::new()
            .buffer_size(8 << 20)
            .init()
            .expect("init")
            .disarm();
    });
}

/// The recorded events named `name` in a trace saved now: their payloads,
/// decoded by the trace reader.
fn recorded(name: &str) -> Vec<Value> {
    let dir = common::trace_path("probes");
    tape::save_to(&dir).expect("save");
    let trace = tape_ctf::metadata::open_trace(&dir).expect("open");
    let mut out = Vec::new();
    for r in tape_ctf::merge::events(&[trace]).expect("plan") {
        if let tape_ctf::merge::Record::Event(e) = r.expect("decode") {
            if e.class.name == name {
                out.push(e.payload().clone());
            }
        }
    }
    out
}

#[test]
fn a_typed_probe_gets_the_arguments_whether_or_not_the_event_is_recorded() {
    setup();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let p = rx::attach(move |port, len, ifname| {
        s.lock().unwrap().push((*port, *len, ifname.to_string()));
    });
    assert!(rx::TRACEPOINT.has_probes() && !rx::TRACEPOINT.is_enabled());
    assert!(
        rx::enabled(),
        "a tracepoint with probes is enabled for its callers"
    );
    rx(3, 1500, "eth0");
    tape::enable("test.probe.rx").unwrap();
    rx(4, 60, "lo");
    tape::disable("test.probe.rx").unwrap();
    assert!(p.is_attached());
    assert!(p.detach());
    assert!(!rx::TRACEPOINT.has_probes() && !rx::enabled());
    rx(5, 1, "gone");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(3, 1500, "eth0".to_string()), (4, 60, "lo".to_string())]
    );
    let rec = recorded("test.probe.rx");
    assert_eq!(rec.len(), 1, "only the enabled hit is recorded: {rec:?}");
    assert_eq!(rec[0].field("port").and_then(Value::as_u64), Some(4));
}

#[test]
fn probes_run_by_priority_then_attach_order_typed_and_untyped_alike() {
    setup();
    let log = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let typed = |name: &'static str, prio: i32| {
        let l = log.clone();
        order::attach_with_priority(prio, move |_| l.lock().unwrap().push(name))
    };
    let untyped = |name: &'static str, prio: i32| {
        let l = log.clone();
        probe::attach_with_priority("test.probe.order", prio, move |e| {
            assert_eq!(e.name(), "test.probe.order");
            l.lock().unwrap().push(name)
        })
        .unwrap()
    };
    let a = typed("a", 10);
    let b = untyped("b", 10);
    let c = typed("c", 20);
    let d = typed("d", 5);
    let e = untyped("e", 20);
    let f = typed("f", probe::DEFAULT_PRIORITY);
    order(1);
    assert_eq!(*log.lock().unwrap(), ["c", "e", "a", "b", "f", "d"]);
    let ids: Vec<u64> = probe::attached(&order::TRACEPOINT)
        .iter()
        .map(|x| x.0)
        .collect();
    let want = [
        c.id(),
        e.probes()[0].id(),
        a.id(),
        b.probes()[0].id(),
        f.id(),
        d.id(),
    ];
    assert_eq!(ids, want);
    log.lock().unwrap().clear();
    assert!(a.detach());
    assert_eq!(e.detach(), 1);
    order(2);
    assert_eq!(*log.lock().unwrap(), ["c", "b", "f", "d"]);
    for p in [c, d, f] {
        assert!(p.detach());
    }
    assert_eq!(b.detach(), 1);
    assert!(!order::enabled());
}

#[test]
fn no_probe_call_after_synchronize_returns_with_four_threads_emitting() {
    setup();
    tape::enable("test.probe.sync").unwrap();
    const ROUNDS: usize = 30;
    static CALLS: AtomicU64 = AtomicU64::new(0);
    static LATE: AtomicU64 = AtomicU64::new(0);
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    sync(n, "four threads");
                    n += 1;
                    if n % 64 == 0 && t == 0 {
                        std::thread::yield_now();
                    }
                }
                n
            })
        })
        .collect();
    /// Dropped with the probe's closure: only after synchronize frees it.
    struct Canary(Arc<AtomicBool>);
    impl Drop for Canary {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    for round in 0..ROUNDS {
        let done = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicBool::new(false));
        let canary = Canary(dropped.clone());
        let d = done.clone();
        let typed = round % 2 == 0;
        let body = move || {
            let _keep = &canary;
            // Stay a while inside the call, so a synchronize that did not
            // wait would return while calls are running.
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(2) {
                std::hint::spin_loop();
            }
            if d.load(Ordering::SeqCst) {
                LATE.fetch_add(1, Ordering::Relaxed);
            }
            CALLS.fetch_add(1, Ordering::Relaxed);
        };
        let before = CALLS.load(Ordering::Relaxed);
        if typed {
            let p = sync::attach(move |_, _| body());
            while CALLS.load(Ordering::Relaxed) < before + 20 {
                std::thread::yield_now();
            }
            p.detach();
        } else {
            let p = probe::attach("test.probe.sync", move |_| body()).unwrap();
            while CALLS.load(Ordering::Relaxed) < before + 20 {
                std::thread::yield_now();
            }
            p.detach();
        }
        probe::synchronize();
        done.store(true, Ordering::SeqCst);
        assert!(
            dropped.load(Ordering::SeqCst),
            "round {round}: synchronize returned before freeing the detached probe"
        );
    }
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    let emitted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    tape::disable("test.probe.sync").unwrap();
    assert_eq!(
        LATE.load(Ordering::Relaxed),
        0,
        "a probe ran after synchronize"
    );
    assert!(CALLS.load(Ordering::Relaxed) >= 20 * ROUNDS as u64);
    assert!(emitted > CALLS.load(Ordering::Relaxed));
}

#[test]
fn a_probe_that_re_enters_its_tracepoint_is_stopped_and_counted() {
    setup();
    tape::enable("test.probe.again").unwrap();
    static SELF_CALLS: AtomicU64 = AtomicU64::new(0);
    let before = probe::stats();
    let p = again::attach(|n| {
        SELF_CALLS.fetch_add(1, Ordering::Relaxed);
        again(n + 1); // recorded, but its probes are not called again
    });
    // A cycle through two tracepoints stops the same way.
    static CYCLE: AtomicU64 = AtomicU64::new(0);
    let pi = ping::attach(|n| {
        CYCLE.fetch_add(1, Ordering::Relaxed);
        pong(*n)
    });
    let po = pong::attach(|n| {
        CYCLE.fetch_add(1, Ordering::Relaxed);
        ping(*n)
    });
    for i in 0..10 {
        again(i * 100);
        ping(i);
    }
    assert!(p.detach() && pi.detach() && po.detach());
    tape::disable("test.probe.again").unwrap();
    assert_eq!(SELF_CALLS.load(Ordering::Relaxed), 10);
    assert_eq!(CYCLE.load(Ordering::Relaxed), 20);
    let after = probe::stats();
    assert_eq!(after.reentered - before.reentered, 20);
    let rec = recorded("test.probe.again");
    assert_eq!(
        rec.len(),
        20,
        "both the hit and the re-entered hit are recorded"
    );
}

#[test]
fn nesting_beyond_max_depth_is_stopped_and_counted() {
    setup();
    static REACHED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let emits: [fn(u32); 9] = [
        deep0, deep1, deep2, deep3, deep4, deep5, deep6, deep7, deep8,
    ];
    let before = probe::stats().too_deep;
    let probes = probe::attach("test.probe.deep.*", move |e| {
        let i: usize = e.name()["test.probe.deep.d".len()..].parse().unwrap();
        REACHED.lock().unwrap().push(i as u32);
        if i + 1 < emits.len() {
            emits[i + 1](0);
        }
    })
    .unwrap();
    assert_eq!(probes.len(), 9);
    deep0(0);
    assert_eq!(probes.detach(), 9);
    assert_eq!(
        *REACHED.lock().unwrap(),
        (0..probe::MAX_DEPTH as u32).collect::<Vec<_>>()
    );
    assert_eq!(probe::stats().too_deep - before, 1);
}

#[test]
fn a_probe_that_panics_is_detached_counted_and_the_others_go_on() {
    setup();
    static BAD: AtomicUsize = AtomicUsize::new(0);
    static GOOD: AtomicUsize = AtomicUsize::new(0);
    let before = probe::stats().panicked;
    let bad = boom::attach_with_priority(20, |n| {
        BAD.fetch_add(1, Ordering::Relaxed);
        panic!("probe failure on hit {n}");
    });
    let good = boom::attach(|_| {
        GOOD.fetch_add(1, Ordering::Relaxed);
    });
    for i in 0..3 {
        boom(i);
    }
    assert_eq!(BAD.load(Ordering::Relaxed), 1);
    assert_eq!(GOOD.load(Ordering::Relaxed), 3);
    assert_eq!(probe::stats().panicked - before, 1);
    assert!(!bad.is_attached());
    assert!(!bad.detach(), "already removed");
    assert_eq!(probe::attached(&boom::TRACEPOINT).len(), 1);
    assert!(good.detach());
}

/// Run as a child by the next test: a probe panics on three hits.
#[test]
fn panic_child() {
    if std::env::var_os("TAPE_PROBE_CHILD").is_none() {
        return;
    }
    let _p = boom::attach(|n| panic!("child probe failure {n}"));
    for i in 0..3 {
        boom(i);
    }
    println!("child went on after {} panics", probe::stats().panicked);
}

#[test]
fn a_panicking_probe_is_reported_once_on_stderr() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "panic_child", "--nocapture", "--test-threads=1"])
        .env("TAPE_PROBE_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("child went on after 1 panics"), "{stdout}");
    let reports = stderr
        .matches("of tracepoint test.probe.boom panicked; it is detached")
        .count();
    assert_eq!(reports, 1, "{stderr}");
    assert_eq!(stderr.matches("child probe failure").count(), 1, "{stderr}");
}

#[test]
fn the_untyped_view_decodes_what_the_trace_reader_decodes() {
    setup();
    tape::enable("test.probe.shapes").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let p = probe::attach("test.probe.shapes", move |e| {
        assert_eq!(e.id(), shapes::TRACEPOINT.id());
        s.lock().unwrap().push((
            e.timestamp(),
            e.fields().unwrap(),
            e.field("a"),
            e.payload().len(),
        ));
    })
    .unwrap();
    let long = "ünïcödé 🦀 ".repeat(100); // a payload larger than the stack buffer
    type Row<'a> = (u8, &'a str, Vec<u16>, Option<u32>, Dir);
    let rows: Vec<Row> = vec![
        (0, "", vec![], None, Dir::In),
        (255, "eth0", vec![1, 2, 65535], Some(7), Dir::Out),
        (7, &long, (0..300).collect(), Some(u32::MAX), Dir::In),
    ];
    let mut times = Vec::new();
    for (a, f, g, i, l) in &rows {
        let before = tape::clock::now();
        let hdr = Hdr {
            len: 60,
            dir: *l,
            name: f,
        };
        shapes(
            *a,
            -5,
            2.5,
            *a > 3,
            'é',
            f,
            g,
            [1, 2, 3, 4],
            *i,
            tape::Hex(0xbeef),
            Ipv4Addr::new(10, 0, 0, 1),
            *l,
            &hdr,
        );
        times.push((before, tape::clock::now()));
    }
    tape::disable("test.probe.shapes").unwrap();
    let _ = p.detach();
    let seen = seen.lock().unwrap();
    let rec = recorded("test.probe.shapes");
    assert_eq!(seen.len(), rows.len());
    assert_eq!(rec.len(), rows.len());
    for (k, ((ts, fields, a, len), want)) in seen.iter().zip(&rec).enumerate() {
        assert_eq!(&Value::Struct(fields.clone()), want, "row {k}");
        assert_eq!(
            a.as_ref().and_then(Value::as_u64),
            Some(u64::from(rows[k].0))
        );
        assert!(times[k].0 <= *ts && *ts <= times[k].1, "row {k}: timestamp");
        assert!(*len > 0);
    }
    assert!(seen[2].3 > 512, "the long row went past the stack buffer");
}

#[test]
fn class_events_have_probes_of_their_own() {
    setup();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let p = wake::attach(move |comm, pid| s.lock().unwrap().push((comm[0], *pid)));
    let mut comm = [0u8; 16];
    comm[0] = b'x';
    wake(comm, 1);
    wake_new(comm, 2);
    wake(comm, 3);
    assert!(p.detach());
    assert_eq!(*seen.lock().unwrap(), [(b'x', 1), (b'x', 3)]);
    let both = probe::attach("/^test\\.probe\\.class\\./", |_| {}).unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!(both.detach(), 2);
}

#[test]
fn probes_may_attach_detach_and_synchronize_from_inside_a_probe() {
    setup();
    static INNER: AtomicU64 = AtomicU64::new(0);
    let inner: Arc<Mutex<Option<tape::probe::Probe>>> = Arc::new(Mutex::new(None));
    let i2 = inner.clone();
    let outer = nested::attach(move |n| {
        let mut slot = i2.lock().unwrap();
        match slot.take() {
            None => {
                *slot = Some(nested::attach(|_| {
                    INNER.fetch_add(1, Ordering::Relaxed);
                }))
            }
            Some(p) => {
                p.detach();
            }
        }
        drop(slot);
        probe::synchronize(); // must not wait for this very call
        let _ = n;
    });
    // Hit 1: outer attaches inner, which this hit does not call (it runs
    // through the list it loaded). Hit 2: outer (older, same priority)
    // detaches inner, which this hit still calls, once.
    nested(1);
    nested(2);
    assert!(outer.detach());
    probe::synchronize();
    assert_eq!(INNER.load(Ordering::Relaxed), 1);
}

#[test]
fn bad_patterns_and_unknown_names_are_clear_errors() {
    let e = probe::attach("test.probe.nope", |_| {}).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::NotFound);
    assert!(e.message().contains("\"test.probe.nope\""), "{e}");
    let e = probe::attach("test.probe.[", |_| {}).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::BadPattern);
    let e = probe::attach("/(/", |_| {}).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::BadPattern);
    assert!(probe::attach("nothing.matches.*", |_| {})
        .unwrap()
        .is_empty());
}
