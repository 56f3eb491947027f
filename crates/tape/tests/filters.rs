//! Filter expressions against events of every field type: the shared
//! table (`support/filter_table.rs`) of expressions and the rows each
//! selects, evaluated on the bytes the events were encoded to (as an
//! untyped probe sees them) and at read time on a saved trace of the same
//! rows (`Filter::for_reader`, what `tape show --filter` runs); invalid
//! expressions with the message and the caret column each gets; a filter
//! set on tracepoints records only what matches.

use std::sync::{Arc, Mutex};

use tape::filter::{Capture, Commons, Context, Filter};

use tape_test_support::filter_table::{emit_rows, every, INVALID, SELECTS};

/// The two rows, encoded: what a probe saw.
fn rows() -> Vec<Vec<u8>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let p = tape::probe::attach("test.filter.every", move |e| {
        s.lock().unwrap().push(e.payload().to_vec())
    })
    .unwrap();
    emit_rows();
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

/// The same table at read time: the rows recorded by a thread named
/// `filt-read`, saved, decoded, and tested by `Filter::for_reader` through
/// a `Capture` (what `tape show --filter` does): the same selection; and
/// the same errors for the invalid expressions.
#[test]
fn a_reader_selects_the_same_rows_from_a_trace() {
    tape::enable("test.filter.every").unwrap();
    // The emitting thread stays alive until the save: an exited thread's
    // ring is freed once some save (another test's) has written it.
    let (emitted_tx, emitted) = std::sync::mpsc::channel::<()>();
    let (saved, saved_rx) = std::sync::mpsc::channel::<()>();
    let emitter = std::thread::Builder::new()
        .name("filt-read".into())
        .spawn(move || {
            emit_rows();
            emitted_tx.send(()).unwrap();
            let _ = saved_rx.recv();
        })
        .unwrap();
    emitted.recv().unwrap();
    let dir = std::env::temp_dir().join(format!("tape-filters-read-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    tape::save_to(&dir).expect("save");
    saved.send(()).unwrap();
    emitter.join().unwrap();
    let trace = tape_ctf::metadata::open_trace(&dir).expect("open");
    let class = trace
        .trace
        .events
        .iter()
        .find(|c| c.name == "test.filter.every")
        .unwrap()
        .clone();
    let fields = class.fields.clone().unwrap();
    // The Duration fields, as the trace's hints name them.
    let formats = tape_ctf::metadata::Formats::new(&trace.trace);
    let hints = &formats.get(class.id).expect("hints").hints;
    let durations = tape::filter::duration_paths(
        hints
            .iter()
            .filter(|(_, h)| **h == tape_ctf::metadata::Hint::Duration)
            .map(|(p, _)| (p.as_str(), "duration")),
    );
    assert_eq!(durations, ["took"]);
    let mut compiled: Vec<(Filter, Capture, Vec<bool>)> = SELECTS
        .iter()
        .map(|(expr, ..)| {
            let f = Filter::for_reader_with(
                "test.filter.every",
                &fields,
                &durations,
                Commons::ALL,
                expr,
            )
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
            let c = Capture::new(&f);
            (f, c, Vec::new())
        })
        .collect();
    let mut merge = tape_ctf::merge::StreamMerge::filtered(&[trace], |p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("filt-read"))
    })
    .unwrap();
    merge.keep_packet_values();
    while let Some(step) = merge.next() {
        let tape_ctf::merge::Step::Event(s, _) = step.unwrap() else {
            continue;
        };
        if s.class().is_some_and(|c| c.name == "test.filter.every") {
            for (f, cap, got) in &mut compiled {
                cap.clear();
                cap.set_packet(s.packet_value.as_ref());
                s.inspect(cap).unwrap();
                got.push(f.matches_captured(cap));
            }
        }
        s.emit(&mut tape_ctf::decode::Discard).unwrap();
    }
    for ((expr, a, b), (_, _, got)) in SELECTS.iter().zip(&compiled) {
        assert_eq!(got.as_slice(), [*a, *b], "{expr}");
    }
    for &(expr, ..) in INVALID {
        let live = Filter::new(&every::TRACEPOINT, expr).unwrap_err();
        let read =
            Filter::for_reader_with("test.filter.every", &fields, &durations, Commons::ALL, expr)
                .unwrap_err();
        assert_eq!(live.message(), read.message(), "{expr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

tape::tracepoint! {
    pub fn rx(port: u16, len: u32, ifname: &str) = "test.filter.net.rx";
    pub fn tx(port: u16, len: u32, ifname: &str) = "test.filter.net.tx";
}

/// The recorded events of a trace saved now, by name.
fn recorded() -> Vec<(String, tape_ctf::Value)> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tape-filters-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    tape::save_to(&dir).expect("save");
    let trace = tape_ctf::metadata::open_trace(&dir).expect("open");
    let mut out = Vec::new();
    for r in tape_ctf::merge::events(&[trace]).expect("plan") {
        if let tape_ctf::merge::Record::Event(e) = r.expect("decode") {
            out.push((e.class.name.clone(), e.payload().clone()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn named<'a>(all: &'a [(String, tape_ctf::Value)], name: &str) -> Vec<&'a tape_ctf::Value> {
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
    // The threads stay alive until the save: an exited thread's ring is
    // freed once some save (another test's) has written it.
    let emitted = Arc::new(std::sync::Barrier::new(5));
    let saved = Arc::new(std::sync::Barrier::new(5));
    let threads: Vec<_> = (0..4u16)
        .map(|t| {
            let (emitted, saved) = (emitted.clone(), saved.clone());
            std::thread::spawn(move || {
                for i in 0..1000u32 {
                    let len = if i % 10 == 0 { 1500 } else { 60 };
                    rx(t, len, if i % 20 == 0 { "lo" } else { "eth0" });
                    tx(t, len, "eth1");
                }
                emitted.wait();
                saved.wait();
            })
        })
        .collect();
    emitted.wait();
    let all = recorded();
    saved.wait();
    threads.into_iter().for_each(|t| t.join().unwrap());
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
    let again = recorded();
    assert!(named(&again, "test.filter.net.rx")
        .iter()
        .any(|v| v.field("port").and_then(|p| p.as_u64()) == Some(9)));
    tape::disable_pattern("test.filter.net.*").unwrap();
}

/// Integer comparisons against constants at the edges of every size and
/// signedness, each operator: the filter's fast form (and its general
/// path, for a constant out of the 64-bit range) against the arithmetic
/// done here on i128; and the same through `&&` / `||` / `!` programs.
#[test]
fn integer_comparisons_at_the_edges() {
    use tape_ctf::{Field, Integer, Struct, Type};
    let kinds: [(u32, bool); 8] = [
        (8, false),
        (8, true),
        (16, false),
        (16, true),
        (32, false),
        (32, true),
        (64, false),
        (64, true),
    ];
    let ops = ["==", "!=", "<", "<=", ">", ">=", "&"];
    for (bits, signed) in kinds {
        let int = if signed {
            Integer::signed(bits)
        } else {
            Integer::unsigned(bits)
        };
        // The field after a u8, so it is not at offset 0.
        let st = Struct::new(vec![
            Field::new("pad", Type::Integer(Integer::unsigned(8))),
            Field::new("x", Type::Integer(int)),
        ]);
        let (min, max): (i128, i128) = if signed {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        let values = [min, min + 1, -1, 0, 1, 2, 100, max - 1, max];
        let consts = [
            min - 1,
            min,
            min + 1,
            -1,
            0,
            1,
            2,
            max - 1,
            max,
            max + 1,
            i128::from(u64::MAX),
        ];
        for v in values.into_iter().filter(|v| (min..=max).contains(v)) {
            let mut payload = vec![7u8];
            let bytes = (v as u64).to_le_bytes();
            payload.extend_from_slice(&bytes[..(bits / 8) as usize]);
            for k in consts {
                for op in ops {
                    if op == "&" && k < 0 {
                        continue;
                    }
                    let expr = format!("x {op} {k}");
                    let f = Filter::for_fields("t", &st, &expr)
                        .unwrap_or_else(|e| panic!("{expr}: {e}"));
                    // A constant outside the type is a warning (the
                    // comparison is the same for every event), with its
                    // position; `&` tests bits and is never warned.
                    let outside = !(min..=max).contains(&k) && op != "&";
                    assert_eq!(
                        !f.warnings().is_empty(),
                        outside,
                        "{expr} on {bits} bits, signed {signed}: {:?}",
                        f.warnings()
                    );
                    if outside {
                        assert!(
                            f.warnings()[0].contains("is outside `x`'s type")
                                && f.warnings()[0].contains('^'),
                            "{:?}",
                            f.warnings()
                        );
                    }
                    let want = match op {
                        "==" => v == k,
                        "!=" => v != k,
                        "<" => v < k,
                        "<=" => v <= k,
                        ">" => v > k,
                        ">=" => v >= k,
                        _ => {
                            let mask = (1u128 << bits) - 1;
                            ((v as u128) & mask) & (k as u128) != 0
                        }
                    };
                    let signed_s = if signed { "i" } else { "u" };
                    assert_eq!(
                        f.matches(&payload, &CTX),
                        want,
                        "{signed_s}{bits} {v} {expr}"
                    );
                    let not = Filter::for_fields("t", &st, &format!("!({expr})")).unwrap();
                    assert_eq!(not.matches(&payload, &CTX), !want, "!({expr}) on {v}");
                    let and =
                        Filter::for_fields("t", &st, &format!("pad == 7 && {expr} && pad < 8"))
                            .unwrap();
                    assert_eq!(and.matches(&payload, &CTX), want, "&& {expr} on {v}");
                    let or = Filter::for_fields("t", &st, &format!("pad == 9 || {expr}")).unwrap();
                    assert_eq!(or.matches(&payload, &CTX), want, "|| {expr} on {v}");
                    // Cut before the field's end: false, never a panic.
                    assert!(
                        !f.matches(&payload[..payload.len() - 1], &CTX),
                        "{expr} cut"
                    );
                }
            }
        }
    }
}

/// Long chains of `||` and `&&` are lists, not nesting: 4096 comparisons
/// (the most) compile and run; one more is refused with its position.
#[test]
fn long_chains_compile_and_run() {
    use tape_ctf::{Field, Integer, Struct, Type};
    let st = Struct::new(vec![Field::new("x", Type::Integer(Integer::unsigned(32)))]);
    let payload = 4095u32.to_ne_bytes();
    let any: Vec<String> = (0..4096).map(|i| format!("x == {i}")).collect();
    let f = Filter::for_fields("t", &st, &any.join(" || ")).unwrap();
    assert!(f.matches(&payload, &CTX));
    assert!(!f.matches(&5000u32.to_ne_bytes(), &CTX));
    let all: Vec<String> = (0..4096).map(|i| format!("x >= {i}")).collect();
    let f = Filter::for_fields("t", &st, &all.join(" && ")).unwrap();
    assert!(f.matches(&payload, &CTX));
    assert!(!f.matches(&7u32.to_ne_bytes(), &CTX));
    let mixed = format!("({}) && !({})", any.join(" || "), all[..100].join(" && "));
    assert!(
        Filter::for_fields("t", &st, &mixed).is_err(),
        "8192 comparisons"
    );
    let mixed = format!(
        "({}) && !({})",
        any[..2000].join(" || "),
        all[..2000].join(" && ")
    );
    let f = Filter::for_fields("t", &st, &mixed).unwrap();
    // 5 is among the first 2000 and below 1999: both sides hold.
    assert!(f.matches(&5u32.to_ne_bytes(), &CTX));
    assert!(!f.matches(&2500u32.to_ne_bytes(), &CTX));
    let e = Filter::for_fields("t", &st, &format!("{} || x == 1", any.join(" || "))).unwrap_err();
    assert!(
        e.message().contains("too many comparisons: at most 4096"),
        "{e}"
    );
}

tape::tracepoint! {
    pub fn big_rx(n: u32, data: &[u8]) = "test.filter.big";
}

/// Events bigger than the stack test's buffer (256 bytes) are encoded in
/// the ring and tested there; small ones on the stack: both record the
/// same selection and count the same rejections.
#[test]
fn big_and_small_events_are_filtered_alike() {
    tape::enable("test.filter.big").unwrap();
    tape::filter::set("test.filter.big", "n & 1").unwrap();
    let before = tape::filter::rejected(&big_rx::TRACEPOINT);
    // On this thread: its ring lives until the save below (an exited
    // thread's ring is freed once some save, another test's, wrote it).
    let big = [9u8; 400];
    for n in 0..100u32 {
        // Alternately 400 and 10 bytes of data.
        let data = if n % 4 < 2 { &big[..] } else { &big[..10] };
        big_rx(n, data);
    }
    assert_eq!(tape::filter::rejected(&big_rx::TRACEPOINT) - before, 50);
    let all = recorded();
    let kept: Vec<u64> = named(&all, "test.filter.big")
        .iter()
        .filter_map(|v| v.field("n").and_then(|n| n.as_u64()))
        .collect();
    assert_eq!(kept, (0..100).filter(|n| n % 2 == 1).collect::<Vec<u64>>());
    tape::filter::clear("test.filter.big").unwrap();
    tape::disable("test.filter.big").unwrap();
}
