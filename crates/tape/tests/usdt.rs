//! USDT probes (issue 40) without a kernel tool: the kernel's part (a
//! semaphore incremented while a uprobe is attached) done by the test, so
//! that the watcher's part is checked everywhere: a tracepoint becomes
//! active when its semaphore does, fires (the SDT site, its arguments),
//! and is back on its disabled path, its state word as before, once the
//! semaphore is zero again. bpftrace's part is in tape-cli's tests.

use std::sync::atomic::Ordering;

tape::tracepoint! {
    /// A tracepoint of this test only.
    pub fn usdt_probe_hit(n: u32, text: &str, ok: bool) = "usdt_test.probe.hit";
}

fn site() -> &'static tape::__private::usdt::UsdtSite {
    tape::__private::usdt::USDT_SITES
        .iter()
        .find(|s| s.tracepoint.name() == "usdt_test.probe.hit")
        .expect("tracepoint! registers an SDT site")
}

#[test]
fn a_semaphore_set_by_a_tool_activates_the_tracepoint_and_its_return_restores_it() {
    let s = site();
    assert_eq!((s.provider, s.name), ("usdt_test", "probe_hit"));
    let tp = &usdt_probe_hit::TRACEPOINT;
    // Registered (its id in the word) before the word is kept.
    tape::tracepoints();
    let before = tp.state();
    assert!(!usdt_probe_hit::enabled());
    // The kernel's increment when a uprobe with this semaphore attaches.
    s.semaphore.fetch_add(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert!(usdt_probe_hit::enabled(), "{:#x}", tp.state());
    assert_eq!(
        tape::__private::usdt::attached(tp),
        Some(("usdt_test", "probe_hit", true))
    );
    // The site runs (a nop here: no uprobe), with each kind of argument.
    for n in 0..3 {
        usdt_probe_hit(n, "text", n % 2 == 0);
    }
    // A second tool, then both leave: attached until the last one goes.
    s.semaphore.fetch_add(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    s.semaphore.fetch_sub(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert!(usdt_probe_hit::enabled());
    s.semaphore.fetch_sub(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert!(!usdt_probe_hit::enabled());
    assert_eq!(
        tape::__private::usdt::attached(tp),
        Some(("usdt_test", "probe_hit", false))
    );
    assert_eq!(tp.state(), before, "the state word as before");
}

/// A traced function of this test only: `fn.usdt.traced_step.entry` and
/// `.exit`, SDT probes `fn:usdt_traced_step_entry` and `_exit`.
#[tape::traced]
fn traced_step(n: u32) -> u32 {
    n + 1
}

#[test]
fn a_traced_function_is_an_sdt_probe_too() {
    let entry = tape::__private::usdt::USDT_SITES
        .iter()
        .find(|s| s.tracepoint.name() == "fn.usdt.traced_step.entry")
        .expect("#[traced] registers an SDT site");
    assert_eq!(
        (entry.provider, entry.name),
        ("fn", "usdt_traced_step_entry")
    );
    let tp = entry.tracepoint;
    tape::tracepoints();
    let before = tp.state();
    entry.semaphore.fetch_add(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert!(tape::__private::is_active(tp.state()), "{:#x}", tp.state());
    // The site runs with the payload (a nop here: no uprobe).
    assert_eq!(traced_step(1), 2);
    entry.semaphore.fetch_sub(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert_eq!(tp.state(), before, "the state word as before");
}

#[test]
fn note_strings_hold_the_names_and_arguments_exactly() {
    // (tracepoint name, arguments, provider, probe)
    let cases = [
        (
            "fn.app.io.read.entry",
            "8@%rdi 8@%rsi",
            "fn",
            "app_io_read_entry",
        ),
        ("one", "", "tape", "one"),
        ("a.1b", "4@%eax", "a", "_1b"),
        ("a.", "", "a", "_"),
        // A non-ASCII letter: a `_` per byte.
        ("fn.app.Ünïcode.f.exit", "", "fn", "app___n__code_f_exit"),
    ];
    for (tracepoint, args, provider, probe) in cases {
        let strings = tape::__private::usdt::note_strings(tracepoint, args);
        let want = format!("{provider}\0{probe}\0{args}\0");
        let len = tape::__private::usdt::note_len(&strings);
        assert_eq!(&strings[..len], want.as_bytes(), "{tracepoint}");
        assert!(strings[len..].iter().all(|&b| b == 0), "{tracepoint}");
        assert_eq!(
            tape::__private::usdt::names(tracepoint),
            (provider.to_owned(), probe.to_owned()),
            "{tracepoint}"
        );
        let word: Vec<u8> = (0..tape::__private::usdt::NOTE_WORDS)
            .flat_map(|i| tape::__private::usdt::note_word(&strings, i).to_le_bytes())
            .collect();
        assert_eq!(word, strings, "{tracepoint}");
    }
}

#[test]
fn sdt_names_follow_the_stated_rule() {
    let names: Vec<(&str, &str, &str)> = tape::__private::usdt::USDT_SITES
        .iter()
        .map(|s| (s.tracepoint.name(), s.provider, s.name))
        .collect();
    for (tracepoint, provider, name) in &names {
        assert_eq!(
            tape::__private::usdt::names(tracepoint),
            (provider.to_string(), name.to_string()),
            "tracepoint! and #[traced] write the rule of tape::__private::usdt::names"
        );
        let ok = |s: &str| {
            !s.is_empty()
                && !s.starts_with(|c: char| c.is_ascii_digit())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        assert!(ok(provider) && ok(name), "{tracepoint}: {provider}:{name}");
    }
    assert!(
        names.contains(&("tape.crash", "tape", "crash")),
        "{names:?}"
    );
}

/// The threads of this process named `name` (`/proc/self/task/*/comm`).
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .count()
}

#[test]
fn usdt_off_runs_no_watcher() {
    let dir = std::env::temp_dir().join(format!("tape-usdt-off-{}", std::process::id()));
    let _tape = tape::Config::default()
        .usdt(false)
        .control(false)
        .dir(&dir)
        .init()
        .unwrap();
    // (A thread takes its name once it runs: time for one to do so.)
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(threads_named("tape-usdt"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

tape::tracepoint! {
    /// A tracepoint of the fork test only.
    pub fn usdt_fork_hit(n: u32) = "usdt_test.fork.hit";
}

/// A child forked while a tool is attached keeps the probe (the kernel
/// keeps the uprobe and the semaphore's count in the copy) and runs no
/// watcher: it answers `attached` without a lock, emits through the
/// probe, and a look of its own ends (bounded), whatever the parent's
/// watcher held at the fork.
#[test]
fn a_child_forked_with_a_tool_attached_goes_on() {
    let s = tape::__private::usdt::USDT_SITES
        .iter()
        .find(|s| s.tracepoint.name() == "usdt_test.fork.hit")
        .unwrap();
    let tp = &usdt_fork_hit::TRACEPOINT;
    // Registered (its id in the word) before the word is kept.
    tape::tracepoints();
    let before = tp.state();
    s.semaphore.fetch_add(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert_eq!(tape::__private::usdt::attached(tp).map(|a| a.2), Some(true));
    // SAFETY: the child calls only what the test states (atomics, the
    // tracepoint's probe path, a bounded look), then `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let on = tape::__private::usdt::attached(tp).is_some_and(|a| a.2);
        for n in 0..10 {
            usdt_fork_hit(n);
        }
        tape::__private::usdt::look();
        let still = usdt_fork_hit::enabled();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if on && still { 0 } else { 1 }) };
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        assert!(std::time::Instant::now() < until, "the child hangs");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status:#x}"
    );
    s.semaphore.fetch_sub(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert_eq!(tp.state(), before);
}

/// A tracepoint made at run time (as tape-tracing makes its callsites')
/// has no note: while a tool is attached to `tape:runtime_event`, its
/// events fire that probe with its name and payload; a tracepoint
/// registered then is covered at once (`cover`); when the tool goes, the
/// probes go and the words are as before.
#[test]
fn tracepoints_made_at_run_time_fire_tape_runtime_event() {
    static EARLY: tape::TracepointDesc = tape::__private::traced::call_desc(
        "usdt_test.runtime.early",
        file!(),
        line!(),
        module_path!(),
    );
    static LATE: tape::TracepointDesc = tape::__private::traced::call_desc(
        "usdt_test.runtime.late",
        file!(),
        line!(),
        module_path!(),
    );
    let early = tape::registry::register(&EARLY).unwrap();
    let site = tape::__private::usdt::USDT_SITES
        .iter()
        .find(|s| s.tracepoint.name() == "tape.runtime_event")
        .unwrap();
    assert_eq!((site.provider, site.name), ("tape", "runtime_event"));
    let before = early.state();
    // What the SDT site is given, seen by a probe of the user's on
    // `tape.runtime_event` (called before the site's, of lower priority).
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, Vec<u8>)>::new()));
    let _watch = {
        let seen = seen.clone();
        tape::__private::usdt::runtime_event::attach(move |name: &&str, payload: &&[u8]| {
            seen.lock()
                .unwrap()
                .push((name.to_string(), payload.to_vec()));
        })
    };
    site.semaphore.fetch_add(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    let late = tape::registry::register(&LATE).unwrap();
    tape::__private::usdt::cover(late);
    for (tp, depth) in [(early, 7u32), (late, 9u32)] {
        tape::__private::traced::record_payload(tp, tp.state(), &(depth,));
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (
                "usdt_test.runtime.early".to_owned(),
                7u32.to_le_bytes().to_vec()
            ),
            (
                "usdt_test.runtime.late".to_owned(),
                9u32.to_le_bytes().to_vec()
            ),
        ]
    );
    site.semaphore.fetch_sub(1, Ordering::Relaxed);
    tape::__private::usdt::look();
    assert_eq!(early.state(), before, "the state word as before");
    assert!(!tape::__private::is_active(late.state()));
}
