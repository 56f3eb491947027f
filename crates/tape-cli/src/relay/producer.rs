//! tape as a producer of a relay daemon: a running process's shared rings
//! forwarded to `lttng-relayd` as one CTF trace of a relay session, as
//! LTTng's consumer daemon forwards its sub-buffers.
//!
//! ```text
//!  process 4242 (rings)        tape record --relayd            lttng-relayd
//!  ring t1: [p7|p8|p9 open]    Feed: stream "main-4242"   -->  HOST/tape-DATE/prog-4242/
//!  ring t2: [p3 open]          closed packets every turn        metadata
//!                              open packets' events on the       main-4242, worker-4243
//!                              live timer; beacons               index/*.idx
//! ```
//!
//! **A relay session** ([`Session`]) is one control and one data
//! connection; its processes are **traces** ([`Feed`]), each under the path
//! `<program>-<pid>` with its own `metadata` stream and a stream per
//! thread ring, named as `tape record -o` names its files.
//!
//! **Packets.** A ring's closed packets go as they are, their times and
//! losses in their context. On each tick of the live timer the events
//! of the packets still open go too, as packets of their own (a viewer
//! sees a slow thread's events within a tick, as LTTng's live timer
//! flushes a sub-buffer): such a packet ends at its last event's time,
//! read by decoding its events with the trace's own metadata (tape's
//! reader), so that the next packet of the stream, which begins there,
//! never begins before the one before it ended. Every packet gets a
//! `packet_seq_num` of its own (counting from 0, the empty packet each
//! stream starts with) and an index entry; `events_discarded` is
//! cumulative, as in a saved trace: the events the owner dropped (`full`,
//! `big`, ...) and those it overwrote before the reader took them.
//!
//! **Beacons.** A stream with nothing new at a tick gets a *beacon*, an
//! index entry without a packet that tells a live viewer that the stream
//! has no event before a time, so that the other streams' events are
//! shown without waiting for it. The time is the process's clock read at
//! the tick *before*: an event older than that and not published by now
//! had its thread preempted for a whole tick between taking its time and
//! publishing it (then it reaches the relay's disk as it is, but a live
//! viewer may refuse it: counted as `late`, and said). Each stream begins
//! with an empty packet, because the relay daemon (up to 2.14) ignores a
//! stream's beacons until it has one, and a stream with none stalls every
//! viewer of the session.
//!
//! **Consuming.** Once a chunk of a ring is sent, the ring's reader mark
//! moves past it, as `tape record -o` and `tape pipe` move it: the next
//! reader starts there. In discard mode the packets sent are freed for
//! the owner to reuse; a relay slower than the program makes the rings
//! fill and the owner drop and count, never wait.
//!
//! **Metadata.** It goes as CTF metadata packets (babeltrace2 2.0.4 reads
//! metadata sent in pieces only so): the trace's, when it starts, its clock
//! calibrated over at least [`tape::clock::MIN_CALIBRATION`] (a process
//! that just started is waited for) and shared by every trace of the
//! session with the same clock source (their times then compare exactly);
//! then, as they appear, the event classes registered at run time, each in
//! a packet of its own, read from the process's template after the events
//! that need them. A class whose first event will describe its fields
//! (tape-tracing's) is listed in the template as awaiting that, and is
//! sent once described: a relay's metadata can add classes, never change
//! one.
//!
//! **Order for a live viewer.** A live viewer shows a session's events in
//! one time order and stops at one older than what it has shown. So every
//! turn reads all rings first, then looks for the rings and processes made
//! meanwhile and publishes them, and only then sends: a ring not seen yet
//! makes its events after what was read. A stream begins no earlier than
//! the latest time sent in the session.
//!
//! **Outage.** Each packet is kept until the relay confirms it
//! (`DATA_PENDING`, at each tick). If the relay goes away, the caller
//! reconnects ([`Session::reconnect`]: a new relay session, since a
//! restarted relay has lost the old one) and [`Feed::resume`] makes the
//! trace again there under a new UUID (readers of the relay's disk take the
//! two for two traces), its streams begun with the losses so far, the
//! unconfirmed packets and the chunks not yet sent sent again: at least
//! once, and every loss of the outage counted by the rings.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tape_consumer::record::{Chunk, PacketTimes, Recorder};
use tape_ctf::decode::{Discard, Next, StreamReader, TracePlan};

use super::client::{Relay, RelayError, RelayUrl};
use super::wire;

/// The bytes of an event header in a ring (`u16` id, `u64` time, packed).
const EVENT_HEADER: usize = 10;

/// What `tape record --relayd` was given.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) url: RelayUrl,
    pub(crate) session: String,
    pub(crate) hostname: String,
    pub(crate) live_timer: Duration,
    /// The relay's live port, for the viewer's URL said at the start.
    pub(crate) live_port: u16,
    /// The most bytes of unconfirmed packets kept, over every stream of
    /// the session ([`Feed::drop_oldest_kept`]).
    pub(crate) keep_unconfirmed: usize,
}

/// What is kept for sending again when none is given: sized for a 2-core
/// host (LTTng's default sub-buffers for two CPUs and two channels, 4 ×
/// 4 × 4 MiB, are 64 MiB): a relay that never confirms costs the recorder
/// at most that much beyond its own needs.
pub(crate) const DEFAULT_KEEP_UNCONFIRMED: usize = 64 << 20;

/// The live timer when none is given: a viewer sees an event within about
/// two of its ticks.
pub(crate) const DEFAULT_LIVE_TIMER: Duration = Duration::from_millis(200);

/// A stream's unconfirmed bytes past which the relay is asked for its
/// confirmation (DATA_PENDING) before the next tick: 16 packets of 1 MiB,
/// the default ring of one thread.
const CONFIRM_PAST: usize = 16 << 20;

/// Why a feed stopped: the relay (its connection, a refusal: every feed
/// of the session is concerned) or the process's trace alone (its
/// metadata, a packet that does not decode).
#[derive(Debug)]
pub(crate) enum Fault {
    Relay(RelayError),
    Feed(String),
}

