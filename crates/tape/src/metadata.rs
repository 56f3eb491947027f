//! The schema: the CTF description of this process's trace, made from the
//! registry's tracepoints (their fields' types, formats, classes and
//! hints), the `printk!` sites, the clock, and the `env` entries that
//! describe the program and count what the rings could not.
//!
//! Every trace tape writes is described by [`describe`]: a save's
//! (`save::metadata`, with the counts of the moment), the crash dump's and
//! the shared rings' (`template`, with placeholders filled in when the
//! trace is written). The stream's layout it declares:
//!
//! ```text
//! packet.header   { magic u32; uuid u8[16]; stream_id u32 }
//!
//! stream 0, a file per thread (`<thread>-<tid>`):
//! packet.context  { timestamp_begin u64; timestamp_end u64;       (clock-mapped)
//!                   content_size u64; packet_size u64;            (bits)
//!                   packet_seq_num u64; events_discarded u64;
//!                   tid u32; thread_name string }
//! event.header    { id u16; timestamp u64 }                       (packed, byte aligned)
//!
//! stream 1, the losses stream (file `losses`, no events; only when some
//! thread lost events):
//! packet.context  { timestamp_begin u64; timestamp_end u64;
//!                   content_size u64; packet_size u64;
//!                   stream string;                                (a stream file's name)
//!                   lost_<cause> u64 ... }                        (LOSS_CAUSES, in order)
//! ```
//!
//! Readers print a thread stream's packet context on each of its event
//! lines (babeltrace2: `{ tid = 7, thread_name = "rx" }`), so it holds
//! what names the stream and no more: the losses by cause, exact and
//! cumulative, go to a stream of their own, which prints nothing (its
//! packets have no events), where `tape stats` and `tape show` read them
//! (`LOSSES_STREAM` of `tape-ctf-model`). `events_discarded`, their sum,
//! stays in each thread stream, where babeltrace2's discarded-events
//! warnings read it. (The packet header cannot hold them: babeltrace2
//! warns about every field there it does not know.)
//!
//! The packet contexts are listed once (`CONTEXT`, `LOSSES_CONTEXT`):
//! their descriptions, sizes, writers and reader ([`PacketHead`],
//! [`LossesPacket`]) all follow those lists.

use tape_ctf_model::{
    ByteOrder, EnvValue, EventClass, Field, Integer, StreamClass, Struct, Trace, Type,
};
use tape_ctf_model::{LOSSES_STREAM, LOSSES_STREAM_ENV, LOSSES_STREAM_ID, LOSS_CAUSES};

use crate::knobs;
use crate::registry;
use crate::sys;

/// The `env` entry counting the events a save (or crash dump) left out
/// because their ring's copy claim stayed held by another copier past
/// [`ring::CLAIM_PATIENCE`] (a reader stopped in its copy); `tape stats`
/// counts it with the losses outside any stream.
pub(crate) const ENV_SKIPPED_BUSY: &str = "events_skipped_ring_busy";

/// The `env` entry counting the events a recording (`tape record`) took
/// from the rings and could not write (a full disk); 0 in a save.
pub(crate) const ENV_NOT_WRITTEN: &str = "events_not_written";

/// The counts a trace's `env` carries, read by the caller (the schema
/// does not read the rings: they stand on a floor above it).
#[derive(Clone, Debug, Default)]
pub(crate) struct Counts {
    /// `events_dropped_without_ring`.
    pub(crate) dropped_without_ring: u64,
    /// `events_dropped_ring_alloc`.
    pub(crate) dropped_ring_alloc: u64,
    /// `events_lost_with_exited_threads`.
    pub(crate) lost_with_exited_threads: u64,
    /// `tape_rings_cut`, written only when not 0.
    pub(crate) rings_cut: u64,
    /// Entries added after those, in order: the losses of the layers above
    /// tape, what a save adds (a latency snapshot's), a crash's.
    pub(crate) more: Vec<(String, EnvValue)>,
}

