//! Decoding straight into text: the pieces of babeltrace2's text format
//! that the stream reader ([`crate::decode::stream`]) writes while it
//! decodes, so `tape show`'s hot loop turns an event's bytes into its line
//! without a value tree: the text buffer written with wide stores
//! ([`buf`]: `TextBuf`), how integers, enumerations, floats and strings
//! are written into it ([`value`]), the line programs compiled from the
//! decode plans ([`line`](mod@line): `TextProgram`), the value sink that writes a
//! scope's text ([`sink`]: `TextSink`, for the packet context and the
//! classes a program does not cover), and how a line's time is
//! ([`TimeText`], chosen by the caller). Each uses only those before it
//! in this list (and this file's number and string helpers).
//! The outputs (`crate::output::text`, its parallel renderer, `tape
//! show`'s JSON) build on them; nothing here uses an output.

pub(crate) mod buf;
pub(crate) mod line;
pub(crate) mod sink;
pub(crate) mod value;

use std::fmt::Write;

use crate::decode::text::buf::TextBuf;
use crate::Base;

/// C's `%g`: six significant digits, the shorter of fixed and exponent.
pub fn float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str(if f.is_sign_negative() { "-nan" } else { "nan" });
        return;
    }
    if f.is_infinite() {
        out.push_str(if f < 0.0 { "-inf" } else { "inf" });
        return;
    }
    if f == 0.0 {
        out.push_str(if f.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    let e = format!("{f:.5e}");
    let (mant, exp) = e.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    if !(-4..6).contains(&exp) {
        let mant = trim_zeros(mant);
        let _ = write!(
            out,
            "{mant}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    } else {
        let decimals = (5 - exp).max(0) as usize;
        let s = format!("{f:.decimals$}");
        out.push_str(trim_zeros(&s));
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The bytes of a string escaped as babeltrace2 prints them (between its
/// quotes): `\\`, `\'`, `\"` and `\?` escaped; the control characters
/// (0x00-0x1f, 0x7f) as C escapes (`\a \b \t \n \v \f \r \e`) or `\xNN`;
/// every other byte as it is, so text that is not UTF-8 comes out
/// byte for byte, as babeltrace2 writes it.
pub fn escape_into(out: &mut Vec<u8>, s: &[u8]) {
    for &c in s {
        let esc: &[u8] = match c {
            b'\\' => b"\\\\",
            b'\'' => b"\\'",
            b'"' => b"\\\"",
            b'?' => b"\\?",
            0x07 => b"\\a",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0b => b"\\v",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0x1b => b"\\e",
            0x00..=0x1f | 0x7f => {
                let hex = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    hex[usize::from(c >> 4)],
                    hex[usize::from(c & 15)],
                ]);
                continue;
            }
            _ => {
                out.push(c);
                continue;
            }
        };
        out.extend_from_slice(esc);
    }
}

/// Whether a byte prints as it is in a string (see [`escape_into`]).
#[inline]
pub const fn plain_byte(c: u8) -> bool {
    c >= 0x20 && c != 0x7f && c != b'"' && c != b'\\' && c != b'\'' && c != b'?'
}

/// The text of `v` in a base, as babeltrace2 prints it (`0x1F`, `017`,
/// `0b101`, `31`), written at the end of `buf`.
#[inline]
pub fn uint_text(buf: &mut [u8; 66], v: u64, base: Base) -> &[u8] {
    let (radix, prefix): (u64, &[u8]) = match base {
        Base::Hexadecimal => (16, b"0x"),
        Base::Octal => (8, b"0"),
        Base::Binary => (2, b"0b"),
        Base::Decimal => (10, b""),
    };
    let mut i = buf.len();
    let mut x = v;
    loop {
        i -= 1;
        buf[i] = b"0123456789ABCDEF"[(x % radix) as usize];
        x /= radix;
        if x == 0 {
            break;
        }
    }
    i -= prefix.len();
    buf[i..i + prefix.len()].copy_from_slice(prefix);
    &buf[i..]
}
/// Writes the time of an event line (the `HH:MM:SS.nnnnnnnnn` of
/// babeltrace2, or seconds since the epoch). Each worker has its own copy,
/// so that it may keep a cache (the broken-down time of the last second).
pub trait TimeText: Clone + Send {
    /// Appends the text of time `ns` (ns since the epoch) to `out`.
    fn write(&mut self, out: &mut TextBuf, ns: i128);

    /// Starts a text line: `[` and the time `t`, or `??:??:??.?????????`
    /// for an event without one. (An implementation that writes the
    /// opening its own way falls back on [`open_line`].)
    #[inline(always)]
    fn open_line(&mut self, out: &mut TextBuf, t: Option<i128>) {
        open_line(self, out, t);
    }
}

/// [`TimeText::open_line`] as provided: `[`, then the time by `time`.
#[inline(always)]
pub fn open_line<T: TimeText>(time: &mut T, out: &mut TextBuf, t: Option<i128>) {
    out.push(b'[');
    match t {
        Some(ns) => time.write(out, ns),
        None => out.put(b"??:??:??.?????????"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_integers_in_every_base() {
        use crate::Base;
        let le = |v: u128| v.to_le_bytes().to_vec();
        let cases: [(Vec<u8>, bool, u32, Base, String); 9] = [
            (
                le(u128::MAX),
                false,
                128,
                Base::Decimal,
                u128::MAX.to_string(),
            ),
            (le(u128::MAX), true, 128, Base::Decimal, "-1".into()),
            (
                le(1 << 100),
                true,
                128,
                Base::Decimal,
                (1u128 << 100).to_string(),
            ),
            (le((1 << 72) - 5), true, 72, Base::Decimal, "-5".into()),
            (le(0), false, 65, Base::Decimal, "0".into()),
            (le(0xABC), false, 80, Base::Hexadecimal, "0xABC".into()),
            (le(8), false, 70, Base::Octal, "010".into()),
            (
                le(5),
                false,
                66,
                Base::Binary,
                format!("0b{}101", "0".repeat(63)),
            ),
            (vec![0xff; 128], false, 1024, Base::Decimal, {
                // 2^1024 - 1
                let mut digits = vec![1u32];
                for _ in 0..1024 {
                    let mut carry = 0;
                    for x in digits.iter_mut() {
                        let y = *x * 2 + carry;
                        *x = y % 10;
                        carry = y / 10;
                    }
                    if carry > 0 {
                        digits.push(carry);
                    }
                }
                digits[0] -= 1; // 2^1024 ends in 6: no borrow
                digits
                    .iter()
                    .rev()
                    .map(|d| char::from_digit(*d, 10).unwrap())
                    .collect()
            }),
        ];
        for (v, signed, bits, base, want) in cases {
            assert_eq!(
                crate::decode::wide_int(&v, signed, bits, base),
                want,
                "{bits} {base:?}"
            );
        }
    }

    #[test]
    fn floats_print_like_percent_g() {
        let cases = [
            (1.5, "1.5"),
            (1.0 / 3.0, "0.333333"),
            (f64::MAX, "1.79769e+308"),
            (1e-300, "1e-300"),
            (123456789.0, "1.23457e+08"),
            (123456.0, "123456"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (-2.5, "-2.5"),
            (-0.0, "-0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::from(f32::MIN_POSITIVE), "1.17549e-38"),
            (2619.32, "2619.32"),
            (100.0, "100"),
            (999999.5, "1e+06"),
        ];
        for (f, want) in cases {
            let mut s = String::new();
            float(&mut s, f);
            assert_eq!(s, want, "{f:e}");
        }
    }
}