impl From<RelayError> for Fault {
    /// The relay client's errors.
    fn from(e: RelayError) -> Fault {
        Fault::Relay(e)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Relay(e) => e.fmt(f),
            Fault::Feed(e) => f.write_str(e),
        }
    }
}

/// One relay session on one connection, its trace chunk made.
pub(crate) struct Session {
    pub(super) relay: Relay,
    /// Where the session's traces go on the relay's side
    /// (`HOST/NAME-DATE`).
    pub(crate) path: String,
    /// The creation time it gave the relay (Unix seconds): the relay
    /// names its directory by it (`NAME-DATE`).
    created: u64,
    pub(crate) options: Options,
    /// The clock every trace of a clock source states (the first one's
    /// calibration): their times compare exactly, as a live viewer, which
    /// shows the session's events in one order, needs.
    pub(super) clocks: Vec<(u32, (u64, i64, i64))>,
    /// Per clock source, the latest time sent (a packet's end, a
    /// beacon): a live viewer may have shown everything up to it, so a
    /// stream added later begins no earlier.
    horizon: Vec<(u32, u64)>,
    /// Streams begun at the horizon so far.
    pub(super) ties: u64,
    /// Packets kept unconfirmed so far, in the order sent (each one's
    /// [`Kept::order`]).
    pub(super) kept_order: u64,
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A session's or a trace's UUID: tape's own (`tape::__consumer::new_uuid`,
/// a random version-4 UUID, so never the nil one the relay refuses).
pub(super) fn random_id() -> [u8; 16] {
    tape::__consumer::new_uuid()
}

/// This machine's host name (tape's: `gethostname`), or `localhost` when
/// the system gives none (tape's `unknown` is no name a relay would show).
pub(crate) fn hostname() -> String {
    match tape::__consumer::hostname() {
        h if h.is_empty() || h == "unknown" => "localhost".to_owned(),
        h => h,
    }
}

impl Session {
    /// Connects to the relay daemon and creates a live session and its
    /// trace chunk.
    pub(crate) fn create(options: Options) -> Result<Session, RelayError> {
        Session::create_after(options, 0)
    }

    /// As [`Session::create`], its creation time later than `earlier`.
    fn create_after(options: Options, earlier: u64) -> Result<Session, RelayError> {
        let mut relay = Relay::connect(&options.url)?;
        let now = unix_seconds().max(earlier + 1);
        let live_timer_us = u32::try_from(options.live_timer.as_micros())
            .ok()
            .filter(|&us| us > 0)
            .ok_or_else(|| {
                format!(
                    "--live-timer {:?}: from 1 µs to {} s",
                    options.live_timer,
                    u32::MAX / 1_000_000
                )
            })?;
        let id = random_id();
        let path = relay.create_session(&wire::CreateSession {
            name: &options.session,
            hostname: &options.hostname,
            live_timer_us,
            sessiond_uuid: id,
            session_id: u64::from_le_bytes(id[..8].try_into().expect("8 bytes")),
            creation_time: now,
        })?;
        relay.create_trace_chunk(0, now)?;
        Ok(Session {
            relay,
            path,
            created: now,
            options,
            clocks: Vec::new(),
            horizon: Vec::new(),
            ties: 0,
            kept_order: 0,
        })
    }

    /// After an outage: a new connection and relay session in place of
    /// the old (the relay daemon may have restarted: the old session is
    /// gone), its traces' clocks kept; a new live viewer's horizon. Its
    /// creation time is a second past the old one's at least: the relay
    /// names a session's directory by that second, and an outage shorter
    /// than a second (a refused command, retried at once) put the new
    /// session's traces in the old one's directory, over its files.
    pub(crate) fn reconnect(&mut self) -> Result<(), RelayError> {
        let new = Session::create_after(self.options.clone(), self.created)?;
        self.relay = new.relay;
        self.path = new.path;
        self.created = new.created;
        self.horizon.clear();
        self.ties = 0;
        Ok(())
    }

    /// Whether the process `r` reads must wait before its trace starts:
    /// the first of its clock source, its clock not yet calibrated over
    /// [`tape::clock::MIN_CALIBRATION`] (the session's clock for that
    /// source is taken from it).
    pub(crate) fn must_wait(&self, r: &Recorder) -> bool {
        let source = r.clock_source();
        !self.clocks.iter().any(|c| c.0 == source) && !r.calibration_wait().is_zero()
    }

    pub(super) fn horizon(&self, source: u32) -> u64 {
        self.horizon
            .iter()
            .find(|h| h.0 == source)
            .map_or(0, |h| h.1)
    }

    pub(super) fn advance(&mut self, source: u32, t: u64) {
        match self.horizon.iter_mut().find(|h| h.0 == source) {
            Some(h) => h.1 = h.1.max(t),
            None => self.horizon.push((source, t)),
        }
    }

    /// How long a trace's streams stay open after their last packet: a
    /// live viewer (babeltrace2 2.0) ends its view of a stream or a
    /// session once closed, what it has not read yet included, so it is
    /// given a few ticks (and its own 100 ms retries) to read the end.
    pub(crate) fn linger(&self) -> Duration {
        (3 * self.options.live_timer).max(Duration::from_secs(1))
    }

