//! A `tracing` event's values as tape records them: gathered from a
//! `tracing` visitor into one stack buffer, made to fit the types the
//! callsite's first event gave its fields (`Kind`, `Gather::fit`),
//! and encoded by tape's emit path (`Typed`): each value as its type
//! (`uint64`, `int64`, `double`, tape's `bool`, a string), but a field of
//! `Kind::Any` (not recorded by the first event), which is a tagged
//! value, a kind byte and then the value:
//!
//! ```text
//! typed:   uint64 rows;  string message;  ...
//! tagged:  struct { enum : uint8_t { none, u64, i64, f64, bool, str, u128, i128, text } kind;
//!                   variant <kind> { struct {} none; uint64 u64; int64 i64; double f64;
//!                                    uint8 bool; string str; string u128; string i128;
//!                                    string text; } value; } status;
//!
//! bytes:   a typed value: 8 (u64, i64, f64), 1 (bool), or the string's bytes
//!          and a NUL; a tagged one: the kind, then the same (0 for none)
//! ```
//!
//! Written by hand: no crate records `tracing`'s visitor calls into an
//! external ring with typed values and no allocation.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use tape::field::{enum_type, Encode, Field as TapeField, Layout};
use tape_ctf_model::{Encoding, Float, Integer, Struct, Type};
use tracing_core::field::{Field, Visit};

/// Bytes of strings and formatted values an event keeps.
pub const TEXT_BYTES: usize = 2048;

/// The most fields of one callsite that are recorded (tracing's own limit
/// is 32).
pub(crate) const MAX_FIELDS: usize = 32;

/// What ends a value cut at [`TEXT_BYTES`]: the trace says it was cut.
pub const CUT_MARK: &str = "…[cut]";

/// Values cut because an event's strings passed [`TEXT_BYTES`].
pub(crate) static CUT: AtomicU64 = AtomicU64::new(0);

/// Events not recorded because a value did not fit its field's type, as
/// the callsite's first event set it ([`Kind`]): a field not recorded,
/// or a value of a type that does not convert (a negative integer for a
/// field first recorded as `u64`). `events_lost_tracing_mistyped` in the
/// trace.
pub(crate) static MISTYPED: AtomicU64 = AtomicU64::new(0);

/// The type of a callsite's field in the trace, from the value its first
/// event recorded (`tracing` gives a field's type only with a value; a
/// callsite's code fixes it, but for values of `dyn Value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    U64,
    I64,
    F64,
    Bool,
    /// A string, 128-bit integer digits, a formatted value (`?x`, `%x`,
    /// an error, the message); later numbers of the field are formatted.
    Text,
    /// Not recorded by the first event: a tagged value ([`Value`]).
    Any,
}

impl Kind {
    /// The kind a first event's value gives its field.
    fn of(raw: Raw) -> Kind {
        match raw {
            Raw::None => Kind::Any,
            Raw::U64(_) => Kind::U64,
            Raw::I64(_) => Kind::I64,
            Raw::F64(_) => Kind::F64,
            Raw::Bool(_) => Kind::Bool,
            Raw::Text(..) => Kind::Text,
        }
    }

