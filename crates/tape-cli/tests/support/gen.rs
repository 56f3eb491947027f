//! A generator of random, valid CTF 1.8 traces for differential tests.
//!
//! [`generate`] draws one trace from a seed: its metadata (written here, by
//! hand, not by tape's own TSDL writer, so a bug there cannot hide one in
//! the reader), its stream files, and the value of every field of every
//! event as JSON, which is what `tape show --format json` must print. The
//! same seed gives the same trace, so any failure replays from its seed.
//!
//! What a trace can hold (see `../shared/ctf/SPEC.md`):
//!
//! ```text
//!   trace         byte order le or be; packet header absent, or magic,
//!                 uuid, stream_id, stream_instance_id in any subset
//!   clock         none or one, any frequency, offsets in s and cycles
//!   stream class  1..3; packet context absent or with timestamp_begin/end,
//!                 content_size, packet_size, events_discarded,
//!                 packet_seq_num and fields of its own; event header
//!                 absent, id only, timestamp only (64, 32 or 27 bits:
//!                 wrapping), or both; event context absent, empty or not
//!   event class   1..4 a stream class; context and payload absent,
//!                 declared empty, or random
//!   types         integers of 1..64 bits, signed or not, le or be, base
//!                 2/8/10/16, alignment 1..64 (bit-packed fields); enums
//!                 with single values, ranges, overlaps and unmapped
//!                 values; floats of 32 and 64 bits; strings (empty, ASCII,
//!                 multi-byte, invalid UTF-8, control characters, quotes);
//!                 text arrays and sequences; arrays and sequences of every
//!                 type; variants; structs (empty too), nested; names that
//!                 are keywords or start with `_`
//!   paths         sequence lengths and variant tags by relative name or
//!                 by absolute path (`event.fields.len`)
//!   streams       1..2 files a stream class, 1..3 packets each, padding
//!                 after the content
//! ```

#![allow(dead_code)] // each test uses what it needs

use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// splitmix64: small, seedable, good enough to draw traces.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5eed_7a9e_0000_0000)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Le,
    Be,
}

#[derive(Clone, Debug)]
pub struct Int {
    pub size: u32,
    pub signed: bool,
    /// `None`: the trace's byte order, not written.
    pub order: Option<Order>,
    pub base: u32,
    pub align: u64,
    pub utf8: bool,
    pub map: Option<String>,
}

#[derive(Clone, Debug)]
pub enum Ty {
    Int(Int),
    Float {
        size: u32,
        align: u64,
        order: Option<Order>,
    },
    Str {
        ascii: bool,
    },
    Enum {
        int: Int,
        entries: Vec<(String, i128, i128)>,
    },
    Struct {
        fields: Vec<(String, Ty)>,
        align: Option<u64>,
    },
    Array(Box<Ty>, u64),
    /// Element, path of the length as written, index of the length field
    /// in the enclosing struct.
    Seq(Box<Ty>, String, usize),
    /// Path of the tag as written, index of the tag field in the enclosing
    /// struct, options.
    Variant(String, usize, Vec<(String, Ty)>),
}

impl Ty {
    fn align(&self) -> u64 {
        match self {
            Ty::Int(i) | Ty::Enum { int: i, .. } => i.align,
            Ty::Float { align, .. } => *align,
            Ty::Str { .. } => 8,
            Ty::Struct { fields, align } => fields
                .iter()
                .map(|(_, t)| t.align())
                .chain(align.iter().copied())
                .max()
                .unwrap_or(1),
            Ty::Array(e, _) | Ty::Seq(e, _, _) => e.align(),
            // A variant is aligned as its selected option (done there).
            Ty::Variant(..) => 1,
        }
    }
}

/// Names a struct's fields draw from: plain ones, keywords and names with
/// a leading underscore (escaped with one more `_` in the metadata).
const NAMES: &[&str] = &[
    "a", "b", "c", "x", "y", "len", "value", "count", "flags", "name", "align", "string", "event",
    "_u", "__dd", "msg", "id2", "cpu", "prio", "v_1",
];

/// Labels of enums (any text: they are quoted).
const LABELS: &[&str] = &[
    "ZERO",
    "ONE",
    "RUNNING",
    "with space",
    "quo\"te",
    "back\\slash",
    "ünï",
    "",
    "x",
    "LAST",
];

/// The TSDL spelling of a field name (one `_` added to names that start
/// with `_` or are keywords; readers take one away).
fn escape(name: &str) -> String {
    const KEYWORDS: &[&str] = &["align", "string", "event", "enum", "struct", "integer"];
    if name.starts_with('_') || KEYWORDS.contains(&name) {
        format!("_{name}")
    } else {
        name.to_owned()
    }
}

fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// Draws types. `depth` bounds nesting.
struct TypeGen<'r> {
    rng: &'r mut Rng,
    /// Whether integers wider than 64 bits may be drawn.
    wide: bool,
    label_seq: u32,
    /// Whether a variant's tag may be an absolute path (babeltrace2's
    /// parser takes none: see the differential test).
    abs_tags: bool,
    /// Whether integers of 61 to 63 bits may be shown in hexadecimal
    /// (babeltrace2 prints them all as `0x0`: see the differential test).
    hex_61_63: bool,
    /// Whether sequences and variants may be drawn (babeltrace2 aborts on
    /// them in an event's context: see the differential test).
    dynamic: bool,
}