    /// Ends the session's trace chunk, before its streams are closed: the
    /// relay then moves every stream to no chunk at once (a rotation), and
    /// a live viewer still behind reads each stream's chunk to its end (a
    /// stream closed first has its chunk put without a rotation, and
    /// lttng-relayd 2.13 hangs up a viewer behind on it: `relay/mod.rs`'s
    /// `MAX_ENDED_OPEN`). The connection's end then ends the session.
    pub(crate) fn close_chunk(&mut self) -> Result<(), RelayError> {
        self.relay.close_trace_chunk(0, unix_seconds()).map(|_| ())
    }
}

/// The event that ends the trace of a process that died.
pub(crate) const DIED: &str = "tape.process.died";

/// What it says.
const DIED_HOW: &str = "gone without exiting (killed, or crashed): its trace ends with what its \
                        rings held then, read as tape recover reads them";

/// What the relay knows of one ring's stream (or one CPU's, `kernel.rs`).
pub(super) struct Out {
    pub(super) handle: u64,
    /// Data packets sent (the next one's `net_seq_num`; the first is the
    /// empty packet).
    pub(super) sent: u64,
    /// The last packet's end, and the last beacon's time.
    pub(super) last_end: u64,
    pub(super) beacon: u64,
    /// The `events_discarded` the last packet stated.
    pub(super) discarded: u64,
    /// Whether a chunk of it came this turn.
    pub(super) fed: bool,
    /// The process's clock read at the last tick (the next beacon's time).
    pub(super) tick: Option<u64>,
    /// The packets sent that the relay has not confirmed yet
    /// (`DATA_PENDING`, at each tick): sent again in a new session if the
    /// relay goes away; and their bytes.
    pub(super) unconfirmed: std::collections::VecDeque<Kept>,
    pub(super) kept_bytes: usize,
}

impl Out {
    /// A stream begun (its empty packet sent) at `born`.
    pub(super) fn begun(handle: u64, born: u64) -> Out {
        Out {
            handle,
            sent: 1,
            last_end: born,
            beacon: born,
            discarded: 0,
            fed: false,
            tick: None,
            unconfirmed: Default::default(),
            kept_bytes: 0,
        }
    }
}

/// A packet sent and kept until the relay confirms it.
pub(super) struct Kept {
    pub(super) packet: Vec<u8>,
    pub(super) times: PacketTimes,
    pub(super) events: u64,
    /// When it was sent, in the session's order (the oldest kept of every
    /// stream goes first past the cap).
    pub(super) order: u64,
}

/// A chunk of a ring taken this turn (sent after the turn), with its
/// events and last time once known.
struct Taken {
    chunk: Chunk,
    /// Its events, and its last event's time: a closed packet's from the
    /// ring; an open packet's decoded once ([`Feed::count`]).
    events: u64,
    last: u64,
    counted: bool,
    /// Its packet went to a relay session (at least in part) that failed
    /// before confirming it: sent again, it may be in both.
    tried: bool,
}

impl Taken {
    fn of(chunk: Chunk) -> Taken {
        Taken {
            events: chunk.events.unwrap_or(0),
            last: chunk.ts_end,
            counted: chunk.events.is_some(),
            tried: false,
            chunk,
        }
    }
}

/// What a feed has sent so far.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sent {
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    pub(crate) events: u64,
    pub(crate) lost: u64,
    pub(crate) beacons: u64,
    /// Events older than a beacon already sent for their stream.
    pub(crate) late: u64,
    /// The process died, and its trace says so ([`DIED`]).
    pub(crate) died: bool,
    /// Events sent again in a new session after an outage (the old one
    /// had not confirmed them: they may be in both).
    pub(crate) resent: u64,
    /// Events of unconfirmed packets no longer kept (past
    /// [`Options::keep_unconfirmed`]): lost if the relay had not written
    /// them, and then not sent again.
    pub(crate) unkept: u64,
}

/// One process forwarded as a trace of a relay session.
pub(crate) struct Feed {
    pub(crate) recorder: Recorder,
    /// The trace's path in the session (`<program>-<pid>`).
    pub(crate) path: String,
    metadata: u64,
    streams: Vec<Out>,
    plan: Arc<TracePlan>,
    packet_file: Arc<std::fs::File>,
    /// Chunks read and not yet sent ([`Feed::take`], [`Feed::send`]).
    taken: Vec<Taken>,
    /// The process's clock source.
    source: u32,
    /// An event id its trace does not use (`tape.process.died`'s).
    spare_id: u64,
    /// Its metadata as sent so far (again in a new session): the first
    /// packet's, then the event classes sent since.
    metadata_text: String,
    /// The event classes (ids) sent.
    sent_classes: BTreeSet<u64>,
    /// A class sent was declared again otherwise (said once).
    redeclared: bool,
    pub(crate) sent: Sent,
}

impl Feed {
    /// Starts forwarding the process `recorder` reads: its trace's
    /// metadata stream, and the metadata sent (once: call it when
    /// [`Recorder::calibration_wait`] is over, so that its clock is
    /// calibrated over a span long enough).
    pub(crate) fn start(s: &mut Session, mut recorder: Recorder) -> Result<Feed, Fault> {
        let path = trace_path(&recorder.program(), recorder.pid());
        let source = recorder.clock_source();
        let clock = match s.clocks.iter().find(|c| c.0 == source) {
            Some(c) => c.1,
            None => {
                let c = recorder.clock_params();
                s.clocks.push((source, c));
                c
            }
        };
        recorder.set_clock(clock);
        let text = recorder
            .metadata()
            .map_err(|e| Fault::Feed(format!("process {}: {e}", recorder.pid())))?;
        let (plan, spare_id) = plan_of(&text, recorder.pid())?;
        // The event classes whose first event will describe them wait.
        let (prelude, classes) = event_classes(&text);
        let awaiting = awaiting(&text);
        let mut sent_classes = BTreeSet::new();
        let mut first = prelude.to_owned();
        for (id, block) in classes.iter().filter(|c| !awaiting.contains(&c.0)) {
            first.push_str(block);
            sent_classes.insert(*id);
        }
        // Published to viewers (STREAMS_SENT) only with the trace's first
        // data streams ([`Feed::add_streams`]): babeltrace2 2.0's live
        // viewer drops a trace that has no data stream when it looks, its
        // metadata with it, and a data stream of that trace coming later
        // makes it a trace with no metadata, which it waits for forever
        // (a GET_NEW_STREAMS loop; seen under load, when the viewer looked
        // between the two).
        let metadata = s.relay.add_stream("metadata", &path, 0)?;
        let packet = wire::metadata_packet(
            &recorder.uuid(),
            first.as_bytes(),
            cfg!(target_endian = "little"),
        );
        s.relay.send_metadata(metadata, &packet)?;
        let mut f = Feed {
            recorder,
            path,
            metadata,
            streams: Vec::new(),
            plan,
            packet_file: Arc::new(crate::reader::packet_file().map_err(Fault::Feed)?),
            taken: Vec::new(),
            source,
            spare_id,
            metadata_text: first,
            sent_classes,
            redeclared: false,
            sent: Sent::default(),
        };
        f.publish(s)?;
        Ok(f)
    }

