//! Event lines written wide: the text buffer and the compiled text
//! programs of `tape show`'s hot loop.
//!
//! # Wide stores
//!
//! A [`TextBuf`] stores a short piece of text as a whole machine word or
//! vector (8, 16 or 32 bytes) whatever its length, then advances its
//! length by the piece's true length: the bytes stored past the end are
//! not counted, and the next piece overwrites them. The buffer is kept
//! initialized (zeroed once when it grows), so the wide store needs no
//! `unsafe`, and there is one bounds check per piece, not a length-sized
//! `memcpy` and two length updates as with `Vec::extend_from_slice`.
//!
//! ```text
//!   before:   [ h e l l o │ . . . . . . . . . . . . . . . . ]
//!                         ^ len                             ^ buf.len()
//!   ", b = " (6 bytes) stored as 16:
//!             [ h e l l o , ␠ b ␠ = ␠ x x x x x x x x x x . ]
//!                                     ^ len  (the x's are free again)
//! ```
//!
//! # Digits
//!
//! Numbers are written from a table of the 1,000 three-digit texts. The
//! nine digits of a time's nanoseconds are three lookups, at `v / 10^6`,
//! `v / 10^3 % 1000` and `v % 1000` (divisions by constants, which run side
//! by side rather than as a chain of splits), put together in a register
//! and stored at once; a decimal of up to eight digits is made the same
//! way, its leading zeros cut by counting them in the register.
//!
//! # Text programs
//!
//! An event whose scopes are flat (fixed runs of integers and floats, and
//! strings: nearly every real event) is compiled once into a
//! `TextProgram`: its babeltrace2 text as literal pieces of at most 32
//! bytes (separators, names, braces and quotes merged together) between
//! value operations that read at static offsets from the start of their
//! run.
//!
//! ```text
//!   fields { u32 a; u64 b; string s; }  →
//!     opening " { a = " (", { a = " after a packet context)
//!     Run(align 8, 128 bits)  Dec(0, 32, ", b = ")  Dec(64, 64, ", s = \"")
//!     Str("\" }\n")
//! ```
//!
//! A program returns `false` when the event is near the end of the content
//! or odd in any way: the caller then cuts the text back and runs the
//! general plan, which gives the same text or the exact error.

#[cfg(test)]
use super::buf::eight;
use super::buf::NO_TEXT;
pub use super::buf::{delta_into, Lit, TextBuf};
use super::value::{text_bits, text_enum, text_float, text_string_body};
use crate::decode::plan::{self, Bits, IntOp, IntVal, Op, ScopePlan, State};
use crate::ByteOrder;

/// Appends the text (between its quotes) of the NUL-terminated string
/// that starts `rest`, and returns its length; `None` when `rest` has no
/// NUL. A string shorter than 16 bytes that needs no escape, the common
/// case, is found, checked and copied as one 16-byte word: with `z(x)`
/// marking the zero bytes of `x` (exactly up to the first one), the NUL
/// is the first zero byte of `w`, and a byte before it needs an escape
/// when it is `"`, `\\`, `'`, `?`, 0x7f or below 0x20 (bytes from 0x80 up print
/// as they are).
#[inline(always)]
fn string_text(out: &mut TextBuf, rest: &[u8]) -> Option<usize> {
    const LO: u128 = u128::from_le_bytes([1; 16]);
    const HI: u128 = LO * 0x80;
    let z = |x: u128| x.wrapping_sub(LO) & !x & HI;
    if let Some(w) = rest.get(..16) {
        let bytes: [u8; 16] = w.try_into().expect("16 bytes");
        let w = u128::from_le_bytes(bytes);
        let nul = z(w);
        if nul != 0 {
            let n = (nul.trailing_zeros() / 8) as usize;
            let is = |x: u128, c: u8| z(x ^ (LO * u128::from(c)));
            // Two bytes a test: `?` and DEL are those that OR 0x40 makes
            // 0x7f; `"` and `'` among those that AND !0x05 makes 0x22 (with
            // `#` and `&`, which then take the exact path).
            let bad = z(w & !(LO * 0x1f))
                | is(w | (LO * 0x40), 0x7f)
                | is(w & !(LO * 0x05), b'"')
                | is(w, b'\\');
            if bad & ((1u128 << (8 * n)) - 1) == 0 {
                out.wide(&bytes, n);
                return Some(n);
            }
        }
    }
    let n = plan::nul(rest)?;
    text_string_body(out, &rest[..n]);
    Some(n)
}

