//! `tracing` events recorded into tape's rings: a
//! [`tracing_subscriber::Layer`] for programs already instrumented with the
//! `tracing` crate.
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//! let subscriber = tracing_subscriber::registry().with(tape_tracing::TapeLayer::new());
//! tracing::subscriber::set_global_default(subscriber).unwrap();
//! ```
//!
//! **One tape tracepoint per `tracing` event callsite**, registered at run
//! time ([`tape::registry::register`]) when `tracing` registers the
//! callsite, named from its target and name:
//!
//! ```text
//! tracing::info!(target: "app::db", rows, "query")   at src/db.rs:42
//!   -> tracepoint  tracing.app.db.info.src/db.rs:42    (`::` becomes `.`)
//!      fields      rows, message                        (names from its Metadata)
//! ```
//!
//! so tape's patterns select them (`TAPE_TRACE='tracing.app.*'`, `tape ctl
//! PID enable 'tracing.*.warn.*'`), filters, triggers and probes apply, and
//! a pattern applied before a callsite is first hit still takes it in.
//!
//! **Values are recorded typed**, each field a tagged value:
//!
//! ```text
//! struct { enum : uint8_t { none, u64, i64, f64, bool, str, u128, i128, text } kind;
//!          variant <kind> { struct {} none; uint64 u64; int64 i64; double f64;
//!                           uint8 bool; string str; string u128; string i128;
//!                           string text; } value; } rows;
//! ```
//!
//! Integers, floats, booleans and strings are kept as they are; 128-bit
//! integers as their decimal digits (CTF readers stop at 64 bits); values
//! `tracing` only offers as `Debug` or `Display` (`?x`, `%x`, errors, the
//! message) are formatted into a buffer on the stack (`text`), the one
//! formatting there is; a field an event does not record is `none`.
//! Strings and texts share [`TEXT_BYTES`] bytes per event: past them, a
//! value is cut (at a character boundary) and the cuts are counted
//! ([`cut_values`]).
//!
//! **Cost.** An event whose tracepoint is disabled costs `tracing`'s own
//! dispatch, a lookup of its callsite in a table read without a lock
//! (pointer hash, open addressing) and the state word's load. An enabled
//! one: the visit of its fields into a stack buffer and tape's emit path.
//! No allocation, lock or system call on the way (the callsite's
//! registration, once, takes a lock and allocates).
//!
//! Not yet: spans (enter/exit as slices for `tape graph` and the Perfetto
//! export), per-layer `Interest::never` for disabled callsites, and the
//! level as a field. Written by hand because no crate records `tracing`
//! events into an external ring with typed values.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use tape::field::{enum_type, Encode, Field as TapeField, FieldDesc, Layout};
use tape::{Tracepoint, TracepointDesc};
use tape_ctf::{Encoding, Float, Integer, Struct, Type};
use tracing_core::field::{Field, Visit};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;

/// Bytes of strings and formatted values an event keeps.
pub const TEXT_BYTES: usize = 2048;

/// The most fields of one callsite that are recorded (tracing's own limit
/// is 32).
const MAX_FIELDS: usize = 32;

/// Slots of the callsite table (a power of two).
const SLOTS: usize = 1 << 13;

/// Values cut because an event's strings passed [`TEXT_BYTES`].
static CUT: AtomicU64 = AtomicU64::new(0);

/// Callsites that got no tracepoint (the table or the ids are full, or the
/// name was taken): their events are not recorded.
static UNREGISTERED: AtomicU64 = AtomicU64::new(0);

/// Values cut so far (see the module docs).
pub fn cut_values() -> u64 {
    CUT.load(Ordering::Relaxed)
}

/// Callsites whose events are not recorded (no tracepoint could be made).
pub fn unregistered_callsites() -> u64 {
    UNREGISTERED.load(Ordering::Relaxed)
}

/// The layer: add it to a `tracing_subscriber` registry.
#[derive(Debug, Default, Clone, Copy)]
pub struct TapeLayer {
    _private: (),
}

impl TapeLayer {
    /// The layer.
    pub fn new() -> TapeLayer {
        TapeLayer { _private: () }
    }
}

/// A callsite and its tracepoint.
struct Entry {
    meta: usize,
    tp: &'static Tracepoint,
}

