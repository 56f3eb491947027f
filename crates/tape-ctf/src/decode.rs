//! Decoding CTF 1.8 data streams: bits to values (§4, §5, §6, §8).
//!
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

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{
    Base, ByteOrder, Clock, Encoding, EventClass, Integer, StreamClass, Struct, Trace, Type,
};

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

/// One decoded event.
#[derive(Clone, Debug)]
pub struct Event {
    /// The event class.
    pub class: Arc<EventClass>,
    /// Clock value after the event header (cycles), if the stream has a clock.
    pub cycles: Option<u64>,
    /// That clock value in ns since the clock's origin (offsets applied).
    pub ns: Option<i128>,
    /// The packet context of the packet holding the event.
    pub packet_context: Arc<Value>,
    /// `stream.event.header`.
    pub header: Value,
    /// `stream.event.context`.
    pub stream_context: Option<Value>,
    /// `event.context`.
    pub context: Option<Value>,
    /// `event.fields`.
    pub payload: Value,
}

/// What a stream reports besides events.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An event.
    Event(Event),
    /// Events the tracer discarded between the previous packet's end and
    /// this packet's end (from `events_discarded`).
    Lost {
        /// How many.
        count: u64,
        /// Clock (ns) of the previous packet's end, if known.
        begin_ns: Option<i128>,
        /// Clock (ns) of this packet's end, if known.
        end_ns: Option<i128>,
    },
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.class.name == other.class.name
            && self.cycles == other.cycles
            && self.payload == other.payload
    }
}

/// The trace description prepared for decoding.
#[derive(Debug)]
pub struct Schema {
    /// The parsed metadata.
    pub trace: Trace,
    events: Vec<Arc<EventClass>>,
}

impl Schema {
    /// Prepares a parsed trace for decoding.
    pub fn new(mut trace: Trace) -> Schema {
        // No `stream` block: one implicit stream class with no header or
        // context (events are then told apart by nothing: one event class).
        if trace.streams.is_empty() {
            trace.streams.push(StreamClass::default());
        }
        let events = trace.events.iter().cloned().map(Arc::new).collect();
        Schema { trace, events }
    }

    fn stream_class(&self, id: Option<u64>) -> Option<&StreamClass> {
        match id {
            Some(id) => self.trace.streams.iter().find(|s| s.id.unwrap_or(0) == id),
            None if self.trace.streams.len() <= 1 => self.trace.streams.first(),
            None => None,
        }
    }

    fn event_class(&self, stream: u64, id: Option<u64>) -> Option<&Arc<EventClass>> {
        let single_stream = self.trace.streams.len() <= 1;
        let in_stream = |e: &&Arc<EventClass>| {
            e.stream_id
                .map_or(single_stream || stream == 0, |s| s == stream)
        };
        match id {
            Some(id) => self.events.iter().filter(in_stream).find(|e| e.id == id),
            None => {
                let mut it = self.events.iter().filter(in_stream);
                let first = it.next();
                if it.next().is_some() {
                    None
                } else {
                    first
                }
            }
        }
    }

    /// The clock the stream's timestamps refer to.
    fn clock_for(&self, st: Option<&StreamClass>) -> Option<Clock> {
        let mut mapped = None;
        if let Some(st) = st {
            for s in [&st.event_header, &st.packet_context].into_iter().flatten() {
                find_map(&Type::Struct(s.clone()), &mut mapped);
            }
        }
        match mapped {
            Some(name) => self.trace.clocks.iter().find(|c| c.name == name).cloned(),
            None if self.trace.clocks.len() == 1 => self.trace.clocks.first().cloned(),
            None => Some(Clock::new("default", 1_000_000_000)),
        }
    }
}

fn find_map(t: &Type, out: &mut Option<String>) {
    match t {
        Type::Integer(i) if out.is_none() => out.clone_from(&i.map),
        Type::Enum(e) if out.is_none() => out.clone_from(&e.container.map),
        Type::Struct(s) => s.fields.iter().for_each(|f| find_map(&f.ty, out)),
        Type::Variant { options, .. } => options.iter().for_each(|f| find_map(&f.ty, out)),
        _ => {}
    }
}

