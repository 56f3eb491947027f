//! The kernel's events beside the programs' in a relay session
//! (`tape record --relayd URL --kernel EVENTS`): the kernel trace that
//! `tape record -o DIR --kernel` writes to `DIR/kernel/`, sent instead as
//! the session's trace `kernel`, a stream per CPU (`channel0_N`), as
//! LTTng's consumer sends a kernel session's.
//!
//! ```text
//!  ftrace instance (tape_consumer::kernel)      tape record --relayd      lttng-relayd
//!  per-CPU raw pages -> kept records ->         KernelFeed: "kernel"  --> HOST/SESSION-DATE/
//!  packets in memory (64 KiB, or a tick's)      packets, indexes,          kernel/channel0_N
//!                                               beacons, kept until        prog-4242/...
//!                                               confirmed
//! ```
//!
//! It follows the relay's rules of the programs' traces (`producer.rs`):
//! its metadata states the clock the session states for the programs of
//! its clock source (it starts once a program's clock is known, so that
//! the times of both compare exactly); each stream begins with an empty
//! packet; at each tick of the live timer every CPU's events so far make
//! a packet, and an idle CPU gets a beacon at the clock read the tick
//! before; packets are kept until the relay confirms them
//! (`DATA_PENDING`), sent again in a new session after an outage under a
//! new UUID, and dropped oldest first past `--keep-unconfirmed`, counted.
//! What the kernel lost is in each packet's `events_discarded`. The
//! metadata's counts (`tape_ftrace_lost`) are not sent: a relay's
//! metadata can add, never change; the summary says them.

use std::collections::VecDeque;

use tape_consumer::kernel::trace::{packet_head, restamp, KernelPacket};
use tape_consumer::kernel::{KernelRecorder, KernelStats};
use tape_consumer::record::PacketTimes;

use super::producer::{
    beacon, drop_oldest_kept, index, oldest_kept, random_id, send_kept_again, Fault, Kept, Out,
    Sent, Session,
};
use super::wire;

/// The kernel trace's path in the session (LTTng's).
pub(crate) const PATH: &str = "kernel";

/// The kernel's recorder, and its trace on the relay once started.
pub(crate) struct KernelFeed {
    pub(crate) recorder: KernelRecorder,
    /// Started: its metadata and streams made in the session.
    started: bool,
    metadata: u64,
    uuid: [u8; 16],
    metadata_text: String,
    streams: Vec<Out>,
    /// Packets made and not yet sent (before the start, or after a
    /// failure: sent in the next session).
    pending: VecDeque<KernelPacket>,
    pub(crate) sent: Sent,
    /// What the kernel took and lost, once stopped.
    pub(crate) stats: Option<KernelStats>,
}

impl KernelFeed {
    /// The kernel's recording (already tracing), to be sent once the
    /// session knows a clock of its source.
    pub(crate) fn new(recorder: KernelRecorder) -> KernelFeed {
        KernelFeed {
            recorder,
            started: false,
            metadata: 0,
            uuid: random_id(),
            metadata_text: String::new(),
            streams: Vec::new(),
            pending: VecDeque::new(),
            sent: Sent::default(),
            stats: None,
        }
    }

    fn source(&self) -> u32 {
        self.recorder.clock_source()
    }

    /// Makes the trace in the session once a clock of its source is known
    /// (a program's trace started): its metadata, and a stream per CPU
    /// begun at the recording's start.
    fn start(&mut self, s: &mut Session) -> Result<(), Fault> {
        let source = self.source();
        let Some(&(_, clock)) = s.clocks.iter().find(|c| c.0 == source) else {
            return Ok(());
        };
        self.metadata_text = self
            .recorder
            .metadata(clock, self.uuid)
            .map_err(Fault::Feed)?;
        self.send_metadata(s)?;
        let mut born = self.recorder.started_at();
        let horizon = s.horizon(source);
        if born <= horizon {
            s.ties += 1;
            born = horizon + s.ties;
        }
        for (i, cpu) in self.recorder.cpus().into_iter().enumerate() {
            let handle = s.relay.add_stream(&format!("channel0_{cpu}"), PATH, 0)?;
            // Apart from one another: a live viewer warns of ties.
            let t = born + i as u64;
            self.begin_stream(s, handle, cpu, i, t, 0)?;
            self.streams.push(Out::begun(handle, t));
        }
        s.relay.streams_sent()?;
        self.started = true;
        Ok(())
    }

