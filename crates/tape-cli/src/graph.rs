//! `tape graph`: the function_graph view (`tape_ctf::graph`).

use std::io::Write;

use crate::output::Format;
use crate::output::{end_output, warn_formats, Failure};
use crate::select::{say_lost, Selection, Shows};
use tape_ctf::decode::open_streams;
use tape_ctf::merge::StreamMerge;
use tape_ctf::metadata::TraceDir;

/// `tape graph`: the function_graph view of `traces`.
pub(crate) fn graph(
    traces: &[TraceDir],
    mut opts: tape_ctf::graph::Options,
    one_pass: bool,
) -> Result<(), Failure> {
    warn_formats(traces);
    let mut streams = open_streams(traces)?;
    let widest = tape_ctf::graph::thread_ids(&mut streams)
        .into_iter()
        .map(|t| t.to_string().len())
        .max()
        .unwrap_or(1);
    opts.tid_width = widest;
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let mut failed: Option<std::io::Error> = None;
    // Every event and stream: the losses are said as `tape show` says them.
    let sel = Selection::everything(Format::Ftrace);
    let mut write = |text: &str| {
        failed = stdout.write_all(text.as_bytes()).err();
        failed.is_none()
    };
    // A thread per stream (their graphs are independent), unless there
    // are too many streams for that, or a kernel trace's task switches
    // go into the program's threads' graphs: then one merged pass.
    let kernel = traces.iter().any(TraceDir::is_kernel);
    let lost = if !one_pass && !kernel && streams.len() <= tape_ctf::graph::STREAM_THREADS {
        tape_ctf::graph::render_streams(streams, &opts, &mut write)
    } else {
        drop(streams);
        let mut merge = StreamMerge::new(traces)?;
        tape_ctf::graph::render(&mut merge, opts, Shows(&sel), &mut write)
    };
    end_output(&mut stdout, failed)?;
    let lost = lost.map_err(|e| e.to_string())?;
    say_lost(lost, traces, &sel);
    Ok(())
}
