//! The control surface from inside a process: the commands as library
//! functions, the socket answering this very process's own client, and a
//! forked child that exits without taking its parent's socket away.

use std::time::Duration;

tape::tracepoint! {
    pub fn ping(n: u32) = "test.control.ping";
    pub fn pong(n: u32, who: &str) = "test.control.pong";
}

fn words(s: &[&str]) -> Vec<String> {
    s.iter().map(|w| w.to_string()).collect()
}

#[test]
fn commands_by_function_and_by_socket_and_a_fork_keeps_the_socket() {
    let rt = std::path::PathBuf::from(format!("/tmp/tape-control-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&rt);
    std::fs::create_dir_all(&rt).unwrap();
    // SAFETY: set before any other thread of this test binary reads the
    // environment (this binary has one test).
    unsafe { std::env::set_var("XDG_RUNTIME_DIR", &rt) };
    let guard = tape::Config::new()
        .dir(rt.join("traces"))
        .init()
        .expect("init");
    let sock = tape::control::server::socket_path().expect("the socket is served");
    assert_eq!(
        sock,
        rt.join("tape").join(format!("{}.sock", std::process::id()))
    );

    // As library functions.
    let out = tape::control::execute(&words(&["enable", "test.control.*"])).unwrap();
    assert_eq!(out, "enabled 2 tracepoints for test.control.*\n");
    ping(1);
    pong(2, "b");
    let s = tape::control::execute(&words(&["status"])).unwrap();
    assert!(s.contains("recorded: 2 events in the rings"), "{s}");
    let e = tape::control::execute(&words(&["bogus"])).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Command);

    // Through the socket, from this process's own client.
    let me = std::process::id();
    let s = tape::control::client::request(me, &words(&["off"])).unwrap();
    assert_eq!(s, "tracing_on: 0\n");
    ping(3); // not recorded
    let s = tape::control::client::request(me, &words(&["status"])).unwrap();
    assert!(s.contains("recorded: 2 events in the rings"), "{s}");
    tape::control::client::request(me, &words(&["on"])).unwrap();
    ping(4);
    let e = tape::control::client::request(me, &words(&["enable", "x.["])).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::BadPattern);
    assert!(e.message().contains("bad glob pattern"), "{e}");
    let listed = tape::control::client::processes();
    assert!(
        listed.iter().any(|p| p.pid == me && p.enabled == 2),
        "{listed:?}"
    );

    // A forked child that exits normally (its exit handlers run) leaves
    // the parent's socket in place.
    // SAFETY: the child only calls exit (async-signal-safe enough here:
    // this test's other threads hold no lock the exit handlers take).
    let child = unsafe { libc::fork() };
    if child == 0 {
        std::process::exit(0);
    }
    assert!(child > 0);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    std::thread::sleep(Duration::from_millis(10));
    assert!(
        sock.exists(),
        "the child's exit removed the parent's socket"
    );
    let s = tape::control::client::request(me, &words(&["status"])).unwrap();
    assert!(s.contains("recorded: 3 events in the rings"), "{s}");
    guard.disarm();
    let _ = std::fs::remove_dir_all(&rt);
}
