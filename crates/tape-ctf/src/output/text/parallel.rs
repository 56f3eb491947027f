//! Streams decoded and rendered on worker threads, merged in time order on
//! the calling thread: how `tape show` uses every core.
//!
//! Each stream file is cut into *parts* at packet boundaries (a part is a
//! few packets; see [`StreamReader::split_off`]), and each part is decoded in
//! order by one thread at a time, in *chunks* of records. Several threads
//! decode parts of one stream at once, so that a stream that has the
//! trace to itself for a while (a thread that started first, or ran
//! alone) still keeps every core busy. A chunk holds the rendered text of
//! its events (all of a line but the part that depends on the merge: the
//! delta to the previous event shown, a placeholder until then) and, per
//! record, its merge key:
//!
//! ```text
//!   stream 0 file: │ part 0: packets │ part 1 │ part 2 │ part 3 (not cut yet) …
//!                       │ thread A       │ thread B
//!                       ▼                ▼
//!   chunks:   recs [ev t=5 ..12)      [ev t=40 ..)           calling thread
//!                  [lost 3 t=7]        ...          ─┐   picks the least key
//!                  [hidden t=9]                      ├─▶ of the streams' next
//!   stream 1 parts …                                ─┘   records (a loser
//!                                                        tree), writes the
//!                                                        delta over the
//!                                                        placeholder, queues
//!                                                        the line for writev
//! ```
//!
//! The order is the one [`StreamMerge`](crate::merge::StreamMerge) gives: the
//! least key first, ties to the lower stream index, and every record of a
//! stream in file order (the parts of a stream one after the other).
//! Events that are not shown stay in the merge as `hidden` records, so
//! that filters never change the order of the others (a stream whose times
//! go backwards merges differently without them). A payload that fails to
//! decode becomes a `failed` record at its place, and a header that fails
//! ends its part's last chunk: the error ends that stream where the
//! one-thread merge would meet it, and the other streams are merged to
//! their end before it is reported (a damaged flight recording shows every
//! intact event, then the error).
//!
//! Memory is bounded: per stream, at most [`AHEAD`] chunks wait to be
//! merged (and one more per thread under way) and [`PARTS_AHEAD`] parts
//! are open; a chunk holds at most [`CHUNK`] records and about
//! [`CHUNK_TEXT`] bytes of text.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::decode::plan::Discard;
use crate::decode::stream::Shown;
use crate::decode::stream::{Next, PacketBuf, StreamReader, DELTA_PLACEHOLDER};
use crate::decode::text::line::{delta_into, TextBuf};
use crate::decode::text::TimeText;
use crate::decode::DecodeError;
use crate::merge::tournament::{LoserTree, DONE};
use crate::output::text::write_event_rest;

/// Chunks waiting to be merged per stream, at most: beyond them, only the
/// part the merge reads is decoded further. With 8 chunks and 3 parts, the
/// threads of `tape show` on `tape-8M` (a stream alone for a million
/// events) waited 30–220 ms a run; with 12 and 4, 7–45 ms.
pub const AHEAD: usize = 12;

/// Parts of a stream open at once (decoded, or waiting to be merged),
/// counting the one the merge reads.
pub const PARTS_AHEAD: usize = 4;

/// Bytes per part at least: a few packets, a few chunks of events.
pub const PART_BYTES: u64 = 256 << 10;

/// Records per chunk at most.
pub const CHUNK: usize = 4096;

/// Text per chunk: no line is started past this many bytes. Chunks of
/// 256 KB of text and parts of 256 KB of packets measured as fast as
/// larger ones on the 8-million-event traces, in half the memory.
pub const CHUNK_TEXT: usize = 256 << 10;

/// Deltas below this many ns (10 s) fit the placeholder `+?.?????????`;
/// a line with a wider one is rewritten.
const DELTA_FITS: i128 = 10_000_000_000;

