//! Field types: how each Rust type is encoded in an event and described in CTF.
//!
//! A type can be a tracepoint argument when it implements [`Field`]:
//! its encoder ([`Encode`]), its fixed size and its CTF description all live
//! in one impl, so the encoded bytes and the metadata cannot disagree.
//! Fields are packed with byte alignment (no padding), in the machine's byte
//! order, which the metadata declares.
//!
//! | Rust type            | bytes          | CTF type                                  | babeltrace shows |
//! |----------------------|----------------|-------------------------------------------|------------------|
//! | `u8`..`u64`, `i8`..`i64` | 1..8       | `integer { size = 8..64; signed }`        | `42`, `-1`       |
//! | `usize`, `isize`     | 8 (64-bit)     | 64-bit integer                            | `42`             |
//! | `f32`, `f64`         | 4, 8           | `floating_point` 8/24, 11/53              | `1.5`, `nan`     |
//! | `bool`               | 1              | `enum : uint8 { "false" = 0, "true" = 1 }`| `( "true" : container = 1 )` |
//! | `char`               | 4              | `uint8 (UTF8) [4]`: UTF-8, NUL padded     | `"é"`            |
//! | `*const T`, `*mut T` | 8              | 64-bit integer, `base = 16`               | `0x7ffd...`      |
//! | `&str`               | len + 1        | `string` (NUL terminated)                 | `"eth0"`         |
//! | `&[u8]`              | 4 + len        | `uint32 _x_len; uint8 x[_x_len]` (hex)    | `[ [0] = 0x1 ]`  |
//!
//! **Strings** are recorded whole (no 32-byte cut as in DPDK). CTF strings
//! end at the first NUL byte, so a `&str` with an interior NUL is recorded up
//! to that NUL and the rest is not recorded: a reader could not see it, and
//! writing it would shift the fields after it.
//!
//! The next issues add arrays, sequences of every numeric type, enums, flags
//! and nested structs: each is one more `Field` impl (or a derive writing
//! one); nothing in the emit path changes.

use std::ptr;

use tape_ctf::{Encoding, Enum, EnumEntry, Float, Integer, Type};

/// Encoding into a reserved area of an event. Implemented by every
/// [`Field`] and by tuples of them (the payload of an event).
///
/// # Safety
/// `encode` must write at most `max_size()` bytes starting at `dst`, and
/// return the end of what it wrote. The emit path relies on it to stay
/// inside the reserved space.
pub unsafe trait Encode {
    /// Upper bound of the encoded size in bytes.
    fn max_size(&self) -> usize;

    /// Writes the value at `dst`, returning the end of what was written.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `max_size()` bytes.
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8;
}

/// A type that can be a tracepoint field.
pub trait Field: Encode {
    /// Bytes always written for this type (the whole size for fixed-size types).
    const FIXED_SIZE: usize;

    /// Appends the CTF fields that describe a field of this type named `name`
    /// (a sequence appends its length field first).
    fn describe(name: &str, out: &mut Vec<tape_ctf::Field>);
}

/// A field of a tracepoint: its name and how to describe it.
#[derive(Debug)]
pub struct FieldDesc {
    /// Argument name.
    pub name: &'static str,
    /// Writes the CTF description (from the type's [`Field`] impl).
    pub describe: fn(&str, &mut Vec<tape_ctf::Field>),
}

/// Writes `v` unaligned at `dst` and returns the address after it.
///
/// # Safety
/// `dst` must be valid for `size_of::<T>()` bytes of writes.
#[inline(always)]
unsafe fn put<T: Copy>(dst: *mut u8, v: T) -> *mut u8 {
    // SAFETY: the caller guarantees `size_of::<T>()` writable bytes at `dst`;
    // `write_unaligned` has no alignment requirement.
    unsafe {
        ptr::write_unaligned(dst.cast::<T>(), v);
        dst.add(size_of::<T>())
    }
}

macro_rules! scalar_fields {
    ($($t:ty => $ctf:expr),* $(,)?) => {$(
        // SAFETY: writes exactly size_of::<$t>() == max_size() bytes.
        unsafe impl Encode for $t {
            #[inline(always)]
            fn max_size(&self) -> usize {
                size_of::<$t>()
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                // SAFETY: forwarded from the caller (max_size bytes at dst).
                unsafe { put(dst, *self) }
            }
        }
        impl Field for $t {
            const FIXED_SIZE: usize = size_of::<$t>();
            fn describe(name: &str, out: &mut Vec<tape_ctf::Field>) {
                out.push(tape_ctf::Field::new(name, $ctf));
            }
        }
    )*};
}

