//! The strict metadata parse against its oracle, babeltrace2 2.0: what
//! `parse_metadata_strict` takes, babeltrace2 takes.
//!
//! - Each construct the lenient parse takes beyond babeltrace2 (one row
//!   each): the lenient parse takes it and lists it, the strict one refuses
//!   it at its position, and babeltrace2 refuses it too.
//! - Token mutations (drop, repeat, insert, swap) of real metadata (a
//!   tape trace's, the DPDK and LTTng samples', the ctf-testsuite's passing
//!   traces'): whenever the strict parse and the model's validation take
//!   the result, babeltrace2 must take it. The found differences are the
//!   rows of the table.
//! - A trace tape wrote (`tracer_name = "tape"`) with such a construct is
//!   refused by the reader, naming the position; another tool's gets a
//!   warning.

use crate::mutate::Rng;
use crate::shared;

use std::path::{Path, PathBuf};

/// A small trace in tape's shape, which every parse and babeltrace2 read.
const BASE: &str = r#"/* CTF 1.8 */
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;

trace {
    major = 1;
    minor = 8;
    uuid = "2a6422d0-6cee-11e0-8c08-cb07d7b3a564";
    byte_order = le;
    packet.header := struct {
        uint32_t magic;
        uint8_t uuid[16];
        uint32_t stream_id;
    };
};

env {
    tracer_name = "tape";
    hostname = "h";
};

clock {
    name = tape;
    uuid = "2a6422d0-6cee-11e0-8c08-cb07d7b3a565";
    freq = 1000000000;
    offset = 0;
};

stream {
    id = 0;
    event.header := struct {
        uint32_t id;
        integer { size = 64; align = 8; signed = false; map = clock.tape.value; } timestamp;
    };
    packet.context := struct {
        uint64_t timestamp_begin;
        uint64_t timestamp_end;
        uint64_t content_size;
        uint64_t packet_size;
    };
};

event {
    name = "app.request";
    id = 0;
    stream_id = 0;
    fields := struct {
        uint32_t n;
        uint8_t x;
    };
};
"#;

/// Each construct taken beyond babeltrace2 2.0, put in [`BASE`] in place
/// of some text: (that text, what replaces it, the words of the message,
/// its line and column). Every one but `\x4142` babeltrace2 refuses; that
/// one it reads otherwise (every hex digit into one byte, where C and tape
/// take two).
const BEYOND: &[(&str, &str, &str, u32, u32)] = &[
    ("uint8_t x;", "uint8_t;", "a type with no field name", 50, 9),
    (
        "uint8_t x;",
        "string /* c */;",
        "a type with no field name",
        50,
        9,
    ),
    (
        "uint8_t x;",
        "struct s { uint8_t a; }; uint8_t b;",
        "a type with no field name",
        50,
        9,
    ),
    ("uint8_t x;", "uint8_t *p;", "a pointer declarator", 50, 17),
    (
        "uint8_t x;",
        "struct struct { uint8_t a; } s;",
        "a keyword (`struct`)",
        50,
        16,
    ),
    (
        "uint8_t x;",
        "enum integer : uint8_t { A } e;",
        "a keyword (`integer`)",
        50,
        14,
    ),
    (
        "uint8_t x;",
        "variant event { uint8_t a; } v;",
        "a keyword (`event`)",
        50,
        17,
    ),
    (
        "uint8_t x;",
        "integer { size = 65; align = 8; } big;",
        "an integer of 65 bits",
        50,
        9,
    ),
    (
        "uint8_t x;",
        "enum : uint8_t { A = 3 ... 1 } e;",
        "range going down",
        50,
        26,
    ),
    (
        "uint8_t x;",
        "enum : uint8_t { A = 'a' } e;",
        "a character as",
        50,
        30,
    ),
    (
        "uint8_t x;",
        "integer { size = 8; map = clock.tapevalue; } m;",
        "a clock map other than",
        50,
        29,
    ),
    (
        "uint8_t x;",
        "typedef variant <n> { uint8_t a; } v; v y;",
        "a variant named by `typedef`",
        50,
        44,
    ),
    (
        "uint8_t x;",
        "typealias integer { size = 8; } := uint8_t event; uint8_t x;",
        "a keyword (`event`) in an alias's name",
        50,
        44,
    ),
    (
        "\nstream {",
        "\nstruct s { uint8_t a; }\nstream {",
        "a type declared with no `;`",
        30,
        23,
    ),
    (
        "uint32_t stream_id;",
        "uint32_t sid;",
        "a stream id with no `stream_id`",
        31,
        5,
    ),
    (r#""h""#, r#""\x4142""#, "a third hex digit", 20, 16),
    (r#""h""#, r#""\u0041""#, "a `\\u` or `\\U` escape", 20, 16),
    (r#""h""#, r#"L"h""#, "a wide literal", 20, 16),
];

/// Whether babeltrace2 takes `text` as a trace's metadata (a directory
/// holding it alone).
fn babeltrace2_takes(dir: &Path, text: &str) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("metadata"), text).unwrap();
    std::process::Command::new("babeltrace2")
        .arg(dir)
        .output()
        .expect("babeltrace2 runs")
        .status
        .success()
}

fn work(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("strict-{name}-{}", std::process::id()))
}

