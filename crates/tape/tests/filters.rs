//! Filter expressions against events of every field type: a table of
//! expressions and the rows each selects, evaluated on the bytes the
//! events were encoded to (as an untyped probe sees them), and a table of
//! invalid expressions with the message and the caret column each gets.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use tape::filter::{Context, Filter};

#[derive(tape::Enum, Clone, Copy, Debug)]
#[repr(u8)]
enum Dir {
    In = 1,
    Out = 2,
}

#[derive(tape::Fields)]
struct Hdr<'a> {
    len: u16,
    dir: Dir,
    name: &'a str,
}

tape::tracepoint! {
    pub fn every(
        a: u8, b: i16, c: u32, d: i64, e: f32, f: f64, g: bool, h: char, s: &str, q: &[u16],
        comm: [u8; 8], op: Dir, hdr: &Hdr<'_>, opt: Option<u32>, ip: Ipv4Addr
    ) = "test.filter.every";
}

/// The two rows, encoded: what a probe saw.
fn rows() -> Vec<Vec<u8>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let p = tape::probe::attach("test.filter.every", move |e| {
        s.lock().unwrap().push(e.payload().to_vec())
    })
    .unwrap();
    let comm = |t: &str| {
        let mut c = [0u8; 8];
        c[..t.len()].copy_from_slice(t.as_bytes());
        c
    };
    every(
        1,
        -5,
        1500,
        -1,
        2.5,
        1e10,
        true,
        'é',
        "eth0",
        &[1, 2, 3],
        comm("bash"),
        Dir::In,
        &Hdr {
            len: 60,
            dir: Dir::In,
            name: "x",
        },
        Some(7),
        Ipv4Addr::new(10, 0, 0, 1),
    );
    every(
        255,
        300,
        60,
        i64::MIN,
        -1.0,
        0.0,
        false,
        'a',
        "lo",
        &[],
        comm("worker-1"),
        Dir::Out,
        &Hdr {
            len: 1500,
            dir: Dir::Out,
            name: "eth1",
        },
        None,
        Ipv4Addr::new(192, 168, 1, 1),
    );
    assert!(p.detach() == 1);
    let rows = seen.lock().unwrap().clone();
    assert_eq!(rows.len(), 2);
    rows
}

const CTX: Context<'static> = Context {
    tid: 42,
    thread: "filt",
    cpu: 1,
};

/// (expression, selects row A, selects row B)
const SELECTS: &[(&str, bool, bool)] = &[
    ("a == 1", true, false),
    ("a > 100", false, true),
    ("a != 1", false, true),
    ("b < 0", true, false),
    ("b >= 300", false, true),
    ("c > 1400", true, false),
    ("c <= 60", false, true),
    ("c & 0x400", true, false),
    ("c & 0x1", false, false),
    ("d == -1", true, false),
    ("d < 0", true, true),
    ("d == -9223372036854775808", false, true),
    ("e > 0", true, false),
    ("e == 2.5", true, false),
    ("e < -0.5", false, true),
    ("f >= 1e10", true, false),
    ("g == true", true, false),
    ("g == 0", false, true),
    ("!(g == true)", false, true),
    ("h == \"é\"", true, false),
    ("h == a", false, true),
    ("s == \"eth0\"", true, false),
    ("s != lo", true, false),
    ("s ~ \"e*\"", true, false),
    ("s ~ \"*o*\"", false, true),
    ("s ~ \"eth[0-3]\"", true, false),
    ("q[0] == 1", true, false),
    ("q[2] == 3", true, false),
    ("q[3] == 0", false, false),
    ("!(q[0] == 1)", false, true),
    ("comm == bash", true, false),
    ("comm ~ \"worker-*\"", false, true),
    ("op == In", true, false),
    ("op == 2", false, true),
    ("op != Out", true, false),
    ("hdr.len >= 512", false, true),
    ("hdr.dir == Out", false, true),
    ("hdr.name == eth1", false, true),
    ("hdr.name ~ \"?\"", true, false),
    ("opt == 7", true, false),
    ("opt > 0", true, false),
    ("!(opt == 7)", false, true),
    ("ip[0] == 192", false, true),
    ("ip[3] == 1", true, true),
    ("_q_len == 3", true, false),
    ("_opt_tag == none", false, true),
    ("common_tid == 42", true, true),
    ("common_thread ~ \"fil*\"", true, true),
    ("common_cpu > 5", false, false),
    ("c > 1400 && s == \"eth0\" || op == Out", true, true),
    ("(a == 1 || a == 255) && !(b < 0)", false, true),
    ("a == 1 && (s == lo || hdr.len == 60)", true, false),
    ("!(!(a == 1))", true, false),
];

