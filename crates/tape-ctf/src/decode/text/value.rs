//! How a value's text is written into a [`TextBuf`], as babeltrace2 2.0
//! prints it: integers in their base, enumerations with their labels,
//! floats as `%g`, strings quoted and escaped. Used by the line programs
//! ([`super::line`]) and the value sink ([`super::sink`]).

use crate::decode::text::buf::TextBuf;
use crate::decode::text::uint_text;
use crate::{Base, Enum};

/// A signed integer of `bits` bits as babeltrace2 prints it (other bases:
/// its `bits` bits, so an `int16_t` of -1 in hex is `0xFFFF`).
#[inline]
/// An integer of `bits` bits (its two's complement `v`, sign-extended when
/// `signed`) in a base other than decimal, as babeltrace2 2.0 prints it:
/// binary with all `bits` digits (`0b0101`), octal with a `0` prefix (a
/// negative value cut to a multiple of 3 bits: `0` then digits, so zero is
/// `00`), hexadecimal in capitals cut to whole nibbles (`0xFFEE`).
pub(crate) fn text_bits(out: &mut TextBuf, v: u64, signed: bool, bits: u32, base: Base) {
    let bits = bits.clamp(1, 64);
    let cut = |v: u64, n: u32| if n >= 64 { v } else { v & ((1u64 << n) - 1) };
    let mut buf = [0u8; 66];
    match base {
        Base::Decimal if signed => {
            let s = v as i64;
            if s < 0 {
                out.push(b'-');
            }
            out.decimal(s.unsigned_abs());
        }
        Base::Decimal => out.decimal(v),
        Base::Binary => {
            let v = cut(v, bits);
            buf[..2].copy_from_slice(b"0b");
            for i in 0..bits {
                buf[2 + i as usize] = b'0' + ((v >> (bits - 1 - i)) & 1) as u8;
            }
            out.put(&buf[..2 + bits as usize]);
        }
        Base::Octal => {
            let v = if signed {
                cut(v, bits.div_ceil(3) * 3)
            } else {
                v
            };
            // `uint_text` writes `0` then the digits: zero as `00`.
            out.put(uint_text(&mut buf, v, Base::Octal));
        }
        Base::Hexadecimal => out.put(uint_text(&mut buf, cut(v, bits.div_ceil(4) * 4), base)),
    }
}

/// An enumeration value as babeltrace2 2.0 prints it: `( "LABEL" :
/// container = V )`, several labels separated by commas, `<unknown>` for
/// none; the labels escaped as strings, the container in its base.
pub(crate) fn text_enum(out: &mut TextBuf, v: i128, e: &Enum) {
    out.put(b"( ");
    let mut n = 0;
    for l in e.labels(v) {
        if n > 0 {
            out.put(b", ");
        }
        text_string(out, l.as_bytes());
        n += 1;
    }
    if n == 0 {
        out.put(b"<unknown>");
    }
    out.put(b" : container = ");
    let c = &e.container;
    text_bits(out, v as u64, c.signed, c.size, c.base);
    out.put(b" )");
}

/// A floating point number as `%g`.
pub(crate) fn text_float(out: &mut TextBuf, v: f64) {
    let mut s = String::new();
    crate::decode::text::float(&mut s, v);
    out.put(s.as_bytes());
}

/// A string between quotes, escaped as babeltrace2 escapes it.
#[inline]
pub(crate) fn text_string(out: &mut TextBuf, s: &[u8]) {
    out.push(b'"');
    text_string_body(out, s);
    out.push(b'"');
}

/// The text of a string between its quotes.
#[inline]
pub(crate) fn text_string_body(out: &mut TextBuf, s: &[u8]) {
    if plain(s) {
        out.put(s);
    } else {
        let mut t = Vec::with_capacity(s.len() + 16);
        crate::decode::text::escape_into(&mut t, s);
        out.put(&t);
    }
}

