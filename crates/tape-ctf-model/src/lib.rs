//! # tape-ctf-model: the Common Trace Format's model and its TSDL writer
//!
//! A CTF 1.8 trace is a directory with one text file, `metadata`, written in
//! TSDL (the *Trace Stream Description Language*), and binary *stream files*
//! whose layout the metadata describes. This crate holds what both sides of
//! tape share: the **type model** of CTF (integers, floating point numbers,
//! strings, enumerations, structures, arrays, sequences, variants), the
//! **trace model** (trace, env, clocks, stream classes, event classes), the
//! **TSDL writer** that turns a model into metadata text that babeltrace2,
//! babeltrace 1.5 and Trace Compass read, a decoded [`Value`], and the names
//! of the loss causes tape's packet contexts carry ([`LOSS_CAUSES`]).
//!
//! The recorder (`tape`) builds a [`Trace`] from its tracepoint declarations
//! and writes it with [`Trace::to_tsdl`]; it depends on this crate only. The
//! reader (`tape-ctf`: the TSDL parser, the stream decoder, the merge and
//! the outputs) parses TSDL back into the same model and re-exports it.
//!
//! ```
//! use tape_ctf_model::{Clock, EventClass, Field, Integer, StreamClass, Struct, Trace, Type};
//!
//! let mut trace = Trace::new([7; 16]);
//! trace.packet_header = Some(Struct::new(vec![
//!     Field::new("stream_id", Type::Integer(Integer::unsigned(32))),
//! ]));
//! trace.clocks.push(Clock::new("monotonic", 1_000_000_000));
//! trace.streams.push(StreamClass {
//!     id: Some(0),
//!     event_header: Some(Struct::new(vec![
//!         Field::new("id", Type::Integer(Integer::unsigned(16))),
//!         Field::new("timestamp", Type::Integer(Integer::unsigned(64).mapped("monotonic"))),
//!     ])),
//!     ..StreamClass::default()
//! });
//! trace.events.push(EventClass::new("app.net.rx", 0, Struct::new(vec![
//!     Field::new("port", Type::Integer(Integer::unsigned(16))),
//! ])));
//! let tsdl = trace.to_tsdl().unwrap();
//! assert!(tsdl.starts_with("/* CTF 1.8 */"));
//! assert!(tsdl.contains("name = \"app.net.rx\";"));
//! ```
#![forbid(unsafe_code)]

mod name;
pub mod sink;
mod tsdl;

pub use name::{check_identifier, escape_name, is_identifier, name_of, unescape_name, KEYWORDS};
pub use tsdl::{quote, TsdlError};

/// The causes of loss that tape's recorder counts apart, as its traces
/// name them (`lost_<cause>`, cumulative per stream like
/// `events_discarded`, which is their sum), in the order they are declared.
/// The recorder writes them into the packets of the trace's *losses
/// stream* ([`LOSSES_STREAM`]); the reader finds a stream's losses by
/// cause there (or, in traces written before that stream, in the stream's
/// own packet contexts).
pub const LOSS_CAUSES: [&str; 5] = ["overwritten", "full", "big", "busy", "saving"];

/// The losses stream of a tape trace: a stream file of this name, of
/// stream class [`LOSSES_STREAM_ID`], with no events, whose packet
/// contexts give a thread stream's losses by cause (`stream`: the thread
/// stream's file name; `lost_<cause>`: cumulative; the last packet of a
/// stream gives its totals). Apart, so that the event lines readers print
/// with the packet context (babeltrace2: `{ tid = 7, thread_name = "rx"
/// }`) do not carry five counters of zeros each. A trace that has it says
/// so in its `env` ([`LOSSES_STREAM_ENV`] = the file's name); the file
/// exists only when some stream lost events.
pub const LOSSES_STREAM: &str = "losses";

/// The stream class of [`LOSSES_STREAM`].
pub const LOSSES_STREAM_ID: u64 = 1;

/// The `env` entry naming a trace's [`LOSSES_STREAM`].
pub const LOSSES_STREAM_ENV: &str = "tape_losses_stream";

/// The `env` entry `tracer_name`'s value in a trace tape wrote.
pub const TRACER_NAME: &str = "tape";

