//! `tape profile`: the function profiler's table
//! (`tape_ctf::profile`).

use crate::output::{open, print, Failure};
use std::path::PathBuf;

use tape_ctf::decode::open_streams;
use tape_ctf::metadata::TraceDir;

/// `tape profile --sort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProfileSort {
    Hit,
    Time,
    Avg,
    #[value(name = "self")]
    SelfTime,
    P99,
    Max,
    Name,
}

/// `tape profile PATHS`: the table, sorted by `sort`, per thread or for the
/// process, in the kernel's layout with `ftrace`.
pub(crate) fn profile(
    paths: &[PathBuf],
    per_thread: bool,
    sort: ProfileSort,
    ftrace: bool,
    filter: Option<&str>,
) -> Result<(), Failure> {
    let traces = open(paths)?;
    let keep = filter
        .map(|text| crate::filter::keep_of(text, &traces, None))
        .transpose()?;
    // A kernel trace beside the program's: its task switches time the
    // calls off CPU (read first, in time order across its CPUs).
    let (kernel, program): (Vec<_>, Vec<_>) = traces.into_iter().partition(TraceDir::is_kernel);
    let off = if kernel.is_empty() {
        None
    } else {
        let mut merge = tape_ctf::merge::StreamMerge::new(&kernel)?;
        Some(tape_ctf::profile::off_cpu(&mut merge).map_err(|e| e.to_string())?)
    };
    let streams = open_streams(&program)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let p =
        tape_ctf::profile::gather_streams(streams, per_thread, cores, keep.as_ref(), off.as_ref())
            .map_err(|e| e.to_string())?;
    let by = match sort {
        ProfileSort::Hit => tape_ctf::profile::SortBy::Hit,
        ProfileSort::Time => tape_ctf::profile::SortBy::Time,
        ProfileSort::Avg => tape_ctf::profile::SortBy::Avg,
        ProfileSort::SelfTime => tape_ctf::profile::SortBy::SelfTime,
        ProfileSort::P99 => tape_ctf::profile::SortBy::P99,
        ProfileSort::Max => tape_ctf::profile::SortBy::Max,
        ProfileSort::Name => tape_ctf::profile::SortBy::Name,
    };
    print(&p.table(by, ftrace))
}
