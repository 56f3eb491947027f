//! The Perfetto export (`tape export --format perfetto`): a trace as
//! Perfetto's protobuf `TracePacket`s, which the Perfetto UI and
//! trace_processor open (`perfetto/trace/trace_packet.proto`,
//! `track_event/*.proto`; field numbers below, checked against the schema
//! Perfetto ships by tape-cli's `tests/export.rs`).
//!
//! ```text
//! file:  [0x0A len TracePacket][0x0A len TracePacket]...   (a `Trace`: streamed, appended)
//!
//! sequence 1 (the trace's own)   clock snapshot: REALTIME t = BOOTTIME t - Δ = MONOTONIC t - Δ'
//!                                process track  {uuid P, pid, program}
//!                                counter tracks {parent P, "EVENT.FIELD"}, async tracks {parent P, fn}
//! sequence 2.. (one per thread)  thread track   {uuid T, pid, tid, thread name}
//!                                defaults       {clock REALTIME, track T}   incremental state cleared
//!                                events         {time, name_iid, args...}   names interned per sequence
//! ```
//!
//! * **Every event** of the trace is in the file. A `#[tape::traced]`
//!   function's entry and exit (and a latency section's) become one slice
//!   on its thread's track, named by the function (`app::io::read`), its
//!   arguments and return value as the slice's args; other events are
//!   instants with every field as a debug annotation (payload fields by
//!   their names, the contexts as `context` and `stream_context`
//!   dictionaries); losses are instants named `lost events` with their
//!   `count`; `--counter EVENT.FIELD` adds a counter track of that field.
//! * **Slices always nest.** Perfetto drops or misdraws slices that overlap
//!   on a track, so a slice is written when its exit is read (its begin
//!   then carries the entry's time: trace_processor sorts packets by time).
//!   An entry whose exit is not in the trace (lost, or the ring saved
//!   mid-call), found when a call at its depth or above starts or ends,
//!   moves to a child track of its thread (`<thread> (no exit)`), begun
//!   and never ended, with `exit_not_in_trace`; calls still open when the
//!   trace ends stay on the thread's track, begun and never ended; an exit
//!   whose entry is not in the trace is an instant with
//!   `entry_not_in_trace`. Nothing is dropped. Calls entered in the same
//!   nanosecond (a call and the first it makes): trace_processor keeps the
//!   file's order between events of one time, so the enclosing ones are
//!   begun when the inner slice is written, before it, and ended at their
//!   exit (one found without an exit then ends on the thread's track where
//!   that shows, marked `exit_not_in_trace`).
//! * **Async calls**: each poll of an `async fn` is a slice on the thread
//!   that polled it (nested in what that thread ran) and on the call's own
//!   async track (a child of the process, named by the function: the UI
//!   groups a function's calls), and the polls of one call are joined by a
//!   flow, across threads. A `tracing` span (`tape-tracing`) says when it
//!   closes (`.close`): its first interval's async part waits (`Held`);
//!   a second interval draws it (async: the track, and a flow from it
//!   through the others), the close drops it: a plain synchronous span is
//!   one slice on its thread's track. A first interval whose close is not
//!   in the trace is drawn as a poll at the end. (Memory: one held
//!   interval per span exited once and not closed.)
//! * **The kernel beside the program** (a kernel trace of `tape record
//!   --kernel`, `env.domain = "kernel"`): its `sched_switch`,
//!   `sched_wakeup` and `sched_waking` are written as Perfetto's own ftrace
//!   events (`FtraceEventBundle`, a CPU's per packet, on BOOTTIME as
//!   `traced_probes` writes them), so the UI draws each thread's states
//!   (Running, Runnable, Sleeping) and its CPU under the program's slices;
//!   the kernel's other events are instants, as any event.
//! * **Clocks**: times are tape's (realtime ns, `timestamp_clock_id`
//!   REALTIME by the packet defaults); a clock snapshot maps them to
//!   BOOTTIME and MONOTONIC from the trace's `env`
//!   (`tape_realtime_minus_boottime_ns`, written at save), so the file
//!   merges with a system Perfetto trace (BOOTTIME) on one timeline. A trace
//!   without those makes REALTIME the file's primary clock.
//! * **Memory** is bounded by the trace's shape, not its length: per
//!   thread the calls open at once (at most
//!   `MAX_OPEN` of `output/calls.rs`; deeper, the
//!   outermost moves to the no-exit track), interned names, and a bounded
//!   set of async tracks already described ([`ASYNC_KNOWN`]; a track
//!   described again is harmless).

pub(crate) mod proto;

use std::io::Write;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::decode::plan::Sink;
use crate::decode::stream::StreamReader;
use crate::decode::DecodeError;
use crate::merge::StreamMerge;
use crate::metadata::read::TraceDir;
use crate::output::calls::{CallStack, OpenCall};
use crate::output::export::{env_int, process, run, stream_key, time, Export, Failure};
use crate::output::export::{CounterSpec, Exported, Options};
use crate::output::function::{kind, Kind, Names, ThreadOf};
use crate::{Base, Enum};

/// `slice`'s `mark_as` for a held first interval drawn late: no mark, but
/// the flow of its call (its thread's slice was written without it).
const HELD: u32 = u32::MAX;

/// The first interval of a call that may turn out synchronous: what its
/// async track's slice needs, kept until the call shows which it is.
struct Held {
    /// The sequence (thread) it ran on.
    s: usize,
    /// Its begin: time, name, args.
    call: OpenCall,
    /// Its end: time and args.
    end_ts: u64,
    end_args: Vec<u8>,
}

/// Field numbers of the messages written (Perfetto's `.proto` files).
mod field {
    /// `Trace.packet`.
    pub const PACKET: u32 = 1;

    // TracePacket.
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACE_PACKET_DEFAULTS: u32 = 59;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
    pub const FTRACE_EVENTS: u32 = 1;

    // FtraceEventBundle, FtraceEvent, Sched*FtraceEvent.
    pub const BUNDLE_CPU: u32 = 1;
    pub const BUNDLE_EVENT: u32 = 2;
    pub const FTRACE_TIMESTAMP: u32 = 1;
    pub const FTRACE_PID: u32 = 2;
    pub const SCHED_SWITCH: u32 = 4;
    pub const SCHED_WAKEUP: u32 = 17;
    pub const SCHED_WAKING: u32 = 20;
    pub const PREV_COMM: u32 = 1;
    pub const PREV_PID: u32 = 2;
    pub const PREV_PRIO: u32 = 3;
    pub const PREV_STATE: u32 = 4;
    pub const NEXT_COMM: u32 = 5;
    pub const NEXT_PID: u32 = 6;
    pub const NEXT_PRIO: u32 = 7;
    pub const WAKE_COMM: u32 = 1;
    pub const WAKE_PID: u32 = 2;
    pub const WAKE_PRIO: u32 = 3;
    pub const WAKE_SUCCESS: u32 = 4;
    pub const WAKE_TARGET_CPU: u32 = 5;

