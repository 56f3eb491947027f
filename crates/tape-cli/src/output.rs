//! What every subcommand shares: opening traces, writing the output
//! (a closed pipe ends quietly, any other error is reported), messages on
//! stderr that never panic.

use std::io::Write;
use std::path::PathBuf;

use tape_ctf::decode::{JsonSink, Sink};
use tape_ctf::metadata::{find_traces, TraceDir};

/// The text formats of `tape show` and `tape graph`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// babeltrace2's text lines.
    Text,
    /// One JSON object a line.
    Json,
    /// ftrace's `trace` file, with the events' read-time formats.
    Ftrace,
}

/// Why a command stopped early.
pub(crate) enum Failure {
    /// The output's reader went away (EPIPE): stop quietly.
    Closed,
    /// Anything else: reported, exit status 1.
    Error(String),
}

impl From<String> for Failure {
    fn from(m: String) -> Failure {
        Failure::Error(m)
    }
}

/// A failed write to stdout, classified.
pub(crate) fn output_error(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::Closed
    } else {
        Failure::Error(format!("cannot write the output: {e}"))
    }
}

/// `eprintln!` that cannot panic (stderr may be closed or full).
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub(crate) use say;

pub(crate) fn open(paths: &[PathBuf]) -> Result<Vec<TraceDir>, String> {
    let mut all = Vec::new();
    for p in paths {
        all.extend(find_traces(p).map_err(|e| e.to_string())?);
    }
    Ok(all)
}

/// `tape show --format ftrace`: one thread merges and renders (with typed
/// values: the formats need them), as ftrace's `trace` file prints.
/// Says which read-time formats of `traces` did not parse (their events
/// print without them).
pub(crate) fn warn_formats(traces: &[TraceDir]) {
    for t in traces {
        for e in &tape_ctf::metadata::Formats::new(&t.trace).errors {
            say!("tape: warning: {}/metadata: {e}", t.dir.display());
        }
    }
}

/// Flushes `out`, unless a write already failed with `failed`; either
/// error classified.
pub(crate) fn end_output(
    out: &mut impl Write,
    failed: Option<std::io::Error>,
) -> Result<(), Failure> {
    match failed {
        None => out.flush().map_err(output_error),
        Some(e) => Err(output_error(e)),
    }
}

/// Writes `text` to stdout, flushed.
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(output_error)
}

pub(crate) fn json_string(s: &str) -> String {
    let mut v = Vec::new();
    JsonSink::new(&mut v).string(s.as_bytes());
    String::from_utf8(v).unwrap_or_default()
}
