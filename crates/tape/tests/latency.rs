//! The latency tracer in-process, with the hostile cases: a section that
//! panics, nested sections, a section in a signal handler that interrupts
//! another on the same thread, a thread that exits right after its worst
//! case, a threshold with the snapshots trimmed to `keep`, a wakeup pair
//! keyed by a string, and a flood of reports past the request queue,
//! where every report is accounted for (saved, superseded, failed or
//! counted lost).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tape::latency::{self, Kind};

tape::tracepoint! {
    /// A job keyed by a string, started and finished.
    pub fn job_start(name: &str) = "test.job.start";
    /// Its end.
    pub fn job_end(name: &str) = "test.job.end";
}

/// One test at a time: the tracer's switch, threshold and maxima are the
/// process's.
static ONE: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        // Under the target directory (cargo's scratch space for tests),
        // emptied at each run.
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("latency-snapshots");
        let _ = std::fs::remove_dir_all(&dir);
        let guard = tape::Config::new()
            .dir(&dir)
            .control(false)
            .shared_rings(false)
            .enable("latency.*")
            .init()
            .unwrap();
        // Nothing to save at the end: the snapshots are the test's.
        std::mem::forget(guard);
    });
    let g = ONE.lock().unwrap_or_else(|e| e.into_inner());
    latency::set_threshold(0);
    latency::set_keep(latency::DEFAULT_KEEP);
    latency::set_on(true);
    latency::reset();
    g
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn max_of(name: &str) -> latency::Maximum {
    latency::maxima()
        .into_iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no tracker {name}"))
}

fn settle() {
    assert!(
        latency::wait_for_snapshots(Duration::from_secs(10)),
        "snapshots pending"
    );
}

#[test]
fn a_panicking_section_and_nested_sections_are_measured() {
    let _g = setup();
    let r = std::panic::catch_unwind(|| {
        let _s = latency::section!("test.panics");
        spin(Duration::from_millis(3));
        panic!("inside the section");
    });
    assert!(r.is_err());
    {
        let _outer = latency::section!("test.outer");
        spin(Duration::from_millis(1));
        {
            let _inner = latency::section!("test.inner");
            spin(Duration::from_millis(2));
        }
    }
    settle();
    let p = max_of("test.panics");
    assert!(p.max_ns >= 3_000_000, "{p:?}");
    assert_eq!(p.kind, Kind::Section);
    let (outer, inner) = (max_of("test.outer"), max_of("test.inner"));
    assert!(inner.max_ns >= 2_000_000, "{inner:?}");
    assert!(
        outer.max_ns >= inner.max_ns + 1_000_000,
        "{outer:?} {inner:?}"
    );
    // Each one's snapshot: a trace whose metadata names it.
    for m in [&p, &outer, &inner] {
        let last = m.kept.last().unwrap_or_else(|| panic!("{m:?}"));
        let meta = std::fs::read_to_string(last.join("metadata")).unwrap();
        assert!(
            meta.contains(&format!("tape_latency_name = \"{}\";", m.name)),
            "{meta}"
        );
        assert!(
            meta.contains("tape_latency_tracer = \"section\";"),
            "{meta}"
        );
    }
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // A section inside the handler, on the thread the signal interrupted
    // inside its own section: no lock, no allocation on this path.
    let _s = latency::section!("test.in_handler");
    spin(Duration::from_micros(500));
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_section_in_a_signal_handler_inside_a_section() {
    let _g = setup();
    // SAFETY: a valid handler for SIGUSR2, which nothing else here uses.
    unsafe { libc::signal(libc::SIGUSR2, on_signal as *const () as libc::sighandler_t) };
    {
        let _s = latency::section!("test.interrupted");
        spin(Duration::from_millis(1));
        // SAFETY: raise has no memory preconditions.
        unsafe { libc::raise(libc::SIGUSR2) };
        spin(Duration::from_millis(1));
    }
    assert!(INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed));
    settle();
    let (outer, handler) = (max_of("test.interrupted"), max_of("test.in_handler"));
    assert!(handler.max_ns >= 500_000, "{handler:?}");
    assert!(
        outer.max_ns >= 2_000_000 + handler.max_ns,
        "{outer:?} {handler:?}"
    );
}