/// Times as seconds since the epoch, `S.nnnnnnnnn` (babeltrace2's
/// `--clock-seconds`); before the epoch `-S.nnnnnnnnn`, the digits those of
/// the distance to it (-4.75 s is `-4.750000000`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Seconds;

impl TimeText for Seconds {
    fn write(&mut self, out: &mut TextBuf, ns: i128) {
        let a = ns.unsigned_abs();
        out.put(
            format!(
                "{}{}.{:09}",
                if ns < 0 { "-" } else { "" },
                a / 1_000_000_000,
                a % 1_000_000_000
            )
            .as_bytes(),
        );
    }
}

/// How the events are rendered.
#[derive(Clone, Debug)]
pub enum Render<T> {
    /// babeltrace2's text lines, times written with `T`.
    Text(T),
    /// Lines another output writes (`tape show --format json`:
    /// `output::json::write_json_line`): the rendering runs here, in
    /// parallel, without this module knowing the format.
    Lines(LineWriter),
}

/// Writes the event at a stream's head (time `t`) as one line into `out`.
pub type LineWriter =
    fn(out: &mut Vec<u8>, t: Option<i128>, stream: &mut StreamReader) -> Result<(), DecodeError>;

// A text line is written with the delta placeholder `+?.?????????`, which
// is also what babeltrace2 prints for the first event: the merge writes the
// real delta over it.

/// What the merge hands to the caller, in order.
pub enum Piece<'a, 'b> {
    /// Lines of events shown, in order, where the workers rendered them
    /// (for `write_vectored`: the text is not copied on the way); a
    /// slice may hold several lines.
    Lines(&'a mut [IoSlice<'b>]),
    /// Events lost in a stream, reported at this time.
    Lost(&'a Path, u64, Option<i128>),
}

/// One record, 32 bytes: its merge key (the time, or `i128::MIN` when
/// there is none), what it is, and a value.
#[derive(Clone, Copy)]
struct Rec {
    key: i128,
    /// For `EVENT`, where its text ends in the chunk's text; for `LOST`,
    /// how many; for `FAILED`, the index of its error.
    val: u64,
    /// For `EVENT` in text: where the delta placeholder starts in the line.
    aux: u32,
    kind: u8,
    timed: bool,
}

/// An event shown.
const EVENT: u8 = 0;
/// An event not shown (kept for the order).
const HIDDEN: u8 = 1;
/// Events lost.
const LOST: u8 = 2;
/// An event whose decoding failed: the error comes out at its turn.
const FAILED: u8 = 3;

impl Rec {
    fn new(kind: u8, t: Option<i128>, val: u64) -> Rec {
        Rec {
            key: t.unwrap_or(i128::MIN),
            val,
            aux: 0,
            kind,
            timed: t.is_some(),
        }
    }

    fn time(&self) -> Option<i128> {
        self.timed.then_some(self.key)
    }
}

struct Chunk {
    text: TextBuf,
    recs: Vec<Rec>,
    errors: Vec<DecodeError>,
    /// Set on the last chunk of a part: its end, or the error that ends
    /// its stream.
    end: Option<Result<(), DecodeError>>,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            // Room for its text and a last line past the limit, zeroed once.
            text: TextBuf::with_room(CHUNK_TEXT + (16 << 10)),
            recs: Vec::with_capacity(CHUNK),
            errors: Vec::new(),
            end: None,
        }
    }
}

/// A part of a stream: packets that a thread decodes in chunks, in order,
/// while other threads decode the parts after it.
struct Part {
    /// Its number in its stream (from 0, in file order).
    seq: u64,
    /// `None` while a thread decodes a chunk of it, and once finished.
    decoder: Option<StreamReader>,
    /// Chunks decoded, for the merge.
    ready: VecDeque<Chunk>,
    /// Its last chunk is decoded.
    finished: bool,
    /// The stream's last part, not cut yet: cut before its first chunk
    /// (see [`StreamReader::split_off`]).
    uncut: bool,
}