/// Callsites by their metadata's address: slots written once (under
/// `INSERT`, Release), read with Acquire and no lock.
static TABLE: [AtomicPtr<Entry>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
static INSERT: Mutex<()> = Mutex::new(());

fn slot_of(meta: usize) -> usize {
    // Fibonacci hashing of the address.
    meta.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - SLOTS.trailing_zeros())
}

/// The tracepoint of the callsite whose metadata is `meta`.
#[inline]
fn find(meta: &'static Metadata<'static>) -> Option<&'static Tracepoint> {
    let key = meta as *const Metadata<'static> as usize;
    let mut i = slot_of(key);
    for _ in 0..SLOTS {
        // Acquire: pairs with the Release store of `insert`: the entry is
        // whole.
        let p = TABLE[i].load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null slot holds an `Entry` leaked by `insert`,
        // never freed or changed.
        let e = unsafe { &*p };
        if e.meta == key {
            return Some(e.tp);
        }
        i = (i + 1) % SLOTS;
    }
    None
}

/// Adds `meta`'s tracepoint (the caller holds `INSERT`); false if full.
fn insert(meta: &'static Metadata<'static>, tp: &'static Tracepoint) -> bool {
    let key = meta as *const Metadata<'static> as usize;
    let mut i = slot_of(key);
    for _ in 0..SLOTS {
        if TABLE[i].load(Ordering::Relaxed).is_null() {
            let e = Box::leak(Box::new(Entry { meta: key, tp }));
            // Release: pairs with the Acquire of `find`.
            TABLE[i].store(e, Ordering::Release);
            return true;
        }
        i = (i + 1) % SLOTS;
    }
    false
}

/// The tracepoint name of a callsite: `tracing.` + the target (`::` as
/// `.`) + its name, or, for an event named by its place (`event
/// src/db.rs:42`), its level and place.
pub fn tracepoint_name(meta: &Metadata<'_>) -> String {
    let target = meta.target().replace("::", ".");
    let name = match meta.name().strip_prefix("event ") {
        Some(place) => format!("{}.{place}", meta.level().as_str().to_ascii_lowercase()),
        None => meta.name().to_owned(),
    };
    format!("tracing.{target}.{name}")
}

/// Makes and registers the tracepoint of an event callsite.
fn register(meta: &'static Metadata<'static>) -> Option<&'static Tracepoint> {
    let _g = INSERT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tp) = find(meta) {
        return Some(tp);
    }
    let fields: Vec<FieldDesc> = meta
        .fields()
        .iter()
        .take(MAX_FIELDS)
        .map(|f| FieldDesc {
            name: f.name(),
            describe: <Value<'_> as TapeField>::describe,
        })
        .collect();
    let desc: &'static TracepointDesc = Box::leak(Box::new(TracepointDesc {
        name: Box::leak(tracepoint_name(meta).into_boxed_str()),
        file: meta.file().unwrap_or("?"),
        line: meta.line().unwrap_or(0),
        module_path: meta.module_path().unwrap_or(meta.target()),
        fast_path: false,
        fields: Box::leak(fields.into_boxed_slice()),
        fixed_size: 0,
        format: None,
        class: None,
    }));
    let tp = match tape::registry::register(desc) {
        Ok(tp) => tp,
        Err(_) => {
            UNREGISTERED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    if !insert(meta, tp) {
        UNREGISTERED.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(tp)
}

/// One recorded value.
#[derive(Clone, Copy, Debug, Default)]
enum Value<'a> {
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
            tape_ctf::Field::new("none", Type::Struct(Struct::new(Vec::new()))),
            tape_ctf::Field::new("u64", Type::Integer(Integer::unsigned(64))),
            tape_ctf::Field::new("i64", Type::Integer(Integer::signed(64))),
            tape_ctf::Field::new("f64", Type::Float(Float::binary64())),
            tape_ctf::Field::new("bool", Type::Integer(Integer::unsigned(8))),
            tape_ctf::Field::new("str", string()),
            tape_ctf::Field::new("u128", string()),
            tape_ctf::Field::new("i128", string()),
            tape_ctf::Field::new("text", string()),
        ];
        out.push(
            name,
            Type::Struct(Struct::new(vec![
                tape_ctf::Field::new("kind", kind),
                tape_ctf::Field::new(
                    "value",
                    Type::Variant {
                        tag: "kind".into(),
                        options,
                    },
                ),
            ])),
        );
    }
}

