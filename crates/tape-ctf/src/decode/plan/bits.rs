//! The bits of a packet being decoded, the interpreter's state, and the
//! reads of integers and alignment at any bit position, with the errors
//! that name it.

use super::*;

/// The bits of a packet being decoded.
pub(crate) struct Bits<'a> {
    pub buf: &'a [u8],
    pub pos: u64,
    pub end: u64,
}

/// State shared by the operations of one stream.
pub(crate) struct State {
    pub slots: Vec<i128>,
    pub clock: u64,
}

impl State {
    pub(crate) fn new(nslots: usize) -> State {
        State {
            slots: vec![NONE; nslots],
            clock: 0,
        }
    }

    pub(super) fn update_clock(&mut self, size: u32, v: u64) {
        if size >= 64 {
            self.clock = v;
            return;
        }
        let mask = (1u64 << size) - 1;
        if v < self.clock & mask {
            self.clock = self.clock.wrapping_add(mask + 1);
        }
        self.clock = (self.clock & !mask) | v;
    }
}

/// An error in a plan's run: bit offset and message (the reader adds file
/// and packet). Boxed, so that every `Result` of the hot loop fits in a
/// register.
pub(crate) struct RunError(pub(super) Box<(u64, String)>);

impl RunError {
    pub(crate) fn into_decode(self, file: &std::path::Path, packet: u64) -> DecodeError {
        let (bit, message) = *self.0;
        DecodeError {
            file: file.to_path_buf(),
            packet_offset: packet,
            bit_offset: bit,
            message,
        }
    }
}

#[cold]
pub(super) fn err(bits: &Bits<'_>, m: impl Into<String>) -> RunError {
    RunError(Box::new((bits.pos, m.into())))
}

#[inline]
pub(super) fn align(b: &mut Bits<'_>, a: u64) -> Result<(), RunError> {
    if a > 1 {
        // Alignments are powers of two (checked by the parser): a mask, not
        // a division.
        let p = (b.pos + a - 1) & !(a - 1);
        if p > b.end {
            return Err(err(b, "alignment goes past the end of the packet content"));
        }
        b.pos = p;
    }
    Ok(())
}

/// The error of a `size`-bit field that does not fit in the content.
#[cold]
fn past_end(b: &Bits<'_>, size: u32) -> RunError {
    err(
        b,
        format!(
            "a {size}-bit field goes past the end of the packet content (bit {})",
            b.end
        ),
    )
}

/// Advances over `size` bits without reading them.
#[inline]
pub(super) fn skip(b: &mut Bits<'_>, size: u32) -> Result<(), RunError> {
    let size64 = u64::from(size);
    if b.pos + size64 > b.end {
        return Err(past_end(b, size));
    }
    b.pos += size64;
    Ok(())
}

/// An integer of `size` bits (any size) at `b.pos`, as little-endian
/// bytes of its two's complement (`ceil(size / 8)` of them, the bits past
/// `size` zero). Bit `j` of the value is bit `j` from the field's start
/// for little endian, from its end for big endian (§4.1.5).
#[cold]
pub(super) fn read_wide(
    b: &mut Bits<'_>,
    size: u32,
    order: ByteOrder,
) -> Result<Vec<u8>, RunError> {
    let (start, size64) = (b.pos, u64::from(size));
    skip(b, size)?;
    let bit = |p: u64| b.buf[(p / 8) as usize] >> (p % 8) & 1;
    let bit_be = |p: u64| b.buf[(p / 8) as usize] >> (7 - p % 8) & 1;
    let mut v = vec![0u8; size.div_ceil(8) as usize];
    for j in 0..size64 {
        let x = match order {
            ByteOrder::Little => bit(start + j),
            ByteOrder::Big => bit_be(start + size64 - 1 - j),
        };
        v[(j / 8) as usize] |= x << (j % 8);
    }
    Ok(v)
}

#[inline]
pub(super) fn read_bits(b: &mut Bits<'_>, size: u32, order: ByteOrder) -> Result<u64, RunError> {
    let size64 = u64::from(size);
    if b.pos + size64 > b.end || size > 64 {
        return Err(past_end(b, size));
    }
    let start = b.pos;
    b.pos += size64;
    if let Some(v) = extract(b.buf, start, size, order) {
        return Ok(v);
    }
    // Unaligned: gather the bytes covering [start, start + size) into a u128.
    let first = (start / 8) as usize;
    let last = ((start + size64 - 1) / 8) as usize;
    let mut acc: u128 = 0;
    let shift = start % 8;
    match order {
        ByteOrder::Little => {
            for (k, &x) in b.buf[first..=last].iter().enumerate() {
                acc |= u128::from(x) << (8 * k);
            }
            acc >>= shift;
        }
        ByteOrder::Big => {
            for &x in &b.buf[first..=last] {
                acc = (acc << 8) | u128::from(x);
            }
            let total = ((last - first + 1) * 8) as u64;
            acc >>= total - shift - size64;
        }
    }
    let mask = if size == 64 {
        u128::from(u64::MAX)
    } else {
        (1u128 << size) - 1
    };
    Ok((acc & mask) as u64)
}
