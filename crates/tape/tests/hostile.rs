//! The recorder under hostile conditions, each case in a child process of
//! its own (this test binary run again with `TAPE_HOSTILE_CASE=<name>`), so
//! that a crash is a failed case with its signal, not a dead test runner.
//! Each case is named after what it caught.
//!
//! | case | what it does | what must hold |
//! |---|---|---|
//! | `tls_destructor_emits_after_exit_guard` | a thread-local whose `Drop` emits, created before the thread's first event (its destructor runs after tape's exit guard) | no crash; every event recorded or counted |
//! | `threads_exit_during_saves` | 64 threads emit and exit while another thread saves in a loop | every event in some trace (none freed unsaved) |
//! | `ring_allocation_fails` | the address space is capped below one ring | events counted (`dropped_ring_alloc`, the trace's `env`) |
//! | `non_utf8_trace_dir` | `TAPE_TRACE_DIR` holds bytes that are not UTF-8 | the trace is saved there |
//! | `non_utf8_mode`, `ring_larger_than_memory` | bad values | `init()` fails naming the variable and the figure |
//! | `killed_during_save` | the parent sends SIGKILL while a save writes | the next save in that directory removes the leftover |
//! | `save_peak_memory` | 4 threads fill 64 MiB rings, then a save | the save's peak memory is at most one packet per ring beyond the rings |

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

tape::tracepoint! {
    pub fn ev(thread: u64, seq: u64) = "test.hostile.ev";
    pub fn bulk(data: &[u8]) = "test.hostile.bulk";
}

/// What a case's child must end with.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Exit 0 (the case checked its own results and would have panicked).
    Success,
    /// Killed by the parent with SIGKILL (after `wait_for` held).
    Killed,
}

struct Case {
    name: &'static str,
    /// Environment of the child (besides `TAPE_HOSTILE_CASE`).
    env: &'static [(&'static str, &'static [u8])],
    run: fn(),
    expect: Expect,
}

const CASES: &[Case] = &[
    Case {
        name: "tls_destructor_emits_after_exit_guard",
        env: &[],
        run: tls_destructor_emits_after_exit_guard,
        expect: Expect::Success,
    },
    Case {
        name: "threads_exit_during_saves",
        env: &[],
        run: threads_exit_during_saves,
        expect: Expect::Success,
    },
    Case {
        name: "ring_allocation_fails",
        env: &[],
        run: ring_allocation_fails,
        expect: Expect::Success,
    },
    Case {
        name: "non_utf8_trace_dir",
        // The directory is set by the parent (under the target directory).
        env: &[("TAPE_TRACE", b"test.hostile.*")],
        run: non_utf8_trace_dir,
        expect: Expect::Success,
    },
    Case {
        name: "non_utf8_mode",
        env: &[("TAPE_TRACE_MODE", b"disc\xffard")],
        run: non_utf8_mode,
        expect: Expect::Success,
    },
    Case {
        name: "ring_larger_than_memory",
        env: &[("TAPE_TRACE_BUFSZ", b"1000G")],
        run: ring_larger_than_memory,
        expect: Expect::Success,
    },
    Case {
        name: "save_peak_memory",
        env: &[],
        run: save_peak_memory,
        expect: Expect::Success,
    },
    Case {
        name: "killed_during_save",
        env: &[("TAPE_TRACE_BUFSZ", b"64M")],
        run: saves_forever,
        expect: Expect::Killed,
    },
];

/// The child's entry: runs the case named in `TAPE_HOSTILE_CASE`, if any.
#[test]
fn child() {
    let Ok(name) = std::env::var("TAPE_HOSTILE_CASE") else {
        return;
    };
    let case = CASES.iter().find(|c| c.name == name).expect("known case");
    (case.run)();
}

