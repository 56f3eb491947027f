//! Recording: a running process's events streamed to a CTF trace on disk
//! for as long as it runs, from another process, as LTTng's consumer
//! daemon streams its buffers (`tape record PID -o DIR`), with no daemon.
//!
//! The process must have shared rings (the default, `ring/shm.rs`; not
//! with `TAPE_SHM=off`). The recorder maps each ring file shared and, at
//! each turn, takes the packets the owner closed since its last turn,
//! with the protocol of a save (`tape::ring`, "The snapshot"): for each
//! packet it claims the ring's copy (a claim word in the ring's region
//! that this process's saves and crash dump take too, so they take
//! turns), pins the packet, writes it to the ring's stream file straight
//! from the ring's memory (`Ring::write_packets`: one copy, into the
//! kernel, as LTTng's consumer writes from its mapped sub-buffers), and
//! releases it: a save of the program waits one packet's write at most.
//!
//! ```text
//!  writer thread (process A)               tape record (process B)
//!  ring file: [ p4 | p5 | p6 | p3 ]        claim, pin p4, write p4, release;
//!                          ^ open          the same for p5 (closed ones)
//!                                          freed = 6: A may reuse p4's, p5's slots
//!                                          out/<thread>-<tid>: ... p3 p4 p5
//! ```
//!
//! A live reader (`tape pipe`, the relay) keeps what it takes past the
//! turn, so its packets are copied out under the claim instead
//! (`Ring::stream_packets`) into buffers it gives back when done
//! ([`Recorder::recycle`]): a buffer freed and another faulted in at each
//! turn cost more than the copy. Turns are paced by what they find
//! ([`rest`]): several packets a turn, no ring past a quarter full.
//! `scripts/record-rate.sh` measures all this beside LTTng's consumer.
//!
//! * **Discard mode**: the packets the recorder consumed are *freed*
//!   (the gate's `freed` word): the owner reuses their slots instead of
//!   dropping, so nothing is lost while the recorder keeps up; when it
//!   falls a whole ring behind, the owner drops (and counts) as without
//!   a recorder.
//! * **Overwrite mode**: the owner never waits; packets it overwrote
//!   before the recorder took them are lost, counted exactly from the
//!   packets' `committed_before` (events before a packet) and the count
//!   of events the recorder wrote, and written as the stream's
//!   `lost_overwritten`.
//!
//! Every cause reaches the trace as a save writes it: `events_discarded`
//! (cumulative per stream) in the packet contexts, so babeltrace2 reports
//! the losses between the packets where they happened, and the counts by
//! cause in the losses stream, a packet appended each turn a stream's
//! grew.
//!
//! A thread's ring whose file goes (the thread exited and its ring was
//! saved and freed) is read to its end, open packet included (its owner
//! writes no more). When the process exits (or dies), every ring is read
//! to its end and the recording ends; `--duration`, `--size` and SIGINT
//! end it earlier, the open packets read up to their last published
//! event. The metadata is written when the recording starts (the trace is
//! readable while it grows) and again, with the clock calibrated over the
//! whole span, at its end.
//!
//! One reader per process at a time, this or `tape pipe` (the process
//! file's `reader` word: a second one is refused, naming the first; one
//! found dead is replaced); `tape ctl PID status` names it. Both consume:
//! each ring's *reader mark* (`ring/gate.rs`) says where the last reader
//! stopped, and the next starts there, its losses counted from there (a
//! recording moves the mark past what it wrote, a pipe past what it
//! printed: [`Recorder::set_mark`]).
//!
//! `tape pipe` reads with the same walk ([`Recorder::poll_chunks`]), the
//! open packets included at every turn: a cursor (packet, byte offset)
//! per ring takes each event once.

use std::fs::File;
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::recover;
use tape::__consumer as tape_rings;
use tape::{Error, ErrorKind};
use tape_rings::shm::{self, ProcessHeader};
use tape_rings::Context;
pub use tape_rings::AWAITING_ENV;
use tape_rings::{Drops, PacketMeta, Ring};

fn error(message: String) -> Error {
    tape_rings::error(ErrorKind::Io, message)
}

/// One ring being recorded, and its stream file.
struct Stream {
    /// The ring file (its disappearance says the thread is done).
    source: PathBuf,
    ring: Ring,
    /// Where to read next: a packet, and a byte offset in it (a live
    /// reader takes the open packet's events as they come).
    next: (u64, usize),
    /// What was taken of the ring and where it went (what a walk moves).
    taken: Taken,
    /// Read to its end: nothing more will come.
    done: bool,
    /// The losses the losses stream says of this stream so far.
    lost_said: Drops,
    uuid: [u8; 16],
}

/// What a reader has taken of one ring, counted, and where a recording
/// writes it: the state a walk of the ring moves ([`Walk`]).
struct Taken {
    path: PathBuf,
    file: Option<File>,
    /// Events of the ring before the next one to take: taken, or counted
    /// lost (`None`: a live reader that has not begun, which begins at its
    /// first chunk, the events before it neither taken nor lost).
    position: Option<u64>,
    /// Events overwritten before the reader took them, so far.
    overwritten: u64,
    /// The ring's events up to which the reader before, killed, may have
    /// printed (its mark and its doubt: `Ring::reader_doubt`); and of
    /// those overwritten since, how many so far.
    doubt_until: u64,
    maybe_printed: u64,
    /// A chunk of an open packet was handed out whose events the reader
    /// has not counted yet ([`Recorder::took`]).
    uncounted: bool,
    /// The losses the last packet written states (cumulative).
    lost: Drops,
    /// A leading empty packet was written or is not needed.
    started: bool,
    /// When the last packet written ended.
    last_end: u64,
    /// Bytes of whole packets in the stream file.
    len: u64,
    /// The packet header written before a packet's events in place.
    head: Vec<u8>,
}

