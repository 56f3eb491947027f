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

use tape::filter::{Capture, Commons, Filter};
use tape_ctf::decode::StreamReader;
use tape_ctf::metadata::{Formats, Hint, TraceDir};
use tape_ctf::{EventClass, Struct};

/// A filter expression for a reader.
pub struct ValueFilter {
    text: String,
    /// Tells this filter's compiled forms apart in the per-thread cache.
    id: usize,
    uses_common: bool,
    /// The `Duration` fields of each event class (by name and id), from
    /// its trace's `duration` hints (what `took > 30us` compares with),
    /// and the common fields its events carry.
    given: HashMap<(String, u64), (Vec<String>, Commons)>,
}

/// An event class of a trace, with what a filter is checked against
/// besides its payload.
pub struct Class<'a> {
    pub event: &'a EventClass,
    /// The paths of its `Duration` fields (the trace's `tape_hints_<id>`
    /// entries).
    pub durations: Vec<String>,
    /// The common fields its scopes hold (a tape trace: the thread's id
    /// and name, no CPU).
    pub commons: Commons,
}

/// The event classes of `traces`.
pub fn classes_of(traces: &[TraceDir]) -> Vec<Class<'_>> {
    let mut out = Vec::new();
    for t in traces {
        let formats = Formats::new(&t.trace);
        for class in &t.trace.events {
            let stream = t
                .trace
                .streams
                .iter()
                .find(|s| s.id == class.stream_id)
                .or_else(|| {
                    t.trace
                        .streams
                        .first()
                        .filter(|_| t.trace.streams.len() == 1)
                });
            let commons = Commons::in_scopes(
                stream.and_then(|s| s.packet_context.as_ref()),
                stream
                    .and_then(|s| s.event_context.as_ref())
                    .into_iter()
                    .chain(class.context.as_ref()),
            );
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
            out.push(Class {
                event: class,
                durations,
                commons,
            });
        }
    }
    out
}

/// `--filter EXPR` of the commands that read whole traces (`export`,
/// `graph`, `profile`): the filter checked against the classes of
/// `traces` that `events` selects (all: none), as a reader's test.
pub fn keep_of(
    text: &str,
    traces: &[TraceDir],
    events: Option<&globset::GlobSet>,
) -> Result<tape_ctf::decode::Keep, String> {
    let classes = classes_of(traces)
        .into_iter()
        .filter(|c| events.is_none_or(|g| g.is_match(&c.event.name)));
    let f = ValueFilter::new(text, classes)?;
    Ok(Arc::new(move |s: &mut StreamReader| f.keep(s)))
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
        classes: impl Iterator<Item = Class<'a>>,
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
        let mut given = HashMap::new();
        for c in classes {
            seen += 1;
            let class = c.event;
            let tried = Filter::for_reader_with(
                &class.name,
                &payload(class),
                &c.durations,
                c.commons,
                text,
            );
            given.insert((class.name.clone(), class.id), (c.durations, c.commons));
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
            given,
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
    pub fn keep(&self, s: &mut StreamReader) -> bool {
        let Some(class) = s.class().cloned() else {
            return true;
        };
        COMPILED.with(|c| {
            let mut c = c.borrow_mut();
            let key = (self.id, Arc::as_ptr(&class) as usize);
            let entry = c.entry(key).or_insert_with(|| {
                let (durations, commons) = self
                    .given
                    .get(&(class.name.clone(), class.id))
                    .map_or((&[][..], Commons::ALL), |(d, c)| (d.as_slice(), *c));
                Filter::for_reader_with(
                    &class.name,
                    &payload(&class),
                    durations,
                    commons,
                    &self.text,
                )
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