    /// The field's description and its bytes always written.
    pub(crate) fn describe(self) -> (fn(&str, &mut Layout), usize) {
        match self {
            Kind::U64 => (<u64 as TapeField>::describe, 8),
            Kind::I64 => (<i64 as TapeField>::describe, 8),
            Kind::F64 => (<f64 as TapeField>::describe, 8),
            Kind::Bool => (
                <bool as TapeField>::describe,
                <bool as TapeField>::FIXED_SIZE,
            ),
            Kind::Text => (
                <&'static str as TapeField>::describe,
                <&'static str as TapeField>::FIXED_SIZE,
            ),
            Kind::Any => (<Value<'static> as TapeField>::describe, 1),
        }
    }
}

/// One recorded value.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Value<'a> {
    #[default]
    None,
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// A string, its 128-bit integer digits or its formatted text: kind,
    /// bytes.
    Text(u8, &'a str),
}

const NONE: u8 = 0;
const U64: u8 = 1;
const I64: u8 = 2;
const F64: u8 = 3;
const BOOL: u8 = 4;
const STR: u8 = 5;
const U128: u8 = 6;
const I128: u8 = 7;
const TEXT: u8 = 8;

// SAFETY: writes the kind byte, then 8 bytes, 1 byte, or the string up to
// its first NUL and a NUL (`&str`'s encoding): at most max_size().
unsafe impl Encode for Value<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        1 + match self {
            Value::None => 0,
            Value::Bool(_) => 1,
            Value::U64(_) | Value::I64(_) | Value::F64(_) => 8,
            Value::Text(_, s) => s.max_size(),
        }
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: each write stays within what max_size() counts.
        unsafe {
            match self {
                Value::None => NONE.encode(dst),
                Value::U64(v) => v.encode(U64.encode(dst)),
                Value::I64(v) => v.encode(I64.encode(dst)),
                Value::F64(v) => v.encode(F64.encode(dst)),
                Value::Bool(v) => u8::from(*v).encode(BOOL.encode(dst)),
                Value::Text(kind, s) => s.encode(kind.encode(dst)),
            }
        }
    }
}

impl TapeField for Value<'_> {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Layout) {
        let kind = enum_type(
            Integer::unsigned(8),
            &[
                ("none", NONE.into()),
                ("u64", U64.into()),
                ("i64", I64.into()),
                ("f64", F64.into()),
                ("bool", BOOL.into()),
                ("str", STR.into()),
                ("u128", U128.into()),
                ("i128", I128.into()),
                ("text", TEXT.into()),
            ],
        );
        let string = || Type::String(Encoding::Utf8);
        let options = vec![
            tape_ctf_model::Field::new("none", Type::Struct(Struct::new(Vec::new()))),
            tape_ctf_model::Field::new("u64", Type::Integer(Integer::unsigned(64))),
            tape_ctf_model::Field::new("i64", Type::Integer(Integer::signed(64))),
            tape_ctf_model::Field::new("f64", Type::Float(Float::binary64())),
            tape_ctf_model::Field::new("bool", Type::Integer(Integer::unsigned(8))),
            tape_ctf_model::Field::new("str", string()),
            tape_ctf_model::Field::new("u128", string()),
            tape_ctf_model::Field::new("i128", string()),
            tape_ctf_model::Field::new("text", string()),
        ];
        out.push(name, Type::Struct(tape::field::tagged_union(kind, options)));
    }
}

/// Where an event's values are gathered: kinds and numbers by field
/// index, texts in one stack buffer, left uninitialised but for the bytes
/// written (2 KiB zeroed per event would cost more than the event); then
/// encoded from here, one [`Value`] at a time.
///
/// `repr(C)`, the buffer last: beside the zeroed `used`, LLVM merged the
/// uninitialised buffer into one 2 KiB memset of zeros (seen in the
/// machine code: three quarters of an event's instructions).
#[repr(C)]
pub(crate) struct Gather {
    /// The callsite's fields (at most [`MAX_FIELDS`]).
    n: usize,
    used: usize,
    /// The first `n` are initialised (by [`with_values`]); only they are
    /// written ([`Gather::put`]) and read ([`Gather::raws`]): a callsite
    /// has few fields, and setting all 32 cost an event 32 stores.
    values: [MaybeUninit<Raw>; MAX_FIELDS],
    /// `text[..used]` is written: whole UTF-8 characters.
    text: [MaybeUninit<u8>; TEXT_BYTES],
}

/// A value as gathered: a text is its kind, its place and length in the
/// buffer.
///
/// In [`Kind`]'s order (`None` as `Any`), so that a value's kind is its
/// tag as it is, and [`Gather::fit`] compares bytes with no jump table.
#[derive(Clone, Copy)]
enum Raw {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Text(u8, u16, u16),
    None,
}