    /// One turn of this trace alone ([`Feed::take`], [`Feed::publish`],
    /// [`Feed::send`]).
    pub(crate) fn turn(&mut self, s: &mut Session, tick: bool) -> Result<(), Fault> {
        self.take(tick)?;
        self.publish(s)?;
        self.send(s, tick)
    }

    /// Reads the closed packets of every known ring (at a `tick` of the
    /// live timer, the open ones' events too), to send once every ring
    /// and process made meanwhile is published ([`Feed::publish`]): a
    /// ring not seen then makes events only later than what was read, so
    /// a live viewer never gets a stream whose events are older than
    /// what it has shown. How much of a ring it took: [`Feed::fill`].
    pub(crate) fn take(&mut self, tick: bool) -> Result<(), Fault> {
        let chunks = self
            .recorder
            .poll_chunks_open(tick)
            .map_err(|e| Fault::Feed(e.to_string()))?;
        self.taken.extend(chunks.into_iter().map(Taken::of));
        Ok(())
    }

    /// Looks for rings made since the last look and adds them as
    /// streams, published to viewers.
    pub(crate) fn publish(&mut self, s: &mut Session) -> Result<(), Fault> {
        self.recorder.find_new_rings();
        self.add_streams(s)?;
        // After the read: the classes of the events read are in it.
        if self.recorder.refresh_template() {
            self.send_new_classes(s)?;
        }
        Ok(())
    }

    /// Sends, as a metadata packet of their own, the event classes the
    /// process's metadata has now that were not sent (registered at run
    /// time, or described by their first event), and reads its events by
    /// it from now on.
    fn send_new_classes(&mut self, s: &mut Session) -> Result<(), Fault> {
        let pid = self.recorder.pid();
        let text = self
            .recorder
            .metadata()
            .map_err(|e| Fault::Feed(format!("process {pid}: {e}")))?;
        let (plan, spare_id) = plan_of(&text, pid)?;
        self.plan = plan;
        self.spare_id = spare_id;
        let (_, classes) = event_classes(&text);
        let awaiting = awaiting(&text);
        let mut more = String::new();
        for (id, block) in &classes {
            if awaiting.contains(id) {
                continue;
            }
            if self.sent_classes.contains(id) {
                if !self.redeclared && !self.metadata_text.contains(block.as_str()) {
                    self.redeclared = true;
                    crate::output::say!(
                        "tape record: {}: event class {id} was described again after it was \
                         sent; the relay's trace keeps the first description",
                        self.path
                    );
                }
                continue;
            }
            more.push_str(block);
            self.sent_classes.insert(*id);
        }
        if more.is_empty() {
            return Ok(());
        }
        let packet = wire::metadata_packet(
            &self.recorder.uuid(),
            more.as_bytes(),
            cfg!(target_endian = "little"),
        );
        s.relay.send_metadata(self.metadata, &packet)?;
        self.metadata_text.push_str(&more);
        Ok(())
    }

    /// Sends what [`Feed::take`] read, and at a `tick` the idle streams'
    /// beacons.
    pub(crate) fn send(&mut self, s: &mut Session, tick: bool) -> Result<(), Fault> {
        for o in &mut self.streams {
            o.fed = false;
        }
        self.count(s)?;
        let mut taken = std::mem::take(&mut self.taken).into_iter();
        while let Some(mut t) = taken.next() {
            if let Err(e) = self.send_chunk(s, &mut t) {
                // Sent again (at least once) in the next session.
                self.taken = std::iter::once(t).chain(taken).collect();
                return Err(e);
            }
        }
        // The indexes' replies, read once the turn's packets are all sent
        // (`client.rs`): a refusal is this turn's error.
        s.relay.settle()?;
        // What the relay has now, data and index, need not be kept: asked
        // at each tick, and as soon as a stream keeps `CONFIRM_PAST` (at
        // hundreds of MB/s a tick's packets would pass the cap).
        for o in &mut self.streams {
            if (tick || o.kept_bytes >= CONFIRM_PAST)
                && !o.unconfirmed.is_empty()
                && !s.relay.data_pending(o.handle, o.sent - 1)?
            {
                for k in o.unconfirmed.drain(..) {
                    self.recorder.recycle(k.packet);
                }
                o.kept_bytes = 0;
            }
        }
        if tick {
            self.beacons(s)?;
            // Each stream's own reading (as each stream of LTTng's has its
            // timer): two streams' beacons never tie, which a live viewer
            // warns of.
            for o in &mut self.streams {
                o.tick = self.recorder.clock_now();
            }
        }
        Ok(())
    }

    /// Streams for the rings found since the last turn, each begun with
    /// an empty packet at its ring's birth; published to viewers.
    fn add_streams(&mut self, s: &mut Session) -> Result<(), Fault> {
        let before = self.streams.len();
        for i in before..self.recorder.stream_count() {
            let name = self.recorder.stream_name(i);
            let handle = s.relay.add_stream(&name, &self.path, 0)?;
            // No earlier than what a viewer may have shown (its ring was
            // made, its clock read, before its file appeared).
            let mut born = self.recorder.stream_created(i);
            let horizon = s.horizon(self.source);
            if born <= horizon {
                // Streams begun together would tie, which a live viewer
                // warns of: each a count later (a few clock ticks, still
                // before its first event, made after its ring).
                s.ties += 1;
                born = horizon + s.ties;
            }
            let mut head = vec![0u8; self.recorder.packet_head_size(i)];
            self.recorder.packet_head(
                i,
                &mut head,
                &PacketTimes {
                    begin: born,
                    end: born,
                    seq: 0,
                    discarded: 0,
                    events: 0,
                },
            );
            s.relay.send_packet(handle, 0, &head, 0)?;
            s.relay
                .send_index(&index(handle, 0, &head, born, born, 0, i))?;
            self.streams.push(Out::begun(handle, born));
        }
        if self.streams.len() > before {
            s.relay.streams_sent()?;
        }
        Ok(())
    }

