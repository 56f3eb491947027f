//! Pieces of babeltrace2's default text format (`sink.text.pretty`), so
//! that the output of `tape show` can be grepped like babeltrace2's (the
//! line itself is written by [`write_line_prefix`] and [`write_event_rest`]):
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
pub mod sink;

use std::fmt::Write;

use crate::decode::plan::{Bits, Discard};
use crate::decode::stream::FastStream;
use crate::decode::DecodeError;
use crate::output::text::line::TextBuf;
use crate::output::text::sink::TextSink;

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

/// Writes one event line in babeltrace2's format: `[time] (+delta) host
/// name: { packet context }, { stream event context }, { event context },
/// { payload }` and a newline. `time` is the formatted time, `delta_ns` the
/// time since the previous event.
pub fn write_event_line(
    out: &mut TextBuf,
    time: &[u8],
    delta_ns: Option<i128>,
    stream: &mut FastStream,
) -> Result<(), DecodeError> {
    write_line_prefix(out, time, delta_ns);
    write_event_rest(out, stream)
}

/// The start of an event line: `[time] (+delta) `.
pub fn write_line_prefix(out: &mut TextBuf, time: &[u8], delta_ns: Option<i128>) {
    out.push(b'[');
    out.put(time);
    out.put(b"] ");
    match delta_ns {
        Some(d) => {
            // u64 arithmetic (an i128 division is a slow library call).
            let d = u64::try_from(d.max(0)).unwrap_or(u64::MAX);
            out.put(b"(+");
            out.seconds(d);
            out.put(b") ");
        }
        None => out.put(b"(+?.?????????) "),
    }
}

/// The rest of an event line after [`write_line_prefix`]: `host name:`,
/// the packet context and the event's scopes, and a newline.
pub fn write_event_rest(out: &mut TextBuf, stream: &mut FastStream) -> Result<(), DecodeError> {
    let Some((idx, _)) = stream.current else {
        return stream.emit(&mut Discard); // the error of an emit without peek
    };
    let sp = &stream.plan.streams[stream.stream];
    let ev = sp.events[idx].as_ref().expect("checked in header");
    let mark = ev.line_head(&stream.packet_text, out);
    let written = !stream.packet_text.is_empty();
    if let Some(text) = &ev.text {
        let mut b = Bits {
            buf: stream.buf.bytes(),
            pos: stream.pos,
            end: stream.content_end,
        };
        // An event of length 0 is an error the general path reports.
        if text.run(&mut b, &mut stream.state, out)
            && (b.pos > stream.pos || sp.event_header.is_some())
        {
            stream.pos = b.pos;
            stream.current = None;
            return Ok(());
        }
        out.truncate(mark);
    }
    let mut sink = TextSink::new(out, &[]).after_scope(written);
    stream.emit(&mut sink)?;
    out.push(b'\n');
    Ok(())
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
