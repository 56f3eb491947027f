//! Decoded values, decoding errors and clock conversion, shared by the
//! decode plans (`plan/`) and the readers (`stream.rs`).
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

pub(crate) mod json;
pub(crate) mod plan;
pub(crate) mod stream;
pub(crate) mod text;

// The decoder as other crates see it, one level down: the readers and
// their plan, the value sinks, and the text pieces `tape show` and
// `tape pipe` write their lines with. The files below stay where their
// floors put them (plan, then stream, then text); this is the door.
pub use json::JsonSink;
pub use plan::{Discard, Sink, StructPlan, ValueSink};
pub use stream::{
    losses_by_stream, open_streams, Keep, LostByCause, Next, PacketBuf, Shown, StreamCount,
    StreamReader, TracePlan,
};
pub use text::buf::TextBuf;
pub use text::{open_line, TimeText};

use std::path::PathBuf;

pub(crate) use tape_ctf_model::sink::wide_int;
pub(crate) use tape_ctf_model::Value;

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