impl TypeGen<'_> {
    fn int(&mut self, size: u32) -> Int {
        let r = &mut *self.rng;
        let signed = r.one_in(2);
        let byte_sized = size % 8 == 0;
        // A field in the other byte order starts and ends on a byte, so no
        // byte is shared by two orders.
        let order = match r.below(4) {
            0 if byte_sized => Some(Order::Le),
            1 if byte_sized => Some(Order::Be),
            _ => None,
        };
        let align = if order.is_some() {
            *r.pick(&[8, 8, 16, 32, 64])
        } else {
            *r.pick(&[1, 1, 8, 8, 8, 16, 32, 64])
        };
        let mut base = *r.pick(&[10, 10, 10, 16, 16, 8, 2]);
        if base == 16 && (61..64).contains(&size) && !self.hex_61_63 {
            base = 10;
        }
        Int {
            size,
            signed,
            order,
            base,
            align,
            utf8: false,
            map: None,
        }
    }

    fn any_int(&mut self) -> Int {
        let size = match self.rng.below(10) {
            0..=2 => *self.rng.pick(&[8, 16, 32, 64]),
            3 if self.wide => 65 + self.rng.below(200) as u32,
            _ => 1 + self.rng.below(64) as u32,
        };
        self.int(size)
    }

    fn enumeration(&mut self, tag: bool) -> Ty {
        let size = *self.rng.pick(&[8, 8, 16, 32, 64, 5, 12]);
        let mut int = self.int(size);
        if tag {
            int.signed = false;
        }
        let (lo, hi) = range(&int);
        let n = 1 + self.rng.below(5);
        let mut entries = Vec::new();
        let mut next = if int.signed { lo.max(-20) } else { 0 };
        for i in 0..n {
            let label = if tag {
                // Options are named like the labels: identifiers, unique.
                self.label_seq += 1;
                format!("opt{}", self.label_seq)
            } else {
                self.rng.pick(LABELS).to_string()
            };
            let width = if self.rng.one_in(3) {
                self.rng.below(4) as i128
            } else {
                0
            };
            let start = if !tag && i > 0 && self.rng.one_in(5) {
                next - 1 // overlaps the last range
            } else {
                next + self.rng.below(3) as i128
            };
            let end = (start + width).min(hi);
            if start > hi {
                break;
            }
            entries.push((label, start, end));
            next = end + 1;
        }
        Ty::Enum { int, entries }
    }

    fn string_ty(&mut self) -> Ty {
        Ty::Str {
            ascii: self.rng.one_in(4),
        }
    }

    fn float(&mut self) -> Ty {
        let size = *self.rng.pick(&[32, 64]);
        Ty::Float {
            size,
            align: *self.rng.pick(&[8, 32, 64]),
            order: *self
                .rng
                .pick(&[None, None, Some(Order::Le), Some(Order::Be)]),
        }
    }

    /// A type for a field; `path` is the absolute path of the enclosing
    /// struct when one can be written (not inside arrays or variants).
    fn any(&mut self, depth: u32) -> Ty {
        let leaf = depth == 0 || self.rng.one_in(2);
        if leaf {
            return match self.rng.below(10) {
                0..=3 => Ty::Int(self.any_int()),
                4 => self.float(),
                5 | 6 => self.string_ty(),
                7 => self.enumeration(false),
                8 => self.text_array(),
                _ => Ty::Int(self.any_int()),
            };
        }
        match self.rng.below(4) {
            0 => Ty::Array(Box::new(self.any(depth - 1)), self.rng.below(4)),
            1 | 2 => self.structure(depth - 1, None),
            _ => Ty::Array(Box::new(self.any(depth - 1)), 1 + self.rng.below(3)),
        }
    }

    /// An array of UTF-8 bytes: read as text.
    fn text_array(&mut self) -> Ty {
        let mut int = self.int(8);
        int.utf8 = true;
        int.align = 8;
        int.order = None;
        Ty::Array(Box::new(Ty::Int(int)), self.rng.below(9))
    }

    /// A struct of 0..6 fields; sequences and variants get their length or
    /// tag as an earlier field of this struct, named relatively or, when
    /// `path` is known, absolutely.
    fn structure(&mut self, depth: u32, path: Option<&str>) -> Ty {
        let n = self.rng.below(7);
        let mut fields: Vec<(String, Ty)> = Vec::new();
        let mut used = Vec::new();
        let fresh = |rng: &mut Rng, used: &mut Vec<String>| loop {
            let base = rng.pick(NAMES).to_string();
            let name = if used.contains(&base) {
                format!("{base}{}", used.len())
            } else {
                base
            };
            if !used.contains(&name) {
                used.push(name.clone());
                return name;
            }
        };
        for _ in 0..n {
            let kind = if self.dynamic {
                self.rng.below(8)
            } else {
                2 + self.rng.below(6)
            };
            if kind == 0 || kind == 1 {
                // A sequence or a variant, with its length or tag first.
                let ref_name = fresh(self.rng, &mut used);
                let ref_ty = if kind == 0 {
                    let size = *self.rng.pick(&[8, 16, 32, 3]);
                    let mut int = self.int(size);
                    int.signed = false;
                    Ty::Int(int)
                } else {
                    self.enumeration(true)
                };
                let at = fields.len();
                let written = match path {
                    Some(p) if (kind == 0 || self.abs_tags) && self.rng.one_in(2) => {
                        format!("{p}.{}", escape(&ref_name))
                    }
                    _ => escape(&ref_name),
                };
                let name = fresh(self.rng, &mut used);
                let ty = if kind == 0 {
                    let element = if self.rng.one_in(3) {
                        let mut int = self.int(8);
                        int.utf8 = true;
                        int.align = 8;
                        int.order = None;
                        Ty::Int(int)
                    } else {
                        self.any(depth.saturating_sub(1))
                    };
                    Ty::Seq(Box::new(element), written, at)
                } else {
                    let Ty::Enum { entries, .. } = &ref_ty else {
                        unreachable!()
                    };
                    let labels: Vec<String> = entries.iter().map(|e| e.0.clone()).collect();
                    let options = labels
                        .into_iter()
                        .map(|l| (l, self.any(depth.saturating_sub(1))))
                        .collect();
                    Ty::Variant(written, at, options)
                };
                fields.push((ref_name, ref_ty));
                fields.push((name, ty));
            } else {
                let name = fresh(self.rng, &mut used);
                let ty = self.any(depth);
                fields.push((name, ty));
            }
        }
        let align = self.rng.one_in(8).then(|| *self.rng.pick(&[8, 16, 64]));
        Ty::Struct { fields, align }
    }
}

