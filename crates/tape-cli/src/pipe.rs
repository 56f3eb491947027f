//! `tape pipe PID`: ftrace's `trace_pipe` for a running tape process with
//! shared rings (the default; not with `TAPE_SHM=off`): a consuming live read from another
//! process, each event printed once, in time order across threads.
//!
//! Every few milliseconds the reader takes the events each thread
//! published since its last turn, the packet being written included
//! ([`tape_consumer::record::Recorder::poll_chunks`]: the rings' copy protocol;
//! in discard mode the packets read are freed for the threads to reuse,
//! as `tape record` frees them). Each ring's new events are decoded with
//! tape's CTF reader (the packet copied into an anonymous in-memory file,
//! `memfd_create`, the reader's input: no filesystem in the loop, so a
//! busy disk cannot stall the pipe) and held until they are older than
//! the **reordering window** ([`WINDOW`]) counted back from the start of
//! the turn: every ring is read after that moment, so an event older than
//! it by the window was read already, unless its thread was preempted
//! between taking its timestamp and publishing it for longer than the
//! window (then it prints out of order). A turn that takes long (the pipe
//! itself preempted) delays lines, never reorders them. So an event is
//! printed within about 15-35 ms of being emitted (the turn, the window,
//! the decoding), even when its packet is not full.
//!
//! Losses print as `[LOST n EVENTS] in STREAM` lines (`{"lost":n,...}` in
//! JSON) where the reader finds them: events a thread overwrote before the
//! reader took them (overwrite mode: counted exactly from the packets'
//! event counts and the events the reader decoded), and events a thread
//! dropped (discard mode when the reader falls a ring behind, too big,
//! re-entrant).
//!
//! **Consuming**, as `trace_pipe`: once a ring's events are printed (the
//! line written out, not merely taken from the ring), the pipe moves the
//! ring's *mark* past them (the gate's reader mark, in the shared ring,
//! `ring/gate.rs`), right after the event last printed, so that the next
//! `tape pipe` (or `tape record`) starts after it: two pipes in a row
//! print disjoint events, together all of them. Events overwritten
//! between the two are reported by the second as `[LOST n EVENTS]`. A
//! pipe killed (SIGKILL) leaves the mark after the last event it printed
//! and before those held in its window, which it never printed: the next
//! one prints those if the ring still holds them, or reports them lost.
//! The one bound on "once": a pipe killed between a write of its lines
//! and the stores of the marks after it (microseconds, once per turn)
//! leaves that write's lines to the next pipe too, which prints them
//! again (at-least-once), or, if they were overwritten meanwhile, says
//! so on stderr apart from the losses: before each write the pipe stores
//! in the ring how many events past its mark the write holds, and the
//! mark after it clears that (`ring/gate.rs`), so no event is both printed
//! and counted lost. The first
//! reader of a ring starts with what it holds, and does not report what
//! was lost before; neither do later ones report the drops (full, too
//! big) of the time no reader ran, which the saves and `tape stats`
//! count. Saves (`tape ctl save`, a crash dump, `tape recover`) are
//! snapshots: they neither consume nor skip what a pipe consumed.
//!
//! **A filtered pipe consumes nothing** (`--events`): it prints some
//! events only, and one mark per ring cannot leave the others, so it
//! peeks, as ftrace's `trace` file reads without consuming: it starts at
//! the last consuming reader's mark, keeps its place in memory, moves no
//! mark and frees no packet. The next `tape pipe` or `tape record` finds
//! every event it left, and those it printed too (at-least-once across a
//! filtered and a consuming reader); in discard mode, a ring it peeks at
//! fills and then drops, counted, as with no reader.
//!
//! `--format text` prints `tape show`'s lines (whose packet context states
//! no losses: the `[LOST]` lines carry them), `json` its JSON objects,
//! `ftrace` `trace_pipe`'s lines (no header: `trace_pipe` has none).
//!
//! One reader per process: `tape pipe` and `tape record` exclude each
//! other (a second one is refused, naming the first); one after the other,
//! each starts at the mark the one before left. It blocks while the
//! threads are idle, and ends when the process exits, after printing its
//! last events (or at Ctrl-C, after printing what it read).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tape_ctf::decode::{Discard, Next, StreamReader, TextBuf, TimeText, TracePlan};
use tape_ctf::text::{write_event_rest, write_json_line, write_line_prefix};

