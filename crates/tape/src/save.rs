//! Saving a trace: a CTF 1.8 directory, written atomically.
//!
//! ```text
//! <dir>/<program>-YYYY-MM-DD-HH-MM-SS/
//!     metadata            TSDL text, "/* CTF 1.8 */" first
//!     <thread>-<tid>      one stream file per thread: a sequence of packets
//!     losses              the losses stream, when a thread lost events
//! ```
//!
//! Each packet of a stream file:
//!
//! ```text
//! +---------------------------- packet header (24 bytes) ---------------------+
//! | magic u32 = 0xC1FC1FC1 | uuid u8[16] | stream_id u32 = 0                   |
//! +---------------------------- packet context --------------------------------+
//! | timestamp_begin u64 | timestamp_end u64 | content_size u64 (bits)          |
//! | packet_size u64 (bits) | packet_seq_num u64 | events_discarded u64         |
//! | tid u32 | thread_name string (NUL terminated)                              |
//! +---------------------------- events (copied from the ring) ----------------+
//! | id u16 | timestamp u64 | fields | id u16 | timestamp u64 | fields | ...    |
//! +----------------------------------------------------------------------------+
//! ```
//!
//! Everything is byte aligned, in the machine's byte order, which the
//! metadata states. `events_discarded` is the stream's cumulative count of
//! lost events at the end of the packet (full, too big, re-entrant, and
//! overwritten or, for a save racing the writer, not copyable), so readers
//! report the difference between consecutive packets. The losses stream
//! (`losses`, stream class 1, no events: `metadata.rs`) splits each
//! thread stream's count by cause, `lost_<cause>`, cumulative likewise
//! and summing to it (`tape stats` reports them), in one packet per
//! stream that lost events, named by its file: `overwritten` counts the
//! events of the stream before the first packet saved (overwritten in the
//! ring, or saved by an earlier save and overwritten since), the others
//! the ring's drop counters when the last packet was closed. When the first saved
//! packet already has losses, an empty packet with `events_discarded = 0`
//! is written first, so that babeltrace2 reports them too.
//!
//! The trace is written into a hidden temporary directory beside the target
//! and renamed into place (`renameat2(RENAME_NOREPLACE)`): a reader never
//! sees half a trace, and a failed save (permission, disk full) removes the
//! temporary directory and returns an error naming the path.
//!
//! A process killed during a save (`kill -9`, the OOM killer) cannot remove
//! its temporary directory, `.<name>.tmp-<pid>-<nonce>-<n>`. Every save
//! removes those of dead processes in the directory it saves to: a `<pid>`
//! that no longer exists (`kill(pid, 0)` fails with `ESRCH`), or this
//! process's own pid with another process's `<nonce>` (the pid was reused).
//! A process in another pid namespace saving into the same directory would
//! look dead: tape assumes a trace directory is not shared across pid
//! namespaces.
//!
//! Only the rings of threads that had exited *before* their copy was taken
//! are freed after a save: a thread that exits during a save may have
//! emitted after its copy, and those events wait in its ring for the next
//! save (or are counted if the ring is freed unsaved).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tape_ctf_model::{EnvValue, Trace};

use crate::metadata::{Counts, LossesPacket, PacketHead};
use crate::sys::{local_date, new_uuid, program_name, sanitize, truncate_utf8};

use crate::error::{Error, ErrorKind};
use crate::knobs;
use crate::registry;
use crate::ring::{self, CopyError, PacketMeta, Ring};

pub use crate::metadata::PACKET_MAGIC;

/// Saves the trace into a new directory under [`knobs::trace_dir`], named
/// `<program>-YYYY-MM-DD-HH-MM-SS` (with `-2`, `-3`... if taken), and
/// returns its path. Threads may go on emitting meanwhile.
///
/// A trace without events is written all the same (it was asked for), with
/// a notice on stderr that says why it is empty (nothing enabled, nothing
/// hit, `TAPE_TRACE` set but [`crate::init`] never called...).
pub fn save() -> Result<PathBuf, Error> {
    let parent = knobs::trace_dir();
    let stem = format!("{}-{}", program_name(), local_date());
    for n in 1.. {
        let target = if n == 1 {
            parent.join(&stem)
        } else {
            parent.join(format!("{stem}-{n}"))
        };
        match write_files(&target) {
            Err(e) if e.kind == io::ErrorKind::AlreadyExists && n < 1000 => continue,
            Err(e) => return Err(e.into_error()),
            Ok(written) => {
                say_if_empty(&target, written);
                return Ok(target);
            }
        }
    }
    unreachable!("the loop returns")
}