/// Events of one ring handed to a live reader ([`Recorder::poll_chunks`]),
/// with what the ring says of them and the stream's losses as of them,
/// counted here once for every reader.
pub struct Chunk {
    /// The ring's index (in the order rings were found).
    pub stream: usize,
    /// A CTF packet (header and context, then the events): the events of
    /// one of the ring's packets from `offset` on. Its context states no
    /// losses: they are in `lost`.
    pub packet: Vec<u8>,
    /// The events' offset in their packet (0: the packet's first event).
    pub offset: usize,
    /// The ring's events before the chunk's first, as this reader counts
    /// them (taken, or lost).
    pub before: u64,
    /// Its events, when the ring says: the tail of a closed packet. Those
    /// of an open packet's chunk are known once decoded: the reader tells
    /// them ([`Recorder::took`]) before its next turn.
    pub events: Option<u64>,
    /// The stream's losses as of the chunk, by cause, cumulative: the
    /// owner's drops (all causes but overwriting) since its ring was made,
    /// when the packet was closed (or read, if open), and the events
    /// overwritten before this reader could take them.
    pub lost: Drops,
    /// Of the events overwritten (`lost.overwritten`), those a reader
    /// before this one, killed, may have printed (cumulative): a printing
    /// reader does not count them lost (`Ring::reader_doubt`).
    pub maybe_printed: u64,
    /// The cursor after these events: what [`Recorder::set_mark`] takes
    /// once they are consumed.
    pub end: (u64, usize),
    /// The ring's packet is closed (its owner writes no more to it): these
    /// are its last events.
    pub closed: bool,
    /// The ring packet's first time, in the trace's clock.
    pub ts_begin: u64,
    /// Its last time (of a packet still open: the ring's last event when
    /// it was read, which may lie past these events).
    pub ts_end: u64,
}

/// Where a live reader's chunks go.
type ChunkSink<'s> = dyn FnMut(Chunk) + 's;

/// A forwarded packet's context ([`Recorder::packet_head`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketTimes {
    /// Its first time (the trace's clock).
    pub begin: u64,
    /// Its last time.
    pub end: u64,
    /// Its `packet_seq_num`.
    pub seq: u64,
    /// Events the stream lost so far (`events_discarded`).
    pub discarded: u64,
    /// Bytes of events after the header.
    pub events: usize,
}

/// What a recording has done so far.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Bytes written to the trace's stream files.
    pub bytes: u64,
    /// Events written (counted from the packets' metadata).
    pub events: u64,
    /// Losses counted in the streams, by cause (summed over streams).
    pub lost: Drops,
    /// Streams (threads) recorded.
    pub streams: usize,
}

/// A recording in progress ([`Recorder::attach`], [`Recorder::poll`],
/// [`Recorder::finish`]).
pub struct Recorder {
    dir: PathBuf,
    /// The trace directory (none for a live reader: `tape pipe`).
    out: Option<PathBuf>,
    /// Whether it consumes what it reads (frees the packets for a
    /// discard-mode owner): all but a peeking reader ([`Recorder::attach_peek`]).
    consumes: bool,
    header: &'static ProcessHeader,
    template: String,
    streams: Vec<Stream>,
    progress: Progress,
    /// The owner's largest last timestamp seen.
    last_ts: Option<u64>,
    /// A ring of the last turn whose copy claim another process held past
    /// [`tape_rings::CLAIM_PATIENCE`] (its index, the holder): left for
    /// the next turn.
    busy: Option<(usize, u64)>,
    /// Events taken from the rings and not written (a write failed: a
    /// full disk): the trace's `events_not_written`.
    not_written: u64,
    /// Bytes of the metadata file as written last (rewritten in place
    /// when a full disk refuses a new file).
    metadata_len: std::cell::Cell<u64>,
    /// The trace's losses stream (made at the first loss), and its bytes
    /// of whole packets.
    losses: Option<File>,
    losses_len: u64,
    /// Its last packet's time (its packets' are non-decreasing).
    losses_ts: u64,
    /// The clock the metadata states (freq, offset_s, offset), when the
    /// reader gives it ([`Recorder::set_clock`]).
    clock: Option<(u64, i64, i64)>,
    /// The trace's UUID, when the reader gives it ([`Recorder::set_uuid`]).
    uuid: Option<[u8; 16]>,
    /// The template file as last read (inode, length, modification time).
    template_stamp: Option<(u64, u64, Option<std::time::SystemTime>)>,
    /// Buffers to copy packets into, given back after use ([`Spare`]).
    spare: Spare,
    /// The largest share of a ring's room that the last turn took.
    fill: f64,
}

/// How long a reader that follows rings rests before its next turn, its
/// last turn having taken `fill` ([`Recorder::fill`], the largest over
/// its recorders) `since` the turn before began, after resting `rested`
/// (the turn itself took the rest of `since`): long enough that a turn
/// takes several packets at once (each turn costs a directory read and a
/// look at every ring: at 1 ms a turn, that was most of `tape record`'s
/// CPU at 1 M events/s), short enough that, at the rate just seen, no
/// ring is more than a quarter full when the next turn reads it; from
/// [`REST_MIN`] to [`REST_MAX`], doubling while nothing comes.
///
/// The next turn reads a ring a rest *and a turn* after this one did, so
/// the turn's own time comes off the rest: a relay's turn, which waits on
/// the relay daemon, takes 10-40 ms at 10 M events/s, and a rest of a
/// quarter's time on top of it had its rings half to nine tenths full
/// when read, and losing at the first hiccup (`scripts/record-rate.sh`,
/// issue 48).
pub fn rest(
    fill: f64,
    since: std::time::Duration,
    rested: std::time::Duration,
) -> std::time::Duration {
    if fill <= 0.0 {
        return (rested * 2).clamp(REST_MIN, REST_MAX);
    }
    let turn = since.saturating_sub(rested);
    since
        .mul_f64((0.25 / fill).min(1e3))
        .saturating_sub(turn)
        .clamp(REST_MIN, REST_MAX)
}

/// The shortest rest between a reader's turns ([`rest`]).
pub const REST_MIN: std::time::Duration = std::time::Duration::from_millis(1);

/// The longest ([`rest`]): what a ring written at once after a silence
/// must hold.
pub const REST_MAX: std::time::Duration = std::time::Duration::from_millis(20);

/// What a walk of a ring left to its end ([`Recorder::end_walk`]): where
/// it stopped, whether the packets were written in place, and its tally.
struct Walked {
    taken: Result<(u64, usize), tape_rings::StreamStop>,
    in_place: bool,
    tally: Tally,
}

/// What a walk took, wrote and could not write, so far: the last write
/// (the stream file's length before it, its events and bytes: taken back
/// if the ring's file was cut under an in-place write, the packet may be
/// zeros), the events taken and not written, a write's failure, and the
/// bytes and events taken.
#[derive(Default)]
struct Tally {
    last_write: (u64, u64, u64),
    not_written: u64,
    failed: Option<Error>,
    bytes: u64,
    events: u64,
}