/// The CTF description of this process's tracepoints, with `clock` and the
/// `env` entries that count (the save's, or a template's placeholders).
pub(crate) fn describe(uuid: [u8; 16], clock: tape_ctf_model::Clock, counts: &Counts) -> Trace {
    let u8_ = || Type::Integer(Integer::unsigned(8));
    let u32_ = || Type::Integer(Integer::unsigned(32));
    let ts = || Type::Integer(Integer::unsigned(64).mapped(&clock.name));
    let mut t = Trace::new(uuid);
    t.byte_order = ByteOrder::native();
    t.packet_header = Some(Struct::new(vec![
        Field::new("magic", u32_()),
        Field::new(
            "uuid",
            Type::Array {
                element: Box::new(u8_()),
                len: 16,
            },
        ),
        Field::new("stream_id", u32_()),
    ]));
    t.env = vec![
        (
            "tracer_name".into(),
            EnvValue::Str(tape_ctf_model::TRACER_NAME.into()),
        ),
        ("tracer_major".into(), EnvValue::Int(version_part(0))),
        ("tracer_minor".into(), EnvValue::Int(version_part(1))),
        ("tracer_patchlevel".into(), EnvValue::Int(version_part(2))),
        ("hostname".into(), EnvValue::Str(sys::hostname())),
        ("program".into(), EnvValue::Str(sys::program_name())),
        ("pid".into(), EnvValue::Int(i64::from(std::process::id()))),
        (
            "clock_source".into(),
            EnvValue::Str(crate::clock::source().name().into()),
        ),
        (
            "mode".into(),
            EnvValue::Str(
                match knobs::mode() {
                    knobs::Mode::Overwrite => "overwrite",
                    knobs::Mode::Discard => "discard",
                }
                .into(),
            ),
        ),
        (
            "events_dropped_without_ring".into(),
            EnvValue::Int(counts.dropped_without_ring as i64),
        ),
        (
            "events_dropped_ring_alloc".into(),
            EnvValue::Int(counts.dropped_ring_alloc as i64),
        ),
        (
            "events_lost_with_exited_threads".into(),
            EnvValue::Int(counts.lost_with_exited_threads as i64),
        ),
        // Set by the save or the crash dump that left rings out.
        (ENV_SKIPPED_BUSY.into(), EnvValue::Int(0)),
        (ENV_NOT_WRITTEN.into(), EnvValue::Int(0)),
        (
            "trace_creation_datetime".into(),
            EnvValue::Str(sys::local_date()),
        ),
    ];
    // Where the program's code was: `tape.stacktrace` addresses are
    // symbolised against it at read time.
    let exe = sys::executable();
    t.env.extend([
        ("tape_exe".into(), EnvValue::Str(exe.path.clone())),
        ("tape_exe_base".into(), EnvValue::Int(exe.base as i64)),
        (
            "tape_exe_build_id".into(),
            EnvValue::Str(exe.build_id.clone()),
        ),
    ]);
    // Where the trace clock (realtime) is on the system's other clocks, for
    // readers that merge with traces kept in them (Perfetto's BOOTTIME).
    for (name, clock) in [
        ("tape_realtime_minus_boottime_ns", libc::CLOCK_BOOTTIME),
        ("tape_realtime_minus_monotonic_ns", libc::CLOCK_MONOTONIC),
    ] {
        // Written only when positive (a clock set before the boot would
        // give a negative one, which not every TSDL reader takes).
        let d = crate::clock::realtime_minus(clock);
        if let Ok(d @ 0..) = i64::try_from(d) {
            t.env.push((name.into(), EnvValue::Int(d)));
        }
    }
    if counts.rings_cut > 0 {
        t.env.push((
            "tape_rings_cut".into(),
            EnvValue::Int(counts.rings_cut.min(i64::MAX as u64) as i64),
        ));
    }
    t.env.extend(counts.more.iter().cloned());
    t.env.push((
        LOSSES_STREAM_ENV.into(),
        EnvValue::Str(LOSSES_STREAM.into()),
    ));
    t.streams.push(StreamClass {
        id: Some(0),
        packet_context: Some(packet_context(CONTEXT, &clock.name)),
        event_header: Some(Struct::new(vec![
            Field::new("id", Type::Integer(Integer::unsigned(16))),
            Field::new("timestamp", ts()),
        ])),
        event_context: None,
    });
    t.streams.push(StreamClass {
        id: Some(LOSSES_STREAM_ID),
        packet_context: Some(packet_context(LOSSES_CONTEXT, &clock.name)),
        event_header: None,
        event_context: None,
    });
    for (id, site) in registry::printk_sites().iter().enumerate() {
        t.env
            .push((format!("tape_printk_{id}"), EnvValue::Str(site.fmt.into())));
        t.env.push((
            format!("tape_printk_at_{id}"),
            EnvValue::Str(format!("{}:{}", site.file, site.line)),
        ));
    }
    for (id, p) in registry::tracepoints().iter().enumerate() {
        let mut layout = crate::field::Layout::default();
        for f in p.desc().fields {
            (f.describe)(f.name, &mut layout);
        }
        // Read-time display (see the `format` module docs): the format,
        // the class and the hints, for any reader to find in `env`.
        if let Some(f) = p.desc().format {
            t.env
                .push((format!("tape_format_{id}"), EnvValue::Str(f.into())));
        }
        if let Some(c) = p.desc().class {
            t.env
                .push((format!("tape_class_{id}"), EnvValue::Str(c.into())));
        }
        if !layout.hints.is_empty() {
            let hints: Vec<String> = layout
                .hints
                .iter()
                .map(|(path, hint)| format!("{path}:{hint}"))
                .collect();
            t.env
                .push((format!("tape_hints_{id}"), EnvValue::Str(hints.join(";"))));
        }
        let mut e = EventClass::new(p.name(), id as u64, Struct::new(layout.fields));
        e.stream_id = Some(0);
        e.loglevel = p.desc().loglevel.map(i64::from);
        e.emf_uri = p.desc().emf_uri.map(str::to_owned);
        t.events.push(e);
    }
    t.clocks.push(clock);
    t
}