const _: () = assert!(
    TEXT_BYTES <= u16::MAX as usize,
    "a place in the text fits a u16"
);

impl Gather {
    fn put(&mut self, f: &Field, v: Raw) {
        if let Some(slot) = self.values[..self.n].get_mut(f.index()) {
            slot.write(v);
        }
    }

    /// The values of the callsite's fields, in order.
    #[inline(always)]
    fn raws(&self) -> &[Raw] {
        let n = self.n.min(MAX_FIELDS);
        // SAFETY: `values[..n]` is initialised: `with_values` writes each
        // of them before anything reads, `put` and `convert` only replace
        // them with values; `MaybeUninit<Raw>` has the layout of `Raw`.
        unsafe { &*(&self.values[..n] as *const [MaybeUninit<Raw>] as *const [Raw]) }
    }

    /// At least the bytes [`Typed`] encodes these values in, counted in
    /// O(1) (the emit path reserves it; the event takes what it writes):
    /// each field at most 10 bytes (a tag, then 8 bytes, a byte, or a
    /// string's NUL), plus the text the strings take.
    #[inline(always)]
    fn size_bound(&self) -> usize {
        10 * self.n + self.used
    }

    /// The written bytes `at..at + len` as text.
    fn str(&self, at: u16, len: u16) -> &str {
        let (at, len) = (usize::from(at), usize::from(len));
        let bytes = &self.text[at.min(self.used)..(at + len).min(self.used)];
        // SAFETY: `text[..used]` is initialised (`copy` writes each byte
        // below the `used` it returns, and `used` only grows), the slice
        // lies in it (clamped to `used` above), and `MaybeUninit<u8>` has
        // the layout of `u8`. Its bytes are whole UTF-8 characters: copied
        // from `&str`s, cut only at character boundaries, and a place
        // recorded by `text`/`format` starts and ends on such a boundary.
        unsafe {
            std::str::from_utf8_unchecked(&*(bytes as *const [MaybeUninit<u8>] as *const [u8]))
        }
    }