struct Sched {
    /// Per stream, its parts not yet merged, in file order: the merge
    /// reads the front one.
    parts: Vec<VecDeque<Part>>,
    /// Chunks merged, for the workers to fill again (no fresh pages).
    free: Vec<Chunk>,
    /// Packet buffers of the parts decoded to their end, for the next
    /// parts (see [`StreamReader::reuse_buffer`]).
    buffers: Vec<PacketBuf>,
    quit: bool,
    /// Workers waiting on `Shared::work`, and whether the merge waits on
    /// `Shared::ready`: a condition variable is notified only when someone
    /// waits (a notification is a system call). Both are changed and read
    /// under the lock, so that no wake-up is missed.
    idle_workers: usize,
    merge_waits: bool,
}

impl Part {
    /// Part `seq` of a stream, `stream` its packets, not cut yet.
    fn new(seq: u64, stream: StreamReader) -> Part {
        Part {
            seq,
            decoder: Some(stream),
            ready: VecDeque::new(),
            finished: false,
            uncut: true,
        }
    }
}

impl Sched {
    /// Part `seq` of stream `i`, which is not merged yet.
    fn part(&mut self, i: usize, seq: u64) -> &mut Part {
        let parts = &mut self.parts[i];
        let first = parts.front().map_or(seq, |p| p.seq);
        &mut parts[(seq - first) as usize]
    }

    /// The part to decode a chunk of next, as (stream, part): idle, not
    /// finished, among the first [`PARTS_AHEAD`] of its stream, with room
    /// (fewer than [`AHEAD`] chunks waiting: in the part for the one the
    /// merge reads, in the stream for the others), and with the fewest
    /// chunks waiting before its next one (one more per part further
    /// from the merge).
    fn pick(&self) -> Option<(usize, u64)> {
        let mut best: Option<(usize, (usize, u64))> = None;
        for (i, parts) in self.parts.iter().enumerate() {
            let waiting: usize = parts.iter().map(|p| p.ready.len()).sum();
            let mut depth = 0;
            for (k, p) in parts.iter().take(PARTS_AHEAD).enumerate() {
                depth += p.ready.len();
                let room = if k == 0 { p.ready.len() } else { waiting } < AHEAD;
                if p.decoder.is_some() && room {
                    let key = depth + k;
                    if best.is_none_or(|(b, _)| key < b) {
                        best = Some((key, (i, p.seq)));
                    }
                }
            }
        }
        best.map(|(_, at)| at)
    }

    /// Wakes the workers waiting for work, if any.
    fn wake_workers(&self, shared: &Shared) {
        if self.idle_workers > 0 {
            shared.work.notify_all();
        }
    }

    /// Wakes the merge if it waits for a chunk.
    fn wake_merge(&self, shared: &Shared) {
        if self.merge_waits {
            shared.ready.notify_all();
        }
    }

    /// Every part of every stream is decoded.
    fn all_decoded(&self) -> bool {
        self.parts.iter().flatten().all(|p| p.finished)
    }
}

struct Shared {
    sched: Mutex<Sched>,
    /// Workers wait here for a part to decode.
    work: Condvar,
    /// The merge waits here for a chunk.
    ready: Condvar,
    /// Bytes per part at least (see [`Threads`]).
    part_bytes: u64,
}

