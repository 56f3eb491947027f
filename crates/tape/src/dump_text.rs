//! `TAPE_DUMP=text`: the last events of each thread of a crash dump, as
//! ftrace text on stderr, as the kernel prints its buffer on an oops.
//!
//! The crashed process writes the dump as a trace (`crash.rs`), then
//! re-executes itself; the new process, the same binary, reads the dump
//! here and prints it. It reads only what tape writes (each packet's
//! header and context by `metadata::PacketHead`, with the thread's id and
//! name; events of an id, a timestamp and fields) and decodes each event by its tracepoint's own description
//! ([`crate::view`]): the binary that crashed has the same tracepoints
//! with the same ids. A tracepoint registered at run time (the `tracing`
//! bridge's) is not there: its events end their packet's text with a
//! line that says so. So the recorder carries no trace reader for this
//! (issue 37): no TSDL parser, no general decoder, no merge.
//!
//! ```text
//! tape: the last events of each thread (16 at most), from DIR:
//! #           TASK-TID     TIMESTAMP  FUNCTION
//! #              | |           |         |
//!         worker-0-4251    1700000000.583854: pipeline.worker.done: worker=0 seq=17 checksum=99
//!         worker-0-4251    1700000000.583901: tape.crash: signal=11 code=1 addr=0 what=SIGSEGV: ...
//! ```
//!
//! Lines are as `tape show --format ftrace` writes them: the thread's name
//! and id, the time in seconds with microseconds, the event's name, and
//! its text by its read-time format (`{field}`, `{field:#x}`, `{field:03}`,
//! `{a.b}`), or its fields as `name=value` (lengths and tags left out)
//! without one. The threads are kept apart by thread id, not by name.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use tape_ctf_model::sink::ValueSink;
use tape_ctf_model::{Base, Value};

use crate::metadata::PacketHead;

/// Events of each thread that the text prints.
pub const TEXT_EVENTS_PER_THREAD: usize = 16;

/// The two header lines, as ftrace's `trace` file has them.
const HEADER: &str = "#           TASK-TID     TIMESTAMP  FUNCTION\n\
                      #              | |           |         |\n";

/// The clock of a dump, from its metadata: cycles to ns since the epoch.
struct Clock {
    freq: u64,
    offset_s: i64,
    offset: i64,
}

impl Clock {
    /// The `clock { ... }` block's values in the metadata text tape wrote.
    fn of(metadata: &str) -> Option<Clock> {
        let block = metadata.split("clock {").nth(1)?.split("};").next()?;
        let value = |key: &str| -> Option<i64> {
            block.lines().find_map(|l| {
                let v = l.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?;
                v.trim().trim_end_matches(';').trim().parse().ok()
            })
        };
        Some(Clock {
            freq: u64::try_from(value("freq")?).ok().filter(|&f| f > 0)?,
            offset_s: value("offset_s")?,
            offset: value("offset")?,
        })
    }

    fn ns(&self, cycles: u64) -> i128 {
        let c = i128::from(self.offset) + i128::from(cycles);
        i128::from(self.offset_s) * 1_000_000_000 + c * 1_000_000_000 / i128::from(self.freq)
    }
}

/// One event read from a stream.
struct Line {
    ns: i128,
    tid: u32,
    text: String,
}