/// One walk of a stream's ring ([`Recorder::take`]), a packet at a time:
/// copied and handed to a live reader ([`Walk::chunk`]), or written to
/// the stream file from the ring itself, pinned ([`Walk::in_place`]).
struct Walk<'w, 'c> {
    stream: usize,
    ctx: Context<'c>,
    /// The packet header and context's bytes.
    room: usize,
    /// The ring's creation time, and its events written in all.
    created: u64,
    written: u64,
    spare: &'w std::cell::RefCell<&'w mut Spare>,
    taken: &'w mut Taken,
    tally: Tally,
}

impl Walk<'_, '_> {
    /// A copied packet (its events after `room` bytes left for the
    /// header), its events up to `end` (`None`: an open packet's), to the
    /// live reader's `sink`.
    fn chunk(
        &mut self,
        sink: &mut ChunkSink<'_>,
        m: &PacketMeta,
        offset: usize,
        packet: Vec<u8>,
        end: Option<u64>,
    ) {
        match self.begin(m, end) {
            Some(d) => self.hand_on(sink, m, offset, packet, end, d),
            None => self.spare.borrow_mut().give_back(packet),
        }
    }

    /// A packet's events `b`, in the ring, up to `end`, to the stream
    /// file: whether they were written.
    fn in_place(&mut self, m: &PacketMeta, b: &[u8], end: Option<u64>) -> bool {
        match self.begin(m, end) {
            Some(d) => self.write(m, b, end, d),
            None => false,
        }
    }

    /// A packet's start: after a failed write, its events are counted as
    /// taken and not written (`None`); else the stream's losses as of it.
    fn begin(&mut self, m: &PacketMeta, end: Option<u64>) -> Option<Drops> {
        self.tally.last_write = (0, 0, 0);
        if self.tally.failed.is_some() {
            let end = end.unwrap_or_else(|| self.written.max(m.committed_before));
            self.tally.not_written += end.saturating_sub(m.committed_before);
            return None;
        }
        Some(self.count_overwritten(m))
    }

    /// Events between the last packet taken and `m` were overwritten
    /// before the reader could take them: counted; the stream's losses as
    /// of `m`.
    fn count_overwritten(&mut self, m: &PacketMeta) -> Drops {
        let position = self.taken.position.get_or_insert(m.committed_before);
        self.taken.overwritten += m.committed_before.saturating_sub(*position);
        self.taken.maybe_printed += self
            .taken
            .doubt_until
            .min(m.committed_before)
            .saturating_sub(*position);
        *position = (*position).max(m.committed_before);
        Drops {
            overwritten: self.taken.overwritten,
            ..m.dropped_at_close
        }
    }

    /// The packet as a [`Chunk`] to a live reader's `sink`, its context
    /// stating no losses (`d` travels beside it).
    fn hand_on(
        &mut self,
        sink: &mut ChunkSink<'_>,
        m: &PacketMeta,
        offset: usize,
        mut packet: Vec<u8>,
        end: Option<u64>,
        d: Drops,
    ) {
        let room = self.room;
        let content_len = packet.len() - room;
        let position = self.taken.position.get_or_insert(m.committed_before);
        let before = *position;
        let mut whole = *m;
        whole.events = content_len;
        self.ctx
            .packet_header(&mut packet[..room], &whole, Drops::default());
        self.tally.bytes += content_len as u64;
        let n = end.map(|after| after.saturating_sub(before));
        match end {
            Some(after) => *position = after.max(before),
            None => self.taken.uncounted = true,
        }
        self.tally.events += n.unwrap_or(0);
        sink(Chunk {
            stream: self.stream,
            packet,
            offset,
            before,
            events: n,
            lost: d,
            maybe_printed: self.taken.maybe_printed,
            end: if end.is_some() {
                (m.seq + 1, 0)
            } else {
                (m.seq, offset + content_len)
            },
            closed: end.is_some(),
            ts_begin: m.ts_begin,
            ts_end: m.ts_end,
        });
    }

    /// The packet's events `b` written to the stream file after its
    /// header, its context stating the losses `d`: whole or not at all (a
    /// write that fails, a full disk, is cut back to the last whole
    /// packet, so that the trace stays readable, and its events counted).
    fn write(&mut self, m: &PacketMeta, b: &[u8], end: Option<u64>, d: Drops) -> bool {
        let end = end.unwrap_or_else(|| self.written.max(m.committed_before));
        if !self.taken.started {
            self.taken.started = true;
            if d.total() > 0 {
                // An empty packet without losses first, so that readers
                // report the first packet's (as a save writes it).
                self.ctx
                    .leading_header(&mut self.taken.head, self.created.min(m.ts_begin), m);
                match self.taken.append(&[]) {
                    Ok(n) => self.tally.bytes += n,
                    Err(e) => {
                        // The packet is not written either: counted.
                        self.tally.not_written += end.saturating_sub(m.committed_before);
                        self.tally.failed = Some(e);
                        return false;
                    }
                }
            }
        }
        // (A recording reads whole packets: the content is all of them.)
        let mut whole = *m;
        whole.events = b.len();
        let before = (self.taken.len, self.tally.bytes);
        self.ctx.packet_header(&mut self.taken.head, &whole, d);
        match self.taken.append(b) {
            Ok(n) => self.tally.bytes += n,
            Err(e) => {
                self.tally.not_written += end.saturating_sub(m.committed_before);
                self.tally.failed = Some(e);
                return false;
            }
        }
        // (Not those of a packet an earlier reader began.)
        let position = self.taken.position.get_or_insert(m.committed_before);
        let taken = end.saturating_sub(*position);
        self.tally.last_write = (before.0, taken, self.tally.bytes - before.1);
        self.tally.events += taken;
        *position = end;
        self.taken.last_end = self.taken.last_end.max(m.ts_end);
        self.taken.lost = d;
        true
    }
}

impl Taken {
    /// The packet header (`head`) then `body` appended to the stream
    /// file: all of it, or the file is cut back to its whole packets
    /// (`len`).
    fn append(&mut self, body: &[u8]) -> Result<u64, Error> {
        match write_parts(&mut self.file, &self.path, &[&self.head, body]) {
            Ok(n) => {
                self.len += n;
                Ok(n)
            }
            Err(e) => {
                if let Some(f) = self.file.as_mut() {
                    let _ = f.set_len(self.len);
                    let _ = std::io::Seek::seek(f, std::io::SeekFrom::Start(self.len));
                }
                Err(e)
            }
        }
    }
}

/// The packet buffers a recorder copies the rings into, kept once used
/// (written out, or given back by a reader, [`Recorder::recycle`]): at
/// hundreds of MB/s a buffer freed and another allocated at each turn
/// costs more in page faults than the copy itself (measured with
/// `scripts/record-rate.sh` and `perf`: a third of the relay's CPU at
/// 1 M events/s). At most [`Spare::MAX_BYTES`] are kept.
#[derive(Default)]
struct Spare {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl Spare {
    /// What the spare buffers may hold in all.
    const MAX_BYTES: usize = 64 << 20;