/// The range of values of an integer (up to 127 bits).
fn range(i: &Int) -> (i128, i128) {
    let size = i.size.min(127);
    if i.signed {
        (-(1i128 << (size - 1)), (1i128 << (size - 1)) - 1)
    } else {
        (0, i128::MAX >> (127 - size))
    }
}

// ---------------------------------------------------------------- metadata

fn order_kw(o: Order) -> &'static str {
    match o {
        Order::Le => "le",
        Order::Be => "be",
    }
}

fn write_int(out: &mut String, i: &Int) {
    let _ = write!(
        out,
        "integer {{ size = {}; align = {}; signed = {}; base = {};",
        i.size, i.align, i.signed, i.base
    );
    if let Some(o) = i.order {
        let _ = write!(out, " byte_order = {};", order_kw(o));
    }
    if i.utf8 {
        out.push_str(" encoding = UTF8;");
    }
    if let Some(c) = &i.map {
        let _ = write!(out, " map = clock.{c}.value;");
    }
    out.push_str(" }");
}

fn write_ty(out: &mut String, ty: &Ty, indent: usize) {
    match ty {
        Ty::Int(i) => write_int(out, i),
        Ty::Float { size, align, order } => {
            let (e, m) = if *size == 32 { (8, 24) } else { (11, 53) };
            let _ = write!(
                out,
                "floating_point {{ exp_dig = {e}; mant_dig = {m}; align = {align};"
            );
            if let Some(o) = order {
                let _ = write!(out, " byte_order = {};", order_kw(*o));
            }
            out.push_str(" }");
        }
        Ty::Str { ascii } => out.push_str(if *ascii {
            "string { encoding = ASCII; }"
        } else {
            "string"
        }),
        Ty::Enum { int, entries } => {
            out.push_str("enum : ");
            write_int(out, int);
            out.push_str(" { ");
            for (n, (label, a, b)) in entries.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(label));
                if a == b {
                    let _ = write!(out, " = {a}");
                } else {
                    let _ = write!(out, " = {a} ... {b}");
                }
            }
            out.push_str(" }");
        }
        Ty::Struct { fields, align } => {
            out.push_str("struct {\n");
            for (name, t) in fields {
                write_field(out, name, t, indent + 1);
            }
            out.push_str(&"    ".repeat(indent));
            out.push('}');
            if let Some(a) = align {
                let _ = write!(out, " align({a})");
            }
        }
        Ty::Variant(tag, _, options) => {
            let _ = writeln!(out, "variant <{tag}> {{");
            for (name, t) in options {
                write_field(out, name, t, indent + 1);
            }
            out.push_str(&"    ".repeat(indent));
            out.push('}');
        }
        Ty::Array(..) | Ty::Seq(..) => unreachable!("written by write_field"),
    }
}

fn write_field(out: &mut String, name: &str, ty: &Ty, indent: usize) {
    out.push_str(&"    ".repeat(indent));
    let mut suffix = String::new();
    let mut t = ty;
    loop {
        match t {
            Ty::Array(e, n) => {
                let _ = write!(suffix, "[{n}]");
                t = e;
            }
            Ty::Seq(e, len, _) => {
                let _ = write!(suffix, "[{len}]");
                t = e;
            }
            _ => break,
        }
    }
    write_ty(out, t, indent);
    let _ = writeln!(out, " {}{suffix};", escape(name));
}

// ------------------------------------------------------------- the streams

/// Bits written in CTF's order: a little-endian field fills each byte from
/// its least significant bit, a big-endian one from its most significant.
/// Alignments are counted from the start of the packet (`base`).
#[derive(Default)]
pub struct BitWriter {
    pub buf: Vec<u8>,
    pub pos: u64,
    pub base: u64,
}

