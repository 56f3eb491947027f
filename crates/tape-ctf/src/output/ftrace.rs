//! Read-time formats and ftrace's `trace` text.
//!
//! A tape trace carries, per event id, what a reader needs to print an
//! event the way its author wanted, in the metadata's `env` block, where
//! any CTF reader can see it; `tape show --format ftrace` applies it:
//!
//! ```text
//! env {
//!     tape_format_7 = "comm={comm} pid={pid} prio={prio} target_cpu={target_cpu:03}";
//!     tape_class_7 = "sched_wakeup_template";
//!     tape_hints_7 = "state:flags(RDWR=0x3,READ=0x1,WRITE=0x2);peer:ipv4";
//! };
//! ```
//!
//! **Formats** are text with `{path}` or `{path:spec}` placeholders (`{{`
//! and `}}` are braces). A path names a payload field (`hdr.len` inside a
//! struct); context fields are found when no payload field has the name.
//! The spec is Rust's: `[[fill]<|^|>][#][0][width][.precision][x|X|o|b|d]`,
//! so `{cpu:03}` gives `001` and `{addr:#x}` gives `0x7f`.
//!
//! **Values** read as the kernel's `trace` file shows them: integers in
//! their metadata base (`0x1f` for `base = 16`; a negative one in hex as
//! its 64-bit two's complement), enumerations by label
//! (`__print_symbolic`; an unknown value in hex, `0x7`), booleans as `0` /
//! `1`, strings raw, arrays as `{1,2,3}`, structs as `{a=1 b=2}`, a variant
//! as its option's value (an empty option by its name: `none`).
//!
//! **Hints** (`path:hint`, `;`-separated) name what CTF has no type for:
//! `flags(NAME=MASK,...)` prints `__print_flags` style (`READ|WRITE|0x40`:
//! each mask wholly set is named and cleared, in the order given, then the
//! leftover bits in hex; `0` prints nothing), `ipv4` and `ipv6` print
//! addresses, `duration` prints nanoseconds as `1.5ms`.
//!
//! An event without a format prints `name=value` for each payload field,
//! leaving out the fields whose name (as shown, after CTF's escape `_` is
//! dropped) starts with `_`: tape's sequence lengths and variant tags.
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

use std::collections::HashMap;
use std::fmt::Write;

use crate::decode::Value;
use crate::{EnvValue, Trace};

/// The two header lines of the text.
pub const HEADER: &str = "#           TASK-TID     TIMESTAMP  FUNCTION\n\
                          #              | |           |         |\n";

/// The read-time formats and hints of a trace, by event id.
#[derive(Clone, Debug, Default)]
pub struct Formats {
    events: HashMap<u64, EventFormat>,
    /// `printk!` formats by format id (`tape_printk_<id>`).
    printk: HashMap<u64, Vec<Piece>>,
    /// Env entries that did not parse: `tape_format_3: at byte 5: ...`.
    pub errors: Vec<String>,
    /// The program that recorded the trace (`tape_exe*`), to symbolise
    /// `tape.stacktrace` addresses.
    pub exe: Option<Executable>,
}

/// The executable a trace's program ran, as its `env` names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Executable {
    /// Its path (`tape_exe`).
    pub path: String,
    /// Its load bias (`tape_exe_base`): runtime address = ELF address + base.
    pub base: u64,
    /// Its GNU build id in hex (`tape_exe_build_id`; empty: none).
    pub build_id: String,
}

/// The event of a `stacktrace` trigger.
pub const STACKTRACE: &str = "tape.stacktrace";

/// How one event prints.
#[derive(Clone, Debug, Default)]
pub struct EventFormat {
    /// The format; `None`: `name=value` pairs.
    pub pieces: Option<Vec<Piece>>,
    /// Hints by field path.
    pub hints: HashMap<String, Hint>,
}

/// A piece of a format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A field: its path and spec.
    Field(Vec<String>, Spec),
}

/// Where padding goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// `<`.
    Left,
    /// `^`.
    Center,
    /// `>`.
    Right,
}

/// How a number is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// As the value's type says.
    #[default]
    Natural,
    /// `d`: decimal.
    Decimal,
    /// `x`.
    Hex,
    /// `X`.
    HexUpper,
    /// `o`.
    Octal,
    /// `b`.
    Binary,
}

