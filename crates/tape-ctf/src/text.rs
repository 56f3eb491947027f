//! Pieces of babeltrace2's default text format (`sink.text.pretty`), so
//! that the output of `tape show` can be grepped like babeltrace2's (the
//! line itself is written by [`crate::fast::write_line_prefix`] and [`crate::fast::write_event_rest`]):
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

#[cfg(test)]
mod tests {
    use super::*;

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
