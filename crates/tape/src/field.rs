//! Field types: how each Rust type is encoded in an event and described in CTF.
//!
//! A type can be a tracepoint argument when it implements [`Field`]:
//! its encoder ([`Encode`]), its fixed size and its CTF description all live
//! in one impl, so the encoded bytes and the metadata cannot disagree.
//! Fields are packed with byte alignment (no padding), in the machine's byte
//! order, which the metadata declares.
//!
//! | Rust type            | bytes          | CTF type                                  | babeltrace2 shows |
//! |----------------------|----------------|-------------------------------------------|------------------|
//! | `u8`..`u64`, `i8`..`i64` | 1..8       | `integer { size = 8..64; signed }`        | `42`, `-1`       |
//! | `usize`, `isize`     | 8 (64-bit)     | 64-bit integer                            | `42`             |
//! | `f32`, `f64`         | 4, 8           | `floating_point` 8/24, 11/53              | `1.5`, `nan`     |
//! | `bool`               | 1              | `enum : uint8 { "false" = 0, "true" = 1 }`| `( "true" : container = 1 )` |
//! | `char`               | 4              | `uint8 (UTF8) [4]`: UTF-8, NUL padded     | `"é"`            |
//! | `*const T`, `*mut T` | 8              | 64-bit integer, `base = 16`               | `0x7ffd...`      |
//! | [`Hex<T>`] (an integer) | as `T`      | the integer with `base = 16`              | `0x1F`           |
//! | `&str`, `String`, `&CStr` | len + 1   | `string` (NUL terminated)                 | `"eth0"`         |
//! | `[u8; N]`            | N              | `uint8 (UTF8) [N]`: text, the kernel's `char comm[16]` | `"bash"` |
//! | `[T; N]` (`T` an [`Element`]) | N × size | `T x[N]`                               | `[ [0] = 1, [1] = 2 ]` |
//! | `&[T]` (`T` an [`Element`])   | 4 + len × size | `uint32 _x_len; T x[_x_len]` (`u8` in hex) | `[ [0] = 1 ]` |
//! | `Option<T>`          | 1 (+ `T`)      | `enum : uint8 { none, some } _x_tag; variant <_x_tag> { struct { } none; T some; } x` | `{ 5 }`, `{ { } }` |
//! | `#[derive(tape::Enum)]` enum | its `repr` | `enum : repr { "Read" = 1, ... }`    | `( "Read" : container = 1 )` |
//! | [`flags!`](crate::flags) type | its bits | integer, `base = 16`; names in a hint | `0x43`        |
//! | `#[derive(tape::Fields)]` struct | sum of fields | `struct { ... }`                | `{ len = 3, kind = ... }` |
//! | `Ipv4Addr`, `Ipv6Addr` | 4, 16        | `uint8 [4]`, `uint8 [16]` (hex); hint `ipv4`/`ipv6` | `[ [0] = 10, ... ]` |
//! | `Duration`           | 8              | `uint64` nanoseconds (saturating); hint `duration` | `1500000`  |
//! | `&T` (`T` a field)   | as `T`         | as `T`                                    |                  |
//!
//! **Strings** are recorded whole (no 32-byte cut as in DPDK). CTF strings
//! end at the first NUL byte, so a `&str` with an interior NUL is recorded up
//! to that NUL and the rest is not recorded: a reader could not see it, and
//! writing it would shift the fields after it.
//!
//! **`Option<T>`** is a CTF variant selected by a one-byte tag field named
//! `_<name>_tag` (`none` = 0, `some` = 1): a reader sees exactly which
//! option was recorded, and `None` costs one byte. (A present-flag beside a
//! always-written value would cost the value's bytes for every `None`.)
//!
//! **Hints** say how a value reads best where CTF has no type for it
//! (flags, addresses, durations). They are not in the CTF types, which stay
//! plain integers and arrays that every reader shows; the trace saves them in
//! its `env` block (`tape_hints_<event id>`), and `tape show --format ftrace`
//! applies them (`READ|WRITE|0x40`, `10.0.0.1`, `1.5ms`).

use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ptr;
use std::time::Duration;

use tape_ctf_model::{Encoding, Enum, EnumEntry, Float, Integer, Struct, Type};

/// Encoding into a reserved area of an event. Implemented by every
/// [`Field`] and by tuples of them (the payload of an event).
///
/// # Safety
/// `encode` must write at most `max_size()` bytes starting at `dst`, and
/// return the end of what it wrote. The emit path relies on it to stay
/// inside the reserved space.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tracepoint field type",
    label = "not a field type",
    note = "field types: u8..u64, i8..i64, usize, isize, f32, f64, bool, char, &str, String, &CStr, CString, [u8; N], [T; N] and &[T] of those numbers, bool or Hex, Option<T>, Ipv4Addr, Ipv6Addr, Duration, *const T, tape::Hex<T>, a #[derive(tape::Enum)] enum, a tape::flags! type, &S for a #[derive(tape::Fields)] struct S",
    note = "a Vec<T> is recorded as a slice: declare the field `&[T]` and pass `&v`; a struct of yours needs #[derive(tape::Fields)] and is passed by reference"
)]
pub unsafe trait Encode {
    /// Upper bound of the encoded size in bytes.
    fn max_size(&self) -> usize;

    /// Writes the value at `dst`, returning the end of what was written.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `max_size()` bytes.
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8;

    /// Whether [`encode`](Encode::encode) of this value runs inline,
    /// calling no function (a long string's `memchr` and `memcpy`, a long
    /// slice's `memcpy` are calls). The emit path records such a value in
    /// a leaf function (no register saved, no frame) and sends the others
    /// to its out-of-line path: the same event, a call and a frame more.
    /// A hint for speed, never for correctness. Default: yes.
    #[inline(always)]
    fn is_inline(&self) -> bool {
        true
    }
}

