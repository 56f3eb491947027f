//! `--filter EXPR` for `tape show` and `tape stats`: the kernel's filter
//! grammar (the library's [`tape::filter`], the same text `tape ctl PID
//! filter` and `TAPE_FILTER` take), applied at read time to any CTF trace.
//!
//! The expression is checked against every event class of the traces (of
//! the `--events` selection): an event that has the fields it names is
//! tested; one that lacks them is not shown, as LTTng's filters treat a
//! missing field. An expression that no event can take is an error, with
//! the reason for the first event and a caret. Each event is decoded once
//! into a [`Capture`] that keeps only the values compared (no allocation
//! once its buffers have grown), then rendered only if it matches: an event
//! skipped costs a decode, less than rendering it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tape::filter::{Capture, Filter};
use tape_ctf::decode::stream::FastStream;
use tape_ctf::{EventClass, Struct};

/// A filter expression for a reader.
pub struct ValueFilter {
    text: String,
    /// Tells this filter's compiled forms apart in the per-thread cache.
    id: usize,
    uses_common: bool,
}

/// Per (filter, event class): the compiled filter and its capture, or none
/// when the class lacks the fields (its events are not shown).
type Compiled = HashMap<(usize, usize), Option<(Filter, Capture)>>;

thread_local! {
    static COMPILED: RefCell<Compiled> = RefCell::new(HashMap::new());
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
        classes: impl Iterator<Item = &'a EventClass>,
    ) -> Result<ValueFilter, String> {
        // A syntax error is the same for every event: said once.
        if let Err(e) = tape::filter::parse(text) {
            return Err(tape::filter::pointed("--filter", e.message, text, e.at));
        }
        let mut first_error: Option<String> = None;
        let mut fit = 0usize;
        let mut uses_common = false;
        let mut seen = 0usize;
        let mut warned: Vec<String> = Vec::new();
        for class in classes {
            seen += 1;
            match Filter::for_reader(&class.name, &payload(class), text) {
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
                Err(e) => {
                    first_error.get_or_insert_with(|| e.message().to_owned());
                }
            }
        }
        if fit == 0 {
            return Err(match first_error {
                Some(e) if seen == 1 => format!("--filter: {e}"),
                Some(e) => format!(
                    "--filter: none of the {seen} events selected has what it compares; the \
                     first: {e}"
                ),
                None => "--filter: no event is selected".to_owned(),
            });
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Ok(ValueFilter {
            text: text.to_owned(),
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            uses_common,
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
                Filter::for_reader(&class.name, &payload(&class), &self.text)
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