/// Byte order of a type or of the whole trace (§4.1.3 of the CTF spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// Little endian (`le`).
    Little,
    /// Big endian (`be`, `network`).
    Big,
}

impl ByteOrder {
    /// The byte order of the machine this code runs on.
    pub const fn native() -> ByteOrder {
        if cfg!(target_endian = "little") {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }
}

/// Preferred display base of an integer (display only, §4.1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Base {
    /// Decimal (the default).
    #[default]
    Decimal,
    /// Hexadecimal: readers print `0x..`.
    Hexadecimal,
    /// Octal.
    Octal,
    /// Binary.
    Binary,
}

/// Character encoding of an 8-bit integer or a string (§4.1.5, §4.2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Not text (the default for integers).
    #[default]
    None,
    /// UTF-8 text: arrays and sequences of such bytes are shown as strings.
    Utf8,
    /// ASCII text.
    Ascii,
}

/// An integer type: `integer { size = ..; align = ..; signed = ..; ... }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Integer {
    /// Width in bits (> 0).
    pub size: u32,
    /// Alignment in bits (a power of two).
    pub align: u64,
    /// Two's complement signed.
    pub signed: bool,
    /// Byte order; `None` means the trace's byte order.
    pub byte_order: Option<ByteOrder>,
    /// Display base.
    pub base: Base,
    /// Text encoding (for 8-bit integers that are characters).
    pub encoding: Encoding,
    /// Name of the clock whose value this integer carries (`map = clock.NAME.value`).
    pub map: Option<String>,
}

impl Integer {
    /// An unsigned, byte-aligned integer of `size` bits.
    pub fn unsigned(size: u32) -> Integer {
        Integer {
            size,
            align: 8,
            signed: false,
            byte_order: None,
            base: Base::Decimal,
            encoding: Encoding::None,
            map: None,
        }
    }

    /// A signed, byte-aligned integer of `size` bits.
    pub fn signed(size: u32) -> Integer {
        Integer {
            signed: true,
            ..Integer::unsigned(size)
        }
    }

    /// The same integer shown in hexadecimal.
    pub fn hex(mut self) -> Integer {
        self.base = Base::Hexadecimal;
        self
    }

    /// The same integer as a UTF-8 code unit (for text arrays and sequences).
    pub fn utf8(mut self) -> Integer {
        self.encoding = Encoding::Utf8;
        self
    }

    /// The same integer with alignment `align` bits.
    pub fn aligned(mut self, align: u64) -> Integer {
        self.align = align;
        self
    }

    /// The same integer mapped to the clock `clock` (`map = clock.NAME.value`).
    pub fn mapped(mut self, clock: &str) -> Integer {
        self.map = Some(clock.to_owned());
        self
    }
}

/// A floating point type: `floating_point { exp_dig = ..; mant_dig = ..; }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Float {
    /// Exponent digits (8 for binary32, 11 for binary64).
    pub exp_dig: u32,
    /// Mantissa digits, including the implicit bit (24 for binary32, 53 for binary64).
    pub mant_dig: u32,
    /// Alignment in bits.
    pub align: u64,
    /// Byte order; `None` means the trace's byte order.
    pub byte_order: Option<ByteOrder>,
}

impl Float {
    /// IEEE 754 binary32, byte aligned.
    pub fn binary32() -> Float {
        Float {
            exp_dig: 8,
            mant_dig: 24,
            align: 8,
            byte_order: None,
        }
    }

    /// IEEE 754 binary64, byte aligned.
    pub fn binary64() -> Float {
        Float {
            exp_dig: 11,
            mant_dig: 53,
            align: 8,
            byte_order: None,
        }
    }
}

/// One entry of an enumeration: `LABEL = START ... END`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnumEntry {
    /// The label, written quoted so any text is allowed.
    pub label: String,
    /// First value of the range.
    pub start: i128,
    /// Last value of the range (equal to `start` for a single value).
    pub end: i128,
}

/// An enumeration: an integer container whose values have labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enum {
    /// The integer that holds the value.
    pub container: Integer,
    /// Labels and their value ranges.
    pub entries: Vec<EnumEntry>,
}