impl BitWriter {
    fn align(&mut self, a: u64) {
        let a = a.max(1);
        self.pos = self.base + (self.pos - self.base).div_ceil(a) * a;
        self.fit();
    }
    fn fit(&mut self) {
        let need = self.pos.div_ceil(8) as usize;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
    }
    fn set(&mut self, at: u64, bit: bool) {
        let need = (at / 8 + 1) as usize;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let byte = &mut self.buf[(at / 8) as usize];
        let mask = 1u8 << (at % 8);
        if bit {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
    /// Writes the low `size` bits of the little-endian bytes `v` at `at`.
    fn put_at(&mut self, at: u64, v: &[u8], size: u32, order: Order) {
        let bit = |i: u32| {
            v.get((i / 8) as usize)
                .is_some_and(|b| b >> (i % 8) & 1 == 1)
        };
        for j in 0..size {
            let (src, dst) = match order {
                Order::Le => (j, at + u64::from(j)),
                Order::Be => {
                    let p = at + u64::from(j);
                    // Within a byte, big-endian fills from bit 7 down.
                    (size - 1 - j, (p & !7) + 7 - (p & 7))
                }
            };
            self.set(dst, bit(src));
        }
    }
    fn put(&mut self, v: &[u8], size: u32, order: Order) {
        self.put_at(self.pos, v, size, order);
        self.pos += u64::from(size);
        self.fit();
    }
}

/// The little-endian two's complement bytes of `v` (enough for any size
/// up to 127 bits; wider values come as bytes already).
fn le_bytes(v: i128) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A value drawn for a type, kept both as what to encode and as the JSON
/// tape must print.
struct Draw<'r> {
    rng: &'r mut Rng,
    order: Order,
}

/// Strings a string field draws from.
fn draw_string(rng: &mut Rng) -> Vec<u8> {
    match rng.below(9) {
        0 => Vec::new(),
        1 => b"hello".to_vec(),
        2 => "héllo wörld ✓ 日本".as_bytes().to_vec(),
        3 => {
            // A multi-byte character cut after its first byte.
            let mut v = b"cut ".to_vec();
            v.extend_from_slice(&"é".as_bytes()[..1]);
            v
        }
        4 => vec![0xff, 0xfe, b'a', 0xc3, 0x28, 0x80],
        5 => b"quote\" back\\slash 'single' ?".to_vec(),
        6 => b"tab\tnl\ncr\rbell\x07bs\x08vt\x0bff\x0cesc\x1bdel\x7fone\x01".to_vec(),
        7 => (0..1 + rng.below(40))
            .map(|_| b' ' + rng.below(95) as u8)
            .collect(),
        _ => (0..1 + rng.below(12))
            .map(|_| 1 + rng.below(255) as u8)
            .collect(),
    }
}

fn draw_int(rng: &mut Rng, i: &Int) -> i128 {
    let (lo, hi) = range(i);
    match rng.below(8) {
        0 => lo,
        1 => hi,
        2 => 0,
        3 if i.signed => -1,
        4 => lo.max(0) + (rng.below(10) as i128).min(hi),
        _ => {
            let span = (hi - lo) as u128 + 1;
            let r = (u128::from(rng.next()) << 64 | u128::from(rng.next())) % span;
            lo + r as i128
        }
    }
}

fn int_json(v: i128) -> Value {
    if let Ok(u) = u64::try_from(v) {
        json!(u)
    } else if let Ok(s) = i64::try_from(v) {
        json!(s)
    } else {
        Value::String(v.to_string())
    }
}

/// JSON of a string as tape prints it: a string when the bytes are UTF-8,
/// else an object with the lossy text and the bytes in hexadecimal.
pub fn string_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => Value::String(s.to_owned()),
        Err(_) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            json!({ "text": String::from_utf8_lossy(b), "bytes": hex })
        }
    }
}