    /// A gathered value as encoded.
    #[inline]
    fn value(&self, raw: Raw) -> Value<'_> {
        match raw {
            Raw::None => Value::None,
            Raw::U64(x) => Value::U64(x),
            Raw::I64(x) => Value::I64(x),
            Raw::F64(x) => Value::F64(x),
            Raw::Bool(x) => Value::Bool(x),
            Raw::Text(kind, at, len) => Value::Text(kind, self.str(at, len)),
        }
    }

    /// Copies the whole characters of `s` that fit into the buffer at
    /// `used`; returns the bytes copied and whether `s` was cut. A cut
    /// text ends with [`CUT_MARK`] (when there is room for it), so that
    /// the trace says it was cut.
    fn copy(&mut self, s: &str) -> (usize, bool) {
        let room = TEXT_BYTES - self.used;
        let cut = s.len() > room;
        let mut n = if cut {
            room.saturating_sub(CUT_MARK.len())
        } else {
            s.len()
        };
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        let mark = if cut && room >= CUT_MARK.len() {
            CUT_MARK
        } else {
            ""
        };
        // Two plain loops (one chained iterator made it a byte loop).
        let dst = &mut self.text[self.used..self.used + n + mark.len()];
        let (text, after) = dst.split_at_mut(n);
        for (d, b) in text.iter_mut().zip(&s.as_bytes()[..n]) {
            d.write(*b);
        }
        for (d, b) in after.iter_mut().zip(mark.as_bytes()) {
            d.write(*b);
        }
        self.used += n + mark.len();
        (n + mark.len(), cut)
    }

    /// Copies `s` into the buffer (cut at a character boundary when full).
    fn text(&mut self, f: &Field, kind: u8, s: &str) {
        let start = self.used;
        let (n, cut) = self.copy(s);
        if cut {
            // Relaxed: a counter read back for display.
            CUT.fetch_add(1, Ordering::Relaxed);
        }
        self.put(f, Raw::Text(kind, start as u16, n as u16));
    }

    /// The kinds of the gathered values (a first event's: [`Kind::of`]).
    pub(crate) fn kinds(&self) -> Vec<Kind> {
        self.raws().iter().map(|r| Kind::of(*r)).collect()
    }

    /// Makes each value fit its field's kind (`kinds`, one per field):
    /// integers of the other sign when in range, integers as floats when
    /// exact, any number or boolean as text when the field is text.
    /// False (the event is not recorded, and counted) when one does not.
    #[inline(always)]
    pub(crate) fn fit(&mut self, kinds: &[Kind]) -> bool {
        // Every value of its field's type: the callsite's events but for
        // values of `dyn Value`.
        let as_is = self
            .raws()
            .iter()
            .zip(kinds)
            .all(|(r, k)| *k == Kind::Any || Kind::of(*r) == *k);
        as_is || self.convert(kinds)
    }

    /// [`Gather::fit`] for values of another type.
    #[cold]
    #[inline(never)]
    // By index: a conversion to text writes into `self` while the loop runs.
    #[allow(clippy::needless_range_loop)]
    fn convert(&mut self, kinds: &[Kind]) -> bool {
        for i in 0..self.n.min(kinds.len()) {
            let raw = self.raws()[i];
            let fitted = match (kinds[i], raw) {
                (Kind::Any, r) => Some(r),
                (Kind::U64, Raw::U64(_))
                | (Kind::I64, Raw::I64(_))
                | (Kind::F64, Raw::F64(_))
                | (Kind::Bool, Raw::Bool(_))
                | (Kind::Text, Raw::Text(..)) => Some(raw),
                (Kind::U64, Raw::I64(x)) => u64::try_from(x).ok().map(Raw::U64),
                (Kind::I64, Raw::U64(x)) => i64::try_from(x).ok().map(Raw::I64),
                (Kind::F64, Raw::U64(x)) => ((x as f64) as u64 == x).then_some(Raw::F64(x as f64)),
                (Kind::F64, Raw::I64(x)) => ((x as f64) as i64 == x).then_some(Raw::F64(x as f64)),
                (Kind::Text, Raw::U64(x)) => Some(self.format_text(TEXT, format_args!("{x}"))),
                (Kind::Text, Raw::I64(x)) => Some(self.format_text(TEXT, format_args!("{x}"))),
                (Kind::Text, Raw::F64(x)) => Some(self.format_text(TEXT, format_args!("{x}"))),
                (Kind::Text, Raw::Bool(x)) => Some(self.format_text(TEXT, format_args!("{x}"))),
                _ => None,
            };
            match fitted {
                Some(r) => {
                    self.values[i].write(r);
                }
                None => {
                    // Relaxed: a counter read back for display.
                    MISTYPED.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
        }
        true
    }

    /// Formats `args` into the buffer (cut, and counted, when full): the
    /// text value of kind `kind` it makes.
    fn format_text(&mut self, kind: u8, args: std::fmt::Arguments<'_>) -> Raw {
        let start = self.used;
        let _ = std::fmt::Write::write_fmt(&mut TextCursor(self), args);
        Raw::Text(kind, start as u16, (self.used - start) as u16)
    }

    /// Formats `args` into the buffer, as field `f`'s value.
    fn format(&mut self, f: &Field, kind: u8, args: std::fmt::Arguments<'_>) {
        let v = self.format_text(kind, args);
        self.put(f, v);
    }
}

/// Writes formatted text into a [`Gather`]'s buffer, cut when full.
struct TextCursor<'a>(&'a mut Gather);

impl std::fmt::Write for TextCursor<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let (_, cut) = self.0.copy(s);
        if cut {
            // Relaxed: a counter read back for display.
            CUT.fetch_add(1, Ordering::Relaxed);
            return Err(std::fmt::Error);
        }
        Ok(())
    }
}

