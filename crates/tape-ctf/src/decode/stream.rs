//! The stream reader: a stream file's packets read one at a time and their
//! events decoded with compiled [plans](crate::decode::plan). The merge
//! stage orders several streams ([`crate::merge`]); `tape show`'s hot loop
//! runs the text programs of its events here ([`StreamReader::render_quick`]).
//!
//! A stream is read in two steps per event: [`StreamReader::peek`] decodes the
//! event header (enough to know the time and the event class), the merge
//! picks the stream with the earliest event, and [`StreamReader::emit`]
//! decodes the rest into a [`Sink`].

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::decode::json::JsonSink;
use crate::decode::plan::ValueSink;
use crate::decode::plan::{
    self, Bits, Compiler, Discard, HeaderPlan, QuickHeader, ScopePlan, Sink, State, NONE,
};
use crate::decode::text::line::{Lit, TextBuf, TextProgram};
use crate::decode::text::sink::{TextSink, HIDDEN};
use crate::decode::text::TimeText;
use crate::decode::{ClockConv, DecodeError, Value};
use crate::metadata::read::TraceDir;
use crate::{Clock, EnvValue, EventClass, Trace, Type};

pub(crate) struct EventPlan {
    class: Arc<EventClass>,
    context: Option<ScopePlan>,
    fields: Option<ScopePlan>,
    /// `host name:`, the start of its text lines.
    head: Vec<Lit>,
    /// The text of its scopes (and the stream's event context) when they
    /// are all flat.
    pub(crate) text: Option<TextProgram>,
    /// How to step over its scopes when nothing in them is needed.
    skip: Option<plan::SkipPlan>,
    /// No scope after the header (no event context of the stream's, no
    /// context, no payload).
    bare: bool,
}

impl EventPlan {
    /// The scopes decoded after the header, in order, with their names:
    /// the stream's event context, the event's context, the payload.
    fn scopes<'a>(&'a self, sp: &'a StreamPlan) -> [(&'static str, Option<&'a ScopePlan>); 3] {
        [
            ("stream_context", sp.event_context.as_ref()),
            ("context", self.context.as_ref()),
            ("fields", self.fields.as_ref()),
        ]
    }
}

pub(crate) struct StreamPlan {
    id: u64,
    packet_context: Option<ScopePlan>,
    pub(crate) event_header: Option<ScopePlan>,
    /// The event header's plan for the common layouts (see [`HeaderPlan`]).
    header_plan: Option<HeaderPlan>,
    /// Its quick form, when it has one (see [`QuickHeader`]).
    quick_header: Option<QuickHeader>,
    event_context: Option<ScopePlan>,
    /// Event plans by id (dense ids) and the id of the only event when the
    /// header has no id.
    pub(crate) events: Vec<Option<EventPlan>>,
    single: Option<usize>,
    clock: Option<ClockConv>,
}

impl EventPlan {
    /// Writes the text of its lines from after the delta to the first
    /// value: `host name:`, the packet context `packet_text`, and its
    /// program's opening when it has a program. Returns where the opening
    /// starts in `out`.
    pub(crate) fn line_head(&self, packet_text: &TextBuf, out: &mut TextBuf) -> usize {
        for l in &self.head {
            out.lit(l);
        }
        out.put(packet_text.as_slice());
        if self.bare && packet_text.is_empty() {
            // Nothing after the name: babeltrace2 ends `name: ` with its space.
            out.push(b' ');
        }
        let mark = out.len();
        if let Some(text) = &self.text {
            text.opening(!packet_text.is_empty(), out);
        }
        mark
    }
}

/// What follows the time of a text line, the delta to the previous line
/// still unknown (what babeltrace2 prints for the first line); the merge
/// writes the delta over it.
pub(crate) const DELTA_PLACEHOLDER: &[u8; 17] = b"] (+?.?????????) ";

impl StreamPlan {
    /// The next event's header by `quick` (the stream's quick header):
    /// where it ends, the event's index and plan. `None` when the quick
    /// header cannot take it or its id is no event's: the general plan
    /// then decodes it again (and reports an unknown id).
    #[inline(always)]
    fn quick_event(
        &self,
        quick: &QuickHeader,
        buf: &[u8],
        pos: u64,
        end: u64,
        st: &mut State,
    ) -> Option<(u64, usize, &EventPlan)> {
        let (stop, id) = quick.run(buf, pos, end, st)?;
        let idx = match id {
            None => self.single,
            Some(id) => usize::try_from(id).ok(),
        }?;
        Some((stop, idx, self.events.get(idx)?.as_ref()?))
    }
}

/// Every plan of one trace.
pub struct TracePlan {
    /// Read-time formats and hints of the trace (its `env` block).
    pub formats: crate::metadata::formats::Formats,
    /// The trace's byte order (of the integers that do not state theirs).
    pub byte_order: crate::ByteOrder,
    header: Option<ScopePlan>,
    pub(crate) streams: Vec<StreamPlan>,
    nslots: usize,
}

impl TracePlan {
    /// Compiles the plans of a parsed trace: every scope collected first
    /// (a later scope may name a field of an earlier one), then each
    /// stream's plans emitted, then what each event's plan derives from
    /// them.
    pub fn new(trace: &Trace) -> Result<TracePlan, String> {
        let implicit;
        let streams: Vec<&crate::StreamClass> = if trace.streams.is_empty() {
            implicit = crate::StreamClass::default();
            vec![&implicit]
        } else {
            trace.streams.iter().collect()
        };
        let single_stream = streams.len() == 1;
        let mut c = Compiler::new(trace.byte_order);
        if let Some(h) = &trace.packet_header {
            c.push("trace.packet.header", h);
            c.collect_scope()?;
        }
        for st in &streams {
            collect_stream(&mut c, st, &events_of(trace, st, single_stream))?;
        }
        let header = match &trace.packet_header {
            Some(_) => Some(c.emit_scope()?),
            None => None,
        };
        let mut plans = Vec::new();
        for st in &streams {
            plans.push(stream_plan(
                &mut c,
                trace,
                st,
                &events_of(trace, st, single_stream),
            )?);
        }
        let host = trace
            .env
            .iter()
            .find(|(k, _)| k == "hostname")
            .map(|(_, v)| match v {
                EnvValue::Str(s) => s.clone(),
                EnvValue::Int(i) => i.to_string(),
            });
        for sp in &mut plans {
            derive_event_plans(sp, host.as_deref());
        }
        Ok(TracePlan {
            formats: crate::metadata::formats::Formats::new(trace),
            byte_order: trace.byte_order,
            header,
            streams: plans,
            nslots: c.slots(),
        })
    }
}