    // TracePacketDefaults, TrackEventDefaults.
    pub const DEFAULT_CLOCK_ID: u32 = 58;
    pub const TRACK_EVENT_DEFAULTS: u32 = 11;
    pub const DEFAULT_TRACK_UUID: u32 = 11;

    // ClockSnapshot, ClockSnapshot.Clock.
    pub const CLOCKS: u32 = 1;
    pub const PRIMARY_TRACE_CLOCK: u32 = 2;
    pub const CLOCK_ID: u32 = 1;
    pub const CLOCK_TIMESTAMP: u32 = 2;

    // TrackDescriptor, ProcessDescriptor, ThreadDescriptor.
    pub const TRACK_UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const TRACK_PROCESS: u32 = 3;
    pub const TRACK_THREAD: u32 = 4;
    pub const TRACK_PARENT: u32 = 5;
    pub const TRACK_COUNTER: u32 = 8;
    pub const PROCESS_PID: u32 = 1;
    pub const PROCESS_NAME: u32 = 6;
    pub const THREAD_PID: u32 = 1;
    pub const THREAD_TID: u32 = 2;
    pub const THREAD_NAME: u32 = 5;

    // TrackEvent.
    pub const ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const EVENT_TRACK_UUID: u32 = 11;
    pub const COUNTER_VALUE: u32 = 30;
    pub const DOUBLE_COUNTER_VALUE: u32 = 44;
    pub const FLOW_IDS: u32 = 47;

    // DebugAnnotation.
    pub const ARG_NAME_IID: u32 = 1;
    pub const ARG_BOOL: u32 = 2;
    pub const ARG_UINT: u32 = 3;
    pub const ARG_INT: u32 = 4;
    pub const ARG_DOUBLE: u32 = 5;
    pub const ARG_STRING: u32 = 6;
    pub const ARG_POINTER: u32 = 7;
    pub const ARG_NAME: u32 = 10;
    pub const ARG_DICT: u32 = 11;
    pub const ARG_ARRAY: u32 = 12;

    // InternedData, EventName, DebugAnnotationName.
    pub const EVENT_NAMES: u32 = 2;
    pub const ANNOTATION_NAMES: u32 = 3;
    pub const IID: u32 = 1;
    pub const IID_NAME: u32 = 2;
}

/// `TrackEvent.Type`.
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const INSTANT: u64 = 3;
const COUNTER: u64 = 4;

/// `TracePacket.SequenceFlags`.
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;

/// `BuiltinClock`.
const REALTIME: u64 = 1;
const MONOTONIC: u64 = 3;
const BOOTTIME: u64 = 6;

/// The sequence of the trace's own packets (clock, process and shared
/// tracks); threads' sequences follow.
const TRACE_SEQUENCE: u32 = 1;

/// The sequence of the kernel's ftrace bundles (past any thread's).
const KERNEL_SEQUENCE: u32 = u32::MAX - 1;

/// How many async tracks are remembered as described.
pub const ASYNC_KNOWN: usize = 1 << 16;

/// A process: one trace.
struct Process {
    pid: i64,
    name: String,
    track: u64,
    described: bool,
    /// Counter tracks described, by spec.
    counters: Vec<bool>,
}

/// What the export knows of an event class.
struct ClassInfo {
    kind: Kind,
    /// Its name's id in the event names (a function's displayed name for
    /// entries, exits and returns).
    name: u32,
    /// Counter specs reading a field of it.
    counters: Vec<usize>,
}

/// One thread: a packet sequence and its track.
struct Sequence {
    id: u32,
    process: usize,
    track: u64,
    name: String,
    /// Event and annotation names interned on this sequence (bit sets by
    /// name id).
    events_interned: Vec<u64>,
    args_interned: Vec<u64>,
    /// `InternedData` fields for the next packet of the sequence.
    pending: Vec<u8>,
    /// Calls open, and the return value read for the next exit.
    calls: CallStack,
    no_exit_described: bool,
    last_ts: u64,
}

/// Whether bit `i` is set, setting it.
fn test_and_set(bits: &mut Vec<u64>, i: u32) -> bool {
    let (w, b) = ((i / 64) as usize, i % 64);
    if w >= bits.len() {
        bits.resize(w + 1, 0);
    }
    let was = bits[w] >> b & 1 == 1;
    bits[w] |= 1 << b;
    was
}

/// Appends a debug annotation `id` = true (a mark: `exit_not_in_trace`).
fn mark(out: &mut Vec<u8>, id: u32) {
    let a = proto::begin(out, field::ANNOTATIONS);
    proto::uint(out, field::ARG_NAME_IID, u64::from(id) + 1);
    proto::uint(out, field::ARG_BOOL, 1);
    proto::end(out, a);
}

/// A 64-bit mix (splitmix64's finaliser) of two values: track uuids and
/// flow ids from what they stand for, never 0.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(b)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

/// Writes debug annotations from an event's decoded values (see the
/// module docs for their names). In a slice's entry, the top-level
/// `depth` is read, not written, and `call` (an async poll's) read too.
struct ArgSink {
    out: Vec<u8>,
    /// Annotation name ids used at the top level (to intern).
    used: Vec<u32>,
    /// Open messages: the placeholder of each annotation and whether it is
    /// a container (struct or array) rather than waiting for a value.
    open: Vec<(usize, bool)>,
    /// The scope being written: `fields` (top-level annotations) or a
    /// context (one dictionary named by it).
    scope: &'static str,
    level: u32,
    /// The next value is read, not written (`depth`).
    skip: bool,
    /// Inside a composite value not written (nesting count).
    mute: u32,
    /// What the next top-level value is read into.
    capture: Capture,
    slice: bool,
    depth: u32,
    call: Option<u64>,
    /// Counter fields of this class: (name, spec); and the values read.
    counter_fields: Vec<(Box<str>, usize)>,
    counter_values: Vec<(usize, CounterValue)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Capture {
    None,
    Depth,
    Call,
    Counter(usize),
}

#[derive(Clone, Copy)]
enum CounterValue {
    Int(i64),
    Double(f64),
}

impl ArgSink {
    fn new() -> ArgSink {
        ArgSink {
            out: Vec::new(),
            used: Vec::new(),
            open: Vec::new(),
            scope: "fields",
            level: 0,
            skip: false,
            mute: 0,
            capture: Capture::None,
            slice: false,
            depth: 0,
            call: None,
            counter_fields: Vec::new(),
            counter_values: Vec::new(),
        }
    }

