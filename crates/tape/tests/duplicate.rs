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

/// A block of several declarations (one a class's event), one of them a
/// duplicate: each is located at its own line, not at the block's.
mod block {
    tape::tracepoint! {
        pub fn one(a: u8) = "dup.block.one";

        pub fn two(a: u8) = "dup.block.two";
        pub class shape(a: u8) {
            pub fn three = "dup.block.three";

            pub fn again = "dup.block.one";
        }
    }
}

/// The line of this file that declares function `f`.
fn line_of(f: &str) -> u32 {
    let at = include_str!("duplicate.rs")
        .lines()
        .position(|l| l.trim_start().starts_with(&format!("pub fn {f}")))
        .expect("declared in this file");
    at as u32 + 1
}

#[test]
fn every_declaration_of_a_block_has_its_own_line() {
    let points = [
        ("one", &block::one::TRACEPOINT),
        ("two", &block::two::TRACEPOINT),
        ("three", &block::three::TRACEPOINT),
        ("again", &block::again::TRACEPOINT),
    ];
    for (f, t) in points {
        assert_eq!(t.desc().line, line_of(f), "{f}");
        assert_eq!(t.location(), format!("{}:{}", file!(), line_of(f)));
    }
    // `dup.block.one`, declared twice in the block: both lines named.
    let msg = tape::registry::check().unwrap_err().message().to_owned();
    for f in ["one", "again"] {
        let at = format!("{}:{}", file!(), line_of(f));
        assert!(msg.contains(&at), "{msg} lacks {at}");
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
