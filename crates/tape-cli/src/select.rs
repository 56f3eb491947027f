//! What `tape show`, `graph` and `stats` print: the selection (event and
//! stream globs, a time range, a value filter) and how losses are said.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crate::output::*;
use crate::{filter, Format};
use tape_ctf::decode::stream::{
    losses_by_stream, open_streams, FastStream, LostByCause, LOSS_CAUSES,
};
use tape_ctf::metadata::read::TraceDir;

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

/// `tape stats --filter`: every event class, each event by its values.
pub(crate) struct Filtered<'a>(pub(crate) &'a filter::ValueFilter);

impl tape_ctf::decode::stream::Shown for Filtered<'_> {
    fn class(&self, _: &tape_ctf::EventClass, _: Option<i128>) -> bool {
        true
    }

    fn event(&self, s: &mut FastStream) -> bool {
        self.0.keep(s)
    }

    fn by_value(&self) -> bool {
        true
    }
}

/// Which events `tape show` shows: `--events`, `--begin`/`--end`, and
/// `--filter` on their values.
pub(crate) struct Shows<'a>(pub(crate) &'a Selection);

impl tape_ctf::decode::stream::Shown for Shows<'_> {
    fn class(&self, class: &tape_ctf::EventClass, t: Option<i128>) -> bool {
        let sel = self.0;
        sel.in_range(t) && sel.events.as_ref().is_none_or(|g| g.is_match(&class.name))
    }

    fn event(&self, s: &mut FastStream) -> bool {
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
            sum.iter_mut().zip(causes).for_each(|(s, n)| *s += n);
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