    /// Ready for an event; `slice`: an entry or exit (depth read, not
    /// written).
    fn reset(&mut self, slice: bool) {
        self.out.clear();
        self.used.clear();
        self.open.clear();
        self.level = 0;
        self.skip = false;
        self.mute = 0;
        self.capture = Capture::None;
        self.slice = slice;
        self.depth = 0;
        self.call = None;
        self.counter_values.clear();
    }

    /// Opens a top-level annotation named by id `name`.
    fn top(&mut self, names: &mut Names, name: &str) {
        let id = names.id(name);
        self.used.push(id);
        let at = proto::begin(&mut self.out, field::ANNOTATIONS);
        proto::uint(&mut self.out, field::ARG_NAME_IID, u64::from(id) + 1);
        self.open.push((at, false));
    }

    /// A value is written: into the annotation waiting for it, closed.
    fn value(&mut self) -> bool {
        if std::mem::take(&mut self.skip) {
            return false;
        }
        matches!(self.open.last(), Some((_, false)))
    }

    fn close(&mut self) {
        if let Some((at, _)) = self.open.pop() {
            proto::end(&mut self.out, at);
        }
    }

    fn captured(&mut self, v: CounterValue, as_u64: Option<u64>) {
        match std::mem::replace(&mut self.capture, Capture::None) {
            Capture::None => {}
            Capture::Depth => {
                self.depth = as_u64.map_or(0, |v| u32::try_from(v).unwrap_or(u32::MAX));
            }
            Capture::Call => self.call = as_u64,
            Capture::Counter(spec) => self.counter_values.push((spec, v)),
        }
    }
}

/// The sink, with the annotation names it interns.
struct Args<'a> {
    sink: &'a mut ArgSink,
    names: &'a mut Names,
}

impl Args<'_> {
    /// Whether a value is ignored: inside a skipped composite value, or
    /// the skipped field itself.
    fn muted(&mut self) -> bool {
        self.sink.mute > 0
    }

    /// A composite value starts: muted if it is the skipped field's.
    fn begin_composite(&mut self) -> bool {
        let s = &mut *self.sink;
        s.capture = Capture::None;
        if s.mute > 0 || std::mem::take(&mut s.skip) {
            s.mute += 1;
            return false;
        }
        true
    }

    /// A composite value ends: false if it was muted.
    fn end_composite(&mut self) -> bool {
        let s = &mut *self.sink;
        if s.mute > 0 {
            s.mute -= 1;
            return false;
        }
        true
    }
}

impl Sink for Args<'_> {
    fn scope(&mut self, name: &'static str) {
        self.sink.scope = name;
        self.sink.level = 0;
        self.sink.mute = 0;
        self.sink.skip = false;
    }
    fn field(&mut self, name: &str) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        if s.level == 1 && s.scope == "fields" {
            s.capture = Capture::None;
            if let Some(&(_, spec)) = s.counter_fields.iter().find(|(f, _)| **f == *name) {
                s.capture = Capture::Counter(spec);
            }
            if s.slice && name == "depth" {
                s.capture = Capture::Depth;
                s.skip = true;
                return;
            }
            if s.slice && name == "call" {
                s.capture = Capture::Call;
            }
            s.top(self.names, name);
        } else if matches!(s.open.last(), Some((_, true))) {
            // A member of the struct being written.
            let at = proto::begin(&mut s.out, field::ARG_DICT);
            proto::bytes(&mut s.out, field::ARG_NAME, name.as_bytes());
            s.open.push((at, false));
        }
    }
    fn uint(&mut self, v: u64, base: Base, _: u32) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        s.captured(
            CounterValue::Int(i64::try_from(v).unwrap_or(i64::MAX)),
            Some(v),
        );
        if s.value() {
            let f = match base {
                Base::Hexadecimal => field::ARG_POINTER,
                _ => field::ARG_UINT,
            };
            proto::uint(&mut s.out, f, v);
            s.close();
        }
    }
    fn sint(&mut self, v: i64, _: Base, _: u32) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        s.captured(CounterValue::Int(v), u64::try_from(v).ok());
        if s.value() {
            proto::int(&mut s.out, field::ARG_INT, v);
            s.close();
        }
    }
    fn enumeration(&mut self, v: i128, e: &Enum) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        let clamped = i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
        s.captured(CounterValue::Int(clamped), u64::try_from(v).ok());
        if s.value() {
            match (e.labels(v).next(), i64::try_from(v), u64::try_from(v)) {
                (Some(label), _, _) => {
                    proto::bytes(&mut s.out, field::ARG_STRING, label.as_bytes())
                }
                (None, Ok(i), _) => proto::int(&mut s.out, field::ARG_INT, i),
                (None, _, Ok(u)) => proto::uint(&mut s.out, field::ARG_UINT, u),
                (None, _, _) => {
                    proto::bytes(&mut s.out, field::ARG_STRING, v.to_string().as_bytes())
                }
            }
            s.close();
        }
    }
    fn float(&mut self, v: f64) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        s.captured(CounterValue::Double(v), None);
        if s.value() {
            proto::double(&mut s.out, field::ARG_DOUBLE, v);
            s.close();
        }
    }
    fn string(&mut self, v: &[u8]) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        s.capture = Capture::None;
        if s.value() {
            if std::str::from_utf8(v).is_ok() {
                proto::bytes(&mut s.out, field::ARG_STRING, v);
            } else {
                // Not UTF-8 (a protobuf string must be): its text with
                // U+FFFD and its bytes in hexadecimal, as `tape show
                // --format json` keeps them, so nothing is lost.
                for (name, text) in [
                    ("text", String::from_utf8_lossy(v).into_owned()),
                    ("bytes", v.iter().map(|b| format!("{b:02x}")).collect()),
                ] {
                    let at = proto::begin(&mut s.out, field::ARG_DICT);
                    proto::bytes(&mut s.out, field::ARG_NAME, name.as_bytes());
                    proto::bytes(&mut s.out, field::ARG_STRING, text.as_bytes());
                    proto::end(&mut s.out, at);
                }
            }
            s.close();
        }
    }
    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, _: Base) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        s.capture = Capture::None;
        if s.value() {
            // Its decimal digits, as `tape show --format json` writes it
            // (no annotation type holds more than 64 bits).
            let digits = crate::decode::wide_int(v, signed, bits, Base::Decimal);
            proto::bytes(&mut s.out, field::ARG_STRING, digits.as_bytes());
            s.close();
        }
    }
    fn begin_struct(&mut self) {
        if !self.begin_composite() {
            return;
        }
        let s = &mut *self.sink;
        s.level += 1;
        if s.level == 1 {
            if s.scope != "fields" {
                // A context: one dictionary named by its scope.
                let scope = s.scope;
                s.top(self.names, scope);
                s.open.last_mut().expect("just opened").1 = true;
            }
            return;
        }
        match s.open.last_mut() {
            Some(top) if !top.1 => top.1 = true,
            // Not a value of a field or element being written.
            _ => {
                s.level -= 1;
                s.mute = 1;
            }
        }
    }
    fn end_struct(&mut self) {
        if !self.end_composite() {
            return;
        }
        let s = &mut *self.sink;
        if s.level == 1 && s.scope == "fields" {
            s.level = 0;
            return;
        }
        s.level = s.level.saturating_sub(1);
        s.close();
    }
    fn begin_array(&mut self, _: u64) {
        if !self.begin_composite() {
            return;
        }
        let s = &mut *self.sink;
        match s.open.last_mut() {
            Some(top) if !top.1 => top.1 = true,
            _ => s.mute = 1,
        }
    }
    fn item(&mut self, _: u64) {
        if self.muted() {
            return;
        }
        let s = &mut *self.sink;
        let at = proto::begin(&mut s.out, field::ARG_ARRAY);
        s.open.push((at, false));
    }
    fn end_array(&mut self) {
        if self.end_composite() {
            self.sink.close();
        }
    }
    fn variant(&mut self, option: &str) {
        // A dictionary of one entry named by the option, as `tape show
        // --format json` writes it.
        if !self.begin_composite() {
            return;
        }
        let s = &mut *self.sink;
        match s.open.last_mut() {
            Some(top) if !top.1 => top.1 = true,
            _ => {
                s.mute = 1;
                return;
            }
        }
        let at = proto::begin(&mut s.out, field::ARG_DICT);
        proto::bytes(&mut s.out, field::ARG_NAME, option.as_bytes());
        s.open.push((at, false));
    }
    fn end_variant(&mut self) {
        if self.end_composite() {
            self.sink.close();
        }
    }
}

