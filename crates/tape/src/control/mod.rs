//! Control: operate a running program from outside, as ftrace's files do
//! for the kernel, with no daemon.
//!
//! Every command is a function of the library (below) and a line of
//! `tape ctl PID COMMAND`, which sends it over the process's control socket
//! ([`server`]) to a thread of its own (`tape-ctl`), started by
//! [`crate::init`] unless `TAPE_CONTROL=off`. The emit path is untouched:
//! the commands change the same state words, sizes and modes the program's
//! own calls do.
//!
//! | command                      | ftrace file                    | does                                                   |
//! |------------------------------|--------------------------------|--------------------------------------------------------|
//! | `status`                     | (the tracing directory)        | tracing on/off, mode, sizes, enabled events, rings, losses, paths |
//! | `on` / `off`                 | `tracing_on`                   | record / stop recording, keeping what is enabled       |
//! | `enable PATTERN...`          | `set_event`                    | enable names, globs, `/regex/`; a pattern that matches nothing is an error naming the nearest names (ftrace: `EINVAL`) |
//! | `disable PATTERN...`         | `set_event` (`!event`)         | disable them                                           |
//! | `list [PATTERN]`             | `available_events`             | each tracepoint, its state and its fields              |
//! | `buffer SIZE [PACKET]`       | `buffer_size_kb`               | ring and packet size of rings created from now on      |
//! | `mode overwrite\|discard`    | `options/overwrite`            | what a full ring does, at each ring's next packet      |
//! | `threads TID\|GLOB...`       | `set_event_pid`                | record only those threads ([`threads`]); `--all`: every thread |
//! | `filter PATTERN EXPR`        | `events/*/filter`              | record only the events that match ([`crate::filter`]); `--clear` |
//! | `trigger PATTERN TRIGGER`    | `events/*/trigger`             | set (`!`: remove) a trigger ([`crate::trigger`]); `--clear`; none: list |
//! | `save [DIR]`                 | `snapshot`                     | save the rings now; prints the trace directory         |
//! | `stats`                      | `per_cpu/cpuN/stats`           | per thread: entries, bytes, losses by cause, filtered  |
//! | `tracer [NAME]`              | `current_tracer`               | nop, function, function_graph, latency ([`set_tracer`]) |
//! | `latency`                    | `tracing_max_latency`          | each tracker's maximum and snapshots ([`crate::latency`]) |
//! | `latency reset`              | `echo 0 > tracing_max_latency` | show, then set the maxima to 0                         |
//! | `latency thresh D` / `keep N`| `tracing_thresh`               | report every latency above D / snapshots kept per tracker |
//! | `latency wakeup NAME A B KEY`| (wakeup tracer, hist `onmax`)  | measure from A to B on a key field; `wakeup !NAME` removes |
//!
//! Bad commands, patterns and sizes are [`Error`]s that name the input and
//! the accepted forms, as the `TAPE_TRACE*` variables' are.

pub mod client;
pub mod server;
pub use crate::ring::threads;

use std::fmt::Write as _;

use crate::error::{Error, ErrorKind};
use crate::knobs::{self, Mode};
use crate::registry::{self, Pattern};

/// The commands, for help and error messages.
pub const COMMANDS: &str = "status, on, off, enable PATTERN..., disable PATTERN..., \
    list [PATTERN], buffer SIZE [PACKET], mode overwrite|discard, threads TID|GLOB... \
    (or --all, or nothing to show), filter PATTERN EXPR (or --clear), \
    trigger PATTERN TRIGGER (or --clear, or nothing to list), save [DIR], stats, \
    tracer [nop|function|function_graph|latency], latency [on|off|reset|thresh D|keep N|wakeup ...]";

fn command_error(message: String) -> Error {
    Error::new(ErrorKind::Command, message)
}