/// Converts a clock value to ns since the clock's origin (§8):
/// `offset_s * 1e9 + ns(offset) + ns(value)`, where `ns(x)` is computed as
/// babeltrace2 2.0 does (`x * 1e9 / freq` in double precision, truncated;
/// exact when freq is 1 GHz), so that both print the same nanosecond.
pub fn clock_ns(c: &Clock, cycles: u64) -> i128 {
    let ns = |x: i128| -> i128 {
        if c.freq == 1_000_000_000 {
            x
        } else {
            (x as f64 * 1e9 / c.freq.max(1) as f64) as i128
        }
    };
    i128::from(c.offset_s) * 1_000_000_000 + ns(i128::from(c.offset)) + ns(i128::from(cycles))
}

/// Reads the events of one stream file, packet by packet.
pub struct StreamReader {
    schema: Arc<Schema>,
    file: File,
    path: PathBuf,
    file_len: u64,
    /// Offset of the next packet in the file.
    next_packet: u64,
    /// The current packet.
    buf: Vec<u8>,
    packet_offset: u64,
    /// Bits: position, content end.
    pos: u64,
    content_end: u64,
    stream_id: u64,
    clock: Option<Clock>,
    /// Running clock value (§8 extension rule).
    clock_value: u64,
    packet_context: Arc<Value>,
    in_packet: bool,
    last_discarded: Option<u64>,
    last_end_ns: Option<i128>,
    pending: Option<Item>,
    /// Values of the scopes decoded so far for this event/packet, for paths.
    scopes: Vec<(&'static str, Value)>,
}

impl StreamReader {
    /// Opens a stream file of a trace.
    pub fn open(schema: Arc<Schema>, path: &Path) -> Result<StreamReader, DecodeError> {
        let err = |m: String| DecodeError {
            file: path.to_path_buf(),
            packet_offset: 0,
            bit_offset: 0,
            message: m,
        };
        let file = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let file_len = file
            .metadata()
            .map_err(|e| err(format!("cannot stat: {e}")))?
            .len();
        Ok(StreamReader {
            schema,
            file,
            path: path.to_path_buf(),
            file_len,
            next_packet: 0,
            buf: Vec::new(),
            packet_offset: 0,
            pos: 0,
            content_end: 0,
            stream_id: 0,
            clock: None,
            clock_value: 0,
            packet_context: Arc::new(Value::Struct(Vec::new())),
            in_packet: false,
            last_discarded: None,
            last_end_ns: None,
            pending: None,
            scopes: Vec::new(),
        })
    }

    /// The stream file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, message: impl Into<String>) -> DecodeError {
        DecodeError {
            file: self.path.clone(),
            packet_offset: self.packet_offset,
            bit_offset: self.pos,
            message: message.into(),
        }
    }