/// The exporter's state: one pass over the merged events.
struct Exporter<W: Write> {
    out: W,
    /// By trace (process index): whether it is a kernel trace.
    kernel: Vec<bool>,
    packet: Vec<u8>,
    event_names: Names,
    arg_names: Names,
    processes: Vec<Process>,
    /// By trace directory.
    process_of_dir: HashMap<std::path::PathBuf, usize>,
    /// By stream (its path's address): process.
    process_of_stream: HashMap<usize, usize>,
    threads: ThreadOf,
    sequences: Vec<Sequence>,
    /// By (process, thread id).
    sequence_of: HashMap<(usize, i64), usize>,
    classes: Vec<ClassInfo>,
    /// By (plan's address, stream class, event class).
    class_of: HashMap<(usize, usize, usize), usize>,
    async_known: HashSet<u64>,
    /// Functions whose calls say when they end (a `tracing` span's
    /// `.close`): their first interval's async part waits ([`Held`]).
    closing: HashSet<u32>,
    /// Calls of those with a second interval: async, drawn as such.
    async_calls: HashSet<(u32, u64)>,
    /// The async part of a closing function's call's first interval, until
    /// a second interval (then drawn) or its close (then dropped: a plain
    /// synchronous span is one slice on its thread's track).
    held: HashMap<(u32, u64), Held>,
    counters: Vec<CounterSpec>,
    clock: Option<(i64, Option<i64>)>,
    clock_written: bool,
    args: ArgSink,
    done: Exported,
}

/// Writes every event `merge` gives (that `opts` selects) as a Perfetto
/// trace into `out`. A stream that cannot be decoded further ends there
/// and the others go on (as in `tape show`): its error is returned with
/// the counts after the file is complete. An error writing `out` stops
/// the export.
pub fn export<W: Write>(
    merge: &mut StreamMerge,
    traces: &[TraceDir],
    opts: &Options,
    out: W,
) -> std::io::Result<(Exported, Option<DecodeError>)> {
    let mut x = Exporter::new(traces, opts, out);
    let failed = run(merge, opts, &mut x)?;
    Ok((x.done, failed))
}

impl<W: Write> Exporter<W> {
    fn new(traces: &[TraceDir], opts: &Options, out: W) -> Exporter<W> {
        let mut processes = Vec::new();
        let mut process_of_dir = HashMap::default();
        for (i, t) in traces.iter().enumerate() {
            let (pid, name) = process(i, t);
            processes.push(Process {
                pid,
                name,
                track: mix(i as u64, pid as u64 ^ 0x5052_4F43),
                described: false,
                counters: vec![false; opts.counters.len()],
            });
            process_of_dir.insert(t.dir.clone(), i);
        }
        let kernel = traces.iter().map(TraceDir::is_kernel).collect();
        // The clock's place on BOOTTIME and MONOTONIC, from the first
        // trace that says it.
        let clock = traces.iter().find_map(|t| {
            let boot = env_int(&t.trace, "tape_realtime_minus_boottime_ns")?;
            Some((boot, env_int(&t.trace, "tape_realtime_minus_monotonic_ns")))
        });
        // The functions whose calls close (`tape-tracing`'s spans).
        let mut event_names = Names::default();
        let mut closing = HashSet::default();
        for t in traces {
            for e in &t.trace.events {
                if let Kind::Close(f) = kind(&e.name) {
                    closing.insert(event_names.id(&f));
                }
            }
        }
        Exporter {
            out,
            kernel,
            packet: Vec::with_capacity(4096),
            event_names,
            arg_names: Names::default(),
            processes,
            process_of_dir,
            process_of_stream: HashMap::default(),
            threads: ThreadOf::default(),
            sequences: Vec::new(),
            sequence_of: HashMap::default(),
            classes: Vec::new(),
            class_of: HashMap::default(),
            async_known: HashSet::default(),
            closing,
            async_calls: HashSet::default(),
            held: HashMap::default(),
            counters: opts.counters.clone(),
            clock,
            clock_written: false,
            args: ArgSink::new(),
            done: Exported::default(),
        }
    }