scalar_fields! {
    u8 => Type::Integer(Integer::unsigned(8)),
    u16 => Type::Integer(Integer::unsigned(16)),
    u32 => Type::Integer(Integer::unsigned(32)),
    u64 => Type::Integer(Integer::unsigned(64)),
    i8 => Type::Integer(Integer::signed(8)),
    i16 => Type::Integer(Integer::signed(16)),
    i32 => Type::Integer(Integer::signed(32)),
    i64 => Type::Integer(Integer::signed(64)),
    usize => Type::Integer(Integer::unsigned(usize::BITS)),
    isize => Type::Integer(Integer::signed(usize::BITS)),
    f32 => Type::Float(Float::binary32()),
    f64 => Type::Float(Float::binary64()),
}

// SAFETY: writes one byte, == max_size().
unsafe impl Encode for bool {
    #[inline(always)]
    fn max_size(&self) -> usize {
        1
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { put(dst, u8::from(*self)) }
    }
}

impl Field for bool {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Vec<tape_ctf::Field>) {
        let entry = |label: &str, v| EnumEntry {
            label: label.into(),
            start: v,
            end: v,
        };
        out.push(tape_ctf::Field::new(
            name,
            Type::Enum(Enum {
                container: Integer::unsigned(8),
                entries: vec![entry("false", 0), entry("true", 1)],
            }),
        ));
    }
}

// SAFETY: writes four bytes, == max_size().
unsafe impl Encode for char {
    #[inline(always)]
    fn max_size(&self) -> usize {
        4
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let mut buf = [0u8; 4];
        self.encode_utf8(&mut buf);
        // SAFETY: forwarded from the caller.
        unsafe { put(dst, buf) }
    }
}

impl Field for char {
    const FIXED_SIZE: usize = 4;
    fn describe(name: &str, out: &mut Vec<tape_ctf::Field>) {
        out.push(tape_ctf::Field::new(
            name,
            Type::Array {
                element: Box::new(Type::Integer(Integer::unsigned(8).utf8())),
                len: 4,
            },
        ));
    }
}

macro_rules! pointer_fields {
    ($($t:ty),*) => {$(
        // SAFETY: writes a usize, == max_size().
        unsafe impl<T: ?Sized> Encode for $t {
            #[inline(always)]
            fn max_size(&self) -> usize {
                size_of::<usize>()
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                // SAFETY: forwarded from the caller.
                unsafe { put(dst, self.cast::<u8>() as usize) }
            }
        }
        impl<T: ?Sized> Field for $t {
            const FIXED_SIZE: usize = size_of::<usize>();
            fn describe(name: &str, out: &mut Vec<tape_ctf::Field>) {
                out.push(tape_ctf::Field::new(
                    name,
                    Type::Integer(Integer::unsigned(usize::BITS).hex()),
                ));
            }
        }
    )*};
}

pointer_fields!(*const T, *mut T);

// SAFETY: writes at most len + 1 bytes: the bytes before the first NUL and
// one NUL.
unsafe impl Encode for &str {
    #[inline(always)]
    fn max_size(&self) -> usize {
        self.len() + 1
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let bytes = self.as_bytes();
        // An interior NUL ends the string (module docs).
        let n = if bytes.len() <= SHORT_STRING {
            // SAFETY: forwarded from the caller: len + 1 bytes at dst.
            unsafe { copy_short_until_nul(bytes, dst) }
        } else {
            let n = memchr::memchr(0, bytes).unwrap_or(bytes.len());
            // SAFETY: n <= len <= max_size() - 1 bytes; source and
            // destination do not overlap (dst is in a ring, bytes is not).
            unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            n
        };
        // SAFETY: n <= len, so the NUL is the (n + 1)-th of at most
        // max_size() = len + 1 bytes.
        unsafe {
            *dst.add(n) = 0;
            dst.add(n + 1)
        }
    }
}

/// Strings up to this length are copied inline, a word at a time, finding
/// an interior NUL on the way; longer ones use `memchr` and `memcpy`, whose
/// call overhead then no longer matters (measured: the inline copy takes a
/// 16-byte string from ~60 to ~35 TSC ticks per event).
const SHORT_STRING: usize = 64;

/// Copies `src` to `dst` up to its first NUL (excluded); returns the number
/// of bytes copied.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes, not overlapping `src`.
#[inline(always)]
unsafe fn copy_short_until_nul(src: &[u8], dst: *mut u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let len = src.len();
    let mut i = 0;
    while i + 8 <= len {
        // SAFETY: i + 8 <= len: the 8 bytes are inside `src`.
        let w = unsafe { ptr::read_unaligned(src.as_ptr().add(i).cast::<u64>()) };
        // A word with a zero byte (the classic SWAR test): finish bytewise.
        if w.wrapping_sub(ONES) & !w & HIGHS != 0 {
            break;
        }
        // SAFETY: i + 8 <= len bytes of `dst` are writable (caller).
        unsafe { ptr::write_unaligned(dst.add(i).cast::<u64>(), w) };
        i += 8;
    }
    while i < len && src[i] != 0 {
        // SAFETY: i < len bytes of `dst` are writable (caller).
        unsafe { *dst.add(i) = src[i] };
        i += 1;
    }
    i
}