/// Runs case `name` in a child; `during` is called while it runs (with its
/// pid) and may kill it. Returns the child's stderr.
fn spawn(name: &str, extra: &[(&str, &OsStr)], during: impl FnOnce(u32)) -> String {
    let case = CASES.iter().find(|c| c.name == name).expect("known case");
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("TAPE_HOSTILE_CASE", name)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for v in [
        "TAPE_TRACE",
        "TAPE_TRACE_DIR",
        "TAPE_TRACE_BUFSZ",
        "TAPE_TRACE_PACKETSZ",
        "TAPE_TRACE_MODE",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in case.env {
        cmd.env(k, OsStr::from_bytes(v));
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn the case");
    during(child.id());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("case {name} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    use std::io::Read;
    let _ = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    use std::os::unix::process::ExitStatusExt;
    match case.expect {
        Expect::Success => assert!(
            status.success(),
            "case {name}: {status} (signal {:?})\n{stderr}",
            status.signal()
        ),
        Expect::Killed => assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "case {name}: {status}\n{stderr}"
        ),
    }
    stderr
}

#[test]
fn tls_destructor_emitting_after_the_exit_guard_does_not_crash() {
    spawn("tls_destructor_emits_after_exit_guard", &[], |_| {});
}

#[test]
fn threads_exiting_during_saves_lose_nothing_silently() {
    spawn("threads_exit_during_saves", &[], |_| {});
}

#[test]
fn a_ring_that_cannot_be_allocated_is_counted() {
    spawn("ring_allocation_fails", &[], |_| {});
}

#[test]
fn environment_values_that_are_not_utf8() {
    let base = common::trace_path("non-utf8");
    std::fs::create_dir_all(&base).expect("create");
    let mut dir = base.into_os_string();
    dir.push(OsStr::from_bytes(b"/caf\xe9"));
    spawn(
        "non_utf8_trace_dir",
        &[("TAPE_TRACE_DIR", dir.as_os_str())],
        |_| {},
    );
    spawn("non_utf8_mode", &[], |_| {});
    spawn("ring_larger_than_memory", &[], |_| {});
}

#[test]
fn a_save_needs_one_packet_beyond_the_rings() {
    let err = spawn("save_peak_memory", &[], |_| {});
    eprintln!(
        "{}",
        err.lines()
            .filter(|l| l.starts_with("save of"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_save_killed_midway_leaves_nothing_behind_the_next_save() {
    let dir = common::trace_path("killed");
    std::fs::create_dir_all(&dir).expect("create");
    let leftovers = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.as_bytes().starts_with(b"."))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    // Its shared rings (left by the kill) go to a directory removed below.
    let shm = common::trace_path("killed-shm");
    std::fs::create_dir_all(&shm).expect("create");
    // A process with 2 x 64 MiB of events saves in a loop; it is killed as
    // soon as a save's temporary directory appears.
    spawn(
        "killed_during_save",
        &[
            ("TAPE_TRACE_DIR", dir.as_os_str()),
            ("TAPE_SHM_DIR", shm.as_os_str()),
        ],
        |pid| {
            let start = Instant::now();
            while leftovers(&dir).is_empty() && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_micros(200));
            }
            // SAFETY: `pid` is our child, not yet waited for.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        },
    );
    let _ = std::fs::remove_dir_all(&shm);
    let stale = leftovers(&dir);
    assert!(!stale.is_empty(), "the save was not caught midway");
    // A leftover of this very pid (reused) with another process's nonce.
    let mine = dir.join(format!(".x.tmp-{}-00000000deadbeef-0", std::process::id()));
    std::fs::create_dir(&mine).expect("create");
    let _g = tape::Config::new().init().expect("init");
    _g.disarm();
    let saved = tape::save_to(dir.join("after")).expect("save");
    assert!(saved.join("metadata").is_file());
    assert_eq!(leftovers(&dir), Vec::<PathBuf>::new(), "stale: {stale:?}");
}

// ---- the cases, run in the child ----

struct EmitOnDrop(u64);

impl Drop for EmitOnDrop {
    fn drop(&mut self) {
        ev(u64::MAX, self.0);
    }
}

thread_local! {
    static ON_EXIT: std::cell::RefCell<Option<EmitOnDrop>> =
        const { std::cell::RefCell::new(None) };
}

/// The thread-local is created first, so its destructor is registered first
/// and runs after tape's exit guard (destructors run in reverse order): its
/// emit finds the ring closed, with the offset of the last event left.
fn tls_destructor_emits_after_exit_guard() {
    let _g = tape::Config::new()
        .enable("test.hostile.*")
        .init()
        .expect("init");
    _g.disarm();
    let before = tape::stats().dropped_without_ring;
    for t in 0..3 {
        std::thread::spawn(move || {
            ON_EXIT.with(|g| *g.borrow_mut() = Some(EmitOnDrop(t)));
            for seq in 0..100 {
                ev(t, seq);
            }
        })
        .join()
        .expect("thread");
    }
    let dropped = tape::stats().dropped_without_ring - before;
    let dir = common::trace_path("tls-after-guard");
    tape::save_to(&dir).expect("save");
    let counts = count_by_thread(&dir);
    let recorded_on_exit = counts.get(&u64::MAX).map_or(0, BTreeSet::len) as u64;
    for t in 0..3 {
        assert_eq!(counts[&t].len(), 100, "thread {t}");
    }
    assert_eq!(
        recorded_on_exit + dropped,
        3,
        "every exit event is recorded or counted"
    );
}

/// Threads that emit and exit while saves run: the events a thread emits
/// after its ring was copied must reach a later trace, never be freed with
/// the ring unsaved.
fn threads_exit_during_saves() {
    const THREADS: u64 = 64;
    const EVENTS: u64 = 3000;
    let _g = tape::Config::new()
        .enable("test.hostile.*")
        .buffer_size(1 << 20)
        .mode(tape::Mode::Discard)
        .init()
        .expect("init");
    _g.disarm();
    for round in 0..3 {
        exit_during_saves_round(round * THREADS, THREADS, EVENTS);
    }
}

fn exit_during_saves_round(first: u64, threads: u64, events: u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let saver = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut dirs = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let dir = common::trace_path("exit-during-save");
                tape::save_to(&dir).expect("save");
                dirs.push(dir);
            }
            dirs
        })
    };
    let emitters: Vec<_> = (first..first + threads)
        .map(|t| {
            std::thread::spawn(move || {
                for seq in 0..events {
                    ev(t, seq);
                    // Alive across several saves, emitting between them.
                    if seq % 100 == 0 {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        })
        .collect();
    for e in emitters {
        e.join().expect("emitter");
    }
    stop.store(true, Ordering::Relaxed);
    let mut dirs = saver.join().expect("saver");
    let last = common::trace_path("exit-during-save-last");
    tape::save_to(&last).expect("save");
    dirs.push(last);
    let s = tape::stats();
    assert_eq!(s.drops, tape::Drops::default(), "nothing dropped: {s:?}");
    assert_eq!(s.lost_with_exited_rings, 0);
    // The union of all traces holds every event of every thread.
    let mut seen: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for d in &dirs {
        for (t, seqs) in count_by_thread(d) {
            seen.entry(t).or_default().extend(seqs);
        }
    }
    eprintln!("{} saves", dirs.len());
    for t in first..first + threads {
        let n = seen.get(&t).map_or(0, BTreeSet::len) as u64;
        assert_eq!(
            n,
            events,
            "thread {t}: {n} of {events} events in {} traces",
            dirs.len()
        );
    }
}

/// With the address space capped, a new thread's ring cannot be allocated:
/// its events are counted, in `tape::stats()` and in the trace's `env`.
fn ring_allocation_fails() {
    let _g = tape::Config::new()
        .enable("test.hostile.*")
        .buffer_size(1 << 30)
        .init()
        .expect("init");
    _g.disarm();
    // Above what the process maps now (its threads' stacks and malloc
    // arenas included), below a 1 GiB ring.
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split(' ').next().unwrap().parse().unwrap();
    let cap = libc::rlimit {
        rlim_cur: pages * 4096 + (256 << 20),
        rlim_max: libc::RLIM_INFINITY,
    };
    let mut now: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointers to plain structs.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut now), 0);
        assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &cap), 0);
    }
    std::thread::spawn(|| (0..1000).for_each(|seq| ev(7, seq)))
        .join()
        .expect("thread");
    // SAFETY: as above; the hard limit was left infinite.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &now), 0) };
    let s = tape::stats();
    assert_eq!(s.dropped_ring_alloc, 1000, "{s:?}");
    let dir = common::trace_path("ring-alloc");
    tape::save_to(&dir).expect("save");
    let meta = std::fs::read_to_string(dir.join("metadata")).expect("metadata");
    assert!(meta.contains("events_dropped_ring_alloc = 1000;"), "{meta}");
}

