//! `tape show`: the events in babeltrace2's text (decoded on every core,
//! merged by time), as JSON lines, or as ftrace's `trace` text; and the
//! times of its lines.

use std::io::{IoSlice, Write};

use crate::output::Format;
use crate::output::{end_output, json_string, output_error, say, warn_formats, Failure};
use crate::select::{say_lost, Selection, Shows};
use crate::{symbols, time};
use tape_ctf::decode::{open_streams, StreamReader, TimeText};
use tape_ctf::merge::StreamMerge;
use tape_ctf::metadata::TraceDir;
use tape_ctf::text::{render_merged, Piece, Render, Seconds, Threads};

/// The time of a line: `HH:MM:SS.nnnnnnnnn` in the local time zone, or
/// seconds since the epoch. The broken-down time of the last second is
/// cached with the time that second starts, so that an event in the same
/// second costs a subtraction, not a division and `localtime_r`.
#[derive(Clone, Default)]
pub(crate) struct LineTime {
    seconds: bool,
    /// The second cached.
    second: Option<Second>,
}

/// A second of local time: where it starts and how a line in it opens.
#[derive(Clone)]
pub(crate) struct Second {
    /// Its start, ns since the epoch.
    from: i128,
    /// `[HH:MM:SS.`
    open: Vec<u8>,
    /// `open` in the low bytes of a word, when it is the usual 10 bytes
    /// (years past 9999 are longer): stored at once.
    word: Option<[u8; 16]>,
}

impl LineTime {
    /// The second of `ns`, cached: nearly always that of the last line.
    #[inline(always)]
    pub(crate) fn second(&mut self, ns: i128) -> &Second {
        let hit = |s: &Second| (0..1_000_000_000).contains(&ns.wrapping_sub(s.from));
        if !self.second.as_ref().is_some_and(hit) {
            self.second = None;
        }
        self.second.get_or_insert_with(|| Second::new(ns))
    }
}

impl Second {
    #[cold]
    #[inline(never)]
    pub(crate) fn new(ns: i128) -> Second {
        let from = ns - ns.rem_euclid(1_000_000_000);
        let open = format!("[{}.", time::local_hms(from.div_euclid(1_000_000_000))).into_bytes();
        let word = (open.len() == 10).then(|| {
            let mut w = [0u8; 16];
            w[..10].copy_from_slice(&open);
            w
        });
        Second { from, open, word }
    }
}

impl TimeText for LineTime {
    fn write(&mut self, out: &mut tape_ctf::decode::TextBuf, ns: i128) {
        if self.seconds || ns < 0 {
            // Before the epoch: `-S.nnnnnnnnn`, as babeltrace2 prints the
            // first such time (it prints the later ones as if after it).
            return Seconds.write(out, ns);
        }
        let s = self.second(ns);
        out.put(&s.open[1..]);
        out.nine((ns - s.from) as u64);
    }

    /// `[HH:MM:SS.` as one store, then the nine digits.
    #[inline(always)]
    fn open_line(&mut self, out: &mut tape_ctf::decode::TextBuf, t: Option<i128>) {
        let Some(ns) = t.filter(|&ns| !self.seconds && ns >= 0) else {
            return tape_ctf::decode::open_line(self, out, t);
        };
        let s = self.second(ns);
        match &s.word {
            Some(w) => out.wide(w, 10),
            None => out.put(&s.open),
        }
        out.nine((ns - s.from) as u64);
    }
}

/// The earliest time of the traces: a stream's first packet's
/// `timestamp_begin`, or its first event's time (what babeltrace2's
/// trimmer takes the date of a time of day from).
pub(crate) fn first_time(traces: &[TraceDir]) -> Option<i128> {
    let streams = open_streams(traces).ok()?;
    let firsts = streams.into_iter().filter_map(|mut s| {
        let next = s.peek().ok()?;
        s.packet_times().1.or(match next {
            tape_ctf::decode::Next::Event(t) => t,
            _ => None,
        })
    });
    firsts.min()
}