/// `p` from the root (this process's working directory before it).
fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Runs one command (its words, as `tape ctl` sends them) and returns
/// its text.
pub fn execute(words: &[String]) -> Result<String, Error> {
    let Some((cmd, args)) = words.split_first() else {
        return Err(command_error(format!(
            "no command given; commands: {COMMANDS}"
        )));
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let no_args = |what: &str| -> Result<(), Error> {
        if args.is_empty() {
            Ok(())
        } else {
            Err(command_error(format!(
                "`{what}` takes no argument (given: {})",
                args.join(" ")
            )))
        }
    };
    match cmd.as_str() {
        "status" => no_args("status").map(|_| status()),
        "on" | "off" => {
            no_args(cmd)?;
            let on = cmd == "on";
            registry::set_tracing(on);
            Ok(format!("tracing_on: {}\n", u8::from(on)))
        }
        "enable" | "disable" => set_events(cmd == "enable", &args),
        "list" => match args.as_slice() {
            [] => Ok(list(None)?),
            [p] => Ok(list(Some(p))?),
            _ => Err(command_error(format!(
                "`list` takes one pattern at most (given: {})",
                args.join(" ")
            ))),
        },
        "buffer" => match args.as_slice() {
            [size] => buffer(size, None),
            [size, packet] => buffer(size, Some(packet)),
            _ => Err(command_error(
                "`buffer` takes SIZE [PACKET], such as `buffer 4M` or `buffer 4M 256K`".into(),
            )),
        },
        // Its value taken by `TAPE_TRACE_MODE`'s parser.
        "mode" => match args.as_slice() {
            [v] => knobs::parse_mode("mode", v).map(set_mode),
            _ => Err(command_error(format!(
                "`mode` takes `overwrite` or `discard` (given: {:?})",
                args.join(" ")
            ))),
        },
        "save" => match args.as_slice() {
            // The path said whole: a relative one is the program's, from
            // its working directory, not the client's.
            [] => crate::save::save().map(|d| format!("{}\n", absolute(&d).display())),
            [dir] => crate::save::save_to(dir).map(|d| format!("{}\n", absolute(&d).display())),
            _ => Err(command_error("`save` takes one directory at most".into())),
        },
        "stats" => no_args("stats").map(|_| stats()),
        "filter" => match args.as_slice() {
            [pattern, "--clear"] => crate::filter::clear(pattern)
                .map(|n| format!("cleared the filter of {n} tracepoint{}\n", plural(n))),
            [pattern, expr] => crate::filter::set_warned(pattern, expr).map(|(n, warnings)| {
                let mut text =
                    format!("set the filter of {n} tracepoint{} to: {expr}\n", plural(n));
                for w in warnings {
                    text.push_str(&format!("warning: {w}\n"));
                }
                text
            }),
            _ => Err(command_error(
                "`filter` takes a tracepoint pattern and one expression (quote it), such as \
                 `filter app.net.rx 'len > 1400'`, or a pattern and --clear"
                    .into(),
            )),
        },
        "trigger" => match args.as_slice() {
            [] => Ok(triggers(None)?),
            [pattern] => Ok(triggers(Some(pattern))?),
            [pattern, "--clear"] => crate::trigger::clear(pattern)
                .map(|n| format!("cleared the triggers of {n} tracepoint{}\n", plural(n))),
            [pattern, spec] => crate::trigger::set(pattern, spec).map(|n| {
                if spec.trim_start().starts_with('!') {
                    format!("removed {spec} from {n} tracepoint{}\n", plural(n))
                } else {
                    format!("set {spec} on {n} tracepoint{}\n", plural(n))
                }
            }),
            _ => Err(command_error(
                "`trigger` takes a tracepoint pattern and one trigger (quote it), such as \
                 `trigger app.queue 'snapshot:1 if depth > 1000'`, '!snapshot' to remove it, \
                 --clear to remove all, or a pattern alone to list them"
                    .into(),
            )),
        },
        "threads" => match args.as_slice() {
            [] => Ok(threads::describe()),
            ["--all"] => Ok(threads::clear()),
            words if words.contains(&"--all") => {
                Err(command_error("`threads --all` takes nothing else".into()))
            }
            words => threads::set(words),
        },
        "ps" => no_args("ps").map(|_| ps_line()),
        "latency" => latency(&args),
        "tracer" => match args.as_slice() {
            [] => Ok(format!(
                "current_tracer: {}\navailable_tracers: {}\n",
                current_tracer(),
                TRACERS.join(" ")
            )),
            [name] => set_tracer(name),
            _ => Err(command_error(format!(
                "`tracer` takes one tracer at most: {}",
                TRACERS.join(", ")
            ))),
        },
        other => Err(command_error(format!(
            "unknown command {other:?}; commands: {COMMANDS}"
        ))),
    }
}

pub use crate::knobs::TRACERS;

/// The tracer chosen last (an index of [`TRACERS`]). Relaxed: a setting
/// read for display.
static CURRENT_TRACER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The tracer chosen last (`nop` until one is).
pub fn current_tracer() -> &'static str {
    TRACERS[CURRENT_TRACER.load(std::sync::atomic::Ordering::Relaxed) % TRACERS.len()]
}

