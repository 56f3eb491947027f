//! `tape`: read CTF 1.8 traces (tape's, DPDK's, LTTng's).
//!
//! * `tape show PATH...`: events in babeltrace2's text format, merged in time
//!   order; lost events as `[LOST n EVENTS]` lines.
//! * `tape check PATH...`: validates every packet and event; exit 0, or 1
//!   with the file, packet offset and bit offset of the first problem.
//! * `tape ctl PID COMMAND...`: controls a running tape program (ftrace's
//!   control files: `status`, `on`, `off`, `enable`, `disable`, `list`,
//!   `buffer`, `mode`, `save`, `stats`); `tape ps` lists the programs this
//!   user can control. See `tape::control`.
//! * `tape record PID -o DIR`: streams a running process's shared rings
//!   (shared by default) to a trace on disk (`tape::record`); `tape pipe PID`
//!   prints its events as they come (`pipe.rs`); `tape recover
//!   PID|DIR` rebuilds the trace of one that died (`tape::recover`), `tape
//!   ps --dead` lists those, `tape recover --clean` removes them.
//!
//! Output errors are errors: a closed pipe (`| head`) ends the command
//! quietly with status 0, as the reader of the pipe asked; any other write
//! error (a full disk) is reported with status 1, in every subcommand and
//! format. Messages on stderr never panic, even with stderr closed.

use std::io::{IoSlice, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tape_ctf::decode::plan::{Discard, Sink};
use tape_ctf::decode::stream::{open_streams, FastStream, LostByCause, TracePlan, LOSS_CAUSES};
use tape_ctf::merge::{FastMerge, Step};
use tape_ctf::metadata::read::{find_traces, TraceDir};
use tape_ctf::output::json_value::JsonSink;
use tape_ctf::output::text::parallel::{render_merged, Piece, Render, Seconds, Threads, TimeText};

mod export;
mod filter;
mod pipe;
mod recover;
mod symbols;
mod time;
use time::Bound;

#[derive(Parser)]
#[command(
    name = "tape",
    version,
    about = "Read CTF 1.8 traces; control running tape programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// babeltrace2's text lines.
    Text,
    /// One JSON object a line.
    Json,
    /// ftrace's `trace` file, with the events' read-time formats.
    Ftrace,
}

/// What `tape show` prints.
struct Selection {
    format: Format,
    clock_seconds: bool,
    events: Option<globset::GlobSet>,
    streams: Option<globset::GlobSet>,
    begin: Option<i128>,
    end: Option<i128>,
    /// `--filter`: a test on each event's values.
    filter: Option<filter::ValueFilter>,
}