pub(crate) fn show(traces: Vec<TraceDir>, sel: &Selection) -> Result<(), Failure> {
    if sel.format != Format::Json {
        latency_header(&traces)?;
    }
    if sel.format == Format::Ftrace {
        return show_ftrace(&traces, sel);
    }
    let mut streams = open_streams(&traces)?;
    streams.retain(|s| sel.stream_shown(s.path()));
    let render = match sel.format {
        Format::Text | Format::Ftrace => Render::Text(LineTime {
            seconds: sel.clock_seconds,
            ..LineTime::default()
        }),
        Format::Json => Render::Lines(tape_ctf::text::write_json_line),
    };
    if sel.format == Format::Json {
        streams.iter_mut().for_each(StreamReader::render_json);
    }
    if sel.filter.as_ref().is_some_and(|f| f.uses_common()) {
        streams
            .iter_mut()
            .for_each(StreamReader::keep_packet_values);
    }
    let shown = Shows(sel);
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let mut lost_total = 0u64;
    let mut failed: Option<std::io::Error> = None;
    // The calling thread merges and decodes too: one worker fewer than cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let r = render_merged(streams, render, shown, Threads::new(cores - 1), |piece| {
        let written = match piece {
            Piece::Lines(lines) => write_all_runs(&mut stdout, lines),
            Piece::Lost(path, n, t) => {
                lost_total = lost_total.saturating_add(n);
                if sel.in_range(t) || t.is_none() {
                    let line = match sel.format {
                        Format::Text | Format::Ftrace => {
                            format!("[LOST {n} EVENTS] in {}\n", path.display())
                        }
                        Format::Json => format!(
                            "{{\"lost\":{n},\"time_ns\":{},\"stream\":{}}}\n",
                            t.map_or("null".into(), |t| t.to_string()),
                            json_string(&path.display().to_string())
                        ),
                    };
                    stdout.write_all(line.as_bytes())
                } else {
                    Ok(())
                }
            }
        };
        // Stop at the first write error (classified below).
        failed = written.err();
        failed.is_none()
    });
    // What was decoded before a damaged packet is written before its error.
    end_output(&mut stdout, failed)?;
    r.map_err(|e| e.to_string())?;
    say_lost(lost_total, &traces, sel);
    Ok(())
}

/// A latency snapshot's header (ftrace's latency format, see
/// [`tape_ctf::latency`]) on stdout, before its events: when the one trace
/// shown is one.
pub(crate) fn latency_header(traces: &[TraceDir]) -> Result<(), Failure> {
    let [trace] = traces else { return Ok(()) };
    let Some(header) = tape_ctf::latency::Header::of(&trace.trace) else {
        return Ok(());
    };
    let (mut events, mut lost) = (0u64, 0u64);
    for mut s in open_streams(std::slice::from_ref(trace))? {
        // A damaged stream is counted up to the damage (which `show`
        // reports when it gets there).
        let c = s.count().map_err(|e| e.to_string())?;
        events += c.events;
        lost = lost.saturating_add(c.lost);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(header.render(events, lost).as_bytes())
        .map_err(output_error)?;
    Ok(())
}

/// Writes all of `runs`, with as few `writev` calls as the system takes.
pub(crate) fn write_all_runs(
    w: &mut impl Write,
    mut runs: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut runs, 0); // empty ones first
    while !runs.is_empty() {
        match w.write_vectored(runs) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut runs, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(crate) fn show_ftrace(traces: &[TraceDir], sel: &Selection) -> Result<(), Failure> {
    warn_formats(traces);
    let mut merge = StreamMerge::filtered(traces, |p| sel.stream_shown(p))?;
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let shown = Shows(sel);
    let lost_shown = |t: Option<i128>| sel.in_range(t) || t.is_none();
    let mut failed: Option<std::io::Error> = None;
    let mut symbols = symbols::Symbols::default();
    let lost = tape_ctf::ftrace::render_with_symbols(
        &mut merge,
        shown,
        lost_shown,
        &mut |exe, addr| symbols.name(exe, addr),
        |text| {
            failed = stdout.write_all(text.as_bytes()).err();
            failed.is_none()
        },
    );
    end_output(&mut stdout, failed)?;
    for w in &symbols.warnings {
        say!("tape: warning: {w}");
    }
    let lost = lost.map_err(|e| e.to_string())?;
    say_lost(lost, traces, sel);
    Ok(())
}