/// Saves the trace as the directory `dir`, which must not exist yet.
pub fn save_to(dir: impl AsRef<Path>) -> Result<PathBuf, Error> {
    let dir = dir.as_ref();
    let written = write_files(dir).map_err(|e| e.into_error())?;
    say_if_empty(dir, written);
    Ok(dir.to_path_buf())
}

/// [`save_to`] with entries added to the metadata's `env` (a latency
/// snapshot's `tape_latency_*`).
pub(crate) fn save_to_with_env(
    dir: &Path,
    env: Vec<(String, tape_ctf_model::EnvValue)>,
) -> Result<PathBuf, Error> {
    EXTRA_ENV.with(|e| *e.borrow_mut() = env);
    let r = write_files(dir).map_err(|e| e.into_error());
    EXTRA_ENV.with(|e| e.borrow_mut().clear());
    r.map(|_| dir.to_path_buf())
}

thread_local! {
    /// Entries the next metadata written on this thread adds to its `env`
    /// (the metadata is built on the saving thread).
    static EXTRA_ENV: std::cell::RefCell<Vec<(String, tape_ctf_model::EnvValue)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Successful saves so far.
static SAVES: AtomicU64 = AtomicU64::new(0);

/// The events lost outside any ring ([`ring::lost_outside_rings`]) when
/// the last save was written.
static SAVED_OUTSIDE: AtomicU64 = AtomicU64::new(0);

/// Whether anything reached the tape since the last save (everything, if
/// none): events or losses in a ring, or losses outside any.
pub(crate) fn unsaved() -> bool {
    ring::rings().iter().any(|r| r.unsaved())
        || ring::lost_outside_rings() != SAVED_OUTSIDE.load(Ordering::Relaxed)
}

/// How many saves were written.
pub(crate) fn saves() -> u64 {
    SAVES.load(Ordering::Relaxed)
}

/// Why a trace has no events, in words a newcomer can act on.
pub(crate) fn why_empty() -> String {
    let mut lost = ring::Drops::default();
    for r in ring::rings() {
        lost += r.drops();
    }
    why_empty_with(lost)
}

/// [`why_empty`] for a trace that states the losses `lost` (those it
/// wrote, not the rings' now: a ring made after the save's copy has its
/// own).
fn why_empty_with(lost: ring::Drops) -> String {
    let enabled = registry::tracepoints()
        .iter()
        .filter(|p| p.is_enabled())
        .count();
    match enabled {
        0 if knobs::setting_os("TAPE_TRACE").is_some() && !knobs::initialised() => {
            "TAPE_TRACE is set, but tape::init() was not called (it reads the TAPE_TRACE* \
             variables)"
                .into()
        }
        0 => match registry::enabling_nothing().first() {
            Some(p) => {
                let near = registry::nearest(p, 3);
                format!(
                    "no tracepoint is enabled: the pattern {p:?} (TAPE_TRACE, or given to \
                     tape) matches no tracepoint{}",
                    if near.is_empty() {
                        " (`tape list` lists them)".to_owned()
                    } else {
                        format!("; nearest: {}", near.join(", "))
                    }
                )
            }
            None => "no tracepoint is enabled (nothing is by default: set TAPE_TRACE, such as \
                     TAPE_TRACE='app.*', and call tape::init(), or call tape::enable_pattern())"
                .into(),
        },
        n if !registry::tracing_on() => format!(
            "{n} tracepoint{} enabled, but tracing is off (`tape ctl PID on`, or \
             tape::registry::set_tracing(true))",
            if n == 1 { " is" } else { "s are" }
        ),
        n if lost.total() > 0 => format!(
            "{n} tracepoint{} enabled and hit, but every event was lost ({})",
            if n == 1 { " is" } else { "s are" },
            lost.by_cause()
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(c, n)| format!("{c} = {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        n if saves() > 0 => format!(
            "{n} tracepoint{} enabled, and no event is in the rings (none was hit since, \
             or an earlier save wrote them and their threads exited)",
            if n == 1 { " is" } else { "s are" }
        ),
        n => format!(
            "{n} tracepoint{} enabled, but none was hit",
            if n == 1 { " is" } else { "s are" }
        ),
    }
}

/// An I/O error and the path it happened on.
pub struct SaveError {
    kind: io::ErrorKind,
    /// What failed, on which path, and why.
    pub message: String,
}

impl SaveError {
    pub(crate) fn at(path: &Path, what: &str, e: io::Error) -> SaveError {
        SaveError {
            kind: e.kind(),
            message: format!("cannot {what} {}: {e}", path.display()),
        }
    }

    fn out_of_memory(what: String) -> SaveError {
        SaveError {
            kind: io::ErrorKind::OutOfMemory,
            message: format!("cannot copy {what}: out of memory"),
        }
    }

    pub(crate) fn into_error(self) -> Error {
        Error::new(
            ErrorKind::Io,
            format!("saving the trace failed: {}", self.message),
        )
    }
}

static SAVE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Says on stderr why the trace at `target` has no events, if so.
fn say_if_empty(target: &Path, written: Written) {
    if !written.events {
        let _ = writeln!(
            io::stderr(),
            "tape: the trace {} has no events: {}",
            target.display(),
            why_empty_with(written.lost)
        );
    }
}

/// What a save wrote: whether some stream has events, and the losses its
/// streams state (summed).
#[derive(Clone, Copy)]
struct Written {
    events: bool,
    lost: ring::Drops,
}

thread_local! {
    /// This thread is writing a trace (a panic then makes no crash dump:
    /// it would wait for the copy this thread holds).
    static SAVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is in the middle of a save.
pub(crate) fn saving_on_this_thread() -> bool {
    SAVING.try_with(|s| s.get()).unwrap_or(false)
}

/// What happened, for the `env` of a crash dump: (reason, tid).
static CRASH: std::sync::Mutex<Option<(String, i32)>> = std::sync::Mutex::new(None);

/// Saves a crash dump at `target` (a panic's: see `crate::crash`): a save
/// whose metadata says why, in `tape_crash_*` env entries.
pub(crate) fn save_crash(target: &Path, what: &str, tid: i32) -> Result<(), Error> {
    *CRASH.lock().unwrap_or_else(|e| e.into_inner()) = Some((what.to_owned(), tid));
    let r = write_files(target).map_err(|e| e.into_error());
    *CRASH.lock().unwrap_or_else(|e| e.into_inner()) = None;
    r.map(|_| ())
}

/// Writes the trace at `target`; whether it has events.
fn write_files(target: &Path) -> Result<Written, SaveError> {
    let was = SAVING.try_with(|s| s.replace(true)).unwrap_or(false);
    let r = write_files_marked(target);
    let _ = SAVING.try_with(|s| s.set(was));
    r
}

fn write_files_marked(target: &Path) -> Result<Written, SaveError> {
    let outside = ring::lost_outside_rings();
    write_atomically(target, fill).map(|saved| {
        for (r, upto) in &saved.marks {
            r.mark_saved(*upto);
        }
        ring::release_saved(&saved.complete);
        SAVED_OUTSIDE.store(outside, Ordering::Relaxed);
        SAVES.fetch_add(1, Ordering::Relaxed);
        Written {
            events: saved.events,
            lost: saved.lost,
        }
    })
}

/// Makes the trace directory `target` (which must not exist) with `fill`:
/// in a hidden temporary directory beside it, renamed into place once
/// `fill` wrote it whole, removed if it failed (module docs).
pub fn write_atomically<T>(
    target: &Path,
    fill: impl FnOnce(&Path) -> Result<T, SaveError>,
) -> Result<T, SaveError> {
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".to_owned());
    if target.exists() {
        return Err(SaveError::at(
            target,
            "create",
            io::Error::new(io::ErrorKind::AlreadyExists, "it already exists"),
        ));
    }
    fs::create_dir_all(&parent).map_err(|e| SaveError::at(&parent, "create directory", e))?;
    remove_stale_temporaries(&parent);
    let tmp = parent.join(format!(
        ".{name}{TMP_MARK}{}-{:016x}-{}",
        std::process::id(),
        process_nonce(),
        SAVE_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir(&tmp).map_err(|e| SaveError::at(&tmp, "create directory", e))?;
    let result = fill(&tmp).and_then(|filled| {
        rename_noreplace(&tmp, target).map_err(|e| SaveError::at(target, "rename into", e))?;
        Ok(filled)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// What a temporary directory's name holds after the trace's name.
const TMP_MARK: &str = ".tmp-";

/// A number that tells this process from an earlier one with the same pid.
fn process_nonce() -> u64 {
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| {
        let id = new_uuid();
        u64::from_ne_bytes(id[..8].try_into().unwrap_or_default())
    })
}

/// Removes the temporary directories that dead processes left in `parent`
/// (module docs). Best effort: a directory that cannot be read or removed
/// is left as it is.
fn remove_stale_temporaries(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let me = std::process::id();
    let nonce = format!("{:016x}", process_nonce());
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with('.') {
            continue;
        }
        let Some((_, tail)) = name.rsplit_once(TMP_MARK) else {
            continue;
        };
        let mut parts = tail.split('-');
        let (Some(pid), Some(their_nonce), Some(n), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(pid), true, true) = (
            pid.parse::<u32>(),
            their_nonce.len() == 16 && their_nonce.bytes().all(|b| b.is_ascii_hexdigit()),
            n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty(),
        ) else {
            continue;
        };
        let dead = if pid == me {
            their_nonce != nonce
        } else {
            !crate::sys::process_exists(pid)
        };
        if dead && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// What [`write_streams`] wrote.
pub struct Filled {
    /// The rings whose every event is in the trace (their thread had
    /// exited before the copy): freed once the trace is in place.
    complete: Vec<Arc<Ring>>,
    /// Each ring and its [`Ring::accounted`] before its copy.
    marks: Vec<(Arc<Ring>, u64)>,
    /// Some stream has events.
    pub(crate) events: bool,
    /// Rings left out (their copy claim stayed held).
    pub skipped: Vec<Skipped>,
    /// The losses the streams state, summed.
    pub(crate) lost: ring::Drops,
    /// Stream files written.
    pub streams: usize,
}

/// Writes metadata and stream files into `dir`.
///
/// Each ring's packets are copied and written one at a time into one
/// buffer, reused: a save needs memory for one packet beyond the rings,
/// and an allocation that fails is an error, not an abort.
fn fill(dir: &Path) -> Result<Filled, SaveError> {
    let uuid = new_uuid();
    let filled = write_streams(dir, &ring::rings(), &uuid)?;
    // The clock is calibrated last: the longest span, the best frequency.
    let mut t = metadata(uuid);
    if !filled.skipped.is_empty() {
        let events: u64 = filled.skipped.iter().map(|s| s.events).sum();
        for (k, v) in t.env.iter_mut() {
            if k == ENV_SKIPPED_BUSY {
                *v = EnvValue::Int(i64::try_from(events).unwrap_or(i64::MAX));
            }
        }
        let what: Vec<String> = filled.skipped.iter().map(Skipped::describe).collect();
        t.env
            .push(("tape_rings_skipped".into(), EnvValue::Str(what.join("; "))));
        eprintln!(
            "tape: the trace at {} lacks {} ring(s), {events} event(s): {} (waited {} s; \
             a reader stopped in its copy, as `tape pipe` after Ctrl-Z? They stay for the \
             next save)",
            dir.display(),
            filled.skipped.len(),
            what.join("; "),
            ring::CLAIM_PATIENCE.as_secs()
        );
    }
    let meta = t.to_tsdl().map_err(|e| SaveError {
        kind: io::ErrorKind::InvalidData,
        message: e.to_string(),
    })?;
    write_file(&dir.join("metadata"), meta.as_bytes())?;
    Ok(filled)
}

/// Writes a stream file for each ring into `dir`, each packet's header
/// naming the trace `uuid`.
pub fn write_streams(
    dir: &Path,
    rings: &[Arc<Ring>],
    uuid: &[u8; 16],
) -> Result<Filled, SaveError> {
    let mut complete = Vec::new();
    let mut marks = Vec::new();
    let mut events = false;
    let mut names = Vec::new();
    let mut buf = Vec::new();
    let mut skipped = Vec::new();
    let mut lost = ring::Drops::default();
    // The losses stream's packets: one per stream that lost events, each
    // at its stream's last packet's end, made non-decreasing (a stream's
    // packets must be: readers merge by time).
    let mut losses: Vec<u8> = Vec::new();
    let mut losses_ts = 0u64;
    // Every ring's copy claim is waited for until then, no later (a stopped
    // reader holding one never holds the save: `ring::CLAIM_PATIENCE`).
    let until = std::time::Instant::now() + ring::CLAIM_PATIENCE;
    for r in rings {
        // Before the copy: an exited thread emits no more, so its copy holds
        // every event it kept. A thread that exits after this line may emit
        // after the copy: its ring stays for the next save.
        let exited = r.exited();
        marks.push((r.clone(), r.accounted()));
        let mut file_name = format!("{}-{}", sanitize(&r.name), r.tid());
        let mut n = 2;
        while names.contains(&file_name) {
            file_name = format!("{}-{}-{n}", sanitize(&r.name), r.tid());
            n += 1;
        }
        let ctx = Context {
            uuid,
            tid: r.tid(),
            name: truncate_utf8(&r.name, 255),
        };
        let mut file = StreamFile::new(dir.join(&file_name), ctx, r.created_ts);
        let head = file.ctx.head_size();
        match r.copy_packets(&mut buf, head, until, |m, b| file.packet(m, b)) {
            Ok(()) => {}
            Err(CopyError::Busy(holder)) => {
                // Not saved: the ring keeps its events for the next save.
                marks.pop();
                skipped.push(Skipped {
                    tid: r.tid(),
                    name: r.name.to_string(),
                    holder,
                    events: r.held(),
                });
                continue;
            }
            Err(CopyError::Memory(e)) => {
                return Err(SaveError::out_of_memory(format!(
                    "a packet of thread {} ({}): {e}",
                    r.tid(),
                    r.name
                )))
            }
            Err(CopyError::Each(e)) => return Err(e),
        }
        events |= file.events;
        let d = file.losses.last().unwrap_or_default();
        lost += d;
        let ts = file.losses.ts();
        if file.finish()? {
            if d.total() > 0 {
                losses_ts = losses_ts.max(ts);
                let ts = losses_ts;
                let at = losses.len();
                losses.resize(at + losses_packet_size(&file_name), 0);
                losses_packet(&mut losses[at..], uuid, ts, &file_name, d);
            }
            names.push(file_name);
        }
        if exited {
            complete.push(r.clone());
        }
    }
    if !losses.is_empty() {
        write_file(&dir.join(tape_ctf_model::LOSSES_STREAM), &losses)?;
    }
    Ok(Filled {
        complete,
        marks,
        events,
        streams: names.len(),
        skipped,
        lost,
    })
}

use crate::metadata::ENV_SKIPPED_BUSY;

/// A ring a save left out: its copy claim stayed held by another copier.
pub struct Skipped {
    tid: u32,
    name: String,
    /// The process id in the claim.
    holder: u64,
    /// Events the ring held.
    pub events: u64,
}

impl Skipped {
    /// The ring, its events, and who held its copy.
    pub fn describe(&self) -> String {
        format!(
            "thread {} ({}): {} event(s), its copy held by process {}",
            self.tid, self.name, self.events, self.holder
        )
    }
}

/// One ring's stream file, written packet by packet as the ring hands them
/// over, and created only once it has something to say: events, or losses.
struct StreamFile<'a> {
    path: PathBuf,
    ctx: Context<'a>,
    created_ts: u64,
    file: Option<fs::File>,
    /// Packets without events not written yet (the stream may say nothing).
    pending: Vec<u8>,
    losses: StreamLosses,
    /// Some packet had events.
    events: bool,
}

/// The losses a stream's packets state (module docs), decided packet by
/// packet with no allocation: the save and the crash dump write streams
/// with it.
#[derive(Default)]
pub(crate) struct StreamLosses {
    /// Events lost before the first packet copied (overwritten).
    lost_before: Option<u64>,
    /// Losses of the last packet kept (every packet skipped has the same:
    /// so they are the stream's last).
    prev: Option<ring::Drops>,
    /// The end of the last packet seen (the time of its losses).
    ts: u64,
}

impl StreamLosses {
    /// For packet `m` of a ring created at `created_ts`: the time of an
    /// empty packet with no losses to write first (the first packet has
    /// losses: so that readers report them), and the packet's losses, or
    /// `None` when the packet says nothing (no events, no new losses).
    pub(crate) fn packet(
        &mut self,
        m: &PacketMeta,
        created_ts: u64,
    ) -> (Option<u64>, Option<ring::Drops>) {
        let first = self.lost_before.is_none();
        self.ts = self.ts.max(m.ts_end);
        let lost_before = *self.lost_before.get_or_insert(m.committed_before);
        let d = ring::Drops {
            overwritten: lost_before,
            ..m.dropped_at_close
        };
        let leading = (first && d.total() > 0).then(|| created_ts.min(m.ts_begin));
        if m.events == 0 && self.prev == Some(d) {
            return (leading, None);
        }
        self.prev = Some(d);
        (leading, Some(d))
    }

    /// The losses of the last packet kept.
    pub(crate) fn last(&self) -> Option<ring::Drops> {
        self.prev
    }

    /// The end of the last packet seen: when [`StreamLosses::last`] held.
    pub(crate) fn ts(&self) -> u64 {
        self.ts
    }
}

impl<'a> StreamFile<'a> {
    fn new(path: PathBuf, ctx: Context<'a>, created_ts: u64) -> StreamFile<'a> {
        StreamFile {
            path,
            ctx,
            created_ts,
            file: None,
            pending: Vec::new(),
            losses: StreamLosses::default(),
            events: false,
        }
    }

    /// Packet `m`, whose events follow its header's room in `buf`.
    fn packet(&mut self, m: &PacketMeta, buf: &mut [u8]) -> Result<(), SaveError> {
        let head = self.ctx.head_size();
        let (leading, kept) = self.losses.packet(m, self.created_ts);
        if let Some(t) = leading {
            let at = self.pending.len();
            self.pending.resize(at + head, 0);
            self.ctx.leading_header(&mut self.pending[at..], t, m);
        }
        let Some(d) = kept else {
            return Ok(());
        };
        self.events |= m.events > 0;
        self.ctx.packet_header(&mut buf[..head], m, d);
        if m.events == 0 {
            self.pending.extend_from_slice(&buf[..head]);
            return Ok(());
        }
        self.write_pending()?;
        self.write(buf)
    }

    fn write_pending(&mut self) -> Result<(), SaveError> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.write(&pending)?;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), SaveError> {
        if self.file.is_none() {
            self.file = Some(create(&self.path)?);
        }
        let f = self.file.as_mut().expect("created above");
        // No fsync: see `write_file`.
        f.write_all(bytes)
            .map_err(|e| SaveError::at(&self.path, "write", e))
    }

    /// Writes what is left; whether the stream has a file.
    fn finish(mut self) -> Result<bool, SaveError> {
        if self.file.is_none() && self.losses.last().unwrap_or_default().total() == 0 {
            return Ok(false);
        }
        self.write_pending()?;
        Ok(self.file.is_some())
    }
}

fn create(path: &Path) -> Result<fs::File, SaveError> {
    fs::File::create(path).map_err(|e| SaveError::at(path, "create", e))
}

/// Writes `bytes` to a new file at `path`.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SaveError> {
    let mut f = create(path)?;
    // No fsync: the rename makes a save atomic for readers; durability across
    // a power loss is not worth one disk flush per stream file (a process
    // with thousands of threads has thousands of them).
    f.write_all(bytes)
        .map_err(|e| SaveError::at(path, "write", e))
}

/// The CTF description of this process's tracepoints.
pub(crate) fn metadata(uuid: [u8; 16]) -> Trace {
    let clock = crate::clock::ctf_clock();
    // The shared rings' process file gets the calibration too: the longer
    // its span, the better the frequency a recovery computes.
    ring::shm::calibrate_now();
    crate::metadata::describe(uuid, clock, &counts())
}

/// What the metadata's `env` counts now: the losses outside the rings, the
/// ring files cut, the losses of the layers above, and what this save and
/// a crash add.
pub(crate) fn counts() -> Counts {
    let mut more: Vec<(String, EnvValue)> = Vec::new();
    // Losses counted by layers above tape (`crate::layer_losses`).
    for (name, n) in crate::layer_losses::values() {
        more.push((name.into(), EnvValue::Int(n)));
    }
    let _ = EXTRA_ENV.try_with(|e| more.extend(e.borrow().iter().cloned()));
    if let Some((what, tid)) = CRASH.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        more.extend([
            ("tape_crash_signal".into(), EnvValue::Int(0)),
            ("tape_crash_code".into(), EnvValue::Int(0)),
            ("tape_crash_addr".into(), EnvValue::Int(0)),
            ("tape_crash_tid".into(), EnvValue::Int(i64::from(tid))),
            ("tape_crash_reason".into(), EnvValue::Str(what)),
        ]);
    }
    Counts {
        dropped_without_ring: ring::DROPPED_NO_RING.load(Ordering::Relaxed),
        dropped_ring_alloc: ring::DROPPED_NO_MEMORY.load(Ordering::Relaxed),
        lost_with_exited_threads: ring::EVENTS_LOST_EXITED.load(Ordering::Relaxed),
        // Ring files of this process cut under their mappings and repaired
        // (`ring::cut`): their events before the cut are lost.
        rings_cut: crate::ring::cut::REPAIRED.load(Ordering::Relaxed),
        more,
    }
}

/// What a stream's packet headers say of their ring: the trace, the
/// thread.
pub struct Context<'a> {
    /// The trace's UUID.
    pub uuid: &'a [u8; 16],
    /// The ring's thread.
    pub tid: u32,
    /// Its name.
    pub name: &'a str,
}

impl Context<'_> {
    /// Bytes of a packet's header and context.
    pub fn head_size(&self) -> usize {
        PacketHead::size(self.name)
    }

    /// The header of packet `m`, which loses `d` (`StreamLosses::packet`).
    pub fn packet_header(&self, out: &mut [u8], m: &PacketMeta, d: ring::Drops) {
        let begin = m.ts_begin.min(m.ts_end);
        self.header(out, begin, m.ts_end, m.seq + 1, d, m.events);
    }

    /// The empty packet, with no losses, at `t`, written before packet `m`
    /// when that one is the first and has losses.
    pub fn leading_header(&self, out: &mut [u8], t: u64, m: &PacketMeta) {
        self.header(out, t, t, m.seq, ring::Drops::default(), 0);
    }

    /// The header of a packet a forwarding reader makes (the relay): its
    /// times, `packet_seq_num`, losses so far (all causes, summed) and
    /// bytes of events given.
    pub fn forwarded_header(
        &self,
        out: &mut [u8],
        begin: u64,
        end: u64,
        seq: u64,
        discarded: u64,
        events: usize,
    ) {
        let lost = ring::Drops {
            full: discarded,
            ..ring::Drops::default()
        };
        self.header(out, begin, end.max(begin), seq, lost, events);
    }

    /// Writes a packet's header and context into `out` (`head_size` bytes),
    /// for a packet of `events` bytes of events.
    fn header(
        &self,
        out: &mut [u8],
        begin: u64,
        end: u64,
        seq: u64,
        lost: ring::Drops,
        events: usize,
    ) {
        let bits = ((self.head_size() + events) as u64) * 8;
        // Counts at most i64::MAX: a damaged ring's (recovered) may be
        // anything, and babeltrace2 takes u64::MAX for "unknown" (it
        // aborts on such a discarded count).
        let count = |n: u64| n.min(i64::MAX as u64);
        PacketHead {
            uuid: *self.uuid,
            ts_begin: begin,
            ts_end: end,
            content_bits: bits,
            packet_bits: bits,
            seq,
            discarded: count(lost.total()),
            tid: self.tid,
            thread_name: self.name,
        }
        .write(out);
    }
}

/// Bytes of the losses stream's packet for the stream file `name`.
pub fn losses_packet_size(name: &str) -> usize {
    LossesPacket::size(name)
}

/// Writes into `out` ([`losses_packet_size`] bytes) the losses stream's
/// packet saying that the stream file `name` lost `d` (cumulative) by
/// `ts`.
pub fn losses_packet(out: &mut [u8], uuid: &[u8; 16], ts: u64, name: &str, d: ring::Drops) {
    LossesPacket {
        uuid: *uuid,
        ts,
        stream: name,
        // As `events_discarded`: at most i64::MAX.
        lost: d.by_cause().map(|(_, n)| n.min(i64::MAX as u64)),
    }
    .write(out);
}

/// `rename(from, to)` that fails with `AlreadyExists` instead of replacing.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: both are valid NUL-terminated paths; AT_FDCWD makes them
    // relative to the working directory, as `std::fs::rename` does.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::ENOSYS) {
        return rename_claimed(from, to, || {});
    }
    Err(e)
}

/// `rename(from, to)` for a file system without `RENAME_NOREPLACE`: `to` is
/// claimed first by creating it (which fails if anything is there), then
/// replaced by `from` (a rename may replace an empty directory: ours). A
/// directory created at `to` by another process is never replaced: either
/// our claim fails, or theirs does. (A check for `to` then a rename would
/// replace an empty directory made in between.) `between` runs after the
/// claim (tests put a competitor there).
fn rename_claimed(from: &Path, to: &Path, between: impl FnOnce()) -> io::Result<()> {
    fs::create_dir(to)?;
    between();
    fs::rename(from, to).inspect_err(|_| {
        // Ours and still empty: given back (a non-empty one is not ours).
        let _ = fs::remove_dir(to);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process creates the target between the check and the rename:
    /// its directory is never replaced.
    #[test]
    fn the_rename_fallback_never_replaces_a_directory_made_meanwhile() {
        let base = std::env::temp_dir().join(format!("tape-rename-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(base.join("from")).unwrap();
        fs::write(base.join("from/metadata"), "x").unwrap();
        let to = base.join("to");
        let mut theirs = false;
        let r = rename_claimed(&base.join("from"), &to, || {
            theirs = fs::create_dir(&to).is_ok();
        });
        assert!(!(theirs && r.is_ok()), "their directory was replaced");
        assert!(r.is_ok() && to.join("metadata").is_file(), "{r:?}");
        // A target that exists already is refused, and nothing moves.
        fs::create_dir_all(base.join("again")).unwrap();
        let e = rename_claimed(&base.join("again"), &to, || {}).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(base.join("again").is_dir());
        let _ = fs::remove_dir_all(&base);
    }

    /// The test above can fail: the way it replaced (check, then rename)
    /// loses the competitor's directory under the same schedule.
    #[test]
    fn check_then_rename_would_replace_it() {
        let base = std::env::temp_dir().join(format!("tape-rename-old-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(base.join("from")).unwrap();
        let to = base.join("to");
        assert!(!to.exists());
        let theirs = fs::create_dir(&to).is_ok(); // the competitor, in between
        let replaced = fs::rename(base.join("from"), &to).is_ok();
        assert!(theirs && replaced, "rename(2) replaces an empty directory");
        let _ = fs::remove_dir_all(&base);
    }
}