impl Enum {
    /// The labels with a range that holds `v` (none, one, or several when
    /// ranges overlap), each once, in the order labels first appear in the
    /// declaration: a label given several ranges is one mapping (§4.1.8),
    /// as babeltrace2 reads it.
    pub fn labels(&self, v: i128) -> impl Iterator<Item = &str> {
        let holds = |x: &&EnumEntry| x.start <= v && v <= x.end;
        let mut hits: Vec<(usize, &str)> = Vec::new();
        for x in self.entries.iter().filter(holds) {
            // Where the label first appears (usually here: one scan only
            // when a value has several labels).
            let first = self
                .entries
                .iter()
                .position(|y| y.label == x.label)
                .unwrap_or(0);
            if !hits.iter().any(|&(_, l)| l == x.label) {
                hits.push((first, &x.label));
            }
        }
        hits.sort_unstable_by_key(|&(i, _)| i);
        hits.into_iter().map(|(_, l)| l)
    }
}

/// A CTF type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `integer { ... }`.
    Integer(Integer),
    /// `floating_point { ... }`.
    Float(Float),
    /// `string` (NUL-terminated, byte aligned).
    String(Encoding),
    /// `enum : container { ... }`.
    Enum(Enum),
    /// `struct { ... }`.
    Struct(Struct),
    /// Fixed-length array `T name[len]`.
    Array {
        /// Element type.
        element: Box<Type>,
        /// Number of elements.
        len: u64,
    },
    /// Sequence `T name[length]`, whose length is an earlier unsigned integer field.
    Sequence {
        /// Element type.
        element: Box<Type>,
        /// Path of the length field, as written in TSDL (escaped name).
        length: String,
    },
    /// A variant: one of `options`, chosen by the label of the enum field at
    /// path `tag` (resolved when decoding).
    Variant {
        /// Path of the tag field, as written in TSDL.
        tag: String,
        /// The options, named like the tag's labels.
        options: Vec<Field>,
    },
    /// A type named earlier with `typealias` (written by name).
    Named(String),
}

/// A named field of a structure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name as the user wrote it; the writer escapes it for TSDL (see
    /// [`escape_name`]).
    pub name: String,
    /// Field type.
    pub ty: Type,
}

impl Field {
    /// A field named `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: Type) -> Field {
        Field {
            name: name.into(),
            ty,
        }
    }
}

/// A structure: fields in order, aligned on the largest member alignment or
/// `min_align` if larger.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Struct {
    /// Fields, in encoding order.
    pub fields: Vec<Field>,
    /// Minimum alignment in bits (`align(N)` after the body), if any.
    pub min_align: Option<u64>,
}

impl Struct {
    /// A structure with these fields and no extra alignment.
    pub fn new(fields: Vec<Field>) -> Struct {
        Struct {
            fields,
            min_align: None,
        }
    }
}

/// A value of the `env` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvValue {
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
}

/// A clock class (§8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Clock name, referenced by `map = clock.NAME.value`.
    pub name: String,
    /// Optional description.
    pub description: Option<String>,
    /// Frequency in Hz.
    pub freq: u64,
    /// Precision in cycles.
    pub precision: u64,
    /// Offset in seconds from the epoch (1970-01-01 UTC when `absolute`).
    pub offset_s: i64,
    /// Offset in cycles, added to `offset_s`.
    pub offset: i64,
    /// The clock is a global reference (realtime-based).
    pub absolute: bool,
}

impl Clock {
    /// A clock named `name` ticking at `freq` Hz, with no offset.
    pub fn new(name: &str, freq: u64) -> Clock {
        Clock {
            name: name.to_owned(),
            description: None,
            freq,
            precision: 0,
            offset_s: 0,
            offset: 0,
            absolute: false,
        }
    }
}

/// A stream class: the layout shared by a set of stream files.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StreamClass {
    /// Stream class id, matched against the packet header's `stream_id`.
    pub id: Option<u64>,
    /// `packet.context`.
    pub packet_context: Option<Struct>,
    /// `event.header`.
    pub event_header: Option<Struct>,
    /// `event.context`.
    pub event_context: Option<Struct>,
}