/// A gathered event as its callsite's kinds type it (after
/// [`Gather::fit`]): each value as its field's type, untagged; a
/// [`Kind::Any`] field as a tagged [`Value`].
pub(crate) struct Typed<'a> {
    pub(crate) values: &'a Gather,
    pub(crate) kinds: &'a [Kind],
}

impl Typed<'_> {
    /// A field's value as encoded: plain (typed), or a tagged [`Value`]
    /// for `Any`. `fit` leaves in a typed field only a value of its type.
    /// (`kinds` has one kind per field: the callsite's.)
    #[inline(always)]
    fn field(&self, kind: Kind, raw: Raw) -> Field1<'_> {
        match (kind, raw) {
            (Kind::Any, r) => Field1::Tagged(self.values.value(r)),
            (_, Raw::U64(x)) => Field1::Word(x),
            (_, Raw::I64(x)) => Field1::Word(x as u64),
            (_, Raw::F64(x)) => Field1::Word(x.to_bits()),
            (_, Raw::Bool(x)) => Field1::Byte(u8::from(x)),
            (_, Raw::Text(_, at, len)) => Field1::Str(self.values.str(at, len)),
            (_, Raw::None) => Field1::Str(""),
        }
    }
}

/// One field as [`Typed`] encodes it.
enum Field1<'a> {
    /// 8 bytes (a `u64`, an `i64` or an `f64`'s bits, in the machine's
    /// order, as those types encode).
    Word(u64),
    /// A `bool` (tape's: one byte, 0 or 1).
    Byte(u8),
    /// A string and its NUL.
    Str(&'a str),
    /// A tagged value.
    Tagged(Value<'a>),
}

// SAFETY: each field's encoding in turn (`field`): a word (8 bytes), a
// byte, a string (its bytes and a NUL) or a tagged value (a tag, then one
// of those), so at most 10 bytes a field beside its string's bytes; each
// string is a region of the gathered text of its own (every `text` or
// `format` appends one), so their bytes add up to at most `used`:
// `size_bound` is at least what `encode` writes.
unsafe impl Encode for Typed<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        self.values.size_bound()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let g = self.values;
        let mut p = dst;
        for (raw, kind) in g.raws().iter().zip(self.kinds) {
            // SAFETY: within the sum max_size() counts.
            p = unsafe {
                match self.field(*kind, *raw) {
                    Field1::Word(x) => x.encode(p),
                    Field1::Byte(b) => b.encode(p),
                    Field1::Str(s) => s.encode(p),
                    Field1::Tagged(v) => v.encode(p),
                }
            };
        }
        p
    }
}

// SAFETY: each value's encoding, one after the other: a tag, then 8
// bytes, a byte or a string and its NUL; at most `size_bound` (as for
// `Typed`, whose tagged fields these are).
unsafe impl Encode for Gather {
    #[inline]
    fn max_size(&self) -> usize {
        self.size_bound()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let mut p = dst;
        for r in self.raws() {
            // SAFETY: within the sum max_size() counts.
            p = unsafe { self.value(*r).encode(p) };
        }
        p
    }
}

impl Visit for Gather {
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.put(f, Raw::U64(v));
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.put(f, Raw::I64(v));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.put(f, Raw::F64(v));
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.put(f, Raw::Bool(v));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.text(f, STR, v);
    }
    fn record_u128(&mut self, f: &Field, v: u128) {
        self.format(f, U128, format_args!("{v}"));
    }
    fn record_i128(&mut self, f: &Field, v: i128) {
        self.format(f, I128, format_args!("{v}"));
    }
    fn record_error(&mut self, f: &Field, v: &(dyn std::error::Error + 'static)) {
        self.format(f, TEXT, format_args!("{v}"));
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.format(f, TEXT, format_args!("{v:?}"));
    }
}