/// Encodes `payload` into a stack buffer of `N` bytes and runs `f` on the
/// bytes written (the test of a filter, a trigger's condition, an untyped
/// probe's view); `None`, `f` not run, when the encoding may need more than
/// `N` bytes. The buffer is not zeroed first (hundreds of stores per
/// event): only what `encode` wrote is read.
#[inline(always)]
pub(crate) fn with_encoded<const N: usize, P: Encode + ?Sized, R>(
    payload: &P,
    f: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    if payload.max_size() > N {
        return None;
    }
    let mut buf = std::mem::MaybeUninit::<[u8; N]>::uninit();
    let start = buf.as_mut_ptr().cast::<u8>();
    // SAFETY: the buffer holds N >= max_size() bytes, the most `encode`
    // writes; it initialises the bytes from `start` up to the pointer it
    // returns, and only those are read.
    let bytes = unsafe {
        let end = payload.encode(start);
        let n = (end as usize - start as usize).min(N);
        std::slice::from_raw_parts(start, n)
    };
    Some(f(bytes))
}

/// [`with_encoded`] into a heap buffer, for an event too big for the stack
/// (an untyped probe's view: the probe path's one allocation).
pub(crate) fn encode_to_vec<P: Encode + ?Sized>(payload: &P) -> Vec<u8> {
    let mut v = vec![0u8; payload.max_size()];
    // SAFETY: `v` holds max_size() bytes.
    let end = unsafe { payload.encode(v.as_mut_ptr()) };
    let n = end as usize - v.as_ptr() as usize;
    v.truncate(n);
    v
}

/// A type that can be a tracepoint field.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tracepoint field type",
    label = "not a field type",
    note = "field types: u8..u64, i8..i64, usize, isize, f32, f64, bool, char, &str, String, &CStr, CString, [u8; N], [T; N] and &[T] of those numbers, bool or Hex, Option<T>, Ipv4Addr, Ipv6Addr, Duration, *const T, tape::Hex<T>, a #[derive(tape::Enum)] enum, a tape::flags! type, &S for a #[derive(tape::Fields)] struct S",
    note = "a Vec<T> is recorded as a slice: declare the field `&[T]` and pass `&v`; a struct of yours needs #[derive(tape::Fields)] and is passed by reference"
)]
pub trait Field: Encode {
    /// Bytes always written for this type (the whole size for fixed-size types).
    const FIXED_SIZE: usize;

    /// Appends the CTF fields that describe a field of this type named `name`
    /// (a sequence appends its length field first), and its display hints.
    fn describe(name: &str, out: &mut Layout);

    /// A USDT probe argument of this type (`crate::usdt`): its size in
    /// bytes, negative when signed (the `-4` of `-4@%rdi`).
    const USDT_SIZE: i32 = 8;

    /// The value a USDT probe's argument holds: numbers, bools, chars,
    /// enums and flags by value (widened to 64 bits, signed ones with their
    /// sign), floats as their bits; any other type the address of the value
    /// (`&str` and slices are two arguments, written by `tracepoint!`).
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        self as *const Self as *const u8 as u64
    }
}

/// A number as a USDT probe argument ([`Field::USDT_SIZE`],
/// [`Field::usdt_arg`]).
trait UsdtScalar: Copy {
    const SIZE: i32;
    fn bits(self) -> u64;
}

macro_rules! usdt_scalars {
    ($($t:ty: $size:expr, $v:ident => $bits:expr);* $(;)?) => {$(
        impl UsdtScalar for $t {
            const SIZE: i32 = $size;
            #[inline(always)]
            fn bits(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    )*};
}

usdt_scalars! {
    u8: 1, v => u64::from(v);
    u16: 2, v => u64::from(v);
    u32: 4, v => u64::from(v);
    u64: 8, v => v;
    usize: 8, v => v as u64;
    i8: -1, v => i64::from(v) as u64;
    i16: -2, v => i64::from(v) as u64;
    i32: -4, v => i64::from(v) as u64;
    i64: -8, v => v as u64;
    isize: -8, v => v as i64 as u64;
    f32: 4, v => u64::from(v.to_bits());
    f64: 8, v => v.to_bits();
    bool: 1, v => u64::from(v);
    char: 4, v => u64::from(u32::from(v));
}

/// What describing fields gives: their CTF fields, and display hints by
/// field path (`hdr.flags`) for read-time formats (see the module docs).
/// A path's names are TSDL identifiers (`tape_ctf_model::escape_name`:
/// `_http_2e_method.flags`), so that a name's own `.`, `:` or `;` never
/// reads as the path's, the hint's or the list's.
#[derive(Debug, Default)]
pub struct Layout {
    /// The CTF fields, in order.
    pub fields: Vec<tape_ctf_model::Field>,
    /// `(path, hint)`: `flags(A=0x1,B=0x2)`, `ipv4`, `ipv6`, `duration`.
    pub hints: Vec<(String, String)>,
}

impl Layout {
    /// Appends one CTF field.
    pub fn push(&mut self, name: &str, ty: Type) {
        self.fields.push(tape_ctf_model::Field::new(name, ty));
    }

    /// Appends a hint for the field named `name` (its path below is
    /// made by [`Layout::push_struct`]).
    pub fn hint(&mut self, name: &str, hint: impl Into<String>) {
        self.hints
            .push((tape_ctf_model::escape_name(name), hint.into()));
    }

    /// Appends a struct field `name` whose members are described by `members`.
    /// Its hints' paths go under `name.`.
    pub fn push_struct(&mut self, name: &str, members: impl FnOnce(&mut Layout)) {
        let mut inner = Layout::default();
        members(&mut inner);
        let name_id = tape_ctf_model::escape_name(name);
        for (path, _) in &mut inner.hints {
            *path = format!("{name_id}.{path}");
        }
        self.push(name, Type::Struct(Struct::new(inner.fields)));
        self.hints.extend(inner.hints);
    }

    /// The type of a field of type `T`: its only CTF field's type, or a
    /// struct of its fields (a sequence and its length); hints keep `name`.
    fn single<T: Field + ?Sized>(&mut self, name: &str) -> Type {
        let mut inner = Layout::default();
        T::describe(name, &mut inner);
        self.hints.extend(inner.hints);
        if inner.fields.len() == 1 {
            inner
                .fields
                .pop()
                .map(|f| f.ty)
                .unwrap_or(Type::Struct(Struct::default()))
        } else {
            Type::Struct(Struct::new(inner.fields))
        }
    }
}

/// A field of a tracepoint: its name and how to describe it.
#[derive(Debug)]
pub struct FieldDesc {
    /// Argument name.
    pub name: &'static str,
    /// Writes the CTF description (from the type's [`Field`] impl).
    pub describe: fn(&str, &mut Layout),
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

/// A value that is an element of arrays and sequences: copied as its bytes
/// in memory, many at a time.
///
/// # Safety
/// The bytes of a `Self` in memory (`size_of::<Self>()` of them, no padding,
/// every bit pattern the type can hold) must be its encoding as
/// [`element_type`](Element::element_type) describes it, in the machine's
/// byte order.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an element of a field's array or slice",
    label = "not an element type",
    note = "elements are numbers (u8..u64, i8..i64, usize, isize, f32, f64), bool and tape::Hex<T>; a slice of strings or structs is not a field"
)]
pub unsafe trait Element: Copy + 'static {
    /// The CTF type of one element of an array `[Self; N]`.
    fn element_type() -> Type;
    /// The CTF type of one element of a sequence `&[Self]` (the same but for
    /// `u8`: text in arrays, the kernel's `char comm[16]`; bytes in hex in
    /// sequences).
    fn sequence_element_type() -> Type {
        Self::element_type()
    }
}