    /// A kernel trace's scheduling event as Perfetto's own ftrace event
    /// (`false`: not one of them, or no BOOTTIME to put it on: drawn as
    /// any event).
    fn ftrace_event(
        &mut self,
        stream: &mut StreamReader,
        t: Option<i128>,
    ) -> Result<bool, Failure> {
        let Some(name) = stream.class().map(|c| c.name.clone()) else {
            return Ok(false);
        };
        let which = match name.as_str() {
            "sched_switch" => field::SCHED_SWITCH,
            "sched_wakeup" => field::SCHED_WAKEUP,
            "sched_waking" => field::SCHED_WAKING,
            _ => return Ok(false),
        };
        let (Some((boot, _)), Some(t)) = (self.clock, t) else {
            return Ok(false);
        };
        let mut sink = crate::decode::plan::ValueSink::default();
        stream.emit(&mut sink).map_err(Failure::Decode)?;
        use crate::output::event_text::{int_field, text_field};
        let payload = sink.scopes.last();
        let int = |names: &[&str]| payload.and_then(|v| int_field(v, names)).unwrap_or(0);
        let text = |n: &str| payload.and_then(|v| text_field(v, n)).unwrap_or_default();
        let writer = crate::output::event_text::task(None, &sink.scopes).1;
        let cpu = stream
            .packet_value
            .as_ref()
            .and_then(|v| match crate::output::event_text::member(v, "cpu_id")? {
                crate::decode::Value::UInt(c, _) => Some(*c),
                _ => None,
            })
            .unwrap_or(0);
        let ts = u64::try_from(t - i128::from(boot)).unwrap_or(0);
        let out = &mut self.packet;
        out.clear();
        proto::uint(out, field::SEQUENCE_ID, u64::from(KERNEL_SEQUENCE));
        let bundle = proto::begin(out, field::FTRACE_EVENTS);
        proto::uint(out, field::BUNDLE_CPU, cpu);
        let e = proto::begin(out, field::BUNDLE_EVENT);
        proto::uint(out, field::FTRACE_TIMESTAMP, ts);
        proto::uint(out, field::FTRACE_PID, writer.max(0) as u64);
        let x = proto::begin(out, which);
        if which == field::SCHED_SWITCH {
            proto::bytes(out, field::PREV_COMM, text("prev_comm").as_bytes());
            proto::int(out, field::PREV_PID, int(&["prev_tid", "prev_pid"]));
            proto::int(out, field::PREV_PRIO, int(&["prev_prio"]));
            proto::int(out, field::PREV_STATE, int(&["prev_state"]));
            proto::bytes(out, field::NEXT_COMM, text("next_comm").as_bytes());
            proto::int(out, field::NEXT_PID, int(&["next_tid", "next_pid"]));
            proto::int(out, field::NEXT_PRIO, int(&["next_prio"]));
        } else {
            proto::bytes(out, field::WAKE_COMM, text("comm").as_bytes());
            proto::int(out, field::WAKE_PID, int(&["tid", "pid"]));
            proto::int(out, field::WAKE_PRIO, int(&["prio"]));
            proto::int(out, field::WAKE_SUCCESS, 1);
            proto::int(out, field::WAKE_TARGET_CPU, int(&["target_cpu"]));
        }
        proto::end(out, x);
        proto::end(out, e);
        proto::end(out, bundle);
        self.flush_packet()?;
        Ok(true)
    }

    /// The file's time of an event at `t` on sequence `s` (see
    /// [`time`]).
    fn time(&mut self, s: usize, t: Option<i128>) -> u64 {
        time(t, &mut self.sequences[s].last_ts, &mut self.done)
    }

    /// Writes `self.packet` as one `Trace.packet`.
    fn flush_packet(&mut self) -> std::io::Result<()> {
        // The key of `Trace.packet` (field 1, length-delimited), the length.
        let mut head = Vec::with_capacity(11);
        head.push((field::PACKET << 3 | 2) as u8);
        proto::varint(&mut head, self.packet.len() as u64);
        self.out.write_all(&head)?;
        self.out.write_all(&self.packet)?;
        self.done.packets += 1;
        self.done.bytes += (head.len() + self.packet.len()) as u64;
        Ok(())
    }

    /// Starts a packet of the trace's own sequence.
    fn trace_packet(&mut self) {
        self.packet.clear();
        proto::uint(
            &mut self.packet,
            field::SEQUENCE_ID,
            u64::from(TRACE_SEQUENCE),
        );
    }

    /// Writes the clock snapshot, at the first event's time `t`.
    fn clock_snapshot(&mut self, t: u64) -> std::io::Result<()> {
        self.clock_written = true;
        self.trace_packet();
        let snap = proto::begin(&mut self.packet, field::CLOCK_SNAPSHOT);
        let clock = |p: &mut Vec<u8>, id: u64, ts: u64| {
            let c = proto::begin(p, field::CLOCKS);
            proto::uint(p, field::CLOCK_ID, id);
            proto::uint(p, field::CLOCK_TIMESTAMP, ts);
            proto::end(p, c);
        };
        clock(&mut self.packet, REALTIME, t);
        match self.clock {
            Some((boot, mono)) => {
                clock(&mut self.packet, BOOTTIME, t.wrapping_sub(boot as u64));
                if let Some(mono) = mono {
                    clock(&mut self.packet, MONOTONIC, t.wrapping_sub(mono as u64));
                }
            }
            // Nothing to map tape's clock to: it is the file's.
            None => proto::uint(&mut self.packet, field::PRIMARY_TRACE_CLOCK, REALTIME),
        }
        proto::end(&mut self.packet, snap);
        self.flush_packet()
    }

    /// Describes process `p`'s track, once.
    fn describe_process(&mut self, p: usize) -> std::io::Result<()> {
        if self.processes[p].described {
            return Ok(());
        }
        self.processes[p].described = true;
        self.trace_packet();
        let d = proto::begin(&mut self.packet, field::TRACK_DESCRIPTOR);
        let proc_ = &self.processes[p];
        proto::uint(&mut self.packet, field::TRACK_UUID, proc_.track);
        let pd = proto::begin(&mut self.packet, field::TRACK_PROCESS);
        proto::int(&mut self.packet, field::PROCESS_PID, proc_.pid);
        proto::bytes(&mut self.packet, field::PROCESS_NAME, proc_.name.as_bytes());
        proto::end(&mut self.packet, pd);
        proto::end(&mut self.packet, d);
        self.flush_packet()
    }

    /// Describes a track that is a child of `parent`: `counter` for a
    /// counter track.
    fn describe_child(
        &mut self,
        uuid: u64,
        parent: u64,
        name: &str,
        counter: bool,
    ) -> std::io::Result<()> {
        self.trace_packet();
        let d = proto::begin(&mut self.packet, field::TRACK_DESCRIPTOR);
        proto::uint(&mut self.packet, field::TRACK_UUID, uuid);
        proto::uint(&mut self.packet, field::TRACK_PARENT, parent);
        proto::bytes(&mut self.packet, field::TRACK_NAME, name.as_bytes());
        if counter {
            let c = proto::begin(&mut self.packet, field::TRACK_COUNTER);
            proto::end(&mut self.packet, c);
        }
        proto::end(&mut self.packet, d);
        self.flush_packet()
    }

