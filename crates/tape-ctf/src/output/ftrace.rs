//! ftrace's `trace` text (`tape show --format ftrace`): each event as the
//! kernel's `trace` file prints it, its text by its read-time format
//! ([`crate::metadata::formats`], applied by [`crate::output::event_text`]).
//!
//! Lines follow the `trace` file (without the CPU and irq columns):
//!
//! ```text
//! #           TASK-TID     TIMESTAMP  FUNCTION
//! #              | |           |         |
//!         worker-1-4251    1700000000.583854: sched.wakeup: comm=bash pid=4251 prio=120
//! ```
//!
//! `TASK` is the stream's thread name (`thread_name`, `procname`), `TID` its
//! thread id (`tid`, `vtid`), and the time is the event's clock in seconds
//! with microseconds, rounded as the kernel does.

use std::fmt::Write;

use crate::decode::Value;
use std::collections::HashMap;

use crate::metadata::formats::{Executable, Formats, Piece};
use crate::output::event_text::{is_number, member, pad, task, value_text, write_text};

/// The two header lines of the text.
pub const HEADER: &str = "#           TASK-TID     TIMESTAMP  FUNCTION\n\
                          #              | |           |         |\n";

/// The event of a `stacktrace` trigger.
pub const STACKTRACE: &str = "tape.stacktrace";

/// Renders every event of `merge` that `shown` accepts (and every loss
/// `shown_loss` accepts)
/// as ftrace text, the header first, handing `each` about a megabyte at a
/// time (`each` returns `false` to stop); returns the events lost.
pub fn render(
    merge: &mut crate::merge::StreamMerge,
    shown: impl crate::decode::stream::Shown,
    shown_loss: impl Fn(Option<i128>) -> bool,
    each: impl FnMut(&str) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    render_with_symbols(merge, shown, shown_loss, &mut |_, _| None, each)
}

/// [`render`], with `symbol(executable, address)` naming the frames of
/// `tape.stacktrace` events, printed as ftrace prints a `<stack trace>`:
/// one ` => function` line per frame (the address when it has no name).
pub fn render_with_symbols(
    merge: &mut crate::merge::StreamMerge,
    shown: impl crate::decode::stream::Shown,
    shown_loss: impl Fn(Option<i128>) -> bool,
    symbol: &mut dyn FnMut(&Executable, u64) -> Option<String>,
    mut each: impl FnMut(&str) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    use crate::decode::plan::ValueSink;
    use crate::merge::Step;
    merge.keep_packet_values();
    let mut out = String::with_capacity(1 << 20);
    out.push_str(HEADER);
    let mut lost = 0u64;
    while let Some(step) = merge.next() {
        match step? {
            Step::Event(stream, t) => {
                let class = stream.class().cloned();
                let show = class.as_ref().is_some_and(|c| shown.class(c, t)) && shown.event(stream);
                if !show {
                    if let Err(e) = stream.emit(&mut crate::decode::plan::Discard) {
                        merge.fail(e);
                    }
                    continue;
                }
                let mut sink = ValueSink::default();
                if let Err(e) = stream.emit(&mut sink) {
                    // Its stream ends; the error comes after the others.
                    merge.fail(e);
                    continue;
                }
                let Some(class) = class else {
                    continue;
                };
                let formats = &stream.plan().formats;
                let packet = stream.packet_value.as_ref();
                write_line(&mut out, formats, &class, packet, &sink.scopes, t, symbol);
            }
            Step::Lost(stream, n, t) => {
                lost += n;
                if shown_loss(t) {
                    let _ = writeln!(out, "[LOST {n} EVENTS] in {}", stream.path().display());
                }
            }
        }
        if out.len() >= 1 << 20 {
            if !each(&out) {
                return Ok(lost);
            }
            out.clear();
        }
    }
    each(&out);
    Ok(lost)
}

/// Appends one event's ftrace line and its newline: task, time, name and
/// the event's text (its read-time format, a `printk!`'s text, a stack
/// trace's frames named by `symbol`). `packet` is its packet context,
/// `scopes` its scopes' values (from a [`crate::decode::plan::ValueSink`]).
pub fn write_line(
    out: &mut String,
    formats: &Formats,
    class: &crate::EventClass,
    packet: Option<&Value>,
    scopes: &[Value],
    t: Option<i128>,
    symbol: &mut dyn FnMut(&Executable, u64) -> Option<String>,
) {
    write_head(out, task(packet, scopes), t, &class.name);
    let special = match class.name.as_str() {
        PRINTK => write_printk(out, formats, scopes),
        STACKTRACE => write_stack(out, formats.exe.as_ref(), scopes, symbol),
        _ => false,
    };
    if !special {
        write_text(out, formats.get(class.id), scopes);
    }
    out.push('\n');
}

/// The event of `tape::printk!`.
pub const PRINTK: &str = "tape.printk";

/// Appends a `printk!` event's text: its site's format applied to its
/// arguments; `false` (nothing written) when the trace has no format for
/// its site.
fn write_printk(out: &mut String, formats: &Formats, scopes: &[Value]) -> bool {
    let payload = scopes.last();
    let site = payload
        .and_then(|p| member(p, "site"))
        .and_then(Value::as_u64);
    let (Some(pieces), Some(Value::Array(args))) = (
        site.and_then(|id| formats.printk.get(&id)),
        payload.and_then(|p| member(p, "args")),
    ) else {
        return false;
    };
    let mut args = args.iter().filter_map(|a| member(a, "value"));
    let none = HashMap::new();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Field(path, spec) if path.is_empty() => match args.next() {
                Some(v) => pad(
                    out,
                    &value_text(v, "", &none, spec),
                    spec,
                    is_number(v, None, spec),
                ),
                None => out.push_str("<missing argument>"),
            },
            Piece::Field(path, _) => {
                let _ = write!(
                    out,
                    "<{{{}}}: printk takes positional arguments>",
                    path.join(".")
                );
            }
        }
    }
    true
}

/// Appends a `tape.stacktrace` event as ftrace prints a stack trace:
/// `<stack trace>`, then ` => function` per frame; `false` (nothing
/// written) if the event has no `frames`.
fn write_stack(
    out: &mut String,
    exe: Option<&Executable>,
    scopes: &[Value],
    symbol: &mut dyn FnMut(&Executable, u64) -> Option<String>,
) -> bool {
    let Some(Value::Array(frames)) = scopes.last().and_then(|p| member(p, "frames")) else {
        return false;
    };
    out.push_str("<stack trace>");
    for f in frames {
        let Some(addr) = f.as_u64() else { continue };
        match exe.and_then(|e| symbol(e, addr)) {
            Some(name) => {
                let _ = write!(out, "\n => {name}");
            }
            None => {
                let _ = write!(out, "\n => 0x{addr:x}");
            }
        }
    }
    true
}

/// Appends the start of an ftrace line: task, time and name, up to the
/// event's text.
pub fn write_head(out: &mut String, task: (&str, i64), ns: Option<i128>, name: &str) {
    let _ = write!(out, "{:>16}-{:<7} ", task.0, task.1);
    match ns {
        // Rounded to the microsecond, as the kernel's ns2usecs.
        Some(ns) => {
            let us = (ns + 500).div_euclid(1000);
            let _ = write!(
                out,
                "{:>5}.{:06}: ",
                us.div_euclid(1_000_000),
                us.rem_euclid(1_000_000)
            );
        }
        None => out.push_str("    ?.??????: "),
    }
    out.push_str(name);
    out.push_str(": ");
}