    /// The events and last time of every chunk of an open packet taken
    /// (the ring says how many bytes, not how many events): each decoded
    /// once, with the trace's metadata as sent (after the turn's read, so
    /// that its classes are in it), and told to the consumer.
    fn count(&mut self, s: &mut Session) -> Result<(), Fault> {
        for k in 0..self.taken.len() {
            if self.taken[k].counted {
                continue;
            }
            let (i, packet) = (self.taken[k].chunk.stream, &self.taken[k].chunk.packet);
            let name = self.recorder.stream_name(i);
            let (last, events) = match self.last_event(packet, &name) {
                Ok(r) => r,
                // An event whose class the description read so far lacks:
                // the template read again (whatever its file looks like),
                // its new classes sent, and the events decoded again. A
                // fallback: `publish` reads the template after the rings,
                // and a file written in the last second whatever its
                // stamp; this is for a rewrite that looks unchanged (an
                // inode reused within the clock's tick) met later.
                Err(Fault::Feed(e)) if e.contains("unknown event id") => {
                    self.recorder.reread_template();
                    self.send_new_classes(s)?;
                    self.last_event(&self.taken[k].chunk.packet, &name)?
                }
                Err(e) => return Err(e),
            };
            let t = &mut self.taken[k];
            (t.last, t.events, t.counted) = (last, events, true);
            self.recorder.took(i, events);
        }
        Ok(())
    }

    /// Sends chunk `t` as a packet of its own, with its index; moves its
    /// ring's mark past it.
    fn send_chunk(&mut self, s: &mut Session, t: &mut Taken) -> Result<(), Fault> {
        let c = &t.chunk;
        let i = c.stream;
        let head_size = self.recorder.packet_head_size(i);
        let content = c.packet.get(head_size..).unwrap_or_default();
        let content_len = content.len();
        // A chunk without events is sent only to state losses the stream
        // has not yet stated (events dropped after the last one taken: at
        // a stream's end no later packet would carry them).
        if content_len == 0 && c.lost.total() <= self.streams[i].discarded {
            return Ok(());
        }
        // The stream's state changes only once the packet is sent: a chunk
        // whose sending fails is sent again in the next session, as is.
        let o = &mut self.streams[i];
        o.fed = true;
        let first_ts = content
            .get(2..EVENT_HEADER)
            .map_or(c.ts_begin, |b| u64::from_ne_bytes(b.try_into().expect("8")));
        if first_ts < o.beacon {
            self.sent.late += 1;
            if self.sent.late == 1 {
                crate::output::say!(
                    "tape record: an event of {} is older than the time a live viewer was \
                     told the stream had reached (its thread was held between taking its \
                     time and publishing it for more than a live-timer tick): it is in the \
                     relay's trace; a live viewer may stop at it",
                    self.recorder.stream_name(i)
                );
            }
        }
        let begin = o.last_end.max(first_ts.min(o.beacon));
        let end = t.last.max(begin);
        // The losses as the consumer counted them (the owner's and the
        // events overwritten before they were taken), cumulative.
        let discarded = o.discarded.max(c.lost.total());
        // The chunk's buffer becomes the packet kept (no copy); given back
        // to the chunk if the sending fails.
        let mut packet = std::mem::take(&mut t.chunk.packet);
        let times = PacketTimes {
            begin,
            end,
            seq: o.sent,
            discarded,
            events: content_len,
        };
        self.recorder
            .packet_head(i, &mut packet[..head_size], &times);
        // From here a failure may leave the packet (or part of it) in the
        // old session: sent again, it is counted as such.
        if t.tried {
            self.sent.resent += t.events;
        }
        t.tried = true;
        let sent = s
            .relay
            .send_packet(o.handle, o.sent, &packet, 0)
            .and_then(|()| {
                s.relay
                    .send_index(&index(o.handle, o.sent, &packet, begin, end, discarded, i))
            });
        if let Err(e) = sent {
            t.chunk.packet = packet;
            return Err(e.into());
        }
        o.sent += 1;
        o.last_end = end;
        o.discarded = discarded;
        s.advance(self.source, end);
        let packet_len = packet.len();
        o.kept_bytes += packet_len;
        s.kept_order += 1;
        o.unconfirmed.push_back(Kept {
            packet,
            times,
            events: t.events,
            order: s.kept_order,
        });
        self.sent.packets += 1;
        self.sent.bytes += packet_len as u64;
        self.sent.events += t.events;
        self.sent.lost = self.streams.iter().map(|o| o.discarded).sum();
        self.recorder
            .set_mark(i, t.chunk.end, t.chunk.before + t.events);
        Ok(())
    }

    /// The last event's time in `packet` (a chunk of an open ring packet),
    /// and its number of events: decoded with the trace's metadata.
    fn last_event(&self, packet: &[u8], name: &str) -> Result<(u64, u64), Fault> {
        crate::reader::put_packet(&self.packet_file, packet).map_err(|e| {
            Fault::Feed(format!("the copy of ring {name}'s packet (in memory): {e}"))
        })?;
        let mut st = StreamReader::from_file(
            self.plan.clone(),
            Arc::clone(&self.packet_file),
            &PathBuf::from(name),
            packet.len() as u64,
        );
        let mut n = 0;
        loop {
            match st.peek().map_err(|e| Fault::Feed(e.to_string()))? {
                Next::End => break,
                Next::Lost(..) => st.take_lost(),
                Next::Event(_) => {
                    n += 1;
                    st.emit(&mut Discard)
                        .map_err(|e| Fault::Feed(e.to_string()))?;
                }
            }
        }
        Ok((st.clock_value(), n))
    }

    /// The largest share of a ring's room its last turn took
    /// ([`tape_consumer::record::Recorder::fill`]).
    pub(crate) fn fill(&self) -> f64 {
        self.recorder.fill()
    }

