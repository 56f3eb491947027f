//! Two tracepoints with the same name, in different modules: initialisation
//! fails with an error that names both declarations; both can still be
//! selected together.

mod first {
    tape::tracepoint! {
        pub fn request(id: u64) = "dup.request.start";
    }
}

mod second {
    tape::tracepoint! {
        pub fn request(id: u32, name: &str) = "dup.request.start";
    }
}

#[test]
fn duplicate_names_are_reported_with_both_locations() {
    let e = tape::Config::new().init().unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Duplicate);
    let msg = e.message();
    assert!(msg.contains("\"dup.request.start\""), "{msg}");
    let file = file!();
    let lines: Vec<String> = [
        first::request::TRACEPOINT.desc().line,
        second::request::TRACEPOINT.desc().line,
    ]
    .iter()
    .map(|l| format!("{file}:{l}"))
    .collect();
    for l in &lines {
        assert!(msg.contains(l.as_str()), "{msg} lacks {l}");
    }
    assert_eq!(tape::registry::check().unwrap_err(), e);
    assert_eq!(tape::enable_pattern("dup.request.start").unwrap(), 2);
    assert!(first::request::enabled() && second::request::enabled());
    assert_ne!(
        first::request::TRACEPOINT.id(),
        second::request::TRACEPOINT.id()
    );
}