/// The event classes of stream `st` (all of a trace with one stream; of a
/// stream without an id, those without one too).
fn events_of<'t>(
    trace: &'t Trace,
    st: &crate::StreamClass,
    single_stream: bool,
) -> Vec<&'t EventClass> {
    let sid = st.id.unwrap_or(0);
    trace
        .events
        .iter()
        .filter(|e| e.stream_id.map_or(single_stream || sid == 0, |x| x == sid))
        .collect()
}

/// A stream's scopes, and those of its events (`evs`), as they nest:
/// the compiler's first pass.
fn collect_stream<'t>(
    c: &mut Compiler<'t>,
    st: &'t crate::StreamClass,
    evs: &[&'t EventClass],
) -> Result<(), String> {
    let mut pushed = 0;
    for (name, s) in [
        ("stream.packet.context", &st.packet_context),
        ("stream.event.header", &st.event_header),
        ("stream.event.context", &st.event_context),
    ] {
        if let Some(s) = s {
            c.push(name, s);
            c.collect_scope()?;
            pushed += 1;
        }
    }
    for e in evs {
        let mut n = 0;
        for (name, s) in [("event.context", &e.context), ("event.fields", &e.fields)] {
            if let Some(s) = s {
                c.push(name, s);
                c.collect_scope()
                    .map_err(|m| format!("event `{}`: {m}", e.name))?;
                n += 1;
            }
        }
        for _ in 0..n {
            c.pop();
        }
    }
    for _ in 0..pushed {
        c.pop();
    }
    Ok(())
}

/// Stream `st`'s plan, with its events' (`evs`): the compiler's second
/// pass.
fn stream_plan<'t>(
    c: &mut Compiler<'t>,
    trace: &Trace,
    st: &'t crate::StreamClass,
    evs: &[&'t EventClass],
) -> Result<StreamPlan, String> {
    let mut pushed = 0;
    let mut out: [Option<ScopePlan>; 3] = [None, None, None];
    for (k, (name, s)) in [
        ("stream.packet.context", &st.packet_context),
        ("stream.event.header", &st.event_header),
        ("stream.event.context", &st.event_context),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(s) = s {
            c.push(name, s);
            out[k] = Some(c.emit_scope()?);
            pushed += 1;
        }
    }
    let mut events: Vec<Option<EventPlan>> = Vec::new();
    for e in evs {
        let (id, plan) = event_plan(c, e)?;
        if events.len() <= id {
            events.resize_with(id + 1, || None);
        }
        events[id] = Some(plan);
    }
    for _ in 0..pushed {
        c.pop();
    }
    let single = if evs.len() == 1 {
        Some(evs[0].id as usize)
    } else {
        None
    };
    let [packet_context, event_header, event_context] = out;
    let header_plan = event_header.as_ref().and_then(HeaderPlan::new);
    Ok(StreamPlan {
        id: st.id.unwrap_or(0),
        packet_context,
        quick_header: header_plan.as_ref().and_then(QuickHeader::new),
        header_plan,
        event_header,
        event_context,
        events,
        single,
        clock: clock_for(trace, st).as_ref().map(ClockConv::new),
    })
}

/// Event class `e`'s id and plan (its scopes; what derives from them
/// comes later, [`derive_event_plans`]).
fn event_plan<'t>(c: &mut Compiler<'t>, e: &'t EventClass) -> Result<(usize, EventPlan), String> {
    let mut n = 0;
    let mut scopes: [Option<ScopePlan>; 2] = [None, None];
    for (k, (name, s)) in [("event.context", &e.context), ("event.fields", &e.fields)]
        .into_iter()
        .enumerate()
    {
        if let Some(s) = s {
            c.push(name, s);
            n += 1;
            scopes[k] = Some(
                c.emit_scope()
                    .map_err(|m| format!("event `{}`: {m}", e.name))?,
            );
        }
    }
    let [context, fields] = scopes;
    for _ in 0..n {
        c.pop();
    }
    let id = usize::try_from(e.id).map_err(|_| format!("event id {} too large", e.id))?;
    if id > 1 << 20 {
        return Err(format!("event id {id} is too large for this reader"));
    }
    Ok((
        id,
        EventPlan {
            class: Arc::new(e.clone()),
            context,
            fields,
            head: Vec::new(),
            text: None,
            skip: None,
            bare: false,
        },
    ))
}

/// What each event plan of stream `sp` derives from its scopes and the
/// stream's: its line's head (`host name:`), its text program and its
/// skip plan.
fn derive_event_plans(sp: &mut StreamPlan, host: Option<&str>) {
    let mut events = std::mem::take(&mut sp.events);
    for ev in events.iter_mut().flatten() {
        let mut head = Vec::new();
        if let Some(h) = host {
            head.extend_from_slice(h.as_bytes());
            head.push(b' ');
        }
        head.extend_from_slice(ev.class.name.as_bytes());
        head.push(b':');
        ev.head = Lit::pieces(&head);
        let scopes: Vec<&ScopePlan> = ev.scopes(sp).into_iter().filter_map(|(_, s)| s).collect();
        let bare = scopes.is_empty();
        let (text, skip) = (TextProgram::new(&scopes), plan::SkipPlan::new(scopes));
        (ev.text, ev.skip, ev.bare) = (text, skip, bare);
    }
    sp.events = events;
}

fn clock_for(trace: &Trace, st: &crate::StreamClass) -> Option<Clock> {
    fn find(t: &Type, out: &mut Option<String>) {
        match t {
            Type::Integer(i) if out.is_none() => out.clone_from(&i.map),
            Type::Enum(e) if out.is_none() => out.clone_from(&e.container.map),
            Type::Struct(s) => s.fields.iter().for_each(|f| find(&f.ty, out)),
            Type::Variant { options, .. } => options.iter().for_each(|f| find(&f.ty, out)),
            _ => {}
        }
    }
    let mut mapped = None;
    for s in [&st.event_header, &st.packet_context].into_iter().flatten() {
        find(&Type::Struct(s.clone()), &mut mapped);
    }
    // Unmapped `timestamp` fields count in ns of an implicit clock (§8).
    let named = |s: &Option<crate::Struct>, n: &str| {
        s.as_ref()
            .is_some_and(|s| s.fields.iter().any(|f| f.name == n))
    };
    let implicit =
        named(&st.event_header, "timestamp") || named(&st.packet_context, "timestamp_begin");
    match mapped {
        Some(name) => trace.clocks.iter().find(|c| c.name == name).cloned(),
        None if trace.clocks.len() == 1 => trace.clocks.first().cloned(),
        None if implicit => Some(Clock::new("default", 1_000_000_000)),
        None => None,
    }
}

/// What [`StreamReader::peek`] found next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// An event at this time (ns since the clock's origin, if clocked).
    Event(Option<i128>),
    /// Lost events, reported at this time.
    Lost(u64, Option<i128>),
    /// The end of the stream.
    End,
}