    /// Bytes of the unconfirmed packets it keeps.
    pub(crate) fn kept_bytes(&self) -> usize {
        self.streams.iter().map(|o| o.kept_bytes).sum()
    }

    /// The session's order of the oldest unconfirmed packet it keeps.
    pub(crate) fn oldest_kept(&self) -> Option<u64> {
        oldest_kept(&self.streams)
    }

    /// Drops its oldest unconfirmed packet kept (the session keeps too
    /// much: [`Options::keep_unconfirmed`]), its events counted as not
    /// kept; its bytes.
    pub(crate) fn drop_oldest_kept(&mut self) -> usize {
        let Some(k) = drop_oldest_kept(&mut self.streams, &mut self.sent) else {
            return 0;
        };
        let len = k.packet.len();
        self.recorder.recycle(k.packet);
        len
    }

    /// A beacon for every stream that got nothing this turn, at the time
    /// its clock was read at the tick before (if later than what it sent).
    fn beacons(&mut self, s: &mut Session) -> Result<(), Fault> {
        for (i, o) in self.streams.iter_mut().enumerate() {
            let Some(t) = o.tick else { continue };
            if o.fed || t <= o.last_end.max(o.beacon) {
                continue;
            }
            beacon(s, self.source, o, i, t)?;
            self.sent.beacons += 1;
        }
        Ok(())
    }

    /// Ends the trace's data: the rings read to their end (the process
    /// exited, or the recording stops) and sent, the relay waited for
    /// until it has every packet, and every stream brought to the trace's
    /// last time by a beacon, so that a live viewer, which shows an event
    /// only once every stream has passed it, can show the last ones. The
    /// streams stay open, beaconed at each tick ([`Feed::send`]), until
    /// [`Feed::close`] closes them with the session (after
    /// [`Session::close_chunk`]).
    ///
    /// A process that `died` (gone without exiting: its rings left) gets
    /// a last event, `tape.process.died`, declared then (incremental
    /// metadata), after what its rings held: the trace says that it ends
    /// there because its process died.
    pub(crate) fn end(&mut self, s: &mut Session, died: bool) -> Result<(), Fault> {
        self.turn(s, true)?;
        if died {
            self.say_death(s)?;
        }
        // The relay takes a beacon only once a stream's packets are all
        // in (data and index).
        for o in &self.streams {
            s.relay.wait_for_data(o.handle, o.sent - 1)?;
        }
        let last = self.streams.iter().map(|o| o.last_end.max(o.beacon)).max();
        for (i, o) in self.streams.iter_mut().enumerate() {
            let Some(t) = last.filter(|&t| t > o.last_end.max(o.beacon)) else {
                continue;
            };
            // Past the last time and apart from one another: a live viewer
            // warns of streams whose next messages tie.
            let t = t + 1 + i as u64;
            beacon(s, self.source, o, i, t)?;
            self.sent.beacons += 1;
        }
        Ok(())
    }

    /// Makes the trace again in a new session (after an outage,
    /// [`Session::reconnect`]): its metadata, and each stream begun with
    /// an empty packet that states its losses as of the packets sent
    /// again after it (those the old session had not confirmed), so that
    /// a reader counts in the first new packet what the outage cost.
    pub(crate) fn resume(&mut self, s: &mut Session) -> Result<(), Fault> {
        // A trace of its own (another UUID): the relay's disk then holds
        // the trace before the outage and the one after as two traces,
        // which readers do not take for one with packets twice.
        let old = tape_ctf::uuid_string(&self.recorder.uuid());
        let uuid = random_id();
        self.recorder.set_uuid(uuid);
        self.metadata_text = self.metadata_text.replacen(
            &format!("uuid = \"{old}\""),
            &format!("uuid = \"{}\"", tape_ctf::uuid_string(&uuid)),
            1,
        );
        self.metadata = s.relay.add_stream("metadata", &self.path, 0)?;
        let meta = wire::metadata_packet(
            &self.recorder.uuid(),
            self.metadata_text.as_bytes(),
            cfg!(target_endian = "little"),
        );
        s.relay.send_metadata(self.metadata, &meta)?;
        for i in 0..self.streams.len() {
            let name = self.recorder.stream_name(i);
            let head_size = self.recorder.packet_head_size(i);
            let handle = s.relay.add_stream(&name, &self.path, 0)?;
            let o = &mut self.streams[i];
            o.handle = handle;
            let first = o.unconfirmed.front();
            let t = first.map_or(o.last_end, |k| k.times.begin);
            let discarded = first.map_or(o.discarded, |k| k.times.discarded);
            let mut head = vec![0u8; head_size];
            self.recorder.packet_head(
                i,
                &mut head,
                &PacketTimes {
                    begin: t,
                    end: t,
                    seq: 0,
                    discarded,
                    events: 0,
                },
            );
            s.relay.send_packet(handle, 0, &head, 0)?;
            s.relay
                .send_index(&index(handle, 0, &head, t, t, discarded, i))?;
            o.sent = 1;
            o.beacon = t;
            o.tick = None;
            let recorder = &self.recorder;
            send_kept_again(s, o, i, &mut self.sent.resent, |k, seq| {
                let times = PacketTimes { seq, ..k.times };
                recorder.packet_head(i, &mut k.packet[..head_size], &times);
            })?;
            s.advance(self.source, o.last_end);
        }
        s.relay.streams_sent()?;
        Ok(())
    }