fn lock(m: &Mutex<Sched>) -> MutexGuard<'_, Sched> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Decodes up to `max` records of `s` into chunk `c` (emptied first).
fn decode_chunk<F, T: TimeText>(
    s: &mut StreamReader,
    render: &mut Render<T>,
    shown: &F,
    max: usize,
    mut c: Chunk,
) -> Chunk
where
    F: Shown,
{
    c.text.clear();
    c.recs.clear();
    c.errors.clear();
    c.end = None;
    while c.recs.len() < max && c.text.len() < CHUNK_TEXT {
        if let Render::Text(time) = render {
            let Chunk { text, recs, .. } = &mut c;
            let room = (max - recs.len(), CHUNK_TEXT);
            let rendered = s.render_quick(text, time, shown, room, |t, end, at| {
                recs.push(Rec {
                    aux: at as u32,
                    ..Rec::new(EVENT, t, end as u64)
                })
            });
            if rendered > 0 {
                continue;
            }
        }
        match s.peek() {
            Err(e) => {
                c.end = Some(Err(e));
                break;
            }
            Ok(Next::End) => {
                c.end = Some(Ok(()));
                break;
            }
            Ok(Next::Lost(n, t)) => {
                s.take_lost();
                c.recs.push(Rec::new(LOST, t, n));
            }
            Ok(Next::Event(t)) => {
                let show = s.class().is_some_and(|class| shown.class(class, t)) && shown.event(s);
                let r = if !show {
                    s.emit(&mut Discard).map(|()| Rec::new(HIDDEN, t, 0))
                } else {
                    let start = c.text.len();
                    let mut aux = 0;
                    let r = match render {
                        // An event without a time (a trace with no clock)
                        // has no `[time] (+delta) `, as babeltrace2 prints it.
                        Render::Text(time) => {
                            if t.is_some() {
                                time.open_line(&mut c.text, t);
                                aux = (c.text.len() + 3 - start) as u32;
                                c.text.put(DELTA_PLACEHOLDER);
                            }
                            write_event_rest(&mut c.text, s)
                        }
                        Render::Lines(write) => {
                            let mut line = Vec::new();
                            let r = write(&mut line, t, s);
                            c.text.put(&line);
                            r
                        }
                    };
                    r.map(|()| Rec {
                        aux,
                        ..Rec::new(EVENT, t, c.text.len() as u64)
                    })
                };
                match r {
                    Ok(rec) => c.recs.push(rec),
                    Err(e) => {
                        c.recs.push(Rec::new(FAILED, t, c.errors.len() as u64));
                        c.errors.push(e);
                        c.end = Some(Ok(()));
                        break;
                    }
                }
            }
        }
    }
    c
}

/// A worker: decodes a chunk of the part [`Sched::pick`] gives, until
/// every part is decoded or the merge quits.
fn worker<F, T: TimeText>(shared: &Shared, mut render: Render<T>, shown: &F, max: usize)
where
    F: Shown,
{
    let mut decode =
        |s: &mut StreamReader, chunk: Chunk| decode_chunk(s, &mut render, shown, max, chunk);
    let mut g = lock(&shared.sched);
    loop {
        if g.quit {
            return;
        }
        if let Some((i, seq)) = g.pick() {
            g = decode_part(shared, g, i, seq, &mut decode);
            continue;
        }
        if g.all_decoded() {
            return;
        }
        g.idle_workers += 1;
        g = shared.work.wait(g).unwrap_or_else(|e| e.into_inner());
        g.idle_workers -= 1;
    }
}

/// Decodes a chunk of part `seq` of stream `i` on this thread, the lock
/// released meanwhile, and queues it for the merge. The stream's last part
/// is first cut, and the part after the cut queued after it.
fn decode_part<'a>(
    shared: &'a Shared,
    mut g: MutexGuard<'a, Sched>,
    i: usize,
    seq: u64,
    decode: &mut dyn FnMut(&mut StreamReader, Chunk) -> Chunk,
) -> MutexGuard<'a, Sched> {
    let p = g.part(i, seq);
    let Some(mut stream) = p.decoder.take() else {
        return g; // under way on another thread
    };
    let cut = std::mem::take(&mut p.uncut);
    if let Some(buf) = g.buffers.pop() {
        if let Some(unused) = stream.reuse_buffer(buf) {
            g.buffers.push(unused);
        }
    }
    let chunk = g.free.pop().unwrap_or_else(Chunk::new);
    drop(g);
    let rest = if cut {
        stream.split_off(shared.part_bytes)
    } else {
        None
    };
    let chunk = decode(&mut stream, chunk);
    let mut g = lock(&shared.sched);
    if let Some(rest) = rest {
        g.parts[i].push_back(Part::new(seq + 1, rest));
    }
    let p = g.part(i, seq);
    let finished = chunk.end.is_some();
    p.ready.push_back(chunk);
    if finished {
        p.finished = true;
        let buf = stream.take_buffer();
        g.buffers.push(buf);
    } else {
        p.decoder = Some(stream);
    }
    g.wake_merge(shared);
    g.wake_workers(shared);
    g
}