/// An integer type: the container of enums and flags, and what [`Hex`] wraps.
pub trait Integral: Element {
    /// Its CTF integer.
    fn integer() -> Integer;
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
            fn describe(name: &str, out: &mut Layout) {
                out.push(name, $ctf);
            }
            const USDT_SIZE: i32 = <$t as UsdtScalar>::SIZE;
            #[inline(always)]
            fn usdt_arg(&self) -> u64 {
                UsdtScalar::bits(*self)
            }
        }
        // SAFETY: a number's bytes in memory are its native-order encoding,
        // and every bit pattern is a value.
        unsafe impl Element for $t {
            fn element_type() -> Type {
                $ctf
            }
        }
    )*};
}

scalar_fields! {
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
unsafe impl Encode for u8 {
    #[inline(always)]
    fn max_size(&self) -> usize {
        1
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { put(dst, *self) }
    }
}

impl Field for u8 {
    const FIXED_SIZE: usize = 1;
    const USDT_SIZE: i32 = <u8 as UsdtScalar>::SIZE;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        UsdtScalar::bits(*self)
    }
    fn describe(name: &str, out: &mut Layout) {
        out.push(name, Type::Integer(Integer::unsigned(8)));
    }
}

// SAFETY: a byte is its own encoding.
unsafe impl Element for u8 {
    fn element_type() -> Type {
        Type::Integer(Integer::unsigned(8).utf8())
    }
    fn sequence_element_type() -> Type {
        Type::Integer(Integer::unsigned(8).hex())
    }
}

macro_rules! integral {
    ($($t:ty: $bits:expr, $signed:expr);* $(;)?) => {$(
        impl Integral for $t {
            fn integer() -> Integer {
                if $signed { Integer::signed($bits) } else { Integer::unsigned($bits) }
            }
        }
    )*};
}

integral! {
    u8: 8, false; u16: 16, false; u32: 32, false; u64: 64, false; usize: usize::BITS, false;
    i8: 8, true; i16: 16, true; i32: 32, true; i64: 64, true; isize: usize::BITS, true;
}

/// A CTF enumeration of single values: `labels` are `(label, value)`.
pub fn enum_type(container: Integer, labels: &[(&str, i128)]) -> Type {
    Type::Enum(Enum {
        container,
        entries: labels
            .iter()
            .map(|&(label, v)| EnumEntry {
                label: label.into(),
                start: v,
                end: v,
            })
            .collect(),
    })
}

/// A tagged union as CTF writes one: `struct { kind; variant <kind> {
/// options } value; }`, the variant's tag the enumeration `kind` before it.
pub fn tagged_union(kind: Type, options: Vec<tape_ctf_model::Field>) -> Struct {
    Struct::new(vec![
        tape_ctf_model::Field::new("kind", kind),
        tape_ctf_model::Field::new(
            "value",
            Type::Variant {
                tag: "kind".into(),
                options,
            },
        ),
    ])
}

fn bool_type() -> Type {
    enum_type(Integer::unsigned(8), &[("false", 0), ("true", 1)])
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
    const USDT_SIZE: i32 = <bool as UsdtScalar>::SIZE;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        UsdtScalar::bits(*self)
    }
    fn describe(name: &str, out: &mut Layout) {
        out.push(name, bool_type());
    }
}

// SAFETY: a bool is one byte, 0 or 1 (Rust's layout guarantee), the
// container values of `bool_type`.
unsafe impl Element for bool {
    fn element_type() -> Type {
        bool_type()
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
    const USDT_SIZE: i32 = <char as UsdtScalar>::SIZE;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        UsdtScalar::bits(*self)
    }
    fn describe(name: &str, out: &mut Layout) {
        out.push(
            name,
            Type::Array {
                element: Box::new(Type::Integer(Integer::unsigned(8).utf8())),
                len: 4,
            },
        );
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
            fn describe(name: &str, out: &mut Layout) {
                out.push(name, Type::Integer(Integer::unsigned(usize::BITS).hex()));
            }
        }
    )*};
}

pointer_fields!(*const T, *mut T);

/// An integer shown in hexadecimal (`base = 16` in the metadata):
/// `Hex(0x1f_u32)` reads `0x1F` in babeltrace2 and `0x1f` in ftrace text.
/// Usable in arrays and sequences too (`[Hex<u8>; 6]`, `&[Hex<u32>]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Hex<T>(pub T);

