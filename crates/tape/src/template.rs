//! A trace's metadata written ahead of time, with holes for the values
//! known only when the trace is written: the clock's calibration, the
//! losses outside the rings, the date, the mode, and what happened.
//!
//! Two writers need the metadata text at a moment when it cannot be made
//! as a save makes it: the crash dump ([`crate::crash`]), in a signal
//! handler that may not allocate, and the recovery of a dead process's
//! shared rings (`tape_consumer::recover`), in another process that does not
//! have the tracepoints. Both take the text made by
//! [`crate::metadata::describe`] with a **sentinel** in place of each
//! value (a number no real value has, a word no real text has) and put the
//! values in at the end: the crash dump cuts the text at the sentinels
//! when it is installed ([`cut`]), the recovery replaces them in the text
//! that the process left beside its rings ([`fill`]).
//!
//! ```text
//!  clock tape { freq = 9111111111111111100; offset_s = 9111111111111111101; ...
//!  env { ... mode = "tapehole07x"; events_dropped_without_ring = 9111111111111111103; ...
//! ```

use tape_ctf_model::EnvValue;

use crate::metadata::Counts;

/// A value of the metadata filled in when the trace is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hole {
    /// The clock's frequency.
    Freq,
    /// Its offset, seconds.
    OffsetS,
    /// Its offset, cycles.
    Offset,
    /// Losses outside the rings: no ring yet or any more.
    DroppedNoRing,
    /// No memory for a ring.
    DroppedNoMemory,
    /// Exited threads' rings freed unsaved.
    LostExited,
    /// When the trace was written.
    Date,
    /// The rings' mode.
    Mode,
    /// The crash: signal, `si_code`, address, thread, reason.
    Signal,
    /// The crash's `si_code`.
    Code,
    /// The crash's address.
    Addr,
    /// The crashing thread.
    Tid,
    /// Why it crashed.
    Reason,
    /// Where the trace comes from (a recovery, a recording), and when
    /// its last event was written.
    Source,
    /// (see `Source`)
    LastEvent,
    /// Events in rings left out, their copy claim held by another copier
    /// (`metadata::ENV_SKIPPED_BUSY`).
    SkippedBusy,
    /// Events a recording took and could not write (`record`).
    NotWritten,
}

const HOLES: [Hole; 17] = [
    Hole::Freq,
    Hole::OffsetS,
    Hole::Offset,
    Hole::DroppedNoRing,
    Hole::DroppedNoMemory,
    Hole::LostExited,
    Hole::Date,
    Hole::Mode,
    Hole::Signal,
    Hole::Code,
    Hole::Addr,
    Hole::Tid,
    Hole::Reason,
    Hole::Source,
    Hole::LastEvent,
    Hole::SkippedBusy,
    Hole::NotWritten,
];

impl Hole {
    /// A text value (written between quotes), not a number.
    fn is_text(self) -> bool {
        matches!(
            self,
            Hole::Date | Hole::Mode | Hole::Reason | Hole::Source | Hole::LastEvent
        )
    }
}

/// The text a hole is written as in the prepared metadata: numbers no
/// real value has, words no real text has.
fn sentinel(h: Hole) -> String {
    let i = HOLES.iter().position(|x| *x == h).unwrap_or(0);
    if h.is_text() {
        format!("tapehole{i:02}x")
    } else {
        format!("{}", 9_111_111_111_111_111_100i64 + i as i64)
    }
}

fn value(h: Hole) -> EnvValue {
    if h.is_text() {
        EnvValue::Str(sentinel(h))
    } else {
        EnvValue::Int(sentinel(h).parse::<i64>().unwrap_or(0))
    }
}

