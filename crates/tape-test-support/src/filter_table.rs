//! The filter table shared by the three places a filter runs: in the
//! process (`tape/tests/filters.rs`, on the bytes a probe sees, and set on
//! the tracepoint), through `tape ctl PID filter` on a running program
//! (`tape-cli/tests/it/filter_table.rs`, driving `examples/filter_rows.rs`),
//! and at read time (`tape show --filter` on a trace of the same rows).
//! One table, so the three select the same rows.
//!
//! Two rows of `test.filter.every`, an event with a field of every type,
//! are emitted by [`emit_rows`] on a thread named `filt...`; each
//! expression lists whether it selects row A and row B. The common fields
//! are compared so that the answer holds in any process: `common_tid > 0`,
//! `common_thread ~ "fil*"` (the emitting thread's name), `common_cpu >
//! 100000`.

use std::net::Ipv4Addr;
use std::time::Duration;

/// A direction: the event's enumeration field (`op`).
#[derive(tape::Enum, Clone, Copy, Debug)]
#[repr(u8)]
pub enum Dir {
    /// Coming in.
    In = 1,
    /// Going out.
    Out = 2,
}

/// A header: the event's structure field (`hdr`).
#[derive(tape::Fields)]
pub struct Hdr<'a> {
    /// Its length.
    pub len: u16,
    /// Its direction.
    pub dir: Dir,
    /// Its name.
    pub name: &'a str,
}

tape::tracepoint! {
    pub fn every(
        a: u8, b: i16, c: u32, d: i64, e: f32, f: f64, g: bool, h: char, s: &str, q: &[u16],
        comm: [u8; 8], op: Dir, hdr: &Hdr<'_>, opt: Option<u32>, ip: Ipv4Addr, took: Duration
    ) = "test.filter.every";
}

/// Emits row A then row B (call on a thread named `filt...`).
pub fn emit_rows() {
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
        Duration::from_nanos(6_643),
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
        Duration::from_micros(1_500),
    );
}

/// (expression, selects row A, selects row B)
pub const SELECTS: &[(&str, bool, bool)] = &[
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
    // A Duration as tape prints it (`took=6.643µs`), or in nanoseconds.
    ("took > 30us", false, true),
    ("took < 6.644µs", true, false),
    ("took == 6.643µs", true, false),
    ("took == 6643ns", true, false),
    ("took == 6643", true, false),
    ("took >= 1.5ms", false, true),
    ("took > 0.001s", false, true),
    ("common_tid > 0", true, true),
    ("common_thread ~ \"fil*\"", true, true),
    ("common_cpu > 100000", false, false),
    ("c > 1400 && s == \"eth0\" || op == Out", true, true),
    ("(a == 1 || a == 255) && !(b < 0)", false, true),
    ("a == 1 && (s == lo || hdr.len == 60)", true, false),
    ("!(!(a == 1))", true, false),
];

/// (expression, part of the message, caret column)
pub const INVALID: &[(&str, &str, usize)] = &[
    ("lenn > 3", "no field `lenn` (fields: a, b, c, d, e, f, g, h, s, _q_len, q, comm, op, hdr, _opt_tag, opt, ip, took, common_tid, common_thread, common_cpu)", 0),
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
    ("c > 30us", "`c` is not a duration field: a value with a unit (ns, us, µs, ms, s) compares with a Duration (shown as `1.5ms`); the event's: took", 4),
    ("took > 1.5ns", "\"1.5ns\": is not a whole number of nanoseconds", 7),
    ("a == ", "expected a value", 5),
    ("a == 1 &&", "expected a field name", 9),
    ("é == 1", "expected a field name", 0),
    ("a == 1 # x", "expected `&&`, `||` or the end of the filter", 7),
];