pub use crate::decode::plan::LOSS_CAUSES;

/// Events lost, per cause of [`LOSS_CAUSES`].
pub type LostByCause = [u64; LOSS_CAUSES.len()];

/// What [`StreamReader::count`] found in a stream.
#[derive(Clone, Debug, Default)]
pub struct StreamCount {
    /// Events read.
    pub events: u64,
    /// Events reported lost (`events_discarded`).
    pub lost: u64,
    /// The same by cause, when the packets say ([`LOSS_CAUSES`]).
    pub lost_by_cause: Option<LostByCause>,
    /// Time of the earliest and of the latest event (ns), if clocked.
    pub first: Option<i128>,
    /// See `first`.
    pub last: Option<i128>,
    /// Events per event class (those seen).
    pub by_class: Vec<(Arc<EventClass>, u64)>,
    /// Where the stream could not be read further: the figures above are
    /// those of what was read before.
    pub stopped: Option<DecodeError>,
}

/// A time that 64-bit nanoseconds since the epoch cannot hold: babeltrace2
/// rejects the trace there, and so does tape (every later time and delta
/// would be meaningless).
fn out_of_range(t: i128) -> bool {
    t < i128::from(i64::MIN) || t > i128::from(i64::MAX)
}

fn range_message(value: u64, t: i128) -> String {
    format!("the clock value {value} is {t} ns since the epoch: out of range of 64-bit nanoseconds")
}

/// One stream file, read with plans.
pub struct StreamReader {
    pub(crate) plan: Arc<TracePlan>,
    file: Arc<File>,
    pub(crate) path: PathBuf,
    file_len: u64,
    /// Where this stream stops: the file's end, or a cut made by
    /// [`StreamReader::split_off`].
    stop: u64,
    next_packet: u64,
    pub(crate) buf: PacketBuf,
    packet_offset: u64,
    pub(crate) pos: u64,
    pub(crate) content_end: u64,
    pub(crate) stream: usize,
    pub(crate) state: State,
    in_packet: bool,
    last_discarded: Option<u64>,
    /// The `lost_<cause>` values of the first and of the last packet read
    /// that has them all.
    lost_causes: Option<(LostByCause, LostByCause)>,
    last_end_ns: Option<i128>,
    /// `timestamp_begin` of the packet being read, in ns.
    begin_ns: Option<i128>,
    pending_lost: Option<(u64, Option<i128>)>,
    /// The packet context, rendered once per packet: babeltrace2's format
    /// (hidden fields left out; empty when nothing is shown), or a JSON
    /// object after [`StreamReader::render_json`].
    pub packet_text: TextBuf,
    json: bool,
    /// The packet context as a value, after [`StreamReader::keep_packet_values`]
    /// (`packet_text` is kept too).
    pub packet_value: Option<Value>,
    values: bool,
    /// The event whose header was decoded by `peek`, waiting for `emit`.
    pub(crate) current: Option<(usize, Option<i128>)>,
    /// Packets read so far: the generation of `line_heads`.
    packets: u64,
    /// Per event class of the packet's stream class, the text of its
    /// lines from the time's `]` to the first value, for the packet
    /// `packets` it was made in (see [`StreamReader::render_quick`]).
    line_heads: Vec<(u64, Vec<Lit>)>,
}

impl StreamReader {
    /// Opens a stream file.
    pub fn open(plan: Arc<TracePlan>, path: &Path) -> Result<StreamReader, DecodeError> {
        let e = |m: String| DecodeError {
            file: path.to_path_buf(),
            packet_offset: 0,
            bit_offset: 0,
            message: m,
        };
        let file = File::open(path).map_err(|x| e(format!("cannot open: {x}")))?;
        let file_len = file
            .metadata()
            .map_err(|x| e(format!("cannot stat: {x}")))?
            .len();
        Ok(StreamReader::from_file(
            plan,
            Arc::new(file),
            path,
            file_len,
        ))
    }

    /// A stream of an open `file`, its first `file_len` bytes, not yet
    /// read; `path` names it in errors (an in-memory file gets a
    /// descriptive name).
    pub fn from_file(
        plan: Arc<TracePlan>,
        file: Arc<File>,
        path: &Path,
        file_len: u64,
    ) -> StreamReader {
        let state = State::new(plan.nslots);
        StreamReader {
            plan,
            file,
            path: path.to_path_buf(),
            file_len,
            stop: file_len,
            next_packet: 0,
            buf: PacketBuf::default(),
            packet_offset: 0,
            pos: 0,
            content_end: 0,
            stream: 0,
            state,
            in_packet: false,
            last_discarded: None,
            lost_causes: None,
            last_end_ns: None,
            begin_ns: None,
            pending_lost: None,
            packet_text: TextBuf::new(),
            json: false,
            packet_value: None,
            values: false,
            current: None,
            packets: 0,
            line_heads: Vec::new(),
        }
    }

    /// The same stream file (the file shared: it is read with `pread`),
    /// not yet read, from the packet at byte `at` to this one's stop.
    fn reopen_at(&self, at: u64) -> StreamReader {
        let mut s = StreamReader::from_file(
            Arc::clone(&self.plan),
            Arc::clone(&self.file),
            &self.path,
            self.file_len, // the length first seen, should the file grow meanwhile
        );
        (s.stop, s.next_packet, s.packet_offset) = (self.stop, at, at);
        (s.json, s.values) = (self.json, self.values);
        s
    }

    /// Takes this stream's packet buffer (once it is read to its end), for
    /// another stream to read into with [`StreamReader::reuse_buffer`].
    pub fn take_buffer(&mut self) -> PacketBuf {
        std::mem::take(&mut self.buf)
    }

    /// Reads the next packets of this stream into `buf` (its contents do
    /// not matter) if it has more room than this stream's buffer and this
    /// stream is between packets; else gives it back. The parts of a
    /// stream pass their buffers on rather than each growing a new one.
    pub fn reuse_buffer(&mut self, mut buf: PacketBuf) -> Option<PacketBuf> {
        if self.in_packet || buf.room() <= self.buf.room() {
            return Some(buf);
        }
        buf.clear();
        self.buf = buf;
        None
    }