    /// The process of `stream` (by its directory).
    fn process(&mut self, stream: &StreamReader) -> usize {
        let key = stream.path().as_os_str().as_encoded_bytes().as_ptr() as usize;
        if let Some(&p) = self.process_of_stream.get(&key) {
            return p;
        }
        let p = stream
            .path()
            .parent()
            .and_then(|d| self.process_of_dir.get(d).copied())
            .unwrap_or(0);
        self.process_of_stream.insert(key, p);
        p
    }

    /// The sequence of `stream`'s thread, made (and its tracks described)
    /// at its first event.
    fn sequence(&mut self, stream: &StreamReader) -> std::io::Result<usize> {
        let p = self.process(stream);
        let (tid, name) = self.threads.of(stream);
        // A trace that does not say its threads (tid 0, `<...>`): a
        // sequence per stream, named by its file.
        let (tid, name) = if tid == 0 {
            (stream_key(stream), "")
        } else {
            (tid, name)
        };
        if let Some(&s) = self.sequence_of.get(&(p, tid)) {
            return Ok(s);
        }
        let name = if name.is_empty() {
            stream
                .path()
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        } else {
            name.to_owned()
        };
        self.describe_process(p)?;
        let s = self.sequences.len();
        let id = TRACE_SEQUENCE + 1 + s as u32;
        let track = mix(self.processes[p].track, tid as u64);
        self.sequences.push(Sequence {
            id,
            process: p,
            track,
            name,
            events_interned: Vec::new(),
            args_interned: Vec::new(),
            pending: Vec::new(),
            calls: CallStack::default(),
            no_exit_described: false,
            last_ts: 0,
        });
        self.sequence_of.insert((p, tid), s);
        self.done.threads += 1;
        // The thread's track, then the sequence's defaults (incremental
        // state starts here).
        self.packet.clear();
        proto::uint(&mut self.packet, field::SEQUENCE_ID, u64::from(id));
        let d = proto::begin(&mut self.packet, field::TRACK_DESCRIPTOR);
        proto::uint(&mut self.packet, field::TRACK_UUID, track);
        let td = proto::begin(&mut self.packet, field::TRACK_THREAD);
        proto::int(&mut self.packet, field::THREAD_PID, self.processes[p].pid);
        proto::int(&mut self.packet, field::THREAD_TID, tid);
        let name = &self.sequences[s].name;
        proto::bytes(&mut self.packet, field::THREAD_NAME, name.as_bytes());
        proto::end(&mut self.packet, td);
        proto::end(&mut self.packet, d);
        self.flush_packet()?;
        self.packet.clear();
        proto::uint(&mut self.packet, field::SEQUENCE_ID, u64::from(id));
        proto::uint(
            &mut self.packet,
            field::SEQUENCE_FLAGS,
            SEQ_INCREMENTAL_STATE_CLEARED,
        );
        proto::uint(&mut self.packet, field::FIRST_PACKET_ON_SEQUENCE, 1);
        let defaults = proto::begin(&mut self.packet, field::TRACE_PACKET_DEFAULTS);
        proto::uint(&mut self.packet, field::DEFAULT_CLOCK_ID, REALTIME);
        let te = proto::begin(&mut self.packet, field::TRACK_EVENT_DEFAULTS);
        proto::uint(&mut self.packet, field::DEFAULT_TRACK_UUID, track);
        proto::end(&mut self.packet, te);
        proto::end(&mut self.packet, defaults);
        self.flush_packet()?;
        Ok(s)
    }

    /// What the export knows of the class of `stream`'s event.
    fn class(&mut self, stream: &StreamReader) -> usize {
        let (sc, ec) = stream.class_index().unwrap_or((0, 0));
        let key = (stream.plan() as *const _ as usize, sc, ec);
        if let Some(&c) = self.class_of.get(&key) {
            return c;
        }
        let class_name = stream.class().map_or(String::new(), |c| c.name.clone());
        let kind = kind(&class_name);
        let name = match &kind {
            Kind::Entry(f) | Kind::Exit(f) | Kind::Ret(f) | Kind::Close(f) => {
                self.event_names.id(f)
            }
            Kind::Other => self.event_names.id(&class_name),
        };
        let counters = (0..self.counters.len())
            .filter(|&i| (self.counters[i].event)(&class_name))
            .collect();
        self.classes.push(ClassInfo {
            kind,
            name,
            counters,
        });
        self.class_of.insert(key, self.classes.len() - 1);
        self.classes.len() - 1
    }

    /// Interns event name `name` on sequence `s` (for its next packet).
    fn intern_event(&mut self, s: usize, name: u32) {
        let seq = &mut self.sequences[s];
        if !test_and_set(&mut seq.events_interned, name) {
            let e = proto::begin(&mut seq.pending, field::EVENT_NAMES);
            proto::uint(&mut seq.pending, field::IID, u64::from(name) + 1);
            let text = self.event_names.name(name);
            proto::bytes(&mut seq.pending, field::IID_NAME, text.as_bytes());
            proto::end(&mut seq.pending, e);
        }
    }

    /// Interns the annotation names the sink used on sequence `s`.
    fn intern_args(&mut self, s: usize) {
        for i in 0..self.args.used.len() {
            self.intern_arg(s, self.args.used[i]);
        }
    }

    /// Interns annotation name `id` on sequence `s`.
    fn intern_arg(&mut self, s: usize, id: u32) {
        let seq = &mut self.sequences[s];
        if !test_and_set(&mut seq.args_interned, id) {
            let e = proto::begin(&mut seq.pending, field::ANNOTATION_NAMES);
            proto::uint(&mut seq.pending, field::IID, u64::from(id) + 1);
            let text = self.arg_names.name(id);
            proto::bytes(&mut seq.pending, field::IID_NAME, text.as_bytes());
            proto::end(&mut seq.pending, e);
        }
    }

    /// Starts a packet on sequence `s` at `ts`, with the interned data
    /// waiting for it; returns where its track event starts.
    fn event_packet(&mut self, s: usize, ts: u64, kind: u64) -> usize {
        let seq = &mut self.sequences[s];
        self.packet.clear();
        proto::uint(&mut self.packet, field::TIMESTAMP, ts);
        proto::uint(&mut self.packet, field::SEQUENCE_ID, u64::from(seq.id));
        proto::uint(
            &mut self.packet,
            field::SEQUENCE_FLAGS,
            SEQ_NEEDS_INCREMENTAL_STATE,
        );
        if !seq.pending.is_empty() {
            proto::bytes(&mut self.packet, field::INTERNED_DATA, &seq.pending);
            seq.pending.clear();
        }
        let te = proto::begin(&mut self.packet, field::TRACK_EVENT);
        proto::uint(&mut self.packet, field::TYPE, kind);
        te
    }