#[test]
fn a_thread_that_exits_after_its_worst_case_still_gets_its_snapshot() {
    let _g = setup();
    let tid = std::thread::Builder::new()
        .name("short-lived".into())
        .spawn(|| {
            let _s = latency::section!("test.exiting");
            spin(Duration::from_millis(2));
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() as u32 }
        })
        .unwrap()
        .join()
        .unwrap();
    settle();
    let m = max_of("test.exiting");
    assert!(m.max_ns >= 2_000_000, "{m:?}");
    assert_eq!(m.saved, 1, "{m:?}");
    assert_eq!(m.thread.as_ref().map(|t| t.0), Some(tid), "{m:?}");
}

#[test]
fn a_threshold_reports_every_latency_above_it_and_keep_trims_the_snapshots() {
    let _g = setup();
    latency::set_threshold(200_000);
    latency::set_keep(2);
    for _ in 0..5 {
        {
            let _s = latency::section!("test.thresh");
            spin(Duration::from_micros(400));
        }
        {
            // Under the threshold: not reported.
            let _s = latency::section!("test.thresh_quiet");
        }
        // One poll each (the tape-trigger thread takes the largest of a
        // tracker's reports per poll).
        settle();
    }
    let m = max_of("test.thresh");
    assert_eq!((m.reported, m.saved), (5, 5), "{m:?}");
    assert_eq!(m.kept.len(), 2, "{m:?}");
    assert!(m.kept.iter().all(|p| p.exists()), "{m:?}");
    let dir = m.kept[0].parent().unwrap();
    let on_disk = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("test_thresh-")
        })
        .count();
    assert_eq!(on_disk, 2);
    let quiet = max_of("test.thresh_quiet");
    assert_eq!(quiet.reported, 0, "{quiet:?}");
    latency::set_threshold(0);
}

#[test]
fn a_wakeup_pair_on_a_string_key_across_threads() {
    let _g = setup();
    latency::wakeup("test.jobs", "test.job.start", "test.job.end", "name").unwrap();
    // A bad key: named, with its position.
    let e = latency::wakeup("test.bad", "test.job.start", "test.job.end", "nmae").unwrap_err();
    assert!(
        e.to_string()
            .contains("wakeup test.bad: key of test.job.start")
            && e.to_string().contains("nmae"),
        "{e}"
    );
    job_start("slow");
    job_start("quick");
    let h = std::thread::spawn(|| {
        job_end("quick");
        std::thread::sleep(Duration::from_millis(5));
        job_end("slow");
        job_end("never started");
    });
    h.join().unwrap();
    settle();
    let m = max_of("test.jobs");
    assert_eq!(m.kind, Kind::Wakeup);
    assert!(m.max_ns >= 5_000_000, "{m:?}");
    let s = latency::pair_stats("test.jobs").unwrap();
    assert_eq!(s.unmatched, 1, "{s:?}");
    assert!(latency::remove_wakeup("test.jobs"));
    assert!(!latency::remove_wakeup("test.jobs"));
}

#[test]
fn a_flood_of_reports_is_accounted_for() {
    let _g = setup();
    // Every section above 1 ns is reported: 4 threads x 2000, far more
    // than the queue holds between two polls.
    latency::set_threshold(1);
    let before = latency::stats();
    let sums = |name: &str| {
        let m = max_of(name);
        m.saved + m.superseded + m.failed
    };
    let names = ["test.flood0", "test.flood1", "test.flood2", "test.flood3"];
    let before_sum: u64 = names.iter().map(|n| sums(n)).sum();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    match t {
                        0 => drop(latency::section!("test.flood0")),
                        1 => drop(latency::section!("test.flood1")),
                        2 => drop(latency::section!("test.flood2")),
                        _ => drop(latency::section!("test.flood3")),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    latency::set_threshold(0);
    settle();
    let after = latency::stats();
    let asked = after.asked - before.asked;
    let lost = after.lost - before.lost;
    let handled: u64 = names.iter().map(|n| sums(n)).sum::<u64>() - before_sum;
    assert_eq!(after.taken, after.asked, "{after:?}");
    assert_eq!(
        handled + lost,
        asked,
        "asked {asked}, handled {handled}, lost {lost}"
    );
    assert!(lost > 0, "the queue never overran: {asked} reports");
}
