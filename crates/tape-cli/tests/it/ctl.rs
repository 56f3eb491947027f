//! `tape ctl` and `tape ps` against a real running program
//! (`examples/pipeline.rs`, built by `cargo test --workspace`), driven from
//! this process through the `tape` binary: every command, the trace a
//! `save` leaves (read by babeltrace2 with no warning), bad input, dead and
//! foreign processes, and the refusal of another user.

use crate::pipeline;
use crate::shared;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pipeline::{number_after, TAPE};

/// A private runtime directory (short: socket paths are limited to 107 bytes).
fn runtime_dir(tag: &str) -> PathBuf {
    let d = PathBuf::from(format!("/tmp/tape-ctl-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// A running pipeline; killed when dropped.
struct Program {
    child: Child,
    pid: u32,
    runtime: PathBuf,
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Program {
    fn start(runtime: &Path, env: &[(&str, &str)]) -> Program {
        Program::start_with(Command::new(pipeline::binary()), runtime, env)
    }

    fn start_with(mut cmd: Command, runtime: &Path, env: &[(&str, &str)]) -> Program {
        cmd.args(["--seconds", "120"])
            .env("XDG_RUNTIME_DIR", runtime)
            .env("TAPE_TRACE_DIR", runtime.join("traces"))
            // Killed at the end: the rings it leaves go with `runtime`.
            .env("TAPE_SHM_DIR", runtime)
            .env_remove("TAPE_TRACE")
            .env_remove("TAPE_CONTROL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        // A binary just copied (the other-user test's) may be "busy" for a
        // moment: another test's fork can hold its write descriptor until
        // that child's exec closes it.
        let mut tries = 0;
        let mut child = loop {
            match cmd.spawn() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => break r.expect("start the pipeline example"),
            }
        };
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.contains(": pid "), "{first:?}");
        let pid = child.id();
        Program {
            child,
            pid,
            runtime: runtime.to_path_buf(),
        }
    }

    /// `tape ctl PID args...`: (status, stdout, stderr).
    fn ctl(&self, args: &[&str]) -> (bool, String, String) {
        let out = tape(
            &self.runtime,
            &[&["ctl", &self.pid.to_string()], args].concat(),
        );
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `tape ctl` that must succeed: its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.ctl(args);
        assert!(ok, "tape ctl {args:?} failed: {err}");
        assert!(err.is_empty(), "tape ctl {args:?}: stderr: {err}");
        out
    }

    /// `tape ctl` that must fail: its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.ctl(args);
        assert!(!ok, "tape ctl {args:?} should fail; printed {out}");
        err
    }
}

fn tape(runtime: &Path, args: &[&str]) -> Output {
    Command::new(TAPE)
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .unwrap()
}

/// `tape show --events EVENT DIR`: its lines.
fn shown_events(runtime: &Path, event: &str, dir: &Path) -> String {
    let out = tape(runtime, &["show", "--events", event, dir.to_str().unwrap()]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"))
}

fn recorded(p: &Program) -> u64 {
    field(&p.ok(&["status"]), "recorded")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_command_against_a_running_program() {
    let rt = runtime_dir("all");
    let p = Program::start(&rt, &[]);

    // tape ps lists it.
    let ps = String::from_utf8_lossy(&tape(&rt, &["ps"]).stdout).into_owned();
    let line = ps
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&p.pid.to_string()))
        .unwrap_or_else(|| panic!("pid {} not in:\n{ps}", p.pid));
    assert!(line.contains("pipeline"), "{line}");

    let s = p.ok(&["status"]);
    assert_eq!(field(&s, "tracing_on"), "1");
    assert_eq!(field(&s, "mode"), "overwrite");
    assert!(field(&s, "events enabled").starts_with("0 of "), "{s}");
    assert_eq!(
        field(&s, "control socket"),
        rt.join("tape")
            .join(format!("{}.sock", p.pid))
            .display()
            .to_string()
    );
    assert_eq!(
        field(&s, "trace directory"),
        rt.join("traces").display().to_string()
    );

    // list: every tracepoint with its state and fields.
    let list = p.ok(&["list", "pipeline.*"]);
    assert_eq!(list.lines().count(), 4, "{list}");
    assert!(
        list.lines()
            .any(|l| l == "pipeline.worker.done\tdisabled\tworker: u8, seq: u64, checksum: u64"),
        "{list}"
    );

    // enable: events flow into the rings.
    let out = p.ok(&["enable", "pipeline.*"]);
    assert_eq!(out, "enabled 4 tracepoints for pipeline.*\n");
    wait_until("events in the rings", || recorded(&p) > 100);
    assert!(p.ok(&["list", "/sink/"]).contains("\tenabled\t"));
    let stats = p.ok(&["stats"]);
    for name in ["source", "worker-0", "worker-1", "sink"] {
        assert!(stats.contains(&format!("({name}):")), "{name} in {stats}");
    }
    assert!(stats.contains("overrun: 0"), "{stats}");
    assert!(
        stats
            .lines()
            .filter_map(|l| l.strip_prefix("bytes: "))
            .any(|b| b.parse::<u64>().unwrap() > 0),
        "{stats}"
    );

    // off: nothing more is recorded, the selection is kept; on again.
    assert_eq!(p.ok(&["off"]), "tracing_on: 0\n");
    std::thread::sleep(Duration::from_millis(50));
    let frozen = recorded(&p);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(recorded(&p), frozen, "recording went on after `off`");
    let s = p.ok(&["status"]);
    assert!(field(&s, "events enabled").starts_with("4 of "), "{s}");
    assert!(p
        .ok(&["list", "pipeline.sink.done"])
        .contains("enabled (tracing off)"));
    assert_eq!(p.ok(&["on"]), "tracing_on: 1\n");
    wait_until("recording again after `on`", || recorded(&p) > frozen);

    // disable one.
    assert_eq!(
        p.ok(&["disable", "pipeline.worker.queue"]),
        "disabled 1 tracepoint for pipeline.worker.queue\n"
    );

    // mode and buffer.
    assert!(p.ok(&["mode", "discard"]).starts_with("mode: discard"));
    assert_eq!(field(&p.ok(&["status"]), "mode"), "discard");
    p.ok(&["mode", "overwrite"]);
    let b = p.ok(&["buffer", "2M", "64K"]);
    assert!(
        b.starts_with("buffer_size_kb: 2048 per thread, packets of 64 KiB"),
        "{b}"
    );
    assert!(b.contains("the 4 existing rings keep their size"), "{b}");
    assert!(field(&p.ok(&["status"]), "buffer_size_kb").starts_with("2048 per thread"));

    // save: a snapshot babeltrace2 reads with no warning.
    let dir = rt.join("snapshot");
    let out = p.ok(&["save", dir.to_str().unwrap()]);
    assert_eq!(out.trim_end(), dir.display().to_string());
    let check = tape(&rt, &["check", dir.to_str().unwrap()]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let shown = tape(
        &rt,
        &["show", "--events", "pipeline.*", dir.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.lines().count() > 100, "{text}");
    assert!(text.contains("pipeline.sink.done"));
    if shared::babeltrace2("the snapshot read by babeltrace2") {
        let bt = Command::new("babeltrace2").arg(&dir).output().unwrap();
        assert!(bt.status.success());
        let err = String::from_utf8_lossy(&bt.stderr);
        assert!(err.is_empty(), "babeltrace2 warned: {err}");
        let all = tape(&rt, &["show", dir.to_str().unwrap()]);
        assert_eq!(
            String::from_utf8_lossy(&bt.stdout),
            String::from_utf8_lossy(&all.stdout),
            "babeltrace2 and tape show differ"
        );
    }
    // save with no directory: a new trace under TAPE_TRACE_DIR.
    let out = p.ok(&["save"]);
    assert!(
        Path::new(out.trim_end()).starts_with(rt.join("traces")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&rt);
}

#[test]
fn bad_commands_patterns_and_sizes_are_clear_errors() {
    let rt = runtime_dir("bad");
    let p = Program::start(&rt, &[]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["frobnicate"],
            "unknown command \"frobnicate\"; commands: status, on, off",
        ),
        (
            &["status", "now"],
            "`status` takes no argument (given: now)",
        ),
        (&["enable"], "`enable` needs at least one pattern"),
        (
            &["enable", "pipeline.nope"],
            "no tracepoint is named \"pipeline.nope\"",
        ),
        (&["enable", "pipeline.["], "bad glob pattern \"pipeline.[\""),
        // A pattern that matches nothing is refused (ftrace's set_event
        // says EINVAL), with the nearest names.
        (
            &["enable", "pipline.*"],
            "no tracepoint matches \"pipline.*\" (nearest: pipeline.sink.done, \
             pipeline.source.made, pipeline.worker.done; `tape ctl PID list` lists them)",
        ),
        (
            &["enable", "pipeline.sorce.made"],
            "no tracepoint is named \"pipeline.sorce.made\" (nearest: pipeline.source.made",
        ),
        (
            &["disable", "zzz.*"],
            "no tracepoint matches \"zzz.*\" (`tape ctl PID list`",
        ),
        (&["disable", "/(/"], "bad regex pattern \"(\""),
        (&["list", "a", "b"], "`list` takes one pattern at most"),
        (&["buffer"], "`buffer` takes SIZE [PACKET]"),
        (
            &["buffer", "12Q"],
            "buffer SIZE=\"12Q\": at byte 2: unknown unit",
        ),
        (&["buffer", "100"], "a ring of 100 bytes"),
        (
            &["buffer", "1M", "100"],
            "packets of 100 bytes is not possible",
        ),
        // The value as TAPE_TRACE_MODE's, by its parser (config::SETTINGS).
        (
            &["mode", "sideways"],
            "mode=\"sideways\": at byte 0: is not a mode; accepted: `overwrite` or `discard`",
        ),
        (
            &["mode", "overwrite", "discard"],
            "`mode` takes `overwrite` or `discard` (given: \"overwrite discard\")",
        ),
        (&["save", "a", "b"], "`save` takes one directory at most"),
    ];
    for (args, want) in cases {
        let err = p.fails(args);
        assert!(err.contains(want), "tape ctl {args:?}: {err}");
        assert!(
            err.starts_with(&format!("tape: error: process {}: ", p.pid)),
            "{err}"
        );
    }
    // Nothing was applied by a command that failed part-way.
    p.fails(&["enable", "pipeline.sink.done", "pipeline.nope"]);
    assert!(p
        .ok(&["list", "pipeline.sink.done"])
        .contains("\tdisabled\t"));
    // A save into a directory that cannot be made names it.
    let err = p.fails(&["save", "/proc/tape-cannot-write-here"]);
    assert!(
        err.contains("saving the trace failed") && err.contains("/proc/.tape-cannot-write-here"),
        "{err}"
    );
    // Still alive and answering.
    assert_eq!(field(&p.ok(&["status"]), "tracing_on"), "1");
    let _ = std::fs::remove_dir_all(&rt);
}

#[test]
fn dead_absent_and_uncontrolled_processes_are_named() {
    let rt = runtime_dir("dead");
    // A process that is not a tape program.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    // Until its exec, the child still bears this test thread's name.
    let comm = format!("/proc/{}/comm", sleeper.id());
    wait_until("the child to be `sleep`", || {
        std::fs::read_to_string(&comm).is_ok_and(|c| c.trim_end() == "sleep")
    });
    let out = tape(&rt, &["ctl", &sleeper.id().to_string(), "status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("(sleep) has no tape control socket"), "{err}");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    // A tape program with TAPE_CONTROL=off.
    {
        let p = Program::start(&rt, &[("TAPE_CONTROL", "off")]);
        let err = p.fails(&["status"]);
        assert!(err.contains("TAPE_CONTROL=off"), "{err}");
    }
    // A program that has exited, its socket left behind (killed by a
    // signal: no exit handler ran): reported and removed.
    let p = Program::start(&rt, &[]);
    let pid = p.pid;
    let sock = rt.join("tape").join(format!("{pid}.sock"));
    assert!(sock.exists());
    drop(p); // SIGKILL
    assert!(sock.exists(), "a killed process cannot remove its socket");
    let out = tape(&rt, &["ctl", &pid.to_string(), "status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!(
            "no process {pid} exists (its stale control socket"
        )),
        "{err}"
    );
    assert!(!sock.exists());
    // tape ps removes the stale sockets it finds, and lists no dead process.
    std::fs::write(rt.join("tape").join("999999.sock"), b"").unwrap();
    let ps = String::from_utf8_lossy(&tape(&rt, &["ps"]).stdout).into_owned();
    assert_eq!(ps.lines().count(), 1, "{ps}");
    assert!(!rt.join("tape").join("999999.sock").exists());
    // Bad words never reach a process.
    let out = tape(&rt, &["ctl", "1", ""]);
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(&rt);
}

#[test]
fn a_process_of_another_user_refuses_the_connection() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        crate::shared::skipped(
            "tape ctl's refusal of another uid's program (its logic is tested in tape's unit \
             tests)",
            "it starts the program as another user: run the tests as root",
        );
        return;
    }
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    // Everything the program (uid 65534) needs, reachable by it.
    let base = PathBuf::from(format!("/tmp/tape-ctl-test-uid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = base.join("pipeline");
    std::fs::copy(pipeline::binary(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rt = base.join("run");
    std::fs::create_dir_all(&rt).unwrap();
    std::os::unix::fs::chown(&rt, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut cmd = Command::new(&bin);
    cmd.uid(NOBODY).gid(NOBODY).current_dir(&base);
    let mut p = Program::start_with(cmd, &rt, &[("HOME", rt.to_str().unwrap())]);
    let sock = rt.join("tape").join(format!("{}.sock", p.pid));
    wait_until("the other user's socket", || sock.exists());
    let meta = std::fs::metadata(rt.join("tape")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.mode() & 0o777), (NOBODY, 0o700));
    // tape's client will not talk through another user's directory...
    let err = p.fails(&["status"]);
    assert!(
        err.contains("is owned by uid 65534, not by this process's uid 0"),
        "{err}"
    );
    // ... and a client that does (root passes the directory's
    // permissions) is refused by the server's peer check.
    let raw = |request: &[u8]| {
        use std::io::{Read, Write};
        let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        c.write_all(request).unwrap();
        let mut reply = String::new();
        c.read_to_string(&mut reply).unwrap();
        reply
    };
    let reply = raw(b"status\n\n");
    assert!(
        reply.starts_with("error Control\n")
            && reply
                .contains("refused: uid 0 may not control this process (only its user, uid 65534)"),
        "{reply}"
    );
    let reply = raw(b"enable\npipeline.*\n\n");
    assert!(reply.contains("refused"), "{reply}");
    // Root looking in its own directory is told whose the process is, not
    // that it is not a tape program.
    let own = base.join("root-run");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = tape(&own, &["ctl", &p.pid.to_string(), "status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("belongs to uid 65534"),
        "{err}"
    );
    let _ = p.child.kill();
    let out = p.child.wait_with_output_ref();
    assert!(
        out.matches("tape: refused a control connection from uid 0")
            .count()
            == 1,
        "reported once: {out}"
    );
    drop(p);
    let _ = std::fs::remove_dir_all(&base);
}

trait StderrOf {
    fn wait_with_output_ref(&mut self) -> String;
}

impl StderrOf for Child {
    /// The stderr of a child that was killed.
    fn wait_with_output_ref(&mut self) -> String {
        let _ = self.wait();
        let mut s = String::new();
        if let Some(mut e) = self.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

/// (entries, filtered) of the thread named `name` in `tape ctl stats`.
fn thread_counts(p: &Program, name: &str) -> (u64, u64) {
    let stats = p.ok(&["stats"]);
    let mut lines = stats
        .lines()
        .skip_while(|l| !l.contains(&format!("({name})")));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no thread {name} in:\n{stats}"));
    let get = |key: &str| -> u64 {
        lines
            .clone()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} after {header}"))
            .parse()
            .unwrap()
    };
    let entries = get("entries");
    let filtered = get("filtered");
    (entries, filtered)
}

#[test]
fn threads_records_only_the_threads_named() {
    let rt = runtime_dir("threads");
    // Small packets: a thread left out stops at its next packet switch.
    let p = Program::start(
        &rt,
        &[
            ("TAPE_TRACE", "pipeline.*"),
            ("TAPE_TRACE_BUFSZ", "1M"),
            ("TAPE_TRACE_PACKETSZ", "4K"),
        ],
    );
    wait_until("every thread recording", || {
        let s = p.ok(&["stats"]);
        ["source", "worker-0", "worker-1", "sink"]
            .iter()
            .all(|n| s.contains(&format!("({n}):")))
    });
    assert_eq!(p.ok(&["threads"]).lines().next(), Some("threads: all"));
    let out = p.ok(&["threads", "worker-*"]);
    assert!(out.starts_with("threads: worker-*\n"), "{out}");
    assert!(out.contains("(source): left out"), "{out}");
    assert!(out.contains("(worker-0): recording"), "{out}");
    assert!(
        field(&p.ok(&["status"]), "threads").starts_with("worker-* (2 of 4 threads recording)"),
        "{}",
        p.ok(&["status"])
    );
    // The source stops recording (at its next packet) and counts what it
    // does not record; the workers go on.
    wait_until("the source filtered", || thread_counts(&p, "source").1 > 0);
    let (src, _) = thread_counts(&p, "source");
    let (w0, _) = thread_counts(&p, "worker-0");
    std::thread::sleep(Duration::from_millis(300));
    let (src2, filtered2) = thread_counts(&p, "source");
    let (w0b, w0_filtered) = thread_counts(&p, "worker-0");
    assert_eq!(src2, src, "the source recorded while left out");
    assert!(filtered2 > 0);
    assert!(
        w0b > w0 && w0_filtered == 0,
        "worker-0: {w0} -> {w0b}, filtered {w0_filtered}"
    );
    // By thread id: only the sink.
    let stats = p.ok(&["stats"]);
    let sink_tid = stats
        .lines()
        .find(|l| l.contains("(sink)"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_owned();
    let out = p.ok(&["threads", &sink_tid]);
    assert!(
        out.contains("(sink): recording") && out.contains("(worker-0): left out"),
        "{out}"
    );
    // --all: everyone again.
    let out = p.ok(&["threads", "--all"]);
    assert!(
        out.starts_with("threads: all\n") && !out.contains("left out"),
        "{out}"
    );
    let (src3, _) = thread_counts(&p, "source");
    wait_until("the source recording again", || {
        thread_counts(&p, "source").0 > src3
    });
    // Bad input.
    assert!(p
        .fails(&["threads", "wor[ker"])
        .contains("bad thread-name glob \"wor[ker\""));
    assert!(p
        .fails(&["threads", "--all", "1"])
        .contains("`threads --all` takes nothing else"));
    assert!(p
        .fails(&["threads", "99999999999"])
        .contains("thread id \"99999999999\" is too large"));
    let _ = std::fs::remove_dir_all(&rt);
}

#[test]
fn filter_records_only_the_matching_events() {
    let rt = runtime_dir("filter");
    let p = Program::start(&rt, &[]);
    // The filter first, then the events: every recorded one went through it.
    let out = p.ok(&["filter", "pipeline.source.made", "len > 1000 && seq & 1"]);
    assert_eq!(
        out,
        "set the filter of 1 tracepoint to: len > 1000 && seq & 1\n"
    );
    p.ok(&["enable", "pipeline.*"]);
    // Items are made with `len = 64 + seq % 1024`: any 1,001 items in a row
    // hold some with `len > 1000` and an odd `seq`, so once more than 1,000
    // were rejected, some were kept.
    let rejected = || -> u64 {
        let listed = p.ok(&["list", "pipeline.source.made"]);
        listed
            .split("(rejected ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    wait_until("more than 1,000 rejected events", || rejected() > 1000);
    let listed = p.ok(&["list", "pipeline.source.made"]);
    assert!(
        listed.contains("enabled, filter: len > 1000 && seq & 1 (rejected "),
        "{listed}"
    );
    let dir = rt.join("filtered");
    p.ok(&["save", dir.to_str().unwrap()]);
    let text = shown_events(&rt, "pipeline.source.made", &dir);
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty(), "no source event kept");
    for l in &lines {
        let (len, seq) = (number_after(l, "len = "), number_after(l, "seq = "));
        assert!(len > 1000 && seq % 2 == 1, "{l}");
    }
    // The other events are not filtered.
    let sink = shown_events(&rt, "pipeline.sink.done", &dir);
    assert!(sink.lines().count() > lines.len());
    // Errors name the event, the field and the column.
    let err = p.fails(&["filter", "pipeline.source.made", "lenn > 3"]);
    assert!(
        err.contains("filter for pipeline.source.made: no field `lenn`"),
        "{err}"
    );
    assert!(err.contains("\n  lenn > 3\n  ^"), "{err}");
    assert!(p
        .fails(&["filter", "pipeline.source.made"])
        .contains("`filter` takes"));
    assert_eq!(
        p.ok(&["filter", "pipeline.*", "--clear"]),
        "cleared the filter of 1 tracepoint\n"
    );
    assert!(!p.ok(&["list", "pipeline.source.made"]).contains("filter:"));
    let _ = std::fs::remove_dir_all(&rt);
}

#[test]
fn triggers_set_through_tape_ctl_fire_and_read_back() {
    let rt = runtime_dir("trigger");
    let p = Program::start(&rt, &[]);
    assert!(p
        .ok(&["trigger"])
        .starts_with("# no triggers; available: traceon traceoff"));
    // A trigger makes its tracepoint active, not recording ("soft mode").
    assert_eq!(
        p.ok(&[
            "trigger",
            "pipeline.source.made",
            "traceon if len > 4000000000"
        ]),
        "set traceon if len > 4000000000 on 1 tracepoint\n"
    );
    let listed = p.ok(&["list", "pipeline.source.made"]);
    assert!(
        listed.contains("disabled, trigger: traceon:unlimited if len > 4000000000 (fired 0)"),
        "{listed}"
    );
    assert_eq!(
        p.ok(&["trigger", "pipeline.source.made", "!traceon"]),
        "removed !traceon from 1 tracepoint\n"
    );
    p.ok(&["enable", "pipeline.*"]);
    wait_until("events", || recorded(&p) > 1000);
    // snapshot:3 fires on the next three items: exactly three traces.
    assert_eq!(
        p.ok(&["trigger", "pipeline.source.made", "snapshot:3"]),
        "set snapshot:3 on 1 tracepoint\n"
    );
    wait_until("three snapshots", || {
        p.ok(&["status"])
            .contains("trigger snapshots: 3 asked, 3 saved, 0 failed")
    });
    // traceoff on a worker's event whose seq is a multiple of 1024.
    assert_eq!(
        p.ok(&[
            "trigger",
            "pipeline.worker.done",
            "traceoff:1 if !(seq & 1023)"
        ]),
        "set traceoff:1 if !(seq & 1023) on 1 tracepoint\n"
    );
    wait_until("the traceoff trigger", || {
        p.ok(&["status"]).contains("tracing_on: 0")
    });
    let status = p.ok(&["status"]);
    assert!(
        status.contains("trigger: pipeline.source.made: snapshot:count=0  # fired 3\n"),
        "{status}"
    );
    assert!(
        status.contains(
            "trigger: pipeline.worker.done: traceoff:count=0 if !(seq & 1023)  # fired 1\n"
        ),
        "{status}"
    );
    assert_eq!(
        p.ok(&["trigger", "pipeline.worker.*"]),
        "pipeline.worker.done: traceoff:count=0 if !(seq & 1023)  # fired 1\n"
    );
    let traces = rt.join("traces");
    let snaps: Vec<PathBuf> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(snaps.len(), 3, "{snaps:?}");
    for s in &snaps {
        let shown = shown_events(&rt, "pipeline.source.made", s);
        assert!(shown.lines().count() > 100, "{}", s.display());
    }
    // The worker whose event fired traceoff recorded it last.
    let dir = rt.join("after-traceoff");
    p.ok(&["save", dir.to_str().unwrap()]);
    let text = shown_events(&rt, "pipeline.worker.done", &dir);
    let fired = text
        .lines()
        .rfind(|l| number_after(l, "seq = ") % 1024 == 0)
        .unwrap_or_else(|| panic!("no multiple of 1024 in:\n{text}"));
    let worker = number_after(fired, "worker = ");
    let last = text
        .lines()
        .rfind(|l| l.contains(&format!("worker = {worker},")))
        .unwrap();
    assert_eq!(last, fired);
    // Errors with a caret, extra words, --clear.
    let err = p.fails(&["trigger", "pipeline.source.made", "snapshot if lenn > 3"]);
    assert!(
        err.contains("trigger for pipeline.source.made: no field `lenn`"),
        "{err}"
    );
    assert!(
        err.contains("\n  snapshot if lenn > 3\n              ^"),
        "{err}"
    );
    assert!(p
        .fails(&["trigger", "pipeline.source.made", "a", "b"])
        .contains("`trigger` takes"));
    assert_eq!(
        p.ok(&["trigger", "pipeline.*", "--clear"]),
        "cleared the triggers of 2 tracepoints\n"
    );
    assert!(!p.ok(&["status"]).contains("trigger: "));
    let _ = std::fs::remove_dir_all(&rt);
}

#[test]
fn tracing_callsites_follow_tape_ctl_in_a_running_program() {
    // tape-tracing's example, nothing enabled: its `tracing` callsites get
    // `Interest::never`, cached by `tracing`. `tape ctl enable` must have
    // `tracing` ask again (tape-tracing's hook), or nothing would record.
    let runtime = runtime_dir("tracing");
    let p = Program::start_with(
        Command::new(pipeline::example("tracing_spans")),
        &runtime,
        &[("TAPE_SHM", "off")],
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(recorded(&p), 0, "nothing is enabled yet");
    // A callsite whose first event has not typed its fields yet: one
    // short line with their names (issue 47: ~600 characters of tagged
    // types each before).
    let listed = p.ok(&["list", "tracing.app.info.request.new"]);
    assert_eq!(
        listed,
        "tracing.app.info.request.new\tdisabled\tcall, id, status (typed by its first event)\n"
    );
    p.ok(&["enable", "tracing.app.*"]);
    wait_until("tracing events recorded", || recorded(&p) > 50);
    // Typed by then: the types.
    let listed = p.ok(&["list", "tracing.app.info.request.new"]);
    assert!(
        listed.contains("call: u64, id: u64") && !listed.contains("typed by"),
        "{listed}"
    );
    let dir = runtime.join("saved");
    p.ok(&["save", dir.to_str().unwrap()]);
    let text = shown_events(&runtime, "tracing.app.*", &dir);
    for want in [
        "tracing.app.info.request.entry",
        "tracing.app.debug.parse.exit",
        "tracing.app.info.request.record",
    ] {
        assert!(text.contains(want), "{want} not in:\n{text}");
    }
    // Disabled again: the count stops growing (give `tracing` the rebuild).
    p.ok(&["disable", "tracing.app.*"]);
    std::thread::sleep(Duration::from_millis(100));
    let before = recorded(&p);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(recorded(&p), before, "still recording after disable");
    let _ = std::fs::remove_dir_all(&runtime);
}

/// `TAPE_TRACE` with a typo: the program ends saying that the pattern
/// matched nothing and naming the nearest tracepoints (issue 38), not
/// "set TAPE_TRACE" as if it were unset.
#[test]
fn a_trace_pattern_that_matches_nothing_is_named_with_the_nearest_names() {
    let rt = runtime_dir("typo");
    let out = Command::new(pipeline::binary())
        .args(["--seconds", "1"])
        .env("XDG_RUNTIME_DIR", &rt)
        .env("TAPE_TRACE_DIR", rt.join("traces"))
        .env("TAPE_SHM", "off")
        .env("TAPE_TRACE", "pipline.*")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "tape: no trace saved: nothing was recorded: no tracepoint is enabled: the pattern \
             \"pipline.*\" (TAPE_TRACE, or given to tape) matches no tracepoint; nearest: \
             pipeline.sink.done, pipeline.source.made, pipeline.worker.done"
        ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&rt);
}
