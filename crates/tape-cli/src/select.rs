//! What `tape show`, `graph` and `stats` print: the selection (event and
//! stream globs, a time range, a value filter) and how losses are said.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crate::filter;
use crate::output::say;
use crate::output::Format;
use tape_ctf::decode::{losses_by_stream, open_streams, LostByCause, StreamReader};
use tape_ctf::metadata::TraceDir;
use tape_ctf::LOSS_CAUSES;

/// What `tape show` prints.
pub(crate) struct Selection {
    pub(crate) format: Format,
    pub(crate) clock_seconds: bool,
    pub(crate) events: Option<globset::GlobSet>,
    pub(crate) streams: Option<globset::GlobSet>,
    pub(crate) begin: Option<i128>,
    pub(crate) end: Option<i128>,
    /// `--filter`: a test on each event's values.
    pub(crate) filter: Option<filter::ValueFilter>,
}

pub(crate) fn globs(option: &str, patterns: &[String]) -> Result<Option<globset::GlobSet>, String> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = globset::GlobSetBuilder::new();
    for p in patterns {
        let g = globset::GlobBuilder::new(p)
            .literal_separator(false)
            .build()
            .map_err(|e| format!("{option} {p:?}: {}", e.kind()))?;
        b.add(g);
    }
    b.build().map(Some).map_err(|e| format!("{option}: {e}"))
}

/// Checks that each of `patterns` (`option`'s globs, as [`globs`] takes
/// them) matches one of `names` (the `what` of the traces): one that
/// matches none is an error naming it and the nearest names, so that a
/// typo is not an empty output with exit status 0 (`grep` exits 1 when
/// nothing matches).
pub(crate) fn each_matches(
    option: &str,
    patterns: &[String],
    names: &std::collections::BTreeSet<String>,
    what: &str,
) -> Result<(), String> {
    for p in patterns {
        let Some(g) = globs(option, std::slice::from_ref(p))? else {
            continue;
        };
        if !names.iter().any(|n| g.is_match(n)) {
            return Err(format!(
                "{option} {p:?} matches no {what} of the traces{}",
                nearest(p, names)
            ));
        }
    }
    Ok(())
}

/// ` (nearest: a, b, c)`: the names nearest to `pattern`'s text (its glob
/// characters left out, against the prefixes of each name around its
/// length: a glob's text is often a prefix), by edit distance, at most a
/// third of the text away; empty when none is.
pub(crate) fn nearest(pattern: &str, names: &std::collections::BTreeSet<String>) -> String {
    let text: String = pattern
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '!'))
        .collect();
    let len = text.chars().count();
    let distance = |name: &str| {
        let lens = len.saturating_sub(2)..=len + 2;
        lens.map(|k| strsim::levenshtein(&text, &name.chars().take(k).collect::<String>()))
            .min()
            .unwrap_or(usize::MAX)
    };
    let mut near: Vec<(usize, &String)> = names
        .iter()
        .map(|n| (distance(n), n))
        .filter(|(d, _)| *d <= len.div_ceil(3).max(1))
        .collect();
    near.sort();
    let near: Vec<&str> = near.iter().take(3).map(|(_, n)| n.as_str()).collect();
    if near.is_empty() {
        String::new()
    } else {
        format!(" (nearest: {})", near.join(", "))
    }
}

/// The event names of `traces`.
pub(crate) fn event_names(traces: &[TraceDir]) -> std::collections::BTreeSet<String> {
    traces
        .iter()
        .flat_map(|t| t.trace.events.iter().map(|c| c.name.clone()))
        .collect()
}

/// `tape stats --filter`: every event class, each event by its values.
pub(crate) struct Filtered<'a>(pub(crate) &'a filter::ValueFilter);

impl tape_ctf::decode::Shown for Filtered<'_> {
    fn class(&self, _: &tape_ctf::EventClass, _: Option<i128>) -> bool {
        true
    }

    fn event(&self, s: &mut StreamReader) -> bool {
        self.0.keep(s)
    }

    fn by_value(&self) -> bool {
        true
    }
}