fn non_utf8_trace_dir() {
    let dir = std::env::var_os("TAPE_TRACE_DIR").expect("set by the parent");
    assert!(dir.to_str().is_none(), "not UTF-8 by design");
    let g = tape::init().expect("a path is taken as bytes");
    ev(1, 1);
    let saved = g.save().expect("save");
    assert!(
        saved.starts_with(&dir),
        "{} not under the variable's path",
        saved.display()
    );
    assert!(saved.join("metadata").is_file());
}

fn non_utf8_mode() {
    let e = tape::init().expect_err("not UTF-8");
    assert_eq!(e.kind(), tape::ErrorKind::Config);
    let m = e.message();
    assert!(
        m.contains("TAPE_TRACE_MODE") && m.contains("not UTF-8") && m.contains("at byte 4"),
        "{m}"
    );
}

fn ring_larger_than_memory() {
    let e = tape::init().expect_err("1000G rings");
    let m = e.message();
    assert!(
        m.contains("1073741824000 bytes") && m.contains("memory"),
        "{m}"
    );
}

/// `VmRSS` and `VmHWM` (peak) of this process, in KiB.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).expect(name);
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Four threads fill 64 MiB rings (1 MiB packets) and stay; the save's
/// peak memory beyond what the process held before it is at most one packet
/// per ring (it holds one packet at a time: one).
fn save_peak_memory() {
    let _g = tape::Config::new()
        .enable("test.hostile.*")
        .buffer_size(64 << 20)
        .init()
        .expect("init");
    _g.disarm();
    let (filled_tx, filled_rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (tx, stop) = (filled_tx.clone(), stop.clone());
            std::thread::spawn(move || {
                let data = vec![0x5a_u8; 4000];
                // Twice round the ring: every slot written (resident).
                for _ in 0..2 * (64 << 20) / 4000 {
                    bulk(&data);
                }
                tx.send(()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    for _ in 0..4 {
        filled_rx.recv().unwrap();
    }
    let dir = common::trace_path("peak-memory");
    // A first save warms up what any save allocates once (the metadata,
    // the registry); the second is measured.
    tape::save_to(&dir).expect("save");
    let (rss, _) = memory_kib();
    let dir2 = common::trace_path("peak-memory");
    tape::save_to(&dir2).expect("save");
    let (_, hwm) = memory_kib();
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let extra = hwm.saturating_sub(rss);
    let bytes: u64 = std::fs::read_dir(&dir2)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    eprintln!(
        "save of 4 x 64 MiB rings ({bytes} bytes written): RSS before {rss} KiB, peak {hwm} KiB, \
         {extra} KiB beyond"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
    assert!(bytes > 200 << 20, "the rings were full");
    // One packet per ring is 4 MiB; the save holds one at a time.
    assert!(extra <= 4 << 10, "{extra} KiB beyond the rings");
}

/// Two threads fill 64 MiB rings (`TAPE_TRACE_BUFSZ`); then saves run, into
/// `TAPE_TRACE_DIR`, until the parent kills us.
fn saves_forever() {
    let _g = tape::Config::from_env()
        .expect("environment")
        .enable("test.hostile.*")
        .init()
        .expect("init");
    _g.disarm();
    let data = vec![0x5a_u8; 4000];
    let fill = || {
        let data = data.clone();
        std::thread::spawn(move || {
            for _ in 0..(64 << 20) / 4000 {
                bulk(&data);
            }
            // Stay alive: the ring is saved with the thread running.
            std::thread::sleep(Duration::from_secs(3600));
        })
    };
    let _a = fill();
    let _b = fill();
    std::thread::sleep(Duration::from_millis(300));
    // Bounded: a parent that never kills us gets a failed case, not a full
    // disk.
    for _ in 0..20 {
        let _ = tape::save();
    }
    std::process::exit(3);
}

/// Events of `test.hostile.ev` in a trace: seqs by `thread` field, read with
/// tape's reader (the same reader `tape show` uses).
fn count_by_thread(dir: &Path) -> BTreeMap<u64, BTreeSet<u64>> {
    let out = common::tape_text(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut by: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for e in common::events(&out.stdout) {
        if e.name == "test.hostile.ev" {
            let t = common::field_u64(&e.payload, "thread");
            let seq = common::field_u64(&e.payload, "seq");
            assert!(by.entry(t).or_default().insert(seq), "duplicate {t}/{seq}");
        }
    }
    by
}