impl Draw<'_> {
    /// Encodes a random value of `ty` and returns its JSON. `forced` gives
    /// the value of a length or tag field.
    fn value(&mut self, w: &mut BitWriter, ty: &Ty, forced: Option<i128>) -> Value {
        match ty {
            Ty::Int(i) => {
                let v = forced.unwrap_or_else(|| draw_int(self.rng, i));
                w.align(i.align);
                // Two's complement on any size: sign-extended past 128 bits.
                let mut bytes = le_bytes(v);
                bytes.resize(
                    i.size.div_ceil(8).max(16) as usize,
                    if v < 0 { 0xff } else { 0 },
                );
                w.put(&bytes, i.size, i.order.unwrap_or(self.order));
                if i.size > 64 {
                    // Wider than 64 bits: a string of digits in tape's JSON.
                    Value::String(v.to_string())
                } else {
                    int_json(v)
                }
            }
            Ty::Float { size, align, order } => {
                w.align(*align);
                let o = order.unwrap_or(self.order);
                let pick = *self.rng.pick(&[
                    0.0,
                    -0.0,
                    1.5,
                    -2.25,
                    1.0 / 3.0,
                    123456789.0,
                    1e-300,
                    6.02e23,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NAN,
                    5e-324,
                    100.0,
                    0.1,
                ]);
                let f = if self.rng.one_in(3) {
                    f64::from_bits(self.rng.next())
                } else {
                    pick
                };
                if *size == 32 {
                    let g = f as f32;
                    w.put(&g.to_bits().to_le_bytes(), 32, o);
                    float_json(f64::from(g))
                } else {
                    w.put(&f.to_bits().to_le_bytes(), 64, o);
                    float_json(f)
                }
            }
            Ty::Str { .. } => {
                w.align(8);
                let s = draw_string(self.rng);
                for b in &s {
                    w.put(&[*b], 8, Order::Le);
                }
                w.put(&[0], 8, Order::Le);
                string_json(&s)
            }
            Ty::Enum { int, entries } => {
                let v = match forced {
                    Some(v) => v,
                    None if !entries.is_empty() && !self.rng.one_in(4) => {
                        let (_, a, b) = self.rng.pick(entries);
                        a + self.rng.below((b - a + 1) as u64) as i128
                    }
                    None => draw_int(self.rng, int),
                };
                w.align(int.align);
                w.put(&le_bytes(v), int.size, int.order.unwrap_or(self.order));
                // A label with several ranges is one mapping: listed once,
                // where it first appears.
                let mut labels: Vec<&str> = Vec::new();
                for (l, _, _) in entries {
                    let holds = entries.iter().any(|(m, a, b)| m == l && *a <= v && v <= *b);
                    if holds && !labels.contains(&l.as_str()) {
                        labels.push(l);
                    }
                }
                json!({ "value": int_json(v), "labels": labels })
            }
            Ty::Struct { .. } => self.structure(w, ty),
            Ty::Array(e, n) => self.items(w, e, *n),
            Ty::Seq(..) | Ty::Variant(..) => unreachable!("drawn by structure"),
        }
    }

    fn items(&mut self, w: &mut BitWriter, e: &Ty, n: u64) -> Value {
        if let Ty::Int(i) = e {
            if i.utf8 {
                // Text: bytes up to the first NUL are the string.
                w.align(8);
                let mut s = draw_string(self.rng);
                s.resize(n as usize, 0);
                if self.rng.one_in(4) && n > 2 {
                    s[1] = 0;
                }
                for b in &s {
                    w.put(&[*b], 8, Order::Le);
                }
                let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                return string_json(&s[..end]);
            }
        }
        w.align(e.align());
        Value::Array((0..n).map(|_| self.value(w, e, None)).collect())
    }

    fn structure(&mut self, w: &mut BitWriter, ty: &Ty) -> Value {
        w.align(ty.align());
        self.members(w, ty)
    }

    /// The members of a struct, without its own alignment (for fields
    /// written inline after others, as a packet context's own fields).
    fn members(&mut self, w: &mut BitWriter, ty: &Ty) -> Value {
        let Ty::Struct { fields, .. } = ty else {
            unreachable!()
        };
        // First the choices that decide earlier fields: each sequence's
        // length, each variant's option.
        let mut forced: Vec<Option<i128>> = vec![None; fields.len()];
        let mut choice: Vec<usize> = vec![0; fields.len()];
        for (k, (_, t)) in fields.iter().enumerate() {
            match t {
                Ty::Seq(_, _, at) => {
                    let Ty::Int(i) = &fields[*at].1 else {
                        unreachable!()
                    };
                    let max = range(i).1.min(4);
                    forced[*at] = Some(self.rng.below(max as u64 + 1) as i128);
                }
                Ty::Variant(_, at, options) => {
                    let Ty::Enum { entries, .. } = &fields[*at].1 else {
                        unreachable!()
                    };
                    let c = self.rng.below(options.len() as u64) as usize;
                    let (_, a, b) = &entries[c];
                    forced[*at] = Some(a + self.rng.below((b - a + 1) as u64) as i128);
                    choice[k] = c;
                }
                _ => {}
            }
        }
        let mut obj = Map::new();
        for (k, (name, t)) in fields.iter().enumerate() {
            let v = match t {
                Ty::Seq(e, _, at) => {
                    let n = forced[*at].expect("length drawn") as u64;
                    self.items(w, e, n)
                }
                Ty::Variant(_, _, options) => {
                    let (opt, ot) = &options[choice[k]];
                    w.align(ot.align());
                    let v = self.value(w, ot, None);
                    json!({ opt.clone(): v })
                }
                _ => self.value(w, t, forced[k]),
            };
            obj.insert(name.clone(), v);
        }
        Value::Object(obj)
    }
}

fn float_json(f: f64) -> Value {
    if f.is_finite() {
        json!(f)
    } else {
        Value::String(format!("{f}"))
    }
}

// ------------------------------------------------------------- the trace

/// A generated trace.
pub struct Trace {
    pub seed: u64,
    pub metadata: String,
    /// Stream file names and bytes.
    pub streams: Vec<(String, Vec<u8>)>,
    /// Per event, in the order of the stream files and then of the
    /// events: its stream file and name (`stream_0_1 app:ev0_0`) and `{"stream_context":..,"context":..,"fields":..}`
    /// (scopes absent from the metadata are absent here).
    pub events: Vec<(String, Value)>,
    /// Events discarded, by the packet contexts' counters.
    pub discarded: u64,
    /// Shapes drawn that babeltrace2 cannot read (see the differential
    /// test's `BT2_CANNOT`).
    pub shapes: Vec<&'static str>,
}

impl Trace {
    /// Writes the trace into `dir` (created).
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("metadata"), &self.metadata)?;
        for (name, bytes) in &self.streams {
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }
}

/// The presence of a scope: absent, declared empty, or with fields.
fn scope(tg: &mut TypeGen, path: &str) -> Option<Ty> {
    match tg.rng.below(4) {
        0 => None,
        1 => Some(Ty::Struct {
            fields: Vec::new(),
            align: None,
        }),
        _ => Some(tg.structure(2, Some(path))),
    }
}

struct Special {
    name: &'static str,
    size: u32,
}

struct StreamClass {
    id: u64,
    /// Whether the metadata gives the stream class's id.
    id_written: bool,
    /// Packet context: the fields tape's reader and babeltrace2 know, in
    /// order, then `extra`.
    ctx_special: Vec<Special>,
    ctx_extra: Option<Ty>,
    has_ctx: bool,
    /// Event header: id size, timestamp size.
    hdr_id: Option<u32>,
    hdr_ts: Option<u32>,
    event_ctx: Option<Ty>,
    events: Vec<(String, u64, Option<Ty>, Option<Ty>)>,
}