/// One operation of a [`TextProgram`].
#[derive(Clone, Debug)]
enum TextOp {
    /// Literal text.
    Lit(Lit),
    /// A scope's alignment (its struct's).
    Align(u64),
    /// A fixed run: aligned start, its size checked against the content;
    /// the values that follow read at offsets from that start.
    Run { align: u64, bits: u64 },
    /// An unsigned little-endian integer shown in decimal, nothing else to
    /// do with it: (bit offset in the run, size), then literal text.
    Dec(u64, u32, Lit),
    /// Any other integer, then literal text.
    Int(u64, Box<IntOp>, Lit),
    /// A floating point number: (bit offset, size, byte order), then
    /// literal text.
    Float(u64, u32, ByteOrder, Lit),
    /// A NUL-terminated string's text (its quotes are in the literals),
    /// then literal text.
    Str(Lit),
}

impl TextOp {
    /// The literal text after a value, to take the literal that follows.
    fn then(&mut self) -> Option<&mut Lit> {
        match self {
            TextOp::Dec(.., l) | TextOp::Int(.., l) | TextOp::Float(.., l) | TextOp::Str(l) => {
                Some(l)
            }
            _ => None,
        }
    }
}

/// The babeltrace2 text of an event's flat scopes, compiled (see the
/// module docs).
#[derive(Clone, Debug)]
pub(crate) struct TextProgram {
    /// The literal text before the first value: ` {…` (the first scope's
    /// opening and what follows it), which the caller writes (see
    /// [`TextProgram::opening`]) before running the program.
    open: Vec<u8>,
    ops: Vec<TextOp>,
}

/// Literal text waiting to become [`TextOp`]s.
struct Pending {
    ops: Vec<TextOp>,
    text: Vec<u8>,
    /// The first scope's opening is in `text` (without its `,`).
    open: bool,
    /// Where it goes once flushed.
    opening: Vec<u8>,
}

impl Pending {
    fn flush(&mut self) {
        if self.text.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.text);
        if std::mem::take(&mut self.open) {
            self.opening = text;
            return;
        }
        self.ops
            .extend(Lit::pieces(&text).into_iter().map(TextOp::Lit));
    }

    fn value(&mut self, op: TextOp) {
        self.flush();
        self.ops.push(op);
    }
}

