//! Configuration from the environment, as a user sets it without changing
//! code: good values take effect through `tape::init()`, bad ones stop it
//! with an error naming the variable, the value and the accepted forms; the
//! guard saves at the end into `TAPE_TRACE_DIR/<program>-<date>/`.

mod common;

tape::tracepoint! {
    pub fn on(n: u64) = "env.net.on";
    pub fn also(n: u64) = "env.disk.also";
    pub fn off(n: u64) = "env.other.off";
}

const VARS: [&str; 8] = [
    "TAPE_FILTER",
    "TAPE_TRIGGER",
    "TAPE_TRACE",
    "TAPE_TRACE_DIR",
    "TAPE_TRACE_BUFSZ",
    "TAPE_TRACE_PACKETSZ",
    "TAPE_TRACE_MODE",
    "TAPE_TRACE_CLOCK",
];

fn set(vars: &[(&str, &str)]) {
    for v in VARS {
        std::env::remove_var(v);
    }
    for (k, v) in vars {
        std::env::set_var(k, v);
    }
}

/// One test: the environment is process-wide.
#[test]
fn environment_configures_tape() {
    // (variables, text the error must contain)
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
    );
    let bad: &[Case] = &[
        (
            &[("TAPE_TRACE_MODE", "flight")],
            &["TAPE_TRACE_MODE=\"flight\"", "`overwrite` or `discard`"],
        ),
        (
            &[("TAPE_TRACE_BUFSZ", "4X")],
            &["TAPE_TRACE_BUFSZ=\"4X\"", "at byte 1", "4M"],
        ),
        (
            &[("TAPE_TRACE_BUFSZ", "-1")],
            &["TAPE_TRACE_BUFSZ=\"-1\"", "at byte 0"],
        ),
        (
            &[("TAPE_TRACE_BUFSZ", "1K"), ("TAPE_TRACE_PACKETSZ", "1K")],
            &["1024 bytes", "two"],
        ),
        (
            &[("TAPE_TRACE", "env.net.*,/[/")],
            &["TAPE_TRACE=", "at byte 10", "regex"],
        ),
        (
            &[("TAPE_TRACE_CLOCK", "hpet")],
            &["TAPE_TRACE_CLOCK=\"hpet\"", "monotonic"],
        ),
        (&[("TAPE_TRACE_DIR", "")], &["TAPE_TRACE_DIR"]),
        (
            &[("TAPE_FILTER", "env.net.on if nn > 3")],
            &[
                "TAPE_FILTER: filter for env.net.on: no field `nn` (fields: n,",
                "\n  nn > 3\n  ^",
            ],
        ),
        (
            &[("TAPE_FILTER", "env.net.on n > 3")],
            &["TAPE_FILTER=\"env.net.on n > 3\": at byte 0: an item has no ` if `"],
        ),
        (
            &[("TAPE_TRIGGER", "env.net.on snapshot:2 if nn > 3")],
            &[
                "TAPE_TRIGGER: trigger for env.net.on: no field `nn`",
                "\n  snapshot:2 if nn > 3\n                ^",
            ],
        ),
        (
            &[("TAPE_TRIGGER", "env.net.on traceof")],
            &["TAPE_TRIGGER: trigger for env.net.on: unknown command \"traceof\""],
        ),
        (
            &[("TAPE_TRIGGER", "env.net.on")],
            &["TAPE_TRIGGER=\"env.net.on\": at byte 0: an item has a pattern and no trigger"],
        ),
    ];
    for (vars, needles) in bad {
        set(vars);
        let e = tape::init().expect_err("a bad value must stop init");
        for n in *needles {
            assert!(e.message().contains(n), "{vars:?}: {e} lacks {n}");
        }
    }

    let dir = common::trace_path("env");
    set(&[
        ("TAPE_TRACE", "env.net.*, /^env\\.disk\\./"),
        ("TAPE_TRACE_DIR", dir.to_str().unwrap()),
        ("TAPE_TRACE_BUFSZ", "256K"),
        ("TAPE_TRACE_MODE", "discard"),
        ("TAPE_FILTER", "env.net.on if n < 10 || n == 99999"),
        (
            "TAPE_TRIGGER",
            "env.disk.* traceoff:2 if n == 4000000000; env.net.on stacktrace:1 if n == 7",
        ),
    ]);
    let guard = tape::init().expect("good values");
    assert!(tape::filter::get(&on::TRACEPOINT).is_some());
    let texts = |tp| -> Vec<String> { tape::trigger::list(tp).iter().map(|t| t.text()).collect() };
    assert_eq!(
        texts(&also::TRACEPOINT),
        ["traceoff:count=2 if n == 4000000000"]
    );
    assert_eq!(texts(&on::TRACEPOINT), ["stacktrace:count=1 if n == 7"]);
    assert!(on::enabled() && also::enabled() && !off::enabled());
    assert_eq!(tape::config::mode(), tape::Mode::Discard);
    for n in 0..100_000 {
        on(n);
        also(n);
        off(n);
    }
    // 256K ring in discard mode: most events were dropped (`full`); those
    // of `on` that came while there was room went through its filter (an
    // event with no room is dropped before the filter sees it, as ftrace
    // reserves before it filters).
    assert!(tape::stats().drops.full > 80_000);
    let rejected = tape::filter::rejected(&on::TRACEPOINT);
    assert!(rejected > 1000 && rejected < 100_000 - 10, "{rejected}");
    assert_eq!(tape::trigger::list(&on::TRACEPOINT)[0].fired(), 1);
    drop(guard); // saves
    let saved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let name = saved[0].file_name().unwrap().to_string_lossy().into_owned();
    // <program>-YYYY-MM-DD-HH-MM-SS
    let date = &name[name.len() - 19..];
    assert!(name.starts_with("env-"), "{name}");
    assert!(
        date.bytes()
            .enumerate()
            .all(|(i, b)| if [4, 7, 10, 13, 16].contains(&i) {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }),
        "{name}"
    );
    if let Some(text) = common::read(common::Reader::Bt2, &saved[0], &[]) {
        let evs = common::events(&text.stdout);
        let kept = evs.iter().filter(|e| e.name == "env.net.on").count();
        assert_eq!(
            kept, 10,
            "the filter keeps n < 10 (n = 99999 found the ring full)"
        );
        assert!(evs.iter().any(|e| e.name == "env.disk.also"));
        assert!(!evs.iter().any(|e| e.name == "env.other.off"));
        assert!(common::discarded_reported(&text.stderr) > 80_000);
    }
    set(&[]);
}