    /// Cuts this stream, before it is read, into two that decode on their
    /// own what it would: it keeps its packets up to the cut and returns
    /// a stream of the packets after it. The cut is at the first packet at
    /// least `bytes` past this stream's start whose context sets the clock
    /// (`timestamp_begin`), so that no clock value is carried over the
    /// cut; the returned stream counts lost events from the packet before
    /// the cut, as this one would have. Each packet header on the way is
    /// read (not the events). `None` when there is no such packet, when
    /// this stream was read already, or when a packet header on the way
    /// cannot be read: this stream then meets the error itself, in order.
    pub fn split_off(&mut self, bytes: u64) -> Option<StreamReader> {
        if self.packets > 0 {
            return None;
        }
        let start = self.next_packet;
        let mut walk = self.reopen_at(start);
        (walk.last_discarded, walk.last_end_ns) = (self.last_discarded, self.last_end_ns);
        while walk.next_packet < self.stop {
            let at = walk.next_packet;
            let before = (walk.last_discarded, walk.last_end_ns);
            walk.packet_prologue().ok()?;
            let sets_clock = walk.plan.streams[walk.stream].clock.is_none()
                || u64::try_from(walk.state.slots[plan::SLOT_TS_BEGIN]).is_ok();
            if at > start && at - start >= bytes && sets_clock {
                let mut rest = self.reopen_at(at);
                (rest.last_discarded, rest.last_end_ns) = before;
                self.stop = at;
                return Some(rest);
            }
            walk.packet_counts();
        }
        None
    }

    /// The stream's losses by cause ([`LOSS_CAUSES`]), from its packet
    /// contexts alone (the events are not read): `None` when the packets
    /// do not have the fields. Call it on a stream not yet read.
    pub fn lost_by_cause(&mut self) -> Result<Option<LostByCause>, DecodeError> {
        while self.next_packet < self.stop {
            self.packet_prologue()?;
            self.packet_counts();
        }
        Ok(self.causes())
    }

    /// The stream's first packet's `timestamp_begin` and its last packet's
    /// `timestamp_end`, in ns, from the packet contexts alone (the events
    /// are not read): the span its events lie within. `None` when the
    /// packets do not say. Call it on a stream not yet read.
    pub fn packet_span(&mut self) -> Result<Option<(i128, i128)>, DecodeError> {
        let (mut first, mut last) = (None, None);
        while self.next_packet < self.stop {
            self.packet_prologue()?;
            self.packet_counts();
            first = first.or(self.begin_ns);
            last = self.last_end_ns.or(last);
        }
        Ok(first.zip(last))
    }

    /// Calls `each` with every packet context of the stream, as a value
    /// (the events are not read).
    pub fn packet_contexts(&mut self, mut each: impl FnMut(&Value)) -> Result<(), DecodeError> {
        self.values = true;
        while self.next_packet < self.stop {
            self.packet_prologue()?;
            self.packet_counts();
            if let Some(v) = &self.packet_value {
                each(v);
            }
        }
        Ok(())
    }

    /// Losses by cause between the first and the last packet read.
    fn causes(&self) -> Option<LostByCause> {
        let (first, last) = self.lost_causes?;
        Some(std::array::from_fn(|i| last[i].saturating_sub(first[i])))
    }

    /// The packet being read: its number in this reader (changes at each
    /// packet), and its `timestamp_begin` and `timestamp_end` in ns.
    pub fn packet_times(&self) -> (u64, Option<i128>, Option<i128>) {
        (self.packets, self.begin_ns, self.last_end_ns)
    }

    /// The stream's clock value as last decoded (the raw value of the
    /// last event header or packet context read, in clock cycles): after
    /// a packet's last event, that event's time as the trace counts it.
    pub fn clock_value(&self) -> u64 {
        self.state.clock
    }

    /// The stream file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trace's plan.
    pub fn plan(&self) -> &TracePlan {
        &self.plan
    }

    pub(crate) fn err(&self, message: impl Into<String>) -> DecodeError {
        DecodeError {
            file: self.path.clone(),
            packet_offset: self.packet_offset,
            bit_offset: self.pos,
            message: message.into(),
        }
    }

    fn run<S: Sink>(&mut self, ops: &ScopePlan, end: u64, sink: &mut S) -> Result<(), DecodeError> {
        run_scope(
            self.buf.bytes(),
            &mut self.pos,
            &mut self.state,
            ops,
            end,
            sink,
        )
        .map_err(|e| e.into_decode(&self.path, self.packet_offset))
    }

    /// Where in the packet being read the next event begins (after an
    /// event is emitted: where it ended), in bytes from the packet's start:
    /// a live reader's place in a ring's packet (`tape pipe`'s mark).
    pub fn offset_in_packet(&self) -> u64 {
        self.pos.div_ceil(8)
    }

    /// Decodes the next event header (or finds lost events, or the end).
    pub fn peek(&mut self) -> Result<Next, DecodeError> {
        if let Some((_, t)) = self.current {
            return Ok(Next::Event(t));
        }
        loop {
            // Reported until taken with `take_lost`.
            if let Some((n, t)) = self.pending_lost {
                return Ok(Next::Lost(n, t));
            }
            if self.in_packet && self.pos < self.content_end {
                return self.header();
            }
            self.in_packet = false;
            if self.next_packet >= self.stop {
                return Ok(Next::End);
            }
            if let Err(e) = self.packet() {
                self.next_packet = self.stop;
                return Err(e);
            }
        }
    }

    fn header(&mut self) -> Result<Next, DecodeError> {
        let idx = self.event_class()?;
        let sp = &self.plan.streams[self.stream];
        let t = sp.clock.map(|c| c.ns(self.state.clock));
        if let Some(t) = t.filter(|&t| out_of_range(t)) {
            return Err(self.err(range_message(self.state.clock, t)));
        }
        self.current = Some((idx, t));
        Ok(Next::Event(t))
    }

    /// Decodes an event header: the event's index in its stream plan.
    #[inline]
    fn event_class(&mut self) -> Result<usize, DecodeError> {
        let sp = &self.plan.streams[self.stream];
        let quick = sp.quick_header.as_ref().and_then(|q| {
            sp.quick_event(
                q,
                self.buf.bytes(),
                self.pos,
                self.content_end,
                &mut self.state,
            )
        });
        if let Some((end, idx, _)) = quick {
            self.pos = end;
            return Ok(idx);
        }
        let start = self.pos;
        let planned = match &sp.header_plan {
            Some(h) => {
                let mut b = Bits {
                    buf: self.buf.bytes(),
                    pos: self.pos,
                    end: self.content_end,
                };
                let id = h
                    .run(&mut b, &mut self.state)
                    .map_err(|e| e.into_decode(&self.path, self.packet_offset))?;
                self.pos = b.pos;
                id
            }
            None => None,
        };
        let id = match planned {
            Some(id) => id,
            None => {
                self.state.slots[plan::SLOT_EVENT_ID] = NONE;
                if let Some(h) = &sp.event_header {
                    run_scope(
                        self.buf.bytes(),
                        &mut self.pos,
                        &mut self.state,
                        h,
                        self.content_end,
                        &mut Discard,
                    )
                    .map_err(|e| e.into_decode(&self.path, self.packet_offset))?;
                }
                self.state.slots[plan::SLOT_EVENT_ID]
            }
        };
        let idx = if id == NONE {
            sp.single
        } else {
            usize::try_from(id)
                .ok()
                .filter(|&i| sp.events.get(i).is_some_and(Option::is_some))
        };
        let Some(idx) = idx else {
            let sid = sp.id;
            self.pos = start;
            let shown = if id == NONE {
                "none".to_owned()
            } else {
                id.to_string()
            };
            return Err(self.err(format!("unknown event id {shown} in stream class {sid}")));
        };
        Ok(idx)
    }

