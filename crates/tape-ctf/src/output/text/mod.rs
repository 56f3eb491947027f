//! Pieces of babeltrace2's default text format (`sink.text.pretty`), so
//! that the output of `tape show` can be grepped like babeltrace2's (the
//! line itself is written by [`crate::decode::stream::write_line_prefix`] and [`crate::decode::stream::write_event_rest`]):
//!
//! ```text
//! [10:00:00.475336892] (+0.000980368) host app.net.rx: { cpu_id = 0 }, { port = 3, ifname = "eth0" }
//! ```
//!
//! The time is the event's clock value in the local time zone; the delta is
//! from the previous event (`+?.?????????` for the first); `host` is the
//! trace's `env.hostname` when it has one. Then, each in braces: the packet
//! context without the fields babeltrace2 hides (timestamps, sizes, sequence
//! number, discarded count), the stream event context, the event context and
//! the payload.

pub mod line;
pub mod parallel;

use std::fmt::Write;

/// A field name as shown: one leading `_` removed (§4.2.1).
pub fn shown_name(n: &str) -> &str {
    n.strip_prefix('_').unwrap_or(n)
}

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

/// The text of an integer of any size: `v` holds the little-endian bytes
/// of its two's complement on `bits` bits. Decimal (signed or not), or the
/// forms babeltrace2 2.0 gives the integers it reads, extended to any
/// size: `0x` and capital digits cut to whole nibbles, `0` and octal
/// digits (a negative value cut to whole octal digits), `0b` and all
/// `bits` digits. (Written here: no crate is needed for one conversion.)
pub fn wide_int(v: &[u8], signed: bool, bits: u32, base: crate::Base) -> String {
    use crate::Base;
    let bits = bits.max(1);
    let bit = |j: u32| {
        v.get((j / 8) as usize)
            .is_some_and(|b| b >> (j % 8) & 1 == 1)
    };
    let negative = signed && bit(bits - 1);
    // `bits` bits, as 32-bit limbs, low first.
    let limbs = |width: u32| -> Vec<u32> {
        let mut l = vec![0u32; width.div_ceil(32) as usize];
        for j in 0..width {
            if bit(j) {
                l[(j / 32) as usize] |= 1 << (j % 32);
            }
        }
        l
    };
    // Digits of `l` in a power-of-two radix, most significant first, no
    // leading zeros (at least one digit).
    let pow2 = |width: u32, shift: u32| -> String {
        let n = width.div_ceil(shift);
        let mut s = String::new();
        for k in (0..n).rev() {
            let mut d = 0;
            for i in 0..shift {
                let j = k * shift + i;
                if j < bits && bit(j) {
                    d |= 1 << i;
                }
            }
            if d != 0 || !s.is_empty() || k == 0 {
                s.push(
                    char::from_digit(d, 1 << shift)
                        .expect("digit")
                        .to_ascii_uppercase(),
                );
            }
        }
        s
    };
    match base {
        Base::Binary => (0..bits).rev().fold(String::from("0b"), |mut s, j| {
            s.push(if bit(j) { '1' } else { '0' });
            s
        }),
        Base::Hexadecimal => format!("0x{}", pow2(bits, 4)),
        Base::Octal => {
            let digits = pow2(bits, 3);
            format!("0{digits}")
        }
        Base::Decimal => {
            let mut l = limbs(bits);
            if negative {
                // Two's complement on `bits` bits: invert and add one.
                let top = bits % 32;
                for x in &mut l {
                    *x = !*x;
                }
                if top != 0 {
                    *l.last_mut().expect("a limb") &= (1u32 << top) - 1;
                }
                for x in &mut l {
                    let (y, carry) = x.overflowing_add(1);
                    *x = y;
                    if !carry {
                        break;
                    }
                }
            }
            // Repeated division by 10^9, nine digits at a time.
            let mut chunks = Vec::new();
            while l.iter().any(|&x| x != 0) {
                let mut rem = 0u64;
                for x in l.iter_mut().rev() {
                    let cur = (rem << 32) | u64::from(*x);
                    *x = (cur / 1_000_000_000) as u32;
                    rem = cur % 1_000_000_000;
                }
                chunks.push(rem);
            }
            let mut s = String::from(if negative { "-" } else { "" });
            match chunks.split_last() {
                None => s.push('0'),
                Some((top, rest)) => {
                    s.push_str(&top.to_string());
                    for c in rest.iter().rev() {
                        s.push_str(&format!("{c:09}"));
                    }
                }
            }
            s
        }
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
            assert_eq!(wide_int(&v, signed, bits, base), want, "{bits} {base:?}");
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