#[test]
fn the_base_is_read_by_every_parse_and_by_babeltrace2() {
    let text = BASE.to_owned();
    let parsed = tape_ctf::parse_metadata_strict(&text).unwrap();
    assert!(parsed.beyond_babeltrace2.is_empty());
    tape_ctf::validate(&parsed.trace).unwrap();
    if shared::babeltrace2("the strict parse's base trace") {
        assert!(babeltrace2_takes(&work("base"), &text));
    }
}

#[test]
fn what_the_lenient_parse_takes_beyond_babeltrace2_is_listed_and_refused_strictly() {
    let bt2 = shared::babeltrace2("the strict parse's table of refusals");
    let dir = work("table");
    for &(from, to, words, line, col) in BEYOND {
        assert_eq!(BASE.matches(from).count(), 1, "{from}");
        let text = BASE.replace(from, to);
        let lenient = tape_ctf::parse_metadata(&text)
            .unwrap_or_else(|e| panic!("{to}: the lenient parse refuses it: {e}"));
        let listed = lenient
            .beyond_babeltrace2
            .first()
            .unwrap_or_else(|| panic!("{to}: not listed as beyond babeltrace2"));
        assert!(listed.message.contains(words), "{to}: {listed}");
        let e = tape_ctf::parse_metadata_strict(&text).unwrap_err();
        assert_eq!(
            (e.line, e.col),
            (line, col),
            "{to}: the strict parse's error is at {e}"
        );
        assert!(e.message.contains("babeltrace2 2.0"), "{e}");
        if bt2 && !to.contains("\\x4142") {
            assert!(
                !babeltrace2_takes(&dir, &text),
                "{to}: babeltrace2 takes it, yet the strict parse refuses it"
            );
        }
    }
}

/// A trace tape wrote is held to babeltrace2; another tool's is read, with
/// a warning.
#[test]
fn the_reader_refuses_a_tape_trace_beyond_babeltrace2_and_warns_for_others() {
    let dir = work("reader");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = BASE.replace("uint8_t x;", "uint8_t *p;");
    std::fs::write(dir.join("metadata"), &text).unwrap();
    let e = tape_ctf::metadata::open_trace(&dir).err().expect("refused");
    let said = e.to_string();
    assert!(
        said.contains("line 50, column 17: a pointer declarator")
            && said.contains("tape wrote this metadata"),
        "{said}"
    );
    let other = text.replace(r#"tracer_name = "tape";"#, r#"tracer_name = "lttng-ust";"#);
    std::fs::write(dir.join("metadata"), &other).unwrap();
    let t = tape_ctf::metadata::open_trace(&dir).expect("read");
    assert!(
        t.warnings
            .iter()
            .any(|w| w.to_string().contains("a pointer declarator")),
        "{:?}",
        t.warnings
    );
}

/// TSDL's tokens, roughly (enough to mutate by token): strings, comments,
/// words, numbers, the longer punctuators, any other character; spaces are
/// tokens too (kept, never picked).
fn tokens(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        i += 1;
        if c == b'"' {
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if text[start..].starts_with("/*") {
            i = text[start + 2..]
                .find("*/")
                .map_or(b.len(), |e| start + 4 + e);
        } else if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
        } else if c == b'_' || c.is_ascii_alphanumeric() {
            while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
        } else if text[start..].starts_with(":=") || text[start..].starts_with("->") {
            i += 1;
        } else if text[start..].starts_with("...") {
            i += 2;
        } else {
            while !text.is_char_boundary(i) {
                i += 1;
            }
        }
        out.push(text[start..i].to_owned());
    }
    out
}

