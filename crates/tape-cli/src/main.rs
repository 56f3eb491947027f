//! `tape`: read CTF 1.8 traces (tape's, DPDK's, LTTng's).
//!
//! * `tape show PATH...`: events in babeltrace2's text format, merged in time
//!   order; lost events as `[LOST n EVENTS]` lines.
//! * `tape check PATH...`: validates every packet and event; exit 0, or 1
//!   with the file, packet offset and bit offset of the first problem.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tape_ctf::decode::Item;
use tape_ctf::read::{find_traces, Merge, TraceDir};
use tape_ctf::EnvValue;

#[derive(Parser)]
#[command(name = "tape", version, about = "Read CTF 1.8 traces")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    },
    /// Validate traces: exit 1 at the first problem.
    Check {
        /// Trace directories (or trees of them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Show {
            paths,
            clock_seconds,
        } => show(&paths, clock_seconds),
        Command::Check { paths } => check(&paths),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tape: error: {e}");
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

fn show(paths: &[PathBuf], clock_seconds: bool) -> Result<(), String> {
    let traces = open(paths)?;
    let hosts: Vec<(PathBuf, Option<String>)> = traces
        .iter()
        .map(|t| {
            let h = t
                .schema
                .trace
                .env
                .iter()
                .find(|(k, _)| k == "hostname")
                .map(|(_, v)| match v {
                    EnvValue::Str(s) => s.clone(),
                    EnvValue::Int(i) => i.to_string(),
                });
            (t.dir.clone(), h)
        })
        .collect();
    let mut merge = Merge::new(&traces).map_err(|e| e.to_string())?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut line = String::with_capacity(256);
    let mut prev: Option<i128> = None;
    let mut lost_total = 0u64;
    while let Some(item) = merge.next_item() {
        let (item, path) = item.map_err(|e| e.to_string())?;
        line.clear();
        match item {
            Item::Event(e) => {
                let host = hosts
                    .iter()
                    .find(|(d, _)| path.starts_with(d))
                    .and_then(|(_, h)| h.as_deref());
                let time = match e.ns {
                    Some(ns) if clock_seconds => format!(
                        "{}.{:09}",
                        ns.div_euclid(1_000_000_000),
                        ns.rem_euclid(1_000_000_000)
                    ),
                    Some(ns) => local_time(ns),
                    None => "??:??:??.?????????".into(),
                };
                let delta = match (prev, e.ns) {
                    (Some(p), Some(n)) => Some(n - p),
                    _ => None,
                };
                prev = e.ns.or(prev);
                tape_ctf::text::event_line(&mut line, &time, delta, host, &e);
            }
            Item::Lost { count, .. } => {
                lost_total += count;
                line.push_str(&format!("[LOST {count} EVENTS] in {}", path.display()));
            }
        }
        line.push('\n');
        if out.write_all(line.as_bytes()).is_err() {
            return Ok(()); // closed pipe (head, less)
        }
    }
    let _ = out.flush();
    if lost_total > 0 {
        eprintln!("tape: {lost_total} events were lost (discarded by the tracer)");
    }
    Ok(())
}

fn check(paths: &[PathBuf]) -> Result<(), String> {
    let traces = open(paths)?;
    for t in &traces {
        for w in &t.warnings {
            eprintln!("tape: warning: {}/metadata: {w}", t.dir.display());
        }
    }
    let mut merge = Merge::new(&traces).map_err(|e| e.to_string())?;
    let (mut events, mut lost) = (0u64, 0u64);
    while let Some(item) = merge.next_item() {
        match item.map_err(|e| e.to_string())? {
            (Item::Event(_), _) => events += 1,
            (Item::Lost { count, .. }, _) => lost += count,
        }
    }
    println!(
        "ok: {} trace(s), {events} events, {lost} lost",
        traces.len()
    );
    Ok(())
}

/// `HH:MM:SS.nnnnnnnnn` in the local time zone (babeltrace2's default).
fn local_time(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let t = secs as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid; localtime_r is the thread-safe form.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return format!("{secs}.{frac:09}");
    }
    format!(
        "{:02}:{:02}:{:02}.{frac:09}",
        tm.tm_hour, tm.tm_min, tm.tm_sec
    )
}