impl TextProgram {
    /// The program of `scopes` (an event's scopes present, in order), each
    /// line ending with a newline; `None` when one is not flat.
    pub(crate) fn new(scopes: &[&ScopePlan]) -> Option<TextProgram> {
        let mut p = Pending {
            ops: Vec::new(),
            text: Vec::new(),
            open: false,
            opening: Vec::new(),
        };
        let mut written = false;
        for scope in scopes {
            let [Op::Struct { align, body }] = scope.ops.as_slice() else {
                return None;
            };
            p.value(TextOp::Align(*align));
            if written {
                p.text.extend_from_slice(b", {");
            } else {
                p.text.extend_from_slice(b" {");
                p.open = true;
            }
            written = true;
            if body.is_empty() {
                // Declared empty: babeltrace2 shows `{ }`.
                p.text.extend_from_slice(b" }");
                continue;
            }
            let mut first = true;
            let mut sep = |p: &mut Pending, sep: &[u8]| {
                p.text.extend_from_slice(if std::mem::take(&mut first) {
                    &sep[1..]
                } else {
                    sep
                });
            };
            for op in body {
                match op {
                    Op::Fixed(r) => {
                        p.value(TextOp::Run {
                            align: r.align,
                            bits: r.bits,
                        });
                        for (off, item) in &r.items {
                            let Op::Field(_, s, inner) = item else {
                                return None;
                            };
                            sep(&mut p, s);
                            p.value(match &**inner {
                                Op::Int(i) if i.plain_decimal() => {
                                    TextOp::Dec(*off, i.size, NO_TEXT)
                                }
                                Op::Int(i) => TextOp::Int(*off, Box::new(i.clone()), NO_TEXT),
                                Op::Float { bits, order, .. } => {
                                    TextOp::Float(*off, *bits, *order, NO_TEXT)
                                }
                                _ => return None,
                            });
                        }
                    }
                    Op::Field(_, s, inner) if matches!(**inner, Op::Str) => {
                        sep(&mut p, s);
                        p.text.push(b'"');
                        p.value(TextOp::Str(NO_TEXT));
                        p.text.push(b'"');
                    }
                    _ => return None,
                }
            }
            p.text.extend_from_slice(b" }");
        }
        p.text.push(b'\n');
        p.flush();
        // A scope's alignment right before a run's of at least as much is
        // that run's.
        let mut ops: Vec<TextOp> = Vec::with_capacity(p.ops.len());
        for op in p.ops {
            if let (Some(TextOp::Align(a)), TextOp::Run { align, .. }) = (ops.last(), &op) {
                if a <= align {
                    ops.pop();
                }
            }
            if matches!(op, TextOp::Align(1)) {
                continue;
            }
            // A literal after a value goes with it (one step fewer).
            if let (TextOp::Lit(l), Some(then)) = (&op, ops.last_mut().and_then(TextOp::then)) {
                if then.len == 0 {
                    *then = *l;
                    continue;
                }
            }
            ops.push(op);
        }
        Some(TextProgram {
            open: p.opening,
            ops,
        })
    }

    /// Appends the text before the first value to `out`: ` {…`, or `, {…`
    /// after a packet context; nothing when no scope has members.
    pub(crate) fn opening(&self, after_packet: bool, out: &mut TextBuf) {
        if after_packet && !self.open.is_empty() {
            out.push(b',');
        }
        out.put(&self.open);
    }

