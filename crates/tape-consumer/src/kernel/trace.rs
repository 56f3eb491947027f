//! The kernel's records as a CTF trace beside the program's, laid out as
//! LTTng lays out a session's `kernel/` trace: one stream per CPU
//! (`channel0_N`), `env.domain = "kernel"`, `cpu_id` in each packet, and
//! the clock of the program's trace, so that babeltrace2 and `tape show`
//! merge both by time, exactly.
//!
//! ```text
//! packet: header  magic u32 | uuid u8[16] | stream_id u32            24 bytes
//!         context timestamp_begin u64 | timestamp_end u64 |
//!                 content_size u64 | packet_size u64 (bits) |
//!                 packet_seq_num u64 | events_discarded u64 | cpu_id u32   52 bytes
//! event:  header  id u16 (the ftrace ID) | timestamp u64
//!         context tid s32 (the record's common_pid)
//!         fields  the format file's own fields, in its order:
//!                 integers as they are; char[N] as text; __data_loc strings
//!                 as strings; other dynamic arrays as a length and bytes
//! ```
//!
//! Event and field names follow LTTng's kernel tracer where Trace
//! Compass's analyses read them: `sched_*` events name thread ids `tid`
//! (`prev_tid`, `next_tid`, `parent_tid`, `child_tid`, `old_tid`); `sys_enter_X` /
//! `sys_exit_X` are `syscall_entry_X` / `syscall_exit_X`, without ftrace's
//! `__syscall_nr`. Every other event is named and laid out as its format
//! file says.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use tape_ctf_model::{
    escape_name, Clock, EnvValue, EventClass, Field, Integer, StreamClass, Struct, Trace, Type,
};

use super::format::{FieldFormat, Format, Kind};
use super::page::Missed;

/// The most bytes of events in one packet.
const PACKET_EVENTS: usize = 64 << 10;
const HEADER: usize = 24;
const CONTEXT: usize = 52;
const MAGIC: u32 = 0xC1FC_1FC1;

/// An event as written: its fields (renamed as LTTng's: the record's
/// fields it takes) and where the writing task is.
struct EventPlan {
    fields: Vec<(String, FieldFormat)>,
    pid_offset: usize,
}

/// One CPU's stream.
struct CpuStream {
    cpu: u32,
    /// Its file and path, when the trace is written to a directory.
    file: Option<(File, PathBuf)>,
    events: Vec<u8>,
    begin: Option<u64>,
    end: u64,
    seq: u64,
    /// Lost so far (a running count, as CTF's `events_discarded` is).
    discarded: u64,
    /// Events in the open packet.
    count: u64,
}

/// What a kernel recording took and lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Events written.
    pub events: u64,
    /// Events the kernel said it lost (the pages' counts).
    pub lost: u64,
    /// Pages after which the kernel lost events without counting them
    /// (each counted as one event above).
    pub lost_uncounted: u64,
    /// Records whose id is of no event asked (skipped).
    pub unknown: u64,
    /// Pages that did not read as their layout says (their records after
    /// the damage lost, uncounted).
    pub damaged: u64,
    /// Bytes of the streams written.
    pub bytes: u64,
}

impl KernelStats {
    /// The recorder's summary line for the kernel's events (`tape record`'s
    /// and the relay's): `  kernel: N events, B bytes, lost: L`, then what
    /// else happened, and a newline.
    pub fn summary_line(&self) -> String {
        let mut t = format!(
            "  kernel: {} events, {} bytes, lost: {}",
            self.events, self.bytes, self.lost
        );
        if self.lost_uncounted > 0 {
            t.push_str(&format!(
                " (after {} pages the kernel lost events it did not count: 1 each)",
                self.lost_uncounted
            ));
        }
        if self.damaged > 0 {
            t.push_str(&format!(", damaged pages: {}", self.damaged));
        }
        if self.unknown > 0 {
            t.push_str(&format!(", records of no event asked: {}", self.unknown));
        }
        t.push('\n');
        t
    }
}