/// Packet magic number (§5.1 of the CTF spec).
pub const PACKET_MAGIC: u32 = 0xC1FC_1FC1;

/// Bytes of the packet header: magic, uuid, stream id.
pub(crate) const PACKET_HEADER_SIZE: usize = 4 + 16 + 4;

/// How a packet context field is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// A clock value (`u64`, mapped to the trace's clock).
    Clock,
    /// A `u64`.
    U64,
    /// A `u32`.
    U32,
    /// A NUL-terminated string.
    Text,
    /// A `u64` per cause of [`LOSS_CAUSES`], named `lost_<cause>`.
    Losses,
}

impl Slot {
    /// Bytes of the field(s), for a string of `text` bytes.
    fn size(self, text: usize) -> usize {
        match self {
            Slot::Clock | Slot::U64 => 8,
            Slot::U32 => 4,
            Slot::Text => text + 1,
            Slot::Losses => 8 * LOSS_CAUSES.len(),
        }
    }
}

/// The packet context's fields before the losses by cause, in order: the
/// one list the description ([`packet_context`]), the size, the writer and
/// the reader of [`PacketHead`] follow (a test decodes what the writer
/// wrote by the description).
const CONTEXT: &[(&str, Slot)] = &[
    ("timestamp_begin", Slot::Clock),
    ("timestamp_end", Slot::Clock),
    ("content_size", Slot::U64),
    ("packet_size", Slot::U64),
    ("packet_seq_num", Slot::U64),
    ("events_discarded", Slot::U64),
    ("tid", Slot::U32),
    ("thread_name", Slot::Text),
];

/// The losses stream's packet context, in order ([`LossesPacket`]).
const LOSSES_CONTEXT: &[(&str, Slot)] = &[
    ("timestamp_begin", Slot::Clock),
    ("timestamp_end", Slot::Clock),
    ("content_size", Slot::U64),
    ("packet_size", Slot::U64),
    ("stream", Slot::Text),
    ("lost_", Slot::Losses),
];

/// A packet context's CTF description from its list (`CONTEXT`,
/// `LOSSES_CONTEXT`), every clock value mapped to `clock`.
fn packet_context(list: &[(&str, Slot)], clock: &str) -> Struct {
    let u = |bits| Type::Integer(Integer::unsigned(bits));
    let mut fields = Vec::new();
    for &(name, slot) in list {
        match slot {
            Slot::Clock => fields.push(Field::new(
                name,
                Type::Integer(Integer::unsigned(64).mapped(clock)),
            )),
            Slot::U64 => fields.push(Field::new(name, u(64))),
            Slot::U32 => fields.push(Field::new(name, u(32))),
            Slot::Text => fields.push(Field::new(
                name,
                Type::String(tape_ctf_model::Encoding::Utf8),
            )),
            Slot::Losses => fields.extend(
                LOSS_CAUSES
                    .iter()
                    .map(|cause| Field::new(format!("{name}{cause}"), u(64))),
            ),
        }
    }
    Struct::new(fields)
}

/// Writes a packet header (magic, `uuid`, `stream_id`) with `put`.
fn put_header(put: &mut impl FnMut(&[u8]), uuid: &[u8; 16], stream_id: u64) {
    put(&PACKET_MAGIC.to_ne_bytes());
    put(uuid);
    put(&(stream_id as u32).to_ne_bytes());
}