/// What a mutation may insert: TSDL's punctuation, keywords, literals of
/// every form (the ones babeltrace2 reads otherwise included).
const INSERTS: &[&str] = &[
    ";",
    "}",
    "{",
    "/* c */",
    ",",
    ":=",
    "\"\\x41\"",
    "\"\\x4142\"",
    "\"\\u0041\"",
    "x",
    "_x",
    "integer",
    "string",
    ".",
    "->",
    "-1",
    "0x10",
    "[",
    "]",
    "<",
    ">",
    "=",
    "enum",
    "struct",
    "variant",
    "typealias",
    "typedef",
    "event",
    "1",
    "...",
    "'a'",
    "L\"a\"",
    "+3",
    "07",
    "1u",
    "const",
    "signed",
    "int",
    "long",
    "float",
    "*",
    "<x>",
    ":",
    "align(8)",
    "clock",
    "trace",
    "65",
    "0",
];

/// One mutation of `toks` (drop, repeat, insert or swap a token).
fn mutated(toks: &[String], rng: &mut Rng) -> String {
    let mut t = toks.to_vec();
    let mut k = rng.below(t.len());
    while t[k].trim().is_empty() {
        k = rng.below(t.len());
    }
    match rng.below(5) {
        0 => t[k].clear(),
        1 => t[k] = format!("{0} {0}", t[k]),
        2 | 3 => t[k] = format!("{} {} ", t[k], INSERTS[rng.below(INSERTS.len())]),
        _ => {
            if let Some(j) = (k + 1..t.len()).find(|&j| !t[j].trim().is_empty()) {
                t.swap(k, j);
            }
        }
    }
    t.concat()
}

/// Metadata texts to mutate: the base trace, and the real traces'.
fn corpus() -> Vec<(String, String)> {
    let mut v = vec![("tape's shape".to_owned(), BASE.to_owned())];
    let Some(root) = shared::suite("") else {
        return v;
    };
    let mut dirs = vec![
        root.join("samples/dpdk/overwrite/ctf"),
        root.join("samples/lttng/discard/trace/ust/uid/0/64-bit"),
    ];
    if let Ok(rd) = std::fs::read_dir(root.join("ctf-testsuite/tests/1.8/regression/stream/pass")) {
        let mut pass: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        pass.sort();
        dirs.extend(pass.into_iter().take(4));
    }
    for d in dirs {
        let Ok(bytes) = std::fs::read(d.join("metadata")) else {
            continue;
        };
        if let Ok((text, _)) = tape_ctf::metadata::metadata_text(&bytes) {
            v.push((d.display().to_string(), text));
        }
    }
    v
}

/// Whether tape takes `text` as a plain-text metadata file of a trace it
/// wrote: its signature, the strict parse, the model's validation.
fn strict_takes(text: &str) -> bool {
    tape_ctf::metadata::plain_text_signature(text).is_none()
        && tape_ctf::parse_metadata_strict(text).is_ok_and(|p| tape_ctf::validate(&p.trace).is_ok())
}

#[test]
fn what_the_strict_parse_takes_babeltrace2_takes_on_mutated_metadata() {
    if !shared::babeltrace2("the strict parse against babeltrace2 on mutated metadata") {
        return;
    }
    let dir = work("mutations");
    let rounds: usize = std::env::var("TAPE_STRICT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let seed = std::env::var("TAPE_STRICT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5bd1_e995_0bad_cafe);
    let mut rng = Rng(seed);
    let (mut taken, mut refused) = (0, 0);
    let mut wrong = Vec::new();
    for (name, text) in corpus() {
        // The unmutated text: both take it (or it is not a base).
        if !strict_takes(&text) || !babeltrace2_takes(&dir, &text) {
            panic!("{name}: not read alike unmutated");
        }
        let toks = tokens(&text);
        assert_eq!(toks.concat(), text);
        for _ in 0..rounds {
            let m = mutated(&toks, &mut rng);
            let ok = strict_takes(&m);
            if !ok {
                refused += 1;
                continue;
            }
            taken += 1;
            if !babeltrace2_takes(&dir, &m) {
                wrong.push((name.clone(), m));
            }
        }
    }
    eprintln!(
        "strict parse: {taken} mutations taken (each by babeltrace2 too?), {refused} refused"
    );
    if let Some((name, m)) = wrong.first() {
        panic!(
            "{} mutation(s) the strict parse takes and babeltrace2 refuses; the first, of \
             {name}:\n{m}",
            wrong.len()
        );
    }
    assert!(
        taken > 100,
        "only {taken} mutations taken: the test tests little"
    );
}
