//! Every field type, with edge values, through the ring, the CTF writer and
//! the real readers: babeltrace2 and babeltrace 1.5 must exit 0, warn about
//! nothing and print exactly the values emitted.
//!
//! Floating point numbers are printed by both readers with C's `%g` (six
//! significant digits), so the expected text is `%g` of the emitted value;
//! the bit-exact encoding is checked by the unit tests of `field.rs`.
//!
//! babeltrace2 2.0.4 is known to print an empty string as an earlier
//! event's string in some traces; the rows with empty strings are compared
//! against babeltrace 1.5 as well, and babeltrace2 must agree with it here
//! (it does for the traces tape writes: one string field per event, not
//! inside a packet context).

mod common;

use common::{events, read_clean, Reader};

tape::tracepoint! {
    /// One field of every type of this issue.
    pub fn all_types(
        a: u8, b: u16, c: u32, d: u64, e: i8, f: i16, g: i32, h: i64, i: usize, j: isize,
        k: f32, l: f64, m: bool, n: char, o: *const u8, p: &str, q: &[u8]
    ) = "test.types.all";
    /// Strings alone, to check them one after the other.
    pub fn one_string(s: &str) = "test.types.string";
}

/// One row of the table: the values of `all_types`.
struct Row {
    a: u8,
    b: u16,
    c: u32,
    d: u64,
    e: i8,
    f: i16,
    g: i32,
    h: i64,
    i: usize,
    j: isize,
    k: f32,
    l: f64,
    m: bool,
    n: char,
    o: usize,
    p: String,
    q: Vec<u8>,
}

fn rows() -> Vec<Row> {
    let long: String = "long string ünïcödé 路径 🦀 ".repeat(300);
    vec![
        Row {
            a: u8::MAX,
            b: u16::MAX,
            c: u32::MAX,
            d: u64::MAX,
            e: i8::MIN,
            f: i16::MIN,
            g: i32::MIN,
            h: i64::MIN,
            i: usize::MAX,
            j: isize::MIN,
            k: f32::MIN_POSITIVE,
            l: f64::MAX,
            m: true,
            n: 'é',
            o: 0,
            p: "quote\" backslash\\ tab\t newline\n end".into(),
            q: vec![0, 255],
        },
        Row {
            a: 0,
            b: 0,
            c: 0,
            d: 0,
            e: i8::MAX,
            f: i16::MAX,
            g: i32::MAX,
            h: i64::MAX,
            i: 0,
            j: isize::MAX,
            k: f32::NAN,
            l: f64::NEG_INFINITY,
            m: false,
            n: '\0',
            o: 0x1234,
            p: String::new(),
            q: vec![],
        },
        Row {
            a: 1,
            b: 2,
            c: 3,
            d: 4,
            e: -1,
            f: -1,
            g: -1,
            h: -1,
            i: 5,
            j: -5,
            k: f32::INFINITY,
            l: f64::NAN,
            m: true,
            n: char::MAX,
            o: usize::MAX,
            p: long,
            q: (0..=255).collect(),
        },
        Row {
            a: 7,
            b: 300,
            c: 70_000,
            d: 1 << 40,
            e: 0,
            f: 0,
            g: 0,
            h: 0,
            i: 1,
            j: 0,
            k: -0.0,
            l: 1e-300,
            m: false,
            n: '𝄞',
            o: 0xdead_beef,
            p: "interior\0NUL is the end".into(),
            q: vec![42],
        },
        Row {
            a: 9,
            b: 9,
            c: 9,
            d: 9,
            e: 9,
            f: 9,
            g: 9,
            h: 9,
            i: 9,
            j: 9,
            k: 1.0 / 3.0,
            l: 5e-324,
            m: true,
            n: 'A',
            o: 1,
            p: "ünïcödé 路径 🦀".into(),
            q: vec![1, 2, 3],
        },
    ]
}

/// C's `%g`, as both readers print floating point numbers.
fn g(v: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: buf is 64 writable bytes; the format takes one double.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%g".as_ptr(), v) };
    String::from_utf8(buf[..n as usize].to_vec()).unwrap()
}

/// A string as the reader prints it: babeltrace2 escapes, babeltrace 1.5
/// prints it raw. Both stop at the first NUL (where tape stops recording).
fn string(reader: Reader, s: &str) -> String {
    let s = s.split('\0').next().unwrap();
    match reader {
        Reader::Bt1 => format!("\"{s}\""),
        Reader::Bt2 | Reader::Tape => {
            let mut o = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => o.push_str("\\\""),
                    '\\' => o.push_str("\\\\"),
                    '\n' => o.push_str("\\n"),
                    '\t' => o.push_str("\\t"),
                    c => o.push(c),
                }
            }
            o.push('"');
            o
        }
    }
}