#[test]
fn expressions_select_the_rows_they_should() {
    let rows = rows();
    for &(expr, want_a, want_b) in SELECTS {
        let f = Filter::new(&every::TRACEPOINT, expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(
            (f.matches(&rows[0], &CTX), f.matches(&rows[1], &CTX)),
            (want_a, want_b),
            "{expr}"
        );
        // Cut short anywhere, an event never makes a filter panic, and a
        // field past the cut compares false.
        for cut in 0..rows[0].len() {
            let _ = f.matches(&rows[0][..cut], &CTX);
        }
    }
}

/// (expression, part of the message, caret column)
const INVALID: &[(&str, &str, usize)] = &[
    ("lenn > 3", "no field `lenn` (fields: a, b, c, d, e, f, g, h, s, _q_len, q, comm, op, hdr, _opt_tag, opt, ip, common_tid, common_thread, common_cpu)", 0),
    ("s > 3", "`s` is a string: it compares with ==, != or ~, not >", 2),
    ("c ~ \"x\"", "`c` is a number: `~` is for strings", 2),
    ("op == Sideways", "`op` has no label `Sideways` (labels: In, Out)", 6),
    ("hdr == 1", "`hdr` is a struct: compare one of its members", 0),
    ("q == 1", "`q` is an array: compare one of its elements", 0),
    ("hdr.nope == 1", "`hdr.nope`: no member `nope` (members: len, dir, name)", 0),
    ("a.b == 1", "`a.b`: `b` follows a field that is not a struct", 0),
    ("c[1] == 1", "`c[1]`: `[1]` follows a field that is not an array", 0),
    ("e & 1", "`e` is a float: `&` is for integers", 2),
    ("c == 2.5", "`c` is an integer: compare it with an integer", 5),
    ("s == 3", "`s` is a string: compare it with a string", 5),
    ("c == abc", "`c` is a number: compare it with a number, not `abc`", 5),
    ("a == ", "expected a value", 5),
    ("a == 1 &&", "expected a field name", 9),
    ("é == 1", "expected a field name", 0),
    ("a == 1 # x", "expected `&&`, `||` or the end of the filter", 7),
];

#[test]
fn invalid_expressions_name_the_event_the_field_and_the_column() {
    for &(expr, why, col) in INVALID {
        let e = Filter::new(&every::TRACEPOINT, expr).unwrap_err();
        assert_eq!(e.kind(), tape::ErrorKind::BadFilter, "{expr}");
        let m = e.message();
        let mut lines = m.lines();
        let first = lines.next().unwrap();
        assert!(first.starts_with("filter for test.filter.every: "), "{m}");
        assert!(first.contains(why), "{expr}: {m}");
        assert_eq!(lines.next(), Some(format!("  {expr}").as_str()), "{m}");
        assert_eq!(
            lines.next(),
            Some(format!("  {}^", " ".repeat(col)).as_str()),
            "{expr}: {m}"
        );
    }
}

tape::tracepoint! {
    pub fn rx(port: u16, len: u32, ifname: &str) = "test.filter.net.rx";
    pub fn tx(port: u16, len: u32, ifname: &str) = "test.filter.net.tx";
}

/// The recorded events of a trace saved now, by name.
fn recorded() -> Vec<(String, tape_ctf::decode::Value)> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tape-filters-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    tape::save_to(&dir).expect("save");
    let trace = tape_ctf::read::open_trace(&dir).expect("open");
    let mut out = Vec::new();
    for r in tape_ctf::fast::events(&[trace]).expect("plan") {
        if let tape_ctf::fast::Record::Event(e) = r.expect("decode") {
            out.push((e.class.name.clone(), e.payload().clone()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn named<'a>(
    all: &'a [(String, tape_ctf::decode::Value)],
    name: &str,
) -> Vec<&'a tape_ctf::decode::Value> {
    all.iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn a_filter_records_only_the_matching_events_and_counts_the_others() {
    tape::enable_pattern("test.filter.net.*").unwrap();
    // Checked against every selected event before any is set.
    let e = tape::filter::set("test.filter.net.*", "len > 1400 && nope == 1").unwrap_err();
    assert!(
        e.message()
            .contains("filter for test.filter.net.rx: no field `nope`"),
        "{e}"
    );
    assert!(tape::filter::get(&rx::TRACEPOINT).is_none());
    assert_eq!(
        tape::filter::set("test.filter.net.*", "len > 1400 && ifname ~ \"eth*\"").unwrap(),
        2
    );
    assert!(rx::enabled());
    let threads: Vec<_> = (0..4u16)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..1000u32 {
                    let len = if i % 10 == 0 { 1500 } else { 60 };
                    rx(t, len, if i % 20 == 0 { "lo" } else { "eth0" });
                    tx(t, len, "eth1");
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let all = recorded();
    let rec = named(&all, "test.filter.net.rx");
    // i % 10 == 0 and not i % 20 == 0: 50 per thread.
    assert_eq!(rec.len(), 4 * 50);
    assert!(rec
        .iter()
        .all(|v| v.field("len").and_then(|l| l.as_u64()) == Some(1500)));
    assert_eq!(named(&all, "test.filter.net.tx").len(), 4 * 100);
    assert_eq!(tape::filter::rejected(&rx::TRACEPOINT), 4 * 950);
    assert_eq!(tape::filter::rejected(&tx::TRACEPOINT), 4 * 900);
    assert_eq!(
        tape::stats().drops.total(),
        0,
        "rejected events are not losses"
    );
    // Cleared: everything again.
    assert_eq!(tape::filter::clear("test.filter.net.*").unwrap(), 2);
    assert!(tape::filter::get(&rx::TRACEPOINT).is_none());
    rx(9, 60, "lo");
    assert_eq!(named(&recorded(), "test.filter.net.rx").len(), 1);
    tape::disable_pattern("test.filter.net.*").unwrap();
}
