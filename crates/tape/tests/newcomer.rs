//! What a new user meets in the first ten minutes, each case in a fresh child
//! process (this test binary run again), as a program of theirs would run:
//! how many traces a run leaves, where they go without `init()`, what is
//! said when nothing was recorded, `std::process::exit`, and the error a
//! `main` returning `tape::Error` prints.

use std::path::{Path, PathBuf};
use std::process::Command;

tape::tracepoint! {
    /// Something a worker did.
    pub fn work(n: u64, what: &str) = "test.newcomer.work";
}

/// Two threads that emit `n` events each, then exit.
fn two_threads(n: u64) {
    let t: Vec<_> = (0..2)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || (0..n).for_each(|k| work(k, "job")))
                .unwrap()
        })
        .collect();
    t.into_iter().for_each(|t| t.join().unwrap());
}

/// A child's program: `main` as a user writes it.
struct Case {
    name: &'static str,
    run: fn() -> Result<(), tape::Error>,
}

const CASES: &[Case] = &[
    Case {
        name: "save_then_end",
        run: || {
            let _tape = tape::init()?;
            two_threads(100);
            let dir = tape::save()?;
            println!("saved to {}", dir.display());
            Ok(())
        },
    },
    Case {
        name: "save_then_more_then_end",
        run: || {
            let _tape = tape::init()?;
            two_threads(100);
            tape::save()?;
            two_threads(7);
            Ok(())
        },
    },
    Case {
        name: "save_without_init",
        run: || {
            tape::enable("test.newcomer.work")?;
            two_threads(10);
            let dir = tape::save()?;
            println!("saved to {}", dir.display());
            Ok(())
        },
    },
    Case {
        name: "nothing_enabled_end",
        run: || {
            let _tape = tape::init()?;
            two_threads(10);
            Ok(())
        },
    },
    Case {
        name: "nothing_enabled_save",
        run: || {
            two_threads(10);
            tape::save()?;
            Ok(())
        },
    },
    Case {
        name: "enabled_nothing_hit",
        run: || {
            let _tape = tape::init()?;
            Ok(())
        },
    },
    Case {
        name: "all_lost",
        run: || {
            let _tape = tape::init()?;
            // Larger than a packet (64 KiB by default): dropped (`big`).
            let huge = "x".repeat(100_000);
            (0..5).for_each(|k| work(k, &huge));
            tape::save()?;
            Ok(())
        },
    },
    Case {
        name: "exit_with_guard",
        run: || {
            let _tape = tape::init()?;
            two_threads(50);
            std::process::exit(3);
        },
    },
    Case {
        name: "exit_while_emitting",
        run: || {
            let _tape = tape::init()?;
            // A thread that never stops emitting: exit() saves around it.
            std::thread::spawn(|| {
                let mut k = 0;
                loop {
                    work(k, "busy");
                    k += 1;
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::process::exit(0);
        },
    },
    Case {
        name: "exit_after_guard_saved",
        run: || {
            let tape = tape::init()?;
            two_threads(50);
            tape.save()?;
            std::process::exit(0);
        },
    },
];

/// The child's entry: runs the case named in `TAPE_NEWCOMER_CASE`, if any,
/// and ends the process as `main` would.
#[test]
fn child() {
    let Ok(name) = std::env::var("TAPE_NEWCOMER_CASE") else {
        return;
    };
    let case = CASES.iter().find(|c| c.name == name).expect("known case");
    let code = match (case.run)() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("Error: {e:?}");
            1
        }
    };
    // What the end of `main` does: the guard was dropped inside `run`.
    std::process::exit(code);
}

/// What a child left: its exit code, stdout, stderr, and the traces in its
/// trace directory.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    traces: Vec<PathBuf>,
}

fn run(name: &str, env: &[(&str, &str)]) -> Run {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("newcomer")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("TAPE_NEWCOMER_CASE", name)
        .env("TAPE_TRACE_DIR", &dir);
    for v in ["TAPE_TRACE", "TAPE_TRACE_BUFSZ", "TAPE_TRACE_MODE"] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    traces.sort();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        traces,
    }
}

/// Events per stream of a trace (by tape's reader), and the total.
fn events(trace: &Path) -> (usize, u64) {
    let t = tape_ctf::metadata::find_traces(trace).unwrap();
    let mut n = 0;
    let mut streams = 0;
    for mut s in tape_ctf::decode::open_streams(&t).unwrap() {
        streams += 1;
        n += s.count().unwrap().events;
    }
    (streams, n)
}

