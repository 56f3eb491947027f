//! `--filter EXPR` for `tape show` and `tape stats`: the kernel's filter
//! grammar (the library's [`tape::filter`], the same text `tape ctl PID
//! filter` and `TAPE_FILTER` take), applied at read time to any CTF trace.
//!
//! The expression is checked against every event class of the traces (of
//! the `--events` selection): an event that has the fields it names is
//! tested; one that lacks them is not shown, as LTTng's filters treat a
//! missing field. An expression that no event can take is an error: with
//! the reasons of the events that have its fields and still refuse it (a
//! label their enum lacks, a string compared to a number), else with the
//! first event's missing field; each with a caret. Each event is decoded once
//! into a [`Capture`] that keeps only the values compared (no allocation
//! once its buffers have grown), then rendered only if it matches: an event
//! skipped costs a decode, less than rendering it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tape::filter::{Capture, Filter};
use tape_ctf::decode::stream::FastStream;
use tape_ctf::metadata::formats::{Formats, Hint};
use tape_ctf::metadata::read::TraceDir;
use tape_ctf::{EventClass, Struct};

/// A filter expression for a reader.
pub struct ValueFilter {
    text: String,
    /// Tells this filter's compiled forms apart in the per-thread cache.
    id: usize,
    uses_common: bool,
    /// The `Duration` fields of each event class (by name and id), from
    /// its trace's `duration` hints: what `took > 30us` compares with.
    durations: HashMap<(String, u64), Vec<String>>,
}

/// The event classes of `traces`, each with the paths of its `Duration`
/// fields (the trace's `tape_hints_<id>` entries).
pub fn classes_of(traces: &[TraceDir]) -> Vec<(&EventClass, Vec<String>)> {
    let mut out = Vec::new();
    for t in traces {
        let formats = Formats::new(&t.trace);
        for class in &t.trace.events {
            let durations = formats
                .get(class.id)
                .map(|f| {
                    // The paths as the user writes them already (the
                    // formats read them so).
                    f.hints
                        .iter()
                        .filter(|(_, h)| **h == Hint::Duration)
                        .map(|(p, _)| p.clone())
                        .collect()
                })
                .unwrap_or_default();
            out.push((class, durations));
        }
    }
    out
}

/// Per (filter, event class): the compiled filter and its capture, or none
/// when the class lacks the fields (its events are not shown).
type Compiled = HashMap<(usize, usize), Option<(Filter, Capture)>>;

thread_local! {
    static COMPILED: RefCell<Compiled> = RefCell::new(HashMap::new());
}

/// Refusals shown when no event takes a filter.
const SHOWN_REFUSALS: usize = 3;

/// Whether a filter's error (`filter for EVENT: WHY`, then the text and a
/// caret) says that the event lacks a field the filter names.
fn lacks_a_field(message: &str) -> bool {
    let first = message.lines().next().unwrap_or("");
    first.contains(": no field `") || first.contains(": no member `")
}

fn payload(class: &EventClass) -> Struct {
    class
        .fields
        .clone()
        .unwrap_or_else(|| Struct::new(Vec::new()))
}

impl ValueFilter {
    /// Checks `text` against the event classes `classes` yields; an error
    /// if none of them can take it.
    pub fn new<'a>(
        text: &str,
        classes: impl Iterator<Item = (&'a EventClass, Vec<String>)>,
    ) -> Result<ValueFilter, String> {
        // A syntax error is the same for every event: said once.
        if let Err(e) = tape::filter::parse(text) {
            return Err(tape::filter::pointed("--filter", e.message, text, e.at));
        }
        // Why each event refuses the filter: those that lack a field it
        // names, and those that have its fields but refuse it for another
        // reason (a label the enum lacks, a string compared to a number),
        // which are the ones to tell when no event takes it.
        let mut lacking: Option<String> = None;
        let mut refusing: Vec<String> = Vec::new();
        let mut refusing_events = 0usize;
        let mut fit = 0usize;
        let mut uses_common = false;
        let mut seen = 0usize;
        let mut warned: Vec<String> = Vec::new();
        let mut by_class = HashMap::new();
        for (class, durations) in classes {
            seen += 1;
            let tried = Filter::for_reader_with(&class.name, &payload(class), &durations, text);
            by_class.insert((class.name.clone(), class.id), durations);
            match tried {
                Ok(f) => {
                    fit += 1;
                    uses_common |= f.uses_common();
                    for w in f.warnings() {
                        if !warned.contains(w) {
                            eprintln!("tape: warning: --filter: {w}");
                            warned.push(w.clone());
                        }
                    }
                }
                Err(e) if lacks_a_field(e.message()) => {
                    lacking.get_or_insert_with(|| e.message().to_owned());
                }
                Err(e) => {
                    refusing_events += 1;
                    if refusing.len() < SHOWN_REFUSALS {
                        refusing.push(e.message().to_owned());
                    }
                }
            }
        }
        if fit == 0 {
            if seen == 0 {
                return Err("--filter: no event is selected".to_owned());
            }
            if refusing.is_empty() {
                let e = lacking.unwrap_or_default();
                return Err(if seen == 1 {
                    format!("--filter: {e}")
                } else {
                    format!(
                        "--filter: none of the {seen} events selected has the fields it \
                         compares; the first: {e}"
                    )
                });
            }
            let mut m = if refusing_events == 1 {
                "--filter: the one event selected that has its fields refuses it:".to_owned()
            } else {
                format!(
                    "--filter: the {refusing_events} events selected that have its fields \
                     refuse it:"
                )
            };
            for r in &refusing {
                m.push('\n');
                m.push_str(r);
            }
            let more = refusing_events - refusing.len();
            if more > 0 {
                m.push_str(&format!("\n(and {more} more events)"));
            }
            return Err(m);
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Ok(ValueFilter {
            text: text.to_owned(),
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            uses_common,
            durations: by_class,
        })
    }

    /// Whether packet contexts must be kept as values (the common fields
    /// are read there).
    pub fn uses_common(&self) -> bool {
        self.uses_common
    }

    /// Whether the event `s` has peeked passes (decoding it without
    /// consuming it). An event that cannot be decoded passes: rendering it
    /// reports the error.
    pub fn keep(&self, s: &mut FastStream) -> bool {
        let Some(class) = s.class().cloned() else {
            return true;
        };
        COMPILED.with(|c| {
            let mut c = c.borrow_mut();
            let key = (self.id, Arc::as_ptr(&class) as usize);
            let entry = c.entry(key).or_insert_with(|| {
                let durations = self
                    .durations
                    .get(&(class.name.clone(), class.id))
                    .map_or(&[][..], Vec::as_slice);
                Filter::for_reader_with(&class.name, &payload(&class), durations, &self.text)
                    .ok()
                    .map(|f| {
                        let cap = Capture::new(&f);
                        (f, cap)
                    })
            });
            let Some((f, cap)) = entry else {
                return false;
            };
            cap.clear();
            if self.uses_common {
                cap.set_packet(s.packet_value.as_ref());
            }
            match s.inspect(cap) {
                Ok(()) => f.matches_captured(cap),
                Err(_) => true,
            }
        })
    }
}
