//! A `tracing` value as tape records it: each field a tagged value (a kind
//! byte, then the value), gathered from a `tracing` visitor into one stack
//! buffer and encoded by tape's emit path.
//!
//! ```text
//! struct { enum : uint8_t { none, u64, i64, f64, bool, str, u128, i128, text } kind;
//!          variant <kind> { struct {} none; uint64 u64; int64 i64; double f64;
//!                           uint8 bool; string str; string u128; string i128;
//!                           string text; } value; } rows;
//!
//! bytes:  kind | value: 8 (u64, i64, f64), 1 (bool), 0 (none), or the
//!                string's bytes and a NUL (str, u128, i128, text)
//! ```
//!
//! Written by hand: no crate records `tracing`'s visitor calls into an
//! external ring with typed values and no allocation.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use tape::field::{enum_type, Encode, Field as TapeField, Layout};
use tape_ctf::{Encoding, Float, Integer, Struct, Type};
use tracing_core::field::{Field, Visit};

/// Bytes of strings and formatted values an event keeps.
pub const TEXT_BYTES: usize = 2048;

/// The most fields of one callsite that are recorded (tracing's own limit
/// is 32).
pub(crate) const MAX_FIELDS: usize = 32;

/// Values cut because an event's strings passed [`TEXT_BYTES`].
pub(crate) static CUT: AtomicU64 = AtomicU64::new(0);

/// One recorded value.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Value<'a> {
    #[default]
    None,
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// A string, its 128-bit integer digits or its formatted text: kind,
    /// bytes.
    Text(u8, &'a str),
}

const NONE: u8 = 0;
const U64: u8 = 1;
const I64: u8 = 2;
const F64: u8 = 3;
const BOOL: u8 = 4;
const STR: u8 = 5;
const U128: u8 = 6;
const I128: u8 = 7;
const TEXT: u8 = 8;

// SAFETY: writes the kind byte, then 8 bytes, 1 byte, or the string up to
// its first NUL and a NUL (`&str`'s encoding): at most max_size().
unsafe impl Encode for Value<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        1 + match self {
            Value::None => 0,
            Value::Bool(_) => 1,
            Value::U64(_) | Value::I64(_) | Value::F64(_) => 8,
            Value::Text(_, s) => s.max_size(),
        }
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: each write stays within what max_size() counts.
        unsafe {
            match self {
                Value::None => NONE.encode(dst),
                Value::U64(v) => v.encode(U64.encode(dst)),
                Value::I64(v) => v.encode(I64.encode(dst)),
                Value::F64(v) => v.encode(F64.encode(dst)),
                Value::Bool(v) => u8::from(*v).encode(BOOL.encode(dst)),
                Value::Text(kind, s) => s.encode(kind.encode(dst)),
            }
        }
    }
}

impl TapeField for Value<'_> {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Layout) {
        let kind = enum_type(
            Integer::unsigned(8),
            &[
                ("none", NONE.into()),
                ("u64", U64.into()),
                ("i64", I64.into()),
                ("f64", F64.into()),
                ("bool", BOOL.into()),
                ("str", STR.into()),
                ("u128", U128.into()),
                ("i128", I128.into()),
                ("text", TEXT.into()),
            ],
        );
        let string = || Type::String(Encoding::Utf8);
        let options = vec![
            tape_ctf::Field::new("none", Type::Struct(Struct::new(Vec::new()))),
            tape_ctf::Field::new("u64", Type::Integer(Integer::unsigned(64))),
            tape_ctf::Field::new("i64", Type::Integer(Integer::signed(64))),
            tape_ctf::Field::new("f64", Type::Float(Float::binary64())),
            tape_ctf::Field::new("bool", Type::Integer(Integer::unsigned(8))),
            tape_ctf::Field::new("str", string()),
            tape_ctf::Field::new("u128", string()),
            tape_ctf::Field::new("i128", string()),
            tape_ctf::Field::new("text", string()),
        ];
        out.push(
            name,
            Type::Struct(Struct::new(vec![
                tape_ctf::Field::new("kind", kind),
                tape_ctf::Field::new(
                    "value",
                    Type::Variant {
                        tag: "kind".into(),
                        options,
                    },
                ),
            ])),
        );
    }
}

/// The fields of one event, in their callsite's order.
pub(crate) struct Values<'a>(pub(crate) &'a [Value<'a>]);

// SAFETY: each value's encoding, one after the other: their max_size sum.
unsafe impl Encode for Values<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        self.0.iter().map(Encode::max_size).sum()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let mut p = dst;
        for v in self.0 {
            // SAFETY: within the sum max_size() counts.
            p = unsafe { v.encode(p) };
        }
        p
    }
}