    /// A buffer for `len` bytes after `room` bytes of zeros (a header's),
    /// of a ring whose packets hold up to `packet` bytes: a kept one that
    /// is large enough, else a new one sized for a whole packet (so that
    /// it serves any packet later: one grown at each use would fault its
    /// pages in afresh).
    fn take(&mut self, room: usize, len: usize, packet: usize) -> Vec<u8> {
        let need = room + len;
        let mut v = match self.buffers.iter().rposition(|v| v.capacity() >= need) {
            Some(i) => {
                let v = self.buffers.swap_remove(i);
                self.bytes -= v.capacity();
                v
            }
            None => Vec::with_capacity(room + len.max(packet)),
        };
        v.clear();
        v.resize(room, 0);
        v
    }

    /// Keeps `v` for a later packet, if there is room.
    fn give_back(&mut self, v: Vec<u8>) {
        if v.capacity() > 0 && self.bytes + v.capacity() <= Self::MAX_BYTES {
            self.bytes += v.capacity();
            self.buffers.push(v);
        }
    }
}

/// What tells that the template file at `path` was replaced.
fn stamp(path: &Path) -> Option<(u64, u64, Option<std::time::SystemTime>)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()))
}

/// The process file of a running process, mapped shared (the recorder
/// writes its `reader` word there): leaked, one per recording.
fn map_process(dir: &Path) -> Result<&'static ProcessHeader, String> {
    let path = dir.join(shm::PROCESS_FILE);
    let m = shm::Mapping::open_file(&path, true).map_err(|e| e.to_string())?;
    // SAFETY: the mapping holds at least a page (`open_file`).
    let bytes = unsafe { std::slice::from_raw_parts(m.as_ptr(), m.len()) };
    ProcessHeader::read(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let p = m.as_ptr().cast::<ProcessHeader>();
    std::mem::forget(m);
    // SAFETY: checked above to hold a header of this layout; page-aligned;
    // never unmapped (leaked); read through atomics and integers only.
    Ok(unsafe { &*p })
}

impl Recorder {
    /// Starts recording the running process whose rings are in `dir` into
    /// the new trace directory `out`.
    pub fn attach(dir: &Path, out: &Path) -> Result<Recorder, Error> {
        Recorder::attach_to(dir, Some(out))
    }

    /// Starts reading the running process whose rings are in `dir` live
    /// ([`Recorder::poll_chunks`]: `tape pipe`), as its one reader.
    pub fn attach_live(dir: &Path) -> Result<Recorder, Error> {
        Recorder::attach_to(dir, None)
    }

    /// As [`Recorder::attach_live`], for a reader that only peeks (`tape
    /// pipe --events`, which prints some events only): it starts at the
    /// last consuming reader's mark and frees nothing, so the next reader
    /// finds every event it left (in discard mode the rings fill and drop,
    /// counted, as with no reader); its caller sets no mark.
    pub fn attach_peek(dir: &Path) -> Result<Recorder, Error> {
        let mut r = Recorder::attach_to(dir, None)?;
        r.consumes = false;
        Ok(r)
    }

    fn attach_to(dir: &Path, out: Option<&Path>) -> Result<Recorder, Error> {
        let copy = tape_rings::dirs::read_header(dir).map_err(|e| {
            error(format!(
                "{} is not a directory of shared rings: {e}",
                dir.display()
            ))
        })?;
        if !tape_rings::dirs::alive(&copy) {
            return Err(error(format!(
                "process {} ({}) is not running: `tape recover {}` rebuilds its trace",
                copy.pid,
                copy.program(),
                dir.display()
            )));
        }
        let header = map_process(dir).map_err(error)?;
        let me = std::process::id();
        loop {
            match header
                .reader
                .compare_exchange(0, me, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(other) if other != me && tape_rings::process_exists(other) => {
                    return Err(error(format!(
                        "process {} is already read by tape record or tape pipe (pid \
                         {other}): one reader per process",
                        copy.pid
                    )))
                }
                Err(other) => {
                    let _ = header.reader.compare_exchange(
                        other,
                        0,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    );
                }
            }
        }
        let template_path = dir.join(shm::METADATA_FILE);
        // Taken before the text: a change in between is seen next time.
        let template_stamp = stamp(&template_path);
        let template = recover::read_template(&template_path);
        let made = template.and_then(|t| {
            if let Some(out) = out {
                std::fs::create_dir(out)
                    .map_err(|e| error(format!("cannot create {}: {e}", out.display())))?;
            }
            Ok(t)
        });
        let template = match made {
            Ok(t) => t,
            Err(e) => {
                header.reader.store(0, Ordering::Release);
                return Err(e);
            }
        };
        let r = Recorder {
            dir: dir.to_path_buf(),
            out: out.map(Path::to_path_buf),
            consumes: true,
            header,
            template,
            streams: Vec::new(),
            progress: Progress::default(),
            last_ts: None,
            busy: None,
            not_written: 0,
            losses: None,
            losses_len: 0,
            losses_ts: 0,
            metadata_len: std::cell::Cell::new(0),
            clock: None,
            uuid: None,
            template_stamp,
            spare: Spare::default(),
            fill: 0.0,
        };
        r.write_metadata()?;
        Ok(r)
    }

    /// The directory of the process's rings.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process being recorded.
    pub fn pid(&self) -> u32 {
        self.header.pid
    }

    /// The process's program name (as `tape ps` shows it).
    pub fn program(&self) -> String {
        self.header.program()
    }

    /// The trace's UUID (its metadata's and its packets').
    pub fn uuid(&self) -> [u8; 16] {
        self.uuid.unwrap_or(self.header.uuid)
    }

    /// Gives the trace another UUID from now on: the metadata
    /// ([`Recorder::metadata`]) and every packet header made after
    /// state it. A forwarding reader that starts the trace again
    /// elsewhere (the relay, after an outage) does so, so that readers
    /// of both copies take them for two traces, not one with its
    /// packets twice.
    pub fn set_uuid(&mut self, uuid: [u8; 16]) {
        self.uuid = Some(uuid);
        for s in &mut self.streams {
            s.uuid = uuid;
        }
    }

    /// The process's clock (its counter: TSC, CNTVCT or monotonic ns, as
    /// its events' timestamps count) read now in this process; `None` if
    /// this machine cannot read it (a counter this CPU lacks).
    pub fn clock_now(&self) -> Option<u64> {
        crate::kernel::counter_now(self.header.clock_source)
    }