// SAFETY: forwards to T, which writes at most its max_size().
unsafe impl<T: Integral + Encode> Encode for Hex<T> {
    #[inline(always)]
    fn max_size(&self) -> usize {
        self.0.max_size()
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.encode(dst) }
    }
}

impl<T: Integral + Field> Field for Hex<T> {
    const FIXED_SIZE: usize = T::FIXED_SIZE;
    const USDT_SIZE: i32 = T::USDT_SIZE;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        self.0.usdt_arg()
    }
    fn describe(name: &str, out: &mut Layout) {
        out.push(name, Type::Integer(T::integer().hex()));
    }
}

// SAFETY: `repr(transparent)` over an integer, which is an `Element`.
unsafe impl<T: Integral> Element for Hex<T> {
    fn element_type() -> Type {
        Type::Integer(T::integer().hex())
    }
}

/// Copies `bytes` up to its first NUL, then a NUL; returns the end.
///
/// # Safety
/// `dst` must be valid for `bytes.len() + 1` bytes of writes, not
/// overlapping `bytes`.
#[inline(always)]
unsafe fn encode_str(bytes: &[u8], dst: *mut u8) -> *mut u8 {
    // An interior NUL ends the string (module docs).
    let n = if bytes.len() <= SHORT_STRING {
        // SAFETY: forwarded from the caller: len + 1 bytes at dst.
        unsafe { copy_short_until_nul(bytes, dst) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { copy_long_until_nul(bytes, dst) }
    };
    // SAFETY: n <= len, so the NUL is the (n + 1)-th of at most len + 1 bytes.
    unsafe {
        *dst.add(n) = 0;
        dst.add(n + 1)
    }
}

/// `&str`'s encoding of `s` (its bytes up to a NUL, then a NUL) at the
/// start of `dst`, as the emit path writes it: the bytes written, or
/// `None` (nothing written) when `dst` has room for fewer than
/// `s.len() + 1`. For tape-tracing's direct path (through `__private`),
/// which writes a `tracing` string into the packet's room.
#[doc(hidden)]
#[inline(always)]
pub fn put_str(s: &[u8], dst: &mut [std::mem::MaybeUninit<u8>]) -> Option<usize> {
    if dst.len() <= s.len() {
        return None;
    }
    let start = dst.as_mut_ptr().cast::<u8>();
    // SAFETY: `dst` has at least `s.len() + 1` writable bytes (checked
    // above), and a `&mut` slice does not overlap the `&` slice `s`.
    let end = unsafe { encode_str(s, start) };
    // SAFETY: `encode_str` returns a pointer at most `s.len() + 1` past
    // `start`, inside `dst`.
    Some(unsafe { end.offset_from(start) } as usize)
}

/// [`copy_short_until_nul`] for longer strings: `memchr`, then `memcpy`.
/// Out of line: its calls would otherwise make every emit with a string
/// save and restore the callee-saved registers, short string or not
/// (issue 23: the `&str` emit's extra cost).
///
/// # Safety
/// As [`copy_short_until_nul`].
#[cold]
#[inline(never)]
unsafe fn copy_long_until_nul(src: &[u8], dst: *mut u8) -> usize {
    let n = memchr::memchr(0, src).unwrap_or(src.len());
    // SAFETY: n <= len bytes; no overlap (caller).
    unsafe { ptr::copy_nonoverlapping(src.as_ptr(), dst, n) };
    n
}

// SAFETY: writes at most len + 1 bytes: the bytes before the first NUL and
// one NUL.
unsafe impl Encode for &str {
    #[inline(always)]
    fn max_size(&self) -> usize {
        self.len() + 1
    }
    #[inline(always)]
    fn is_inline(&self) -> bool {
        self.len() <= SHORT_STRING
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller (len + 1 bytes at dst); the ring
        // and the string do not overlap.
        unsafe { encode_str(self.as_bytes(), dst) }
    }
}

/// Strings up to this length are copied inline, a word at a time, finding
/// an interior NUL on the way; longer ones use `memchr` and `memcpy`, whose
/// call overhead then no longer matters (measured: the inline copy takes a
/// 16-byte string from ~60 to ~35 TSC ticks per event).
const SHORT_STRING: usize = 64;

/// Bytes of `w` that may be zero: `zero_bytes(w) & HIGH_BITS` has the
/// high bit of each byte that is zero, and maybe of bytes after the first
/// zero (the classic SWAR test): non-zero exactly when `w` has a zero
/// byte. The mask is left to the caller, once for several words ORed.
#[inline(always)]
fn zero_bytes(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    w.wrapping_sub(ONES) & !w
}

/// The high bit of each byte: see [`zero_bytes`].
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Where `s`'s first NUL is (its length if none): a word at a time
/// ([`zero_bytes`]), then byte by byte; no call (a `memchr` call cost a
/// short string more). What a `&str` field keeps of `s` is `s[..nul_at(s)]`.
#[doc(hidden)] // public for tape-tracing (through `__private`)
#[inline(always)]
pub fn nul_at(s: &[u8]) -> usize {
    let mut at = 0;
    for w in s.chunks_exact(8) {
        let w = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if zero_bytes(w) & HIGH_BITS != 0 {
            break;
        }
        at += 8;
    }
    at + s[at..].iter().position(|b| *b == 0).unwrap_or(s.len() - at)
}

/// Copies `src` to `dst` up to its first NUL (excluded); returns the number
/// of bytes copied.
///
/// Words, not bytes, and one branch for the NUL. On x86_64 a string of 16
/// to 64 bytes is two or four 16-byte blocks (SSE2, part of the
/// architecture), from its start and ending at its end, overlapping in the
/// middle, their NUL bytes found by one compare each. Otherwise (and on
/// other CPUs) a string of 8 to 16 bytes is two words, the first from its
/// start, the last ending at its end (overlapping the first); up to 32
/// bytes four (two from each end); a longer one whole words, then the
/// last; a string of 4 to 7 bytes is two overlapping halves, a shorter one
/// is copied byte by byte. With an interior NUL the bytes after it are
/// written too (inside `dst`'s `src.len()` bytes, past the returned count:
/// the caller's NUL and next field go over them).
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes, not overlapping `src`.
#[doc(hidden)] // public for `benches/processes.rs` (through `__private`)
#[inline(always)]
pub unsafe fn copy_short_until_nul(src: &[u8], dst: *mut u8) -> usize {
    let len = src.len();
    let s = src.as_ptr();
    #[cfg(target_arch = "x86_64")]
    if (16..=64).contains(&len) {
        use core::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_setzero_si128, _mm_storeu_si128,
        };
        // One 16-byte block: copied; its bytes that are zero, as 0xff.
        let block = |i: usize| -> __m128i {
            // SAFETY: every caller below passes `i <= len - 16`: the block
            // lies inside `src` and inside `dst`'s `len` writable bytes
            // (caller); unaligned loads and stores; SSE2 is part of
            // x86_64.
            unsafe {
                let v = _mm_loadu_si128(s.add(i).cast());
                _mm_storeu_si128(dst.add(i).cast(), v);
                _mm_cmpeq_epi8(v, _mm_setzero_si128())
            }
        };
        // Blocks from the start and ending at the end, overlapping in the
        // middle: every byte covered, no loop, one test.
        // SAFETY: SSE2 is part of x86_64; the blocks are in bounds (above).
        let any_zero = unsafe {
            let zero = if len <= 32 {
                _mm_or_si128(block(0), block(len - 16))
            } else {
                _mm_or_si128(
                    _mm_or_si128(block(0), block(16)),
                    _mm_or_si128(block(len - 32), block(len - 16)),
                )
            };
            _mm_movemask_epi8(zero) != 0
        };
        if !any_zero {
            return len;
        }
        return first_nul(src);
    }
    if len >= 8 {
        // One word: copied, and its zero bytes.
        let word = |i: usize| {
            // SAFETY: every caller below passes `i <= len - 8`: the word
            // lies inside `src` and inside `dst`'s `len` writable bytes
            // (caller); unaligned reads and writes.
            unsafe {
                let w = ptr::read_unaligned(s.add(i).cast::<u64>());
                ptr::write_unaligned(dst.add(i).cast::<u64>(), w);
                zero_bytes(w)
            }
        };
        // Words from the start and words ending at the end, overlapping
        // in the middle: every byte is covered, with no loop (a loop, kept
        // scalar or vectorized, took registers the leaf then had to save).
        let zero = if len <= 16 {
            word(0) | word(len - 8)
        } else if len <= 32 {
            word(0) | word(8) | word(len - 16) | word(len - 8)
        } else {
            // Longer: whole words, then the last; one word at a time, a
            // NUL ending the loop (which also keeps it scalar: unrolled or
            // vectorized, it took registers the leaf then had to save).
            let mut i = 0;
            while i + 8 < len {
                if word(i) & HIGH_BITS != 0 {
                    return first_nul(src);
                }
                i += 8;
            }
            word(len - 8)
        };
        if zero & HIGH_BITS == 0 {
            return len;
        }
        return first_nul(src);
    }
    if len >= 4 {
        // SAFETY: 4 <= len: both halves lie inside `src` and `dst`.
        let (a, b) = unsafe {
            (
                ptr::read_unaligned(s.cast::<u32>()),
                ptr::read_unaligned(s.add(len - 4).cast::<u32>()),
            )
        };
        // SAFETY: as above.
        unsafe {
            ptr::write_unaligned(dst.cast::<u32>(), a);
            ptr::write_unaligned(dst.add(len - 4).cast::<u32>(), b);
        }
        // Both halves in one word: a zero byte in either is one in it.
        if zero_bytes(u64::from(a) << 32 | u64::from(b)) & HIGH_BITS == 0 {
            return len;
        }
        return first_nul(src);
    }
    let mut i = 0;
    while i < len && src[i] != 0 {
        // SAFETY: i < len bytes of `dst` are writable (caller).
        unsafe { *dst.add(i) = src[i] };
        i += 1;
    }
    i
}