/// A placeholder's spec: `[[fill]align][#][0][width][.precision][type]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Padding character.
    pub fill: char,
    /// Padding side (`None`: numbers right, text left).
    pub align: Option<Align>,
    /// `#`: `0x`, `0o`, `0b` prefixes.
    pub alt: bool,
    /// `0`: pad numbers with zeros after the sign and prefix.
    pub zero: bool,
    /// Minimum width in characters.
    pub width: usize,
    /// Digits after the point of a float.
    pub precision: Option<usize>,
    /// Number base.
    pub kind: Kind,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec {
            fill: ' ',
            align: None,
            alt: false,
            zero: false,
            width: 0,
            precision: None,
            kind: Kind::Natural,
        }
    }
}

/// A display hint (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// Names of bit masks, in the order they are tried.
    Flags(Vec<(String, u128)>),
    /// Four bytes: `10.0.0.1`.
    Ipv4,
    /// Sixteen bytes: `::1`.
    Ipv6,
    /// Nanoseconds: `1.5ms`.
    Duration,
}

impl Formats {
    /// The formats and hints found in `trace`'s env block; entries that do
    /// not parse are listed in `errors` (their events print `name=value`).
    pub fn new(trace: &Trace) -> Formats {
        let mut f = Formats::default();
        let mut exe = Executable::default();
        for (key, value) in &trace.env {
            match (key.as_str(), value) {
                ("tape_exe", EnvValue::Str(p)) => exe.path.clone_from(p),
                ("tape_exe_base", EnvValue::Int(b)) => exe.base = *b as u64,
                ("tape_exe_build_id", EnvValue::Str(id)) => exe.build_id.clone_from(id),
                _ => {}
            }
        }
        if !exe.path.is_empty() {
            f.exe = Some(exe);
        }
        for (key, value) in &trace.env {
            let EnvValue::Str(text) = value else { continue };
            if key.starts_with("tape_printk_at_") {
                continue;
            }
            if let Some(id) = key.strip_prefix("tape_printk_") {
                match (id.parse::<u64>(), parse_format(text)) {
                    (Ok(id), Ok(p)) => {
                        f.printk.insert(id, p);
                    }
                    (Err(_), _) => f.errors.push(format!("env {key}: not a format id")),
                    (_, Err(why)) => f.errors.push(format!("env {key} = {text:?}: {why}")),
                }
                continue;
            }
            let (kind, id) = if let Some(id) = key.strip_prefix("tape_format_") {
                (0, id)
            } else if let Some(id) = key.strip_prefix("tape_hints_") {
                (1, id)
            } else {
                continue;
            };
            let Ok(id) = id.parse::<u64>() else {
                f.errors.push(format!("env {key}: not an event id"));
                continue;
            };
            let e = f.events.entry(id).or_default();
            let r = if kind == 0 {
                parse_format(text).map(|p| e.pieces = Some(p))
            } else {
                parse_hints(text).map(|h| e.hints = h)
            };
            if let Err(why) = r {
                f.errors.push(format!("env {key} = {text:?}: {why}"));
            }
        }
        f
    }

    /// How event `id` prints (`None`: no format and no hints).
    pub fn get(&self, id: u64) -> Option<&EventFormat> {
        self.events.get(&id)
    }
}