/// Chooses the tracer, as `echo NAME > current_tracer` does; tape's
/// tracers are tracepoints and the latency tracer, so a choice is a set
/// of enables (which later `enable`/`disable` commands may refine):
///
/// * `function`: the entries of `#[tape::traced]` functions (`fn.*.entry`);
/// * `function_graph`: their entries and exits (`fn.*`), for `tape graph`;
/// * `latency`: the latency tracer on, and the sections' events
///   (`latency.*`) recorded;
/// * `nop`: the latency tracer off, `fn.*` and `latency.*` disabled.
///
/// Returns what was done, in words.
pub fn set_tracer(name: &str) -> Result<String, Error> {
    let i = knobs::parse_tracer(name)
        .map_err(|what| knobs::bad("tracer", name, 0, what, &TRACERS.join(", ")))?;
    let name = TRACERS[i];
    let apply = |on: bool, pattern: &str| -> usize {
        // A glob that selects nothing (no traced function in the
        // program) is not an error here: the tracer has nothing to record.
        Pattern::parse(pattern).apply(on).unwrap_or(0)
    };
    let mut out = String::new();
    match name {
        "function" => {
            let n = apply(true, "fn.*.entry");
            apply(false, "fn.*.exit");
            apply(false, "fn.*.ret");
            let _ = writeln!(out, "enabled the entries of {n} traced function(s)");
        }
        "function_graph" => {
            let n = apply(true, "fn.*");
            let _ = writeln!(
                out,
                "enabled {n} tracepoint(s) of traced functions (entry and exit)"
            );
        }
        "latency" => {
            crate::latency::set_on(true);
            let n = apply(true, "latency.*");
            let _ = writeln!(
                out,
                "latency tracer on; enabled {n} tracepoint(s) of latency sections"
            );
        }
        _ => {
            crate::latency::set_on(false);
            let n = apply(false, "fn.*") + apply(false, "latency.*");
            let _ = writeln!(out, "latency tracer off; disabled {n} tracepoint(s)");
        }
    }
    CURRENT_TRACER.store(i, std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(out, "current_tracer: {name}");
    Ok(out)
}

/// `latency [on|off|reset|thresh DURATION|keep N|wakeup NAME FROM TO [KEY]|wakeup !NAME]`.
fn latency(args: &[&str]) -> Result<String, Error> {
    use crate::latency as l;
    let usage = "`latency` takes nothing (show the maxima), on, off, reset (show, then set the \
                 maxima to 0), thresh DURATION (50us, 2ms; 0: new maxima only), keep N, \
                 wakeup NAME FROM TO [KEY] (FROM and TO: patterns, each may end in :FIELD), \
                 or wakeup !NAME (remove it)";
    match args {
        [] => Ok(l::report()),
        ["on"] => {
            l::set_on(true);
            Ok("latency tracer on\n".into())
        }
        ["off"] => {
            l::set_on(false);
            Ok("latency tracer off\n".into())
        }
        ["reset"] => {
            let out = l::report();
            l::reset();
            Ok(out + "maxima reset to 0\n")
        }
        ["thresh", d] => {
            let ns = knobs::parse_duration_ns(d).map_err(|what| {
                knobs::bad("latency thresh", d, 0, &what, knobs::DURATION_ACCEPTS)
            })?;
            l::set_threshold(ns);
            Ok(format!(
                "tracing_thresh: {ns} ns{}\n",
                if ns == 0 { " (new maxima only)" } else { "" }
            ))
        }
        ["keep", k] => {
            let k = knobs::parse_keep(k)
                .map_err(|what| knobs::bad("latency keep", k, 0, what, knobs::KEEP_ACCEPTS))?;
            l::set_keep(k);
            Ok(format!("snapshots kept per tracker: {k}\n"))
        }
        ["wakeup", name] if name.starts_with('!') => {
            if l::remove_wakeup(&name[1..]) {
                Ok(format!("removed wakeup pair {}\n", &name[1..]))
            } else {
                Err(Error::new(
                    ErrorKind::NotFound,
                    format!("no wakeup pair {}", &name[1..]),
                ))
            }
        }
        ["wakeup", name, from, to] => {
            l::wakeup(name, from, to, "").map(|_| format!("wakeup pair {name}: {from} -> {to}\n"))
        }
        ["wakeup", name, from, to, key] => l::wakeup(name, from, to, key)
            .map(|_| format!("wakeup pair {name}: {from} -> {to} on {key}\n")),
        _ => Err(command_error(format!(
            "{usage} (given: {})",
            args.join(" ")
        ))),
    }
}

/// `enable` / `disable`: every pattern is checked before any is applied.
fn set_events(on: bool, patterns: &[&str]) -> Result<String, Error> {
    let verb = if on { "enable" } else { "disable" };
    if patterns.is_empty() {
        return Err(command_error(format!(
            "`{verb}` needs at least one pattern: a name, a glob (app.net.*) or /regex/"
        )));
    }
    let parsed: Vec<Pattern> = patterns.iter().map(|p| Pattern::parse(p)).collect();
    // Every pattern selects (or fails) before any applies; one that
    // matches nothing is an error, as ftrace's `set_event` refuses an
    // unknown event.
    let hint = |text: &str| {
        let near = registry::nearest(text, 3);
        if near.is_empty() {
            "(`tape ctl PID list` lists them)".to_owned()
        } else {
            format!(
                "(nearest: {}; `tape ctl PID list` lists them)",
                near.join(", ")
            )
        }
    };
    for (p, text) in parsed.iter().zip(patterns) {
        match p.select() {
            Ok(v) if v.is_empty() => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("no tracepoint matches {text:?} {}", hint(text)),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("{} {}", e.message(), hint(text)),
                ))
            }
            Err(e) => return Err(e),
        }
    }
    let mut out = String::new();
    for (p, text) in parsed.iter().zip(patterns) {
        let n = p.apply(on)?;
        let _ = writeln!(
            out,
            "{verb}d {n} tracepoint{} for {text}",
            if n == 1 { "" } else { "s" }
        );
    }
    if on && !registry::tracing_on() {
        out.push_str("tracing is off: they record once it is on (`on`)\n");
    }
    Ok(out)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn kib(bytes: usize) -> String {
    if bytes % 1024 == 0 {
        format!("{}", bytes / 1024)
    } else {
        format!("{:.2}", bytes as f64 / 1024.0)
    }
}

