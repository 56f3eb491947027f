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
use crate::fast::{write_event_rest, write_json_line, FastStream, Next};
use crate::plan::Discard;
use crate::EventClass;

/// Chunks decoded ahead per stream.
pub const AHEAD: usize = 3;

/// Records per chunk at most: about 50 KB of text, so that a chunk is
/// still in cache when the merge copies it.
pub const CHUNK: usize = 512;

/// How the events are rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Render {
    /// babeltrace2's text: the text after `[time] (+delta) `.
    Text,
    /// One JSON object a line, whole.
    Json,
}

/// What the merge hands to the caller, in order.
pub enum Piece<'a> {
    /// An event shown: its time and its rendered text.
    Event(Option<i128>, &'a [u8]),
    /// Events lost in a stream, reported at this time.
    Lost(&'a Path, u64, Option<i128>),
}

enum Rec {
    /// An event shown: its text ends at this offset of the chunk's text.
    Event(Option<i128>, usize),
    /// An event not shown (kept for the order).
    Hidden(Option<i128>),
    Lost(u64, Option<i128>),
    /// An event whose decoding failed: the error comes out at its turn.
    Failed(Option<i128>, DecodeError),
}

impl Rec {
    fn key(&self) -> i128 {
        match self {
            Rec::Event(t, _) | Rec::Hidden(t) | Rec::Lost(_, t) | Rec::Failed(t, _) => {
                t.unwrap_or(i128::MIN)
            }
        }
    }
}

#[derive(Default)]
struct Chunk {
    text: Vec<u8>,
    recs: Vec<Rec>,
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
fn decode_chunk<F>(s: &mut FastStream, render: Render, shown: &F, max: usize, mut c: Chunk) -> Chunk
where
    F: Fn(&EventClass, Option<i128>) -> bool,
{
    c.text.clear();
    c.recs.clear();
    c.end = None;
    while c.recs.len() < max {
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
                c.recs.push(Rec::Lost(n, t));
            }
            Ok(Next::Event(t)) => {
                let show = s.class().is_some_and(|class| shown(class, t));
                let r = if !show {
                    s.emit(&mut Discard).map(|()| Rec::Hidden(t))
                } else {
                    let r = match render {
                        Render::Text => write_event_rest(&mut c.text, s),
                        Render::Json => write_json_line(&mut c.text, t, s),
                    };
                    r.map(|()| Rec::Event(t, c.text.len()))
                };
                match r {
                    Ok(rec) => c.recs.push(rec),
                    Err(e) => {
                        c.recs.push(Rec::Failed(t, e));
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
fn worker<F>(shared: &Shared, streams: &[Mutex<FastStream>], render: Render, shown: &F, max: usize)
where
    F: Fn(&EventClass, Option<i128>) -> bool,
{
    loop {
        let (i, chunk) = {
            let mut g = lock(&shared.sched);
            loop {
                if g.quit {
                    return;
                }
                let pick = (0..streams.len())
                    .filter(|&i| !g.busy[i] && !g.finished[i] && g.ready[i].len() < AHEAD)
                    .min_by_key(|&i| g.ready[i].len());
                if let Some(i) = pick {
                    g.busy[i] = true;
                    break (i, g.free.pop().unwrap_or_default());
                }
                if g.finished.iter().all(|&f| f) {
                    return;
                }
                g = shared.work.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        };
        let chunk = {
            let mut s = streams[i].lock().unwrap_or_else(|e| e.into_inner());
            decode_chunk(&mut s, render, shown, max, chunk)
        };
        let mut g = lock(&shared.sched);
        g.busy[i] = false;
        if chunk.end.is_some() {
            g.finished[i] = true;
        }
        g.ready[i].push_back(chunk);
        shared.ready.notify_all();
        shared.work.notify_all();
    }
}

/// The merge side of one stream: its current chunk and position.
struct Cursor {
    chunk: Chunk,
    rec: usize,
    text: usize,
}

/// Decodes `streams` on `threads` worker threads and calls `each` with
/// every event shown and every loss, in time order (see the module docs);
/// `shown` says which events are shown. `each` returns `false` to stop
/// early. The first decoding error ends the merge and is returned.
pub fn render_merged<F>(
    streams: Vec<FastStream>,
    render: Render,
    shown: F,
    threads: usize,
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
        for _ in 0..threads.max(1) {
            scope.spawn(|| worker(&shared, &streams, render, &shown, max));
        }
        let r = merge(&shared, &paths, &mut each);
        lock(&shared.sched).quit = true;
        shared.work.notify_all();
        r
    })
}

/// The next chunk of stream `i`, waiting for a worker if needed; `None`
/// when the stream is finished.
fn next_chunk(shared: &Shared, i: usize, used: Option<Chunk>) -> Option<Chunk> {
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
        g = shared.ready.wait(g).unwrap_or_else(|e| e.into_inner());
    }
}

/// Moves stream `i`'s cursor to its next record (fetching chunks), and
/// returns that record's key; `Ok(None)` at the stream's end.
fn advance(
    shared: &Shared,
    cursors: &mut [Option<Cursor>],
    i: usize,
) -> Result<Option<i128>, DecodeError> {
    loop {
        if let Some(c) = &mut cursors[i] {
            if let Some(r) = c.chunk.recs.get(c.rec) {
                return Ok(Some(r.key()));
            }
            if let Some(end) = c.chunk.end.take() {
                cursors[i] = None;
                end?;
                return Ok(None);
            }
        }
        let used = cursors[i].take().map(|c| c.chunk);
        match next_chunk(shared, i, used) {
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

fn merge(
    shared: &Shared,
    paths: &[std::path::PathBuf],
    each: &mut impl FnMut(Piece<'_>) -> bool,
) -> Result<(), DecodeError> {
    let n = paths.len();
    let mut cursors: Vec<Option<Cursor>> = (0..n).map(|_| None).collect();
    let mut heap = BinaryHeap::with_capacity(n);
    for i in 0..n {
        if let Some(k) = advance(shared, &mut cursors, i)? {
            heap.push(Reverse((k, i)));
        }
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let c = cursors[i]
            .as_mut()
            .expect("a stream in the heap has a cursor");
        let rec = std::mem::replace(&mut c.chunk.recs[c.rec], Rec::Hidden(None));
        c.rec += 1;
        let go_on = match rec {
            Rec::Event(t, end) => {
                let text = &c.chunk.text[c.text..end];
                c.text = end;
                each(Piece::Event(t, text))
            }
            Rec::Hidden(_) => true,
            Rec::Lost(k, t) => each(Piece::Lost(&paths[i], k, t)),
            Rec::Failed(_, e) => return Err(e),
        };
        if !go_on {
            return Ok(());
        }
        if let Some(k) = advance(shared, &mut cursors, i)? {
            heap.push(Reverse((k, i)));
        }
    }
    Ok(())
}
