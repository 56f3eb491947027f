//! Tracepoints registered at run time (`tape::registry::register`): the
//! patterns applied before them decide whether they start enabled (the
//! last that matches wins), patterns applied after select them, lookup
//! finds them, a taken name is refused, their events are saved with the
//! fields their description gives and read back by tape's reader and by
//! babeltrace2, and many threads registering at once while others read
//! the list see a consistent table.

mod common;

use tape::{FieldDesc, Tracepoint, TracepointDesc};

tape::tracepoint! {
    /// A link-time tracepoint beside the run-time ones.
    pub fn linked(v: u64) = "reg.linked";
}

/// A description made at run time: fields `v: u64` and `s: &str`.
fn desc(name: &str) -> &'static TracepointDesc {
    static FIELDS: [FieldDesc; 2] = [
        FieldDesc {
            name: "v",
            describe: <u64 as tape::Field>::describe,
        },
        FieldDesc {
            name: "s",
            describe: <&str as tape::Field>::describe,
        },
    ];
    Box::leak(Box::new(TracepointDesc {
        name: Box::leak(name.to_owned().into_boxed_str()),
        file: file!(),
        line: line!(),
        module_path: module_path!(),
        fast_path: false,
        fields: &FIELDS,
        fixed_size: 8,
        format: None,
        class: None,
        loglevel: None,
        emf_uri: None,
    }))
}

fn emit(tp: &Tracepoint, v: u64, s: &str) {
    let state = tp.state();
    if tape::__private::is_active(state) {
        tape::__private::emit(state, (v, s));
    }
}

/// One process-wide registry: the cases run in one test, in order.
#[test]
fn registered_tracepoints_are_selected_saved_and_read() {
    let dir = std::env::temp_dir().join(format!("tape-registered-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _g = tape::Config::new()
        .dir(&dir)
        .control(false)
        .shared_rings(false)
        .init()
        .expect("init");
    _g.disarm();
    let linked_count = tape::tracepoints().len();

    // Patterns before: the last that matches wins.
    tape::enable_pattern("dyn.*").unwrap();
    tape::disable_pattern("dyn.off.*").unwrap();
    tape::enable_pattern("/^dyn\\.off\\.but_on$/").unwrap();
    let cases: &[(&str, bool)] = &[
        ("dyn.a", true),
        ("dyn.off.x", false),
        ("dyn.off.but_on", true),
        ("other.b", false),
    ];
    let mut points = Vec::new();
    for &(name, on) in cases {
        let tp = tape::registry::register(desc(name)).expect(name);
        assert_eq!(tp.is_enabled(), on, "{name}");
        assert_eq!(
            tape::lookup(name).map(|p| p as *const _),
            Some(tp as *const _)
        );
        assert_eq!(usize::from(tp.id()), linked_count + points.len(), "{name}");
        points.push(tp);
    }
    // Link-time ones keep their ids and are still found.
    assert!(tape::lookup("reg.linked").is_some());
    assert_eq!(tape::tracepoints().len(), linked_count + cases.len());

    // A taken name (run-time or link-time) is refused, naming it; also
    // to a registration that would share it.
    for name in ["dyn.a", "reg.linked"] {
        let e = tape::registry::register(desc(name)).unwrap_err();
        assert!(e.to_string().contains(name), "{e}");
        let e = tape::registry::register_shared(desc(name)).unwrap_err();
        assert!(e.to_string().contains(name), "{e}");
    }
    // A NUL in a name or its place is refused (it would end the name in a
    // reader in C, and no save could write it), naming the tracepoint.
    let e = tape::registry::register_shared(desc("dyn.nul\0x")).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Metadata);
    assert!(e.to_string().contains("holds a NUL"), "{e}");
    let placed = Box::leak(Box::new(TracepointDesc {
        emf_uri: Some("src/a\0.rs:1"),
        ..*desc("dyn.placed")
    }));
    let e = tape::registry::register(placed).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Metadata);
    assert!(tape::lookup("dyn.placed").is_none());
    // A shared name: each registration its own tracepoint (its own id),
    // all selected by the name; lookup finds the first; a plain
    // registration of it is refused.
    let shared: Vec<&Tracepoint> = (0..3)
        .map(|_| tape::registry::register_shared(desc("shared.x")).unwrap())
        .collect();
    assert!(shared[0].id() < shared[1].id() && shared[1].id() < shared[2].id());
    assert_eq!(
        tape::lookup("shared.x").map(|p| p.id()),
        Some(shared[0].id())
    );
    assert!(tape::registry::register(desc("shared.x")).is_err());
    assert_eq!(tape::enable_pattern("shared.x").unwrap(), 3);
    assert!(shared.iter().all(|p| p.is_enabled()));
    assert_eq!(tape::disable_pattern("shared.*").unwrap(), 3);
    assert_eq!(tape::tracepoints().len(), linked_count + cases.len() + 3);

    // Patterns after select them, as any tracepoint.
    assert_eq!(tape::enable_pattern("other.*").unwrap(), 1);
    assert!(points[3].is_enabled());
    tape::disable("dyn.a").unwrap();
    assert!(!points[0].is_enabled());
    tape::enable("dyn.a").unwrap();

    // Events, saved with their fields.
    for (i, tp) in points.iter().enumerate() {
        emit(tp, i as u64 * 10, "hello");
    }
    linked(7);
    tape::enable("reg.linked").unwrap();
    linked(8);
    let trace = tape::save().expect("save");
    let traces = tape_ctf::metadata::find_traces(&trace).unwrap();
    let mut got = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        if let tape_ctf::merge::Record::Event(e) = r.unwrap() {
            got.push(format!("{} {:?}", e.class.name, e.payload()));
        }
    }
    let want = ["dyn.a", "dyn.off.but_on", "other.b", "reg.linked"];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(g.starts_with(&format!("{w} ")), "{g} / {w}");
    }
    assert!(
        got[0].contains("\"v\"") && got[0].contains("hello"),
        "{}",
        got[0]
    );
    // babeltrace2 reads the same trace.
    if let Some(text) = common::read_clean(common::Reader::Bt2, &trace) {
        for w in want {
            assert!(text.contains(&format!(" {w}: ")), "{w} not in {text}");
        }
        assert!(text.contains("v = 20, s = \"hello\""), "{text}");
    }

    // Many registering while others read the table: every id once, the
    // table never shorter than before, every entry a tracepoint named.
    let before = tape::tracepoints().len();
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..200 {
                    tape::registry::register(desc(&format!("race.{t}.{i}"))).unwrap();
                }
            });
        }
        s.spawn(|| {
            let mut last = 0;
            for _ in 0..2000 {
                let all = tape::tracepoints();
                assert!(all.len() >= last);
                last = all.len();
                assert!(all.iter().all(|p| !p.name().is_empty()));
            }
        });
    });
    let all = tape::tracepoints();
    assert_eq!(all.len(), before + 800);
    for (id, p) in all.iter().enumerate() {
        assert_eq!(usize::from(p.id()), id, "{}", p.name());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