    /// The next event or loss report; `None` at the end of the stream.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Item, DecodeError>> {
        loop {
            if let Some(p) = self.pending.take() {
                return Some(Ok(p));
            }
            if self.in_packet && self.pos < self.content_end {
                return Some(self.event().map(Item::Event));
            }
            self.in_packet = false;
            if self.next_packet >= self.file_len {
                return None;
            }
            if let Err(e) = self.packet() {
                self.next_packet = self.file_len;
                return Some(Err(e));
            }
        }
    }

    /// Reads and opens the next packet.
    fn packet(&mut self) -> Result<(), DecodeError> {
        self.packet_offset = self.next_packet;
        self.pos = 0;
        let remaining = self.file_len - self.packet_offset;
        // Read the header and context with a first chunk; the rest once the
        // packet size is known.
        let first = remaining.min(4096) as usize;
        self.buf.clear();
        self.buf.resize(first, 0);
        self.file
            .seek(SeekFrom::Start(self.packet_offset))
            .and_then(|_| self.file.read_exact(&mut self.buf))
            .map_err(|e| self.err(format!("read error: {e}")))?;
        // Until the packet size is known, only the bytes read can be decoded.
        self.content_end = first as u64 * 8;
        let schema = self.schema.clone();
        self.scopes.clear();
        // A header or context larger than the first chunk: read the whole
        // rest (bounded by the file) and decode again.
        let (header, context, st) = match self.packet_prologue(&schema) {
            Ok(v) => v,
            Err(_) if (first as u64) < remaining => {
                let rest = self.read_rest(remaining)?;
                self.buf.extend_from_slice(&rest);
                self.content_end = remaining * 8;
                self.pos = 0;
                self.scopes.clear();
                self.packet_prologue(&schema)?
            }
            Err(e) => return Err(e),
        };
        let _ = header;
        let ctx = context.clone().unwrap_or(Value::Struct(Vec::new()));
        let content = ctx.field("content_size").and_then(Value::as_u64);
        let packet = ctx.field("packet_size").and_then(Value::as_u64);
        let (content, packet) = match (content, packet) {
            (Some(c), Some(p)) => (c, p),
            (Some(c), None) => (c, c.div_ceil(8) * 8),
            (None, Some(p)) => (p, p),
            (None, None) => (remaining * 8, remaining * 8),
        };
        if content > packet {
            return Err(self.err(format!(
                "content_size {content} is larger than packet_size {packet}"
            )));
        }
        if packet % 8 != 0 || packet == 0 || packet < self.pos {
            return Err(self.err(format!("invalid packet_size {packet} bits")));
        }
        if packet / 8 > remaining {
            return Err(self.err(format!(
                "packet_size {} bytes goes past the end of the file ({} bytes left)",
                packet / 8,
                remaining
            )));
        }
        if (self.buf.len() as u64) < packet / 8 {
            let more = self.read_rest(packet / 8)?;
            self.buf
                .extend_from_slice(&more[..(packet / 8 - self.buf.len() as u64) as usize]);
        }
        self.buf.truncate((packet / 8) as usize);
        self.content_end = content;
        self.next_packet = self.packet_offset + packet / 8;
        self.clock = schema.clock_for(st);
        // Timestamps: timestamp_begin resets the running clock.
        if let Some(b) = ctx.field("timestamp_begin").and_then(Value::as_u64) {
            self.clock_value = b;
        }
        let end_ns = ctx
            .field("timestamp_end")
            .and_then(Value::as_u64)
            .and_then(|e| self.clock.as_ref().map(|c| clock_ns(c, e)));
        // Lost events: the difference of the cumulative counter.
        if let Some(d) = ctx.field("events_discarded").and_then(Value::as_u64) {
            let prev = self.last_discarded.unwrap_or(0);
            if d > prev && self.last_discarded.is_some() {
                self.pending = Some(Item::Lost {
                    count: d - prev,
                    begin_ns: self.last_end_ns,
                    end_ns,
                });
            }
            self.last_discarded = Some(d);
        }
        self.last_end_ns = end_ns;
        self.packet_context = Arc::new(ctx);
        self.in_packet = true;
        Ok(())
    }

    fn read_rest(&mut self, upto: u64) -> Result<Vec<u8>, DecodeError> {
        let have = self.buf.len() as u64;
        let n = upto.saturating_sub(have);
        let mut more = vec![0u8; n as usize];
        self.file
            .seek(SeekFrom::Start(self.packet_offset + have))
            .and_then(|_| self.file.read_exact(&mut more))
            .map_err(|e| self.err(format!("read error: {e}")))?;
        Ok(more)
    }

    #[allow(clippy::type_complexity)]
    fn packet_prologue<'s>(
        &mut self,
        schema: &'s Schema,
    ) -> Result<(Option<Value>, Option<Value>, Option<&'s StreamClass>), DecodeError> {
        let header = match &schema.trace.packet_header {
            Some(h) => {
                let v = self.decode_scope("trace.packet.header", h)?;
                Some(v)
            }
            None => None,
        };
        if let Some(h) = &header {
            if let Some(m) = h.field("magic").and_then(Value::as_u64) {
                if m != 0xC1FC_1FC1 {
                    return Err(self.err(format!("bad packet magic {m:#x} (expected 0xc1fc1fc1)")));
                }
            }
        }
        let sid = header
            .as_ref()
            .and_then(|h| h.field("stream_id"))
            .and_then(Value::as_u64);
        let st = schema
            .stream_class(sid)
            .ok_or_else(|| self.err(format!("no stream class for stream_id {sid:?}")))?;
        self.stream_id = sid.unwrap_or(0);
        let context = match &st.packet_context {
            Some(c) => Some(self.decode_scope("stream.packet.context", c)?),
            None => None,
        };
        Ok((header, context, Some(st)))
    }

    fn event(&mut self) -> Result<Event, DecodeError> {
        let schema = self.schema.clone();
        let st = schema
            .stream_class(Some(self.stream_id))
            .or_else(|| schema.stream_class(None))
            .ok_or_else(|| self.err("no stream class"))?;
        let start = self.pos;
        // Keep the packet scopes for absolute paths; drop the last event's.
        self.scopes
            .retain(|(n, _)| n.starts_with("trace.") || n.starts_with("stream.packet"));
        let header = match &st.event_header {
            Some(h) => self.decode_scope("stream.event.header", h)?,
            None => Value::Struct(Vec::new()),
        };
        let cycles = self.clock.as_ref().map(|_| self.clock_value);
        let ns = self.clock.as_ref().map(|c| clock_ns(c, self.clock_value));
        let id = last_id(&header);
        let class = schema
            .event_class(self.stream_id, id)
            .cloned()
            .ok_or_else(|| DecodeError {
                bit_offset: start,
                ..self.err(format!(
                    "unknown event id {id:?} in stream class {}",
                    self.stream_id
                ))
            })?;
        let stream_context = match &st.event_context {
            Some(c) => Some(self.decode_scope("stream.event.context", c)?),
            None => None,
        };
        let context = match &class.context {
            Some(c) => Some(self.decode_scope("event.context", c)?),
            None => None,
        };
        let payload = self.decode_scope("event.fields", &class.fields)?;
        if self.pos == start {
            return Err(self.err("an event of length 0 (forbidden by the CTF spec)"));
        }
        Ok(Event {
            class,
            cycles,
            ns,
            packet_context: self.packet_context.clone(),
            header,
            stream_context,
            context,
            payload,
        })
    }

    fn decode_scope(&mut self, name: &'static str, s: &Struct) -> Result<Value, DecodeError> {
        let mut open = Vec::new();
        let v = self.decode_struct(s, &mut open, name)?;
        self.scopes.push((name, v.clone()));
        Ok(v)
    }

    fn align(&mut self, bits: u32) -> Result<(), DecodeError> {
        let a = u64::from(bits.max(1));
        let p = self.pos.div_ceil(a) * a;
        if p > self.content_end {
            return Err(self.err("alignment goes past the end of the packet content"));
        }
        self.pos = p;
        Ok(())
    }

    fn read_bits(&mut self, size: u32, order: ByteOrder) -> Result<u64, DecodeError> {
        let size = u64::from(size);
        if size > 64 {
            return Err(self.err(format!("integers of {size} bits are not supported")));
        }
        if self.pos + size > self.content_end {
            return Err(self.err(format!(
                "a {size}-bit field goes past the end of the packet content (bit {})",
                self.content_end
            )));
        }
        let buf = &self.buf;
        let mut v: u64 = 0;
        let start = self.pos;
        if start % 8 == 0 && size % 8 == 0 {
            let b = (start / 8) as usize;
            let n = (size / 8) as usize;
            let bytes = &buf[b..b + n];
            for (i, &x) in bytes.iter().enumerate() {
                match order {
                    ByteOrder::Little => v |= u64::from(x) << (8 * i),
                    ByteOrder::Big => v = (v << 8) | u64::from(x),
                }
            }
        } else {
            for k in 0..size {
                let bit = start + k;
                let byte = buf[(bit / 8) as usize];
                match order {
                    ByteOrder::Little => v |= u64::from((byte >> (bit % 8)) & 1) << k,
                    ByteOrder::Big => v = (v << 1) | u64::from((byte >> (7 - bit % 8)) & 1),
                }
            }
        }
        self.pos += size;
        Ok(v)
    }

    fn int(&mut self, i: &Integer) -> Result<(u64, i64), DecodeError> {
        self.align(i.align)?;
        let order = i.byte_order.unwrap_or(self.schema.trace.byte_order);
        let raw = self.read_bits(i.size, order)?;
        let signed = if i.signed && i.size < 64 && i.size > 0 {
            let shift = 64 - i.size;
            ((raw << shift) as i64) >> shift
        } else {
            raw as i64
        };
        Ok((raw, signed))
    }

    fn update_clock(&mut self, size: u32, value: u64) {
        if size >= 64 {
            self.clock_value = value;
            return;
        }
        let mask = (1u64 << size) - 1;
        let cur = self.clock_value & mask;
        if value < cur {
            self.clock_value = self.clock_value.wrapping_add(mask + 1);
        }
        self.clock_value = (self.clock_value & !mask) | value;
    }

    fn decode_struct(
        &mut self,
        s: &Struct,
        open: &mut Vec<Vec<(String, Value)>>,
        scope: &'static str,
    ) -> Result<Value, DecodeError> {
        self.align(struct_align(s))?;
        open.push(Vec::new());
        for f in &s.fields {
            let v = match self.decode(&f.ty, open, scope, &f.name) {
                Ok(v) => v,
                Err(e) => {
                    open.pop();
                    return Err(e);
                }
            };
            open.last_mut().expect("pushed").push((f.name.clone(), v));
        }
        Ok(Value::Struct(open.pop().expect("pushed")))
    }

    fn decode(
        &mut self,
        t: &Type,
        open: &mut Vec<Vec<(String, Value)>>,
        scope: &'static str,
        name: &str,
    ) -> Result<Value, DecodeError> {
        match t {
            Type::Integer(i) => {
                let (raw, signed) = self.int(i)?;
                let clocked = i.map.is_some()
                    || (name == "timestamp" && scope == "stream.event.header")
                    || (name == "timestamp_begin" && scope == "stream.packet.context");
                if clocked && !(scope == "stream.packet.context" && name == "timestamp_end") {
                    self.update_clock(i.size, raw);
                }
                Ok(if i.signed {
                    Value::SInt(signed, i.base)
                } else {
                    Value::UInt(raw, i.base)
                })
            }
            Type::Enum(e) => {
                let (raw, signed) = self.int(&e.container)?;
                if e.container.map.is_some()
                    || (name == "timestamp" && scope == "stream.event.header")
                {
                    self.update_clock(e.container.size, raw);
                }
                let value = if e.container.signed {
                    i128::from(signed)
                } else {
                    i128::from(raw)
                };
                let labels = e
                    .entries
                    .iter()
                    .filter(|x| x.start <= value && value <= x.end)
                    .map(|x| x.label.clone())
                    .collect();
                Ok(Value::Enum { value, labels })
            }
            Type::Float(f) => {
                self.align(f.align)?;
                let order = f.byte_order.unwrap_or(self.schema.trace.byte_order);
                let size = f.exp_dig + f.mant_dig;
                let raw = self.read_bits(size, order)?;
                Ok(Value::Float(if size == 32 {
                    f64::from(f32::from_bits(raw as u32))
                } else {
                    f64::from_bits(raw)
                }))
            }
            Type::String(_) => {
                self.align(8)?;
                let start = (self.pos / 8) as usize;
                let end = ((self.content_end / 8) as usize).min(self.buf.len());
                let nul = self.buf[start..end]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| {
                        self.err("a string has no NUL before the end of the packet content")
                    })?;
                let s = String::from_utf8_lossy(&self.buf[start..start + nul]).into_owned();
                self.pos += (nul as u64 + 1) * 8;
                Ok(Value::Str(s))
            }
            Type::Struct(s) => self.decode_struct(s, open, scope),
            Type::Array { element, len } => self.decode_list(element, *len, open, scope),
            Type::Sequence { element, length } => {
                let len = self
                    .lookup(length, open)
                    .and_then(|v| match v {
                        Value::UInt(n, _) => Some(n),
                        Value::Enum { value, .. } => u64::try_from(value).ok(),
                        _ => None,
                    })
                    .ok_or_else(|| {
                        self.err(format!(
                            "sequence length `{length}` is not an unsigned integer decoded before"
                        ))
                    })?;
                self.decode_list(element, len, open, scope)
            }
            Type::Variant { tag, options } => {
                let labels = match self.lookup(tag, open) {
                    Some(Value::Enum { labels, .. }) => labels,
                    _ => {
                        return Err(
                            self.err(format!("variant tag `{tag}` is not an enum decoded before"))
                        )
                    }
                };
                let opt = labels
                    .iter()
                    .find_map(|l| options.iter().find(|o| &o.name == l))
                    .ok_or_else(|| {
                        self.err(format!(
                            "variant tag `{tag}` selects no option (labels {labels:?})"
                        ))
                    })?;
                let v = self.decode(&opt.ty, open, scope, &opt.name)?;
                Ok(Value::Variant(opt.name.clone(), Box::new(v)))
            }
            Type::Named(n) => Err(self.err(format!("unresolved type `{n}`"))),
        }
    }

    fn decode_list(
        &mut self,
        element: &Type,
        len: u64,
        open: &mut Vec<Vec<(String, Value)>>,
        scope: &'static str,
    ) -> Result<Value, DecodeError> {
        // Text: an array or sequence of 8-bit encoded integers.
        if let Type::Integer(i) = element {
            if i.size == 8 && i.encoding != Encoding::None && i.align <= 8 {
                self.align(i.align)?;
                if self.pos % 8 == 0 {
                    let bytes = len
                        .checked_mul(8)
                        .filter(|b| self.pos + b <= self.content_end);
                    let Some(bits) = bytes else {
                        return Err(self.err(format!(
                            "a text of {len} bytes goes past the end of the packet content"
                        )));
                    };
                    let start = (self.pos / 8) as usize;
                    let raw = &self.buf[start..start + len as usize];
                    let text = raw.split(|&b| b == 0).next().unwrap_or(&[]);
                    let s = String::from_utf8_lossy(text).into_owned();
                    self.pos += bits;
                    return Ok(Value::Str(s));
                }
            }
        }
        // Alignment applies even when empty (§4.2.3).
        self.align(type_align(element))?;
        // A length past what remains cannot be right, and must not size an
        // allocation: each element takes at least `min_bits(element)` bits;
        // elements of size 0 (empty structs) are bounded separately.
        let min = min_bits(element);
        let room = self.content_end - self.pos;
        if (min > 0 && len > room / min) || (min == 0 && len > 1 << 20) {
            return Err(self.err(format!(
                "a length of {len} goes past the end of the packet content"
            )));
        }
        let mut items = Vec::with_capacity(len.min(4096) as usize);
        for _ in 0..len {
            items.push(self.decode(element, open, scope, "")?);
        }
        Ok(Value::Array(items))
    }

    /// Resolves a length or tag path: relative (innermost struct first,
    /// then outward), or absolute (`event.fields.x`, `stream.packet.context.x`...).
    fn lookup(&self, path: &str, open: &[Vec<(String, Value)>]) -> Option<Value> {
        const PREFIXES: [&str; 6] = [
            "trace.packet.header",
            "stream.packet.context",
            "stream.event.header",
            "stream.event.context",
            "event.context",
            "event.fields",
        ];
        for p in PREFIXES {
            if let Some(rest) = path.strip_prefix(p).and_then(|r| r.strip_prefix('.')) {
                let mut parts = rest.split('.');
                let first = parts.next()?;
                // The scope may be complete, or being decoded now.
                let base = self
                    .scopes
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == p)
                    .and_then(|(_, v)| v.field(first).cloned())
                    .or_else(|| {
                        open.first().and_then(|f| {
                            f.iter()
                                .rev()
                                .find(|(n, _)| n == first)
                                .map(|(_, v)| v.clone())
                        })
                    })?;
                return parts.try_fold(base, |v, part| v.field(part).cloned());
            }
        }
        let mut parts = path.split('.');
        let first = parts.next()?;
        let base = open.iter().rev().find_map(|fields| {
            fields
                .iter()
                .rev()
                .find(|(n, _)| n == first)
                .map(|(_, v)| v.clone())
        })?;
        parts.try_fold(base, |v, part| v.field(part).cloned())
    }
}