/// Where the first NUL of `src` is (`src` has one: the word test saw it).
/// Inline, though rare: a call here would make the emit path's leaf save
/// registers on every event.
#[inline(always)]
fn first_nul(src: &[u8]) -> usize {
    src.iter().position(|&b| b == 0).unwrap_or(src.len())
}

/// Slices whose elements take up to this many bytes are copied inline by
/// [`copy_short`]; longer ones by `memcpy` (a call: the emit's out-of-line
/// path, [`Encode::is_inline`]).
const SHORT_SLICE: usize = 64;

/// Copies `n` bytes from `src` to `dst` without a call, as
/// [`copy_short_until_nul`] without the NUL test: 16-byte blocks from the
/// start and ending at the end (x86_64, 16 to 64 bytes), else whole words
/// from the start, the last one ending at `n`.
///
/// # Safety
/// `src` valid for `n` bytes of reads, `dst` for `n` bytes of writes, not
/// overlapping.
#[inline(always)]
unsafe fn copy_short(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: every access below is at an offset `i <= n - its size`,
    // inside both ranges (caller); SSE2 is part of x86_64.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        if (16..=64).contains(&n) {
            use core::arch::x86_64::{_mm_loadu_si128, _mm_storeu_si128};
            // Blocks from the start and ending at the end, as strings are
            // copied: two up to 32 bytes, four up to 64.
            let block =
                |i: usize| _mm_storeu_si128(dst.add(i).cast(), _mm_loadu_si128(src.add(i).cast()));
            block(0);
            block(n - 16);
            if n > 32 {
                block(16);
                block(n - 32);
            }
            return;
        }
        if n >= 8 {
            let mut i = 0;
            while i + 8 < n {
                let w = ptr::read_unaligned(src.add(i).cast::<u64>());
                ptr::write_unaligned(dst.add(i).cast::<u64>(), w);
                i += 8;
            }
            let w = ptr::read_unaligned(src.add(n - 8).cast::<u64>());
            ptr::write_unaligned(dst.add(n - 8).cast::<u64>(), w);
        } else if n >= 4 {
            let a = ptr::read_unaligned(src.cast::<u32>());
            let b = ptr::read_unaligned(src.add(n - 4).cast::<u32>());
            ptr::write_unaligned(dst.cast::<u32>(), a);
            ptr::write_unaligned(dst.add(n - 4).cast::<u32>(), b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
    }
}