    /// How long until the process's clock can be calibrated to
    /// [`tape_rings::MIN_CALIBRATION`] (its anchor is that old): a
    /// reader that sends the metadata once (the relay) waits for it.
    pub fn calibration_wait(&self) -> std::time::Duration {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to write; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let now_ns = now.tv_sec as i128 * 1_000_000_000 + now.tv_nsec as i128;
        let age = now_ns - i128::from(self.header.anchor_mono_ns as i64);
        let min = tape_rings::MIN_CALIBRATION.as_nanos() as i128;
        std::time::Duration::from_nanos((min - age).clamp(0, min) as u64)
    }

    /// The process's clock source (`clock_source` of its process file:
    /// processes with the same one count the same counter).
    pub fn clock_source(&self) -> u32 {
        self.header.clock_source
    }

    /// The process's clock as calibrated now (freq, offset_s, offset: the
    /// CTF clock's), over the span since the process's start.
    pub fn clock_params(&self) -> (u64, i64, i64) {
        let (f, s, o, _) = recover::clock_of(self.header);
        (f, s, o)
    }

    /// The clock the metadata states from now on, instead of the
    /// process's own calibration: a reader of several processes of one
    /// clock source gives them all the same, so that their times compare
    /// exactly (a live viewer requires them in order across traces).
    pub fn set_clock(&mut self, clock: (u64, i64, i64)) {
        self.clock = Some(clock);
    }

    /// Reads the process's metadata template again if the process
    /// rewrote it (a tracepoint registered, or described at its first
    /// event, at run time): whether its text changed. [`Recorder::metadata`]
    /// gives the new one. An events' class is in the template before its
    /// first event is written, so a reader that calls this after taking
    /// events can describe them all.
    pub fn refresh_template(&mut self) -> bool {
        self.read_template_again(false)
    }

    /// [`Recorder::refresh_template`], the file read even if it looks
    /// unchanged (its inode, length and time can repeat): for a reader
    /// that met an event its description does not have.
    pub fn reread_template(&mut self) -> bool {
        self.read_template_again(true)
    }

    fn read_template_again(&mut self, always: bool) -> bool {
        let path = self.dir.join(shm::METADATA_FILE);
        let now = stamp(&path);
        // A file replaced within the filesystem's coarse clock tick can
        // have the inode (reused), length and time of the one before: one
        // written in the last second is read whatever its stamp says.
        let recent = now.and_then(|s| s.2).is_none_or(|t| {
            t.elapsed()
                .map_or(true, |d| d < std::time::Duration::from_secs(1))
        });
        if now.is_none() || (now == self.template_stamp && !always && !recent) {
            return false;
        }
        let Ok(text) = recover::read_template(&path) else {
            return false;
        };
        self.template_stamp = now;
        let changed = text != self.template;
        self.template = text;
        changed
    }

    /// Looks for rings made since the last turn (they are read from the
    /// next turn on): a reader that must know every ring before it
    /// forwards what it read (the relay) calls it after reading.
    pub fn find_new_rings(&mut self) {
        self.find_rings();
    }

    /// Rings found so far (streams `0..n`, in the order found).
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// When ring `i` was made (the trace's clock): no event of it is
    /// older.
    pub fn stream_created(&self, i: usize) -> u64 {
        self.streams[i].ring.created_ts
    }

    /// Bytes of the header and context of ring `i`'s packets (a
    /// [`Chunk::packet`]'s events start there).
    pub fn packet_head_size(&self, i: usize) -> usize {
        self.context(i).head_size()
    }