/// A packet made for a trace kept in memory ([`KernelTrace::in_memory`]),
/// as it would be written: header, context, events.
pub struct KernelPacket {
    /// Its stream (the CPU's index among the trace's).
    pub stream: usize,
    /// The packet, whole.
    pub bytes: Vec<u8>,
    /// Its first event's time.
    pub begin: u64,
    /// Its last event's time.
    pub end: u64,
    /// Events the kernel lost since the stream began (cumulative).
    pub discarded: u64,
    /// Its events.
    pub events: u64,
}

/// The kernel trace being written into `dir` (or kept in memory, packet
/// by packet, for a relay).
pub struct KernelTrace {
    dir: Option<PathBuf>,
    /// The packets made, when kept in memory.
    made: Vec<KernelPacket>,
    uuid: [u8; 16],
    plans: HashMap<u16, EventPlan>,
    classes: Vec<EventClass>,
    streams: Vec<CpuStream>,
    /// What was taken and lost so far.
    pub stats: KernelStats,
}

impl KernelTrace {
    /// A trace of these events' `formats`, one stream per CPU of `cpus`,
    /// in `dir` (made).
    pub fn create(dir: &Path, formats: &[Format], cpus: &[u32]) -> Result<KernelTrace, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        KernelTrace::new(Some(dir), formats, cpus)
    }

    /// The same trace, its packets kept in memory until taken
    /// ([`KernelTrace::take_packets`]), its metadata made on demand
    /// ([`KernelTrace::metadata`]): for a relay.
    pub fn in_memory(formats: &[Format], cpus: &[u32]) -> Result<KernelTrace, String> {
        KernelTrace::new(None, formats, cpus)
    }

    fn new(dir: Option<&Path>, formats: &[Format], cpus: &[u32]) -> Result<KernelTrace, String> {
        let mut plans = HashMap::new();
        let mut classes = Vec::new();
        for f in formats {
            let (name, fields) = lttng_names(f);
            let class = event_class(&name, f.id, &fields)?;
            classes.push(class);
            plans.insert(
                f.id,
                EventPlan {
                    fields,
                    pid_offset: f.pid_offset,
                },
            );
        }
        let mut streams = Vec::new();
        for &cpu in cpus {
            let file = match dir {
                Some(dir) => {
                    let path = dir.join(format!("channel0_{cpu}"));
                    let file =
                        File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    Some((file, path))
                }
                None => None,
            };
            streams.push(CpuStream {
                cpu,
                file,
                events: Vec::with_capacity(PACKET_EVENTS + 4096),
                begin: None,
                end: 0,
                seq: 0,
                discarded: 0,
                count: 0,
            });
        }
        Ok(KernelTrace {
            dir: dir.map(Path::to_owned),
            made: Vec::new(),
            uuid: tape::__consumer::new_uuid(),
            plans,
            classes,
            streams,
            stats: KernelStats::default(),
        })
    }

    /// What the kernel lost before a page of stream `i`: counted, and the
    /// packet so far closed so that the loss sits between its packets.
    pub fn lost(&mut self, i: usize, missed: Missed) -> Result<(), String> {
        let n = match missed {
            Missed::None => return Ok(()),
            Missed::Count(n) => n,
            Missed::Unknown => {
                self.stats.lost_uncounted += 1;
                1
            }
        };
        self.flush(i)?;
        self.stats.lost += n;
        self.streams[i].discarded += n;
        Ok(())
    }

    /// A page whose records after byte `at` were unreadable.
    pub fn damaged(&mut self) {
        self.stats.damaged += 1;
    }

    /// One record of stream `i` at `time`: encoded into the open packet.
    pub fn record(&mut self, i: usize, time: u64, data: &[u8]) -> Result<(), String> {
        let Some(id) = data.get(..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
            self.stats.unknown += 1;
            return Ok(());
        };
        if self.streams[i].seq == 0 && self.streams[i].begin.is_none() {
            self.open(i, time)?;
        }
        let Some(plan) = self.plans.get(&id) else {
            self.stats.unknown += 1;
            return Ok(());
        };
        let s = &mut self.streams[i];
        let mark = s.events.len();
        s.events.extend_from_slice(&id.to_le_bytes());
        s.events.extend_from_slice(&time.to_le_bytes());
        if encode(plan, data, &mut s.events).is_none() {
            // A record shorter than its format: not written, counted.
            s.events.truncate(mark);
            self.stats.unknown += 1;
            return Ok(());
        }
        s.begin.get_or_insert(time);
        s.end = time;
        s.count += 1;
        self.stats.events += 1;
        if s.events.len() >= PACKET_EVENTS {
            self.flush(i)?;
        }
        Ok(())
    }

    /// Before stream `i`'s first event at `time`: when the kernel lost
    /// events before it, an empty packet at `time` that counts none, so
    /// that the loss lies between two packets. (CTF's `events_discarded`
    /// counts from the stream's start, and readers (babeltrace2 as tape)
    /// count a loss from one packet to the next: a count already in the
    /// first packet says "some, maybe" to babeltrace2 and nothing to tape.)
    fn open(&mut self, i: usize, time: u64) -> Result<(), String> {
        let s = &mut self.streams[i];
        if s.discarded == 0 {
            return Ok(());
        }
        let discarded = std::mem::take(&mut s.discarded);
        s.begin = Some(time);
        s.end = time;
        let r = self.flush(i);
        self.streams[i].discarded = discarded;
        r
    }

    /// Writes stream `i`'s open packet, if it was begun.
    pub fn flush(&mut self, i: usize) -> Result<(), String> {
        let uuid = self.uuid;
        let s = &mut self.streams[i];
        let Some(begin) = s.begin else {
            return Ok(());
        };
        let size = HEADER + CONTEXT + s.events.len();
        let mut head = Vec::with_capacity(size);
        packet_head(
            &mut head,
            &uuid,
            s.cpu,
            [begin, s.end, s.seq, s.discarded],
            s.events.len(),
        );
        match &mut s.file {
            Some((file, path)) => file
                .write_all(&head)
                .and_then(|()| file.write_all(&s.events))
                .map_err(|e| format!("{}: {e}", path.display()))?,
            None => {
                head.extend_from_slice(&s.events);
                self.made.push(KernelPacket {
                    stream: i,
                    bytes: head,
                    begin,
                    end: s.end,
                    discarded: s.discarded,
                    events: s.count,
                });
            }
        }
        self.stats.bytes += size as u64;
        s.count = 0;
        s.events.clear();
        s.begin = None;
        s.seq += 1;
        Ok(())
    }

    /// Every packet written and the metadata, with `clock` (the program's)
    /// and `env` (in the directory; kept in memory: the packets made).
    pub fn finish(&mut self, clock: Clock, env: Vec<(String, EnvValue)>) -> Result<(), String> {
        for i in 0..self.streams.len() {
            self.flush(i)?;
        }
        let text = self.metadata(clock, env)?;
        match &self.dir {
            Some(dir) => {
                let path = dir.join("metadata");
                std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
            }
            None => Ok(()),
        }
    }

    /// The packets made since the last call (a trace kept in memory).
    pub fn take_packets(&mut self) -> Vec<KernelPacket> {
        std::mem::take(&mut self.made)
    }

    /// Its UUID (in every packet's header and the metadata).
    pub fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// Another UUID, for the packets made from now on and the metadata
    /// (a relay session's resumed trace).
    pub fn set_uuid(&mut self, uuid: [u8; 16]) {
        self.uuid = uuid;
    }

    /// The metadata text, with `clock` (the program's) and `env`.
    pub fn metadata(&self, clock: Clock, env: Vec<(String, EnvValue)>) -> Result<String, String> {
        let mut t = Trace::new(self.uuid);
        let u32_ = || Type::Integer(Integer::unsigned(32));
        let u64_ = || Type::Integer(Integer::unsigned(64));
        let time = || Type::Integer(Integer::unsigned(64).mapped(&clock.name));
        t.packet_header = Some(Struct::new(vec![
            Field::new("magic", u32_()),
            Field::new(
                "uuid",
                Type::Array {
                    element: Box::new(Type::Integer(Integer::unsigned(8))),
                    len: 16,
                },
            ),
            Field::new("stream_id", u32_()),
        ]));
        let mut all_env = vec![
            ("domain".to_owned(), EnvValue::Str("kernel".into())),
            ("tracer_name".to_owned(), EnvValue::Str("tape".into())),
        ];
        all_env.extend(env);
        t.env = all_env;
        t.streams.push(StreamClass {
            id: Some(0),
            packet_context: Some(Struct::new(vec![
                Field::new("timestamp_begin", time()),
                Field::new("timestamp_end", time()),
                Field::new("content_size", u64_()),
                Field::new("packet_size", u64_()),
                Field::new("packet_seq_num", u64_()),
                Field::new("events_discarded", u64_()),
                Field::new("cpu_id", u32_()),
            ])),
            event_header: Some(Struct::new(vec![
                Field::new("id", Type::Integer(Integer::unsigned(16))),
                Field::new("timestamp", time()),
            ])),
            event_context: Some(Struct::new(vec![Field::new(
                "tid",
                Type::Integer(Integer::signed(32)),
            )])),
        });
        t.clocks.push(clock);
        t.events = self.classes.clone();
        t.to_tsdl()
            .map_err(|e| format!("the kernel trace's metadata: {e}"))
    }

    /// The streams' CPUs, in order.
    pub fn cpus(&self) -> Vec<u32> {
        self.streams.iter().map(|s| s.cpu).collect()
    }
}