/// Parses a format into pieces; the error names the byte offset.
pub fn parse_format(f: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let b = f.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c @ (b'{' | b'}') if b.get(i + 1) == Some(&c) => {
                text.push(c as char);
                i += 2;
            }
            b'}' => return Err(format!("at byte {i}: a `}}` with no `{{` (write `}}}}`)")),
            b'{' => {
                let Some(len) = f[i + 1..].find('}') else {
                    return Err(format!("at byte {i}: a `{{` with no `}}` (write `{{{{`)"));
                };
                let inside = &f[i + 1..i + 1 + len];
                let (path, spec) = match inside.split_once(':') {
                    Some((p, s)) => (p, parse_spec(s).map_err(|e| format!("at byte {i}: {e}"))?),
                    None => (inside, Spec::default()),
                };
                // `{}`: the next argument (of a `printk!`).
                let path: Vec<String> = if path.is_empty() {
                    Vec::new()
                } else {
                    path.split('.').map(str::to_owned).collect()
                };
                if path.iter().any(|p| p.is_empty()) {
                    return Err(format!(
                        "at byte {i}: `{{{inside}}}` has an empty field name"
                    ));
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Field(path, spec));
                i += len + 2;
            }
            _ => {
                let next = f[i..].find(['{', '}']).map_or(f.len(), |n| i + n);
                text.push_str(&f[i..next]);
                i = next;
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Parses a spec (the part after `:`).
pub fn parse_spec(s: &str) -> Result<Spec, String> {
    let mut spec = Spec::default();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let align_of = |c: char| match c {
        '<' => Some(Align::Left),
        '^' => Some(Align::Center),
        '>' => Some(Align::Right),
        _ => None,
    };
    if let Some(a) = chars.get(1).and_then(|&c| align_of(c)) {
        spec.fill = chars[0];
        spec.align = Some(a);
        i = 2;
    } else if let Some(a) = chars.first().and_then(|&c| align_of(c)) {
        spec.align = Some(a);
        i = 1;
    }
    if chars.get(i) == Some(&'#') {
        spec.alt = true;
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        spec.zero = true;
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    let w = digits(&mut i);
    if !w.is_empty() {
        spec.width = w.parse().map_err(|_| format!("width {w:?} is too large"))?;
        if spec.width > 4096 {
            return Err(format!("width {w} is too large (4096 at most)"));
        }
    }
    if chars.get(i) == Some(&'.') {
        i += 1;
        let p = digits(&mut i);
        let p: usize = p
            .parse()
            .map_err(|_| format!("spec {s:?}: bad precision"))?;
        if p > 64 {
            return Err(format!("precision {p} is too large (64 at most)"));
        }
        spec.precision = Some(p);
    }
    if let Some(&c) = chars.get(i) {
        spec.kind = match c {
            'd' => Kind::Decimal,
            'x' => Kind::Hex,
            'X' => Kind::HexUpper,
            'o' => Kind::Octal,
            'b' => Kind::Binary,
            c => return Err(format!("spec {s:?}: unknown type {c:?} (d, x, X, o, b)")),
        };
        i += 1;
    }
    if i != chars.len() {
        return Err(format!("spec {s:?}: unexpected {:?}", chars[i]));
    }
    Ok(spec)
}

/// Parses `path:hint;path:hint`.
pub fn parse_hints(s: &str) -> Result<HashMap<String, Hint>, String> {
    let mut hints = HashMap::new();
    for item in s.split(';').filter(|i| !i.is_empty()) {
        let Some((path, hint)) = item.split_once(':') else {
            return Err(format!("{item:?} is not `path:hint`"));
        };
        let hint = match hint {
            "ipv4" => Hint::Ipv4,
            "ipv6" => Hint::Ipv6,
            "duration" => Hint::Duration,
            h => {
                let Some(list) = h.strip_prefix("flags(").and_then(|l| l.strip_suffix(')')) else {
                    return Err(format!("{path}: unknown hint {h:?}"));
                };
                let mut names = Vec::new();
                for entry in list.split(',').filter(|e| !e.is_empty()) {
                    let (name, mask) = entry
                        .split_once('=')
                        .ok_or_else(|| format!("{path}: flag {entry:?} is not NAME=MASK"))?;
                    let mask = mask
                        .strip_prefix("0x")
                        .map_or_else(|| mask.parse::<u128>(), |hex| u128::from_str_radix(hex, 16));
                    let mask = mask.map_err(|_| format!("{path}: flag {entry:?}: bad mask"))?;
                    names.push((name.to_owned(), mask));
                }
                Hint::Flags(names)
            }
        };
        hints.insert(path.to_owned(), hint);
    }
    Ok(hints)
}

pub(crate) fn member<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        Value::Variant(_, inner) => member(inner, name),
        _ => None,
    }
}

/// The value at `path` in the payload (the last scope), else in the
/// other scopes.
fn find<'a>(scopes: &'a [Value], path: &[String]) -> Option<&'a Value> {
    scopes
        .iter()
        .rev()
        .find_map(|scope| path.iter().try_fold(scope, |v, name| member(v, name)))
}

/// The thread of an event: its name and id, from the packet context and
/// the event's context scopes (`<...>` and 0 when unknown).
pub fn task<'a>(packet: Option<&'a Value>, scopes: &'a [Value]) -> (&'a str, i64) {
    let all: Vec<&Value> = packet
        .into_iter()
        .chain(scopes.iter().rev().skip(1))
        .collect();
    let lookup = |names: &[&str]| {
        all.iter()
            .find_map(|s| names.iter().find_map(|n| member(s, n)))
    };
    let name = match lookup(&["thread_name", "procname", "comm"]) {
        Some(Value::Str(s)) => s.as_str(),
        _ => "<...>",
    };
    let tid = match lookup(&["tid", "vtid", "pid", "vpid"]) {
        Some(Value::UInt(v, _)) => i64::try_from(*v).unwrap_or(i64::MAX),
        Some(Value::SInt(v, _)) => *v,
        _ => 0,
    };
    (name, tid)
}

