//! `tape check`: validates every packet and event; exit 1 at the first
//! problem, with the file, packet offset and bit offset.

use crate::output::{open, print, say, Failure};
use std::io::Write;
use std::path::PathBuf;

use tape_ctf::decode::Discard;
use tape_ctf::merge::{Step, StreamMerge};

/// A stream's time in `tape check` (see there).
#[derive(Default)]
pub(crate) struct StreamTime {
    last: Option<i128>,
    packet: Option<u64>,
    pending_end: Option<i128>,
    backwards: u64,
    first: String,
}

impl StreamTime {
    pub(crate) fn advance(&mut self, t: Option<i128>, event: u64) {
        let Some(t) = t else { return };
        if let Some(last) = self.last.filter(|&l| t < l) {
            if self.backwards == 0 {
                self.first = format!("event {event}: {t} ns after {last} ns");
            }
            self.backwards += 1;
        }
        self.last = Some(t);
    }
}

pub(crate) fn check(paths: &[PathBuf]) -> Result<(), Failure> {
    let (traces, events, lost) = verify(paths, true, false)?;
    print(&format!(
        "ok: {traces} trace(s), {events} events, {lost} lost\n"
    ))
}

/// Reads every packet and event of `paths`, saying the warnings with
/// `warn`; (traces, events, lost), or the first problem. `strict`: time
/// going backwards in a stream is a problem too (CTF allows it, but
/// babeltrace2's muxer stops there: a trace tape writes never has it).
pub(crate) fn verify(
    paths: &[PathBuf],
    warn: bool,
    strict: bool,
) -> Result<(usize, u64, u64), Failure> {
    macro_rules! warning {
        ($($t:tt)*) => {
            if warn {
                say!($($t)*);
            }
        };
    }
    let traces = open(paths)?;
    for t in &traces {
        for w in &t.warnings {
            warning!("tape: warning: {}/metadata: {w}", t.dir.display());
        }
        // Valid CTF (a stream with no packet), but its events, if it ever
        // had any, are gone: worth a word.
        for p in &t.streams {
            if std::fs::metadata(p).is_ok_and(|m| m.len() == 0) {
                warning!(
                    "tape: warning: {}: the stream file is empty (0 bytes: no packet, no event)",
                    p.display()
                );
            }
        }
    }
    // Losses a tape recorder counted outside any stream (`tape stats`
    // names them), and rings a save left out: part of what was lost.
    let outside = crate::stats::outside_total(&crate::stats::outside_losses(&traces));
    for t in &traces {
        let env = |name: &str| t.trace.env.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        if !t.trace.written_by_tape() {
            continue;
        }
        if let Some(tape_ctf::EnvValue::Int(n @ 1..)) = env("events_skipped_ring_busy") {
            let which = match env("tape_rings_skipped") {
                Some(tape_ctf::EnvValue::Str(s)) => format!(": {s}"),
                _ => String::new(),
            };
            warning!(
                "tape: warning: {}: the recorder left {n} event(s) out, in rings whose copy \
                 another process held{which}",
                t.dir.display()
            );
        }
    }
    let mut merge = StreamMerge::new(&traces)?;
    let (mut events, mut lost) = (0u64, outside);
    // Per stream, time as babeltrace2's muxer sees it (packet beginnings,
    // events, packet ends): how often it went backwards, and where first.
    // CTF 1.8 does not forbid it and real traces have it (ctf-testsuite
    // stream/pass/lttng-modules-trace, which babeltrace 1.5 reads;
    // babeltrace2 stops there): a warning, not an error.
    let mut times: std::collections::HashMap<PathBuf, StreamTime> = Default::default();
    while let Some(step) = merge.next() {
        match step.map_err(|e| e.to_string())? {
            Step::Event(stream, t) => {
                let (packet, begin, end) = stream.packet_times();
                let st = times.entry(stream.path().to_path_buf()).or_default();
                if st.packet != Some(packet) {
                    let previous_end = st.pending_end.take();
                    st.advance(previous_end, events);
                    st.advance(begin, events);
                    st.packet = Some(packet);
                    st.pending_end = end;
                }
                st.advance(t, events);
                if let Err(e) = stream.emit(&mut Discard) {
                    // Its stream ends; the error comes after the others.
                    merge.fail(e);
                    continue;
                }
                events += 1;
            }
            // Saturating: a damaged packet context may claim any count.
            Step::Lost(_, n, _) => lost = lost.saturating_add(n),
        }
    }
    for st in times.values_mut() {
        let end = st.pending_end.take();
        st.advance(end, events);
    }
    let mut back: Vec<(PathBuf, u64, String)> = times
        .into_iter()
        .filter(|(_, st)| st.backwards > 0)
        .map(|(p, st)| (p, st.backwards, st.first))
        .collect();
    back.sort();
    if let (true, Some((path, n, first))) = (strict, back.first()) {
        return Err(Failure::Error(format!(
            "{}: time goes backwards {n} time(s) in this stream (first at {first}): \
             babeltrace2 stops there",
            path.display()
        )));
    }
    for (path, n, first) in back {
        warning!(
            "tape: warning: {}: time goes backwards {n} time(s) in this stream (first at {first})",
            path.display()
        );
    }
    Ok((traces.len(), events, lost))
}
