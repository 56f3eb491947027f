//! Streams decoded and rendered on worker threads, merged in time order on
//! the calling thread: how `tape show` uses every core.
//!
//! Each stream file is decoded in order by one worker at a time, in
//! *chunks* of records. A chunk holds the rendered text of its events (all
//! of a line but the part that depends on the merge: the time and the
//! delta to the previous event shown) and, per record, its merge key:
//!
//! ```text
//!   workers (one stream at a time each)            calling thread
//!   ┌────────────┐  chunk: text ──────────┐
//!   │ stream 0   │─▶ recs [ev t=5 ..12)   │ ─┐    heap of (key, stream):
//!   └────────────┘        [lost 3 t=7]    │  ├─▶  pops the least key,
//!   ┌────────────┐        [hidden t=9]    │  │    writes `[time] (+delta) `
//!   │ stream 1   │─▶ ...                  ┘ ─┘    and the event's text
//!   └────────────┘
//! ```
//!
//! The order is the one [`FastMerge`](crate::fast::FastMerge) gives: the
//! least key first, ties to the lower stream index, and every record of a
//! stream in file order. Events that are not shown stay in the merge as
//! `hidden` records, so that filters never change the order of the others
//! (a stream whose times go backwards merges differently without them).
//! A payload that fails to decode becomes a `failed` record at its place,
//! and a header that fails ends its stream's last chunk: the error comes
//! out where the one-thread merge would meet it.
//!
//! Memory is bounded: at most [`AHEAD`] chunks per stream wait to be
//! merged, and a chunk holds at most a given number of records.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::decode::DecodeError;
use crate::fast::{write_event_rest, write_json_line, FastStream, Next, DELTA_PLACEHOLDER};
use crate::line::{nine_into, TextBuf};
use crate::plan::Discard;
use crate::EventClass;

/// Chunks decoded ahead per stream.
pub const AHEAD: usize = 3;

/// Records per chunk at most: about 400 KB of text for 100-byte lines.
/// Fewer hand-overs between the threads measured faster than smaller
/// chunks that stay in L2 (512 KB per core here): 4,096 against 2,048,
/// 512 and 256, side by side on the 8-million-event trace.
pub const CHUNK: usize = 4096;

/// Writes the time of an event line (the `HH:MM:SS.nnnnnnnnn` of
/// babeltrace2, or seconds since the epoch). Each worker has its own copy,
/// so that it may keep a cache (the broken-down time of the last second).
pub trait TimeText: Clone + Send {
    /// Appends the text of time `ns` (ns since the epoch) to `out`.
    fn write(&mut self, out: &mut TextBuf, ns: i128);

    /// Starts a text line: `[` and the time `t`, or `??:??:??.?????????`
    /// for an event without one.
    #[inline(always)]
    fn open_line(&mut self, out: &mut TextBuf, t: Option<i128>) {
        out.push(b'[');
        match t {
            Some(ns) => self.write(out, ns),
            None => out.put(b"??:??:??.?????????"),
        }
    }
}

/// Times as seconds since the epoch, `S.nnnnnnnnn` (babeltrace2's
/// `--clock-seconds`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Seconds;