/// The merge side of one stream: its current chunk and position.
struct Cursor {
    /// Where its chunk is in [`Pending::slots`].
    slot: usize,
    rec: usize,
    text: usize,
}

/// Lines merged and not yet handed to the caller, and the chunks they are
/// in: a chunk merged to its end goes back to the workers only once its
/// lines are handed over.
///
/// ```text
///   slots:  [0: stream 2's chunk] [1: stream 0's] [2: merged, retired] …
///   lines:  (1, 0..96) (0, 0..101) (2, 4040..4141) (1, 96..288) …
///                                                   └ two lines of one
///                                                     chunk that follow
///                                                     each other: one slice
/// ```
struct Pending {
    slots: Vec<Option<Chunk>>,
    /// Slots without a chunk.
    spare: Vec<usize>,
    /// Slots of chunks merged to their end, released after the hand-over.
    retired: Vec<usize>,
    /// (slot or [`WIDE`], start, end) of each run of lines.
    lines: Vec<(usize, usize, usize)>,
    /// Lines rewritten for a delta wider than its placeholder.
    wide: TextBuf,
}

/// The slot number of [`Pending::wide`].
const WIDE: usize = usize::MAX;

/// Runs of lines per hand-over: the `IOV_MAX` of Linux.
const RUNS: usize = 1024;

impl Pending {
    fn new() -> Pending {
        Pending {
            slots: Vec::new(),
            spare: Vec::new(),
            retired: Vec::new(),
            lines: Vec::with_capacity(RUNS),
            wide: TextBuf::new(),
        }
    }

    /// Puts `chunk` in a slot: its number.
    fn place(&mut self, chunk: Chunk) -> usize {
        match self.spare.pop() {
            Some(s) => {
                self.slots[s] = Some(chunk);
                s
            }
            None => {
                self.slots.push(Some(chunk));
                self.slots.len() - 1
            }
        }
    }

    /// Adds the line at `start..end` of slot `slot` (to the last run when
    /// it follows it: lines of a chunk, or of `wide`, are appended in order).
    #[inline]
    fn line(&mut self, slot: usize, start: usize, end: usize) {
        Pending::add_line(&mut self.lines, slot, start, end);
    }

    /// [`Pending::line`] on the runs alone (for a caller that holds the
    /// slots meanwhile).
    #[inline(always)]
    fn add_line(lines: &mut Vec<(usize, usize, usize)>, slot: usize, start: usize, end: usize) {
        match lines.last_mut() {
            Some((s, _, e)) if *s == slot && *e == start => *e = end,
            _ => lines.push((slot, start, end)),
        }
    }

    /// Whether to hand the lines over now: as many runs as one system
    /// call takes, or chunks kept only for their lines.
    #[inline]
    fn full(&self) -> bool {
        self.lines.len() >= RUNS || self.retired.len() >= 4 || self.wide.len() >= 1 << 16
    }

    /// Hands the lines to `each` and the retired chunks back to the
    /// workers; returns what `each` returned.
    fn hand_over(&mut self, shared: &Shared, each: &mut impl FnMut(Piece<'_, '_>) -> bool) -> bool {
        let mut go_on = true;
        if !self.lines.is_empty() {
            let (slots, wide) = (&self.slots, self.wide.as_slice());
            let mut runs: Vec<IoSlice<'_>> = self
                .lines
                .iter()
                .map(|&(s, a, b)| {
                    let text = match slots.get(s) {
                        Some(Some(c)) => c.text.as_slice(),
                        _ => wide,
                    };
                    IoSlice::new(&text[a..b])
                })
                .collect();
            go_on = each(Piece::Lines(&mut runs));
            self.lines.clear();
            self.wide.clear();
        }
        if !self.retired.is_empty() {
            let mut g = lock(&shared.sched);
            for s in self.retired.drain(..) {
                if let Some(c) = self.slots[s].take() {
                    g.free.push(c);
                }
                self.spare.push(s);
            }
        }
        go_on
    }
}