fn buffer(size: &str, packet: Option<&str>) -> Result<String, Error> {
    // Taken by `TAPE_TRACE_BUFSZ`'s and `TAPE_TRACE_PACKETSZ`'s parser.
    let b = knobs::parse_size("buffer SIZE", size)?;
    let p = packet
        .map(|p| knobs::parse_size("buffer PACKET", p))
        .transpose()?;
    knobs::set_buffer_size(b, p)?;
    let (b, p) = knobs::ring_geometry();
    let existing = crate::ring::rings().iter().filter(|r| !r.exited()).count();
    Ok(format!(
        "buffer_size_kb: {} per thread, packets of {} KiB, for the rings of threads that record \
         their first event from now on; the {existing} existing ring{} keep{} {} size until \
         {} thread{} exit{}\n",
        kib(b),
        kib(p),
        if existing == 1 { "" } else { "s" },
        if existing == 1 { "s" } else { "" },
        if existing == 1 { "its" } else { "their" },
        if existing == 1 { "its" } else { "their" },
        if existing == 1 { "" } else { "s" },
        if existing == 1 { "s" } else { "" },
    ))
}

fn set_mode(mode: Mode) -> String {
    crate::ring::set_mode(mode);
    format!("mode: {} (each ring at its next packet)\n", mode_name(mode))
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Overwrite => "overwrite",
        Mode::Discard => "discard",
    }
}