/// Appends a packet's header and context to `out`: the trace's `uuid`,
/// stream `cpu`, its times, `packet_seq_num` and `events_discarded`
/// (`[begin, end, seq, discarded]`), and `events` bytes of events after.
pub fn packet_head(out: &mut Vec<u8>, uuid: &[u8; 16], cpu: u32, at: [u64; 4], events: usize) {
    let [begin, end, seq, discarded] = at;
    let bits = (HEADER + CONTEXT + events) as u64 * 8;
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(uuid);
    out.extend_from_slice(&0u32.to_le_bytes());
    for v in [begin, end, bits, bits, seq, discarded] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&cpu.to_le_bytes());
}

/// Restamps a packet made by [`packet_head`] as a relay sends it: its
/// trace's `uuid` (a resumed trace has another) and `[begin, end, seq,
/// discarded]`.
pub fn restamp(packet: &mut [u8], uuid: &[u8; 16], at: [u64; 4]) {
    if packet.len() < HEADER + CONTEXT {
        return;
    }
    packet[4..20].copy_from_slice(uuid);
    let [begin, end, seq, discarded] = at;
    for (k, v) in [(0, begin), (1, end), (4, seq), (5, discarded)] {
        let o = HEADER + 8 * k;
        packet[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// The event's name and fields as LTTng's kernel tracer names them.
fn lttng_names(f: &Format) -> (String, Vec<(String, FieldFormat)>) {
    let syscall = f.system == "syscalls";
    let name = match (
        f.name.strip_prefix("sys_enter_"),
        f.name.strip_prefix("sys_exit_"),
    ) {
        (Some(s), _) if syscall => format!("syscall_entry_{s}"),
        (_, Some(s)) if syscall => format!("syscall_exit_{s}"),
        _ => f.name.clone(),
    };
    let fields = f
        .fields
        .iter()
        .filter(|x| !(syscall && x.name == "__syscall_nr"))
        .map(|x| {
            // A task's pid is a thread id: LTTng says `tid`.
            let n = match x.name.strip_suffix("pid") {
                Some(head) if f.system == "sched" && (head.is_empty() || head.ends_with('_')) => {
                    format!("{head}tid")
                }
                _ => x.name.clone(),
            };
            (n, x.clone())
        })
        .collect();
    (name, fields)
}

/// The CTF class of an event.
fn event_class(
    name: &str,
    id: u16,
    fields: &[(String, FieldFormat)],
) -> Result<EventClass, String> {
    let mut out = Vec::new();
    for (n, f) in fields {
        let ident = escape_name(n);
        let int = |bytes: usize, signed: bool, hex: bool| {
            let i = if signed {
                Integer::signed(bytes as u32 * 8)
            } else {
                Integer::unsigned(bytes as u32 * 8)
            };
            Type::Integer(if hex { i.hex() } else { i })
        };
        match &f.kind {
            Kind::Int { hex } => out.push(Field::new(ident, int(f.size, f.signed, *hex))),
            Kind::Text => out.push(Field::new(
                ident,
                Type::Array {
                    element: Box::new(Type::Integer(Integer::unsigned(8).utf8())),
                    len: f.size as u64,
                },
            )),
            Kind::Array { count } => out.push(Field::new(
                ident,
                Type::Array {
                    element: Box::new(int(f.size / count, f.signed, false)),
                    len: *count as u64,
                },
            )),
            Kind::DynText { .. } => out.push(Field::new(
                ident,
                Type::String(tape_ctf_model::Encoding::Utf8),
            )),
            Kind::DynBytes { .. } => {
                let length = escape_name(&format!("_{n}_length"));
                out.push(Field::new(
                    length.clone(),
                    Type::Integer(Integer::unsigned(32)),
                ));
                out.push(Field::new(
                    ident,
                    Type::Sequence {
                        element: Box::new(Type::Integer(Integer::unsigned(8).hex())),
                        length,
                    },
                ));
            }
        }
    }
    Ok(EventClass::new(name, u64::from(id), Struct::new(out)))
}

/// A record's context and fields, encoded as its class says (`None`: the
/// record is shorter than its format).
fn encode(plan: &EventPlan, data: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.extend_from_slice(data.get(plan.pid_offset..plan.pid_offset + 4)?);
    for (_, f) in &plan.fields {
        let at = data.get(f.offset..f.offset + f.size)?;
        match f.kind {
            Kind::Int { .. } | Kind::Text | Kind::Array { .. } => out.extend_from_slice(at),
            Kind::DynText { relative } | Kind::DynBytes { relative } => {
                let loc = u32::from_le_bytes(at.try_into().ok()?);
                let mut start = (loc & 0xffff) as usize;
                if relative {
                    start += f.offset + f.size;
                }
                let len = (loc >> 16) as usize;
                let bytes = data.get(start..start + len)?;
                if matches!(f.kind, Kind::DynText { .. }) {
                    let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
                    out.extend_from_slice(text);
                    out.push(0);
                } else {
                    out.extend_from_slice(&(len as u32).to_le_bytes());
                    out.extend_from_slice(bytes);
                }
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::format::parse_format;

    const EXEC: &str = "name: sched_process_exec\nID: 365\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n";

    #[test]
    fn names_as_lttngs_kernel_tracer_gives_them() {
        let exec = parse_format("sched", "f", EXEC).unwrap();
        let (name, fields) = lttng_names(&exec);
        let names: Vec<_> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            (name.as_str(), names),
            ("sched_process_exec", vec!["filename", "tid", "old_tid"])
        );
        let mut openat = exec.clone();
        openat.system = "syscalls".into();
        openat.name = "sys_enter_openat".into();
        openat.fields[0].name = "__syscall_nr".into();
        let (name, fields) = lttng_names(&openat);
        assert_eq!(name, "syscall_entry_openat");
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0].0, "pid", "not renamed outside sched");
    }

    #[test]
    fn a_record_is_encoded_as_its_class_says() {
        let exec = parse_format("sched", "f", EXEC).unwrap();
        let (_, fields) = lttng_names(&exec);
        let plan = EventPlan {
            fields,
            pid_offset: exec.pid_offset,
        };
        // common_type 365, pid 77 at 4; filename at 20 ("/bin/sh\0", 8 bytes)
        let mut rec = vec![0u8; 28];
        rec[..2].copy_from_slice(&365u16.to_le_bytes());
        rec[4..8].copy_from_slice(&77i32.to_le_bytes());
        rec[8..12].copy_from_slice(&(8u32 << 16 | 20).to_le_bytes());
        rec[12..16].copy_from_slice(&78i32.to_le_bytes());
        rec[16..20].copy_from_slice(&79i32.to_le_bytes());
        rec[20..28].copy_from_slice(b"/bin/sh\0");
        let mut out = Vec::new();
        encode(&plan, &rec, &mut out).unwrap();
        let mut want = 77i32.to_le_bytes().to_vec();
        want.extend_from_slice(b"/bin/sh\0");
        want.extend_from_slice(&78i32.to_le_bytes());
        want.extend_from_slice(&79i32.to_le_bytes());
        assert_eq!(out, want);
        // a location past the record, a record cut short: None, never a panic
        rec[8..12].copy_from_slice(&(200u32 << 16 | 20).to_le_bytes());
        assert!(encode(&plan, &rec, &mut Vec::new()).is_none());
        assert!(encode(&plan, &rec[..10], &mut Vec::new()).is_none());
    }

    /// (timestamp_begin, timestamp_end, packet_seq_num, events_discarded)
    /// of each packet of a stream file.
    fn packets(file: &[u8]) -> Vec<[u64; 4]> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < file.len() {
            let word = |k: usize| {
                let o = at + HEADER + 8 * k;
                u64::from_le_bytes(file[o..o + 8].try_into().unwrap())
            };
            out.push([word(0), word(1), word(4), word(5)]);
            at += word(3) as usize / 8;
        }
        out
    }

    #[test]
    fn a_loss_before_a_streams_first_event_lies_between_two_packets() {
        let exec = parse_format("sched", "f", EXEC).unwrap();
        let mut rec = vec![0u8; 28];
        rec[..2].copy_from_slice(&365u16.to_le_bytes());
        rec[8..12].copy_from_slice(&(8u32 << 16 | 20).to_le_bytes());
        // (what the kernel lost before each page, then the page's records)
        type Case<'a> = (&'a str, &'a [(Missed, &'a [u64])], &'a [[u64; 4]]);
        let cases: &[Case] = &[
            (
                "a loss before any event: an empty packet first",
                &[(Missed::Count(500), &[1000, 2000])],
                &[[1000, 1000, 0, 0], [1000, 2000, 1, 500]],
            ),
            (
                "losses before the first page with records add up",
                &[
                    (Missed::Count(7), &[]),
                    (Missed::Unknown, &[]),
                    (Missed::Count(3), &[50]),
                ],
                &[[50, 50, 0, 0], [50, 50, 1, 11]],
            ),
            (
                "a loss after events: between their packet and the next",
                &[(Missed::None, &[10, 20]), (Missed::Count(9), &[30])],
                &[[10, 20, 0, 0], [30, 30, 1, 9]],
            ),
            (
                "no loss: no empty packet",
                &[(Missed::None, &[10])],
                &[[10, 10, 0, 0]],
            ),
        ];
        for (i, (what, pages, want)) in cases.iter().enumerate() {
            let dir =
                std::env::temp_dir().join(format!("tape-kernel-loss-{}-{i}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let mut t = KernelTrace::create(&dir, std::slice::from_ref(&exec), &[0]).unwrap();
            for (missed, times) in pages.iter() {
                t.lost(0, *missed).unwrap();
                for &time in times.iter() {
                    t.record(0, time, &rec).unwrap();
                }
            }
            t.finish(Clock::new("tape", 1_000_000_000), Vec::new())
                .unwrap();
            let file = std::fs::read(dir.join("channel0_0")).unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            assert_eq!(&packets(&file), want, "{what}");
        }
    }

    #[test]
    fn odd_event_and_field_names_reach_the_metadata_escaped() {
        // (names a hostile or future format file may hold)
        let odd = [
            "http.method",
            "a b",
            "\u{fc}ber",
            "}; event {",
            "event",
            "1st",
            "",
            "x\"y",
        ];
        let field = |name: &str, offset: usize| FieldFormat {
            name: name.to_owned(),
            ctype: "int".into(),
            offset,
            size: 4,
            signed: true,
            kind: Kind::Int { hex: false },
        };
        let formats: Vec<Format> = odd
            .iter()
            .enumerate()
            .map(|(i, n)| Format {
                system: "odd".into(),
                name: (*n).to_owned(),
                id: 100 + i as u16,
                fields: odd
                    .iter()
                    .enumerate()
                    .map(|(k, f)| field(f, 8 + 4 * k))
                    .collect(),
                pid_offset: 4,
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("tape-kernel-odd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut t = KernelTrace::create(&dir, &formats, &[0]).unwrap();
        t.finish(Clock::new("tape", 1_000_000_000), Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(dir.join("metadata")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // Every field an identifier (the writer refuses others), each
        // the escape of its name (after CTF's leading `_`, which readers
        // drop); no name written raw.
        for n in odd {
            assert!(
                text.contains(&format!(" _{};", escape_name(n))),
                "{n:?}:\n{text}"
            );
        }
        assert!(
            !text.contains("} http.method;") && !text.contains("}; event {;"),
            "{text}"
        );
        // One event block each: a name's `}; event {` stays in its quotes.
        assert_eq!(
            text.lines().filter(|l| *l == "event {").count(),
            odd.len(),
            "{text}"
        );
    }
}