    /// Writes the counter values the sink read, on their tracks.
    fn counter_values(&mut self, s: usize, ts: u64) -> std::io::Result<()> {
        let p = self.sequences[s].process;
        for i in 0..self.args.counter_values.len() {
            let (spec, v) = self.args.counter_values[i];
            let uuid = mix(self.processes[p].track, 0xC0C0 + spec as u64);
            if !self.processes[p].counters[spec] {
                self.processes[p].counters[spec] = true;
                let name = self.counters[spec].name.clone();
                self.describe_child(uuid, self.processes[p].track, &name, true)?;
            }
            let te = self.event_packet(s, ts, COUNTER);
            proto::uint(&mut self.packet, field::EVENT_TRACK_UUID, uuid);
            match v {
                CounterValue::Int(v) => proto::int(&mut self.packet, field::COUNTER_VALUE, v),
                CounterValue::Double(v) => {
                    proto::double(&mut self.packet, field::DOUBLE_COUNTER_VALUE, v)
                }
            }
            proto::end(&mut self.packet, te);
            self.flush_packet()?;
            self.done.counter_values += 1;
        }
        Ok(())
    }

    fn entry(&mut self, s: usize, ts: u64, name: u32) -> std::io::Result<()> {
        let depth = self.args.depth;
        // Calls open at this depth or deeper lost their exits.
        while let Some(c) = self.sequences[s].calls.unexited_before_entry(depth) {
            self.no_exit(s, c, ts)?;
        }
        self.intern_event(s, name);
        self.intern_args(s);
        let call = self.args.call;
        // A second interval of a closing function's call: it is async; its
        // first interval's async part is drawn now.
        if let Some(h) = call.and_then(|c| self.held.remove(&(name, c))) {
            self.async_calls.insert((name, h.call.call.unwrap_or(0)));
            self.draw_async(h)?;
        }
        self.sequences[s]
            .calls
            .push(depth, ts, name, call, &self.args.out);
        Ok(())
    }

    /// Draws a held first interval on its call's async track.
    fn draw_async(&mut self, h: Held) -> std::io::Result<()> {
        let call = h.call.call.unwrap_or(0);
        let track = self.async_track(h.s, h.call.name, call)?;
        self.slice(h.s, &h.call, Some(track), Some(HELD))?;
        self.end(h.s, h.end_ts, Some(track), &h.end_args)?;
        self.done.polls += 1;
        Ok(())
    }

    /// Whether an interval of `call` of function `name` on its thread's
    /// track joins the call's other intervals by a flow: an async poll's,
    /// but not a closing function's before it shows a second interval.
    fn joined(&self, name: u32, call: u64) -> bool {
        !self.closing.contains(&name) || self.async_calls.contains(&(name, call))
    }

    fn exit(&mut self, s: usize, ts: u64, name: u32) -> std::io::Result<()> {
        let depth = self.args.depth;
        while let Some(c) = self.sequences[s].calls.unexited_before_exit(depth) {
            self.no_exit(s, c, ts)?;
        }
        // The exit's own fields (besides depth) and the return value are
        // the end's args.
        let mut end_args = std::mem::take(&mut self.args.out);
        self.sequences[s].calls.take_ret(name, &mut end_args);
        self.intern_args(s);
        let Some(c) = self.sequences[s].calls.exit(depth, name) else {
            // Its entry is not in the trace: an instant, marked.
            self.intern_event(s, name);
            let id = self.arg_names.id("entry_not_in_trace");
            self.intern_arg(s, id);
            let te = self.event_packet(s, ts, INSTANT);
            proto::uint(&mut self.packet, field::NAME_IID, u64::from(name) + 1);
            mark(&mut self.packet, id);
            self.packet.extend_from_slice(&end_args);
            proto::end(&mut self.packet, te);
            end_args.clear();
            self.args.out = end_args;
            self.done.no_entry += 1;
            return self.flush_packet();
        };
        self.begin_ties(s, c.ts)?;
        if !c.begun {
            self.slice(s, &c, None, None)?;
        }
        self.end(s, ts, None, &end_args)?;
        let mut c = c;
        if let Some(call) = c.call {
            if self.joined(name, call) {
                let track = self.async_track(s, name, call)?;
                self.slice(s, &c, Some(track), None)?;
                self.end(s, ts, Some(track), &end_args)?;
                self.done.polls += 1;
            } else {
                // A closing function's first interval: its async part
                // waits for the call to show whether it has more.
                let held = Held {
                    s,
                    call: std::mem::take(&mut c),
                    end_ts: ts,
                    end_args: end_args.clone(),
                };
                self.held.insert((name, call), held);
            }
        }
        self.sequences[s].calls.recycle(c);
        end_args.clear();
        self.args.out = end_args;
        self.done.slices += 1;
        Ok(())
    }

    /// Begins now the open calls of sequence `s` that began at `ts`, the
    /// time of a call about to be written inside them: trace_processor
    /// keeps the file's order between events of the same time, and a
    /// slice written at its exit would otherwise come before its parent's
    /// begin, and be drawn around it. Their ends come at their exits.
    fn begin_ties(&mut self, s: usize, ts: u64) -> std::io::Result<()> {
        let n = self.sequences[s].calls.open_mut().len();
        for i in 0..n {
            let open = &self.sequences[s].calls.open_mut()[i];
            if open.begun || open.ts != ts {
                continue;
            }
            let mut a = std::mem::take(&mut self.sequences[s].calls.open_mut()[i]);
            let r = self.slice(s, &a, None, None);
            a.begun = true;
            self.sequences[s].calls.open_mut()[i] = a;
            r?;
        }
        Ok(())
    }

    /// The async track of call `call` of function `name`, described at
    /// its first use (or again once forgotten).
    fn async_track(&mut self, s: usize, name: u32, call: u64) -> std::io::Result<u64> {
        let p = self.sequences[s].process;
        let parent = self.processes[p].track;
        let uuid = mix(mix(parent, u64::from(name)), call);
        if !self.async_known.contains(&uuid) {
            if self.async_known.len() >= ASYNC_KNOWN {
                self.async_known.clear();
            }
            self.async_known.insert(uuid);
            let text = self.event_names.name(name).to_owned();
            self.describe_child(uuid, parent, &text, false)?;
        }
        Ok(uuid)
    }