/// The `status` text.
pub fn status() -> String {
    let s = crate::ring::stats();
    let points = registry::tracepoints();
    let enabled: Vec<&str> = points
        .iter()
        .filter(|p| p.is_enabled())
        .map(|p| p.name())
        .collect();
    let probed = points.iter().filter(|p| p.has_probes()).count();
    let (b, p) = knobs::ring_geometry();
    let mut out = String::new();
    let _ = writeln!(out, "tracing_on: {}", u8::from(registry::tracing_on()));
    let _ = writeln!(out, "mode: {}", mode_name(knobs::mode()));
    let _ = writeln!(
        out,
        "buffer_size_kb: {} per thread, packets of {} KiB",
        kib(b),
        kib(p)
    );
    let _ = writeln!(
        out,
        "events enabled: {} of {}{}{}",
        enabled.len(),
        points.len(),
        if enabled.is_empty() { "" } else { ": " },
        enabled.join(" ")
    );
    let _ = writeln!(out, "tracepoints with probes: {probed}");
    for p in points {
        if let Some(f) = crate::filter::get(p) {
            let _ = writeln!(
                out,
                "filter: {}: {} (rejected {})",
                p.name(),
                f.text(),
                crate::filter::rejected(p)
            );
        }
    }
    for p in points {
        for t in crate::trigger::list(p) {
            let _ = writeln!(
                out,
                "trigger: {}: {}  # fired {}",
                p.name(),
                t.text(),
                t.fired()
            );
        }
    }
    let ts = crate::trigger::stats();
    if ts.snapshots_asked > 0 || ts.unchecked > 0 {
        let _ = writeln!(
            out,
            "trigger snapshots: {} asked, {} saved, {} failed, {} merged, {} dropped{}; \
             conditions not tested (event too big): {}",
            ts.snapshots_asked,
            ts.snapshots_saved,
            ts.snapshots_failed,
            ts.snapshots_merged,
            ts.snapshots_dropped,
            ts.last_snapshot
                .as_ref()
                .map_or_else(String::new, |p| format!(", last {}", p.display())),
            ts.unchecked
        );
    }
    let trackers = crate::latency::maxima();
    let _ = writeln!(
        out,
        "current_tracer: {}; latency tracer: {} ({} tracker{}, `latency` shows their maxima)",
        current_tracer(),
        if crate::latency::is_on() { "on" } else { "off" },
        trackers.len(),
        plural(trackers.len())
    );
    let _ = writeln!(out, "threads: {}", threads::summary());
    let _ = writeln!(
        out,
        "rings: {} ({} of exited threads)",
        s.rings, s.exited_rings
    );
    let _ = writeln!(out, "recorded: {} events in the rings", s.recorded);
    let causes: Vec<String> = s
        .drops
        .by_cause()
        .iter()
        .map(|(c, n)| format!("{c} = {n}"))
        .collect();
    let _ = writeln!(out, "lost: {} ({})", s.drops.total(), causes.join(", "));
    let outside = s.dropped_without_ring + s.dropped_ring_alloc + s.lost_with_exited_rings;
    if outside > 0 {
        let _ = writeln!(
            out,
            "lost outside rings: {outside} (no ring: {}, ring allocation: {}, exited rings freed \
             unsaved: {})",
            s.dropped_without_ring, s.dropped_ring_alloc, s.lost_with_exited_rings
        );
    }
    let _ = writeln!(
        out,
        "control socket: {}",
        server::socket_path().map_or_else(|| "none".into(), |p| p.display().to_string())
    );
    let _ = writeln!(out, "trace directory: {}", knobs::trace_dir().display());
    let _ = writeln!(
        out,
        "shared rings: {}",
        match (knobs::shared_rings(), crate::ring::shm::current_dir()) {
            (_, Some(d)) => match crate::ring::shm::process()
                .map_or(0, |p| p.reader.load(std::sync::atomic::Ordering::Relaxed))
            {
                0 => d.display().to_string(),
                reader => format!("{} (streamed by tape record, pid {reader})", d.display()),
            },
            (true, None) => match crate::ring::shm::unshared_why() {
                Some(why) => format!("none: rings in private memory ({why})"),
                None => "on (no ring made yet)".into(),
            },
            (false, None) => "off (TAPE_SHM=off)".into(),
        }
    );
    if let (Some(why), Some(p)) = (
        crate::ring::shm::unshared_why(),
        crate::ring::shm::process(),
    ) {
        let n = p.unshared_rings.load(std::sync::atomic::Ordering::Relaxed);
        if n > 0 {
            let _ = writeln!(out, "rings in private memory: {n} ({why})");
        }
    }
    out
}

