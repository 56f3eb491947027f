//! What the exports (`perfetto`, `chrome`) share: their options (counter
//! tracks), what they report having written, and what they read of a
//! trace's `env`.

use std::sync::Arc;

use crate::metadata::read::TraceDir;
use crate::EnvValue;

/// A counter track asked for: `--counter EVENT.FIELD`.
#[derive(Clone)]
pub struct CounterSpec {
    /// The track's name (what the user wrote).
    pub name: String,
    /// Which events (by name) the field is read from.
    pub event: NameFilter,
    /// The payload field (top level, an integer, enum or float).
    pub field: String,
}

/// A test of an event's name.
pub type NameFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What the export writes.
#[derive(Clone, Default)]
pub struct Options {
    /// Counter tracks.
    pub counters: Vec<CounterSpec>,
    /// Only events (and losses) at or after this time (ns).
    pub begin: Option<i128>,
    /// Only events (and losses) at or before this time (ns).
    pub end: Option<i128>,
    /// Only events whose name it accepts (none: all).
    pub events: Option<NameFilter>,
    /// Only events it keeps (`--filter`; none: all).
    pub keep: Option<crate::decode::stream::Keep>,
}

impl Options {
    /// Whether an event or loss at `t` is in the time range (one without
    /// a time is, when there is no range).
    pub fn in_range(&self, t: Option<i128>) -> bool {
        match t {
            Some(t) => self.begin.is_none_or(|b| t >= b) && self.end.is_none_or(|e| t <= e),
            None => self.begin.is_none() && self.end.is_none(),
        }
    }

    /// Whether the event at `stream`'s head is exported: in the range, of
    /// a name accepted.
    pub(crate) fn wants(
        &self,
        stream: &crate::decode::stream::StreamReader,
        t: Option<i128>,
    ) -> bool {
        self.in_range(t)
            && self
                .events
                .as_ref()
                .is_none_or(|f| stream.class().is_some_and(|c| f(&c.name)))
    }
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// Events read.
    pub events: u64,
    /// Slices with a begin and an end (on threads' tracks).
    pub slices: u64,
    /// Of those, async polls (also drawn on their calls' async tracks).
    pub polls: u64,
    /// Calls still open when the trace ends (begun, never ended).
    pub open: u64,
    /// Calls whose exit is not in the trace, moved to no-exit tracks.
    pub no_exit: u64,
    /// Exits whose entry is not in the trace (instants).
    pub no_entry: u64,
    /// Instants for other events.
    pub instants: u64,
    /// Counter values.
    pub counter_values: u64,
    /// Events lost, as the trace counts them (`lost events` instants).
    pub lost: u64,
    /// Events without a time (given their thread's last one).
    pub untimed: u64,
    /// Times outside Perfetto's (before the clock's origin: written as 0).
    pub clamped: u64,
    /// Threads (packet sequences).
    pub threads: u64,
    /// Packets written.
    pub packets: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Checks `specs` against the traces' classes: each must name a top-level
/// payload field of at least one event it selects, and that field must be
/// a number. The error names the spec.
pub fn check_counters(traces: &[TraceDir], specs: &[CounterSpec]) -> Result<(), String> {
    for spec in specs {
        let mut events = 0;
        let mut numeric = 0;
        for class in traces.iter().flat_map(|t| t.trace.events.iter()) {
            if !(spec.event)(&class.name) {
                continue;
            }
            events += 1;
            let f = class.fields.as_ref().and_then(|s| {
                s.fields
                    .iter()
                    .find(|f| crate::metadata::shown_name(&f.name) == spec.field)
            });
            if let Some(f) = f {
                let trace = traces.iter().find(|t| t.trace.events.contains(class));
                if matches!(
                    resolve(trace.map_or(&traces[0].trace, |t| &t.trace), &f.ty),
                    crate::Type::Integer(_) | crate::Type::Enum(_) | crate::Type::Float(_)
                ) {
                    numeric += 1;
                }
            }
        }
        if events == 0 {
            return Err(format!(
                "--counter {}: no event of the trace is named like {:?}",
                spec.name,
                spec.name.rsplit_once('.').map_or("", |(e, _)| e)
            ));
        }
        if numeric == 0 {
            return Err(format!(
                "--counter {}: none of the {events} event(s) it names has a numeric field {:?}",
                spec.name, spec.field
            ));
        }
    }
    Ok(())
}

/// A type with its names followed (at most 64: a name cannot loop).
fn resolve<'a>(trace: &'a crate::Trace, mut ty: &'a crate::Type) -> &'a crate::Type {
    for _ in 0..64 {
        let crate::Type::Named(name) = ty else { break };
        match trace.aliases.iter().find(|(n, _)| n == name) {
            Some((_, t)) => ty = t,
            None => break,
        }
    }
    ty
}

/// An env entry of a trace, as an integer.
pub(crate) fn env_int(trace: &crate::Trace, name: &str) -> Option<i64> {
    trace.env.iter().find_map(|(n, v)| match v {
        EnvValue::Int(i) if n == name => Some(*i),
        _ => None,
    })
}

pub(crate) fn env_str<'a>(trace: &'a crate::Trace, name: &str) -> Option<&'a str> {
    trace.env.iter().find_map(|(n, v)| match v {
        EnvValue::Str(s) if n == name => Some(s.as_str()),
        _ => None,
    })
}