impl Field for &str {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Layout) {
        out.push(name, Type::String(Encoding::Utf8));
    }
}

macro_rules! string_fields {
    ($($t:ty => $bytes:ident),*) => {$(
        // SAFETY: as `&str`: at most len + 1 bytes.
        unsafe impl Encode for $t {
            #[inline(always)]
            fn max_size(&self) -> usize {
                self.$bytes().len() + 1
            }
            #[inline(always)]
            fn is_inline(&self) -> bool {
                self.$bytes().len() <= SHORT_STRING
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                // SAFETY: forwarded from the caller.
                unsafe { encode_str(self.$bytes(), dst) }
            }
        }
        impl Field for $t {
            const FIXED_SIZE: usize = 1;
            fn describe(name: &str, out: &mut Layout) {
                out.push(name, Type::String(Encoding::Utf8));
            }
        }
    )*};
}

string_fields! {
    String => as_bytes,
    &CStr => to_bytes,
    CString => as_bytes
}

// SAFETY: writes exactly N * size_of::<T>() == max_size() bytes.
unsafe impl<T: Element, const N: usize> Encode for [T; N] {
    #[inline(always)]
    fn max_size(&self) -> usize {
        size_of::<[T; N]>()
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller; `Element` says the bytes in
        // memory are the encoding.
        unsafe { put(dst, *self) }
    }
}

impl<T: Element, const N: usize> Field for [T; N] {
    const FIXED_SIZE: usize = size_of::<[T; N]>();
    fn describe(name: &str, out: &mut Layout) {
        out.push(
            name,
            Type::Array {
                element: Box::new(T::element_type()),
                len: N as u64,
            },
        );
    }
}

// SAFETY: writes a u32 length and the elements: 4 + len * size ==
// max_size(), when len fits u32; longer slices are cut to u32::MAX elements
// (never reached: packets are smaller, the event is dropped as too big).
unsafe impl<T: Element> Encode for &[T] {
    #[inline(always)]
    fn max_size(&self) -> usize {
        4 + size_of_val(*self)
    }
    #[inline(always)]
    fn is_inline(&self) -> bool {
        size_of_val(*self) <= SHORT_SLICE
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let n = self.len().min(u32::MAX as usize);
        let bytes = n * size_of::<T>();
        // SAFETY: 4 + bytes <= max_size() bytes written; no overlap; the
        // elements' bytes are their encoding (`Element`).
        unsafe {
            let p = put(dst, n as u32);
            let src = self.as_ptr().cast::<u8>();
            if bytes <= SHORT_SLICE {
                copy_short(src, p, bytes);
            } else {
                ptr::copy_nonoverlapping(src, p, bytes);
            }
            p.add(bytes)
        }
    }
}

impl<T: Element> Field for &[T] {
    const FIXED_SIZE: usize = 4;
    fn describe(name: &str, out: &mut Layout) {
        let len = format!("_{name}_len");
        out.push(&len, Type::Integer(Integer::unsigned(32)));
        out.push(
            name,
            Type::Sequence {
                element: Box::new(T::sequence_element_type()),
                length: tape_ctf_model::escape_name(&len),
            },
        );
    }
}

// SAFETY: forwards to T.
unsafe impl<T: Encode + ?Sized> Encode for &T {
    #[inline(always)]
    fn max_size(&self) -> usize {
        (**self).max_size()
    }
    #[inline(always)]
    fn is_inline(&self) -> bool {
        (**self).is_inline()
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { (**self).encode(dst) }
    }
}

impl<T: Field> Field for &T {
    const FIXED_SIZE: usize = T::FIXED_SIZE;
    fn describe(name: &str, out: &mut Layout) {
        T::describe(name, out);
    }
    const USDT_SIZE: i32 = T::USDT_SIZE;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        (**self).usdt_arg()
    }
}

/// The tag of an `Option` field: `none` = 0, `some` = 1.
fn option_tag() -> Type {
    enum_type(Integer::unsigned(8), &[("none", 0), ("some", 1)])
}

// SAFETY: writes the one-byte tag, then for `Some` at most the value's
// max_size(): at most max_size() in all.
unsafe impl<T: Encode> Encode for Option<T> {
    #[inline(always)]
    fn max_size(&self) -> usize {
        1 + self.as_ref().map_or(0, Encode::max_size)
    }
    #[inline(always)]
    fn is_inline(&self) -> bool {
        self.as_ref().is_none_or(Encode::is_inline)
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: 1 byte, then the value within its own bound (caller).
        unsafe {
            match self {
                None => put(dst, 0u8),
                Some(v) => v.encode(put(dst, 1u8)),
            }
        }
    }
}

impl<T: Field> Field for Option<T> {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Layout) {
        let tag = format!("_{name}_tag");
        out.push(&tag, option_tag());
        let some = out.single::<T>(name);
        out.push(
            name,
            Type::Variant {
                tag: tape_ctf_model::escape_name(&tag),
                options: vec![
                    tape_ctf_model::Field::new("none", Type::Struct(Struct::default())),
                    tape_ctf_model::Field::new("some", some),
                ],
            },
        );
    }
}