    /// Writes call `c` of sequence `s` as a slice begin: on `track`
    /// (the thread's when `None`), with `mark` (an annotation name) true.
    fn slice(
        &mut self,
        s: usize,
        c: &OpenCall,
        track: Option<u64>,
        mark_as: Option<u32>,
    ) -> std::io::Result<()> {
        let te = self.event_packet(s, c.ts, SLICE_BEGIN);
        proto::uint(&mut self.packet, field::NAME_IID, u64::from(c.name) + 1);
        if let Some(track) = track {
            proto::uint(&mut self.packet, field::EVENT_TRACK_UUID, track);
        }
        let joined = c.call.is_some_and(|call| self.joined(c.name, call));
        // The polls of one call, joined across threads: on the thread's
        // track; a held first interval, drawn late, on its async track.
        let held = track.is_some() && mark_as == Some(HELD);
        if let (Some(call), true) = (c.call, (track.is_none() && joined) || held) {
            let p = self.sequences[s].process;
            let flow = mix(
                mix(self.processes[p].track ^ 0xF10, u64::from(c.name)),
                call,
            );
            proto::fixed64(&mut self.packet, field::FLOW_IDS, flow);
        }
        if let Some(id) = mark_as.filter(|&id| id != HELD) {
            mark(&mut self.packet, id);
        }
        self.packet.extend_from_slice(&c.args);
        proto::end(&mut self.packet, te);
        self.flush_packet()
    }

    /// A slice end on `track` (the thread's when `None`).
    fn end(&mut self, s: usize, ts: u64, track: Option<u64>, args: &[u8]) -> std::io::Result<()> {
        let te = self.event_packet(s, ts, SLICE_END);
        if let Some(track) = track {
            proto::uint(&mut self.packet, field::EVENT_TRACK_UUID, track);
        }
        self.packet.extend_from_slice(args);
        proto::end(&mut self.packet, te);
        self.flush_packet()
    }

    /// Call `c` of sequence `s` lost its exit: written, begun and never
    /// ended, on the thread's no-exit track; one begun already on the
    /// thread's track ([`Exporter::begin_ties`]) is ended there at `at`,
    /// when its loss shows, marked.
    fn no_exit(&mut self, s: usize, c: OpenCall, at: u64) -> std::io::Result<()> {
        if c.begun {
            let id = self.arg_names.id("exit_not_in_trace");
            self.intern_arg(s, id);
            let te = self.event_packet(s, at, SLICE_END);
            mark(&mut self.packet, id);
            proto::end(&mut self.packet, te);
            self.sequences[s].calls.recycle(c);
            self.done.no_exit += 1;
            return self.flush_packet();
        }
        let track = mix(self.sequences[s].track, 0x4E4F_4558);
        if !self.sequences[s].no_exit_described {
            self.sequences[s].no_exit_described = true;
            let name = format!("{} (no exit)", self.sequences[s].name);
            let parent = self.sequences[s].track;
            self.describe_child(track, parent, &name, false)?;
        }
        let id = self.arg_names.id("exit_not_in_trace");
        self.intern_arg(s, id);
        self.slice(s, &c, Some(track), Some(id))?;
        self.sequences[s].calls.recycle(c);
        self.done.no_exit += 1;
        Ok(())
    }
}

impl<W: Write> Export for Exporter<W> {
    fn event(&mut self, stream: &mut StreamReader, t: Option<i128>) -> Result<(), Failure> {
        self.done.events += 1;
        let p = self.process(stream);
        if self.kernel[p] && self.ftrace_event(stream, t)? {
            return Ok(());
        }
        let c = self.class(stream);
        let s = self.sequence(stream)?;
        let ts = self.time(s, t);
        if !self.clock_written {
            self.clock_snapshot(ts)?;
        }
        let slice = !matches!(self.classes[c].kind, Kind::Other);
        self.args.reset(slice);
        self.args.counter_fields.clear();
        for &i in &self.classes[c].counters {
            let f: Box<str> = self.counters[i].field.as_str().into();
            self.args.counter_fields.push((f, i));
        }
        let mut sink = Args {
            sink: &mut self.args,
            names: &mut self.arg_names,
        };
        stream.emit(&mut sink).map_err(Failure::Decode)?;
        let name = self.classes[c].name;
        match self.classes[c].kind {
            Kind::Entry(_) => self.entry(s, ts, name)?,
            Kind::Exit(_) => self.exit(s, ts, name)?,
            Kind::Ret(_) => {
                self.sequences[s].calls.set_ret(name, &self.args.out);
                self.intern_args(s);
            }
            // The span's call ends: a first interval still held was its
            // only one (its thread's slice says it all). Not drawn.
            Kind::Close(_) => {
                if let Some(call) = self.args.call {
                    self.held.remove(&(name, call));
                    self.async_calls.remove(&(name, call));
                }
            }
            Kind::Other => {
                self.intern_event(s, name);
                self.intern_args(s);
                let te = self.event_packet(s, ts, INSTANT);
                proto::uint(&mut self.packet, field::NAME_IID, u64::from(name) + 1);
                self.packet.extend_from_slice(&self.args.out);
                proto::end(&mut self.packet, te);
                self.flush_packet()?;
                self.done.instants += 1;
            }
        }
        if !self.args.counter_values.is_empty() {
            self.counter_values(s, ts)?;
        }
        Ok(())
    }

    fn lost(&mut self, stream: &StreamReader, n: u64, t: Option<i128>) -> std::io::Result<()> {
        let s = self.sequence(stream)?;
        let ts = self.time(s, t);
        if !self.clock_written {
            self.clock_snapshot(ts)?;
        }
        let name = self.event_names.id("lost events");
        let id = self.arg_names.id("count");
        self.intern_event(s, name);
        self.intern_arg(s, id);
        let te = self.event_packet(s, ts, INSTANT);
        proto::uint(&mut self.packet, field::NAME_IID, u64::from(name) + 1);
        let a = proto::begin(&mut self.packet, field::ANNOTATIONS);
        proto::uint(&mut self.packet, field::ARG_NAME_IID, u64::from(id) + 1);
        proto::uint(&mut self.packet, field::ARG_UINT, n);
        proto::end(&mut self.packet, a);
        proto::end(&mut self.packet, te);
        self.done.lost += n;
        self.flush_packet()
    }

    /// Calls still open at the end stay on their threads' tracks, begun
    /// and never ended. First intervals still held (their calls did not
    /// close in the trace) are drawn on their async tracks, as any poll.
    fn finish(&mut self) -> std::io::Result<()> {
        let mut held: Vec<Held> = self.held.drain().map(|(_, h)| h).collect();
        held.sort_by_key(|h| (h.call.ts, h.s));
        for h in held {
            self.draw_async(h)?;
        }
        for s in 0..self.sequences.len() {
            for c in self.sequences[s].calls.drain() {
                if c.begun {
                    self.sequences[s].calls.recycle(c);
                    continue;
                }
                self.slice(s, &c, None, None)?;
                self.done.open += 1;
            }
        }
        self.out.flush()
    }
}