/// One packet of the losses stream: a thread stream's losses by cause
/// (cumulative) at a moment. Written by saves, crash dumps and
/// recordings; no allocation (a crash dump writes it from a signal
/// handler, into a buffer of [`LossesPacket::size`] bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LossesPacket<'a> {
    pub(crate) uuid: [u8; 16],
    /// The moment (clock value) the counts were read.
    pub(crate) ts: u64,
    /// The thread stream's file name.
    pub(crate) stream: &'a str,
    /// Its losses so far, by cause of [`LOSS_CAUSES`].
    pub(crate) lost: [u64; LOSS_CAUSES.len()],
}

impl LossesPacket<'_> {
    /// Bytes of the packet for a stream named `stream`.
    pub(crate) fn size(stream: &str) -> usize {
        PACKET_HEADER_SIZE
            + LOSSES_CONTEXT
                .iter()
                .map(|&(_, slot)| slot.size(stream.len()))
                .sum::<usize>()
    }

    /// Writes the packet into `out`, [`LossesPacket::size`] bytes.
    pub(crate) fn write(&self, out: &mut [u8]) {
        let bits = (Self::size(self.stream) * 8) as u64;
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put_header(&mut put, &self.uuid, LOSSES_STREAM_ID);
        for &(_, slot) in LOSSES_CONTEXT {
            match slot {
                Slot::Clock => put(&self.ts.to_ne_bytes()),
                // content_size and packet_size: the whole packet.
                Slot::U64 => put(&bits.to_ne_bytes()),
                Slot::U32 => {}
                Slot::Text => {
                    put(self.stream.as_bytes());
                    put(&[0]);
                }
                Slot::Losses => {
                    for n in self.lost {
                        put(&n.to_ne_bytes());
                    }
                }
            }
        }
    }
}

/// A packet's header and context, as every stream of tape's traces has
/// them (`save`, the crash dump, `tape record`), and as the crash dump's
/// text reads them back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PacketHead<'a> {
    pub(crate) uuid: [u8; 16],
    pub(crate) ts_begin: u64,
    pub(crate) ts_end: u64,
    /// Bits of the packet's header, context and events.
    pub(crate) content_bits: u64,
    /// Bits of the whole packet (the same: tape writes no padding).
    pub(crate) packet_bits: u64,
    pub(crate) seq: u64,
    /// The stream's losses so far, all causes (their sum).
    pub(crate) discarded: u64,
    pub(crate) tid: u32,
    pub(crate) thread_name: &'a str,
}

impl<'a> PacketHead<'a> {
    /// Bytes of a packet's header and context for a thread named `name`.
    pub(crate) fn size(name: &str) -> usize {
        PACKET_HEADER_SIZE
            + CONTEXT
                .iter()
                .map(|&(_, slot)| slot.size(name.len()))
                .sum::<usize>()
    }

    /// The `u64` field of [`CONTEXT`] named `name` (`None` for another
    /// name): the one map from the list's names to this struct, for the
    /// writer and the reader both.
    fn u64_field(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "timestamp_begin" => &mut self.ts_begin,
            "timestamp_end" => &mut self.ts_end,
            "content_size" => &mut self.content_bits,
            "packet_size" => &mut self.packet_bits,
            "packet_seq_num" => &mut self.seq,
            "events_discarded" => &mut self.discarded,
            _ => return None,
        })
    }

    /// Writes the header and context into `out`, [`PacketHead::size`]
    /// bytes.
    pub(crate) fn write(&self, out: &mut [u8]) {
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put_header(&mut put, &self.uuid, 0);
        let mut fields = self.clone();
        for &(name, slot) in CONTEXT {
            match slot {
                Slot::Clock | Slot::U64 => {
                    let v = fields.u64_field(name).map_or(0, |v| *v);
                    put(&v.to_ne_bytes());
                }
                Slot::U32 => put(&self.tid.to_ne_bytes()),
                Slot::Text => {
                    put(self.thread_name.as_bytes());
                    put(&[0]);
                }
                Slot::Losses => {}
            }
        }
    }

    /// Reads the header and context at the start of `b` (a packet of a
    /// thread stream of a trace tape wrote); `None` when `b` is too short
    /// or not such a packet (a losses stream's included).
    pub(crate) fn read(b: &'a [u8]) -> Option<PacketHead<'a>> {
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        // A thread stream's (stream class 0): not the losses stream's.
        if b.get(..4)? != PACKET_MAGIC.to_ne_bytes() || b.get(20..24)? != [0; 4] {
            return None;
        }
        let mut h = PacketHead {
            uuid: b.get(4..20)?.try_into().ok()?,
            ts_begin: 0,
            ts_end: 0,
            content_bits: 0,
            packet_bits: 0,
            seq: 0,
            discarded: 0,
            tid: 0,
            thread_name: "",
        };
        let mut at = PACKET_HEADER_SIZE;
        for &(name, slot) in CONTEXT {
            match slot {
                Slot::Clock | Slot::U64 => {
                    let v = u64_at(at)?;
                    at += 8;
                    *h.u64_field(name)? = v;
                }
                Slot::U32 => {
                    h.tid = u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?);
                    at += 4;
                }
                Slot::Text => {
                    let len = b.get(at..)?.iter().position(|&c| c == 0)?;
                    h.thread_name = std::str::from_utf8(&b[at..at + len]).ok()?;
                    at += len + 1;
                }
                Slot::Losses => {}
            }
        }
        Some(h)
    }
}