    /// The next event's header by `quick`, the quick header of `sp` (this
    /// stream's plan, held apart from `self`): see
    /// [`StreamPlan::quick_event`].
    #[inline(always)]
    fn quick_next<'p>(
        &mut self,
        sp: &'p StreamPlan,
        quick: &QuickHeader,
    ) -> Option<(u64, usize, &'p EventPlan)> {
        sp.quick_event(
            quick,
            self.buf.bytes(),
            self.pos,
            self.content_end,
            &mut self.state,
        )
    }

    /// Renders the next events of the current packet as text lines, as
    /// `[time] (+?.?????????) ` and `output::text::write_event_rest` write them, while
    /// they take the quick paths: the stream's header plan, an event that
    /// `shown` shows, its text program. `line(t, end, delta_at)` is called
    /// after each line with its time, where it ends in `out` and where its
    /// delta placeholder starts from the line's start. Returns how many
    /// lines were rendered: at most `max`, and none started once `out`
    /// holds `text_max` bytes; anything else (a hidden event, the packet's
    /// end, a loss, an error) is left to [`StreamReader::peek`].
    pub fn render_quick<T: TimeText>(
        &mut self,
        out: &mut TextBuf,
        time: &mut T,
        shown: &impl Shown,
        (max, text_max): (usize, usize),
        mut line: impl FnMut(Option<i128>, usize, usize),
    ) -> usize {
        if self.current.is_some()
            || self.pending_lost.is_some()
            || !self.in_packet
            || shown.by_value()
        {
            return 0;
        }
        let plan = Arc::clone(&self.plan);
        let sp = &plan.streams[self.stream];
        let Some(quick) = &sp.quick_header else {
            return 0;
        };
        if sp.clock.is_none() {
            // Lines without a time (no clock) are opened by `peek`'s path.
            return 0;
        }
        let mut n = 0;
        while n < max && out.len() < text_max && self.pos < self.content_end {
            // A header the quick plan cannot take is decoded again by
            // `peek` (the clock and slots it set get the same values).
            let Some((end, idx, ev)) = self.quick_next(sp, quick) else {
                break;
            };
            let t = sp.clock.map(|c| c.ns(self.state.clock));
            if t.is_some_and(out_of_range) {
                // `peek` decodes it again and reports it.
                break;
            }
            self.pos = end;
            let Some(text) = ev.text.as_ref().filter(|_| shown.class(&ev.class, t)) else {
                self.current = Some((idx, t));
                break;
            };
            // `] (+?.?????????) host name: { packet context }, {…`: the
            // same for every event of the class in the packet.
            if self.line_heads.len() <= idx {
                self.line_heads
                    .resize_with(sp.events.len().max(idx + 1), Default::default);
            }
            let (made_in, head) = &mut self.line_heads[idx];
            // (`packets` counts from 1 once a packet is read: the
            // default entry is never current.)
            if *made_in != self.packets {
                let mut h = TextBuf::new();
                h.put(DELTA_PLACEHOLDER);
                ev.line_head(&self.packet_text, &mut h);
                (*made_in, *head) = (self.packets, Lit::pieces(h.as_slice()));
            }
            let start = out.len();
            time.open_line(out, t);
            let delta_at = out.len() + 3 - start;
            for l in head.iter() {
                out.lit(l);
            }
            let mut b = Bits {
                buf: self.buf.bytes(),
                pos: self.pos,
                end: self.content_end,
            };
            if !text.run(&mut b, &mut self.state, out) {
                out.truncate(start);
                self.current = Some((idx, t));
                break;
            }
            self.pos = b.pos;
            line(t, out.len(), delta_at);
            n += 1;
        }
        n
    }

    /// Renders packet contexts as JSON objects (for [`JsonSink`] output).
    pub fn render_json(&mut self) {
        self.json = true;
    }

    /// Keeps each packet context as a [`Value`] (`packet_value`) too,
    /// beside its text or JSON.
    pub fn keep_packet_values(&mut self) {
        self.values = true;
    }

    /// Acknowledges the loss report `peek` returned.
    pub fn take_lost(&mut self) {
        self.pending_lost = None;
    }

    /// The class of the event found by `peek`.
    pub fn class(&self) -> Option<&Arc<EventClass>> {
        let (idx, _) = self.current?;
        self.plan.streams[self.stream].events[idx]
            .as_ref()
            .map(|e| &e.class)
    }

    /// The place of the class of the event found by `peek` in its trace's
    /// plan (stream class, event): a key for tables by class that needs
    /// no hashing, unique within one plan ([`StreamReader::plan`]).
    #[inline]
    pub fn class_index(&self) -> Option<(usize, usize)> {
        let (idx, _) = self.current?;
        Some((self.stream, idx))
    }

    /// Whether the event found by `peek` has scopes besides its payload:
    /// its stream's event context or its own context.
    pub fn has_context(&self) -> bool {
        let sp = &self.plan.streams[self.stream];
        let own = self.current.and_then(|(idx, _)| sp.events[idx].as_ref());
        sp.event_context.is_some() || own.is_some_and(|e| e.context.is_some())
    }

    /// Decodes the event found by `peek` into `sink` as [`StreamReader::emit`]
    /// does, without consuming it: the next `emit` (or a line writer)
    /// decodes it again. For a test on the event's values before it is
    /// rendered (`tape show --filter`).
    pub fn inspect<S: Sink>(&mut self, sink: &mut S) -> Result<(), DecodeError> {
        let (idx, t) = self
            .current
            .ok_or_else(|| self.err("inspect without peek"))?;
        let pos = self.pos;
        // The slots and clock it sets get the same values when decoded again.
        let r = self.emit_class(idx, sink);
        self.pos = pos;
        self.current = Some((idx, t));
        r
    }

    /// Decodes the rest of the event found by `peek`: stream event context,
    /// event context and payload, each as one struct to `sink`.
    pub fn emit<S: Sink>(&mut self, sink: &mut S) -> Result<(), DecodeError> {
        let (idx, _) = self
            .current
            .take()
            .ok_or_else(|| self.err("emit without peek"))?;
        self.emit_class(idx, sink)
    }

    /// The event found by `peek`, taken as the raw bytes of its scopes
    /// (stepped over, not decoded) when they are exactly `len` whole bytes:
    /// for a reader that knows the layout (the function tracer's one
    /// `u32`). `None`, and nothing taken, otherwise: [`StreamReader::emit`]
    /// then decodes it.
    #[inline]
    pub fn emit_raw(&mut self, len: usize) -> Option<&[u8]> {
        let (idx, _) = self.current?;
        let sp = &self.plan.streams[self.stream];
        let ev = sp.events[idx].as_ref()?;
        let end = ev
            .skip
            .as_ref()?
            .run(self.buf.bytes(), self.pos, self.content_end)?;
        let start = self.pos;
        if start % 8 != 0 || end != start + len as u64 * 8 {
            return None;
        }
        self.current = None;
        self.pos = end;
        self.buf
            .bytes()
            .get((start / 8) as usize..(end / 8) as usize)
    }

    #[inline]
    fn emit_class<S: Sink>(&mut self, idx: usize, sink: &mut S) -> Result<(), DecodeError> {
        let sp = &self.plan.streams[self.stream];
        let before = self.pos;
        let ev = sp.events[idx].as_ref().expect("checked in header");
        if !S::WANTS_VALUES {
            // Nothing in the scopes is needed: step over them.
            let end = ev
                .skip
                .as_ref()
                .and_then(|k| k.run(self.buf.bytes(), before, self.content_end));
            if let Some(p) = end.filter(|&p| p > before || sp.event_header.is_some()) {
                self.pos = p;
                return Ok(());
            }
        }
        for (name, scope) in ev.scopes(sp) {
            let Some(scope) = scope else { continue };
            sink.scope(name);
            run_scope(
                self.buf.bytes(),
                &mut self.pos,
                &mut self.state,
                scope,
                self.content_end,
                sink,
            )
            .map_err(|e| e.into_decode(&self.path, self.packet_offset))?;
        }
        if self.pos == before && sp.event_header.is_none() {
            return Err(self.err("an event of length 0 (forbidden by the CTF spec)"));
        }
        Ok(())
    }

    /// Counts the events of the current packet while they take the quick
    /// paths (the quick header, a skip plan), into `per` (per event class)
    /// and `span` (the least and greatest clock values). Returns how many
    /// were counted, and the event whose header was decoded but whose
    /// scopes need the general plan, if that is why it stopped.
    fn count_quick(
        &mut self,
        per: &mut [u64],
        span: &mut Option<(u64, u64)>,
    ) -> (u64, Option<usize>) {
        let plan = Arc::clone(&self.plan);
        let sp = &plan.streams[self.stream];
        let Some(quick) = &sp.quick_header else {
            return (0, None);
        };
        let (mut n, mut lo, mut hi) = (0, u64::MAX, u64::MIN);
        let mut stopped = None;
        while self.pos < self.content_end {
            let Some((end, idx, ev)) = self.quick_next(sp, quick) else {
                break;
            };
            self.pos = end;
            let Some(next) = ev
                .skip
                .as_ref()
                .and_then(|k| k.run(self.buf.bytes(), end, self.content_end))
            else {
                stopped = Some(idx);
                break;
            };
            self.pos = next;
            let v = self.state.clock;
            (lo, hi) = (lo.min(v), hi.max(v));
            if let Some(k) = per.get_mut(idx) {
                *k += 1;
            }
            n += 1;
        }
        if n > 0 {
            *span = Some(span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        (n, stopped)
    }

    /// Reads the whole stream, counting events per class, lost events and
    /// the time span, without decoding payload values. A stream that cannot
    /// be read to its end is counted up to the damage, which
    /// [`StreamCount::stopped`] names.
    pub fn count(&mut self) -> Result<StreamCount, DecodeError> {
        let mut per: Vec<Vec<u64>> = self
            .plan
            .streams
            .iter()
            .map(|s| vec![0; s.events.len()])
            .collect();
        // Per stream class: the least and the greatest clock value (the
        // conversion to ns keeps the order, so it is done once at the end).
        let mut span: Vec<Option<(u64, u64)>> = vec![None; per.len()];
        let mut c = StreamCount::default();
        c.stopped = 'read: loop {
            if let Some((k, _)) = self.pending_lost.take() {
                c.lost += k;
            }
            if self.in_packet && self.pos < self.content_end {
                let (counted, stopped) =
                    self.count_quick(&mut per[self.stream], &mut span[self.stream]);
                c.events += counted;
                // An event whose header the quick loop took and whose
                // scopes it could not step over, or none.
                let idx = match stopped {
                    Some(idx) => idx,
                    None if self.pos < self.content_end => match self.event_class() {
                        Ok(idx) => idx,
                        Err(e) => break 'read Some(e),
                    },
                    None => continue,
                };
                if let Err(e) = self.emit_class(idx, &mut Discard) {
                    break 'read Some(e);
                }
                let v = self.state.clock;
                let s = &mut span[self.stream];
                *s = Some(s.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
                if let Some(n) = per[self.stream].get_mut(idx) {
                    *n += 1;
                }
                c.events += 1;
                continue;
            }
            self.in_packet = false;
            if self.next_packet >= self.stop {
                break None;
            }
            if let Err(e) = self.packet() {
                self.next_packet = self.stop;
                break Some(e);
            }
        };
        for (sp, s) in self.plan.streams.iter().zip(&span) {
            if let (Some(clock), Some((lo_v, hi_v))) = (&sp.clock, s) {
                let (lo, hi) = (clock.ns(*lo_v), clock.ns(*hi_v));
                if let Some((v, t)) = [(*lo_v, lo), (*hi_v, hi)]
                    .into_iter()
                    .find(|&(_, t)| out_of_range(t))
                {
                    c.stopped
                        .get_or_insert_with(|| self.err(range_message(v, t)));
                    continue;
                }
                c.first = Some(c.first.map_or(lo, |f| f.min(lo)));
                c.last = Some(c.last.map_or(hi, |l| l.max(hi)));
            }
        }
        for (sp, counts) in self.plan.streams.iter().zip(per) {
            for (ev, n) in sp.events.iter().zip(counts) {
                if let (Some(ev), true) = (ev, n > 0) {
                    c.by_class.push((ev.class.clone(), n));
                }
            }
        }
        c.lost_by_cause = self.causes();
        Ok(c)
    }

    /// [`StreamReader::count`] of the events `shown` shows (`tape stats
    /// --filter`): each event's class and time asked, and its values if
    /// [`Shown::event`] looks at them; events not shown are stepped over.
    pub fn count_shown(&mut self, shown: &impl Shown) -> Result<StreamCount, DecodeError> {
        let mut c = StreamCount::default();
        let mut by_class: Vec<(Arc<EventClass>, u64)> = Vec::new();
        loop {
            match self.peek() {
                Err(e) => {
                    c.stopped = Some(e);
                    break;
                }
                Ok(Next::End) => break,
                Ok(Next::Lost(n, _)) => {
                    self.take_lost();
                    c.lost += n;
                }
                Ok(Next::Event(t)) => {
                    let class = self.class().cloned();
                    let show =
                        class.as_ref().is_some_and(|k| shown.class(k, t)) && shown.event(self);
                    if let Err(e) = self.emit(&mut Discard) {
                        c.stopped = Some(e);
                        break;
                    }
                    let (Some(class), true) = (class, show) else {
                        continue;
                    };
                    c.events += 1;
                    if let Some(t) = t {
                        c.first = Some(c.first.map_or(t, |f| f.min(t)));
                        c.last = Some(c.last.map_or(t, |l| l.max(t)));
                    }
                    match by_class.iter_mut().find(|(k, _)| Arc::ptr_eq(k, &class)) {
                        Some((_, n)) => *n += 1,
                        None => by_class.push((class, 1)),
                    }
                }
            }
        }
        c.by_class = by_class;
        c.lost_by_cause = self.causes();
        Ok(c)
    }

    fn packet(&mut self) -> Result<(), DecodeError> {
        self.packets += 1;
        let (content, packet) = self.packet_prologue()?;
        let have = self.buf.len() as u64;
        if have < packet / 8 {
            self.buf
                .read_at(&self.file, self.packet_offset + have, packet / 8 - have)
                .map_err(|e| self.err(format!("read error: {e}")))?;
        }
        self.buf.truncate((packet / 8) as usize);
        self.content_end = content;
        self.packet_counts();
        self.in_packet = true;
        Ok(())
    }

    /// Reads the header and context of the packet at `next_packet` (and
    /// perhaps more of it) into `buf`, checks its sizes, and moves
    /// `next_packet` past it: its content and packet sizes in bits.
    fn packet_prologue(&mut self) -> Result<(u64, u64), DecodeError> {
        self.packet_offset = self.next_packet;
        self.pos = 0;
        let remaining = self.file_len - self.packet_offset;
        let plan = self.plan.clone();
        // Header and context from a first chunk; all of it if they are longer.
        let mut have = remaining.min(4096);
        loop {
            self.buf.clear();
            self.buf
                .read_at(&self.file, self.packet_offset, have)
                .map_err(|e| self.err(format!("read error: {e}")))?;
            self.pos = 0;
            for s in [
                plan::SLOT_MAGIC,
                plan::SLOT_STREAM_ID,
                plan::SLOT_CONTENT_SIZE,
                plan::SLOT_PACKET_SIZE,
                plan::SLOT_TS_BEGIN,
                plan::SLOT_TS_END,
                plan::SLOT_DISCARDED,
            ]
            .into_iter()
            .chain((0..LOSS_CAUSES.len()).map(|i| plan::SLOT_LOST + i))
            {
                self.state.slots[s] = NONE;
            }
            match self.prologue(&plan, have * 8) {
                Ok(()) => break,
                Err(_) if have < remaining => have = remaining,
                Err(e) => return Err(e),
            }
        }
        let slot = |s: usize| self.state.slots[s];
        let (content, packet) = (slot(plan::SLOT_CONTENT_SIZE), slot(plan::SLOT_PACKET_SIZE));
        let as_u64 = |v: i128| u64::try_from(v).ok();
        let (content, packet) = match (as_u64(content), as_u64(packet)) {
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
        if packet % 8 != 0 || packet == 0 || packet < self.pos || content < self.pos {
            return Err(self.err(format!(
                "invalid packet_size {packet} / content_size {content} bits"
            )));
        }
        if packet / 8 > remaining {
            return Err(self.err(format!(
                "packet_size {} bytes goes past the end of the file ({remaining} bytes left)",
                packet / 8
            )));
        }
        self.next_packet = self.packet_offset + packet / 8;
        Ok((content, packet))
    }

    /// After a packet's prologue: the clock from its `timestamp_begin`,
    /// and the events lost since the stream's previous packet
    /// (`events_discarded` counts from the stream's start).
    fn packet_counts(&mut self) {
        let as_u64 = |v: i128| u64::try_from(v).ok();
        let slot = |s: usize| self.state.slots[s];
        let sp = &self.plan.streams[self.stream];
        if let Some(b) = as_u64(slot(plan::SLOT_TS_BEGIN)) {
            self.state.clock = b;
        }
        let end_ns = as_u64(slot(plan::SLOT_TS_END)).and_then(|e| sp.clock.map(|c| c.ns(e)));
        self.begin_ns = as_u64(slot(plan::SLOT_TS_BEGIN)).and_then(|b| sp.clock.map(|c| c.ns(b)));
        if let Some(d) = as_u64(slot(plan::SLOT_DISCARDED)) {
            if let Some(prev) = self.last_discarded {
                if d > prev {
                    self.pending_lost = Some((d - prev, self.last_end_ns.or(end_ns)));
                }
            }
            self.last_discarded = Some(d);
        }
        let mut causes = [0; LOSS_CAUSES.len()];
        let all = causes
            .iter_mut()
            .enumerate()
            .all(|(i, c)| as_u64(slot(plan::SLOT_LOST + i)).map(|v| *c = v).is_some());
        if all {
            let first = self.lost_causes.map_or(causes, |(f, _)| f);
            self.lost_causes = Some((first, causes));
        }
        self.last_end_ns = end_ns;
    }

    /// Packet header and context, within the first `end` bits.
    fn prologue(&mut self, plan: &TracePlan, end: u64) -> Result<(), DecodeError> {
        if let Some(h) = &plan.header {
            self.run(h, end, &mut Discard)?;
            let magic = self.state.slots[plan::SLOT_MAGIC];
            if magic != NONE && magic != 0xC1FC_1FC1 {
                return Err(self.err(format!("bad packet magic {magic:#x} (expected 0xc1fc1fc1)")));
            }
        }
        let sid = self.state.slots[plan::SLOT_STREAM_ID];
        let idx = plan
            .streams
            .iter()
            .position(|s| {
                if sid == NONE {
                    plan.streams.len() == 1
                } else {
                    i128::from(s.id) == sid
                }
            })
            .ok_or_else(|| {
                self.err(format!(
                    "no stream class for stream_id {}",
                    if sid == NONE {
                        "none".into()
                    } else {
                        sid.to_string()
                    }
                ))
            })?;
        self.stream = idx;
        self.packet_text.clear();
        if let Some(c) = &plan.streams[idx].packet_context {
            if self.values {
                // The value first (for a filter's common fields, a
                // thread's name), then, read again from the same bits,
                // the text or JSON the event lines start with: a packet
                // context is read once a packet, and a second run sets
                // the same slots and clock (`update_clock` of the same
                // value twice is the value once).
                let (pos, clock) = (self.pos, self.state.clock);
                let mut sink = ValueSink::default();
                self.run(c, end, &mut sink)?;
                self.packet_value = sink.scopes.pop();
                (self.pos, self.state.clock) = (pos, clock);
            }
            let mut text = std::mem::take(&mut self.packet_text);
            let r = if self.json {
                let mut json = Vec::new();
                let r = self.run(c, end, &mut JsonSink::new(&mut json));
                text.put(&json);
                r
            } else {
                self.run(c, end, &mut TextSink::new(&mut text, &HIDDEN))
            };
            self.packet_text = text;
            r?;
        }
        Ok(())
    }
}

/// The bytes of the packet being read. Its storage only grows, zeroed
/// once, and is read into in place: a packet costs one `pread` of its
/// header and context and one of the rest, whatever its size, with no
/// zeroing and no seek.
///
/// ```text
///   store: [ packet bytes read ........ | stale bytes of a longer packet ]
///           0                     filled                          store.len()
/// ```
#[derive(Default)]
pub struct PacketBuf {
    store: Vec<u8>,
    filled: usize,
}

impl PacketBuf {
    /// The bytes read.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.store[..self.filled]
    }

    fn len(&self) -> usize {
        self.filled
    }

    fn room(&self) -> usize {
        self.store.len()
    }

    fn clear(&mut self) {
        self.filled = 0;
    }

    fn truncate(&mut self, n: usize) {
        self.filled = self.filled.min(n);
    }

    /// Appends the `n` bytes of `file` at offset `at` (`n` is at most what
    /// the file holds past `at`, checked by the callers).
    fn read_at(&mut self, file: &File, at: u64, n: u64) -> std::io::Result<()> {
        let n = usize::try_from(n).map_err(std::io::Error::other)?;
        let end = self.filled + n;
        if self.store.len() < end {
            self.store.resize(end, 0);
        }
        let got = read_full_at(file, at, &mut self.store[self.filled..end])?;
        if got < n {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{got} of {n} bytes at offset {at}: the file is shorter"),
            ));
        }
        self.filled = end;
        Ok(())
    }
}

