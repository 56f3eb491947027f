//! The merge stage: the events of several streams in time order.
//!
//! [`StreamMerge`] keeps each stream's next event header decoded
//! ([`StreamReader::peek`]) and hands out the earliest, its scopes not yet
//! decoded: the output decodes them into its own sink. [`events`] gives
//! them as value trees. (`tape show` merges rendered parts instead: see
//! [`crate::text::render_merged`].)

pub(crate) mod tournament;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::decode::plan::ValueSink;
use crate::decode::stream::{open_streams, Next, StreamReader};
use crate::decode::{DecodeError, Value};
use crate::metadata::read::TraceDir;
use crate::EventClass;

/// Streams of several traces, merged in time order.
pub struct StreamMerge {
    streams: Vec<StreamReader>,
    heap: BinaryHeap<Reverse<(i128, usize)>>,
    started: bool,
    /// The stream whose event was handed out last (re-queued on `next`).
    pending: Option<usize>,
    /// The first decoding error: its stream ended there, the others go on,
    /// and it is returned after them.
    failed: Option<DecodeError>,
}

/// What [`StreamMerge::next`] gives.
pub enum Step<'a> {
    /// An event is ready in this stream: call `emit` on it.
    Event(&'a mut StreamReader, Option<i128>),
    /// Lost events in this stream.
    Lost(&'a StreamReader, u64, Option<i128>),
}

impl StreamMerge {
    /// Renders packet contexts as JSON objects.
    pub fn render_json(&mut self) {
        self.streams.iter_mut().for_each(StreamReader::render_json);
    }

    /// Keeps packet contexts as values (see [`StreamReader::keep_packet_values`]).
    pub fn keep_packet_values(&mut self) {
        self.streams
            .iter_mut()
            .for_each(StreamReader::keep_packet_values);
    }

    /// Opens every stream of `traces`, keeping the streams whose file name
    /// `keep` accepts.
    pub fn filtered(
        traces: &[TraceDir],
        keep: impl Fn(&Path) -> bool,
    ) -> Result<StreamMerge, String> {
        let mut m = StreamMerge::new(traces)?;
        m.streams.retain(|s| keep(&s.path));
        Ok(m)
    }

    /// Opens every stream of `traces`.
    pub fn new(traces: &[TraceDir]) -> Result<StreamMerge, String> {
        let streams = open_streams(traces)?;
        Ok(StreamMerge {
            streams,
            heap: BinaryHeap::new(),
            started: false,
            pending: None,
            failed: None,
        })
    }

    /// Queues stream `i` at its next item; a stream that fails ends there.
    fn push(&mut self, i: usize) {
        let key = match self.streams[i].peek() {
            Ok(Next::Event(t)) => t.unwrap_or(i128::MIN),
            Ok(Next::Lost(_, t)) => t.unwrap_or(i128::MIN),
            Ok(Next::End) => return,
            Err(e) => return self.fail(e),
        };
        self.heap.push(Reverse((key, i)));
    }

    /// The event handed out last could not be decoded (`emit` failed): its
    /// stream ends there; the error is returned once the others have ended.
    pub fn fail(&mut self, e: DecodeError) {
        self.failed.get_or_insert(e);
        self.pending = None;
    }

    /// The next event or loss, in time order; `None` at the end. After an
    /// `Event`, the caller must `emit` it (or report its failure with
    /// [`fail`](Self::fail)) before calling `next` again. A stream that
    /// cannot be decoded further ends where it fails, as if its file ended
    /// there; the other streams go on, and the first error comes last.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Step<'_>, DecodeError>> {
        if !self.started {
            self.started = true;
            for i in 0..self.streams.len() {
                self.push(i);
            }
        }
        // Re-queue the stream used last (its next item is now decodable).
        if let Some(i) = self.pending.take() {
            self.push(i);
        }
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return self.failed.take().map(Err);
        };
        match self.streams[i].peek() {
            Err(e) => {
                self.fail(e);
                self.next()
            }
            Ok(Next::Event(t)) => {
                self.pending = Some(i);
                Some(Ok(Step::Event(&mut self.streams[i], t)))
            }
            Ok(Next::Lost(n, t)) => {
                self.streams[i].take_lost();
                self.push(i);
                Some(Ok(Step::Lost(&self.streams[i], n, t)))
            }
            Ok(Next::End) => self.next(),
        }
    }
}

/// One event with typed values, as [`events`] gives them.
#[derive(Clone, Debug)]
pub struct Event {
    /// The event class (name, id, layout).
    pub class: Arc<EventClass>,
    /// Time in ns since the clock's origin (the epoch for absolute clocks).
    pub ns: Option<i128>,
    /// The stream file.
    pub stream: PathBuf,
    /// Stream event context, event context and payload, those that exist,
    /// in that order (the payload is last).
    pub scopes: Vec<Value>,
}

impl Event {
    /// The payload (`event.fields`).
    pub fn payload(&self) -> &Value {
        self.scopes.last().expect("the payload is always decoded")
    }
}

/// What [`events`] yields.
#[derive(Clone, Debug)]
pub enum Record {
    /// An event.
    Event(Event),
    /// Events lost in a stream (ns: where the loss is reported).
    Lost(PathBuf, u64, Option<i128>),
}

/// Every event of `traces`, in time order, with typed values.
pub fn events(
    traces: &[TraceDir],
) -> Result<impl Iterator<Item = Result<Record, DecodeError>>, String> {
    let mut merge = StreamMerge::new(traces)?;
    Ok(std::iter::from_fn(move || loop {
        let r = match merge.next()? {
            Err(e) => Err(e),
            Ok(Step::Lost(s, n, t)) => Ok(Record::Lost(s.path().to_path_buf(), n, t)),
            Ok(Step::Event(s, t)) => {
                let class = s.class().cloned();
                let mut sink = ValueSink::default();
                match s.emit(&mut sink) {
                    Ok(()) => Ok(Record::Event(Event {
                        class: class.expect("an event was peeked"),
                        ns: t,
                        stream: s.path().to_path_buf(),
                        scopes: sink.scopes,
                    })),
                    Err(e) => {
                        // Its stream ends; the error comes after the others.
                        merge.fail(e);
                        continue;
                    }
                }
            }
        };
        return Some(r);
    }))
}
