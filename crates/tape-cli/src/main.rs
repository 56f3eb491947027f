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
//!   (shared by default) to a trace on disk (`tape_consumer::record`); `tape pipe PID`
//!   prints its events as they come (`pipe.rs`); `tape recover
//!   PID|DIR` rebuilds the trace of one that died (`tape_consumer::recover`), `tape
//!   ps --dead` lists those, `tape recover --clean PID|--all` removes them.
//! * `tape record PID|--all --relayd net://HOST`: the same rings streamed to
//!   LTTng's relay daemon, read live by babeltrace2 (`relay/`: the protocol
//!   and tape as its producer; no authentication: loopback, a trusted
//!   network or an ssh tunnel).
//!
//! One file per subcommand (`show.rs`, `graph.rs`, `profile.rs`,
//! `stats.rs`, `check.rs`, `export.rs`, `ctl.rs` with `ps`, `pipe.rs`,
//! `recover.rs` with `record`, `relay/` with `record --relayd`); what they share in `select.rs` (the
//! selection, how losses are said) and `output.rs` (opening traces, writing
//! the output); this file is the command line.
//!
//! Output errors are errors: a closed pipe (`| head`) ends the command
//! quietly with status 0, as the reader of the pipe asked; any other write
//! error (a full disk) is reported with status 1, in every subcommand and
//! format. Messages on stderr never panic, even with stderr closed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod ctl;
mod export;
mod filter;
mod graph;
mod output;
mod pipe;
mod profile;
mod reader;
mod recover;
mod relay;
mod select;
mod show;
mod stats;
mod symbols;
mod time;
use output::{open, say, Failure, Format};
use select::{globs, Selection};
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

#[derive(Subcommand)]
enum Command {
    /// Print the events, in babeltrace2's text format.
    Show(ShowArgs),
    /// Draw the calls of #[tape::traced] functions as ftrace's
    /// function_graph tracer draws them (a thread id where ftrace prints a
    /// CPU); other events print as comments.
    Graph(GraphArgs),
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
        #[arg(long, value_enum, default_value_t = profile::ProfileSort::Time)]
        sort: profile::ProfileSort,
        /// The kernel's layout: Hit, Time, Avg and s^2 only, names cut at
        /// 30 characters.
        #[arg(long)]
        ftrace: bool,
        /// Only the calls whose entry and exit match this expression (as
        /// `tape show --filter`; `common_thread ~ "worker-*"`).
        #[arg(long, value_name = "EXPR")]
        filter: Option<String>,
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
        /// Only events whose fields match this expression (as `tape show
        /// --filter`).
        #[arg(long, value_name = "EXPR")]
        filter: Option<String>,
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
        /// Remove the rings' directory instead: of TARGET, or with --all
        /// of every dead process of this user.
        #[arg(long)]
        clean: bool,
        /// With --clean: every dead process's rings (without it, --clean
        /// needs a TARGET).
        #[arg(long, requires = "clean", conflicts_with = "target")]
        all: bool,
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
        /// Only events whose name matches this glob (repeatable). A pipe
        /// that selects consumes nothing: the next reader finds every
        /// event, those printed included (it peeks, as ftrace's `trace`
        /// file reads).
        #[arg(long = "events", value_name = "GLOB")]
        events: Vec<String>,
    },
    /// Stream a running process's events (from its shared rings) to a
    /// CTF trace on disk, or to LTTng's relay daemon, for as long as it
    /// runs.
    Record(RecordArgs),
}

/// `tape show`'s arguments.
#[derive(clap::Args)]
struct ShowArgs {
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
}

/// `tape graph`'s arguments.
#[derive(clap::Args)]
struct GraphArgs {
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
    /// Only events whose fields match this expression (as `tape show
    /// --filter`; `common_thread ~ "worker-*"`): a call whose entry or
    /// exit it drops is drawn as one cut short.
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
}