/// How many threads decode, and how finely streams are cut for them.
#[derive(Clone, Copy, Debug)]
pub struct Threads {
    /// Worker threads besides the calling one (0: a one-thread run).
    pub workers: usize,
    /// A stream is cut into parts of at least this many bytes (at packet
    /// boundaries, see [`StreamReader::split_off`]), so that several threads
    /// decode one stream at once; `u64::MAX` never cuts.
    pub part_bytes: u64,
}

impl Threads {
    /// `workers` worker threads, parts of `PART_BYTES`.
    pub fn new(workers: usize) -> Threads {
        Threads {
            workers,
            part_bytes: PART_BYTES,
        }
    }
}

/// Decodes `streams` on `threads.workers` threads (and on the calling
/// thread when the merge would otherwise wait) and calls `each` with every
/// event shown and every loss, in time order (see the module docs);
/// `shown` says which events are shown. `each` returns `false` to stop
/// early. A decoding error ends its stream where it is met (the stream's
/// records before it are merged, as if the file ended cleanly there); the
/// other streams go on to their end, and the first error is returned then.
pub fn render_merged<F, T: TimeText>(
    streams: Vec<StreamReader>,
    render: Render<T>,
    shown: F,
    threads: Threads,
    mut each: impl FnMut(Piece<'_, '_>) -> bool,
) -> Result<(), DecodeError>
where
    F: Shown + Sync,
{
    let n = streams.len();
    if n == 0 {
        return Ok(());
    }
    let paths: Vec<std::path::PathBuf> = streams.iter().map(|s| s.path().to_path_buf()).collect();
    // Records per chunk: fewer when there are many streams, so that the
    // chunks waiting stay within a few tens of MB.
    let max = (1 << 20) / n.max(1) / AHEAD / PARTS_AHEAD;
    let max = max.clamp(64, CHUNK);
    let shared = Shared {
        sched: Mutex::new(Sched {
            parts: streams
                .into_iter()
                .map(|s| VecDeque::from([Part::new(0, s)]))
                .collect(),
            free: Vec::new(),
            buffers: Vec::new(),
            quit: false,
            idle_workers: 0,
            merge_waits: false,
        }),
        work: Condvar::new(),
        ready: Condvar::new(),
        part_bytes: threads.part_bytes,
    };
    std::thread::scope(|scope| {
        for k in 0..threads.workers {
            let (shared, shown) = (&shared, &shown);
            let render = render.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("tape-render-{k}"))
                .spawn_scoped(scope, move || worker(shared, render, shown, max));
            if spawned.is_err() {
                break; // fewer workers: the merge decodes what they do not
            }
        }
        let text = matches!(render, Render::Text(_));
        let mut render = render;
        let mut decode_here =
            |s: &mut StreamReader, chunk: Chunk| decode_chunk(s, &mut render, &shown, max, chunk);
        let mut out = Pending::new();
        let r = merge(&mut out, &shared, &paths, text, &mut decode_here, &mut each);
        // The lines merged last, before an error too.
        out.hand_over(&shared, &mut each);
        lock(&shared.sched).quit = true;
        shared.work.notify_all();
        r
    })
}

