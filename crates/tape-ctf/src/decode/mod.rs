//! Decoded values, decoding errors and clock conversion, shared by the
//! decode plans ([`crate::decode::plan`]) and the readers ([`crate::decode::stream`]).
//!
//! How a stream is decoded (§4, §5, §6, §8):
//! A stream file is a sequence of packets. Each packet is read into one
//! buffer (so memory is bounded by the largest packet, not the file), then
//! decoded: `trace.packet.header`, `stream.packet.context`, then events until
//! `content_size`, each `stream.event.header`, `stream.event.context`,
//! `event.context`, `event.fields`. Offsets and alignment are relative to the
//! packet start; integers are read bit by bit in either byte order (§4.1.5:
//! in little endian, bit `i` of the stream is bit `i % 8` of byte `i / 8`; in
//! big endian, bit `7 - i % 8`).
//!
//! Every read is checked against the packet's content end, every length
//! against what remains, so a malformed stream gives an [`DecodeError`] with
//! the file, the packet offset and the bit offset, never a panic or an
//! allocation sized by an unchecked length.

pub mod json;
pub mod plan;
pub mod stream;
pub mod text;

use std::path::PathBuf;

pub use tape_ctf_model::Value;

use crate::Clock;

/// A decoding error: where and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The stream file.
    pub file: PathBuf,
    /// Byte offset of the packet in the file.
    pub packet_offset: u64,
    /// Bit offset in the packet.
    pub bit_offset: u64,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: packet at byte {}, bit {}: {}",
            self.file.display(),
            self.packet_offset,
            self.bit_offset,
            self.message
        )
    }
}

impl std::error::Error for DecodeError {}

/// Converts the values of a clock to ns since the clock's origin (§8):
/// `offset_s * 1e9 + ns(offset) + ns(value)`, where `ns(x)` is computed as
/// babeltrace2 2.0 does (`x * 1e9 / freq` in double precision, truncated;
/// exact when freq is 1 GHz), so that both print the same nanosecond. The
/// offsets are added once, here.
#[derive(Clone, Copy, Debug)]
pub struct ClockConv {
    /// `offset_s * 1e9 + ns(offset)`.
    base: i128,
    freq: u64,
}

impl ClockConv {
    /// The conversion of clock `c`.
    pub fn new(c: &Clock) -> ClockConv {
        let freq = c.freq.max(1);
        let base = i128::from(c.offset_s) * 1_000_000_000 + cycles_ns(freq, i128::from(c.offset));
        ClockConv { base, freq }
    }

    /// The time of clock value `cycles`, in ns since the clock's origin.
    #[inline]
    pub fn ns(&self, cycles: u64) -> i128 {
        self.base + cycles_ns(self.freq, i128::from(cycles))
    }
}

/// `x` cycles at `freq` Hz in ns, as babeltrace2 2.0 computes it.
#[inline]
fn cycles_ns(freq: u64, x: i128) -> i128 {
    if freq == 1_000_000_000 {
        return x;
    }
    let ns = x as f64 * 1e9 / freq as f64;
    // Through i64 when it fits: a float to i128 conversion is a slow
    // library call, and both truncate alike.
    if ns.abs() < 9.0e18 {
        i128::from(ns as i64)
    } else {
        ns as i128
    }
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