/// The `stats` text: per thread, like `per_cpu/cpuN/stats`.
pub fn stats() -> String {
    let s = crate::ring::stats();
    let mut out = String::new();
    for t in &s.threads {
        let _ = writeln!(
            out,
            "thread {} ({}){}:",
            t.tid,
            t.name,
            if t.exited { ", exited" } else { "" }
        );
        let _ = writeln!(out, "entries: {}", t.recorded);
        let _ = writeln!(out, "bytes: {}", t.bytes);
        let _ = writeln!(out, "emitted: {}", t.emitted());
        let _ = writeln!(out, "filtered: {}", t.filtered);
        for (cause, n) in t.drops.by_cause() {
            let label = if cause == "overwritten" {
                "overrun"
            } else {
                cause
            };
            let _ = writeln!(out, "{label}: {n}");
        }
    }
    let _ = writeln!(
        out,
        "total: {} threads, {} entries, {} lost",
        s.threads.len(),
        s.recorded,
        s.drops.total()
    );
    out
}

/// `trigger [PATTERN]`: each trigger as the kernel's trigger file reads
/// back, after its event's name, with the times it fired.
fn triggers(pattern: Option<&str>) -> Result<String, Error> {
    let points = match pattern {
        Some(p) => registry::select(p)?,
        None => registry::tracepoints().to_vec(),
    };
    let mut out = String::new();
    for p in points {
        for t in crate::trigger::list(p) {
            let _ = writeln!(out, "{}: {}  # fired {}", p.name(), t.text(), t.fired());
        }
    }
    if out.is_empty() {
        out.push_str(
            "# no triggers; available: traceon traceoff snapshot stacktrace enable_event \
             disable_event\n",
        );
    }
    Ok(out)
}

/// `list [PATTERN]`: `name<TAB>state<TAB>fields`, one tracepoint a line.
fn list(pattern: Option<&str>) -> Result<String, Error> {
    let points = match pattern {
        Some(p) => registry::select(p)?,
        None => registry::tracepoints().to_vec(),
    };
    let awaiting = registry::awaiting_description();
    let mut out = String::new();
    for p in points {
        let mut state = String::from(if p.is_enabled() {
            "enabled"
        } else {
            "disabled"
        });
        if p.is_enabled() && !p.is_recording() {
            state.push_str(" (tracing off)");
        }
        if p.has_probes() {
            state.push_str(", probes");
        }
        if let Some((provider, name, true)) = crate::usdt::attached(p) {
            let _ = write!(state, ", usdt {provider}:{name} attached");
        }
        if let Some(f) = crate::filter::get(p) {
            let _ = write!(
                state,
                ", filter: {} (rejected {})",
                f.text(),
                crate::filter::rejected(p)
            );
        }
        for t in crate::trigger::list(p) {
            let _ = write!(state, ", trigger: {} (fired {})", t.text(), t.fired());
        }
        // A `tracing` callsite's fields are typed by its first event:
        // until then, their names (not the tagged value each would be).
        if awaiting.contains(&p.id()) {
            let names: Vec<&str> = p.desc().fields.iter().map(|f| f.name).collect();
            let _ = writeln!(
                out,
                "{}\t{}\t{} (typed by its first event)",
                p.name(),
                state,
                names.join(", ")
            );
            continue;
        }
        let mut layout = crate::field::Layout::default();
        for f in p.desc().fields {
            (f.describe)(f.name, &mut layout);
        }
        let fields: Vec<String> = layout
            .fields
            .iter()
            .map(|f| format!("{}: {}", f.name, type_name(&f.ty)))
            .collect();
        let _ = writeln!(out, "{}\t{}\t{}", p.name(), state, fields.join(", "));
    }
    Ok(out)
}

