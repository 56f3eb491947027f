//! The library API on a trace built here byte by byte: typed values in
//! time order, and clear errors (file, packet offset, bit offset) for
//! truncated or inconsistent streams, never a panic.

use std::path::PathBuf;

use tape_ctf::merge::{events, Record};
use tape_ctf::metadata::find_traces;
use tape_ctf::Base;
use tape_ctf::Value;

const METADATA: &str = r#"/* CTF 1.8 */
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
trace { major = 1; minor = 8; byte_order = le;
    packet.header := struct { uint32_t magic; uint32_t stream_id; }; };
clock { name = c; freq = 1000000000; };
stream { id = 0;
    packet.context := struct { uint64_t content_size; uint64_t packet_size; };
    event.header := struct { uint16_t id; integer { size = 64; align = 8; signed = false; map = clock.c.value; } timestamp; }; };
event { name = "x.a"; id = 0; stream_id = 0;
    fields := struct { uint32_t a; string s; uint8_t n; integer { size = 16; align = 8; signed = true; base = 16; } v[n]; }; };
"#;

fn event(id: u16, ts: u64, a: u32, s: &str, v: &[i16]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&ts.to_le_bytes());
    b.extend_from_slice(&a.to_le_bytes());
    b.extend_from_slice(s.as_bytes());
    b.push(0);
    b.push(v.len() as u8);
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn packet(events: &[Vec<u8>], cut: usize) -> Vec<u8> {
    let body: Vec<u8> = events.concat();
    let size = (4 + 4 + 16 + body.len()) as u64 * 8;
    let mut p = Vec::new();
    p.extend_from_slice(&0xC1FC_1FC1u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&size.to_le_bytes());
    p.extend_from_slice(&size.to_le_bytes());
    p.extend_from_slice(&body);
    p.truncate(p.len() - cut);
    p
}

fn trace(name: &str, streams: &[(&str, Vec<u8>)]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("values-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metadata"), METADATA).unwrap();
    for (n, bytes) in streams {
        std::fs::write(dir.join(n), bytes).unwrap();
    }
    dir
}

#[test]
fn typed_values_in_time_order() {
    let s0 = packet(
        &[
            event(0, 10, 1, "one", &[-1, 2]),
            event(0, 30, 3, "three", &[]),
        ],
        0,
    );
    let s1 = packet(&[event(0, 20, 2, "", &[0x7fff])], 0);
    let dir = trace("ok", &[("s0", s0), ("s1", s1)]);
    let traces = find_traces(&dir).unwrap();
    let recs: Vec<Record> = events(&traces).unwrap().map(|r| r.unwrap()).collect();
    let got: Vec<(Option<i128>, Value)> = recs
        .into_iter()
        .map(|r| match r {
            Record::Event(e) => (e.ns, e.payload().clone()),
            Record::Lost(..) => panic!("no loss here"),
        })
        .collect();
    let payload = |a: u32, s: &str, v: &[i64]| {
        Value::Struct(vec![
            ("a".into(), Value::UInt(u64::from(a), Base::Decimal)),
            ("s".into(), Value::Str(s.into())),
            ("n".into(), Value::UInt(v.len() as u64, Base::Decimal)),
            (
                "v".into(),
                Value::Array(
                    v.iter()
                        .map(|x| Value::SInt(*x, Base::Hexadecimal))
                        .collect(),
                ),
            ),
        ])
    };
    assert_eq!(
        got,
        vec![
            (Some(10), payload(1, "one", &[-1, 2])),
            (Some(20), payload(2, "", &[0x7fff])),
            (Some(30), payload(3, "three", &[])),
        ]
    );
}

#[test]
fn broken_streams_are_errors_with_positions() {
    let good = [event(0, 10, 1, "one", &[5])];
    // (name, stream bytes, text the error must hold)
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", packet(&good, 3), "past the end of the file"),
        (
            "bad-id",
            packet(&[event(7, 10, 1, "x", &[])], 0),
            "unknown event id 7",
        ),
        (
            "magic",
            {
                let mut p = packet(&good, 0);
                p[0] = 0;
                p
            },
            "bad packet magic",
        ),
        (
            "no-nul",
            {
                let mut e = event(0, 10, 1, "abc", &[]);
                e.truncate(e.len() - 2); // drop the string's NUL and the length
                packet(&[e], 0)
            },
            "no NUL",
        ),
        (
            "sizes",
            {
                let mut p = packet(&good, 0);
                p[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes()); // content > packet
                p
            },
            "larger than packet_size",
        ),
    ];
    for (name, bytes, want) in cases {
        let dir = trace(name, &[("s", bytes)]);
        let traces = find_traces(&dir).unwrap();
        let err = events(&traces)
            .unwrap()
            .find_map(|r| r.err())
            .unwrap_or_else(|| panic!("{name}: no error"));
        let msg = err.to_string();
        assert!(msg.contains(want), "{name}: {msg}");
        assert!(msg.contains("packet at byte 0, bit"), "{name}: {msg}");
        assert!(err.file.ends_with("s"), "{name}: {msg}");
    }
}