    /// Its metadata stream made in the session, and the text sent.
    fn send_metadata(&mut self, s: &mut Session) -> Result<(), Fault> {
        self.metadata = s.relay.add_stream("metadata", PATH, 0)?;
        let packet = wire::metadata_packet(
            &self.uuid,
            self.metadata_text.as_bytes(),
            cfg!(target_endian = "little"),
        );
        s.relay.send_metadata(self.metadata, &packet)?;
        Ok(())
    }

    /// Sends stream `i`'s empty first packet at `t`, stating `discarded`.
    fn begin_stream(
        &self,
        s: &mut Session,
        handle: u64,
        cpu: u32,
        i: usize,
        t: u64,
        discarded: u64,
    ) -> Result<(), Fault> {
        let mut head = Vec::new();
        packet_head(&mut head, &self.uuid, cpu, [t, t, 0, discarded], 0);
        s.relay.send_packet(handle, 0, &head, 0)?;
        s.relay
            .send_index(&index(handle, 0, &head, t, t, discarded, i))?;
        Ok(())
    }

    /// One turn: the kernel's pages taken; once started, the packets
    /// made sent (at a `tick`, every CPU's events so far in one), what
    /// the relay has confirmed let go, and idle CPUs beaconed.
    pub(crate) fn turn(&mut self, s: &mut Session, tick: bool) -> Result<(), Fault> {
        self.recorder.poll().map_err(Fault::Feed)?;
        if !self.started {
            self.start(s)?;
            if !self.started {
                return Ok(());
            }
        }
        if tick {
            self.recorder.flush().map_err(Fault::Feed)?;
        }
        self.send(s, tick)
    }

    fn send(&mut self, s: &mut Session, tick: bool) -> Result<(), Fault> {
        for o in &mut self.streams {
            o.fed = false;
        }
        self.pending.extend(self.recorder.take_packets());
        while let Some(p) = self.pending.pop_front() {
            if let Err((e, p)) = self.send_packet(s, p) {
                // Sent again (at least once) in the next session.
                self.pending.push_front(p);
                return Err(e);
            }
        }
        // The indexes' replies (`client.rs`): a refusal is this turn's error.
        s.relay.settle()?;
        for o in &mut self.streams {
            if tick && !o.unconfirmed.is_empty() && !s.relay.data_pending(o.handle, o.sent - 1)? {
                o.unconfirmed.clear();
                o.kept_bytes = 0;
            }
        }
        if tick {
            let now = self.recorder.clock_now();
            let source = self.source();
            for (i, o) in self.streams.iter_mut().enumerate() {
                if let Some(t) = o.tick {
                    if !o.fed && t > o.last_end.max(o.beacon) {
                        beacon(s, source, o, i, t)?;
                        self.sent.beacons += 1;
                    }
                }
                // (a reading a stream apart, as each of LTTng's has its timer)
                o.tick = now.map(|t| t + i as u64);
            }
        }
        Ok(())
    }

    /// Sends packet `p` (restamped: its stream's next number, no earlier
    /// than what the stream sent); on a failure, the error and the packet.
    fn send_packet(
        &mut self,
        s: &mut Session,
        mut p: KernelPacket,
    ) -> Result<(), (Fault, KernelPacket)> {
        let source = self.source();
        let o = &mut self.streams[p.stream];
        if p.begin < o.beacon {
            self.sent.late += 1;
        }
        let begin = p.begin.max(o.last_end);
        let end = p.end.max(begin);
        let seq = o.sent;
        restamp(&mut p.bytes, &self.uuid, [begin, end, seq, p.discarded]);
        let sent = s
            .relay
            .send_packet(o.handle, seq, &p.bytes, 0)
            .and_then(|()| {
                s.relay.send_index(&index(
                    o.handle,
                    seq,
                    &p.bytes,
                    begin,
                    end,
                    p.discarded,
                    p.stream,
                ))
            });
        if let Err(e) = sent {
            return Err((e.into(), p));
        }
        o.fed = true;
        o.sent += 1;
        o.last_end = end;
        o.discarded = p.discarded;
        s.advance(source, end);
        s.kept_order += 1;
        o.kept_bytes += p.bytes.len();
        self.sent.packets += 1;
        self.sent.bytes += p.bytes.len() as u64;
        self.sent.events += p.events;
        self.sent.lost = self.streams.iter().map(|o| o.discarded).sum();
        let o = &mut self.streams[p.stream];
        o.unconfirmed.push_back(Kept {
            times: PacketTimes {
                begin,
                end,
                seq,
                discarded: p.discarded,
                events: p.bytes.len(),
            },
            packet: p.bytes,
            events: p.events,
            order: s.kept_order,
        });
        Ok(())
    }