/// Renders every event of `merge` that `shown` accepts (and every loss
/// `shown_loss` accepts)
/// as ftrace text, the header first, handing `each` about a megabyte at a
/// time (`each` returns `false` to stop); returns the events lost.
pub fn render(
    merge: &mut crate::decode::stream::FastMerge,
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
    merge: &mut crate::decode::stream::FastMerge,
    shown: impl crate::decode::stream::Shown,
    shown_loss: impl Fn(Option<i128>) -> bool,
    symbol: &mut dyn FnMut(&Executable, u64) -> Option<String>,
    mut each: impl FnMut(&str) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    use crate::decode::stream::{Step, ValueSink};
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
/// `scopes` its scopes' values (from a [`crate::decode::stream::ValueSink`]).
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

/// The event's text: its format applied, or `name=value` pairs.
pub fn write_text(out: &mut String, format: Option<&EventFormat>, scopes: &[Value]) {
    let none = HashMap::new();
    let hints = format.map_or(&none, |f| &f.hints);
    match format.and_then(|f| f.pieces.as_ref()) {
        Some(pieces) => {
            for p in pieces {
                match p {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Field(path, spec) => match find(scopes, path) {
                        Some(v) => {
                            let key = path.join(".");
                            let text = value_text(v, &key, hints, spec);
                            pad(out, &text, spec, is_number(v, hints.get(&key), spec));
                        }
                        None => {
                            let _ = write!(out, "<no field {}>", path.join("."));
                        }
                    },
                }
            }
        }
        None => {
            if let Some(Value::Struct(fields)) = scopes.last() {
                write_pairs(out, fields, "", hints, " ");
            }
        }
    }
}

/// Whether the events of `class` can be decoded by a [`FlatSink`] and
/// written by [`write_flat`]: no scope but the payload (`context`: the
/// stream's or its own), and only integers of 64 bits or less and strings
/// in the payload, at its top.
pub(crate) fn flat_class(class: &crate::EventClass, context: bool) -> bool {
    let flat = class.fields.as_ref().is_none_or(|s| {
        s.fields.iter().all(|f| match &f.ty {
            crate::Type::Integer(i) => i.size <= 64,
            crate::Type::String(_) => true,
            _ => false,
        })
    });
    !context && class.context.is_none() && flat
}

/// A top-level payload value kept by a [`FlatSink`].
#[derive(Clone, Copy)]
enum Flat {
    UInt(u64, crate::Base),
    SInt(i64, crate::Base),
    /// The bytes of a string, in [`FlatSink::bytes`].
    Str(usize, usize),
}

/// The payload of an event of a [`flat_class`], kept flat in buffers
/// reused from event to event (no value tree, no allocation an event):
/// what [`write_flat`] writes as [`write_text`] writes the tree.
#[derive(Default)]
pub(crate) struct FlatSink {
    /// The fields' names, one after the other.
    names: String,
    /// Each field: where its name ends in `names`, its value.
    fields: Vec<(usize, Flat)>,
    bytes: Vec<u8>,
    /// A field's name was given, its value not yet.
    named: bool,
}

impl FlatSink {
    /// Empties it for the next event.
    pub(crate) fn clear(&mut self) {
        self.names.clear();
        self.fields.clear();
        self.bytes.clear();
        self.named = false;
    }

    /// Each field's name and value, in order.
    fn iter(&self) -> impl Iterator<Item = (&str, Flat)> {
        let mut from = 0;
        self.fields.iter().map(move |&(end, v)| {
            let name = &self.names[from..end];
            from = end;
            (name, v)
        })
    }

    /// The first field named `name` (as [`member`] finds it).
    fn get(&self, name: &str) -> Option<Flat> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The value as the tree has it.
    fn value(&self, v: Flat) -> Value {
        match v {
            Flat::UInt(x, base) => Value::UInt(x, base),
            Flat::SInt(x, base) => Value::SInt(x, base),
            Flat::Str(a, b) => Value::Str(String::from_utf8_lossy(&self.bytes[a..b]).into_owned()),
        }
    }

    /// `value_text` with no hint and the default spec, without its
    /// allocations for the common cases.
    fn natural(&self, out: &mut String, v: Flat) {
        let decimal = |out: &mut String, x: u64| {
            let mut digits = [0u8; 20];
            let at = crate::output::graph::decimal(&mut digits, x);
            out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
        };
        match v {
            Flat::UInt(x, crate::Base::Decimal) => decimal(out, x),
            Flat::SInt(x, crate::Base::Decimal) => {
                if x < 0 {
                    out.push('-');
                }
                decimal(out, x.unsigned_abs());
            }
            Flat::UInt(x, base) => out.push_str(&int_text(i128::from(x), base, &Spec::default())),
            Flat::SInt(x, base) => out.push_str(&int_text(i128::from(x), base, &Spec::default())),
            Flat::Str(a, b) => out.push_str(&String::from_utf8_lossy(&self.bytes[a..b])),
        }
    }

    /// The text of value `v` of the field `name` by `spec`, padded, as
    /// [`write_text`] writes it.
    fn field_text(
        &self,
        out: &mut String,
        name: &str,
        v: Flat,
        hints: &HashMap<String, Hint>,
        spec: &Spec,
    ) {
        let plain = *spec == Spec::default() && (hints.is_empty() || !hints.contains_key(name));
        if plain {
            self.natural(out, v);
            return;
        }
        let v = self.value(v);
        let text = value_text(&v, name, hints, spec);
        pad(out, &text, spec, is_number(&v, hints.get(name), spec));
    }

    /// The value of the field named last (a value without a name before
    /// it is not a top-level field's: a `flat_class` has none).
    fn push(&mut self, v: Flat) {
        if std::mem::take(&mut self.named) {
            if let Some(last) = self.fields.last_mut() {
                last.1 = v;
            }
        }
    }
}

impl crate::decode::plan::Sink for FlatSink {
    fn field(&mut self, name: &str) {
        self.names.push_str(name);
        // Its value follows.
        self.fields
            .push((self.names.len(), Flat::UInt(0, crate::Base::Decimal)));
        self.named = true;
    }
    fn uint(&mut self, v: u64, base: crate::Base, _: u32) {
        self.push(Flat::UInt(v, base));
    }
    fn sint(&mut self, v: i64, base: crate::Base, _: u32) {
        self.push(Flat::SInt(v, base));
    }
    fn string(&mut self, s: &[u8]) {
        let from = self.bytes.len();
        self.bytes.extend_from_slice(s);
        self.push(Flat::Str(from, self.bytes.len()));
    }
    // Not in a `flat_class`'s payload.
    fn enumeration(&mut self, _: i128, _: &crate::Enum) {}
    fn float(&mut self, _: f64) {}
    fn wide(&mut self, _: &[u8], _: bool, _: u32, _: crate::Base) {}
    fn begin_struct(&mut self) {}
    fn end_struct(&mut self) {}
    fn begin_array(&mut self, _: u64) {}
    fn item(&mut self, _: u64) {}
    fn end_array(&mut self) {}
    fn variant(&mut self, _: &str) {}
    fn end_variant(&mut self) {}
}

/// [`write_text`] for an event of a [`flat_class`] kept by `flat`: the
/// same text.
pub(crate) fn write_flat(out: &mut String, format: Option<&EventFormat>, flat: &FlatSink) {
    let none = HashMap::new();
    let hints = format.map_or(&none, |f| &f.hints);
    match format.and_then(|f| f.pieces.as_ref()) {
        Some(pieces) => {
            for p in pieces {
                match p {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Field(path, spec) => {
                        match path.as_slice() {
                            [name] => match flat.get(name) {
                                Some(v) => flat.field_text(out, name, v, hints, spec),
                                None => {
                                    let _ = write!(out, "<no field {name}>");
                                }
                            },
                            // Below the top: nothing in a flat payload.
                            _ => {
                                let _ = write!(out, "<no field {}>", path.join("."));
                            }
                        }
                    }
                }
            }
        }
        None => {
            let mut first = true;
            for (name, v) in flat.iter().filter(|(n, _)| !n.starts_with('_')) {
                if !first {
                    out.push(' ');
                }
                first = false;
                out.push_str(name);
                out.push('=');
                flat.field_text(out, name, v, hints, &Spec::default());
            }
        }
    }
}

fn write_pairs(
    out: &mut String,
    fields: &[(String, Value)],
    prefix: &str,
    hints: &HashMap<String, Hint>,
    sep: &str,
) {
    let mut first = true;
    for (n, v) in fields {
        if n.starts_with('_') {
            continue;
        }
        if !first {
            out.push_str(sep);
        }
        first = false;
        let key = if prefix.is_empty() {
            n.to_owned()
        } else {
            format!("{prefix}.{n}")
        };
        out.push_str(n);
        out.push('=');
        out.push_str(&value_text(v, &key, hints, &Spec::default()));
    }
}

fn is_number(v: &Value, hint: Option<&Hint>, spec: &Spec) -> bool {
    match v {
        Value::UInt(..) | Value::SInt(..) | Value::Float(_) => hint.is_none(),
        Value::Enum { labels, .. } => labels.is_empty() || spec.kind != Kind::Natural,
        _ => false,
    }
}

/// Pads `text` to the spec's width.
fn pad(out: &mut String, text: &str, spec: &Spec, number: bool) {
    let len = text.chars().count();
    if len >= spec.width {
        out.push_str(text);
        return;
    }
    let n = spec.width - len;
    if spec.zero && number && spec.align.is_none() {
        // Zeros after the sign and the base prefix.
        let sign = usize::from(text.starts_with(['-', '+']));
        let prefix = if ["0x", "0X", "0o", "0b"]
            .iter()
            .any(|p| text[sign..].starts_with(p))
        {
            2
        } else {
            0
        };
        out.push_str(&text[..sign + prefix]);
        out.extend(std::iter::repeat_n('0', n));
        out.push_str(&text[sign + prefix..]);
        return;
    }
    let fill = |out: &mut String, k: usize| out.extend(std::iter::repeat_n(spec.fill, k));
    match spec
        .align
        .unwrap_or(if number { Align::Right } else { Align::Left })
    {
        Align::Left => {
            out.push_str(text);
            fill(out, n);
        }
        Align::Right => {
            fill(out, n);
            out.push_str(text);
        }
        Align::Center => {
            fill(out, n / 2);
            out.push_str(text);
            fill(out, n - n / 2);
        }
    }
}

fn int_text(v: i128, natural: crate::Base, spec: &Spec) -> String {
    let kind = match (spec.kind, natural) {
        (Kind::Natural, crate::Base::Hexadecimal) => return hex_text(v, true, false),
        (Kind::Natural, crate::Base::Octal) => return format!("0{:o}", v),
        (Kind::Natural, crate::Base::Binary) => return format!("0b{:b}", v),
        (Kind::Natural, crate::Base::Decimal) => Kind::Decimal,
        (k, _) => k,
    };
    match kind {
        Kind::Hex => hex_text(v, spec.alt, false),
        Kind::HexUpper => hex_text(v, spec.alt, true),
        Kind::Octal if spec.alt => format!("0o{v:o}"),
        Kind::Octal => format!("{v:o}"),
        Kind::Binary if spec.alt => format!("0b{v:b}"),
        Kind::Binary => format!("{v:b}"),
        _ => v.to_string(),
    }
}

/// Hex of a value: negative values as their two's complement in 64 bits.
fn hex_text(v: i128, prefix: bool, upper: bool) -> String {
    let u = if v < 0 {
        v as i64 as u64 as u128
    } else {
        v as u128
    };
    match (prefix, upper) {
        (true, false) => format!("0x{u:x}"),
        (true, true) => format!("0x{u:X}"),
        (false, false) => format!("{u:x}"),
        (false, true) => format!("{u:X}"),
    }
}

/// `__print_flags`: each mask wholly set is named and cleared, in order,
/// until no bit is left; leftover bits in hex; nothing for 0.
pub fn print_flags(v: u128, names: &[(String, u128)]) -> String {
    let mut out = String::new();
    let mut left = v;
    for (name, mask) in names {
        if left == 0 {
            break;
        }
        if left & mask != *mask {
            continue;
        }
        left &= !mask;
        if !out.is_empty() {
            out.push('|');
        }
        out.push_str(name);
    }
    if left != 0 {
        if !out.is_empty() {
            out.push('|');
        }
        let _ = write!(out, "0x{left:x}");
    }
    out
}

fn float_text(f: f64, spec: &Spec) -> String {
    if let Some(p) = spec.precision {
        return format!("{f:.p$}");
    }
    let a = f.abs();
    if a != 0.0 && a.is_finite() && !(1e-5..1e16).contains(&a) {
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

/// The text of value `v` at `path` (for hints).
fn value_text(v: &Value, path: &str, hints: &HashMap<String, Hint>, spec: &Spec) -> String {
    let hint = hints.get(path);
    let as_int = |v: &Value| match v {
        Value::UInt(x, _) => Some(i128::from(*x)),
        Value::SInt(x, _) => Some(i128::from(*x)),
        Value::Enum { value, .. } => Some(*value),
        _ => None,
    };
    match (hint, v) {
        (Some(Hint::Flags(names)), _) if spec.kind == Kind::Natural => {
            if let Some(x) = as_int(v) {
                return print_flags(x as u128, names);
            }
        }
        (Some(Hint::Duration), Value::UInt(ns, _)) if spec.kind == Kind::Natural => {
            return format!("{:?}", std::time::Duration::from_nanos(*ns));
        }
        (Some(h @ (Hint::Ipv4 | Hint::Ipv6)), Value::Array(items)) => {
            let bytes: Vec<u8> = items
                .iter()
                .filter_map(|i| as_int(i).and_then(|x| u8::try_from(x).ok()))
                .collect();
            if let (Hint::Ipv4, Ok(b)) = (h, <[u8; 4]>::try_from(bytes.as_slice())) {
                return std::net::Ipv4Addr::from(b).to_string();
            }
            if let (Hint::Ipv6, Ok(b)) = (h, <[u8; 16]>::try_from(bytes.as_slice())) {
                return std::net::Ipv6Addr::from(b).to_string();
            }
        }
        _ => {}
    }
    match v {
        Value::UInt(x, base) => int_text(i128::from(*x), *base, spec),
        Value::SInt(x, base) => int_text(i128::from(*x), *base, spec),
        Value::Enum { value, labels } => {
            let natural = spec.kind == Kind::Natural;
            match labels.first().map(String::as_str) {
                // Booleans as C prints them.
                Some(l @ ("true" | "false")) if natural && labels.len() == 1 => {
                    if l == "true" { "1" } else { "0" }.to_owned()
                }
                Some(l) if natural => l.to_owned(),
                // `__print_symbolic` prints an unknown value in hex.
                None if natural => hex_text(*value, true, false),
                _ => int_text(*value, crate::Base::Decimal, spec),
            }
        }
        Value::Float(f) => float_text(*f, spec),
        // Wider than any C type: its decimal digits.
        Value::Wide(digits) => digits.clone(),
        Value::Str(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| value_text(i, path, hints, spec))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Struct(fields) => {
            let mut out = String::from("{");
            write_pairs(&mut out, fields, path, hints, " ");
            out.push('}');
            out
        }
        Value::Variant(option, inner) => match &**inner {
            Value::Struct(f) if f.is_empty() => option.clone(),
            inner => value_text(inner, path, hints, spec),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Base;

    fn flags() -> Vec<(String, u128)> {
        [("RDWR", 3), ("READ", 1), ("WRITE", 2), ("CREATE", 0x40)]
            .iter()
            .map(|&(n, m)| (n.to_owned(), m))
            .collect()
    }

    /// A flat payload written by `write_flat` as it decoded, and by
    /// `write_text` from its value tree: the same text, for every format
    /// and hint below.
    #[test]
    fn flat_payloads_print_as_their_value_trees() {
        use crate::decode::plan::Sink;
        let fields: Vec<(&str, Value)> = vec![
            ("a", Value::UInt(5, Base::Decimal)),
            ("b", Value::SInt(-7, Base::Decimal)),
            ("c", Value::SInt(i64::MIN, Base::Decimal)),
            ("d", Value::UInt(255, Base::Hexadecimal)),
            ("e", Value::SInt(-2, Base::Hexadecimal)),
            ("f", Value::UInt(8, Base::Octal)),
            ("g", Value::SInt(-5, Base::Binary)),
            ("_h", Value::UInt(1, Base::Decimal)),
            ("s", Value::Str("x y\u{fffd}".into())),
            ("a", Value::UInt(6, Base::Decimal)),
            ("u", Value::UInt(u64::MAX, Base::Decimal)),
            ("n", Value::UInt(1_500, Base::Decimal)),
        ];
        let mut flat = FlatSink::default();
        flat.begin_struct();
        for (name, v) in &fields {
            flat.field(name);
            match v {
                Value::UInt(x, base) => flat.uint(*x, *base, 64),
                Value::SInt(x, base) => flat.sint(*x, *base, 64),
                Value::Str(_) => flat.string(b"x y\xff"),
                _ => unreachable!(),
            }
        }
        flat.end_struct();
        let tree = [Value::Struct(
            fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect(),
        )];
        let formats: [Option<&str>; 6] = [
            None,
            Some("{a} {b} {c} {d} {e} {f} {g} {_h} {s} {u}"),
            Some("{a:>5}|{b:05}|{d:#010x}|{e:x}|{s:^9}|{g:b}|{u:X}"),
            Some("{nope} {a.b} {a} {n}"),
            Some("[{s:<6}] {c:>24} {f:#o} {b:d}"),
            Some(""),
        ];
        let hints = ["", "a:flags(ONE=0x1,FOUR=0x4);n:duration", "s:ipv4"];
        for format in formats {
            for h in hints {
                let f = EventFormat {
                    pieces: format.map(|f| parse_format(f).unwrap()),
                    hints: parse_hints(h).unwrap(),
                };
                let (mut want, mut got) = (String::new(), String::new());
                write_text(&mut want, Some(&f), &tree);
                write_flat(&mut got, Some(&f), &flat);
                assert_eq!(got, want, "{format:?} {h:?}");
            }
        }
        let (mut want, mut got) = (String::new(), String::new());
        write_text(&mut want, None, &tree);
        write_flat(&mut got, None, &flat);
        assert_eq!(got, want);
        assert!(
            want.starts_with(
                "a=5 b=-7 c=-9223372036854775808 d=0xff e=0xfffffffffffffffe f=010 g=0b"
            ),
            "{want}"
        );
    }

    #[test]
    fn print_flags_as_the_kernel() {
        let cases: [(u128, &str); 7] = [
            (0, ""),
            (1, "READ"),
            (3, "RDWR"),
            (0x43, "RDWR|CREATE"),
            (0x42, "WRITE|CREATE"),
            (0x180, "0x180"),
            (0x1c1, "READ|CREATE|0x180"),
        ];
        for (v, want) in cases {
            assert_eq!(print_flags(v, &flags()), want, "{v:#x}");
        }
    }

    #[test]
    fn specs() {
        let cases: [(&str, Value, &str); 12] = [
            ("{v:03}", Value::UInt(1, Base::Decimal), "001"),
            ("{v:03}", Value::SInt(-1, Base::Decimal), "-01"),
            ("{v:x}", Value::UInt(255, Base::Decimal), "ff"),
            ("{v:#x}", Value::UInt(255, Base::Decimal), "0xff"),
            ("{v:#06x}", Value::UInt(255, Base::Decimal), "0x00ff"),
            ("{v}", Value::UInt(255, Base::Hexadecimal), "0xff"),
            ("{v:X}", Value::SInt(-1, Base::Decimal), "FFFFFFFFFFFFFFFF"),
            ("[{v:>5}]", Value::Str("ab".into()), "[   ab]"),
            ("[{v:*^6}]", Value::Str("ab".into()), "[**ab**]"),
            ("[{v:5}]", Value::Str("ab".into()), "[ab   ]"),
            ("{v:.2}", Value::Float(1.0 / 3.0), "0.33"),
            ("{{{v}}}", Value::Float(1.5), "{1.5}"),
        ];
        for (f, v, want) in cases {
            let e = EventFormat {
                pieces: Some(parse_format(f).unwrap()),
                hints: HashMap::new(),
            };
            let mut out = String::new();
            write_text(&mut out, Some(&e), &[Value::Struct(vec![("v".into(), v)])]);
            assert_eq!(out, want, "{f}");
        }
    }

    #[test]
    fn bad_formats_name_the_place() {
        let cases = [
            ("a={a", "at byte 2: a `{` with no `}`"),
            ("a}", "at byte 1: a `}` with no `{`"),
            ("{a:q}", "unknown type 'q'"),
            ("{a:99999}", "too large"),
            ("{a.}", "empty field name"),
            ("{.a}", "empty field name"),
        ];
        for (f, want) in cases {
            let e = parse_format(f).unwrap_err();
            assert!(e.contains(want), "{f}: {e}");
        }
        assert!(parse_hints("x:flags(A=zz)")
            .unwrap_err()
            .contains("bad mask"));
        assert!(parse_hints("x:weird").unwrap_err().contains("unknown hint"));
    }
}