/// Prints the last [`TEXT_EVENTS_PER_THREAD`] events of each thread of the
/// dump at `dir`, in time order, as ftrace text.
pub fn print_last_events(dir: &Path, out: &mut impl io::Write) -> io::Result<()> {
    let fail = |what: &Path, e: &dyn std::fmt::Display| {
        io::Error::other(format!("{}: {e}", what.display()))
    };
    let meta_path = dir.join("metadata");
    let metadata = std::fs::read_to_string(&meta_path).map_err(|e| fail(&meta_path, &e))?;
    let clock = Clock::of(&metadata)
        .ok_or_else(|| fail(&meta_path, &"no clock with freq, offset_s and offset"))?;
    let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| fail(dir, &e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "metadata"))
        .collect();
    names.sort();
    let mut kept: Vec<Line> = Vec::new();
    for path in names {
        let bytes = std::fs::read(&path).map_err(|e| fail(&path, &e))?;
        let mut lines = stream_lines(&bytes, &clock);
        // The thread's last events (a stream is one thread's, in order).
        let skip = lines.len().saturating_sub(TEXT_EVENTS_PER_THREAD);
        kept.extend(lines.drain(skip..));
    }
    kept.sort_by_key(|l| (l.ns, l.tid));
    writeln!(
        out,
        "tape: the last events of each thread ({TEXT_EVENTS_PER_THREAD} at most), from {}:",
        dir.display()
    )?;
    out.write_all(HEADER.as_bytes())?;
    for l in kept {
        writeln!(out, "{}", l.text)?;
    }
    Ok(())
}

/// A native-endian integer of `N` bytes at `at`.
fn word<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    word::<8>(b, at).map(u64::from_ne_bytes)
}

/// The events of one stream file, each as its line; what cannot be read
/// (a packet cut short, an event of a tracepoint this binary does not
/// have) ends the stream's events with a line that says so.
fn stream_lines(b: &[u8], clock: &Clock) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut packet = 0usize;
    while packet < b.len() {
        let Some(p) = b.get(packet..) else { break };
        let Some(head) = PacketHead::read(p) else {
            break;
        };
        let (tid, thread) = (head.tid, head.thread_name.to_owned());
        let events_at = PacketHead::size(head.thread_name);
        let content = usize::try_from(head.content_bits / 8)
            .unwrap_or(usize::MAX)
            .min(p.len());
        let size = usize::try_from(head.packet_bits / 8).unwrap_or(0);
        let mut at = events_at;
        while at < content {
            match event_line(&p[..content], at, clock, tid, &thread) {
                Ok((line, next)) => {
                    lines.push(line);
                    at = next;
                }
                Err(why) => {
                    let ns = lines.last().map_or(0, |l: &Line| l.ns);
                    lines.push(Line {
                        ns,
                        tid,
                        text: format!(
                            "{:>16}-{:<7} <{why}: the rest of this packet is not shown>",
                            thread, tid
                        ),
                    });
                    break;
                }
            }
        }
        if size == 0 {
            break;
        }
        packet = packet.saturating_add(size);
    }
    lines
}

/// The event at `at`: its line and where the next event starts.
fn event_line(
    p: &[u8],
    at: usize,
    clock: &Clock,
    tid: u32,
    thread: &str,
) -> Result<(Line, usize), String> {
    let id = word::<2>(p, at)
        .map(u16::from_ne_bytes)
        .ok_or("an event cut short")?;
    let ts = u64_at(p, at + 2).ok_or("an event cut short")?;
    let tp = crate::registry::tracepoints()
        .get(usize::from(id))
        .copied()
        .ok_or_else(|| format!("event id {id}: a tracepoint this binary does not have"))?;
    let fields = crate::view::described(tp);
    let mut sink = ValueSink::default();
    let used = crate::view::decode(&fields, &p[at + 10..], &mut sink)
        .map_err(|e| format!("{}: {e}", tp.name()))?;
    let values = match sink.scopes.pop() {
        Some(Value::Struct(f)) => f,
        _ => Vec::new(),
    };
    let ns = clock.ns(ts);
    let mut text = String::new();
    let _ = write!(text, "{thread:>16}-{tid:<7} ");
    let us = (ns + 500).div_euclid(1000);
    let _ = write!(
        text,
        "{:>5}.{:06}: {}: ",
        us.div_euclid(1_000_000),
        us.rem_euclid(1_000_000),
        tp.name()
    );
    match tp.desc().format {
        Some(f) => formatted(&mut text, f, &values),
        None => pairs(&mut text, &values),
    }
    Ok((Line { ns, tid, text }, at + 10 + used))
}