/// Which events `tape show` shows: `--events`, `--begin`/`--end`, and
/// `--filter` on their values.
pub(crate) struct Shows<'a>(pub(crate) &'a Selection);

impl tape_ctf::decode::Shown for Shows<'_> {
    fn class(&self, class: &tape_ctf::EventClass, t: Option<i128>) -> bool {
        let sel = self.0;
        sel.in_range(t) && sel.events.as_ref().is_none_or(|g| g.is_match(&class.name))
    }

    fn event(&self, s: &mut StreamReader) -> bool {
        self.0.filter.as_ref().is_none_or(|f| f.keep(s))
    }

    fn by_value(&self) -> bool {
        self.0.filter.is_some()
    }
}

impl Selection {
    /// Every event of every stream, in `format`.
    pub(crate) fn everything(format: Format) -> Selection {
        Selection {
            format,
            clock_seconds: false,
            events: None,
            streams: None,
            begin: None,
            end: None,
            filter: None,
        }
    }

    /// Whether the stream file at `path` is shown (`--streams`).
    pub(crate) fn stream_shown(&self, path: &std::path::Path) -> bool {
        match (&self.streams, path.file_name()) {
            (Some(g), Some(n)) => g.is_match(n),
            _ => true,
        }
    }

    pub(crate) fn in_range(&self, t: Option<i128>) -> bool {
        match t {
            Some(t) => self.begin.is_none_or(|b| t >= b) && self.end.is_none_or(|e| t <= e),
            None => self.begin.is_none() && self.end.is_none(),
        }
    }
}

/// The closing notice of `tape show`: how many events the tracer lost in
/// the streams shown and, for tape's traces, why.
pub(crate) fn say_lost(lost: u64, traces: &[TraceDir], sel: &Selection) {
    if lost == 0 {
        return;
    }
    let was = if lost == 1 {
        "event was"
    } else {
        "events were"
    };
    match lost_by_cause(traces, sel) {
        Some(causes) => say!(
            "tape: {lost} {was} lost (discarded by the tracer: {})",
            causes_text(&causes, false)
        ),
        None => say!("tape: {lost} {was} lost (discarded by the tracer)"),
    }
}

/// Losses by cause of the streams `sel` shows, from their trace's losses
/// stream or their packet contexts (tape's traces), or `None` when some
/// stream does not say.
pub(crate) fn lost_by_cause(traces: &[TraceDir], sel: &Selection) -> Option<LostByCause> {
    let mut sum = LostByCause::default();
    for t in traces {
        let side = losses_by_stream(t).ok()?;
        for mut stream in open_streams(std::slice::from_ref(t)).ok()? {
            if !sel.stream_shown(stream.path()) {
                continue;
            }
            let causes = match &side {
                Some(by_stream) => stream_losses(by_stream, stream.path()),
                None => stream.lost_by_cause().ok()??,
            };
            sum.iter_mut()
                .zip(causes)
                .for_each(|(s, n)| *s = s.saturating_add(n));
        }
    }
    Some(sum)
}

/// The losses by cause of the stream file `path` in its trace's losses
/// stream (none: it lost nothing).
pub(crate) fn stream_losses(by_stream: &HashMap<String, LostByCause>, path: &Path) -> LostByCause {
    path.file_name()
        .and_then(|n| by_stream.get(n.to_string_lossy().as_ref()))
        .copied()
        .unwrap_or_default()
}

/// `overwritten = 5, full = 2`: every cause, or those with losses.
pub(crate) fn causes_text(causes: &LostByCause, all: bool) -> String {
    let named = LOSS_CAUSES.iter().zip(causes);
    let shown: Vec<String> = named
        .filter(|(_, &n)| all || n > 0)
        .map(|(c, n)| format!("{c} = {n}"))
        .collect();
    shown.join(", ")
}
