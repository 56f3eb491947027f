//! The protocol buffers wire format, the part of it the Perfetto export
//! writes: varints, 64-bit fixed and double fields, length-delimited
//! strings and nested messages.
//!
//! Written by hand rather than generated (prost and Perfetto's
//! `perfetto_trace.proto`, about 26k lines of generated types): the export
//! writes some fifteen fields of eight messages, appends them straight into
//! one reused buffer per packet (no message structs, no allocation per
//! event), and a nested message's length is patched in place when it ends:
//!
//! ```text
//! begin(out, 4)        [key 0x22][len ?]                      placeholder: one byte
//! ...fields...         [key 0x22][len ?][name_iid][uint_value]
//! end(out, at)         [key 0x22][len 5][name_iid][uint_value]  one byte fits < 128;
//!                                                              longer: bytes shifted
//! ```
//!
//! Wire types: 0 varint, 1 64-bit, 2 length-delimited (proto2, unpacked
//! repeated fields, as Perfetto's `.proto` files declare them).

/// Appends `v` as a base-128 varint.
#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The bytes of `v` as a varint.
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

/// A varint field: `uint32`, `uint64`, `bool`, an enum.
#[inline]
pub(crate) fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

/// An `int32`/`int64` field: a negative value is its two's complement as
/// a 64-bit varint (ten bytes), as the format says for both.
#[inline]
pub(crate) fn int(out: &mut Vec<u8>, field: u32, v: i64) {
    uint(out, field, v as u64);
}

/// A `double` field.
#[inline]
pub(crate) fn double(out: &mut Vec<u8>, field: u32, v: f64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `fixed64` field.
#[inline]
pub(crate) fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `string` or `bytes` field.
#[inline]
pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, v: &[u8]) {
    key(out, field, 2);
    varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

/// Starts a nested message in `field`: its key and a one-byte length
/// placeholder. Returns where the placeholder is, for [`end`].
#[inline]
pub(crate) fn begin(out: &mut Vec<u8>, field: u32) -> usize {
    key(out, field, 2);
    out.push(0);
    out.len() - 1
}

/// Ends the nested message whose placeholder is at `at`: writes its
/// length, shifting the message when the length needs more than a byte.
#[inline]
pub(crate) fn end(out: &mut Vec<u8>, at: usize) {
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    let n = varint_len(len as u64);
    let mut head = [0u8; 10];
    let mut v = len as u64;
    for b in head.iter_mut().take(n) {
        *b = v as u8 & 0x7f | 0x80;
        v >>= 7;
    }
    head[n - 1] &= 0x7f;
    out.splice(at..at + 1, head[..n].iter().copied());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of the same format: (field, wire, value or bytes).
    fn read_varint(b: &[u8], i: &mut usize) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let x = b[*i];
            *i += 1;
            v |= u64::from(x & 0x7f) << shift;
            if x < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    fn fields(b: &[u8]) -> Vec<(u32, u8, Vec<u8>, u64)> {
        let mut i = 0;
        let mut out = Vec::new();
        while i < b.len() {
            let k = read_varint(b, &mut i);
            let (field, wire) = ((k >> 3) as u32, (k & 7) as u8);
            match wire {
                0 => out.push((field, wire, Vec::new(), read_varint(b, &mut i))),
                1 => {
                    let v = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
                    i += 8;
                    out.push((field, wire, Vec::new(), v));
                }
                2 => {
                    let n = read_varint(b, &mut i) as usize;
                    out.push((field, wire, b[i..i + n].to_vec(), n as u64));
                    i += n;
                }
                w => panic!("wire type {w}"),
            }
        }
        out
    }

    #[test]
    fn varints_are_base_128_little_endian() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0]),
            (1, &[1]),
            (127, &[0x7f]),
            (128, &[0x80, 1]),
            (300, &[0xac, 2]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x80, 0x80, 1]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1],
            ),
        ];
        for &(v, want) in cases {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(out, want, "{v}");
            assert_eq!(varint_len(v), want.len(), "{v}");
        }
        let mut out = Vec::new();
        int(&mut out, 4, -1);
        assert_eq!(out.len(), 11, "a negative int64 is ten bytes after its key");
    }

    #[test]
    fn nested_lengths_are_patched_at_every_size() {
        // Sizes around each varint length boundary, nested two deep.
        for len in [0usize, 1, 126, 127, 128, 129, 16_383, 16_384, 70_000] {
            let mut out = vec![0xAA];
            let outer = begin(&mut out, 11);
            let inner = begin(&mut out, 4);
            bytes(&mut out, 6, &vec![b'x'; len]);
            end(&mut out, inner);
            uint(&mut out, 9, 3);
            end(&mut out, outer);
            assert_eq!(out[0], 0xAA);
            let top = fields(&out[1..]);
            assert_eq!(top.len(), 1);
            assert_eq!((top[0].0, top[0].1), (11, 2));
            let mid = fields(&top[0].2);
            assert_eq!((mid[0].0, mid[1].0, mid[1].3), (4, 9, 3), "len {len}");
            let leaf = fields(&mid[0].2);
            assert_eq!(leaf[0].2, vec![b'x'; len], "len {len}");
        }
    }
}