/// Whether `s` prints as it is between quotes (see
/// [`crate::decode::text::escape_into`]): no control character, no `"`, `\\`, `'`
/// or `?` (8 bytes at a time). Bytes from 0x80 up print as they are. A
/// `#` or `&` in the 8-byte words also answers no (the tests take two
/// bytes at once); the caller then escapes exactly, byte by byte.
#[inline]
fn plain(s: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // A byte of `w` equal to zero sets its high bit in `zero(w)` (the
    // lowest one exactly; any one is enough here).
    let zero = |w: u64| w.wrapping_sub(LO) & !w & HI;
    let is = |w: u64, c: u8| zero(w ^ (LO * u64::from(c)));
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        let bad = zero(w & !(LO * 0x1f))    // < 0x20: no bit above the low five
            | is(w | (LO * 0x40), 0x7f)     // `?` and DEL: 0x7f once 0x40 is set
            | is(w & !(LO * 0x05), b'"')    // `"`, `'` (and `#`, `&`: escaped exactly after)
            | is(w, b'\\');
        if bad != 0 {
            return false;
        }
    }
    chunks
        .remainder()
        .iter()
        .all(|&c| crate::decode::text::plain_byte(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_strings_are_those_without_escapes() {
        for s in [
            &b""[..],
            b"hello-123",
            b"0123456789abcdefXYZ",
            b"tab\there",
            b"quote\"",
            b"back\\slash",
            b"caf\xc3\xa9",
            b"\x7f",
            b"ends with newline\n",
            b"\x1f is a control",
            b"0123456789abcdef\x01",
            b"it's",
            b"what?",
            b"0123456789abcdef?",
            b"\xff\xfe invalid UTF-8 prints as it is",
            b"01234567#",
            b"0123456789abcdef&",
        ] {
            let words = s.len() / 8 * 8;
            let want = s.iter().enumerate().all(|(i, &c)| {
                c >= 0x20
                    && c != 0x7f
                    && !matches!(c, b'"' | b'\\' | b'\'' | b'?')
                    && !(i < words && matches!(c, b'#' | b'&'))
            });
            assert_eq!(plain(s), want, "{:?}", String::from_utf8_lossy(s));
        }
    }

    /// babeltrace2's escapes (`print_escape_string` in its pretty sink),
    /// byte by byte: bytes that are not UTF-8 come out as they are.
    #[test]
    fn strings_escape_as_babeltrace2() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b"plain", b"plain"),
            (b"q\"b\\s'?", b"q\\\"b\\\\s\\'\\?"),
            (b"\x07\x08\t\n\x0b\x0c\r\x1b", b"\\a\\b\\t\\n\\v\\f\\r\\e"),
            (b"\x01\x1f\x7f", b"\\x01\\x1f\\x7f"),
            (b"cut \xc3", b"cut \xc3"),
            ("日本".as_bytes(), "日本".as_bytes()),
        ];
        for (s, want) in cases {
            let mut out = TextBuf::new();
            text_string_body(&mut out, s);
            assert_eq!(out.as_slice(), want, "{:?}", String::from_utf8_lossy(s));
        }
    }

    /// Integers in their declared base, as babeltrace2 2.0 prints them.
    #[test]
    fn integers_print_in_their_base_as_babeltrace2() {
        let cases: [(u64, bool, u32, Base, &str); 10] = [
            (5, false, 8, Base::Binary, "0b00000101"),
            (
                0,
                false,
                34,
                Base::Binary,
                &*Box::leak(format!("0b{}", "0".repeat(34)).into_boxed_str()),
            ),
            (-1i64 as u64, true, 3, Base::Binary, "0b111"),
            (0, false, 16, Base::Octal, "00"),
            (8, false, 16, Base::Octal, "010"),
            (-1i64 as u64, true, 5, Base::Octal, "077"),
            (-18i64 as u64, true, 16, Base::Hexadecimal, "0xFFEE"),
            (-1i64 as u64, true, 5, Base::Hexadecimal, "0xFF"),
            (255, false, 64, Base::Hexadecimal, "0xFF"),
            (-7i64 as u64, true, 12, Base::Decimal, "-7"),
        ];
        for (v, signed, bits, base, want) in cases {
            let mut out = TextBuf::new();
            text_bits(&mut out, v, signed, bits, base);
            assert_eq!(
                std::str::from_utf8(out.as_slice()).unwrap(),
                want,
                "{v} {bits} {base:?}"
            );
        }
    }
}