/// Why an export's step failed: the event could not be decoded (its
/// stream ends there, the others go on), or the output could not be
/// written (the export stops).
pub(crate) enum Failure {
    Decode(crate::decode::DecodeError),
    Write(std::io::Error),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Write(e)
    }
}

/// An export: what it does with each event and loss, and at the end.
pub(crate) trait Export {
    /// The event at `stream`'s head, at `t` (to be emitted).
    fn event(
        &mut self,
        stream: &mut crate::decode::stream::StreamReader,
        t: Option<i128>,
    ) -> Result<(), Failure>;
    /// `n` events lost in `stream`, reported at `t`.
    fn lost(
        &mut self,
        stream: &crate::decode::stream::StreamReader,
        n: u64,
        t: Option<i128>,
    ) -> std::io::Result<()>;
    /// After the last event: what is still open, the trailer, the flush.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// Runs `x` over every event and loss `merge` gives that `opts` selects,
/// then finishes it. A stream that cannot be decoded further ends there
/// and the others go on (as in `tape show`): the first such error is
/// returned after the output is complete. An error writing stops it.
pub(crate) fn run(
    merge: &mut crate::merge::StreamMerge,
    opts: &Options,
    x: &mut impl Export,
) -> std::io::Result<Option<crate::decode::DecodeError>> {
    use crate::merge::Step;
    merge.keep_packet_values();
    let mut failed = None;
    while let Some(step) = merge.next() {
        match step {
            Err(e) => failed = Some(e),
            Ok(Step::Lost(s, n, t)) if opts.in_range(t) => x.lost(s, n, t)?,
            Ok(Step::Lost(..)) => {}
            Ok(Step::Event(s, t)) => {
                if !opts.wants(s, t) || !opts.keep.as_ref().is_none_or(|k| k(s)) {
                    // Not exported: stepped over.
                    if let Err(e) = s.emit(&mut crate::decode::plan::Discard) {
                        merge.fail(e);
                    }
                    continue;
                }
                match x.event(s, t) {
                    Ok(()) => {}
                    Err(Failure::Decode(e)) => merge.fail(e),
                    Err(Failure::Write(e)) => return Err(e),
                }
            }
        }
    }
    x.finish()?;
    Ok(failed)
}

/// The process a trace stands for: its pid and program (tape's `env`,
/// LTTng's `vpid`/`procname`), else a made-up pid past any real one and
/// the trace directory's name.
pub(crate) fn process(i: usize, t: &TraceDir) -> (i64, String) {
    let pid = env_int(&t.trace, "pid")
        .or_else(|| env_int(&t.trace, "vpid"))
        .unwrap_or(1_000_000 + i as i64);
    let name = env_str(&t.trace, "program")
        .or_else(|| env_str(&t.trace, "procname"))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            t.dir
                .file_name()
                .map_or("trace".into(), |n| n.to_string_lossy().into_owned())
        });
    (pid, name)
}

/// A key for a stream whose packets do not say their thread (tid 0): its
/// own thread, apart from every real one (negative).
pub(crate) fn stream_key(stream: &crate::decode::stream::StreamReader) -> i64 {
    -(stream.path().as_os_str().as_encoded_bytes().as_ptr() as i64 & i64::MAX)
}

/// An event's time in an export: ns, unsigned; an event with no time takes
/// its thread's `last` (0 at first), a time outside `u64` is clamped (both
/// counted in `done`).
pub(crate) fn time(t: Option<i128>, last: &mut u64, done: &mut Exported) -> u64 {
    let ts = match t {
        Some(t) => u64::try_from(t).unwrap_or_else(|_| {
            done.clamped += 1;
            if t < 0 {
                0
            } else {
                u64::MAX
            }
        }),
        None => {
            done.untimed += 1;
            *last
        }
    };
    *last = ts;
    ts
}