/// Draws trace `seed`: one in eight has integers wider than 64 bits
/// (which babeltrace2 does not read).
pub fn generate(seed: u64) -> Trace {
    let mut rng = Rng::new(seed);
    let rng = &mut rng;
    let wide = rng.one_in(8);
    let order = if rng.one_in(2) { Order::Le } else { Order::Be };
    let clock = rng.below(4) != 0;
    // Without a clock, one stream file: the order babeltrace2's muxer gives
    // events without times from several streams is not tape's yet.
    let n_classes = if clock { 1 + rng.below(3) } else { 1 };
    let ph_magic = rng.one_in(2);
    let ph_uuid = rng.one_in(2);
    let ph_stream_id = n_classes > 1 || rng.one_in(2);
    let ph_instance = rng.one_in(4);
    let ph_id_size = *rng.pick(&[8u32, 16, 32, 64]);
    let uuid: [u8; 16] = std::array::from_fn(|_| rng.below(256) as u8);
    let abs_tags = rng.one_in(10);
    let ctx_dynamic = rng.one_in(10);
    let hex_61_63 = rng.one_in(10);

    let mut classes = Vec::new();
    let mut label_seq = 0;
    for id in 0..n_classes {
        let mut tg = TypeGen {
            rng: &mut *rng,
            wide,
            label_seq,
            abs_tags,
            hex_61_63,
            dynamic: true,
        };
        let has_ctx = tg.rng.below(5) != 0;
        let mut ctx_special = Vec::new();
        let mut ctx_extra = None;
        if has_ctx {
            let want = |name, size: u32, p: u64, out: &mut Vec<Special>, rng: &mut Rng| {
                if rng.below(p) != 0 {
                    out.push(Special { name, size });
                }
            };
            // The packet's times: both or none (a timestamp_end without a
            // timestamp_begin is valid, but the readers differ on the clock
            // its first event starts from: not drawn yet).
            if clock && tg.rng.below(4) != 0 {
                ctx_special.push(Special {
                    name: "timestamp_begin",
                    size: 64,
                });
                ctx_special.push(Special {
                    name: "timestamp_end",
                    size: 64,
                });
            }
            let sizes = tg.rng.below(4);
            if sizes != 0 {
                ctx_special.push(Special {
                    name: "content_size",
                    size: *tg.rng.pick(&[32, 64]),
                });
                ctx_special.push(Special {
                    name: "packet_size",
                    size: *tg.rng.pick(&[32, 64]),
                });
            }
            want(
                "events_discarded",
                *tg.rng.pick(&[32, 64]),
                3,
                &mut ctx_special,
                tg.rng,
            );
            want("packet_seq_num", 64, 3, &mut ctx_special, tg.rng);
            // Mixed order, as tracers write them in any order.
            for i in (1..ctx_special.len()).rev() {
                let j = tg.rng.below(i as u64 + 1) as usize;
                ctx_special.swap(i, j);
            }
            ctx_extra = scope(&mut tg, "stream.packet.context")
                .filter(|t| matches!(t, Ty::Struct { fields, .. } if !fields.is_empty()));
        }
        let n_events = 1 + tg.rng.below(4);
        let hdr_id = if n_events > 1 || tg.rng.one_in(3) {
            Some(*tg.rng.pick(&[8u32, 16, 32, 5]))
        } else {
            None
        };
        let hdr_ts = clock.then(|| *tg.rng.pick(&[64u32, 64, 32, 27]));
        let event_ctx = scope(&mut tg, "stream.event.context");
        let mut events = Vec::new();
        let mut next_id = 0;
        for e in 0..n_events {
            let name = format!("{}:ev{}_{}", *tg.rng.pick(&["app", "net", "lib_x"]), id, e);
            next_id += 1 + tg.rng.below(3);
            let eid = next_id - 1;
            tg.dynamic = ctx_dynamic;
            let context = scope(&mut tg, "event.context");
            tg.dynamic = true;
            let mut fields = scope(&mut tg, "event.fields");
            if hdr_id.is_none() && hdr_ts.is_none() {
                // No header: an event must take room, or a reader would
                // read events of no size forever.
                let mut first = tg.int(8);
                first.order = None;
                let rest = match fields {
                    Some(Ty::Struct { fields, .. }) => fields,
                    _ => Vec::new(),
                };
                let mut all = vec![("first".to_owned(), Ty::Int(first))];
                // (Lengths and tags are found by index: one more now.)
                all.extend(rest.into_iter().map(|(n, t)| match t {
                    Ty::Seq(e, p, at) => (n, Ty::Seq(e, p, at + 1)),
                    Ty::Variant(p, at, o) => (n, Ty::Variant(p, at + 1, o)),
                    t => (n, t),
                }));
                fields = Some(Ty::Struct {
                    fields: all,
                    align: None,
                });
            }
            events.push((name, eid, context, fields));
        }
        label_seq = tg.label_seq;
        // babeltrace2 wants the packet header's stream_id for a stream class id.
        let id_written = ph_stream_id;
        classes.push(StreamClass {
            id,
            id_written,
            ctx_special,
            ctx_extra,
            has_ctx,
            hdr_id,
            hdr_ts,
            event_ctx,
            events,
        });
    }

    // The metadata.
    let mut m = String::from("/* CTF 1.8 */\n\n");
    let u8t = "integer { size = 8; align = 8; signed = false; }";
    m.push_str("trace {\n    major = 1;\n    minor = 8;\n");
    let uuid_text: String = uuid
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                "{}{b:02x}",
                if matches!(i, 4 | 6 | 8 | 10) { "-" } else { "" }
            )
        })
        .collect();
    if ph_uuid {
        let _ = writeln!(m, "    uuid = \"{uuid_text}\";");
    }
    let _ = writeln!(m, "    byte_order = {};", order_kw(order));
    let has_ph = ph_magic || ph_uuid || ph_stream_id || ph_instance;
    if has_ph {
        m.push_str("    packet.header := struct {\n");
        if ph_magic {
            m.push_str("        integer { size = 32; align = 8; signed = false; } magic;\n");
        }
        if ph_uuid {
            let _ = writeln!(m, "        {u8t} uuid[16];");
        }
        if ph_stream_id {
            let _ = writeln!(
                m,
                "        integer {{ size = {ph_id_size}; align = 8; signed = false; }} stream_id;"
            );
        }
        if ph_instance {
            m.push_str(
                "        integer { size = 64; align = 8; signed = false; } stream_instance_id;\n",
            );
        }
        m.push_str("    };\n");
    }
    m.push_str("};\n\n");
    if rng.below(3) != 0 {
        m.push_str("env {\n    hostname = \"gen-host\";\n    domain = \"ust\";\n    tracer_name = \"gen\";\n    n = 7;\n};\n\n");
    }
    let (freq, offset_s, offset) = (
        *rng.pick(&[1_000_000_000u64, 1_000_000_000, 1000, 2_500_000_000, 3]),
        *rng.pick(&[0i64, 1_700_000_000, 1_234_567_890, -5]),
        *rng.pick(&[0i64, 0, 999, 123_456_789]),
    );
    if clock {
        let _ = writeln!(
            m,
            "clock {{\n    name = \"clk\";\n    freq = {freq};\n    offset_s = {offset_s};\n    offset = {offset};\n    precision = 0;\n    absolute = {};\n}};\n",
            if rng.one_in(2) { "TRUE" } else { "FALSE" }
        );
    }
    for c in &classes {
        m.push_str("stream {\n");
        if c.id_written {
            let _ = writeln!(m, "    id = {};", c.id);
        }
        if c.has_ctx {
            m.push_str("    packet.context := struct {\n");
            for s in &c.ctx_special {
                let map = if s.name.starts_with("timestamp") {
                    " map = clock.clk.value;"
                } else {
                    ""
                };
                let _ = writeln!(
                    m,
                    "        integer {{ size = {}; align = 8; signed = false;{map} }} {};",
                    s.size, s.name
                );
            }
            if let Some(Ty::Struct { fields, .. }) = &c.ctx_extra {
                for (name, t) in fields {
                    write_field(&mut m, name, t, 2);
                }
            }
            m.push_str("    };\n");
        }
        if c.hdr_id.is_some() || c.hdr_ts.is_some() {
            m.push_str("    event.header := struct {\n");
            if let Some(s) = c.hdr_id {
                let _ = writeln!(
                    m,
                    "        integer {{ size = {s}; align = 8; signed = false; }} id;"
                );
            }
            if let Some(s) = c.hdr_ts {
                let align = if s == 27 { 1 } else { 8 };
                let _ = writeln!(
                    m,
                    "        integer {{ size = {s}; align = {align}; signed = false; map = clock.clk.value; }} timestamp;"
                );
            }
            m.push_str("    };\n");
        }
        if let Some(t) = &c.event_ctx {
            m.push_str("    event.context := ");
            write_ty(&mut m, t, 1);
            m.push_str(";\n");
        }
        m.push_str("};\n\n");
        for (name, id, context, fields) in &c.events {
            let _ = writeln!(m, "event {{\n    name = {};", quote(name));
            if c.hdr_id.is_some() || rng.one_in(2) {
                let _ = writeln!(m, "    id = {id};");
            }
            if c.id_written && (ph_stream_id || rng.one_in(2)) {
                let _ = writeln!(m, "    stream_id = {};", c.id);
            }
            if rng.one_in(3) {
                let _ = writeln!(m, "    loglevel = {};", rng.below(15));
            }
            for (key, t) in [("context", context), ("fields", fields)] {
                if let Some(t) = t {
                    let _ = write!(m, "    {key} := ");
                    write_ty(&mut m, t, 1);
                    m.push_str(";\n");
                }
            }
            m.push_str("};\n\n");
        }
    }

    let mut shapes = Vec::new();
    if abs_tags
        && m.contains("variant <")
        && m.lines()
            .any(|l| l.contains("variant <") && l.contains('.'))
    {
        shapes.push("absolute variant tag");
    }
    if ctx_dynamic {
        shapes.push("dynamic event context");
    }
    if hex_61_63 {
        shapes.push("hex 61-63 bits");
    }
    if wide {
        shapes.push("wide integer");
    }
    if clock && offset_s < 0 {
        shapes.push("time before the epoch");
    }

    // The streams.
    let mut streams = Vec::new();
    let mut events = Vec::new();
    let mut discarded = 0;
    let mut instance = 0u64;
    for c in &classes {
        let sized = c.ctx_special.iter().any(|s| s.name == "packet_size");
        for _file in 0..if clock { 1 + rng.below(2) } else { 1 } {
            let name = format!("stream_{}_{}", c.id, streams.len());
            let first_event = events.len();
            let mut w = BitWriter::default();
            // Times stay within 64-bit nanoseconds whatever the frequency.
            // Events of different streams never share a time (their times
            // are apart by 8 cycles at least, 3 ns at 2.5 GHz): the order of
            // ties is babeltrace2's muxer's, which tape does not follow yet.
            let lane = 8 * streams.len() as u64;
            let mut time = (rng.below(freq.min(1 << 30) << 10) + 1000) / 64 * 64 + lane;
            let mut lost = 0u64;
            let packets = if sized { 1 + rng.below(3) } else { 1 };
            instance += 1;
            for seq in 0..packets {
                let start = w.pos;
                w.base = start;
                let n_events = rng.below(6);
                // Packet header.
                let mut d = Draw {
                    rng: &mut *rng,
                    order,
                };
                if ph_magic {
                    w.align(8);
                    w.put(&0xC1FC_1FC1u32.to_le_bytes(), 32, order);
                }
                if ph_uuid {
                    w.align(8);
                    for b in uuid {
                        w.put(&[b], 8, order);
                    }
                }
                if ph_stream_id {
                    w.align(8);
                    w.put(&c.id.to_le_bytes(), ph_id_size, order);
                }
                if ph_instance {
                    w.align(8);
                    w.put(&instance.to_le_bytes(), 64, order);
                }
                // Event times, drawn now for the packet's bounds.
                let mut times = Vec::new();
                time += 64;
                let begin = time;
                for _ in 0..n_events {
                    let step = match d.rng.below(6) {
                        0 => 0,
                        1 => 1 << 26,
                        _ => 1 + d.rng.below(1 << 20),
                    } % (freq << 8).max(2);
                    time += step / 64 * 64;
                    times.push(time);
                }
                let end = times.last().copied().unwrap_or(time) + d.rng.below(64) / 8 * 8;
                time = end;
                // Packet context: the sizes are patched once known.
                let mut patch = Vec::new();
                // The packet context's values, given to each of its events.
                let mut pctx = Map::new();
                let packet_first = events.len();
                if c.has_ctx {
                    // The context is one struct: aligned as its most aligned field.
                    // (The extra fields are written inline: their struct's own
                    // `align(N)` is not in the metadata.)
                    let extra = match &c.ctx_extra {
                        Some(Ty::Struct { fields, .. }) => {
                            fields.iter().map(|(_, t)| t.align()).max()
                        }
                        _ => None,
                    };
                    w.align(extra.unwrap_or(8).max(8));
                    for s in &c.ctx_special {
                        w.align(8);
                        let v: u64 = match s.name {
                            "timestamp_begin" => begin,
                            "timestamp_end" => end,
                            "events_discarded" => {
                                if seq > 0 && d.rng.one_in(3) {
                                    lost += 1 + d.rng.below(5);
                                }
                                lost
                            }
                            "packet_seq_num" => seq,
                            _ => {
                                patch.push((s.name, w.pos, s.size));
                                0
                            }
                        };
                        pctx.insert(s.name.to_owned(), json!(v));
                        w.put(&v.to_le_bytes(), s.size, order);
                    }
                    if let Some(t) = &c.ctx_extra {
                        if let Value::Object(m) = d.members(&mut w, t) {
                            pctx.extend(m);
                        }
                    }
                }
                // Without sizes the file is the packet and all of it is
                // content: it must end on a byte at the end of an event.
                let mut cut = (w.pos % 8 == 0).then_some((w.pos, events.len()));
                for t in times {
                    let ev = d.rng.below(c.events.len() as u64) as usize;
                    let (ev_name, id, context, fields) = &c.events[ev];
                    if c.hdr_id.is_some() || c.hdr_ts.is_some() {
                        // The header struct is aligned as its fields: a lone
                        // 27-bit timestamp is bit-packed.
                        let packed = c.hdr_id.is_none() && c.hdr_ts == Some(27);
                        w.align(if packed { 1 } else { 8 });
                        if let Some(s) = c.hdr_id {
                            w.put(&id.to_le_bytes(), s, order);
                        }
                        if let Some(s) = c.hdr_ts {
                            if s != 27 {
                                w.align(8);
                            }
                            w.put(&t.to_le_bytes(), s, order);
                        }
                    }
                    let mut scopes = Map::new();
                    for (key, t) in [
                        ("stream_context", &c.event_ctx),
                        ("context", context),
                        ("fields", fields),
                    ] {
                        if let Some(t) = t {
                            scopes.insert(key.to_owned(), d.value(&mut w, t, None));
                        }
                    }
                    events.push((format!("{name} {ev_name}"), Value::Object(scopes)));
                    if w.pos % 8 == 0 {
                        cut = Some((w.pos, events.len()));
                    }
                }
                if !sized && w.pos % 8 != 0 {
                    match cut {
                        Some((pos, n)) => {
                            w.pos = pos;
                            w.buf.truncate((pos / 8) as usize);
                            events.truncate(n);
                        }
                        None => {
                            // No event ends on a byte: no such stream file.
                            events.truncate(first_event);
                            w.buf.clear();
                        }
                    }
                }
                let content = w.pos - start;
                if sized {
                    // Padding: to a byte, and sometimes more.
                    w.align(8);
                    w.pos += 8 * d.rng.below(3) * d.rng.below(40);
                    w.fit();
                }
                let packet = w.pos - start;
                for (what, at, size) in patch {
                    let v = if what == "content_size" {
                        content
                    } else {
                        packet
                    };
                    w.put_at(at, &v.to_le_bytes(), size, order);
                    pctx.insert(what.to_owned(), json!(v));
                }
                if c.has_ctx {
                    for (_, scopes) in &mut events[packet_first..] {
                        if let Value::Object(m) = scopes {
                            m.insert("packet_context".into(), Value::Object(pctx.clone()));
                        }
                    }
                }
            }
            discarded += lost;
            if !w.buf.is_empty() {
                streams.push((name, w.buf));
            }
        }
    }
    Trace {
        seed,
        metadata: m,
        streams,
        events,
        discarded,
        shapes,
    }
}