use crate::output::{output_error, Failure, Format};
use crate::show::LineTime;

/// How long an event is held before it is printed (see the module docs).
pub(crate) const WINDOW: Duration = Duration::from_millis(10);

/// A line waiting for the window to pass.
struct Held {
    t: i128,
    /// Arrival order, for equal times.
    order: u64,
    /// Text: the line after its time and delta; JSON: the whole line.
    rest: Vec<u8>,
    /// Its ring, and its place among that ring's lines ([`Ring::lines`]).
    ring: usize,
    line: u64,
}

/// A line of a ring, in the order read: once it and every line before it
/// are out, the ring's mark moves past its event, so that the next `tape
/// pipe` starts right after what this one printed.
struct Line {
    /// Of an event: the cursor after it, and the ring's events up to it.
    mark: Option<((u64, usize), u64)>,
    printed: bool,
}

/// What the reader knows of a ring.
#[derive(Default)]
struct Ring {
    /// The losses said so far: the owner's drops (from those seen at the
    /// first chunk: earlier ones are not this pipe's), the events
    /// overwritten before they could be read.
    dropped: Option<u64>,
    overwritten: u64,
    /// Events overwritten that the pipe before (killed) may have printed,
    /// said so far.
    maybe_printed: u64,
    /// Its lines not yet printed, with those printed after them, oldest
    /// first; and the place of the first.
    lines: std::collections::VecDeque<Line>,
    first: u64,
}

impl Ring {
    /// A new line of the ring: its place.
    fn push(&mut self, mark: Option<((u64, usize), u64)>) -> u64 {
        self.lines.push_back(Line {
            mark,
            printed: false,
        });
        self.first + self.lines.len() as u64 - 1
    }

    /// Line `line` was printed; the mark of the last event of the lines
    /// now printed from the first on, if they moved it.
    fn printed(&mut self, line: u64) -> Option<((u64, usize), u64)> {
        if let Some(l) = self.lines.get_mut((line - self.first) as usize) {
            l.printed = true;
        }
        let mut mark = None;
        while self.lines.front().is_some_and(|l| l.printed) {
            let l = self.lines.pop_front().expect("a line");
            self.first += 1;
            mark = l.mark.or(mark);
        }
        mark
    }
}

/// `tape pipe TARGET [--format text|json|ftrace] [--events GLOB]`
/// (`events`: the globs, and the patterns as written).
pub(crate) fn pipe(
    target: &str,
    format: Format,
    events: Option<(globset::GlobSet, Vec<String>)>,
) -> Result<(), Failure> {
    let mut p = Pipe::open(target, format, events)?;
    crate::reader::catch_stop();
    let mut out = std::io::stdout().lock();
    let mut idle = Duration::from_millis(1);
    let mut checked = Instant::now();
    let mut ended = false;
    let mut unshared_said = 0;
    loop {
        let unshared = p.reader.unshared_rings();
        if unshared > unshared_said {
            unshared_said = unshared;
            crate::output::say!(
                "tape pipe: process {} has {unshared} ring(s) in private memory (past \
                 TAPE_SHM_MAX, or no room): their threads' events are not seen here",
                p.reader.pid()
            );
        }
        if crate::reader::stopped() {
            ended = true;
        } else if checked.elapsed() >= Duration::from_millis(50) {
            checked = Instant::now();
            ended = !p.reader.process_alive();
        }
        // Every ring is read after this moment (see the module docs).
        let turn = tape::clock::realtime_ns();
        let chunks = p.reader.poll_chunks().map_err(|e| e.to_string())?;
        let came = !chunks.is_empty();
        for c in chunks {
            p.take(c).map_err(Failure::Error)?;
        }
        // Print what the window has passed (everything at the end).
        let horizon = if ended {
            i128::MAX
        } else {
            turn - WINDOW.as_nanos() as i128
        };
        p.print(&mut out, horizon)?;
        if ended {
            return Ok(());
        }
        idle = if came {
            Duration::from_millis(1)
        } else {
            (idle * 2).min(Duration::from_millis(10))
        };
        std::thread::sleep(idle);
    }
}