macro_rules! address_fields {
    ($($t:ty: $n:literal bytes, $element:expr, $hint:literal);*) => {$(
        // SAFETY: writes the octets, == max_size().
        unsafe impl Encode for $t {
            #[inline(always)]
            fn max_size(&self) -> usize {
                $n
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                // SAFETY: forwarded from the caller.
                unsafe { put(dst, self.octets()) }
            }
        }

        impl Field for $t {
            const FIXED_SIZE: usize = $n;
            fn describe(name: &str, out: &mut Layout) {
                out.push(
                    name,
                    Type::Array {
                        element: Box::new(Type::Integer($element)),
                        len: $n,
                    },
                );
                out.hint(name, $hint);
            }
        }
    )*};
}

address_fields! {
    Ipv4Addr: 4 bytes, Integer::unsigned(8), "ipv4";
    Ipv6Addr: 16 bytes, Integer::unsigned(8).hex(), "ipv6"
}

// SAFETY: writes a u64, == max_size().
unsafe impl Encode for Duration {
    #[inline(always)]
    fn max_size(&self) -> usize {
        8
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let ns = u64::try_from(self.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: forwarded from the caller.
        unsafe { put(dst, ns) }
    }
}

impl Field for Duration {
    const FIXED_SIZE: usize = 8;
    const USDT_SIZE: i32 = 8;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        u64::try_from(self.as_nanos()).unwrap_or(u64::MAX)
    }
    fn describe(name: &str, out: &mut Layout) {
        out.push(name, Type::Integer(Integer::unsigned(64)));
        out.hint(name, "duration");
    }
}

/// A Rust enum recorded as a CTF enumeration: `#[derive(tape::Enum)]`
/// writes this impl (and `Field`) for a fieldless enum. The value is
/// recorded as its `#[repr]` integer (`i32` without one), and readers show
/// its variant name: babeltrace2 `( "Write" : container = 2 )`, ftrace text
/// `Write` (the kernel's `__print_symbolic`).
///
/// ```
/// #[derive(Clone, Copy, tape::Enum)]
/// #[repr(u8)]
/// enum Op { Read = 1, Write = 2, Sync = 8 }
///
/// tape::tracepoint! {
///     pub fn io(op: Op, len: u32) = "app.io.submit";
/// }
///
/// fn main() {
///     io(Op::Write, 4096);
/// }
/// ```
pub trait Symbolic {
    /// The integer the value is recorded as.
    type Repr: Integral + Field;
    /// Variant names and values, in declaration order.
    const LABELS: &'static [(&'static str, i128)];
    /// The value's integer.
    fn repr(&self) -> Self::Repr;
}

/// The CTF enumeration of a [`Symbolic`] type.
pub fn symbolic_type<E: Symbolic>() -> Type {
    enum_type(E::Repr::integer(), E::LABELS)
}

/// A raw value of enum `E`, which may have no variant: what a decoder has
/// before it knows the value is valid (a wire opcode). Readers show a known
/// value by name, an unknown one as a number (ftrace text: `0x7`, as
/// `__print_symbolic` does).
pub struct RawEnum<E: Symbolic>(pub E::Repr, PhantomData<fn() -> E>);

impl<E: Symbolic> RawEnum<E> {
    /// The raw value `v` of enum `E`.
    pub fn new(v: E::Repr) -> RawEnum<E> {
        RawEnum(v, PhantomData)
    }
}

// SAFETY: forwards to the repr integer.
unsafe impl<E: Symbolic> Encode for RawEnum<E> {
    #[inline(always)]
    fn max_size(&self) -> usize {
        self.0.max_size()
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.encode(dst) }
    }
}

impl<E: Symbolic> Field for RawEnum<E> {
    const FIXED_SIZE: usize = size_of::<E::Repr>();
    const USDT_SIZE: i32 = E::Repr::USDT_SIZE;
    #[inline(always)]
    fn usdt_arg(&self) -> u64 {
        self.0.usdt_arg()
    }
    fn describe(name: &str, out: &mut Layout) {
        out.push(name, symbolic_type::<E>());
    }
}

/// A bit-set type recorded as its integer: `flags!` writes this impl. The
/// CTF type is the integer in hexadecimal; the names travel as a hint, so
/// that ftrace text shows `READ|WRITE|0x40` (the kernel's `__print_flags`:
/// masks of several bits first, then single bits, leftover bits in hex).
pub trait Flags {
    /// The integer of the bits.
    type Bits: Integral + Field;
    /// Names and masks, in declaration order.
    const NAMES: &'static [(&'static str, u128)];
    /// The bits.
    fn bits(&self) -> Self::Bits;
}

/// Describes a [`Flags`] field: the integer in hex, and its names as a hint.
pub fn describe_flags<F: Flags>(name: &str, out: &mut Layout) {
    out.push(name, Type::Integer(F::Bits::integer().hex()));
    out.hint(name, flags_hint(F::NAMES));
}

/// The hint of a flags table: `flags(RW=0x3,READ=0x1,WRITE=0x2)`, masks of
/// more bits first (stable otherwise), as `__print_flags` wants them.
pub fn flags_hint(names: &[(&str, u128)]) -> String {
    let mut sorted: Vec<&(&str, u128)> = names.iter().collect();
    sorted.sort_by_key(|(_, m)| std::cmp::Reverse(m.count_ones()));
    let items: Vec<String> = sorted.iter().map(|(n, m)| format!("{n}={m:#x}")).collect();
    format!("flags({})", items.join(","))
}