    /// The packet context writer of ring `i`'s stream.
    fn context(&self, i: usize) -> Context<'_> {
        let s = &self.streams[i];
        Context {
            uuid: &s.uuid,
            tid: s.ring.tid(),
            name: tape_rings::truncate_utf8(&s.ring.name, 255),
        }
    }

    /// Writes into `head` ([`Recorder::packet_head_size`] bytes) the
    /// header and context of a packet of ring `i` that a forwarding reader
    /// makes: `events` bytes of events between `begin` and `end` (the
    /// trace's clock), its `packet_seq_num` `seq`, `discarded` events lost
    /// in the stream so far.
    pub fn packet_head(&self, i: usize, head: &mut [u8], p: &PacketTimes) {
        self.context(i)
            .forwarded_header(head, p.begin, p.end, p.seq, p.discarded, p.events);
    }

    /// What was recorded so far.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Rings the process made in private memory (past `TAPE_SHM_MAX`, or
    /// no room) so far: their threads' events cannot be recorded.
    pub fn unshared_rings(&self) -> u32 {
        self.header
            .unshared_rings
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the process's rings are still there: after it is gone, it
    /// died without exiting (killed, crashed); a process that exits
    /// removes them (and leaves its description and process file to a
    /// reader that follows it).
    pub fn rings_left(&self) -> bool {
        shm::ring_files(&self.dir).is_ok_and(|rings| !rings.is_empty())
    }

    /// Whether the process still runs.
    pub fn process_alive(&self) -> bool {
        tape_rings::dirs::alive(self.header)
    }

    /// Takes the packets closed since the last turn (the open ones too
    /// with `to_end`), from every ring, new ones included (how much of a
    /// ring it took: [`Recorder::fill`]).
    pub fn poll(&mut self, to_end: bool) -> Result<(), Error> {
        self.turn(to_end, false, None)
    }

    /// A live reader's turn: the events published since the last turn in
    /// every ring (new ones included), each ring's as chunks; the open
    /// packets are read up to their last event. The events of an open
    /// packet's chunk ([`Chunk::events`] `None`) are told with
    /// [`Recorder::took`] before the next turn.
    pub fn poll_chunks(&mut self) -> Result<Vec<Chunk>, Error> {
        self.poll_chunks_open(true)
    }

    /// As [`Recorder::poll_chunks`], the open packets read only when
    /// `open` (or when their ring is done): a reader that forwards whole
    /// packets (the relay) takes the closed ones at every turn and the
    /// open ones' events on its timer.
    pub fn poll_chunks_open(&mut self, open: bool) -> Result<Vec<Chunk>, Error> {
        if let Some(s) = self.streams.iter().position(|s| s.taken.uncounted) {
            return Err(error(format!(
                "the reader did not count the events of ring {}'s last chunk                  (Recorder::took): its losses would be miscounted",
                self.stream_name(s)
            )));
        }
        let mut chunks = Vec::new();
        self.turn(false, open, Some(&mut |c| chunks.push(c)))?;
        Ok(chunks)
    }

    /// The largest share of a ring's room (0: nothing; 1: a whole ring)
    /// that the last turn took.
    pub fn fill(&self) -> f64 {
        self.fill
    }

    /// Gives back the buffer of a chunk the reader is done with, for the
    /// packets of later turns (no memory faulted in afresh: `Spare`).
    pub fn recycle(&mut self, packet: Vec<u8>) {
        self.spare.give_back(packet);
    }

    /// The reader decoded a chunk of an open packet of ring `stream` and
    /// found `events` events: the ring's events taken so far grow by them
    /// (what the next packet's losses are counted from).
    pub fn took(&mut self, stream: usize, events: u64) {
        if let Some(s) = self.streams.get_mut(stream) {
            if let Some(p) = s.taken.position.as_mut() {
                *p += events;
            }
            s.taken.uncounted = false;
            self.progress.events += events;
        }
    }

    fn turn<'s>(
        &mut self,
        to_end: bool,
        sink_open: bool,
        mut sink: Option<&mut ChunkSink<'s>>,
    ) -> Result<(), Error> {
        self.find_rings();
        self.busy = None;
        self.fill = 0.0;
        for i in 0..self.streams.len() {
            if self.streams[i].done {
                continue;
            }
            // A ring whose file is gone was freed by its process: its
            // thread exited, nothing more will come; read it to its end.
            let gone = std::fs::symlink_metadata(&self.streams[i].source).is_err();
            let open = to_end || gone || (sink.is_some() && sink_open);
            if let Some(holder) = self.take(i, open, sink.as_deref_mut())? {
                self.busy = Some((i, holder));
                continue;
            }
            if to_end || gone {
                self.streams[i].done = true;
            }
        }
        Ok(())
    }

    /// Ring files not yet recorded.
    fn find_rings(&mut self) {
        let Ok(all) = shm::ring_files(&self.dir) else {
            return;
        };
        let new: Vec<PathBuf> = all
            .into_iter()
            .filter(|p| !self.streams.iter().any(|s| &s.source == p))
            .collect();
        for p in new {
            // A ring being made (header not yet written) is taken later.
            let Ok(ring) = Ring::open_live(&p) else {
                continue;
            };
            // Where the last consuming reader stopped: this one starts
            // there (its events are not taken twice, nor counted lost).
            let mark = ring.reader_mark();
            let doubt = ring.reader_doubt();
            let base = format!("{}-{}", tape_rings::sanitize(&ring.name), ring.tid());
            let out = self.out.clone().unwrap_or_default();
            let mut path = out.join(&base);
            let mut n = 2;
            while path.exists() || self.streams.iter().any(|s| s.taken.path == path) {
                path = out.join(format!("{base}-{n}"));
                n += 1;
            }
            self.streams.push(Stream {
                source: p,
                ring,
                next: mark.map_or((0, 0), |m| m.0),
                taken: Taken {
                    path,
                    file: None,
                    // A recording counts what the ring lost before it (as
                    // a save does); a live reader begins at its first chunk.
                    position: mark.map(|m| m.1).or(self.out.is_some().then_some(0)),
                    overwritten: 0,
                    doubt_until: mark.map_or(0, |m| m.1).saturating_add(doubt),
                    maybe_printed: 0,
                    uncounted: false,
                    lost: Drops::default(),
                    started: false,
                    last_end: 0,
                    len: 0,
                    head: Vec::new(),
                },
                done: false,
                lost_said: Drops::default(),
                uuid: self.uuid(),
            });
            self.progress.streams = self.streams.len();
        }
    }

    /// A live reader consumed ring `stream`'s events up to `cursor` (a
    /// [`Chunk::end`]), `events` of the ring in all: the next consuming
    /// reader starts there.
    pub fn set_mark(&self, stream: usize, cursor: (u64, usize), events: u64) {
        if let Some(s) = self.streams.get(stream) {
            s.ring.set_reader_mark(cursor, events);
        }
    }

    /// Where the last consuming reader of ring `stream` stopped, if one
    /// did (its mark: the cursor, and the ring's events before it).
    pub fn mark(&self, stream: usize) -> Option<((u64, usize), u64)> {
        self.streams.get(stream)?.ring.reader_mark()
    }

    /// A live reader is about to write out the next `events` events of
    /// ring `stream` past its mark: if it dies before the next
    /// [`Recorder::set_mark`], the next reader knows they may have been
    /// printed.
    pub fn set_doubt(&self, stream: usize, events: u64) {
        if let Some(s) = self.streams.get(stream) {
            s.ring.set_reader_doubt(events);
        }
    }

    /// The stream name of ring `i` (`<thread>-<tid>`).
    pub fn stream_name(&self, i: usize) -> String {
        self.streams[i]
            .taken
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The trace's metadata text, its clock calibrated now.
    pub fn metadata(&self) -> Result<String, Error> {
        self.metadata_text().map(|m| m.text)
    }

    /// Writes the new packets of stream `i` (to its file, or to `sink`);
    /// `Some(pid)` when the ring's copy claim was held by that process
    /// past [`tape_rings::CLAIM_PATIENCE`] (nothing taken).
    fn take<'s>(
        &mut self,
        i: usize,
        to_end: bool,
        sink: Option<&mut ChunkSink<'s>>,
    ) -> Result<Option<u64>, Error> {
        let consumes = self.consumes;
        let spare = std::cell::RefCell::new(&mut self.spare);
        let s = &mut self.streams[i];
        let name = tape_rings::truncate_utf8(&s.ring.name, 255).to_owned();
        let ctx = Context {
            uuid: &s.uuid,
            tid: s.ring.tid(),
            name: &name,
        };
        let room = ctx.head_size();
        let capacity = s.ring.packet_capacity();
        s.taken.head.resize(room, 0);
        let Stream {
            ring, next, taken, ..
        } = s;
        let mut walk = Walk {
            stream: i,
            ctx,
            room,
            created: ring.created_ts,
            // The open packet's events: as many as the ring says were
            // written after the packet began (read once the owner is done
            // or stopped).
            written: ring.written(),
            spare: &spare,
            taken,
            tally: Tally::default(),
        };
        let until = std::time::Instant::now() + tape_rings::CLAIM_PATIENCE;
        let in_place = sink.is_none();
        let taken = match sink {
            Some(sink) => ring.stream_packets(
                *next,
                to_end,
                consumes,
                until,
                |len| spare.borrow_mut().take(room, len, capacity),
                |m, offset, packet, end| walk.chunk(sink, m, offset, packet, end),
            ),
            None => ring.write_packets(*next, to_end, consumes, until, |m, _, b, end| {
                walk.in_place(m, b, end)
            }),
        };
        let tally = walk.tally;
        self.end_walk(
            i,
            Walked {
                taken,
                in_place,
                tally,
            },
        )
    }

    /// The end of stream `i`'s walk (`w`): a packet written in place just
    /// before its ring's file was cut taken back (it may be zeros), what
    /// was taken added up, the reader's place and mark moved, the losses
    /// said.
    fn end_walk(&mut self, i: usize, w: Walked) -> Result<Option<u64>, Error> {
        let Walked {
            taken,
            in_place,
            tally:
                Tally {
                    last_write,
                    not_written,
                    failed,
                    mut bytes,
                    mut events,
                },
        } = w;
        if in_place && matches!(taken, Err(tape_rings::StreamStop::Cut)) && last_write.2 > 0 {
            // The packet written last, in place, may be zeros: taken back.
            let s = &mut self.streams[i];
            if let Some(f) = s.taken.file.as_mut() {
                let _ = f.set_len(last_write.0);
                let _ = std::io::Seek::seek(f, std::io::SeekFrom::Start(last_write.0));
            }
            s.taken.len = last_write.0;
            events -= last_write.1;
            bytes -= last_write.2;
        }
        self.not_written += not_written;
        if let Some(e) = failed {
            return Err(e);
        }
        self.progress.bytes += bytes;
        self.progress.events += events;
        let room = self.streams[i].ring.capacity().max(1);
        self.fill = self.fill.max(bytes as f64 / room as f64);
        let recording = self.out.is_some();
        let s = &mut self.streams[i];
        match taken {
            Ok(cursor) => {
                s.next = cursor;
                // A recording consumed what it wrote; a live reader says
                // what it printed ([`Recorder::set_mark`]).
                if recording {
                    s.ring
                        .set_reader_mark(cursor, s.taken.position.unwrap_or(0));
                }
            }
            // Another copier (the program's own save) held the ring: the
            // next turn takes it.
            Err(tape_rings::StreamStop::Busy(holder)) => return Ok(Some(holder)),
            // Its file was cut under the reader (said on stderr): the
            // stream ends at the last packet written before.
            Err(tape_rings::StreamStop::Cut) => {
                s.done = true;
                return Ok(None);
            }
        }
        if s.ring.written() > 0 {
            let lt = s.ring.last_ts();
            self.last_ts = Some(self.last_ts.map_or(lt, |t| t.max(lt)));
        }
        if recording {
            self.say_losses(i)?;
        }
        Ok(None)
    }

    /// Appends to the trace's losses stream the losses of stream `i`, if
    /// they grew since it last said them (whole packets only: a write cut
    /// short, a full disk, is cut back, and the error returned).
    fn say_losses(&mut self, i: usize) -> Result<(), Error> {
        let Some(out) = self.out.clone() else {
            return Ok(());
        };
        let s = &self.streams[i];
        if s.taken.lost == s.lost_said || s.taken.lost.total() == 0 {
            return Ok(());
        }
        let name = s
            .taken
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ts = self.losses_ts.max(s.taken.last_end);
        let mut packet = vec![0u8; tape_rings::losses_packet_size(&name)];
        tape_rings::losses_packet(&mut packet, &s.uuid, ts, &name, s.taken.lost);
        let path = out.join(tape_ctf_model::LOSSES_STREAM);
        match write_parts(&mut self.losses, &path, &[&packet]) {
            Ok(n) => {
                self.losses_len += n;
                self.losses_ts = ts;
                self.streams[i].lost_said = self.streams[i].taken.lost;
                Ok(())
            }
            Err(e) => {
                if let Some(f) = self.losses.as_mut() {
                    let _ = f.set_len(self.losses_len);
                    let _ = std::io::Seek::seek(f, std::io::SeekFrom::Start(self.losses_len));
                }
                Err(e)
            }
        }
    }

    /// Writes (or rewrites) the trace's metadata, its clock calibrated
    /// now: a new file renamed into place, or, when that cannot be made
    /// (a full disk), the old file overwritten in place, its size kept
    /// (the text is written with room to spare: [`METADATA_SLACK`]).
    fn write_metadata(&self) -> Result<(), Error> {
        let Some(out) = &self.out else {
            return Ok(());
        };
        let m = self.metadata_text()?;
        let path = out.join("metadata");
        let old = self.metadata_len.get();
        let size = old.max(m.text.len() as u64 + METADATA_SLACK);
        let text = padded(&m.text, size);
        let tmp = out.join(".metadata.tmp");
        let renamed = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &path));
        match renamed {
            Ok(()) => {
                self.metadata_len.set(size);
                Ok(())
            }
            Err(e) if old > 0 && (m.text.len() as u64) + 8 <= old => {
                let _ = std::fs::remove_file(&tmp);
                use std::io::Write as _;
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(&padded(&m.text, old)))
                    .map_err(|e2| error(format!("writing {}: {e}; in place: {e2}", path.display())))
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(error(format!("writing {}: {e}", path.display())))
            }
        }
    }

    /// After a failed turn (`poll`'s error: a full disk): the metadata
    /// rewritten in place with the count of events taken and not
    /// written (`events_not_written`), the process released; the error
    /// said with that count.
    pub fn end_after_error(self, e: Error) -> Error {
        let meta = self.write_metadata();
        self.release();
        let counted = match meta {
            Ok(()) => "counted in its metadata as events_not_written".to_owned(),
            Err(m) => format!("not counted in the trace: {m}"),
        };
        tape_rings::error(
            e.kind(),
            format!(
                "{}; the trace ends at each stream's last whole packet; {} event(s) taken from \
                 the rings and not written ({counted})",
                e.message(),
                self.not_written
            ),
        )
    }

    fn metadata_text(&self) -> Result<recover::Metadata, Error> {
        let source = format!(
            "recorded live from process {} ({}) by tape {}",
            self.header.pid,
            self.header.program(),
            env!("CARGO_PKG_VERSION")
        );
        let mut m = recover::fill_metadata_with(
            self.header,
            self.clock,
            &self.template,
            &source,
            self.last_ts,
            0,
            self.not_written,
        )
        .map_err(|hole| {
            error(format!(
                "the metadata template has a hole {hole:?} a recording cannot fill"
            ))
        })?;
        if let Some(uuid) = self.uuid {
            // The process's UUID is written in the template once, in the
            // trace block.
            let old = format!(
                "uuid = \"{}\"",
                tape_ctf_model::uuid_string(&self.header.uuid)
            );
            let new = format!("uuid = \"{}\"", tape_ctf_model::uuid_string(&uuid));
            m.text = m.text.replacen(&old, &new, 1);
        }
        Ok(m)
    }

    /// Ends the recording: every ring read to its end (the open packets up
    /// to their last published event), the metadata rewritten, the
    /// process released.
    pub fn finish(mut self) -> Result<Progress, Error> {
        // A ring held by another copier (the program's save) is tried
        // again, a few turns; one still held is an error naming it.
        let mut r = self.poll(true);
        for _ in 0..3 {
            if r.is_err() || self.busy.is_none() {
                break;
            }
            r = self.poll(true);
        }
        if let Err(e) = r {
            // A write failed (a full disk): the streams end at their last
            // whole packet; the metadata says what was not written.
            return Err(self.end_after_error(e));
        }
        if let (Ok(_), Some((i, holder))) = (&r, self.busy) {
            r = Err(error(format!(
                "the ring of {} stayed held by process {holder} (its copy claim) for {} s: \
                 its last events are not in the recording",
                self.stream_name(i),
                4 * tape_rings::CLAIM_PATIENCE.as_secs()
            )));
        }
        let r = r.and_then(|_| self.write_metadata());
        self.release();
        r?;
        let mut lost = Drops::default();
        for s in &self.streams {
            lost += s.taken.lost;
        }
        self.progress.lost = lost;
        Ok(self.progress.clone())
    }
}