/// A pipe's reader and what it holds between turns: the lines decoded and
/// not yet printed (the window), each ring's lines and losses.
struct Pipe {
    reader: tape_consumer::record::Recorder,
    format: Format,
    /// The events shown (`--events`), or all.
    events: Option<globset::GlobSet>,
    /// It only peeks (`--events`): it leaves every event to the next
    /// reader, and moves no mark (module docs).
    peek: bool,
    plan: Arc<TracePlan>,
    packet_file: Arc<std::fs::File>,
    rings: HashMap<usize, Ring>,
    held: Vec<Held>,
    order: u64,
    time: LineTime,
    last_printed: Option<i128>,
    symbols: crate::symbols::Symbols,
}

impl Pipe {
    /// Attaches to the process `target` names and reads its metadata; a
    /// pattern of `events` that matches no event yet is said (a
    /// tracepoint registered later may match it: the pipe goes on, as a
    /// pending TAPE_TRACE does).
    fn open(
        target: &str,
        format: Format,
        events: Option<(globset::GlobSet, Vec<String>)>,
    ) -> Result<Pipe, Failure> {
        let dir = tape_consumer::recover::find_running(target, crate::reader::STARTING)
            .map_err(|e| e.to_string())?;
        let peek = events.is_some();
        let reader = if peek {
            tape_consumer::record::Recorder::attach_peek(&dir)
        } else {
            tape_consumer::record::Recorder::attach_live(&dir)
        }
        .map_err(|e| e.to_string())?;
        let text = reader.metadata().map_err(|e| e.to_string())?;
        let trace = tape_ctf::parse_metadata(&text)
            .map_err(|e| format!("the metadata of process {}: {e}", reader.pid()))?
            .trace;
        let plan = Arc::new(TracePlan::new(&trace).map_err(|e| format!("the metadata: {e}"))?);
        let events = events.map(|(g, patterns)| {
            let names = trace.events.iter().map(|c| c.name.clone()).collect();
            for p in &patterns {
                if crate::select::each_matches("--events", std::slice::from_ref(p), &names, "event")
                    .is_err()
                {
                    crate::output::say!(
                        "tape pipe: --events {p:?} matches no event of process {} yet{}: going on",
                        reader.pid(),
                        crate::select::nearest(p, &names)
                    );
                }
            }
            g
        });
        Ok(Pipe {
            reader,
            format,
            events,
            peek,
            plan,
            packet_file: Arc::new(crate::reader::packet_file()?),
            rings: HashMap::new(),
            held: Vec::new(),
            order: 0,
            time: LineTime::default(),
            last_printed: None,
            symbols: crate::symbols::Symbols::default(),
        })
    }

