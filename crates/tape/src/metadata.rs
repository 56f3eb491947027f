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
//! packet.context  { timestamp_begin u64; timestamp_end u64;       (clock-mapped)
//!                   content_size u64; packet_size u64;            (bits)
//!                   packet_seq_num u64; events_discarded u64;
//!                   tid u32; thread_name string;
//!                   lost_<cause> u64 ... }                        (LOSS_CAUSES, in order)
//! event.header    { id u16; timestamp u64 }                       (packed, byte aligned)
//! ```

use tape_ctf_model::LOSS_CAUSES;
use tape_ctf_model::{ByteOrder, EnvValue, EventClass, Field, Integer, StreamClass, Struct, Trace, Type};

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
    let u64_ = || Type::Integer(Integer::unsigned(64));
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
        ("tracer_name".into(), EnvValue::Str("tape".into())),
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
    t.streams.push(StreamClass {
        id: Some(0),
        packet_context: Some(Struct::new(
            vec![
                Field::new("timestamp_begin", ts()),
                Field::new("timestamp_end", ts()),
                Field::new("content_size", u64_()),
                Field::new("packet_size", u64_()),
                Field::new("packet_seq_num", u64_()),
                Field::new("events_discarded", u64_()),
                Field::new("tid", u32_()),
                Field::new("thread_name", Type::String(tape_ctf_model::Encoding::Utf8)),
            ]
            .into_iter()
            .chain(
                LOSS_CAUSES
                    .iter()
                    .map(|cause| Field::new(format!("lost_{cause}"), u64_())),
            )
            .collect(),
        )),
        event_header: Some(Struct::new(vec![
            Field::new("id", Type::Integer(Integer::unsigned(16))),
            Field::new("timestamp", ts()),
        ])),
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
        t.events.push(e);
    }
    t.clocks.push(clock);
    t
}

fn version_part(i: usize) -> i64 {
    env!("CARGO_PKG_VERSION")
        .split('.')
        .nth(i)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}