/// The metadata text of this process's trace with holes for the clock, the
/// losses outside the rings, the date and the mode, and for the `env`
/// entries `extra` adds.
pub(crate) fn metadata(
    uuid: [u8; 16],
    extra: &[(&str, Hole)],
    counts: &Counts,
) -> Result<String, tape_ctf_model::TsdlError> {
    let num = |h: Hole| sentinel(h).parse::<i64>().unwrap_or(0);
    let clock = crate::clock::clock_description(
        num(Hole::Freq) as u64,
        num(Hole::OffsetS),
        num(Hole::Offset),
    );
    let mut t = crate::metadata::describe(uuid, clock, counts);
    // A layer's loss counters (`crate::layer_losses`) live in the process's
    // memory: a recovery or a crash dump cannot know them, and says
    // nothing rather than a stale count.
    t.env.retain(|(k, _)| {
        !k.starts_with(crate::layer_losses::PREFIX) || k == "events_lost_with_exited_threads"
    });
    for (k, v) in t.env.iter_mut() {
        let h = match k.as_str() {
            "events_dropped_without_ring" => Hole::DroppedNoRing,
            "events_dropped_ring_alloc" => Hole::DroppedNoMemory,
            "events_lost_with_exited_threads" => Hole::LostExited,
            crate::metadata::ENV_SKIPPED_BUSY => Hole::SkippedBusy,
            crate::metadata::ENV_NOT_WRITTEN => Hole::NotWritten,
            "trace_creation_datetime" => Hole::Date,
            "mode" => Hole::Mode,
            _ => continue,
        };
        *v = value(h);
    }
    for (name, h) in extra {
        t.env.push(((*name).into(), value(*h)));
    }
    // Tracepoints whose first event will describe their fields: a reader
    // that sends event classes once (the relay) waits for that.
    let awaiting = crate::registry::awaiting_description();
    if !awaiting.is_empty() {
        let ids: Vec<String> = awaiting.iter().map(u16::to_string).collect();
        t.env.push((
            AWAITING_ENV.into(),
            tape_ctf_model::EnvValue::Str(ids.join(",")),
        ));
    }
    t.to_tsdl()
}

/// The `env` entry of the shared rings' metadata that lists (`12,15`) the
/// ids of event classes whose description their first event will give
/// ([`crate::registry::register_shared_awaiting`]); absent when none.
pub const AWAITING_ENV: &str = "tape_awaiting_description";

/// The text cut at each hole, in the order they appear: `pieces[i]`, then
/// the value of `holes[i]`, then `pieces[i + 1]`...
pub(crate) fn cut(text: &str) -> (Vec<Vec<u8>>, Vec<Hole>) {
    let mut found: Vec<(usize, Hole, usize)> = HOLES
        .iter()
        .filter_map(|&h| {
            let s = sentinel(h);
            text.find(&s).map(|at| (at, h, s.len()))
        })
        .collect();
    found.sort_by_key(|f| f.0);
    let mut pieces = Vec::new();
    let mut holes = Vec::new();
    let mut from = 0;
    for (at, h, len) in found {
        pieces.push(text.as_bytes()[from..at].to_vec());
        holes.push(h);
        from = at + len;
    }
    pieces.push(text.as_bytes()[from..].to_vec());
    (pieces, holes)
}

/// The text with every hole filled by `value` (a number, or a text that
/// is escaped here); `None` names the first hole `value` has no value for.
pub fn fill(text: &str, value: impl Fn(Hole) -> Option<String>) -> Result<String, Hole> {
    let (pieces, holes) = cut(text);
    let mut out = Vec::with_capacity(text.len());
    for (i, piece) in pieces.iter().enumerate() {
        out.extend_from_slice(piece);
        let Some(&h) = holes.get(i) else { continue };
        let v = value(h).ok_or(h)?;
        if h.is_text() {
            let q = tape_ctf_model::quote(&v);
            out.extend_from_slice(&q.as_bytes()[1..q.len() - 1]);
        } else {
            out.extend_from_slice(v.as_bytes());
        }
    }
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hole_is_found_and_filled() {
        let text = metadata(
            [7; 16],
            &[
                ("tape_source", Hole::Source),
                ("tape_last_event", Hole::LastEvent),
            ],
            &Counts::default(),
        )
        .unwrap();
        let (_, holes) = cut(&text);
        for h in [
            Hole::Freq,
            Hole::OffsetS,
            Hole::Offset,
            Hole::DroppedNoRing,
            Hole::DroppedNoMemory,
            Hole::LostExited,
            Hole::SkippedBusy,
            Hole::NotWritten,
            Hole::Date,
            Hole::Mode,
            Hole::Source,
            Hole::LastEvent,
        ] {
            assert_eq!(holes.iter().filter(|x| **x == h).count(), 1, "{h:?}");
        }
        let filled = fill(&text, |h| {
            Some(match h {
                Hole::Source => "a \"quoted\" \\ path".into(),
                h if h.is_text() => "text".into(),
                _ => "12".into(),
            })
        })
        .unwrap();
        assert!(!filled.contains("tapehole") && !filled.contains("91111111111111111"));
        assert!(
            filled.contains(r#"tape_source = "a \"quoted\" \\ path";"#),
            "{filled}"
        );
        let parsed = tape_ctf::parse_metadata_strict(&filled)
            .expect("the filled text parses as babeltrace2 would");
        assert_eq!(parsed.trace.clocks[0].freq, 12);
        assert_eq!(fill(&text, |_| None), Err(holes[0]));
    }
}
