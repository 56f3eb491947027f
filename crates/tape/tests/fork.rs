//! Fork: a child of a multi-threaded, tracing process can trace and save
//! (no deadlock on a lock another thread held at the fork, no corruption),
//! and its trace holds its own events under its own pid and thread id.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

tape::tracepoint! {
    pub fn work(n: u64) = "test.fork.work";
    pub fn child(n: u64, pid: u32) = "test.fork.child";
}

/// Waits for `pid` at most `limit`; kills it and fails on a timeout.
fn wait(pid: libc::pid_t, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: valid status pointer; pid is our child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "child {pid} died: status {status}");
            return libc::WEXITSTATUS(status);
        }
        if start.elapsed() > limit {
            // SAFETY: pid is our child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("child {pid} hung (deadlock after fork?)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn children_of_a_tracing_process_trace_and_save() {
    let _g = tape::Config::new()
        .enable("test.fork.*")
        .buffer_size(16 << 10)
        .init()
        .expect("init");
    _g.disarm();
    (0..100).for_each(work);
    // Threads that come and go keep taking the registry's lock.
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Bounded, with small rings: the ring of an exited thread is kept
            // until saved, and a parent holding thousands of large ones makes
            // every fork slow.
            for _ in 0..1000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::spawn(|| (0..10).for_each(work))
                    .join()
                    .unwrap();
            }
        })
    };
    let mut children = Vec::new();
    for i in 0..20 {
        let dir = common::trace_path(&format!("fork-{i}"));
        // SAFETY: the child only emits, saves and calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: getpid has no preconditions.
            let me = unsafe { libc::getpid() } as u32;
            (0..10).for_each(|n| child(n, me));
            let code = match tape::save_to(&dir) {
                Ok(_) => 0,
                Err(e) => {
                    eprintln!("child save: {e}");
                    1
                }
            };
            // SAFETY: leaves the child at once, without running the test
            // harness's exit path.
            unsafe { libc::_exit(code) };
        }
        assert_eq!(
            wait(pid, Duration::from_secs(30)),
            0,
            "child {pid} failed to save"
        );
        children.push((pid as u32, dir));
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();

    for (pid, dir) in &children {
        let meta = std::fs::read_to_string(dir.join("metadata")).unwrap();
        assert!(meta.contains(&format!("pid = {pid};")), "{meta}");
        let Some(text) = common::read_clean(common::Reader::Bt2, dir) else {
            return;
        };
        let evs = common::events(&text);
        let kids: Vec<_> = evs.iter().filter(|e| e.name == "test.fork.child").collect();
        assert_eq!(kids.len(), 10, "{}", dir.display());
        for e in kids {
            assert!(
                e.context.starts_with(&format!("tid = {pid},")),
                "{}",
                e.context
            );
            assert_eq!(common::field_u64(&e.payload, "pid"), u64::from(*pid));
        }
        // Only the forking thread's ring went with the child.
        let tids: std::collections::BTreeSet<&str> = evs
            .iter()
            .map(|e| e.context.split(',').next().unwrap())
            .collect();
        assert_eq!(tids.len(), 1, "{tids:?}");
    }
    // The parent's own trace has no child event.
    let dir = common::trace_path("fork-parent");
    tape::save_to(&dir).expect("save");
    if let Some(text) = common::read_clean(common::Reader::Bt2, &dir) {
        assert!(!text.contains("test.fork.child"));
        assert!(text.contains("test.fork.work"));
    }
}