impl Recorder {
    /// Stops being the process's reader. If it was, and the process has
    /// ended and its rings are gone, removes what its exit left for this
    /// reader (the description and the process file: `shm`'s
    /// `remove_at_exit`). A crashed process's rings stay, for `tape
    /// recover`.
    fn release(&self) {
        let me = std::process::id();
        if self
            .header
            .reader
            .compare_exchange(me, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let ended = !tape_rings::dirs::alive(self.header)
            && shm::ring_files(&self.dir).is_ok_and(|rings| rings.is_empty());
        if ended {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.release();
    }
}

/// Bytes of room left in the metadata file beyond its text (a comment of
/// spaces), so that a rewrite in place fits.
const METADATA_SLACK: u64 = 4096;

/// `text` then a comment of spaces up to `size` bytes in all (at least
/// the comment's marks).
fn padded(text: &str, size: u64) -> Vec<u8> {
    let mut v = text.as_bytes().to_vec();
    let room = (size as usize).saturating_sub(v.len());
    if room >= 5 {
        v.extend_from_slice(b"\n/*");
        v.resize(v.len() + room - 5, b' ');
        v.extend_from_slice(b"*/");
    }
    v
}

/// Writes `parts` at the end of the stream file at `path` (created at
/// its first write) with as few system calls as it takes; the bytes
/// written.
fn write_parts(file: &mut Option<File>, path: &Path, parts: &[&[u8]]) -> Result<u64, Error> {
    if file.is_none() {
        *file = Some(
            File::create(path)
                .map_err(|e| error(format!("cannot create {}: {e}", path.display())))?,
        );
    }
    let f = file.as_mut().expect("created above");
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut slices = &mut slices[..];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut left = total;
    while left > 0 {
        let n = f
            .write_vectored(slices)
            .map_err(|e| error(format!("writing {}: {e}", path.display())))?;
        if n == 0 {
            return Err(error(format!("writing {}: no room", path.display())));
        }
        left -= n;
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_turn_rests_so_that_no_ring_passes_a_quarter() {
        let ms = Duration::from_millis;
        // (fill of the last turn, since the turn before, rested, rest)
        let cases = [
            // Nothing came: the rest doubles, up to the longest.
            (0.0, ms(1), ms(1), ms(2)),
            (0.0, ms(20), ms(16), REST_MAX),
            // A sixteenth of a ring in 4 ms of rest: a quarter in 16 ms.
            (1.0 / 16.0, ms(4), ms(4), ms(16)),
            // A quarter in 20 ms already: 20 ms again.
            (0.25, ms(20), ms(20), ms(20)),
            // Half a ring in 10 ms: 5 ms.
            (0.5, ms(10), ms(10), ms(5)),
            // The turn's own time comes off: half a ring in a cycle of
            // 30 ms, 12 of them the turn: a quarter in 15 ms, 12 of which
            // the next turn takes.
            (0.5, ms(30), ms(18), ms(3)),
            // A turn that takes longer than the quarter's time: the
            // shortest rest.
            (0.8, ms(50), ms(15), REST_MIN),
            // Faster than the shortest rest allows: the shortest.
            (2.0, ms(1), ms(1), REST_MIN),
            // A trickle: the longest, never longer.
            (1e-9, ms(20), ms(20), REST_MAX),
        ];
        for (fill, since, rested, want) in cases {
            assert_eq!(
                rest(fill, since, rested),
                want,
                "fill {fill}, since {since:?}"
            );
        }
    }

    #[test]
    fn spare_buffers_come_back_with_room_and_stay_within_their_cap() {
        let mut spare = Spare::default();
        // A chunk of 100 bytes of a ring of 1000-byte packets: a buffer
        // for a whole packet.
        let mut v = spare.take(8, 100, 1000);
        assert_eq!(v, vec![0u8; 8], "the room is zeros, nothing else");
        assert!(v.capacity() >= 1008);
        v.extend_from_slice(&[7; 100]);
        let cap = v.capacity();
        spare.give_back(v);
        assert_eq!(spare.bytes, cap);
        // Used again for a whole packet: the same memory, cleared, its
        // room zeroed again.
        let again = spare.take(4, 1000, 1000);
        assert_eq!(again, vec![0u8; 4]);
        assert_eq!(again.capacity(), cap);
        assert_eq!(spare.bytes, 0);
        spare.give_back(again);
        // Too small for what is asked: kept, and a new one made.
        let bigger = spare.take(8, 5000, 1000);
        assert!(bigger.capacity() >= 5008);
        assert_eq!(spare.buffers.len(), 1);
        let _ = spare.take(8, 10, 1000);
        assert!(spare.buffers.is_empty());
        // Past the cap, a buffer is let go.
        let big = Vec::with_capacity(Spare::MAX_BYTES);
        spare.give_back(big);
        spare.give_back(Vec::with_capacity(1024));
        assert_eq!(spare.buffers.len(), 1);
        assert_eq!(spare.bytes, Spare::MAX_BYTES);
        // An empty one is not worth keeping.
        let mut fresh = Spare::default();
        fresh.give_back(Vec::new());
        assert!(fresh.buffers.is_empty());
    }
}
