//! The outputs: what a reader makes of decoded events, one module each
//! (`text/`: babeltrace2's text; `json`, `ftrace`, `graph`, `profile`,
//! `latency`: the latency snapshot's header), and their shared helpers
//! (this module's number writers, `event_text`: an event's text by its
//! read-time format, `function`: the function tracer's events). An output
//! never uses another output (`tests/layout.rs`).

pub(crate) mod calls;
pub mod chrome;
pub mod event_text;
pub mod export;
pub mod ftrace;
pub mod function;
pub mod graph;
pub mod json;
pub mod json_value;
pub mod latency;
pub mod perfetto;
pub mod profile;
pub mod text;

use crate::Base;

/// The text of `v` in a base, as babeltrace2 prints it (`0x1F`, `017`,
/// `0b101`, `31`), written at the end of `buf`.
#[inline]
pub(crate) fn uint_text(buf: &mut [u8; 66], v: u64, base: Base) -> &[u8] {
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
