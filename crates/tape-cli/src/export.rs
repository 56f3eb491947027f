//! `tape export`: a trace in the formats other tools open. `perfetto`
//! writes Perfetto's protobuf trace (`tape_ctf::export::perfetto`), which
//! the Perfetto UI (ui.perfetto.dev) and trace_processor open; `chrome` the
//! JSON trace event format (`tape_ctf::export::chrome`). Both streamed: a
//! trace of any length in bounded memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use tape_ctf::export::{self, CounterSpec, Exported};
use tape_ctf::merge::StreamMerge;

use crate::output::{open, say, warn_formats, Failure};
use crate::select::globs;
use crate::show::first_time;
use crate::time::Bound;

/// `tape export --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// Perfetto's protobuf trace (TracePacket/TrackEvent).
    Perfetto,
    /// The Chrome JSON trace event format (legacy: for tools that read
    /// only that).
    Chrome,
}

/// `--counter EVENT.FIELD`: the field after the last dot, the event (a
/// glob) before it.
fn counter(spec: &str) -> Result<CounterSpec, String> {
    let Some((event, field)) = spec
        .rsplit_once('.')
        .filter(|(e, f)| !e.is_empty() && !f.is_empty())
    else {
        return Err(format!(
            "--counter {spec:?}: expected EVENT.FIELD (an event name or glob, a dot, a field of its payload)"
        ));
    };
    let glob = globset::GlobBuilder::new(event)
        .literal_separator(false)
        .build()
        .map_err(|e| format!("--counter {spec:?}: {}", e.kind()))?
        .compile_matcher();
    Ok(CounterSpec {
        name: spec.to_owned(),
        event: std::sync::Arc::new(move |name: &str| glob.is_match(name)),
        field: field.to_owned(),
    })
}

/// `tape export PATHS --format F -o FILE`.
pub(crate) fn export(
    paths: &[PathBuf],
    format: ExportFormat,
    output: &Path,
    counters: &[String],
    (events, filter): (&[String], Option<&str>),
    (begin, end): (Option<&str>, Option<&str>),
) -> Result<(), Failure> {
    let bound = |option: &str, v: Option<&str>| v.map(|v| Bound::parse(option, v)).transpose();
    let (begin, end) = (bound("--begin", begin)?, bound("--end", end)?);
    let traces = open(paths)?;
    warn_formats(&traces);
    // A time of day is on the date of the trace's first time.
    let first = [begin, end]
        .iter()
        .any(|b| matches!(b, Some(Bound::TimeOfDay(_))))
        .then(|| first_time(&traces))
        .flatten();
    crate::select::each_matches(
        "--events",
        events,
        &crate::select::event_names(&traces),
        "event",
    )?;
    let events = globs("--events", events)?;
    let keep = filter
        .map(|text| crate::filter::keep_of(text, &traces, events.as_ref()))
        .transpose()?;
    let events = events.map(|g| {
        std::sync::Arc::new(move |name: &str| g.is_match(name)) as tape_ctf::export::NameFilter
    });
    let counters = counters
        .iter()
        .map(|c| counter(c))
        .collect::<Result<Vec<_>, _>>()?;
    export::check_counters(&traces, &counters)?;
    let mut merge = StreamMerge::new(&traces)?;
    let opts = export::Options {
        counters,
        begin: begin.map(|b| b.resolve(first)),
        end: end.map(|b| b.resolve(first)),
        events,
        keep,
    };
    let to_stdout = output == Path::new("-");
    let result = if to_stdout {
        let out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        match format {
            ExportFormat::Perfetto => export::perfetto(&mut merge, &traces, &opts, out),
            ExportFormat::Chrome => export::chrome(&mut merge, &traces, &opts, out),
        }
    } else {
        let file = std::fs::File::create(output)
            .map_err(|e| format!("cannot create {}: {e}", output.display()))?;
        let out = std::io::BufWriter::with_capacity(1 << 20, file);
        match format {
            ExportFormat::Perfetto => export::perfetto(&mut merge, &traces, &opts, out),
            ExportFormat::Chrome => export::chrome(&mut merge, &traces, &opts, out),
        }
    };
    let (done, failed) = match result {
        Ok(r) => r,
        Err(e) if to_stdout => return Err(crate::output::output_error(e)),
        Err(e) => {
            // A partial file is not a trace: removed (and its space freed,
            // when the disk was full); only a regular file (never a device
            // such as /dev/full, or a pipe).
            if std::fs::symlink_metadata(output).is_ok_and(|m| m.file_type().is_file()) {
                let _ = std::fs::remove_file(output);
            }
            return Err(Failure::Error(format!(
                "cannot write {}: {e} (a partial file is removed)",
                output.display()
            )));
        }
    };
    summary(&done, output, to_stdout);
    match failed {
        None => Ok(()),
        Some(e) => Err(Failure::Error(format!(
            "{e} (the export holds every event before it, and the other streams' events)"
        ))),
    }
}

/// What was written, on stderr.
fn summary(d: &Exported, output: &Path, to_stdout: bool) {
    let mut text = format!(
        "tape export: {} events of {} threads: {} slices ({} async polls), {} instants",
        d.events, d.threads, d.slices, d.polls, d.instants
    );
    if d.counter_values > 0 {
        text.push_str(&format!(", {} counter values", d.counter_values));
    }
    if d.open > 0 {
        text.push_str(&format!(", {} calls open at the end", d.open));
    }
    if d.no_exit > 0 {
        text.push_str(&format!(
            ", {} calls without their exit (on no-exit tracks)",
            d.no_exit
        ));
    }
    if d.no_entry > 0 {
        text.push_str(&format!(", {} exits without their entry", d.no_entry));
    }
    if d.untimed > 0 {
        text.push_str(&format!(
            ", {} events without a time (at their thread's previous one)",
            d.untimed
        ));
    }
    if d.clamped > 0 {
        text.push_str(&format!(
            ", {} times before the clock's origin (written as 0: Perfetto's are unsigned)",
            d.clamped
        ));
    }
    if d.lost > 0 {
        text.push_str(&format!(", {} events lost (marked)", d.lost));
    }
    let dest = if to_stdout {
        "stdout".to_owned()
    } else {
        output.display().to_string()
    };
    say!("{text}; {} packets, {} bytes to {dest}", d.packets, d.bytes);
}