/// Reads `dst.len()` bytes of `file` at offset `at` into `dst`, fewer at
/// the file's end: how many. Positioned reads: the parts of a stream
/// share one open file.
fn read_full_at(file: &File, at: u64, dst: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < dst.len() {
        #[cfg(unix)]
        let r = std::os::unix::fs::FileExt::read_at(file, &mut dst[got..], at + got as u64);
        #[cfg(windows)]
        let r = std::os::windows::fs::FileExt::seek_read(file, &mut dst[got..], at + got as u64);
        match r {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Runs a scope's plan on a packet buffer from bit `*pos` to `end`.
fn run_scope<S: Sink>(
    buf: &[u8],
    pos: &mut u64,
    state: &mut State,
    scope: &ScopePlan,
    end: u64,
    sink: &mut S,
) -> Result<(), plan::RunError> {
    let mut b = Bits {
        buf,
        pos: *pos,
        end,
    };
    let r = plan::run_scope(scope, &mut b, state, sink);
    *pos = b.pos;
    r
}

/// The losses by cause of each stream of a tape trace, by the stream file's
/// name, from its losses stream (the last packet of a stream gives its
/// totals); a stream it does not name lost nothing. `None` when the trace
/// declares no losses stream (another tracer's, or tape's before it: its
/// streams' packet contexts may carry them, [`StreamReader::lost_by_cause`]).
pub fn losses_by_stream(t: &TraceDir) -> Result<Option<HashMap<String, LostByCause>>, String> {
    if !t.declares_losses() {
        return Ok(None);
    }
    let mut by_stream: HashMap<String, LostByCause> = HashMap::new();
    let Some(path) = &t.losses else {
        return Ok(Some(by_stream));
    };
    let plan = Arc::new(
        TracePlan::new(&t.trace).map_err(|e| format!("{}/metadata: {e}", t.dir.display()))?,
    );
    let mut s = StreamReader::open(plan, path).map_err(|e| e.to_string())?;
    let mut bad = None;
    s.packet_contexts(|v| {
        let Value::Struct(fields) = v else { return };
        let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        let Some(Value::Str(stream)) = field("stream") else {
            bad.get_or_insert("a packet without its `stream`");
            return;
        };
        let mut causes = LostByCause::default();
        for (c, cause) in causes.iter_mut().zip(LOSS_CAUSES) {
            match field(&format!("lost_{cause}")).and_then(Value::as_u64) {
                Some(n) => *c = n,
                None => {
                    bad.get_or_insert("a packet without its `lost_<cause>` counts");
                }
            }
        }
        // Cumulative: the largest (the last) is the stream's total.
        let total = by_stream.entry(stream.clone()).or_default();
        total
            .iter_mut()
            .zip(causes)
            .for_each(|(t, n)| *t = (*t).max(n));
    })
    .map_err(|e| e.to_string())?;
    if let Some(why) = bad {
        return Err(format!("{}: {why}", path.display()));
    }
    Ok(Some(by_stream))
}

/// Compiles the plans of `traces` and opens all their streams.
pub fn open_streams(traces: &[TraceDir]) -> Result<Vec<StreamReader>, String> {
    let mut streams = Vec::new();
    for t in traces {
        let plan = Arc::new(
            TracePlan::new(&t.trace).map_err(|e| format!("{}/metadata: {e}", t.dir.display()))?,
        );
        for s in &t.streams {
            streams.push(StreamReader::open(plan.clone(), s).map_err(|e| e.to_string())?);
        }
    }
    Ok(streams)
}

/// Which events a renderer shows: by class and time, and, for a test on
/// the event's values (`tape show --filter`), by the event itself. A
/// closure `Fn(&EventClass, Option<i128>) -> bool` is one that looks at
/// class and time only.
pub trait Shown {
    /// Whether events of `class` at time `t` may be shown.
    fn class(&self, class: &EventClass, t: Option<i128>) -> bool;
    /// Whether the event that `s` has peeked (its class accepted) is
    /// shown; `s` may decode it with [`StreamReader::inspect`].
    fn event(&self, s: &mut StreamReader) -> bool {
        let _ = s;
        true
    }
    /// Whether [`Shown::event`] looks at the events (then the quick text
    /// path, which renders without stopping at each event, is not taken).
    fn by_value(&self) -> bool {
        false
    }
}

/// A test of the event a stream has peeked, by its values (`--filter`
/// of `tape export`, `graph` and `profile`): `false` skips it. Shared by
/// the threads that read streams side by side.
pub type Keep = std::sync::Arc<dyn Fn(&mut StreamReader) -> bool + Send + Sync>;

impl<F: Fn(&EventClass, Option<i128>) -> bool> Shown for F {
    fn class(&self, class: &EventClass, t: Option<i128>) -> bool {
        self(class, t)
    }
}