    /// Runs the program on the event at `b.pos`, after its
    /// [opening](TextProgram::opening). `false` when the general plan must
    /// render the event (see the module docs).
    #[inline]
    pub(crate) fn run(&self, b: &mut Bits<'_>, st: &mut State, out: &mut TextBuf) -> bool {
        let (buf, end) = (b.buf, b.end);
        let mut pos = b.pos;
        let mut start = pos;
        for op in &self.ops {
            match op {
                TextOp::Lit(l) => out.lit(l),
                TextOp::Align(a) => {
                    pos = (pos + a - 1) & !(a - 1);
                    if pos > end {
                        return false;
                    }
                }
                TextOp::Run { align, bits } => {
                    start = (pos + align - 1) & !(align - 1);
                    pos = start + bits;
                    if pos > end {
                        return false;
                    }
                }
                TextOp::Dec(off, size, then) => {
                    let Some(v) = plan::extract(buf, start + off, *size, ByteOrder::Little) else {
                        return false;
                    };
                    out.decimal(v);
                    out.lit(then);
                }
                TextOp::Int(off, i, then) => {
                    let Some(raw) = plan::extract(buf, start + off, i.size, i.order) else {
                        return false;
                    };
                    match plan::int_read(i, raw, st) {
                        IntVal::Unsigned(v) => text_bits(out, v, false, i.size, i.base),
                        IntVal::Signed(v) => text_bits(out, v as u64, true, i.size, i.base),
                        IntVal::Enum(v, e) => text_enum(out, v, e),
                    }
                    out.lit(then);
                }
                TextOp::Float(off, bits, order, then) => {
                    let Some(raw) = plan::extract(buf, start + off, *bits, *order) else {
                        return false;
                    };
                    text_float(out, plan::float_of(*bits, raw));
                    out.lit(then);
                }
                TextOp::Str(then) => {
                    let at = (pos + 7) & !7;
                    let (s0, e) = ((at / 8) as usize, ((end / 8) as usize).min(buf.len()));
                    let Some(rest) = buf.get(s0..e) else {
                        return false;
                    };
                    let Some(n) = string_text(out, rest) else {
                        return false;
                    };
                    pos = at + (n as u64 + 1) * 8;
                    out.lit(then);
                }
            }
        }
        b.pos = pos;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_of_every_length_append_exactly() {
        let src: Vec<u8> = (0..200u8).map(|i| b'a' + i % 26).collect();
        let mut t = TextBuf::new();
        let mut want = Vec::new();
        for n in 0..=40 {
            t.put(&src[..n]);
            want.extend_from_slice(&src[..n]);
            t.lit(&Lit::new(&src[n..n + n.min(32)]));
            want.extend_from_slice(&src[n..n + n.min(32)]);
        }
        assert_eq!(t.as_slice(), &want[..]);
    }

    #[test]
    fn strings_read_whole_as_escaped_one_by_one() {
        let pieces: [&[u8]; 10] = [
            b"a",
            b"hello-1",
            b"\"",
            b"'",
            b"?",
            b"\\",
            b"\t",
            b"\x7f",
            b"\xc3\xa9",
            b" ",
        ];
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for n in 0..40 {
            for (k, p) in pieces.iter().enumerate() {
                let mut s: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
                s.splice((n * k / 10)..(n * k / 10), p.iter().copied());
                cases.push(s);
            }
        }
        for s in cases {
            for tail in [
                &b""[..],
                b"\0",
                b"\0xyz\0",
                b"\0\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
            ] {
                let mut rest = s.clone();
                rest.extend_from_slice(tail);
                let (mut got, mut want) = (TextBuf::new(), TextBuf::new());
                let n = string_text(&mut got, &rest);
                if tail.is_empty() {
                    assert_eq!(n, None, "{s:?}");
                    continue;
                }
                text_string_body(&mut want, &s);
                assert_eq!(n, Some(s.len()), "{s:?}");
                assert_eq!(got.as_slice(), want.as_slice(), "{s:?}");
            }
        }
    }

    #[test]
    fn eight_digits_in_registers() {
        let check = |v: u64| {
            assert_eq!(eight(v).to_le_bytes(), *format!("{v:08}").as_bytes(), "{v}");
        };
        (0..200_000).for_each(check);
        (0..100_000_000).step_by(9_973).for_each(check);
        (99_800_000..100_000_000).for_each(check);
    }

    #[test]
    fn digits_as_std_writes_them() {
        let mut t = TextBuf::new();
        let mut want = String::new();
        let mut v = 1u64;
        for k in 0..64 {
            for x in [v - 1, v, v.wrapping_add(1), u64::MAX >> k] {
                t.decimal(x);
                t.push(b' ');
                want.push_str(&format!("{x} "));
                t.nine(x);
                want.push_str(&format!("{:09} ", x % 1_000_000_000));
                t.push(b' ');
            }
            v = v.saturating_mul(3);
        }
        assert_eq!(std::str::from_utf8(t.as_slice()).unwrap(), want);
    }

    #[test]
    fn deltas_as_std_writes_them() {
        let check = |d: u64| {
            let mut place = *b"+?.?????????]";
            delta_into(&mut place[1..], d);
            let want = format!("+{}.{:09}]", d / 1_000_000_000, d % 1_000_000_000);
            assert_eq!(std::str::from_utf8(&place).unwrap(), want, "{d}");
        };
        (0..3_000).for_each(check);
        (0..10_000_000_000).step_by(999_983).for_each(check);
        (9_999_999_000..10_000_000_000).for_each(check);
    }
}