    /// The trace's last event, `tape.process.died { pid, how }`, in its
    /// first stream, after every event sent: its event class sent first
    /// as a metadata packet of its own.
    fn say_death(&mut self, s: &mut Session) -> Result<(), Fault> {
        let Ok(id) = u16::try_from(self.spare_id) else {
            crate::output::say!(
                "tape record: {}: its process died; its trace has no event id left to say so",
                self.path
            );
            return Ok(());
        };
        if self.streams.is_empty() {
            return Ok(());
        }
        let tsdl = format!(
            "\nevent {{\n    name = \"{DIED}\";\n    id = {id};\n    stream_id = 0;\n    fields := \
             struct {{\n        integer {{ size = 32; align = 8; signed = 0; base = 10; }} pid;\n        \
             string {{ encoding = UTF8; }} how;\n    }};\n}};\n"
        );
        let packet = wire::metadata_packet(
            &self.recorder.uuid(),
            tsdl.as_bytes(),
            cfg!(target_endian = "little"),
        );
        s.relay.send_metadata(self.metadata, &packet)?;
        let ts = self
            .streams
            .iter()
            .map(|o| o.last_end.max(o.beacon))
            .max()
            .unwrap_or(0)
            .max(s.horizon(self.source))
            // Just after (a microsecond or less): shown after, not beside.
            + 1000;
        let mut event = Vec::new();
        event.extend_from_slice(&id.to_ne_bytes());
        event.extend_from_slice(&ts.to_ne_bytes());
        event.extend_from_slice(&self.recorder.pid().to_ne_bytes());
        event.extend_from_slice(DIED_HOW.as_bytes());
        event.push(0);
        let i = 0;
        let head_size = self.recorder.packet_head_size(i);
        let mut packet = vec![0u8; head_size];
        let o = &mut self.streams[i];
        self.recorder.packet_head(
            i,
            &mut packet,
            &PacketTimes {
                begin: ts,
                end: ts,
                seq: o.sent,
                discarded: o.discarded,
                events: event.len(),
            },
        );
        packet.extend_from_slice(&event);
        s.relay.send_packet(o.handle, o.sent, &packet, 0)?;
        s.relay
            .send_index(&index(o.handle, o.sent, &packet, ts, ts, o.discarded, i))?;
        o.sent += 1;
        o.last_end = ts;
        s.advance(self.source, ts);
        self.sent.died = true;
        Ok(())
    }

    /// Closes the trace's streams (after [`Feed::end`] and the linger): a
    /// live viewer's view of them ends.
    pub(crate) fn close(self, s: &mut Session) -> Result<Sent, Fault> {
        for o in &self.streams {
            s.relay.close_stream(o.handle, o.sent - 1)?;
        }
        s.relay.close_stream(self.metadata, u64::MAX)?;
        Ok(self.sent)
    }
}

/// The decoding plan of a process's metadata `text` (for the events of
/// open packets), and an event id none of its classes has; an error when
/// babeltrace2 2.0 would refuse the text (see [`beyond_babeltrace2`]).
fn plan_of(text: &str, pid: u32) -> Result<(Arc<TracePlan>, u64), Fault> {
    let feed = |e: String| Fault::Feed(format!("process {pid}: its metadata: {e}"));
    let parsed = tape_ctf::parse_metadata(text).map_err(|e| feed(e.to_string()))?;
    if let Some(why) = beyond_babeltrace2(&parsed, text) {
        return Err(feed(why));
    }
    let trace = parsed.trace;
    let plan = Arc::new(TracePlan::new(&trace).map_err(feed)?);
    let spare = trace
        .events
        .iter()
        .filter(|e| e.stream_id.unwrap_or(0) == 0)
        .map(|e| e.id + 1)
        .max()
        .unwrap_or(0);
    Ok((plan, spare))
}

/// What in a process's metadata babeltrace2 2.0 would refuse, said with
/// the event class it is in, if any: a metadata on the relay that one
/// reader refuses stops babeltrace2 reading *every* trace of the session
/// (it reads a session's directory as one), so such a process is left
/// out (said, and counted in the summary) before anything of it is sent,
/// or, for a class registered later, before the class and its events.
/// A process writes its own template, so an older tape or a hostile
/// process of the same user can put anything there.
fn beyond_babeltrace2(parsed: &tape_ctf::Parsed, text: &str) -> Option<String> {
    let e = parsed.beyond_babeltrace2.first()?;
    let line_start = text
        .split_inclusive('\n')
        .take(e.line.saturating_sub(1) as usize)
        .map(str::len)
        .sum::<usize>();
    let class = text[..line_start.min(text.len())]
        .rfind("\nevent {\n")
        .and_then(|at| {
            text[at..]
                .lines()
                .find_map(|l| l.trim().strip_prefix("id = "))
                .and_then(|v| v.trim_end_matches(';').parse::<u64>().ok())
        })
        .and_then(|id| parsed.trace.events.iter().find(|c| c.id == id));
    let place = match class {
        Some(c) => format!("event class {} ({})", c.id, c.name),
        None => "the trace's description".to_owned(),
    };
    Some(format!(
        "{place}, line {}, column {}: {}; its trace would make babeltrace2 refuse the \
         whole session",
        e.line, e.col, e.message
    ))
}

/// A metadata text as tape writes it: what comes before its event
/// classes, and each class (`event {` ... `};` lines) with its id.
fn event_classes(text: &str) -> (&str, Vec<(u64, String)>) {
    let start = text.find("\nevent {\n").map_or(text.len(), |i| i + 1);
    let mut classes = Vec::new();
    let mut rest = &text[start..];
    while let Some(body) = rest.strip_prefix("event {\n") {
        let end = body.find("\n};\n").map_or(body.len(), |i| i + 4);
        let block = &rest[..end + "event {\n".len()];
        let id = block
            .lines()
            .find_map(|l| l.trim().strip_prefix("id = "))
            .and_then(|v| v.trim_end_matches(';').parse().ok())
            .unwrap_or(u64::MAX);
        classes.push((id, block.to_owned()));
        rest = rest[block.len()..].trim_start_matches('\n');
    }
    (&text[..start], classes)
}

/// The ids the metadata lists as awaiting their first event's description
/// (`env` entry [`tape_consumer::record::AWAITING_ENV`]).
fn awaiting(text: &str) -> BTreeSet<u64> {
    let key = format!("{} = \"", tape_consumer::record::AWAITING_ENV);
    text.find(&key)
        .and_then(|i| text[i + key.len()..].split('"').next())
        .map(|ids| ids.split(',').filter_map(|i| i.parse().ok()).collect())
        .unwrap_or_default()
}