const ENABLED: (&str, &str) = ("TAPE_TRACE", "test.newcomer.*");

#[test]
fn a_save_then_the_end_of_main_leaves_one_trace() {
    let r = run("save_then_end", &[ENABLED]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.traces.len(), 1, "{:?}\n{}", r.traces, r.stderr);
    assert!(r.stdout.contains(&r.traces[0].display().to_string()));
    assert_eq!(events(&r.traces[0]), (2, 200));
    assert!(!r.stderr.contains("tape:"), "nothing to say: {}", r.stderr);
}

#[test]
fn events_after_a_save_are_saved_at_the_end() {
    let r = run("save_then_more_then_end", &[ENABLED]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.traces.len(), 2, "{:?}\n{}", r.traces, r.stderr);
    // The second holds the rings of the threads since: the events after
    // the save (the first threads' rings were freed by the first save).
    assert_eq!(events(&r.traces[1]), (2, 14), "{:?}", r.traces);
    assert!(r.stderr.contains("tape: trace saved to"), "{}", r.stderr);
}

#[test]
fn a_save_without_init_goes_to_tape_trace_dir() {
    let r = run("save_without_init", &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.traces.len(), 1, "{:?}", r.traces);
    assert!(r.stdout.contains(&r.traces[0].display().to_string()));
    assert_eq!(events(&r.traces[0]), (2, 20));
}

/// When nothing was recorded, the end of `main` writes no trace and says
/// why; an explicit save writes it and says why it is empty.
#[test]
fn nothing_recorded_is_said_not_saved_silently() {
    // (case, its environment, traces left, what stderr says)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], usize, &'a str);
    let cases: &[Case] = &[
        (
            "nothing_enabled_end",
            &[],
            0,
            "tape: no trace saved: nothing was recorded: no tracepoint is enabled",
        ),
        (
            "nothing_enabled_save",
            &[],
            1,
            "has no events: no tracepoint is enabled (nothing is by default: set TAPE_TRACE",
        ),
        (
            "nothing_enabled_save",
            &[ENABLED],
            1,
            "has no events: TAPE_TRACE is set, but tape::init() was not called",
        ),
        (
            "all_lost",
            &[ENABLED],
            1,
            "has no events: 1 tracepoint is enabled and hit, but every event was lost (big = 5)",
        ),
        (
            "enabled_nothing_hit",
            &[ENABLED],
            0,
            "nothing was recorded: 1 tracepoint is enabled, but none was hit",
        ),
    ];
    for (name, env, traces, said) in cases {
        let r = run(name, env);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        assert_eq!(r.traces.len(), *traces, "{name}: {:?}", r.traces);
        assert!(r.stderr.contains(said), "{name} {env:?}: {}", r.stderr);
    }
}

#[test]
fn exit_with_a_guard_alive_saves_once() {
    let r = run("exit_with_guard", &[ENABLED]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert_eq!(r.traces.len(), 1, "{:?}\n{}", r.traces, r.stderr);
    assert_eq!(events(&r.traces[0]), (2, 100));
    assert!(r.stderr.contains("tape: trace saved to"), "{}", r.stderr);
    // A thread emitting all along: the save at exit is consistent (tape's
    // reader reads every stream to its end) and the process ends.
    let r = run("exit_while_emitting", &[ENABLED]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.traces.len(), 1, "{:?}\n{}", r.traces, r.stderr);
    let (streams, n) = events(&r.traces[0]);
    assert!(streams == 1 && n > 1000, "{streams} streams, {n} events");
    // A guard already saved: exit adds nothing.
    let r = run("exit_after_guard_saved", &[ENABLED]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.traces.len(), 1, "{:?}\n{}", r.traces, r.stderr);
}

/// `fn main() -> Result<(), tape::Error>` prints `Error: {:?}`: the message,
/// not the struct.
#[test]
fn an_error_prints_its_message_in_debug_form_too() {
    std::env::set_var("TAPE_TRACE_BUFSZ", "4X");
    let e = tape::Config::from_env().unwrap_err();
    std::env::remove_var("TAPE_TRACE_BUFSZ");
    assert_eq!(format!("{e:?}"), e.to_string());
    assert!(
        e.to_string()
            .starts_with("TAPE_TRACE_BUFSZ=\"4X\": at byte 1"),
        "{e}"
    );
    assert!(format!("{e:#?}").contains("kind: Config"), "{e:#?}");
}