/// Where an event's values are gathered: kinds and numbers by field
/// index, texts in one stack buffer.
pub(crate) struct Gather {
    values: [Raw; MAX_FIELDS],
    text: [u8; TEXT_BYTES],
    used: usize,
}

#[derive(Clone, Copy)]
enum Raw {
    None,
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Text(u8, usize, usize),
}

impl Gather {
    fn put(&mut self, f: &Field, v: Raw) {
        if let Some(slot) = self.values.get_mut(f.index()) {
            *slot = v;
        }
    }

    /// Copies `s` into the buffer (cut at a character boundary when full).
    fn text(&mut self, f: &Field, kind: u8, s: &str) {
        let room = TEXT_BYTES - self.used;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        if n < s.len() {
            CUT.fetch_add(1, Ordering::Relaxed);
        }
        self.text[self.used..self.used + n].copy_from_slice(&s.as_bytes()[..n]);
        self.put(f, Raw::Text(kind, self.used, n));
        self.used += n;
    }

    /// Formats `args` into the buffer.
    fn format(&mut self, f: &Field, kind: u8, args: std::fmt::Arguments<'_>) {
        struct Cursor<'a> {
            buf: &'a mut [u8],
            at: usize,
            cut: bool,
        }
        impl std::fmt::Write for Cursor<'_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                let room = self.buf.len() - self.at;
                let mut n = s.len().min(room);
                while !s.is_char_boundary(n) {
                    n -= 1;
                }
                self.buf[self.at..self.at + n].copy_from_slice(&s.as_bytes()[..n]);
                self.at += n;
                if n < s.len() {
                    self.cut = true;
                    return Err(std::fmt::Error);
                }
                Ok(())
            }
        }
        let start = self.used;
        let mut c = Cursor {
            buf: &mut self.text[start..],
            at: 0,
            cut: false,
        };
        let _ = c.write_fmt(args);
        let (n, cut) = (c.at, c.cut);
        if cut {
            CUT.fetch_add(1, Ordering::Relaxed);
        }
        self.put(f, Raw::Text(kind, start, n));
        self.used += n;
    }
}

impl Visit for Gather {
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.put(f, Raw::U64(v));
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.put(f, Raw::I64(v));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.put(f, Raw::F64(v));
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.put(f, Raw::Bool(v));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.text(f, STR, v);
    }
    fn record_u128(&mut self, f: &Field, v: u128) {
        self.format(f, U128, format_args!("{v}"));
    }
    fn record_i128(&mut self, f: &Field, v: i128) {
        self.format(f, I128, format_args!("{v}"));
    }
    fn record_error(&mut self, f: &Field, v: &(dyn std::error::Error + 'static)) {
        self.format(f, TEXT, format_args!("{v}"));
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.format(f, TEXT, format_args!("{v:?}"));
    }
}

/// Gathers the fields that `visit` gives (a callsite of `n` fields) and
/// hands them, typed, to `emit`.
#[inline(always)]
pub(crate) fn with_values(
    n: usize,
    visit: impl FnOnce(&mut dyn Visit),
    emit: impl FnOnce(&Values<'_>),
) {
    let mut g = Gather {
        values: [Raw::None; MAX_FIELDS],
        text: [0; TEXT_BYTES],
        used: 0,
    };
    visit(&mut g);
    let n = n.min(MAX_FIELDS);
    let mut values = [Value::None; MAX_FIELDS];
    for (v, raw) in values.iter_mut().zip(&g.values[..n]) {
        *v = match *raw {
            Raw::None => Value::None,
            Raw::U64(x) => Value::U64(x),
            Raw::I64(x) => Value::I64(x),
            Raw::F64(x) => Value::F64(x),
            Raw::Bool(x) => Value::Bool(x),
            Raw::Text(kind, at, len) => Value::Text(
                kind,
                // The buffer holds whole characters (cut at boundaries).
                std::str::from_utf8(&g.text[at..at + len]).unwrap_or(""),
            ),
        };
    }
    emit(&Values(&values[..n]));
}

/// A span's fields after its id (the `call` its entries and exits carry).
pub(crate) struct WithCall<'a> {
    pub(crate) call: u64,
    pub(crate) values: &'a Values<'a>,
}

// SAFETY: the id's 8 bytes, then the values' encoding: their sum.
unsafe impl Encode for WithCall<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        8 + self.values.max_size()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: within the sum max_size() counts.
        unsafe { self.values.encode(self.call.encode(dst)) }
    }
}