/// The event id in an event header: the last integer or enum named `id`,
/// at any depth (the LTTng compact/extended headers put one in a variant).
fn last_id(h: &Value) -> Option<u64> {
    fn walk(v: &Value, out: &mut Option<u64>) {
        match v {
            Value::Struct(f) => {
                for (n, x) in f {
                    if n == "id" {
                        if let Some(i) = x.as_u64() {
                            *out = Some(i);
                            continue;
                        }
                    }
                    walk(x, out);
                }
            }
            Value::Variant(_, x) => walk(x, out),
            _ => {}
        }
    }
    let mut out = None;
    walk(h, &mut out);
    out
}

fn struct_align(s: &Struct) -> u32 {
    s.fields
        .iter()
        .map(|f| type_align(&f.ty))
        .chain(s.min_align)
        .max()
        .unwrap_or(1)
}

/// The alignment of a type, in bits (a variant: 1; it aligns per option).
fn type_align(t: &Type) -> u32 {
    match t {
        Type::Integer(i) => i.align,
        Type::Enum(e) => e.container.align,
        Type::Float(f) => f.align,
        Type::String(_) => 8,
        Type::Struct(s) => struct_align(s),
        Type::Array { element, .. } | Type::Sequence { element, .. } => type_align(element),
        Type::Variant { .. } | Type::Named(_) => 1,
    }
}

/// The fewest bits a value of this type takes (0 for an empty struct).
fn min_bits(t: &Type) -> u64 {
    match t {
        Type::Integer(i) => u64::from(i.size),
        Type::Enum(e) => u64::from(e.container.size),
        Type::Float(f) => u64::from(f.exp_dig + f.mant_dig),
        Type::String(_) => 8,
        Type::Struct(s) => s.fields.iter().map(|f| min_bits(&f.ty)).sum(),
        Type::Array { element, len } => min_bits(element).saturating_mul(*len),
        Type::Sequence { .. } | Type::Variant { .. } | Type::Named(_) => 0,
    }
}