    /// Decodes chunk `c` into lines held for the window, with a line for
    /// each loss since the ring's last chunk.
    fn take(&mut self, c: tape_consumer::record::Chunk) -> Result<(), String> {
        let reader = &mut self.reader;
        let ring = self.rings.entry(c.stream).or_default();
        let name = reader.stream_name(c.stream);
        let ring_id = c.stream;
        // Where each event ends in the ring: its packet and offset.
        let head = reader.packet_head_size(c.stream);
        let seq = if c.closed { c.end.0 - 1 } else { c.end.0 };
        let content = c.packet.len().saturating_sub(head);
        // The losses since the last chunk (both lines at the first
        // event's time, known once decoded).
        // Events the pipe before may have printed are not lost: said
        // apart (module docs).
        let gone = c.lost.overwritten - c.maybe_printed.min(c.lost.overwritten);
        let overwritten = gone - ring.overwritten.min(gone);
        ring.overwritten = gone;
        let doubted = c.maybe_printed - ring.maybe_printed.min(c.maybe_printed);
        ring.maybe_printed = c.maybe_printed;
        if doubted > 0 {
            crate::output::say!(
                "tape pipe: {doubted} event(s) of {name} that the pipe before may have \
                 printed (it was killed between printing them and marking them printed) \
                 were overwritten before this one started: not printed again, not \
                 counted lost"
            );
        }
        // Marked where this pipe begins, if no reader did: a write's
        // doubt counts from the ring's mark (module docs).
        if !self.peek && reader.mark(c.stream).is_none() {
            reader.set_mark(c.stream, (seq, c.offset), c.before);
        }
        let by_owner = c.lost.total() - c.lost.overwritten;
        let dropped = by_owner.saturating_sub(*ring.dropped.get_or_insert(by_owner));
        ring.dropped = ring.dropped.max(Some(by_owner));
        crate::reader::put_packet(&self.packet_file, &c.packet)
            .map_err(|e| format!("the copy of ring {name}'s packet (in memory): {e}"))?;
        // The stream is named by its ring (as in a saved trace).
        let stream = StreamReader::from_file(
            self.plan.clone(),
            Arc::clone(&self.packet_file),
            &PathBuf::from(&name),
            c.packet.len() as u64,
        );
        let mut lost_at: Option<i128> = None;
        let (before, end) = (c.before, c.end);
        let offset = c.offset;
        let (order, held) = (&mut self.order, &mut self.held);
        let n = decode(
            stream,
            self.format,
            self.events.as_ref(),
            &mut self.symbols,
            |t, rest, n, at| {
                lost_at.get_or_insert(t);
                *order += 1;
                let into = (at as usize).saturating_sub(head);
                let cursor = if into >= content {
                    end
                } else {
                    (seq, offset + into)
                };
                let line = ring.push(Some((cursor, before + n)));
                held.push(Held {
                    t,
                    order: *order,
                    rest,
                    ring: ring_id,
                    line,
                });
            },
        )?;
        if c.events.is_none() {
            reader.took(c.stream, n);
        }
        for lost in [overwritten, dropped].into_iter().filter(|&n| n > 0) {
            let t = lost_at.map_or(i128::MIN, |t| t - 1);
            *order += 1;
            let line = ring.push(None);
            held.push(Held {
                t,
                order: *order,
                rest: lost_line(self.format, lost, t, &name),
                ring: ring_id,
                line,
            });
        }
        // A chunk with no event to print (none shown) ends where it
        // ends once the lines before it are out.
        if n == 0 {
            let line = ring.push(Some((c.end, c.before)));
            if let Some((cursor, events)) = ring.printed(line).filter(|_| !self.peek) {
                reader.set_mark(c.stream, cursor, events);
            }
        }
        reader.recycle(c.packet);
        Ok(())
    }

