//! Receiving decoded values: the [`Sink`] a decoder hands an event's
//! values to, depth first (the reader's stream decoder, the recorder's view
//! of its own events), and two sinks every side uses: [`Discard`] and
//! [`ValueSink`], which builds [`Value`]s.

use crate::{Base, Enum, Value};

/// Receives decoded values, depth first.
pub trait Sink {
    /// Whether the sink looks at values; when false, integers and floats
    /// that nothing else needs (lengths, tags, clock, ids) are skipped over
    /// unread, and an event whose scopes hold nothing needed is stepped
    /// over whole, with no call to the sink.
    const WANTS_VALUES: bool = true;

    /// A struct member's name as shown (one leading `_` removed, §4.2.1),
    /// before its value.
    fn field(&mut self, name: &str);
    /// A scope follows (`stream_context`, `context`, `fields`), as one struct.
    #[inline]
    fn scope(&mut self, name: &'static str) {
        let _ = name;
    }
    /// The same as `field`, with the member's text prefix pre-rendered by the plan:
    /// `sep` is `", NAME = "` (a text sink writes `sep[1..]` for the first
    /// member). Sinks that do not print take the default.
    #[inline]
    fn field_with_text(&mut self, name: &str, sep: &[u8]) {
        let _ = sep;
        self.field(name);
    }
    /// An unsigned integer.
    fn uint(&mut self, v: u64, base: Base, bits: u32);
    /// A signed integer.
    fn sint(&mut self, v: i64, base: Base, bits: u32);
    /// An enumeration value and its type.
    fn enumeration(&mut self, v: i128, e: &Enum);
    /// A floating point number.
    fn float(&mut self, v: f64);
    /// A string (or a text array/sequence up to its NUL), as raw bytes.
    fn string(&mut self, s: &[u8]);
    /// An integer of more than 64 bits: the little-endian bytes of its
    /// two's complement (`bits` of them meaningful).
    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, base: Base);
    /// A struct starts.
    fn begin_struct(&mut self);
    /// A struct ends.
    fn end_struct(&mut self);
    /// An array or sequence of `len` elements starts.
    fn begin_array(&mut self, len: u64);
    /// Element `i` follows.
    fn item(&mut self, i: u64);
    /// The array ends.
    fn end_array(&mut self);
    /// A variant's selected option (its name as shown) follows.
    fn variant(&mut self, option: &str);
    /// The variant ends.
    fn end_variant(&mut self);
}

/// A sink that keeps nothing (validation, skipping).
pub struct Discard;

impl Sink for Discard {
    const WANTS_VALUES: bool = false;
    fn field(&mut self, _: &str) {}
    fn uint(&mut self, _: u64, _: Base, _: u32) {}
    fn sint(&mut self, _: i64, _: Base, _: u32) {}
    fn enumeration(&mut self, _: i128, _: &Enum) {}
    fn float(&mut self, _: f64) {}
    fn string(&mut self, _: &[u8]) {}
    fn wide(&mut self, _: &[u8], _: bool, _: u32, _: Base) {}
    fn begin_struct(&mut self) {}
    fn end_struct(&mut self) {}
    fn begin_array(&mut self, _: u64) {}
    fn item(&mut self, _: u64) {}
    fn end_array(&mut self) {}
    fn variant(&mut self, _: &str) {}
    fn end_variant(&mut self) {}
}

/// Builds [`Value`]s: each scope given to the sink becomes one struct in
/// `scopes`.
#[derive(Default)]
pub struct ValueSink {
    frames: Vec<Frame>,
    names: Vec<String>,
    /// The decoded scopes, in order.
    pub scopes: Vec<Value>,
}

enum Frame {
    Struct(Vec<(String, Value)>),
    Array(Vec<Value>),
    Variant(String, Option<Value>),
}

impl ValueSink {
    fn value(&mut self, v: Value) {
        match self.frames.last_mut() {
            None => self.scopes.push(v),
            Some(Frame::Struct(fields)) => {
                let name = self.names.pop().unwrap_or_default();
                fields.push((name, v));
            }
            Some(Frame::Array(items)) => items.push(v),
            Some(Frame::Variant(_, slot)) => *slot = Some(v),
        }
    }
}

impl Sink for ValueSink {
    fn field(&mut self, name: &str) {
        self.names.push(name.to_owned());
    }
    fn uint(&mut self, v: u64, base: Base, _: u32) {
        self.value(Value::UInt(v, base));
    }
    fn sint(&mut self, v: i64, base: Base, _: u32) {
        self.value(Value::SInt(v, base));
    }
    fn enumeration(&mut self, v: i128, e: &Enum) {
        let labels = e.labels(v).map(str::to_owned).collect();
        self.value(Value::Enum { value: v, labels });
    }
    fn float(&mut self, v: f64) {
        self.value(Value::Float(v));
    }
    fn string(&mut self, s: &[u8]) {
        self.value(Value::Str(String::from_utf8_lossy(s).into_owned()));
    }
    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, _: Base) {
        let digits = wide_int(v, signed, bits, Base::Decimal);
        self.value(Value::Wide(digits));
    }
    fn begin_struct(&mut self) {
        self.frames.push(Frame::Struct(Vec::new()));
    }
    fn end_struct(&mut self) {
        if let Some(Frame::Struct(f)) = self.frames.pop() {
            self.value(Value::Struct(f));
        }
    }
    fn begin_array(&mut self, len: u64) {
        self.frames
            .push(Frame::Array(Vec::with_capacity(len.min(1024) as usize)));
    }
    fn item(&mut self, _: u64) {}
    fn end_array(&mut self) {
        if let Some(Frame::Array(items)) = self.frames.pop() {
            self.value(Value::Array(items));
        }
    }
    fn variant(&mut self, option: &str) {
        self.frames.push(Frame::Variant(option.to_owned(), None));
    }
    fn end_variant(&mut self) {
        if let Some(Frame::Variant(name, Some(v))) = self.frames.pop() {
            self.value(Value::Variant(name, Box::new(v)));
        }
    }
}

/// The text of an integer of any size: `v` holds the little-endian bytes
/// of its two's complement on `bits` bits. Decimal (signed or not), or the
/// forms babeltrace2 2.0 gives the integers it reads, extended to any
/// size: `0x` and capital digits cut to whole nibbles, `0` and octal
/// digits (a negative value cut to whole octal digits), `0b` and all
/// `bits` digits. (Written here: no crate is needed for one conversion.)
pub fn wide_int(v: &[u8], signed: bool, bits: u32, base: Base) -> String {
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