/// The trace's path in its relay session: `<program>-<pid>`, the program
/// name's characters other than letters, digits, `-`, `_` and `.` made
/// `_` (the relay takes the path as directories), no leading `.`.
pub(crate) fn trace_path(program: &str, pid: u32) -> String {
    let name: String = program
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = name.trim_start_matches('.');
    let name = if name.is_empty() { "process" } else { name };
    format!("{name}-{pid}")
}

/// The session's order of the oldest unconfirmed packet `streams` keep.
pub(super) fn oldest_kept(streams: &[Out]) -> Option<u64> {
    streams
        .iter()
        .filter_map(|o| o.unconfirmed.front().map(|k| k.order))
        .min()
}

/// Takes the oldest unconfirmed packet `streams` keep, its events
/// counted in `sent` as not kept.
pub(super) fn drop_oldest_kept(streams: &mut [Out], sent: &mut Sent) -> Option<Kept> {
    let o = streams
        .iter_mut()
        .filter(|o| !o.unconfirmed.is_empty())
        .min_by_key(|o| o.unconfirmed.front().map(|k| k.order))?;
    let k = o.unconfirmed.pop_front()?;
    o.kept_bytes -= k.packet.len();
    sent.unkept += k.events;
    Some(k)
}

/// Sends stream `i`'s unconfirmed packets again (a new session, after an
/// outage), each restamped by `stamp` with its number there, counting
/// their events in `resent` as each goes.
pub(super) fn send_kept_again(
    s: &mut Session,
    o: &mut Out,
    i: usize,
    resent: &mut u64,
    mut stamp: impl FnMut(&mut Kept, u64),
) -> Result<(), Fault> {
    for k in &mut o.unconfirmed {
        stamp(k, o.sent);
        s.relay.send_packet(o.handle, o.sent, &k.packet, 0)?;
        s.relay.send_index(&index(
            o.handle,
            o.sent,
            &k.packet,
            k.times.begin,
            k.times.end,
            k.times.discarded,
            i,
        ))?;
        o.sent += 1;
        *resent += k.events;
    }
    Ok(())
}

/// Sends stream `i`'s beacon at `t` (an index entry without a packet:
/// no event of it before `t`), and takes `t` as its and the session's
/// latest time.
pub(super) fn beacon(
    s: &mut Session,
    source: u32,
    o: &mut Out,
    i: usize,
    t: u64,
) -> Result<(), Fault> {
    s.relay.send_index(&wire::Index {
        handle: o.handle,
        net_seq_num: o.sent - 1,
        ts_end: t,
        stream_instance_id: i as u64,
        ..wire::Index::default()
    })?;
    o.beacon = t;
    s.advance(source, t);
    Ok(())
}

/// The index entry of a packet sent as `packet` (header, context,
/// events: its whole size).
pub(super) fn index(
    handle: u64,
    net_seq_num: u64,
    packet: &[u8],
    begin: u64,
    end: u64,
    discarded: u64,
    instance: usize,
) -> wire::Index {
    let bits = packet.len() as u64 * 8;
    wire::Index {
        handle,
        net_seq_num,
        packet_size_bits: bits,
        content_size_bits: bits,
        ts_begin: begin,
        ts_end: end,
        events_discarded: discarded,
        stream_class: 0,
        stream_instance_id: instance as u64,
        packet_seq_num: net_seq_num,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tape_ctf::{EnvValue, EventClass, Field, Integer, Struct, Trace, Type};

    /// A trace description as tape's writer makes it: its prelude, then
    /// event classes with nested structs (whose `};` are indented).
    fn text(awaiting: &str) -> String {
        let mut t = Trace::new([3; 16]);
        t.env.push(("hostname".into(), EnvValue::Str("h".into())));
        if !awaiting.is_empty() {
            t.env.push((
                tape_consumer::record::AWAITING_ENV.into(),
                EnvValue::Str(awaiting.into()),
            ));
        }
        let u32_ = || Type::Integer(Integer::unsigned(32));
        let inner = Type::Struct(Struct::new(vec![Field::new("a", u32_())]));
        for (name, id) in [("app.first", 0), ("app.second", 1), ("app.third", 7)] {
            t.events.push(EventClass::new(
                name,
                id,
                Struct::new(vec![
                    Field::new("x", u32_()),
                    Field::new("s", inner.clone()),
                ]),
            ));
        }
        t.to_tsdl().unwrap()
    }

    #[test]
    fn a_metadata_text_splits_into_its_prelude_and_event_classes() {
        let full = text("1,7");
        let (prelude, classes) = event_classes(&full);
        assert!(prelude.starts_with("/* CTF 1.8 */"), "{prelude}");
        assert!(!prelude.contains("event {"), "{prelude}");
        let ids: Vec<u64> = classes.iter().map(|c| c.0).collect();
        assert_eq!(ids, [0, 1, 7]);
        for (id, block) in &classes {
            assert!(
                block.starts_with("event {\n") && block.ends_with("\n};\n"),
                "{block}"
            );
            assert_eq!(block.matches("\nevent {").count(), 0, "{id}: {block}");
        }
        // Nothing lost: the pieces make the text again.
        let again: String = std::iter::once(prelude.to_owned())
            .chain(classes.iter().map(|c| c.1.clone()))
            .collect();
        let squeeze = |s: &str| s.replace("\n\n", "\n");
        assert_eq!(squeeze(&again).trim_end(), squeeze(&full).trim_end());
        // And each piece parses with the prelude, as a viewer reads them.
        for (_, block) in &classes {
            let one = format!("{prelude}{block}");
            tape_ctf::parse_metadata_strict(&one).unwrap_or_else(|e| panic!("{e}: {one}"));
        }
        assert_eq!(awaiting(&full), BTreeSet::from([1, 7]));
        assert_eq!(awaiting(&text("")), BTreeSet::new());
    }

    #[test]
    fn trace_paths_are_safe_directory_names() {
        for (program, want) in [
            ("flight", "flight-7"),
            ("../etc", "_etc-7"),
            ("a b/c", "a_b_c-7"),
            ("", "process-7"),
            ("...", "process-7"),
        ] {
            assert_eq!(trace_path(program, 7), want, "{program:?}");
        }
    }
}