    /// Prints the lines held up to `horizon`, in time order, and moves
    /// each ring's mark past its last event printed.
    fn print(&mut self, out: &mut impl Write, horizon: i128) -> Result<(), Failure> {
        self.held.sort_by_key(|h| (h.t, h.order));
        let ready = self.held.partition_point(|h| h.t <= horizon);
        let mut buf = TextBuf::new();
        let mut stamp = TextBuf::new();
        let mut printed: Vec<(usize, u64)> = Vec::new();
        for h in self.held.drain(..ready) {
            if self.format == Format::Text && !h.rest.starts_with(b"[LOST") {
                stamp.clear();
                self.time.write(&mut stamp, h.t);
                write_line_prefix(
                    &mut buf,
                    stamp.as_slice(),
                    self.last_printed.map(|l| h.t - l),
                );
                self.last_printed = Some(h.t);
            }
            buf.put(&h.rest);
            printed.push((h.ring, h.line));
        }
        if !buf.is_empty() {
            // The events about to go out are in doubt until their marks
            // are stored (a pipe killed in between leaves that to the next).
            if !self.peek {
                let mut upto: HashMap<usize, u64> = HashMap::new();
                for &(i, line) in &printed {
                    let r = &self.rings[&i];
                    if let Some(Some((_, ev))) =
                        r.lines.get((line - r.first) as usize).map(|l| l.mark)
                    {
                        let e = upto.entry(i).or_default();
                        *e = (*e).max(ev);
                    }
                }
                for (i, ev) in upto {
                    let from = self.reader.mark(i).map_or(ev, |m| m.1);
                    self.reader.set_doubt(i, ev.saturating_sub(from));
                }
            }
            out.write_all(buf.as_slice()).map_err(output_error)?;
            out.flush().map_err(output_error)?;
        }
        // Out: each ring's mark moves past its last event printed (with
        // every line before it): what a pipe killed now printed is not
        // printed again, save the lines of this write if it dies between
        // the write and these stores (module docs).
        let mut marks: HashMap<usize, ((u64, usize), u64)> = HashMap::new();
        for (i, line) in printed {
            if let Some(m) = self.rings.get_mut(&i).and_then(|r| r.printed(line)) {
                marks.insert(i, m);
            }
        }
        if !self.peek {
            for (i, (cursor, events)) in marks {
                self.reader.set_mark(i, cursor, events);
            }
        }
        Ok(())
    }
}

/// Decodes the events of the one-packet stream `s`, handing each shown one to `each` with its time and its text (text: after the
/// line's time and delta; JSON and ftrace: the line, as `tape show
/// --format ftrace` prints it, without the header: `trace_pipe` has none);
/// the number of events decoded.
fn decode(
    mut s: StreamReader,
    format: Format,
    events: Option<&globset::GlobSet>,
    symbols: &mut crate::symbols::Symbols,
    mut each: impl FnMut(i128, Vec<u8>, u64, u64),
) -> Result<u64, String> {
    match format {
        Format::Json => s.render_json(),
        Format::Ftrace => s.keep_packet_values(),
        Format::Text => {}
    }
    let mut n = 0;
    let mut text = TextBuf::new();
    loop {
        match s.peek().map_err(|e| e.to_string())? {
            Next::End => return Ok(n),
            Next::Lost(..) => s.take_lost(),
            Next::Event(t) => {
                n += 1;
                let shown = s
                    .class()
                    .is_some_and(|c| events.is_none_or(|g| g.is_match(&c.name)));
                if !shown {
                    s.emit(&mut Discard).map_err(|e| e.to_string())?;
                    continue;
                }
                let t = t.unwrap_or(0);
                let rest = match format {
                    Format::Ftrace => {
                        let class = s.class().cloned();
                        let mut sink = tape_ctf::decode::ValueSink::default();
                        s.emit(&mut sink).map_err(|e| e.to_string())?;
                        let Some(class) = class else {
                            continue;
                        };
                        let mut line = String::new();
                        tape_ctf::ftrace::write_line(
                            &mut line,
                            &s.plan().formats,
                            &class,
                            s.packet_value.as_ref(),
                            &sink.scopes,
                            Some(t),
                            &mut |exe, addr| symbols.name(exe, addr),
                        );
                        line.into_bytes()
                    }
                    Format::Json => {
                        let mut v = Vec::new();
                        write_json_line(&mut v, Some(t), &mut s).map_err(|e| e.to_string())?;
                        v
                    }
                    _ => {
                        text.clear();
                        write_event_rest(&mut text, &mut s).map_err(|e| e.to_string())?;
                        text.as_slice().to_vec()
                    }
                };
                each(t, rest, n, s.offset_in_packet());
            }
        }
    }
}

fn lost_line(format: Format, n: u64, t: i128, stream: &str) -> Vec<u8> {
    match format {
        Format::Json => format!(
            "{{\"lost\":{n},\"time_ns\":{t},\"stream\":{}}}\n",
            crate::output::json_string(stream)
        ),
        _ => format!("[LOST {n} EVENTS] in {stream}\n"),
    }
    .into_bytes()
}