/// Declares a bit-set type recorded as an integer and shown by name
/// (`READ|WRITE|0x40`) in ftrace text:
///
/// ```
/// tape::flags! {
///     /// How a file is opened.
///     pub struct OpenFlags: u32 {
///         const READ = 0x1;
///         const WRITE = 0x2;
///         const RDWR = 0x3;
///         const CREATE = 0x40;
///     }
/// }
/// tape::tracepoint! {
///     pub fn open(fd: i32, flags: OpenFlags) = "app.fs.open";
/// }
///
/// fn main() {
///     open(3, OpenFlags::RDWR | OpenFlags::CREATE);
///     assert_eq!((OpenFlags::READ | OpenFlags::WRITE).bits(), 3);
/// }
/// ```
///
/// The type is a `Copy` newtype over its integer with the named constants,
/// `|`, `&`, `contains`, `bits`, `from_bits_retain` and `empty`.
#[macro_export]
macro_rules! flags {
    ($(#[$meta:meta])* $vis:vis struct $name:ident: $bits:ty {
        $($(#[$fmeta:meta])* const $flag:ident = $value:expr;)*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        $vis struct $name($bits);

        #[allow(dead_code)]
        impl $name {
            $($(#[$fmeta])* #[allow(missing_docs)] pub const $flag: $name = $name($value);)*
            /// No bit set.
            pub const fn empty() -> $name { $name(0) }
            /// The bits, as recorded.
            pub const fn bits(self) -> $bits { self.0 }
            /// These bits, named or not.
            pub const fn from_bits_retain(bits: $bits) -> $name { $name(bits) }
            /// Whether every bit of `other` is set.
            pub const fn contains(self, other: $name) -> bool { self.0 & other.0 == other.0 }
        }

        impl ::core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, o: $name) -> $name { $name(self.0 | o.0) }
        }

        impl ::core::ops::BitAnd for $name {
            type Output = $name;
            fn bitand(self, o: $name) -> $name { $name(self.0 & o.0) }
        }

        impl $crate::field::Flags for $name {
            type Bits = $bits;
            const NAMES: &'static [(&'static str, u128)] =
                &[$((::core::stringify!($flag), $value as u128)),*];
            fn bits(&self) -> $bits { self.0 }
        }

        // SAFETY: forwards to the integer's encoder.
        unsafe impl $crate::Encode for $name {
            #[inline(always)]
            fn max_size(&self) -> usize { ::core::mem::size_of::<$bits>() }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                // SAFETY: forwarded from the caller.
                unsafe { $crate::Encode::encode(&self.0, dst) }
            }
        }

        impl $crate::Field for $name {
            const FIXED_SIZE: usize = ::core::mem::size_of::<$bits>();
            const USDT_SIZE: i32 = <$bits as $crate::Field>::USDT_SIZE;
            #[inline(always)]
            fn usdt_arg(&self) -> u64 {
                $crate::Field::usdt_arg(&self.0)
            }
            fn describe(name: &str, out: &mut $crate::field::Layout) {
                $crate::field::describe_flags::<$name>(name, out)
            }
        }
    };
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
            fn is_inline(&self) -> bool {
                let ($($name,)+) = self;
                true $(&& $name.is_inline())+
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

    /// The word copies against a byte loop, on every length across their
    /// cases (under 4, 4-7, 8-16, 17-32, longer, past the inline limit),
    /// with no NUL and with one at every position, each at several
    /// alignments; the bytes after the encoding are never touched.
    #[test]
    fn strings_and_slices_of_every_length_and_nul_position() {
        for len in 0..=100usize {
            for nul in std::iter::once(None).chain((0..len).map(Some)) {
                for align in 0..8 {
                    let mut src: Vec<u8> =
                        (0..len + align).map(|i| b'a' + (i % 26) as u8).collect();
                    if let Some(k) = nul {
                        src[align + k] = 0;
                    }
                    let src = &src[align..];
                    let text = std::str::from_utf8(src).unwrap();
                    let want: Vec<u8> = src
                        .iter()
                        .copied()
                        .take_while(|&b| b != 0)
                        .chain([0])
                        .collect();
                    assert_eq!(
                        bytes(text),
                        want,
                        "len {len}, NUL at {nul:?}, align {align}"
                    );
                    // Encoded into a bigger buffer: nothing past max_size().
                    let mut buf = vec![0xeeu8; len + 1 + 16];
                    // SAFETY: the buffer holds more than max_size() bytes.
                    let end = unsafe { text.encode(buf.as_mut_ptr()) };
                    assert_eq!(end as usize - buf.as_ptr() as usize, want.len());
                    assert!(
                        buf[len + 1..].iter().all(|&b| b == 0xee),
                        "len {len}: wrote past the end"
                    );
                    // put_str: the same bytes into a room of len + 1 or
                    // more; nothing written into a room one byte short.
                    for room in [len, len + 1, len + 9] {
                        let mut out = vec![std::mem::MaybeUninit::new(0xeeu8); room];
                        let got = put_str(src, &mut out);
                        // SAFETY: every byte was initialised above.
                        let out: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
                        if room == len {
                            assert_eq!(got, None, "len {len} into {room}");
                            assert!(out.iter().all(|&b| b == 0xee), "len {len}: wrote");
                        } else {
                            assert_eq!(got, Some(want.len()), "len {len} into {room}");
                            assert_eq!(out[..want.len()], want[..], "len {len}, NUL at {nul:?}");
                            assert!(out[len + 1..].iter().all(|&b| b == 0xee));
                        }
                    }
                    if nul.is_none() {
                        let seq: Vec<u8> = (len as u32)
                            .to_ne_bytes()
                            .iter()
                            .chain(src)
                            .copied()
                            .collect();
                        assert_eq!(bytes(src), seq, "slice of {len}, align {align}");
                    }
                }
            }
        }
    }

    /// What the emit path's leaf takes: strings and slices up to 64 bytes,
    /// a tuple only if all its fields are.
    #[test]
    fn inline_encodings() {
        let short = "x".repeat(64);
        let long = "x".repeat(65);
        assert!(short.as_str().is_inline());
        assert!(!long.as_str().is_inline());
        assert!(!long.is_inline());
        assert!((1u64, short.as_str(), &[0u32; 16][..]).is_inline());
        assert!(!(1u64, short.as_str(), &[0u32; 17][..]).is_inline());
        assert!(!(1u64, Some(long.as_str())).is_inline());
        assert!((1u64, None::<&str>).is_inline());
    }
}