impl TimeText for Seconds {
    fn write(&mut self, out: &mut TextBuf, ns: i128) {
        out.put(
            format!(
                "{}.{:09}",
                ns.div_euclid(1_000_000_000),
                ns.rem_euclid(1_000_000_000)
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
    /// One JSON object a line.
    Json,
}

// A text line is written with the delta placeholder `+?.?????????`, which
// is also what babeltrace2 prints for the first event: the merge writes the
// real delta over it.

/// What the merge hands to the caller, in order.
pub enum Piece<'a> {
    /// An event shown: its time and its whole line.
    Event(Option<i128>, &'a [u8]),
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

#[derive(Default)]
struct Chunk {
    text: TextBuf,
    recs: Vec<Rec>,
    errors: Vec<DecodeError>,
    /// Set on the last chunk of a stream: its end, or the error that ended it.
    end: Option<Result<(), DecodeError>>,
}

struct Sched {
    ready: Vec<VecDeque<Chunk>>,
    /// Chunks merged, for the workers to fill again (no fresh pages).
    free: Vec<Chunk>,
    busy: Vec<bool>,
    finished: Vec<bool>,
    quit: bool,
}

struct Shared {
    sched: Mutex<Sched>,
    /// Workers wait here for a stream to decode.
    work: Condvar,
    /// The merge waits here for a chunk.
    ready: Condvar,
}

fn lock(m: &Mutex<Sched>) -> MutexGuard<'_, Sched> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Decodes up to `max` records of `s` into chunk `c` (emptied first).
fn decode_chunk<F, T: TimeText>(
    s: &mut FastStream,
    render: &mut Render<T>,
    shown: &F,
    max: usize,
    mut c: Chunk,
) -> Chunk
where
    F: Fn(&EventClass, Option<i128>) -> bool,
{
    c.text.clear();
    c.recs.clear();
    c.errors.clear();
    c.end = None;
    while c.recs.len() < max {
        if let Render::Text(time) = render {
            let Chunk { text, recs, .. } = &mut c;
            let rendered = s.render_quick(text, time, shown, max - recs.len(), |t, end, at| {
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
                let show = s.class().is_some_and(|class| shown(class, t));
                let r = if !show {
                    s.emit(&mut Discard).map(|()| Rec::new(HIDDEN, t, 0))
                } else {
                    let start = c.text.len();
                    let mut aux = 0;
                    let r = match render {
                        Render::Text(time) => {
                            time.open_line(&mut c.text, t);
                            aux = (c.text.len() + 3 - start) as u32;
                            c.text.put(DELTA_PLACEHOLDER);
                            write_event_rest(&mut c.text, s)
                        }
                        Render::Json => {
                            let mut json = Vec::new();
                            let r = write_json_line(&mut json, t, s);
                            c.text.put(&json);
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

/// A worker: takes the stream with the fewest chunks waiting, decodes a
/// chunk of it, until every stream is finished or the merge quits.
fn worker<F, T: TimeText>(
    shared: &Shared,
    streams: &[Mutex<FastStream>],
    mut render: Render<T>,
    shown: &F,
    max: usize,
) where
    F: Fn(&EventClass, Option<i128>) -> bool,
{
    let mut decode = |i: usize, chunk: Chunk| {
        let mut s = streams[i].lock().unwrap_or_else(|e| e.into_inner());
        decode_chunk(&mut s, &mut render, shown, max, chunk)
    };
    let mut g = lock(&shared.sched);
    loop {
        if g.quit {
            return;
        }
        if let Some(i) = g.pick() {
            let chunk;
            (g, chunk) = decode_unlocked(shared, g, i, &mut decode);
            g.ready[i].push_back(chunk);
            shared.ready.notify_all();
            shared.work.notify_all();
            continue;
        }
        if g.finished.iter().all(|&f| f) {
            return;
        }
        g = shared.work.wait(g).unwrap_or_else(|e| e.into_inner());
    }
}

impl Sched {
    /// The stream to decode a chunk of next: not under way, not finished,
    /// with room, and the fewest chunks waiting.
    fn pick(&self) -> Option<usize> {
        (0..self.ready.len())
            .filter(|&i| !self.busy[i] && !self.finished[i] && self.ready[i].len() < AHEAD)
            .min_by_key(|&i| self.ready[i].len())
    }
}

/// Decodes a chunk of stream `i` on this thread: the stream is marked
/// under way and the lock released meanwhile, then taken back to record
/// the result (the caller places the chunk).
fn decode_unlocked<'a>(
    shared: &'a Shared,
    mut g: MutexGuard<'a, Sched>,
    i: usize,
    decode: &mut dyn FnMut(usize, Chunk) -> Chunk,
) -> (MutexGuard<'a, Sched>, Chunk) {
    g.busy[i] = true;
    let chunk = g.free.pop().unwrap_or_default();
    drop(g);
    let chunk = decode(i, chunk);
    let mut g = lock(&shared.sched);
    g.busy[i] = false;
    if chunk.end.is_some() {
        g.finished[i] = true;
    }
    (g, chunk)
}

/// The merge side of one stream: its current chunk and position.
struct Cursor {
    chunk: Chunk,
    rec: usize,
    text: usize,
}

/// Decodes `streams` on `workers` threads (and on the calling thread when
/// the merge would otherwise wait: 0 workers is a one-thread run) and calls
/// `each` with every event shown and every loss, in time order (see the
/// module docs); `shown` says which events are shown. `each` returns
/// `false` to stop early. The first decoding error ends the merge and is
/// returned.
pub fn render_merged<F, T: TimeText>(
    streams: Vec<FastStream>,
    render: Render<T>,
    shown: F,
    workers: usize,
    mut each: impl FnMut(Piece<'_>) -> bool,
) -> Result<(), DecodeError>
where
    F: Fn(&EventClass, Option<i128>) -> bool + Sync,
{
    let n = streams.len();
    if n == 0 {
        return Ok(());
    }
    let paths: Vec<std::path::PathBuf> = streams.iter().map(|s| s.path().to_path_buf()).collect();
    let streams: Vec<Mutex<FastStream>> = streams.into_iter().map(Mutex::new).collect();
    // Records per chunk: fewer when there are many streams, so that the
    // chunks waiting stay within a few tens of MB.
    let max = (1 << 20) / n.max(1) / AHEAD;
    let max = max.clamp(64, CHUNK);
    let shared = Shared {
        sched: Mutex::new(Sched {
            ready: (0..n).map(|_| VecDeque::new()).collect(),
            free: Vec::new(),
            busy: vec![false; n],
            finished: vec![false; n],
            quit: false,
        }),
        work: Condvar::new(),
        ready: Condvar::new(),
    };
    std::thread::scope(|scope| {
        for k in 0..workers {
            let (shared, streams, shown) = (&shared, &streams, &shown);
            let render = render.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("tape-render-{k}"))
                .spawn_scoped(scope, move || worker(shared, streams, render, shown, max));
            if spawned.is_err() {
                break; // fewer workers: the merge decodes what they do not
            }
        }
        let text = matches!(render, Render::Text(_));
        let mut render = render;
        let mut decode_here = |i: usize, chunk: Chunk| {
            let mut s = streams[i].lock().unwrap_or_else(|e| e.into_inner());
            decode_chunk(&mut s, &mut render, &shown, max, chunk)
        };
        let r = merge(&shared, &paths, text, &mut decode_here, &mut each);
        lock(&shared.sched).quit = true;
        shared.work.notify_all();
        r
    })
}

/// The next chunk of stream `i`, waiting for a worker if needed; `None`
/// when the stream is finished.
/// When no worker has it under way, the merge decodes the chunk itself
/// with `decode_here` rather than sleep: one worker fewer than cores, and
/// fewer threads put to sleep and woken.
fn next_chunk(
    shared: &Shared,
    i: usize,
    used: Option<Chunk>,
    decode_here: &mut dyn FnMut(usize, Chunk) -> Chunk,
) -> Option<Chunk> {
    let mut g = lock(&shared.sched);
    if let Some(c) = used {
        g.free.push(c);
    }
    loop {
        if let Some(c) = g.ready[i].pop_front() {
            shared.work.notify_all();
            return Some(c);
        }
        if g.finished[i] {
            return None;
        }
        if !g.busy[i] {
            let (_g, chunk) = decode_unlocked(shared, g, i, decode_here);
            shared.work.notify_all();
            return Some(chunk);
        }
        // A worker has stream `i` under way: work for a later chunk of
        // another stream meanwhile, as a worker would, rather than sleep.
        if let Some(j) = g.pick() {
            let chunk;
            (g, chunk) = decode_unlocked(shared, g, j, decode_here);
            g.ready[j].push_back(chunk);
            continue;
        }
        g = shared.ready.wait(g).unwrap_or_else(|e| e.into_inner());
    }
}

/// Moves stream `i`'s cursor to its next record (fetching chunks), and
/// returns that record's key; `Ok(None)` at the stream's end.
fn advance(
    shared: &Shared,
    cursors: &mut [Option<Cursor>],
    i: usize,
    decode_here: &mut dyn FnMut(usize, Chunk) -> Chunk,
) -> Result<Option<i128>, DecodeError> {
    loop {
        if let Some(c) = &mut cursors[i] {
            if let Some(r) = c.chunk.recs.get(c.rec) {
                return Ok(Some(r.key));
            }
            if let Some(end) = c.chunk.end.take() {
                cursors[i] = None;
                end?;
                return Ok(None);
            }
        }
        let used = cursors[i].take().map(|c| c.chunk);
        match next_chunk(shared, i, used, decode_here) {
            Some(chunk) => {
                cursors[i] = Some(Cursor {
                    chunk,
                    rec: 0,
                    text: 0,
                })
            }
            None => {
                cursors[i] = None;
                return Ok(None);
            }
        }
    }
}

/// Picks the stream with the least key (ties: the lower index): a scan
/// for a few streams, a heap for many.
enum Picker {
    /// Keys per stream, `i128::MAX` for a stream not in the merge (a key
    /// never equals it: times are at most `u64::MAX` cycles past an offset).
    Scan(Vec<i128>),
    Heap(BinaryHeap<Reverse<(i128, usize)>>),
}

impl Picker {
    fn new(n: usize) -> Picker {
        if n <= 16 {
            Picker::Scan(vec![i128::MAX; n])
        } else {
            Picker::Heap(BinaryHeap::with_capacity(n))
        }
    }

    #[inline]
    fn push(&mut self, key: i128, i: usize) {
        match self {
            Picker::Scan(keys) => keys[i] = key,
            Picker::Heap(h) => h.push(Reverse((key, i))),
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<usize> {
        match self {
            Picker::Scan(keys) => {
                let (mut best, mut at) = (i128::MAX, usize::MAX);
                for (i, &k) in keys.iter().enumerate() {
                    if k < best {
                        (best, at) = (k, i);
                    }
                }
                let slot = keys.get_mut(at)?;
                *slot = i128::MAX;
                Some(at)
            }
            Picker::Heap(h) => h.pop().map(|Reverse((_, i))| i),
        }
    }
}

fn merge(
    shared: &Shared,
    paths: &[std::path::PathBuf],
    text: bool,
    decode_here: &mut dyn FnMut(usize, Chunk) -> Chunk,
    each: &mut impl FnMut(Piece<'_>) -> bool,
) -> Result<(), DecodeError> {
    // The time of the last event shown, and a line for the rare delta of
    // 10 s or more (wider than its placeholder).
    let mut prev: Option<i128> = None;
    let mut wide = TextBuf::new();
    let n = paths.len();
    let mut cursors: Vec<Option<Cursor>> = (0..n).map(|_| None).collect();
    let mut picker = Picker::new(n);
    for i in 0..n {
        if let Some(k) = advance(shared, &mut cursors, i, decode_here)? {
            picker.push(k, i);
        }
    }
    while let Some(i) = picker.pop() {
        let c = cursors[i].as_mut().expect("a stream picked has a cursor");
        let rec = *c
            .chunk
            .recs
            .get(c.rec)
            .expect("a stream picked has a record");
        c.rec += 1;
        let go_on = match rec.kind {
            EVENT => {
                let end = rec.val as usize;
                let line = &mut c.chunk.text.as_mut_slice()[c.text..end];
                c.text = end;
                let t = rec.time();
                let delta = match (prev, t) {
                    (Some(p), Some(t)) if text => {
                        Some(u64::try_from((t - p).max(0)).unwrap_or(u64::MAX))
                    }
                    _ => None,
                };
                prev = t.or(prev);
                let at = rec.aux as usize;
                match delta {
                    Some(d) if d < 10_000_000_000 => {
                        let place = &mut line[at..at + 12];
                        place[1] = b'0' + (d / 1_000_000_000) as u8;
                        nine_into(&mut place[3..], d);
                        each(Piece::Event(t, line))
                    }
                    Some(d) => {
                        wide.clear();
                        wide.put(&line[..at + 1]);
                        wide.decimal(d / 1_000_000_000);
                        wide.push(b'.');
                        wide.nine(d);
                        wide.put(&line[at + 12..]);
                        each(Piece::Event(t, wide.as_slice()))
                    }
                    None => each(Piece::Event(t, line)),
                }
            }
            LOST => each(Piece::Lost(&paths[i], rec.val, rec.time())),
            FAILED => return Err(c.chunk.errors.swap_remove(rec.val as usize)),
            _ => true,
        };
        if !go_on {
            return Ok(());
        }
        // The stream's next key: in the same chunk nearly always.
        match c.chunk.recs.get(c.rec) {
            Some(r) => picker.push(r.key, i),
            None => {
                if let Some(k) = advance(shared, &mut cursors, i, decode_here)? {
                    picker.push(k, i);
                }
            }
        }
    }
    Ok(())
}