/// Gathers the fields that `visit` gives (a callsite of `n` fields) and
/// hands them, typed, to `emit`.
#[inline(always)]
pub(crate) fn with_values(
    n: usize,
    visit: impl FnOnce(&mut dyn Visit),
    emit: impl FnOnce(&mut Gather),
) {
    let n = n.min(MAX_FIELDS);
    let mut g = Gather {
        n,
        values: [const { MaybeUninit::uninit() }; MAX_FIELDS],
        text: [MaybeUninit::uninit(); TEXT_BYTES],
        used: 0,
    };
    for v in &mut g.values[..n] {
        v.write(Raw::None);
    }
    visit(&mut g);
    emit(&mut g);
}

/// A span's fields after its id (the `call` its entries and exits carry).
/// The values of an event whose callsite's fields are all typed, encoded
/// straight into the ring as `tracing` visits them
/// ([`tape::__private::try_emit_with`]): as [`Typed`] encodes them, with
/// no stack buffer and no second pass. It gives up (the event is then
/// gathered and encoded as before, which converts, cuts and counts) at
/// the first value that is not of its field's type, not in the fields'
/// order, a 128-bit integer, an error or a `valuable` value, or past the
/// packet's room or [`TEXT_BYTES`] of text.
pub(crate) struct Direct<'a, 'r> {
    out: &'r mut [MaybeUninit<u8>],
    kinds: &'a [Kind],
    /// Where the encoding is, in one word: the field expected next (high
    /// 32 bits) and the bytes written (low 32); [`GAVE_UP`] once given up.
    /// One word so that each value's visit loads and stores the state
    /// once: a visit's turn waits on one store of the visit before it, not
    /// on four (the turn, the length, the text and a flag were four fields:
    /// ~23 of an event's ~125 ticks went to the visits, `benches/peers`).
    at: u64,
}

/// [`Direct::at`] once given up: no field's index is `0xffff_ffff`.
const GAVE_UP: u64 = u64::MAX;

/// One field further, in [`Direct::at`].
const NEXT: u64 = 1 << 32;

impl<'a, 'r> Direct<'a, 'r> {
    /// Visits with `visit` into `out`: the bytes written, or `None`.
    /// `need` is the least the values take (8 a number, 1 a boolean or a
    /// string's NUL): what is written beyond it is the strings' text,
    /// which [`TEXT_BYTES`] bounds.
    pub(crate) fn encode(
        out: &'r mut [MaybeUninit<u8>],
        kinds: &'a [Kind],
        need: usize,
        visit: impl FnOnce(&mut dyn Visit),
    ) -> Option<usize> {
        if kinds.is_empty() {
            // A callsite without fields (`#[instrument(skip_all)]`'s
            // span): nothing to visit.
            return Some(0);
        }
        // The length must fit `at`'s 32 bits (a packet is far smaller).
        let room = out.len().min(u32::MAX as usize);
        let mut d = Direct {
            out: &mut out[..room],
            kinds,
            at: 0,
        };
        visit(&mut d);
        let (next, len) = ((d.at >> 32) as usize, (d.at & 0xffff_ffff) as usize);
        (next == d.kinds.len() && len.saturating_sub(need) <= TEXT_BYTES).then_some(len)
    }

    /// Where field `f` (of `kind`) is to be written, if it comes now and
    /// is of that kind; else the encoding gives up (a field past the
    /// callsite's first [`MAX_FIELDS`] is left out instead, as the
    /// gathering leaves it).
    #[inline(always)]
    fn turn(&mut self, f: &Field, kind: Kind) -> Option<usize> {
        let i = f.index();
        let at = self.at;
        if (at >> 32) as usize == i && self.kinds.get(i) == Some(&kind) {
            Some((at & 0xffff_ffff) as usize)
        } else {
            self.not_its_turn(i);
            None
        }
    }

    #[cold]
    fn not_its_turn(&mut self, i: usize) {
        if i < self.kinds.len() {
            self.at = GAVE_UP;
        }
    }

    /// Writes `bytes` at `len` (the field's turn), the next field's turn
    /// then.
    #[inline(always)]
    fn put(&mut self, len: usize, bytes: &[u8]) {
        match self.out.get_mut(len..len + bytes.len()) {
            Some(dst) => {
                for (d, b) in dst.iter_mut().zip(bytes) {
                    d.write(*b);
                }
                self.at += NEXT + bytes.len() as u64;
            }
            None => self.at = GAVE_UP,
        }
    }