fn boolean(b: bool) -> String {
    format!("( \"{b}\" : container = {} )", u8::from(b))
}

fn bytes(v: &[u8]) -> String {
    if v.is_empty() {
        return "[ ]".into();
    }
    let items: Vec<String> = v
        .iter()
        .enumerate()
        .map(|(i, b)| format!("[{i}] = 0x{b:X}"))
        .collect();
    format!("[ {} ]", items.join(", "))
}

fn expected(reader: Reader, r: &Row) -> String {
    format!(
        "a = {}, b = {}, c = {}, d = {}, e = {}, f = {}, g = {}, h = {}, i = {}, j = {}, \
         k = {}, l = {}, m = {}, n = {}, o = 0x{:X}, p = {}, _q_len = {}, q = {}",
        r.a,
        r.b,
        r.c,
        r.d,
        r.e,
        r.f,
        r.g,
        r.h,
        r.i,
        r.j,
        g(f64::from(r.k)),
        g(r.l),
        boolean(r.m),
        string(reader, &r.n.to_string()),
        r.o,
        string(reader, &r.p),
        r.q.len(),
        bytes(&r.q)
    )
}

#[test]
fn every_field_type_reads_back_in_both_readers() {
    let _g = tape::Config::new()
        .enable("test.types.*")
        .init()
        .expect("init");
    let rows = rows();
    for r in &rows {
        all_types(
            r.a,
            r.b,
            r.c,
            r.d,
            r.e,
            r.f,
            r.g,
            r.h,
            r.i,
            r.j,
            r.k,
            r.l,
            r.m,
            r.n,
            r.o as *const u8,
            &r.p,
            &r.q,
        );
    }
    let strings = ["", "x", "", "", "after empties", "ünï", ""];
    for s in strings {
        one_string(s);
    }
    let dir = common::trace_path("types");
    tape::save_to(&dir).expect("save");
    _g.disarm();

    for reader in [Reader::Bt2, Reader::Bt1, Reader::Tape] {
        let Some(text) = read_clean(reader, &dir) else {
            continue;
        };
        // Only this thread's events: other tests of this binary run beside.
        // SAFETY: gettid has no preconditions.
        let ctx = format!("tid = {},", unsafe { libc::gettid() });
        let evs: Vec<_> = events(&text)
            .into_iter()
            .filter(|e| e.context.starts_with(&ctx))
            .collect();
        let all: Vec<_> = evs.iter().filter(|e| e.name == "test.types.all").collect();
        assert_eq!(all.len(), rows.len(), "{reader:?}: events\n{text}");
        for (n, (ev, row)) in all.iter().zip(&rows).enumerate() {
            assert_eq!(ev.payload, expected(reader, row), "{reader:?}: row {n}");
            assert!(ev.context.starts_with("tid = "), "{}", ev.context);
            assert!(ev.context.contains("thread_name = \""), "{}", ev.context);
        }
        let got: Vec<_> = evs
            .iter()
            .filter(|e| e.name == "test.types.string")
            .map(|e| e.payload.clone())
            .collect();
        let want: Vec<_> = strings
            .iter()
            .map(|s| format!("s = {}", string(reader, s)))
            .collect();
        assert_eq!(got, want, "{reader:?}");
    }
}

/// Regression: packet 0 of a stream was written with `timestamp_begin = 0`
/// (its slot metadata was never set, as no switch opened it). Readers then
/// place the packet at the clock's origin. Checked on the raw stream file:
/// header (24 bytes), then timestamp_begin, timestamp_end, content_size,
/// packet_size, packet_seq_num, events_discarded (u64 each), tid (u32),
/// thread_name (NUL-terminated), then the first event: id u16, timestamp
/// u64.
#[test]
fn first_packet_begins_before_its_first_event() {
    let _g = tape::Config::new()
        .enable("test.types.string")
        .init()
        .expect("init");
    _g.disarm();
    let tid = std::thread::spawn(|| {
        one_string("first");
        one_string("second");
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    })
    .join()
    .unwrap();
    let dir = common::trace_path("packet0");
    tape::save_to(&dir).expect("save");
    let stream = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(&format!("-{tid}")))
        .expect("stream file");
    let b = std::fs::read(stream).unwrap();
    let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
    let (begin, end, seq) = (u64_at(24), u64_at(32), u64_at(56));
    let name_end = 24 + 48 + 4 + b[76..].iter().position(|&c| c == 0).unwrap();
    // After the name: the event (its id, then its timestamp).
    let first_ts = u64_at(name_end + 1 + 2);
    assert_eq!(seq, 1, "packet 0 is numbered 1");
    assert!(begin > 0, "timestamp_begin is 0");
    assert!(
        begin <= first_ts && first_ts <= end,
        "{begin} <= {first_ts} <= {end}"
    );
}