impl Field for &str {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Vec<tape_ctf::Field>) {
        out.push(tape_ctf::Field::new(name, Type::String(Encoding::Utf8)));
    }
}

// SAFETY: writes a u32 length and the bytes: 4 + len == max_size(), when
// len fits u32; longer slices are cut to u32::MAX bytes (never reached:
// packets are smaller).
unsafe impl Encode for &[u8] {
    #[inline(always)]
    fn max_size(&self) -> usize {
        4 + self.len()
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let n = self.len().min(u32::MAX as usize);
        // SAFETY: 4 + n <= max_size() bytes written; no overlap.
        unsafe {
            let p = put(dst, n as u32);
            ptr::copy_nonoverlapping(self.as_ptr(), p, n);
            p.add(n)
        }
    }
}

impl Field for &[u8] {
    const FIXED_SIZE: usize = 4;
    fn describe(name: &str, out: &mut Vec<tape_ctf::Field>) {
        let len = format!("_{name}_len");
        out.push(tape_ctf::Field::new(
            len.clone(),
            Type::Integer(Integer::unsigned(32)),
        ));
        out.push(tape_ctf::Field::new(
            name,
            Type::Sequence {
                element: Box::new(Type::Integer(Integer::unsigned(8).hex())),
                length: tape_ctf::escape_name(&len),
            },
        ));
    }
}

// SAFETY: the empty payload writes nothing.
unsafe impl Encode for () {
    #[inline(always)]
    fn max_size(&self) -> usize {
        0
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        dst
    }
}

macro_rules! tuple_encode {
    ($($name:ident)+) => {
        // SAFETY: each element writes at most its max_size(), one after the
        // other; the sum is the tuple's max_size().
        #[allow(non_snake_case)]
        unsafe impl<$($name: Encode),+> Encode for ($($name,)+) {
            #[inline(always)]
            fn max_size(&self) -> usize {
                let ($($name,)+) = self;
                0 $(+ $name.max_size())+
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                let ($($name,)+) = self;
                let p = dst;
                // SAFETY: the caller gave max_size() bytes, the sum of the
                // elements' bounds; each writes within its own bound.
                $(let p = unsafe { $name.encode(p) };)+
                p
            }
        }
    };
}

tuple_encode!(A);
tuple_encode!(A B);
tuple_encode!(A B C);
tuple_encode!(A B C D);
tuple_encode!(A B C D E);
tuple_encode!(A B C D E F);
tuple_encode!(A B C D E F G);
tuple_encode!(A B C D E F G H);
tuple_encode!(A B C D E F G H I);
tuple_encode!(A B C D E F G H I J);
tuple_encode!(A B C D E F G H I J K);
tuple_encode!(A B C D E F G H I J K L);

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<E: Encode>(v: E) -> Vec<u8> {
        let mut buf = vec![0xeeu8; v.max_size()];
        // SAFETY: buf holds max_size() bytes.
        let end = unsafe { v.encode(buf.as_mut_ptr()) };
        let n = end as usize - buf.as_ptr() as usize;
        buf.truncate(n);
        buf
    }

    #[test]
    fn encodings() {
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (bytes(0x0102u16), 0x0102u16.to_ne_bytes().to_vec()),
            (bytes(-1i64), vec![0xff; 8]),
            (bytes(true), vec![1]),
            (bytes('é'), vec![0xc3, 0xa9, 0, 0]),
            (bytes("ab"), b"ab\0".to_vec()),
            (bytes("a\0b"), b"a\0".to_vec()),
            (bytes("0123456789\0abcdef"), b"0123456789\0".to_vec()),
            (bytes("01234567\0"), b"01234567\0".to_vec()),
            (bytes(&*"x".repeat(64)), [&[b'x'; 64][..], b"\0"].concat()),
            (
                bytes(&*format!("{}\0y", "x".repeat(70))),
                [&[b'x'; 70][..], b"\0"].concat(),
            ),
            (
                bytes(&*"é".repeat(40)),
                [&*"é".repeat(40).into_bytes(), &b"\0"[..]].concat(),
            ),
            (bytes(""), b"\0".to_vec()),
            (
                bytes(&[1u8, 2][..]),
                [&2u32.to_ne_bytes()[..], &[1, 2]].concat(),
            ),
            (bytes((1u8, "x", 2u8)), b"\x01x\0\x02".to_vec()),
            (bytes(1.5f64), 1.5f64.to_ne_bytes().to_vec()),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