/// `name=value` for each field, lengths and tags (names starting with
/// `_`) left out.
fn pairs(out: &mut String, values: &[(String, Value)]) {
    let mut first = true;
    for (name, v) in values.iter().filter(|(n, _)| !n.starts_with('_')) {
        if !first {
            out.push(' ');
        }
        first = false;
        let _ = write!(out, "{name}={}", text(v, ""));
    }
}

/// The text of `format` with each `{path}` or `{path:spec}` replaced by
/// that field's value.
fn formatted(out: &mut String, format: &str, values: &[(String, Value)]) {
    let by_name: HashMap<&str, &Value> = values.iter().map(|(n, v)| (n.as_str(), v)).collect();
    let mut rest = format;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            out.push_str(&rest[open..]);
            return;
        };
        let inner = &rest[open + 1..open + close];
        let (path, spec) = inner.split_once(':').unwrap_or((inner, ""));
        let mut parts = path.split('.');
        let mut v = parts.next().and_then(|head| by_name.get(head).copied());
        for p in parts {
            v = v.and_then(|v| v.field(p));
        }
        match v {
            Some(v) => out.push_str(&text(v, spec)),
            None => {
                let _ = write!(out, "<no field {path}>");
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
}

/// A value's text, by `spec` (`#x`, `x`, `03`, `8`) for a number.
fn text(v: &Value, spec: &str) -> String {
    let number = |n: i128, base: Base| -> String {
        let (alt, hex) = (spec.starts_with('#'), spec.ends_with('x'));
        let digits = if hex || (spec.is_empty() && base == Base::Hexadecimal) {
            let s = format!("{n:x}");
            if alt || (spec.is_empty() && base == Base::Hexadecimal) {
                format!("0x{s}")
            } else {
                s
            }
        } else {
            n.to_string()
        };
        let width: String = spec
            .trim_start_matches('#')
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        match width.parse::<usize>() {
            Ok(w) if width.starts_with('0') => format!("{digits:0>w$}"),
            Ok(w) => format!("{digits:>w$}"),
            Err(_) => digits,
        }
    };
    match v {
        Value::UInt(n, base) => number(i128::from(*n), *base),
        Value::SInt(n, base) => number(i128::from(*n), *base),
        Value::Enum { value, labels } if labels.is_empty() => value.to_string(),
        Value::Enum { labels, .. } => labels.join("|"),
        Value::Wide(s) | Value::Str(s) => s.clone(),
        Value::Float(f) => f.to_string(),
        Value::Struct(fields) => {
            let mut s = String::from("{");
            pairs(&mut s, fields);
            s.push('}');
            s
        }
        Value::Array(items) => {
            let texts: Vec<String> = items.iter().map(|i| text(i, spec)).collect();
            format!("[{}]", texts.join(","))
        }
        Value::Variant(name, v) => match v.as_ref() {
            Value::Struct(f) if f.is_empty() => name.clone(),
            v => text(v, spec),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_values_read_as_ftrace_text() {
        let values = vec![
            ("pid".to_owned(), Value::SInt(42, Base::Decimal)),
            ("flags".to_owned(), Value::UInt(255, Base::Decimal)),
            ("comm".to_owned(), Value::Str("bash".into())),
            ("_ids_len".to_owned(), Value::UInt(2, Base::Decimal)),
            (
                "kind".to_owned(),
                Value::Enum {
                    value: 1,
                    labels: vec!["Checksum".into()],
                },
            ),
        ];
        let mut s = String::new();
        formatted(
            &mut s,
            "pid={pid:05} flags={flags:#x} comm={comm} kind={kind} {nope}",
            &values,
        );
        assert_eq!(
            s,
            "pid=00042 flags=0xff comm=bash kind=Checksum <no field nope>"
        );
        let mut s = String::new();
        pairs(&mut s, &values);
        assert_eq!(s, "pid=42 flags=255 comm=bash kind=Checksum");
        let clock = Clock::of("clock {\n    name = \"tape\";\n    freq = 1000000000;\n    offset_s = 10;\n    offset = 5;\n};\n").unwrap();
        assert_eq!(clock.ns(7), 10_000_000_012);
    }
}