    /// Ends the kernel's recording: tracing stopped, everything left sent,
    /// the relay waited for until it has it, every stream brought to the
    /// last time by a beacon (as a program's trace ends: `Feed::end`).
    /// Its instance goes when the feed is dropped.
    pub(crate) fn end(&mut self, s: &mut Session) -> Result<(), Fault> {
        if self.stats.is_none() {
            self.stats = Some(self.recorder.stop().map_err(Fault::Feed)?);
        }
        if !self.started {
            self.start(s)?;
            if !self.started {
                return Ok(());
            }
        }
        self.send(s, false)?;
        for o in &self.streams {
            s.relay.wait_for_data(o.handle, o.sent - 1)?;
        }
        let source = self.source();
        let last = self.streams.iter().map(|o| o.last_end.max(o.beacon)).max();
        for (i, o) in self.streams.iter_mut().enumerate() {
            let Some(t) = last.filter(|&t| t > o.last_end.max(o.beacon)) else {
                continue;
            };
            beacon(s, source, o, i, t + 1 + i as u64)?;
            self.sent.beacons += 1;
        }
        Ok(())
    }

    /// Makes the trace again in a new session (after an outage): a new
    /// UUID, its metadata, each stream begun with the losses as of its
    /// first unconfirmed packet, then those sent again.
    pub(crate) fn resume(&mut self, s: &mut Session) -> Result<(), Fault> {
        if !self.started {
            return Ok(());
        }
        let old = tape_ctf::uuid_string(&self.uuid);
        self.uuid = random_id();
        self.metadata_text = self.metadata_text.replacen(
            &format!("uuid = \"{old}\""),
            &format!("uuid = \"{}\"", tape_ctf::uuid_string(&self.uuid)),
            1,
        );
        // The packets made from now on carry it too.
        self.recorder.set_uuid(self.uuid);
        self.send_metadata(s)?;
        let cpus = self.recorder.cpus();
        let source = self.source();
        for (i, &cpu) in cpus.iter().enumerate() {
            let handle = s.relay.add_stream(&format!("channel0_{cpu}"), PATH, 0)?;
            let (t, discarded) = {
                let o = &self.streams[i];
                let first = o.unconfirmed.front();
                (
                    first.map_or(o.last_end, |k| k.times.begin),
                    first.map_or(o.discarded, |k| k.times.discarded),
                )
            };
            self.begin_stream(s, handle, cpu, i, t, discarded)?;
            let o = &mut self.streams[i];
            o.handle = handle;
            o.sent = 1;
            o.beacon = t;
            o.tick = None;
            let uuid = self.uuid;
            send_kept_again(s, o, i, &mut self.sent.resent, |k, seq| {
                let at = [k.times.begin, k.times.end, seq, k.times.discarded];
                restamp(&mut k.packet, &uuid, at);
            })?;
            s.advance(source, o.last_end);
        }
        s.relay.streams_sent()?;
        Ok(())
    }

    /// Bytes of the unconfirmed packets it keeps.
    pub(crate) fn kept_bytes(&self) -> usize {
        self.streams.iter().map(|o| o.kept_bytes).sum()
    }

    /// The session's order of the oldest unconfirmed packet it keeps.
    pub(crate) fn oldest_kept(&self) -> Option<u64> {
        oldest_kept(&self.streams)
    }

    /// Drops its oldest unconfirmed packet kept, counted as not kept; its
    /// bytes.
    pub(crate) fn drop_oldest_kept(&mut self) -> usize {
        drop_oldest_kept(&mut self.streams, &mut self.sent).map_or(0, |k| k.packet.len())
    }

    /// Closes its streams (with the session, after its chunk).
    pub(crate) fn close(&self, s: &mut Session) -> Result<(), Fault> {
        if !self.started {
            return Ok(());
        }
        for o in &self.streams {
            s.relay.close_stream(o.handle, o.sent - 1)?;
        }
        s.relay.close_stream(self.metadata, u64::MAX)?;
        Ok(())
    }
}