/// `tape record`'s arguments.
#[derive(clap::Args)]
struct RecordArgs {
    /// The process's id, or its rings' directory.
    #[arg(required_unless_present_any = ["all", "command"])]
    target: Option<String>,
    /// Start this program (after `--`) and record it from its first
    /// ring until it exits.
    #[arg(last = true, value_name = "COMMAND", conflicts_with_all = ["target", "all"])]
    command: Vec<String>,
    /// Every tape process of this user on this host, as they start and
    /// until they exit (with --relayd): one relay session, a trace per
    /// process (`<program>-<pid>`).
    #[arg(long, requires = "relayd", conflicts_with = "target")]
    all: bool,
    /// The trace directory to write (must not exist).
    #[arg(short, long, value_name = "DIR", required_unless_present = "relayd")]
    output: Option<PathBuf>,
    /// Stream to LTTng's relay daemon (`lttng-relayd`) instead, at
    /// net://HOST[:CONTROL[:DATA]] (ports 5342 and 5343 by default):
    /// babeltrace2 reads it live (net://HOST/host/HOSTNAME/SESSION)
    /// and from the relay's disk. The protocol has no authentication:
    /// loopback, an ssh tunnel or a trusted network only.
    #[arg(long, value_name = "URL", conflicts_with = "output")]
    relayd: Option<String>,
    /// The relay session's name.
    #[arg(long, value_name = "NAME", default_value = "tape", requires = "relayd")]
    session: String,
    /// How often the open packets' events and the idle threads'
    /// beacons go to the relay (a live viewer's delay): `200ms`, `1s`,
    /// a bare number is microseconds (as `lttng create --live`).
    #[arg(long, value_name = "DURATION", requires = "relayd")]
    live_timer: Option<String>,
    /// The host name the relay files the session under (this
    /// machine's by default).
    #[arg(long, value_name = "NAME", requires = "relayd")]
    hostname: Option<String>,
    /// The relay's live port (its `-L`), for the live viewer's URL
    /// this command prints: 5344 by default, as lttng-relayd's.
    #[arg(long, value_name = "PORT", default_value_t = 5344, requires = "relayd",
          value_parser = clap::value_parser!(u16).range(1..))]
    live_port: u16,
    /// The most bytes of packets sent and not yet confirmed by the
    /// relay kept to send again after an outage, over every stream
    /// (`64M` by default); past it the oldest go first, counted
    /// ("not kept for sending again": lost if the relay had not
    /// written them).
    #[arg(long, value_name = "SIZE", requires = "relayd")]
    keep_unconfirmed: Option<String>,
    /// End after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// End once the trace has this many bytes (`512M`, `2G`).
    #[arg(long, value_name = "LIMIT")]
    size: Option<String>,
    /// Record the kernel's events beside the program's, on its clock,
    /// from ftrace (as root): ftrace event globs, `SYSTEM` or
    /// `SYSTEM:EVENT`, comma-separated (`sched`, `sched:sched_switch`,
    /// `syscalls:sys_enter_*`, `irq`), of the program's threads only
    /// (a `sched_switch` when either side is one). The directory then
    /// holds `kernel/` (a stream per CPU) and `ust/PROGRAM-PID/`, as an
    /// LTTng session's; with --relayd, the relay session holds the
    /// trace `kernel` beside the programs' (with --all, every
    /// followed process's threads).
    #[arg(long, value_name = "EVENTS")]
    kernel: Option<String>,
    /// Each CPU's ftrace buffer for --kernel (`4M` by default; ftrace's
    /// `buffer_size_kb`): what holds the kernel's events between the
    /// recorder's turns.
    #[arg(long, value_name = "SIZE", requires = "kernel")]
    kernel_buffer: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Profile {
            paths,
            per_thread,
            sort,
            ftrace,
            filter,
        } => profile::profile(&paths, per_thread, sort, ftrace, filter.as_deref()),
        Command::Graph(a) => graph_command(a),
        Command::Show(a) => show_command(a),
        Command::Export {
            paths,
            format,
            output,
            counters,
            events,
            begin,
            end,
            filter,
        } => export::export(
            &paths,
            format,
            &output,
            &counters,
            (&events, filter.as_deref()),
            (begin.as_deref(), end.as_deref()),
        ),
        Command::Check { paths } => check::check(&paths),
        Command::Stats { paths, filter } => stats::stats(&paths, filter.as_deref()),
        Command::Ctl { pid, command } => ctl::ctl(pid, &command),
        Command::Ps { dead: false } => ctl::ps(),
        Command::Ps { dead: true } => recover::ps_dead(),
        Command::Recover {
            target,
            output,
            clean,
            all,
        } => recover::recover(target, output, clean, all),
        Command::Record(a) => record_command(a),
        Command::Pipe {
            target,
            format,
            events,
        } => globs("--events", &events)
            .map_err(Failure::Error)
            .and_then(|g| pipe::pipe(&target, format, g.map(|g| (g, events)))),
    };
    match r {
        Ok(()) | Err(Failure::Closed) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => {
            say!("tape: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `tape graph`: the functions drawn checked against the traces' entries,
/// then drawn.
fn graph_command(a: GraphArgs) -> Result<(), Failure> {
    let GraphArgs {
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
        filter,
    } = a;
    let traces = open(&paths)?;
    let drawn: std::collections::BTreeSet<String> = select::event_names(&traces)
        .iter()
        .filter_map(|n| tape_ctf::graph::entry_of(n))
        .collect();
    select::each_matches("--function", &functions, &drawn, "traced function")?;
    let functions = globs("--function", &functions)?;
    let keep = filter
        .map(|text| filter::keep_of(&text, &traces, None))
        .transpose()?;
    let opts = tape_ctf::graph::Options {
        proc_,
        abstime,
        duration: !no_duration,
        overhead: !no_overhead,
        tail,
        functions: functions.map(|g| {
            std::sync::Arc::new(move |f: &str| g.is_match(f)) as tape_ctf::graph::FunctionFilter
        }),
        max_depth: max_depth.unwrap_or(0),
        threads,
        tid_width: 1,
        keep,
    };
    graph::graph(&traces, opts, one_pass)
}

/// `tape show`: the time bounds, the event globs and the filter checked
/// against the traces, then the events printed.
fn show_command(a: ShowArgs) -> Result<(), Failure> {
    let ShowArgs {
        paths,
        clock_seconds,
        format,
        events,
        streams,
        begin,
        end,
        filter,
    } = a;
    let bound = |option: &str, v: &Option<String>| {
        v.as_deref().map(|v| Bound::parse(option, v)).transpose()
    };
    let (begin, end) = (bound("--begin", &begin)?, bound("--end", &end)?);
    let traces = open(&paths)?;
    // A time of day is on the date of the trace's first time.
    let first = [begin, end]
        .iter()
        .any(|b| matches!(b, Some(Bound::TimeOfDay(_))))
        .then(|| show::first_time(&traces))
        .flatten();
    select::each_matches("--events", &events, &select::event_names(&traces), "event")?;
    let events = globs("--events", &events)?;
    let filter = filter
        .map(|text| {
            let classes = filter::classes_of(&traces).into_iter();
            filter::ValueFilter::new(
                &text,
                classes.filter(|c| events.as_ref().is_none_or(|g| g.is_match(&c.event.name))),
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
    show::show(traces, &sel)
}

/// `tape record`: the relay's options, what is recorded and the kernel's
/// events, then the recording.
fn record_command(a: RecordArgs) -> Result<(), Failure> {
    let RecordArgs {
        target,
        command,
        all,
        output,
        relayd,
        session,
        live_timer,
        hostname,
        live_port,
        keep_unconfirmed,
        duration,
        size,
        kernel,
        kernel_buffer,
    } = a;
    let relay = relayd
        .map(|url| {
            relay::options(
                &url,
                session,
                live_timer.as_deref(),
                hostname,
                live_port,
                keep_unconfirmed.as_deref(),
            )
        })
        .transpose()?;
    let recorded = if command.is_empty() {
        recover::Recorded::Target(target.as_deref().filter(|_| !all))
    } else {
        recover::Recorded::Command(&command)
    };
    let kernel = kernel
        .map(|events| recover::kernel_options(events, kernel_buffer.as_deref()))
        .transpose()?;
    recover::record(recorded, output, relay, duration, size, kernel)
}