/// The next chunk of stream `i`, waiting for a worker if needed; `None`
/// when the stream is finished.
/// When no worker has the part under way, the merge decodes the chunk
/// itself with `decode_here` rather than sleep (one worker fewer than
/// cores, and fewer threads put to sleep and woken); when one has, it
/// decodes a chunk of another part meanwhile, as a worker would.
fn next_chunk(
    shared: &Shared,
    i: usize,
    decode_here: &mut dyn FnMut(&mut StreamReader, Chunk) -> Chunk,
) -> Option<Chunk> {
    let mut g = lock(&shared.sched);
    loop {
        let front = g.parts[i].front_mut()?;
        if let Some(c) = front.ready.pop_front() {
            g.wake_workers(shared);
            return Some(c);
        }
        if front.finished {
            g.parts[i].pop_front();
            g.wake_workers(shared);
            continue;
        }
        if front.decoder.is_some() {
            let seq = front.seq;
            g = decode_part(shared, g, i, seq, decode_here);
            continue;
        }
        if let Some((j, seq)) = g.pick() {
            g = decode_part(shared, g, j, seq, decode_here);
            continue;
        }
        g.merge_waits = true;
        g = shared.ready.wait(g).unwrap_or_else(|e| e.into_inner());
        g.merge_waits = false;
    }
}

/// Moves stream `i`'s cursor to its next record (fetching chunks), and
/// returns that record's key; `Ok(None)` at the stream's end. A chunk
/// merged to its end is retired (see [`Pending`]).
fn advance(
    shared: &Shared,
    cursors: &mut [Option<Cursor>],
    out: &mut Pending,
    i: usize,
    decode_here: &mut dyn FnMut(&mut StreamReader, Chunk) -> Chunk,
) -> Result<Option<i128>, DecodeError> {
    loop {
        if let Some(c) = &cursors[i] {
            let chunk = out.slots[c.slot].as_mut().expect("a cursor has a chunk");
            if let Some(r) = chunk.recs.get(c.rec) {
                return Ok(Some(r.key));
            }
            // The end of a part (the next part goes on) or an error.
            let end = chunk.end.take();
            out.retired.push(c.slot);
            cursors[i] = None;
            if let Some(Err(e)) = end {
                return Err(e);
            }
        }
        match next_chunk(shared, i, decode_here) {
            Some(chunk) => {
                cursors[i] = Some(Cursor {
                    slot: out.place(chunk),
                    rec: 0,
                    text: 0,
                })
            }
            None => return Ok(None),
        }
    }
}

/// Merges records while each is an event whose line needs no more than
/// its delta written, in a chunk that holds the stream's next record too,
/// and a run of lines has room: nearly all of them, in a loop with little
/// to keep in registers. Stops, leaving it to [`merge`], at the first
/// record that needs more: a loss, an error, a delta wider than its
/// placeholder or none (the first line, an event without a time), the
/// last record of a chunk (the next key is in the next chunk), a full run.
#[inline(never)]
fn merge_quick(
    picker: &mut LoserTree,
    cursors: &mut [Option<Cursor>],
    out: &mut Pending,
    text: bool,
    prev: &mut Option<i128>,
) {
    let Pending { slots, lines, .. } = out;
    while lines.len() < RUNS {
        let Some(i) = picker.winner() else { return };
        let Some(Some(c)) = cursors.get_mut(i) else {
            return;
        };
        let Some(Some(chunk)) = slots.get_mut(c.slot) else {
            return;
        };
        let (Some(&rec), Some(next)) = (chunk.recs.get(c.rec), chunk.recs.get(c.rec + 1)) else {
            return;
        };
        if rec.kind != EVENT {
            return;
        }
        let (start, end) = (c.text, rec.val as usize);
        if text {
            let (Some(p), true) = (*prev, rec.timed) else {
                return;
            };
            let d = rec.key - p;
            if !(0..DELTA_FITS).contains(&d) {
                return;
            }
            let at = start + rec.aux as usize + 1;
            delta_into(&mut chunk.text.as_mut_slice()[at..], d as u64);
        }
        *prev = rec.time().or(*prev);
        (c.rec, c.text) = (c.rec + 1, end);
        Pending::add_line(lines, c.slot, start, end);
        picker.set(i, next.key);
    }
}