/// An event class: one kind of event (one tracepoint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventClass {
    /// Event name (tape uses dotted names: `app.net.rx`).
    pub name: String,
    /// Event id, unique within its stream class.
    pub id: u64,
    /// Stream class id.
    pub stream_id: Option<u64>,
    /// Log level, if any.
    pub loglevel: Option<i64>,
    /// `model.emf.uri`: where the event is described or emitted (LTTng's
    /// `TRACEPOINT_MODEL_EMF_URI`; tape: a `tracing` callsite's
    /// `file:line`), if given.
    pub emf_uri: Option<String>,
    /// The event context (`context := struct {...}`), if any.
    pub context: Option<Struct>,
    /// The payload (`fields := struct {...}`), if declared: an event whose
    /// payload is declared empty (`struct { }`) is a different trace from
    /// one that declares none, and readers show the two differently.
    pub fields: Option<Struct>,
    /// Whether the metadata gave the id (a parsed event without one is the
    /// only event of its stream).
    pub id_given: bool,
}

impl EventClass {
    /// An event named `name` with id `id` and payload `fields`.
    pub fn new(name: &str, id: u64, fields: Struct) -> EventClass {
        EventClass {
            name: name.to_owned(),
            id,
            stream_id: None,
            loglevel: None,
            emf_uri: None,
            context: None,
            fields: Some(fields),
            id_given: true,
        }
    }
}

/// A whole trace description: what the `metadata` file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Trace UUID, repeated in every packet header.
    pub uuid: [u8; 16],
    /// Byte order of the trace.
    pub byte_order: ByteOrder,
    /// Named types (`typealias TYPE := NAME;`), written first.
    pub aliases: Vec<(String, Type)>,
    /// `trace.packet.header`.
    pub packet_header: Option<Struct>,
    /// The `env` block.
    pub env: Vec<(String, EnvValue)>,
    /// Clock classes.
    pub clocks: Vec<Clock>,
    /// Stream classes.
    pub streams: Vec<StreamClass>,
    /// Event classes.
    pub events: Vec<EventClass>,
}

impl Trace {
    /// An empty trace in the machine's byte order.
    pub fn new(uuid: [u8; 16]) -> Trace {
        Trace {
            uuid,
            byte_order: ByteOrder::native(),
            aliases: Vec::new(),
            packet_header: None,
            env: Vec::new(),
            clocks: Vec::new(),
            streams: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Whether tape wrote this trace (its `env` says `tracer_name =
    /// "tape"`): its losses are in `env` and its own stream, and its
    /// metadata is held to what babeltrace2 reads.
    pub fn written_by_tape(&self) -> bool {
        self.env
            .iter()
            .any(|(k, v)| k == "tracer_name" && matches!(v, EnvValue::Str(s) if s == TRACER_NAME))
    }

    /// The metadata text (TSDL), starting with `/* CTF 1.8 */`; an error
    /// when an identifier the model holds is not one (a field name is
    /// escaped, never refused: [`escape_name`]), or names two fields of one
    /// structure alike, so that no trace is written that readers refuse.
    pub fn to_tsdl(&self) -> Result<String, TsdlError> {
        tsdl::write_trace(self)
    }
}

/// Formats a UUID as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuid_string(uuid: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A decoded value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An unsigned integer and its display base.
    UInt(u64, Base),
    /// A signed integer and its display base.
    SInt(i64, Base),
    /// An enumeration: the integer and the labels whose range holds it.
    Enum {
        /// The value (signed containers are stored sign-extended).
        value: i128,
        /// Matching labels (none: an unknown value).
        labels: Vec<String>,
    },
    /// An integer of more than 64 bits, in decimal (`-` and digits).
    Wide(String),
    /// A floating point number.
    Float(f64),
    /// A string, or an array/sequence of text bytes up to its first NUL.
    Str(String),
    /// A structure: fields in order, names as written in the metadata.
    Struct(Vec<(String, Value)>),
    /// An array or sequence.
    Array(Vec<Value>),
    /// A variant: the selected option's name and value.
    Variant(String, Box<Value>),
}

impl Value {
    /// The value as an unsigned integer (lengths, ids, sizes).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::UInt(v, _) => Some(*v),
            Value::SInt(v, _) => u64::try_from(*v).ok(),
            Value::Enum { value, .. } => u64::try_from(*value).ok(),
            _ => None,
        }
    }

    /// A field of a structure, by name as written.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(f) => f.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }
}