fn version_part(i: usize) -> i64 {
    env!("CARGO_PKG_VERSION")
        .split('.')
        .nth(i)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tape_ctf_model::sink::ValueSink;
    use tape_ctf_model::{Base, Value};

    /// The writer, the size and the reader of a packet's context agree
    /// with its description: what `write` wrote decodes, by the
    /// description, to the values written.
    #[test]
    fn the_packet_context_is_written_as_it_is_described() {
        let head = PacketHead {
            uuid: [7; 16],
            ts_begin: 11,
            ts_end: 12,
            content_bits: 13,
            packet_bits: 14,
            seq: 15,
            discarded: 16,
            tid: 17,
            thread_name: "worker-3",
        };
        let size = PacketHead::size(head.thread_name);
        let mut bytes = vec![0xAAu8; size + 5];
        head.write(&mut bytes[..size]);
        assert_eq!(PacketHead::read(&bytes[..size]).as_ref(), Some(&head));
        let mut sink = ValueSink::default();
        let context = packet_context(CONTEXT, "tape");
        let used = crate::view::decode(&context, &bytes[PACKET_HEADER_SIZE..], &mut sink).unwrap();
        assert_eq!(PACKET_HEADER_SIZE + used, size);
        let Some(Value::Struct(fields)) = sink.scopes.pop() else {
            panic!("no struct");
        };
        let u = |v: u64| Value::UInt(v, Base::Decimal);
        let want = vec![
            ("timestamp_begin".to_owned(), u(11)),
            ("timestamp_end".to_owned(), u(12)),
            ("content_size".to_owned(), u(13)),
            ("packet_size".to_owned(), u(14)),
            ("packet_seq_num".to_owned(), u(15)),
            ("events_discarded".to_owned(), u(16)),
            ("tid".to_owned(), Value::UInt(17, Base::Decimal)),
            ("thread_name".to_owned(), Value::Str("worker-3".into())),
        ];
        assert_eq!(fields, want);
        // Not a packet of tape's: no head.
        bytes[0] ^= 1;
        assert_eq!(PacketHead::read(&bytes), None);

        // A packet of the losses stream, likewise.
        let p = LossesPacket {
            uuid: [7; 16],
            ts: 31,
            stream: "worker-3-17",
            lost: [21, 22, 23, 24, 25],
        };
        let size = LossesPacket::size(p.stream);
        let mut bytes = vec![0xAAu8; size];
        p.write(&mut bytes);
        assert_eq!(u32::from_ne_bytes(bytes[20..24].try_into().unwrap()), 1);
        assert_eq!(PacketHead::read(&bytes), None, "not a thread stream's");
        let mut sink = ValueSink::default();
        let context = packet_context(LOSSES_CONTEXT, "tape");
        let used = crate::view::decode(&context, &bytes[PACKET_HEADER_SIZE..], &mut sink).unwrap();
        assert_eq!(PACKET_HEADER_SIZE + used, size);
        let Some(Value::Struct(fields)) = sink.scopes.pop() else {
            panic!("no struct");
        };
        let bits = (size * 8) as u64;
        let mut want = vec![
            ("timestamp_begin".to_owned(), u(31)),
            ("timestamp_end".to_owned(), u(31)),
            ("content_size".to_owned(), u(bits)),
            ("packet_size".to_owned(), u(bits)),
            ("stream".to_owned(), Value::Str("worker-3-17".into())),
        ];
        for (cause, n) in LOSS_CAUSES.iter().zip(21..) {
            want.push((format!("lost_{cause}"), u(n)));
        }
        assert_eq!(fields, want);
    }
}