/// Merges the streams' records into `out` (see the module docs), handing
/// the lines to `each` as runs fill up; the caller hands over the rest.
fn merge(
    out: &mut Pending,
    shared: &Shared,
    paths: &[std::path::PathBuf],
    text: bool,
    decode_here: &mut dyn FnMut(&mut StreamReader, Chunk) -> Chunk,
    each: &mut impl FnMut(Piece<'_, '_>) -> bool,
) -> Result<(), DecodeError> {
    // The time of the last event shown.
    let mut prev: Option<i128> = None;
    let n = paths.len();
    let mut cursors: Vec<Option<Cursor>> = (0..n).map(|_| None).collect();
    // The first decoding error: it ends its stream; the others go on.
    let mut failed: Option<DecodeError> = None;
    let mut first = Vec::with_capacity(n);
    for i in 0..n {
        let k = advance(shared, &mut cursors, out, i, decode_here);
        first.push((i, key_or_end(k, &mut failed)));
    }
    let mut picker = LoserTree::new(n);
    picker.set_all(first);
    loop {
        merge_quick(&mut picker, &mut cursors, out, text, &mut prev);
        let Some(i) = picker.winner() else { break };
        let c = cursors[i].as_mut().expect("a stream picked has a cursor");
        let chunk = out.slots[c.slot].as_mut().expect("a cursor has a chunk");
        let rec = *chunk.recs.get(c.rec).expect("a stream picked has a record");
        c.rec += 1;
        // The stream's next key: in the same chunk nearly always.
        let next = chunk.recs.get(c.rec).map(|r| r.key);
        match rec.kind {
            EVENT => {
                let (start, end) = (c.text, rec.val as usize);
                c.text = end;
                let t = rec.time();
                let delta = match (prev, t) {
                    (Some(p), Some(t)) if text => {
                        Some(u64::try_from((t - p).max(0)).unwrap_or(u64::MAX))
                    }
                    _ => None,
                };
                prev = t.or(prev);
                let at = start + rec.aux as usize;
                match delta {
                    Some(d) if i128::from(d) < DELTA_FITS => {
                        delta_into(&mut chunk.text.as_mut_slice()[at + 1..], d);
                        out.line(c.slot, start, end);
                    }
                    Some(d) => {
                        // Wider than its placeholder: the line is rewritten.
                        let line = &chunk.text.as_slice()[start..end];
                        let w = &mut out.wide;
                        let from = w.len();
                        w.put(&line[..at - start + 1]);
                        w.seconds(d);
                        w.put(&line[at - start + 12..]);
                        let to = w.len();
                        out.line(WIDE, from, to);
                    }
                    None => out.line(c.slot, start, end),
                }
                if out.full() && !out.hand_over(shared, each) {
                    return Ok(());
                }
            }
            LOST => {
                let go_on = out.hand_over(shared, each)
                    && each(Piece::Lost(&paths[i], rec.val, rec.time()));
                if !go_on {
                    return Ok(());
                }
            }
            FAILED => {
                let e = chunk.errors.swap_remove(rec.val as usize);
                failed.get_or_insert(e);
                // The stream ends here (its chunk retired like one merged to
                // its end); its later parts are never merged.
                out.retired.push(c.slot);
                cursors[i] = None;
                picker.set(i, DONE);
                continue;
            }
            _ => {
                // A hidden event writes nothing, but the chunks merged to
                // their end meanwhile go back to the workers all the same:
                // a run that shows nothing stays within its bound.
                if out.full() && !out.hand_over(shared, each) {
                    return Ok(());
                }
            }
        }
        let key = match next {
            Some(k) => k,
            None => key_or_end(
                advance(shared, &mut cursors, out, i, decode_here),
                &mut failed,
            ),
        };
        picker.set(i, key);
    }
    failed.map_or(Ok(()), Err)
}

/// A stream's next key from [`advance`]: its end when it has no more, or
/// when it failed (the first error is kept in `failed`).
fn key_or_end(k: Result<Option<i128>, DecodeError>, failed: &mut Option<DecodeError>) -> i128 {
    match k {
        Ok(k) => k.unwrap_or(DONE),
        Err(e) => {
            failed.get_or_insert(e);
            DONE
        }
    }
}