/// A CTF type in short: `u16`, `i64`, `f64`, `string`, `u8[16]`, `u32[]`,
/// `enum u8`, `{len: u16, ...}`.
fn type_name(t: &tape_ctf_model::Type) -> String {
    use tape_ctf_model::Type;
    match t {
        Type::Integer(i) => format!("{}{}", if i.signed { 'i' } else { 'u' }, i.size),
        Type::Float(f) => format!("f{}", f.exp_dig + f.mant_dig),
        Type::String(_) => "string".into(),
        Type::Enum(e) => format!("enum {}", type_name(&Type::Integer(e.container.clone()))),
        Type::Struct(s) => {
            let inner: Vec<String> = s
                .fields
                .iter()
                .map(|f| format!("{}: {}", f.name, type_name(&f.ty)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        Type::Array { element, len } => format!("{}[{len}]", type_name(element)),
        Type::Sequence { element, .. } => format!("{}[]", type_name(element)),
        Type::Variant { options, .. } => {
            let inner: Vec<String> = options
                .iter()
                .map(|f| format!("{}: {}", f.name, type_name(&f.ty)))
                .collect();
            format!("variant {{{}}}", inner.join(", "))
        }
        Type::Named(n) => n.clone(),
    }
}

/// One line for `tape ps`: pid, program, enabled events, rings and their
/// bytes, tab-separated.
fn ps_line() -> String {
    let s = crate::ring::stats();
    let enabled = registry::tracepoints()
        .iter()
        .filter(|p| p.is_enabled())
        .count();
    let bytes: usize = crate::ring::rings().iter().map(|r| r.capacity()).sum();
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\n",
        std::process::id(),
        crate::sys::program_name(),
        u8::from(registry::tracing_on()),
        enabled,
        s.rings,
        bytes
    )
}

#[cfg(test)]
mod tests {
    /// The first word of each command, in order.
    fn words<'a>(commands: impl Iterator<Item = &'a str>) -> Vec<String> {
        commands
            .filter_map(|c| c.split_whitespace().next())
            .map(|w| w.trim_matches('`').to_owned())
            .collect()
    }

    /// The guide's table of `tape ctl` commands (docs/04-operate.md) has
    /// a row for each command `execute` lists, in its order, and no other.
    #[test]
    fn the_guides_command_table_is_the_command_list() {
        let guide = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/04-operate.md");
        let text = std::fs::read_to_string(guide).expect("docs/04-operate.md");
        let rows = text
            .lines()
            .skip_while(|l| !l.starts_with("| `tape ctl PID ...`"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.trim_start_matches('|').split(" | ").next())
            // `on` / `off`: two commands in one row.
            .flat_map(|cell| cell.split(" / ").map(str::trim).collect::<Vec<_>>())
            .collect::<Vec<_>>();
        // (COMMANDS' asides, `(or --all, ...)`, left out.)
        let mut depth = 0;
        let listed: String = super::COMMANDS
            .chars()
            .filter(|&c| {
                depth += i32::from(c == '(');
                let kept = depth == 0;
                depth -= i32::from(c == ')');
                kept
            })
            .collect();
        assert_eq!(
            words(rows.iter().copied()),
            words(listed.split(", ")),
            "the guide's commands (docs/04-operate.md) and COMMANDS"
        );
    }
}