    /// A string's bytes up to a NUL, then a NUL (`&str`'s encoding), at
    /// `len` (the field's turn).
    #[inline(always)]
    fn string(&mut self, len: usize, s: &str) {
        // tape's own string encoding (words, not a call, for short ones);
        // no room for the whole string and its NUL: given up (the stack
        // buffer cuts and counts; so it does past the text's bytes, which
        // `encode` checks at the end).
        let written = self
            .out
            .get_mut(len..)
            .and_then(|room| tape::__private::put_str(s.as_bytes(), room));
        match written {
            Some(n) => self.at += NEXT + n as u64,
            None => self.at = GAVE_UP,
        }
    }
}

impl Visit for Direct<'_, '_> {
    fn record_u64(&mut self, f: &Field, v: u64) {
        if let Some(len) = self.turn(f, Kind::U64) {
            self.put(len, &v.to_ne_bytes());
        }
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        if let Some(len) = self.turn(f, Kind::I64) {
            self.put(len, &v.to_ne_bytes());
        }
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        if let Some(len) = self.turn(f, Kind::F64) {
            self.put(len, &v.to_bits().to_ne_bytes());
        }
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        if let Some(len) = self.turn(f, Kind::Bool) {
            self.put(len, &[u8::from(v)]);
        }
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        if let Some(len) = self.turn(f, Kind::Text) {
            self.string(len, v);
        }
    }
    fn record_u128(&mut self, _: &Field, _: u128) {
        self.at = GAVE_UP;
    }
    fn record_i128(&mut self, _: &Field, _: i128) {
        self.at = GAVE_UP;
    }
    fn record_error(&mut self, _: &Field, _: &(dyn std::error::Error + 'static)) {
        self.at = GAVE_UP;
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        let Some(start) = self.turn(f, Kind::Text) else {
            return;
        };
        /// Formats into the ring from `len`, up to a NUL, within the
        /// room and at most `TEXT_BYTES` of text.
        struct Cursor<'d> {
            out: &'d mut [MaybeUninit<u8>],
            len: usize,
            text: usize,
            /// A NUL was written by the value: the rest is left out.
            ended: bool,
            fits: bool,
        }
        impl std::fmt::Write for Cursor<'_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                if self.ended {
                    return Ok(());
                }
                let b = s.as_bytes();
                let n = tape::__private::nul_at(b);
                self.ended = n < b.len();
                self.text += n;
                let dst = if self.text <= TEXT_BYTES {
                    self.out.get_mut(self.len..self.len + n)
                } else {
                    None
                };
                let Some(dst) = dst else {
                    self.fits = false;
                    return Err(std::fmt::Error);
                };
                for (d, b) in dst.iter_mut().zip(&b[..n]) {
                    d.write(*b);
                }
                self.len += n;
                Ok(())
            }
        }
        let mut c = Cursor {
            out: &mut *self.out,
            len: start,
            text: 0,
            ended: false,
            fits: true,
        };
        let _ = std::fmt::Write::write_fmt(&mut c, format_args!("{v:?}"));
        let (fits, len) = (c.fits, c.len);
        if fits {
            // The text's end, then its NUL (which gives the turn on).
            self.at = (self.at & !0xffff_ffff) | len as u64;
            self.put(len, &[0]);
        } else {
            self.at = GAVE_UP;
        }
    }
}

pub(crate) struct WithCall<'a> {
    pub(crate) call: u64,
    pub(crate) values: Typed<'a>,
}

// SAFETY: the id's 8 bytes, then the values' encoding: their sum.
unsafe impl Encode for WithCall<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        8 + self.values.max_size()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        // SAFETY: within the sum max_size() counts.
        unsafe { self.values.encode(self.call.encode(dst)) }
    }
}