/// The fields of one event, in their callsite's order.
struct Values<'a>(&'a [Value<'a>]);

// SAFETY: each value's encoding, one after the other: their max_size sum.
unsafe impl Encode for Values<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        self.0.iter().map(Encode::max_size).sum()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let mut p = dst;
        for v in self.0 {
            // SAFETY: within the sum max_size() counts.
            p = unsafe { v.encode(p) };
        }
        p
    }
}

/// Where an event's values are gathered: kinds and numbers by field
/// index, texts in one stack buffer.
struct Gather {
    values: [Raw; MAX_FIELDS],
    text: [u8; TEXT_BYTES],
    used: usize,
}

#[derive(Clone, Copy)]
enum Raw {
    None,
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Text(u8, usize, usize),
}

impl Gather {
    fn put(&mut self, f: &Field, v: Raw) {
        if let Some(slot) = self.values.get_mut(f.index()) {
            *slot = v;
        }
    }

    /// Copies `s` into the buffer (cut at a character boundary when full).
    fn text(&mut self, f: &Field, kind: u8, s: &str) {
        let room = TEXT_BYTES - self.used;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        if n < s.len() {
            CUT.fetch_add(1, Ordering::Relaxed);
        }
        self.text[self.used..self.used + n].copy_from_slice(&s.as_bytes()[..n]);
        self.put(f, Raw::Text(kind, self.used, n));
        self.used += n;
    }

    /// Formats `args` into the buffer.
    fn format(&mut self, f: &Field, kind: u8, args: std::fmt::Arguments<'_>) {
        struct Cursor<'a> {
            buf: &'a mut [u8],
            at: usize,
            cut: bool,
        }
        impl std::fmt::Write for Cursor<'_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                let room = self.buf.len() - self.at;
                let mut n = s.len().min(room);
                while !s.is_char_boundary(n) {
                    n -= 1;
                }
                self.buf[self.at..self.at + n].copy_from_slice(&s.as_bytes()[..n]);
                self.at += n;
                if n < s.len() {
                    self.cut = true;
                    return Err(std::fmt::Error);
                }
                Ok(())
            }
        }
        let start = self.used;
        let mut c = Cursor {
            buf: &mut self.text[start..],
            at: 0,
            cut: false,
        };
        let _ = c.write_fmt(args);
        let (n, cut) = (c.at, c.cut);
        if cut {
            CUT.fetch_add(1, Ordering::Relaxed);
        }
        self.put(f, Raw::Text(kind, start, n));
        self.used += n;
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

/// Records `event` on `tp` (whose state word is `state`, active).
#[inline(never)]
fn record(tp: &'static Tracepoint, state: u64, event: &Event<'_>) {
    let mut g = Gather {
        values: [Raw::None; MAX_FIELDS],
        text: [0; TEXT_BYTES],
        used: 0,
    };
    event.record(&mut g);
    let n = event.metadata().fields().len().min(MAX_FIELDS);
    let mut values = [Value::None; MAX_FIELDS];
    for (v, raw) in values.iter_mut().zip(&g.values[..n]) {
        *v = match *raw {
            Raw::None => Value::None,
            Raw::U64(x) => Value::U64(x),
            Raw::I64(x) => Value::I64(x),
            Raw::F64(x) => Value::F64(x),
            Raw::Bool(x) => Value::Bool(x),
            Raw::Text(kind, at, len) => Value::Text(
                kind,
                // The buffer holds whole characters (cut at boundaries).
                std::str::from_utf8(&g.text[at..at + len]).unwrap_or(""),
            ),
        };
    }
    let payload = Values(&values[..n]);
    use tape::__private as private;
    if private::records_only(state) {
        private::emit(state, &payload);
        return;
    }
    // Probes, a filter or a trigger: as a declared tracepoint's cold path.
    if state & private::TRIGGER != 0 {
        private::trigger_hit(tp, state, &payload);
    } else if state & private::FILTER != 0 {
        private::emit_filtered(tp, state, &payload);
    } else if state & private::RECORD != 0 {
        private::emit(state, &payload);
    }
    if state & private::PROBES != 0 {
        private::call_probes(tp, &payload, &|_| {});
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for TapeLayer {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing_core::Interest {
        if meta.is_event() {
            register(meta);
        }
        // The layer filters nothing for the others: whether tape records is
        // its tracepoint's state, read at each event.
        tracing_core::Interest::always()
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let Some(tp) = find(event.metadata()) else {
            return;
        };
        let state = tp.state();
        if tape::__private::is_active(state) {
            record(tp, state, event);
        }
    }
}