fn globs(option: &str, patterns: &[String]) -> Result<Option<globset::GlobSet>, String> {
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

#[derive(Subcommand)]
enum Command {
    /// Print the events, in babeltrace2's text format.
    Show {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print times as seconds since the epoch.
        #[arg(long)]
        clock_seconds: bool,
        /// Output format: babeltrace2's text, one JSON object a line, or
        /// ftrace's `trace` text (events printed with their formats).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Only events whose name matches this glob (repeatable).
        #[arg(long = "events", value_name = "GLOB")]
        events: Vec<String>,
        /// Only streams whose file name matches this glob (repeatable;
        /// tape names a thread's stream `<thread>-<tid>`).
        #[arg(long = "streams", value_name = "GLOB")]
        streams: Vec<String>,
        /// Only events at or after this time: `HH:MM[:SS[.NNNNNNNNN]]` as
        /// the lines show it (local time, on the date of the trace's first
        /// time), `YYYY-MM-DD HH:MM[:SS[.NNNNNNNNN]]`, or seconds since the
        /// epoch (`1700000000.25`), as babeltrace2's --begin.
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        begin: Option<String>,
        /// Only events at or before this time (the forms of --begin).
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        end: Option<String>,
        /// Only events whose fields match this expression, in the kernel's
        /// event filter grammar (`tape ctl PID filter` takes the same):
        /// `len > 1400 && ifname ~ "eth*"`. Events without the fields it
        /// names are not shown.
        #[arg(long, value_name = "EXPR")]
        filter: Option<String>,
    },
    /// Draw the calls of #[tape::traced] functions as ftrace's
    /// function_graph tracer draws them (a thread id where ftrace prints a
    /// CPU); other events print as comments.
    Graph {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// funcgraph-proc: the TASK/PID column.
        #[arg(long = "proc")]
        proc_: bool,
        /// funcgraph-abstime: each line's time (seconds since the epoch).
        #[arg(long)]
        abstime: bool,
        /// nofuncgraph-duration: no DURATION column.
        #[arg(long)]
        no_duration: bool,
        /// nofuncgraph-overhead: no +, !, #, *, @, $ marks.
        #[arg(long)]
        no_overhead: bool,
        /// funcgraph-tail: the function's name after every closing brace.
        #[arg(long)]
        tail: bool,
        /// set_graph_function: only calls under functions matching this
        /// glob (as drawn: `app::io::*`), from depth 0 (repeatable).
        #[arg(long = "function", value_name = "GLOB")]
        functions: Vec<String>,
        /// max_graph_depth: draw calls only this deep (1: only the
        /// outermost).
        #[arg(long, value_name = "N")]
        max_depth: Option<u32>,
        /// Only this thread id (repeatable).
        #[arg(long = "thread", value_name = "TID")]
        threads: Vec<i64>,
        /// Draw in one merged pass instead of a thread per stream (the
        /// same lines; for tests).
        #[arg(long, hide = true)]
        one_pass: bool,
    },
    /// Profile the #[tape::traced] functions, as ftrace's
    /// function_profile_enabled (trace_stat/function*): hit count, total
    /// time, average and s^2, plus self time, p50, p99 and max.
    Profile {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// One table per thread instead of one for the process.
        #[arg(long)]
        per_thread: bool,
        /// The column rows are sorted by (highest first; name: ascending).
        #[arg(long, value_enum, default_value_t = ProfileSort::Time)]
        sort: ProfileSort,
        /// The kernel's layout: Hit, Time, Avg and s^2 only, names cut at
        /// 30 characters.
        #[arg(long)]
        ftrace: bool,
    },
    /// Count events per event name and per stream, lost events, time span
    /// and rates.
    Stats {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Count only the events whose fields match this expression (as
        /// `tape show --filter`).
        #[arg(long, value_name = "EXPR")]
        filter: Option<String>,
    },
    /// Export traces for other tools: `perfetto` (Perfetto's protobuf
    /// trace: open it in ui.perfetto.dev or trace_processor) or `chrome`
    /// (the JSON trace event format). Streamed: a trace of any length in
    /// bounded memory.
    Export {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The format written.
        #[arg(long, value_enum, default_value_t = export::ExportFormat::Perfetto)]
        format: export::ExportFormat,
        /// The file written (`-`: stdout).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// A counter track of a numeric payload field: EVENT.FIELD, the
        /// event a name or glob (`net.rx.len`, `app.*.queue_depth`;
        /// repeatable).
        #[arg(long = "counter", value_name = "EVENT.FIELD")]
        counters: Vec<String>,
        /// Only events whose name matches this glob (repeatable).
        #[arg(long = "events", value_name = "GLOB")]
        events: Vec<String>,
        /// Only events at or after this time (the forms of `tape show
        /// --begin`); calls cut by the range are marked as such.
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        begin: Option<String>,
        /// Only events at or before this time.
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        end: Option<String>,
    },
    /// Validate traces: exit 1 at the first problem.
    Check {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Control a running tape program, as ftrace's files do: status, on,
    /// off, enable PATTERN..., disable PATTERN..., list [PATTERN], buffer
    /// SIZE [PACKET], mode overwrite|discard, save [DIR], stats.
    Ctl {
        /// The program's process id (`tape ps` lists them).
        pid: u32,
        /// The command and its arguments.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// List the running tape programs this user can control (with
    /// --dead: the shared rings that dead ones left, for `tape recover`).
    Ps {
        /// List the dead processes whose shared rings are left, instead.
        #[arg(long)]
        dead: bool,
    },
    /// Rebuild a CTF trace from the shared rings (the default) of a
    /// process that died without saving (kill -9, the OOM killer).
    Recover {
        /// The dead process's id, or its rings' directory (`tape ps
        /// --dead` lists them).
        target: Option<String>,
        /// The trace to write (default: `<program>-recovered-<pid>` here).
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// Remove the rings' directory instead: of TARGET, or of every
        /// dead process.
        #[arg(long)]
        clean: bool,
    },
    /// Print a running process's events as they come (from its shared
    /// rings), in time order across threads, each once: ftrace's
    /// trace_pipe. Ends when the process exits.
    Pipe {
        /// The process's id, or its rings' directory.
        target: String,
        /// Output format: babeltrace2's text lines, one JSON object a
        /// line, or ftrace's trace_pipe lines.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Only events whose name matches this glob (repeatable).
        #[arg(long = "events", value_name = "GLOB")]
        events: Vec<String>,
    },
    /// Stream a running process's events (from its shared rings) to a
    /// CTF trace on disk, for as long as it runs.
    Record {
        /// The process's id, or its rings' directory.
        target: String,
        /// The trace directory to write (must not exist).
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// End after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
        /// End once the trace has this many bytes (`512M`, `2G`).
        #[arg(long, value_name = "LIMIT")]
        size: Option<String>,
    },
}

/// Why a command stopped early.
enum Failure {
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
fn output_error(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::Closed
    } else {
        Failure::Error(format!("cannot write the output: {e}"))
    }
}

/// `tape ctl PID COMMAND...`: the process's answer on stdout.
fn ctl(pid: u32, command: &[String]) -> Result<(), Failure> {
    let text = tape::control::client::request(pid, command).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// `tape ps`: one line per controllable process.
fn ps() -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let mut text = format!(
        "{:>8}  {:<16} {:>7} {:>7} {:>5} {:>10}\n",
        "PID", "NAME", "TRACING", "ENABLED", "RINGS", "RING KB"
    );
    for p in tape::control::client::processes() {
        text.push_str(&format!(
            "{:>8}  {:<16} {:>7} {:>7} {:>5} {:>10}\n",
            p.pid,
            p.name,
            if p.tracing_on { "on" } else { "off" },
            p.enabled,
            p.rings,
            p.bytes / 1024
        ));
    }
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// `eprintln!` that cannot panic (stderr may be closed or full).
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
pub(crate) use say;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Profile {
            paths,
            per_thread,
            sort,
            ftrace,
        } => (|| -> Result<(), Failure> {
            let traces = open(&paths)?;
            let streams = open_streams(&traces)?;
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let p = tape_ctf::output::profile::gather_streams(streams, per_thread, cores)
                .map_err(|e| e.to_string())?;
            let by = match sort {
                ProfileSort::Hit => tape_ctf::output::profile::SortBy::Hit,
                ProfileSort::Time => tape_ctf::output::profile::SortBy::Time,
                ProfileSort::Avg => tape_ctf::output::profile::SortBy::Avg,
                ProfileSort::SelfTime => tape_ctf::output::profile::SortBy::SelfTime,
                ProfileSort::P99 => tape_ctf::output::profile::SortBy::P99,
                ProfileSort::Max => tape_ctf::output::profile::SortBy::Max,
                ProfileSort::Name => tape_ctf::output::profile::SortBy::Name,
            };
            print(&p.table(by, ftrace))
        })(),
        Command::Graph {
            paths,
            proc_,
            abstime,
            no_duration,
            no_overhead,
            tail,
            functions,
            max_depth,
            threads,
            one_pass,
        } => (|| -> Result<(), Failure> {
            let traces = open(&paths)?;
            let functions = globs("--function", &functions)?;
            let opts = tape_ctf::output::graph::Options {
                proc_,
                abstime,
                duration: !no_duration,
                overhead: !no_overhead,
                tail,
                functions: functions.map(|g| {
                    std::sync::Arc::new(move |f: &str| g.is_match(f))
                        as tape_ctf::output::graph::FunctionFilter
                }),
                max_depth: max_depth.unwrap_or(0),
                threads,
                tid_width: 1,
            };
            graph(&traces, opts, one_pass)
        })(),
        Command::Show {
            paths,
            clock_seconds,
            format,
            events,
            streams,
            begin,
            end,
            filter,
        } => (|| -> Result<(), Failure> {
            let bound = |option: &str, v: &Option<String>| {
                v.as_deref().map(|v| Bound::parse(option, v)).transpose()
            };
            let (begin, end) = (bound("--begin", &begin)?, bound("--end", &end)?);
            let traces = open(&paths)?;
            // A time of day is on the date of the trace's first time.
            let first = [begin, end]
                .iter()
                .any(|b| matches!(b, Some(Bound::TimeOfDay(_))))
                .then(|| first_time(&traces))
                .flatten();
            let events = globs("--events", &events)?;
            let filter = filter
                .map(|text| {
                    let classes = traces.iter().flat_map(|t| t.trace.events.iter());
                    filter::ValueFilter::new(
                        &text,
                        classes.filter(|c| events.as_ref().is_none_or(|g| g.is_match(&c.name))),
                    )
                })
                .transpose()?;
            let sel = Selection {
                format,
                clock_seconds,
                events,
                streams: globs("--streams", &streams)?,
                begin: begin.map(|b| b.resolve(first)),
                end: end.map(|b| b.resolve(first)),
                filter,
            };
            show(traces, &sel)
        })(),
        Command::Export {
            paths,
            format,
            output,
            counters,
            events,
            begin,
            end,
        } => export::export(
            &paths,
            format,
            &output,
            &counters,
            &events,
            (begin.as_deref(), end.as_deref()),
        ),
        Command::Check { paths } => check(&paths),
        Command::Stats { paths, filter } => stats(&paths, filter.as_deref()),
        Command::Ctl { pid, command } => ctl(pid, &command),
        Command::Ps { dead: false } => ps(),
        Command::Ps { dead: true } => recover::ps_dead(),
        Command::Recover {
            target,
            output,
            clean,
        } => recover::recover(target, output, clean),
        Command::Record {
            target,
            output,
            duration,
            size,
        } => recover::record(&target, output, duration, size),
        Command::Pipe {
            target,
            format,
            events,
        } => globs("--events", &events)
            .map_err(Failure::Error)
            .and_then(|g| pipe::pipe(&target, format, g)),
    };
    match r {
        Ok(()) | Err(Failure::Closed) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => {
            say!("tape: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn open(paths: &[PathBuf]) -> Result<Vec<TraceDir>, String> {
    let mut all = Vec::new();
    for p in paths {
        all.extend(find_traces(p).map_err(|e| e.to_string())?);
    }
    Ok(all)
}

/// The time of a line: `HH:MM:SS.nnnnnnnnn` in the local time zone, or
/// seconds since the epoch. The broken-down time of the last second is
/// cached with the time that second starts, so that an event in the same
/// second costs a subtraction, not a division and `localtime_r`.
#[derive(Clone, Default)]
struct LineTime {
    seconds: bool,
    /// The second cached.
    second: Option<Second>,
}

/// A second of local time: where it starts and how a line in it opens.
#[derive(Clone)]
struct Second {
    /// Its start, ns since the epoch.
    from: i128,
    /// `[HH:MM:SS.`
    open: Vec<u8>,
    /// `open` in the low bytes of a word, when it is the usual 10 bytes
    /// (years past 9999 are longer): stored at once.
    word: Option<[u8; 16]>,
}

impl LineTime {
    /// The second of `ns`, cached: nearly always that of the last line.
    #[inline(always)]
    fn second(&mut self, ns: i128) -> &Second {
        let hit = |s: &Second| (0..1_000_000_000).contains(&ns.wrapping_sub(s.from));
        if !self.second.as_ref().is_some_and(hit) {
            self.second = None;
        }
        self.second.get_or_insert_with(|| Second::new(ns))
    }
}

impl Second {
    #[cold]
    #[inline(never)]
    fn new(ns: i128) -> Second {
        let from = ns - ns.rem_euclid(1_000_000_000);
        let open = format!("[{}.", time::local_hms(from.div_euclid(1_000_000_000))).into_bytes();
        let word = (open.len() == 10).then(|| {
            let mut w = [0u8; 16];
            w[..10].copy_from_slice(&open);
            w
        });
        Second { from, open, word }
    }
}

impl TimeText for LineTime {
    fn write(&mut self, out: &mut tape_ctf::output::text::line::TextBuf, ns: i128) {
        if self.seconds || ns < 0 {
            // Before the epoch: `-S.nnnnnnnnn`, as babeltrace2 prints the
            // first such time (it prints the later ones as if after it).
            return Seconds.write(out, ns);
        }
        let s = self.second(ns);
        out.put(&s.open[1..]);
        out.nine((ns - s.from) as u64);
    }

    /// `[HH:MM:SS.` as one store, then the nine digits.
    #[inline(always)]
    fn open_line(&mut self, out: &mut tape_ctf::output::text::line::TextBuf, t: Option<i128>) {
        let Some(ns) = t.filter(|&ns| !self.seconds && ns >= 0) else {
            return tape_ctf::output::text::parallel::open_line(self, out, t);
        };
        let s = self.second(ns);
        match &s.word {
            Some(w) => out.wide(w, 10),
            None => out.put(&s.open),
        }
        out.nine((ns - s.from) as u64);
    }
}

/// The earliest time of the traces: a stream's first packet's
/// `timestamp_begin`, or its first event's time (what babeltrace2's
/// trimmer takes the date of a time of day from).
fn first_time(traces: &[TraceDir]) -> Option<i128> {
    let streams = open_streams(traces).ok()?;
    let firsts = streams.into_iter().filter_map(|mut s| {
        let next = s.peek().ok()?;
        s.packet_times().1.or(match next {
            tape_ctf::decode::stream::Next::Event(t) => t,
            _ => None,
        })
    });
    firsts.min()
}

fn show(traces: Vec<TraceDir>, sel: &Selection) -> Result<(), Failure> {
    if sel.format != Format::Json {
        latency_header(&traces)?;
    }
    if sel.format == Format::Ftrace {
        return show_ftrace(&traces, sel);
    }
    let mut streams = open_streams(&traces)?;
    streams.retain(|s| sel.stream_shown(s.path()));
    let render = match sel.format {
        Format::Text | Format::Ftrace => Render::Text(LineTime {
            seconds: sel.clock_seconds,
            ..LineTime::default()
        }),
        Format::Json => Render::Lines(tape_ctf::output::json::write_json_line),
    };
    if sel.format == Format::Json {
        streams.iter_mut().for_each(FastStream::render_json);
    }
    if sel.filter.as_ref().is_some_and(|f| f.uses_common()) {
        streams.iter_mut().for_each(FastStream::keep_packet_values);
    }
    let shown = Shows(sel);
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let mut lost_total = 0u64;
    let mut failed: Option<std::io::Error> = None;
    // The calling thread merges and decodes too: one worker fewer than cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let r = render_merged(streams, render, shown, Threads::new(cores - 1), |piece| {
        let written = match piece {
            Piece::Lines(lines) => write_all_runs(&mut stdout, lines),
            Piece::Lost(path, n, t) => {
                lost_total += n;
                if sel.in_range(t) || t.is_none() {
                    let line = match sel.format {
                        Format::Text | Format::Ftrace => {
                            format!("[LOST {n} EVENTS] in {}\n", path.display())
                        }
                        Format::Json => format!(
                            "{{\"lost\":{n},\"time_ns\":{},\"stream\":{}}}\n",
                            t.map_or("null".into(), |t| t.to_string()),
                            json_string(&path.display().to_string())
                        ),
                    };
                    stdout.write_all(line.as_bytes())
                } else {
                    Ok(())
                }
            }
        };
        // Stop at the first write error (classified below).
        failed = written.err();
        failed.is_none()
    });
    // What was decoded before a damaged packet is written before its error.
    end_output(&mut stdout, failed)?;
    r.map_err(|e| e.to_string())?;
    say_lost(lost_total, &traces, sel);
    Ok(())
}

/// A latency snapshot's header (ftrace's latency format, see
/// [`tape_ctf::output::latency`]) on stdout, before its events: when the one trace
/// shown is one.
fn latency_header(traces: &[TraceDir]) -> Result<(), Failure> {
    let [trace] = traces else { return Ok(()) };
    let Some(header) = tape_ctf::output::latency::Header::of(&trace.trace) else {
        return Ok(());
    };
    let (mut events, mut lost) = (0u64, 0u64);
    for mut s in open_streams(std::slice::from_ref(trace))? {
        // A damaged stream is counted up to the damage (which `show`
        // reports when it gets there).
        let c = s.count().map_err(|e| e.to_string())?;
        events += c.events;
        lost += c.lost;
    }
    let mut out = std::io::stdout().lock();
    out.write_all(header.render(events, lost).as_bytes())
        .map_err(output_error)?;
    Ok(())
}

/// The closing notice of `tape show`: how many events the tracer lost in
/// the streams shown and, for tape's traces, why.
fn say_lost(lost: u64, traces: &[TraceDir], sel: &Selection) {
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

/// Losses by cause of the streams `sel` shows, from their packet contexts
/// (tape's traces), or `None` when some stream does not say.
fn lost_by_cause(traces: &[TraceDir], sel: &Selection) -> Option<LostByCause> {
    let mut sum = LostByCause::default();
    for mut stream in open_streams(traces).ok()? {
        if !sel.stream_shown(stream.path()) {
            continue;
        }
        let causes = stream.lost_by_cause().ok()??;
        sum.iter_mut().zip(causes).for_each(|(s, n)| *s += n);
    }
    Some(sum)
}

/// `overwritten = 5, full = 2`: every cause, or those with losses.
fn causes_text(causes: &LostByCause, all: bool) -> String {
    let named = LOSS_CAUSES.iter().zip(causes);
    let shown: Vec<String> = named
        .filter(|(_, &n)| all || n > 0)
        .map(|(c, n)| format!("{c} = {n}"))
        .collect();
    shown.join(", ")
}

/// Writes all of `runs`, with as few `writev` calls as the system takes.
fn write_all_runs(w: &mut impl Write, mut runs: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut runs, 0); // empty ones first
    while !runs.is_empty() {
        match w.write_vectored(runs) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut runs, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `tape stats --filter`: every event class, each event by its values.
struct Filtered<'a>(&'a filter::ValueFilter);

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
struct Shows<'a>(&'a Selection);

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
    fn everything(format: Format) -> Selection {
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
    fn stream_shown(&self, path: &std::path::Path) -> bool {
        match (&self.streams, path.file_name()) {
            (Some(g), Some(n)) => g.is_match(n),
            _ => true,
        }
    }

    fn in_range(&self, t: Option<i128>) -> bool {
        match t {
            Some(t) => self.begin.is_none_or(|b| t >= b) && self.end.is_none_or(|e| t <= e),
            None => self.begin.is_none() && self.end.is_none(),
        }
    }
}

/// `tape show --format ftrace`: one thread merges and renders (with typed
/// values: the formats need them), as ftrace's `trace` file prints.
/// Says which read-time formats of `traces` did not parse (their events
/// print without them).
fn warn_formats(traces: &[TraceDir]) {
    for t in traces {
        for e in &tape_ctf::metadata::formats::Formats::new(&t.trace).errors {
            say!("tape: warning: {}/metadata: {e}", t.dir.display());
        }
    }
}

fn show_ftrace(traces: &[TraceDir], sel: &Selection) -> Result<(), Failure> {
    warn_formats(traces);
    let mut merge = FastMerge::filtered(traces, |p| sel.stream_shown(p))?;
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let shown = Shows(sel);
    let lost_shown = |t: Option<i128>| sel.in_range(t) || t.is_none();
    let mut failed: Option<std::io::Error> = None;
    let mut symbols = symbols::Symbols::default();
    let lost = tape_ctf::output::ftrace::render_with_symbols(
        &mut merge,
        shown,
        lost_shown,
        &mut |exe, addr| symbols.name(exe, addr),
        |text| {
            failed = stdout.write_all(text.as_bytes()).err();
            failed.is_none()
        },
    );
    end_output(&mut stdout, failed)?;
    for w in &symbols.warnings {
        say!("tape: warning: {w}");
    }
    let lost = lost.map_err(|e| e.to_string())?;
    say_lost(lost, traces, sel);
    Ok(())
}

/// `tape profile --sort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ProfileSort {
    Hit,
    Time,
    Avg,
    #[value(name = "self")]
    SelfTime,
    P99,
    Max,
    Name,
}

/// `tape graph`: the function_graph view of `traces`.
fn graph(
    traces: &[TraceDir],
    mut opts: tape_ctf::output::graph::Options,
    one_pass: bool,
) -> Result<(), Failure> {
    warn_formats(traces);
    let mut streams = open_streams(traces)?;
    let widest = tape_ctf::output::graph::thread_ids(&mut streams)
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
    // are too many streams for that: then one merged pass.
    let lost = if !one_pass && streams.len() <= tape_ctf::output::graph::STREAM_THREADS {
        tape_ctf::output::graph::render_streams(streams, &opts, &mut write)
    } else {
        drop(streams);
        let mut merge = FastMerge::new(traces)?;
        tape_ctf::output::graph::render(&mut merge, opts, Shows(&sel), &mut write)
    };
    end_output(&mut stdout, failed)?;
    let lost = lost.map_err(|e| e.to_string())?;
    say_lost(lost, traces, &sel);
    Ok(())
}

/// Flushes `out`, unless a write already failed with `failed`; either
/// error classified.
fn end_output(out: &mut impl Write, failed: Option<std::io::Error>) -> Result<(), Failure> {
    match failed {
        None => out.flush().map_err(output_error),
        Some(e) => Err(output_error(e)),
    }
}

/// Writes `text` to stdout, flushed.
fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(output_error)
}

fn json_string(s: &str) -> String {
    let mut v = Vec::new();
    JsonSink::new(&mut v).string(s.as_bytes());
    String::from_utf8(v).unwrap_or_default()
}

/// A stream's time in `tape check` (see there).
#[derive(Default)]
struct StreamTime {
    last: Option<i128>,
    packet: Option<u64>,
    pending_end: Option<i128>,
    backwards: u64,
    first: String,
}

impl StreamTime {
    fn advance(&mut self, t: Option<i128>, event: u64) {
        let Some(t) = t else { return };
        if let Some(last) = self.last.filter(|&l| t < l) {
            if self.backwards == 0 {
                self.first = format!("event {event}: {t} ns after {last} ns");
            }
            self.backwards += 1;
        }
        self.last = Some(t);
    }
}

fn check(paths: &[PathBuf]) -> Result<(), Failure> {
    let traces = open(paths)?;
    for t in &traces {
        for w in &t.warnings {
            say!("tape: warning: {}/metadata: {w}", t.dir.display());
        }
        // Valid CTF (a stream with no packet), but its events, if it ever
        // had any, are gone: worth a word.
        for p in &t.streams {
            if std::fs::metadata(p).is_ok_and(|m| m.len() == 0) {
                say!(
                    "tape: warning: {}: the stream file is empty (0 bytes: no packet, no event)",
                    p.display()
                );
            }
        }
    }
    let mut merge = FastMerge::new(&traces)?;
    let (mut events, mut lost) = (0u64, 0u64);
    // Per stream, time as babeltrace2's muxer sees it (packet beginnings,
    // events, packet ends): how often it went backwards, and where first.
    // CTF 1.8 does not forbid it and real traces have it (ctf-testsuite
    // stream/pass/lttng-modules-trace, which babeltrace 1.5 reads;
    // babeltrace2 stops there): a warning, not an error.
    let mut times: std::collections::HashMap<PathBuf, StreamTime> = Default::default();
    while let Some(step) = merge.next() {
        match step.map_err(|e| e.to_string())? {
            Step::Event(stream, t) => {
                let (packet, begin, end) = stream.packet_times();
                let st = times.entry(stream.path().to_path_buf()).or_default();
                if st.packet != Some(packet) {
                    let previous_end = st.pending_end.take();
                    st.advance(previous_end, events);
                    st.advance(begin, events);
                    st.packet = Some(packet);
                    st.pending_end = end;
                }
                st.advance(t, events);
                if let Err(e) = stream.emit(&mut Discard) {
                    // Its stream ends; the error comes after the others.
                    merge.fail(e);
                    continue;
                }
                events += 1;
            }
            Step::Lost(_, n, _) => lost += n,
        }
    }
    for st in times.values_mut() {
        let end = st.pending_end.take();
        st.advance(end, events);
    }
    let mut back: Vec<(PathBuf, u64, String)> = times
        .into_iter()
        .filter(|(_, st)| st.backwards > 0)
        .map(|(p, st)| (p, st.backwards, st.first))
        .collect();
    back.sort();
    for (path, n, first) in back {
        say!(
            "tape: warning: {}: time goes backwards {n} time(s) in this stream (first at {first})",
            path.display()
        );
    }
    print(&format!(
        "ok: {} trace(s), {events} events, {lost} lost\n",
        traces.len()
    ))
}

/// Per stream, in file order: the streams need no merge to be counted,
/// so they are counted on all cores at once.
fn stats(paths: &[PathBuf], filter: Option<&str>) -> Result<(), Failure> {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    let traces = open(paths)?;
    let filter = filter
        .map(|text| {
            filter::ValueFilter::new(text, traces.iter().flat_map(|t| t.trace.events.iter()))
        })
        .transpose()?;
    let filtered = filter.as_ref().map(Filtered);
    let mut jobs = Vec::new();
    for t in &traces {
        let plan = std::sync::Arc::new(
            TracePlan::new(&t.trace).map_err(|e| format!("{}/metadata: {e}", t.dir.display()))?,
        );
        jobs.extend(t.streams.iter().map(|p| (plan.clone(), p.clone())));
    }
    let counted = parallel_map(&jobs, |(plan, path)| {
        FastStream::open(plan.clone(), path)
            .and_then(|mut s| match &filtered {
                None => s.count(),
                Some(f) => {
                    if f.0.uses_common() {
                        s.keep_packet_values();
                    }
                    s.count_shown(f)
                }
            })
            .map_err(|e| e.to_string())
    });
    let mut by_event: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_stream: Vec<(String, u64, u64)> = Vec::new();
    let mut by_cause: Option<LostByCause> = None;
    let (mut first, mut last): (Option<i128>, Option<i128>) = (None, None);
    let (mut total, mut lost_total) = (0u64, 0u64);
    let mut stopped = Vec::new();
    for ((_, path), c) in jobs.iter().zip(counted) {
        let mut c = c?;
        if let Some(e) = c.stopped.take() {
            stopped.push(e.to_string());
        }
        for (class, n) in c.by_class {
            *by_event.entry(class.name.clone()).or_default() += n;
        }
        first = match (first, c.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        last = last.max(c.last);
        total += c.events;
        lost_total += c.lost;
        if let Some(causes) = c.lost_by_cause {
            let sum = by_cause.get_or_insert_with(Default::default);
            sum.iter_mut().zip(causes).for_each(|(s, n)| *s += n);
        }
        by_stream.push((path.display().to_string(), c.events, c.lost));
    }
    let span = match (first, last) {
        (Some(f), Some(l)) => Some(l - f),
        _ => None,
    };
    // Events a tape recorder lost outside any stream (no ring to count them
    // in: the ring could not be allocated, the thread was exiting, or an
    // exited thread's ring was freed unsaved), from the trace's `env`.
    let mut outside: BTreeMap<&str, i64> = BTreeMap::new();
    for t in &traces {
        let tape = t.trace.env.iter().any(|(k, v)| {
            k == "tracer_name" && matches!(v, tape_ctf::EnvValue::Str(s) if s == "tape")
        });
        for (k, v) in t.trace.env.iter().filter(|_| tape) {
            if let (Some(name), tape_ctf::EnvValue::Int(n)) =
                (ENV_LOSSES.iter().find(|n| **n == k), v)
            {
                *outside.entry(name).or_default() += (*n).max(0);
            }
        }
    }
    let outside_total: u64 = outside.values().map(|&n| n as u64).sum();
    lost_total += outside_total;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "traces: {}, streams: {}",
        traces.len(),
        by_stream.len()
    );
    let _ = writeln!(text, "events: {total}, lost: {lost_total}");
    if let Some(causes) = by_cause {
        let _ = writeln!(
            text,
            "lost in streams by cause: {}",
            causes_text(&causes, true)
        );
    }
    if outside_total > 0 {
        let causes: Vec<String> = outside
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k} = {n}"))
            .collect();
        let _ = writeln!(
            text,
            "lost outside any stream: {outside_total} ({})",
            causes.join(", ")
        );
    }
    if let Some(span) = span {
        let secs = span as f64 / 1e9;
        let _ = writeln!(text, "time span: {secs:.9} s");
        if secs > 0.0 {
            let _ = writeln!(text, "rate: {:.1} events/s", total as f64 / secs);
        }
    }
    let _ = writeln!(text);
    let _ = writeln!(text, "{:>12}  {:>6}  event", "count", "%");
    let mut ev: Vec<_> = by_event.into_iter().collect();
    ev.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, c) in ev {
        let _ = writeln!(
            text,
            "{c:>12}  {:>6.2}  {name}",
            100.0 * c as f64 / total.max(1) as f64
        );
    }
    let _ = writeln!(text);
    let _ = writeln!(text, "{:>12}  {:>12}  stream", "events", "lost");
    for (path, n, l) in by_stream {
        let _ = writeln!(text, "{n:>12}  {l:>12}  {path}");
    }
    print(&text)?;
    // Damaged streams were counted up to the damage: the figures above are
    // those of what could be read; where each stopped is an error.
    if let Some((last, others)) = stopped.split_last() {
        for e in others {
            say!("tape: error: {e}");
        }
        return Err(Failure::Error(format!(
            "{last} (the figures above count what was read before)"
        )));
    }
    Ok(())
}

/// The `env` entries in which tape's recorder counts the events it lost
/// outside any stream.
const ENV_LOSSES: [&str; 3] = [
    "events_dropped_ring_alloc",
    "events_dropped_without_ring",
    "events_lost_with_exited_threads",
];

/// `f` applied to every job, on as many threads as there are cores (each
/// takes the next job left), results in job order.
fn parallel_map<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len());
    if threads <= 1 {
        return jobs.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                // Relaxed: the counter only hands out indices; the results
                // are published through the mutex and the scope's join.
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = f(job);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}
