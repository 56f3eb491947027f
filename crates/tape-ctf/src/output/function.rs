//! What the function tracer's events are to a reader, shared by `tape
//! graph` and `tape profile`: a class's kind by its name (a traced
//! function's entry, exit or return value: `fn.app.io.read.entry`), its
//! `depth` read from the event's bytes or by a `DepthSink`, each
//! stream's thread, per-thread state and interned function names without
//! a hash per event, and durations as the kernel's function_graph and
//! function profiler print them. Maps are `rustc_hash`'s: the hot loops
//! look up threads and names at every event, and SipHash's resistance to
//! chosen keys buys nothing against a trace file.

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;

/// Per-thread states by thread id, in a vector; the thread asked last is
/// found without hashing (a stream is one thread: its events come in
/// runs). Shared by the graph and the profile.
pub(crate) struct Threads<T> {
    states: Vec<(i64, T)>,
    index: HashMap<i64, usize>,
    last: Option<(i64, usize)>,
}

impl<T> Default for Threads<T> {
    fn default() -> Threads<T> {
        Threads {
            states: Vec::new(),
            index: HashMap::default(),
            last: None,
        }
    }
}

impl<T: Default> Threads<T> {
    /// Thread `tid`'s state (a default one at its first use).
    #[inline]
    pub(crate) fn get(&mut self, tid: i64) -> &mut T {
        let i = match self.last {
            Some((t, i)) if t == tid && i < self.states.len() => i,
            _ => self.find(tid),
        };
        &mut self.states[i].1
    }

    /// The index of `tid`'s state, made if new (then the one asked last).
    #[cold]
    fn find(&mut self, tid: i64) -> usize {
        let n = self.states.len();
        let i = *self.index.entry(tid).or_insert(n);
        if i == n {
            self.states.push((tid, T::default()));
        }
        self.last = Some((tid, i));
        i
    }
}

impl<T> Threads<T> {
    /// Every thread's id and state, in order of first use.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (i64, &T)> {
        self.states.iter().map(|(tid, s)| (*tid, s))
    }
}

/// Function names, interned: calls compare and count by index. A name is
/// looked up by its text's address first (the reader passes its class
/// names: the same text at every event), checked against the name, then
/// by the text.
#[derive(Default)]
pub(crate) struct Names {
    names: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    by_address: HashMap<(usize, usize), u32>,
}

impl Names {
    /// The index of `name` (added if new).
    pub(crate) fn id(&mut self, name: &str) -> u32 {
        let at = (name.as_ptr() as usize, name.len());
        // Checked: a caller may pass other text at the same address.
        if let Some(&i) = self.by_address.get(&at) {
            if *self.names[i as usize] == *name {
                return i;
            }
        }
        if let Some(&i) = self.ids.get(name) {
            self.by_address.insert(at, i);
            return i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.into());
        self.ids.insert(name.into(), i);
        self.by_address.insert(at, i);
        i
    }

    /// The name of index `id`.
    pub(crate) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}

/// `trace_find_mark`: the mark of a duration in ns.
pub fn mark(d: u128) -> char {
    const MARKS: [(u128, char); 6] = [
        (1_000_000_000, '$'),
        (100_000_000, '@'),
        (10_000_000, '*'),
        (1_000_000, '#'),
        (100_000, '!'),
        (10_000, '+'),
    ];
    MARKS.iter().find(|(v, _)| d > *v).map_or(' ', |(_, c)| *c)
}

/// `trace_print_graph_duration`: `1.382 us    `, `1837.709 us `,
/// `119760.2 us `, `3594274 us  ` (at least 8 characters before ` us `).
/// The hot path of every timed line: assembled in a byte buffer, u64
/// arithmetic (a u128 division is a library call).
pub fn duration_text(s: &mut String, d: u128) {
    let Ok(d) = u64::try_from(d) else {
        // Past u64 ns (584 years): microseconds of 17 digits or more, so
        // no fraction and no padding.
        let _ = write!(s, "{} us ", d / 1000);
        return;
    };
    let (usecs, rem) = (d / 1000, d % 1000);
    let mut buf = [0u8; 66];
    let digits = crate::decode::text::uint_text(&mut buf, usecs, crate::Base::Decimal);
    // Digits, a point and three, " us ", padding: at most 20 + 4 + 4.
    let mut line = [b' '; 32];
    let mut len = digits.len();
    line[..len].copy_from_slice(digits);
    if len < 7 {
        // snprintf(nsecs_str, min(5, 8 - len), "%03lu"): at most 7 - len
        // of the three digits.
        let fraction = [rem / 100, rem / 10 % 10, rem % 10].map(|x| b'0' + x as u8);
        let keep = (7 - len).min(3);
        line[len] = b'.';
        line[len + 1..len + 1 + keep].copy_from_slice(&fraction[..keep]);
        len += keep + 1;
    }
    line[len..len + 4].copy_from_slice(b" us ");
    let end = len + 4 + 8usize.saturating_sub(len);
    s.push_str(std::str::from_utf8(&line[..end]).unwrap_or_default());
}

/// The byte order of `class`'s one field, when its fields are exactly a
/// 32-bit unsigned byte-aligned `depth` (the function tracer's `fn_call`).
pub(crate) fn depth_only(
    class: &crate::EventClass,
    order: crate::ByteOrder,
) -> Option<crate::ByteOrder> {
    let fields = class.fields.as_ref()?;
    if class.context.is_some() {
        return None;
    }
    let [f] = fields.fields.as_slice() else {
        return None;
    };
    match &f.ty {
        crate::Type::Integer(i)
            if f.name == "depth" && i.size == 32 && !i.signed && i.align <= 8 =>
        {
            Some(i.byte_order.unwrap_or(order))
        }
        _ => None,
    }
}

/// The deepest traced call the graph draws and the profile counts: both
/// keep state per depth (and the graph indents by it), so a depth read
/// from a damaged trace (a flipped bit: 3,925,868,544) is an error naming
/// the event, not gigabytes of memory or of indentation. Real programs'
/// traced calls nest in the tens or hundreds.
pub(crate) const MAX_CALL_DEPTH: u32 = 10_000;

/// `depth`, or an error at `stream`'s event if it is deeper than
/// [`MAX_CALL_DEPTH`].
pub(crate) fn checked_depth(
    stream: &crate::decode::stream::StreamReader,
    depth: u32,
) -> Result<u32, crate::decode::DecodeError> {
    if depth > MAX_CALL_DEPTH {
        return Err(stream.err(format!(
            "a traced call at depth {depth}, deeper than the {MAX_CALL_DEPTH} a reader follows \
             (a damaged trace?)"
        )));
    }
    Ok(depth)
}

/// What an event class is to the graph: a traced function's entry or exit
/// (its displayed name), or anything else (a comment).
#[derive(Clone)]
pub(crate) enum Kind {
    Entry(String),
    Exit(String),
    /// A traced function's return value (`#[tape::traced(ret)]`), recorded
    /// just before its exit: drawn on the exit's line.
    Ret(String),
    /// A `tracing` span closed (`tape-tracing`'s `.close`, with its
    /// `call`): no interval of that call follows.
    Close(String),
    Other,
}

/// The function a class named `name` is the entry of, as `tape graph`
/// draws it (`fn.app.io.read.entry`: `app::io::read`), or `None`.
pub fn entry_of(name: &str) -> Option<String> {
    match kind(name) {
        Kind::Entry(f) => Some(f),
        _ => None,
    }
}

/// The kind of a class named `name` with the function tracer's class:
/// `fn.app.io.read.entry` is the entry of `app::io::read`; a latency
/// section's `latency.db.commit.entry` the entry of `latency::db::commit`;
/// a `tracing` span's (`tape-tracing`) `tracing.app.info.request.entry`
/// the entry of `tracing::app::info::request` (spans have no `.ret`, but
/// a `.close`).
pub(crate) fn kind(name: &str) -> Kind {
    let (rest, prefix) = if let Some(rest) = name.strip_prefix("fn.") {
        (rest, "")
    } else if let Some(rest) = name.strip_prefix("latency.") {
        (rest, "latency::")
    } else if let Some(rest) = name.strip_prefix("tracing.") {
        (rest, "tracing::")
    } else {
        return Kind::Other;
    };
    let display = |f: &str| format!("{prefix}{}", f.replace('.', "::"));
    if let Some(f) = rest.strip_suffix(".entry") {
        Kind::Entry(display(f))
    } else if let Some(f) = rest.strip_suffix(".exit") {
        Kind::Exit(display(f))
    } else if let Some(f) = rest.strip_suffix(".ret").filter(|_| prefix != "tracing::") {
        Kind::Ret(display(f))
    } else if let Some(f) = rest
        .strip_suffix(".close")
        .filter(|_| prefix == "tracing::")
    {
        Kind::Close(display(f))
    } else {
        Kind::Other
    }
}

/// The thread of a stream's current packet (its context's `tid` and
/// `thread_name`, as tape writes them), found once per packet.
pub(crate) struct ThreadOf {
    /// By stream (its path's address): packet number, tid, name.
    known: HashMap<usize, (u64, i64, std::sync::Arc<str>)>,
    /// The last answer: stream, packet, tid, name.
    last: (usize, u64, i64, std::sync::Arc<str>),
}

impl Default for ThreadOf {
    fn default() -> ThreadOf {
        ThreadOf {
            known: HashMap::default(),
            last: (0, u64::MAX, 0, "".into()),
        }
    }
}

impl ThreadOf {
    /// The thread of `stream`'s packet.
    pub(crate) fn of(&mut self, stream: &crate::decode::stream::StreamReader) -> (i64, &str) {
        let key = stream.path().as_os_str().as_encoded_bytes().as_ptr() as usize;
        let packet = stream.packet_times().0;
        if (self.last.0, self.last.1) != (key, packet) {
            let e = self.known.entry(key).or_insert((u64::MAX, 0, "".into()));
            if e.0 != packet {
                let (comm, tid) =
                    crate::output::event_text::task(stream.packet_value.as_ref(), &[]);
                *e = (packet, tid, comm.into());
            }
            self.last = (key, packet, e.1, e.2.clone());
        }
        (self.last.2, &self.last.3)
    }
}

/// A sink that keeps the payload's top-level `depth` and, made
/// [`DepthSink::with_text`], writes the other fields (an async poll's
/// `call`; a function's chosen arguments, or its return value) as
/// `name=value, ...` into `extra`: no value tree per event, and nothing
/// written for the common `fn_call` class (depth only).
#[derive(Default)]
pub(crate) struct DepthSink {
    in_fields: bool,
    level: u32,
    want: bool,
    /// A top-level field other than `depth` is being written.
    other: bool,
    /// Whether the other fields are written at all.
    text: bool,
    /// A top-level field left out besides `depth` (an async poll's exit
    /// repeats its entry's `call`).
    skip: &'static str,
    /// Values without their names (a return event's one field).
    bare: bool,
    /// The depth read (0 if none).
    pub(crate) depth: u32,
    /// The other fields, as text.
    pub(crate) extra: String,
}

impl DepthSink {
    /// A sink that writes the fields other than `depth` and `skip` into
    /// `buf` (cleared first), with their names unless `bare`.
    pub(crate) fn with_text(mut buf: String, skip: &'static str, bare: bool) -> DepthSink {
        buf.clear();
        DepthSink {
            text: true,
            skip,
            bare,
            extra: buf,
            ..DepthSink::default()
        }
    }

    /// Starts a value of the field being written (a separator within
    /// a composite one).
    fn value(&mut self) -> bool {
        std::mem::take(&mut self.want);
        self.other
    }
}

impl crate::decode::plan::Sink for DepthSink {
    fn scope(&mut self, name: &'static str) {
        self.in_fields = name == "fields";
        self.level = 0;
    }
    fn field(&mut self, name: &str) {
        if !self.in_fields {
            return;
        }
        if self.level == 1 {
            self.want = name == "depth";
            self.other = self.text && !self.want && name != self.skip;
            if self.other {
                if !self.extra.is_empty() {
                    self.extra.push_str(", ");
                }
                if !self.bare {
                    self.extra.push_str(name);
                    self.extra.push('=');
                }
            }
        } else if self.other {
            let _ = write!(self.extra, "{name}=");
        }
    }
    fn uint(&mut self, v: u64, base: crate::Base, _: u32) {
        if std::mem::take(&mut self.want) {
            self.depth = u32::try_from(v).unwrap_or(u32::MAX);
        } else if self.other {
            let _ = match base {
                crate::Base::Hexadecimal => write!(self.extra, "{v:#x}"),
                _ => write!(self.extra, "{v}"),
            };
        }
    }
    fn sint(&mut self, v: i64, _: crate::Base, _: u32) {
        if std::mem::take(&mut self.want) {
            self.depth = u32::try_from(v).unwrap_or(0);
        } else if self.other {
            let _ = write!(self.extra, "{v}");
        }
    }
    fn enumeration(&mut self, v: i128, e: &crate::Enum) {
        if self.value() {
            match e.labels(v).next() {
                Some(l) => self.extra.push_str(l),
                None => {
                    let _ = write!(self.extra, "{v}");
                }
            }
        }
    }
    fn float(&mut self, v: f64) {
        if self.value() {
            let _ = write!(self.extra, "{v}");
        }
    }
    fn string(&mut self, s: &[u8]) {
        if self.value() {
            // Quoted as Rust's `Debug` writes it: ASCII here, the rest by
            // the formatter.
            if !s.is_ascii() {
                let _ = write!(self.extra, "{:?}", String::from_utf8_lossy(s));
                return;
            }
            self.extra.push('"');
            let mut from = 0;
            for (i, &b) in s.iter().enumerate() {
                let escape = match b {
                    b'\t' => "\\t",
                    b'\r' => "\\r",
                    b'\n' => "\\n",
                    b'\0' => "\\0",
                    b'"' => "\\\"",
                    b'\\' => "\\\\",
                    0x20..0x7f => continue,
                    _ => "",
                };
                self.extra
                    .push_str(std::str::from_utf8(&s[from..i]).unwrap_or_default());
                from = i + 1;
                if escape.is_empty() {
                    let _ = write!(self.extra, "\\u{{{b:x}}}");
                } else {
                    self.extra.push_str(escape);
                }
            }
            self.extra
                .push_str(std::str::from_utf8(&s[from..]).unwrap_or_default());
            self.extra.push('"');
        }
    }
    fn wide(&mut self, v: &[u8], _: bool, _: u32, _: crate::Base) {
        if self.value() {
            self.extra.push_str("0x");
            for b in v.iter().rev() {
                let _ = write!(self.extra, "{b:02x}");
            }
        }
    }
    fn begin_struct(&mut self) {
        self.level += 1;
        self.want = false;
        if self.other && self.level > 1 {
            self.extra.push('{');
        }
    }
    fn end_struct(&mut self) {
        if self.other && self.level > 1 {
            self.extra.push('}');
        }
        self.level = self.level.saturating_sub(1);
    }
    fn begin_array(&mut self, _: u64) {
        self.want = false;
        if self.other {
            self.extra.push('[');
        }
    }
    fn item(&mut self, i: u64) {
        if self.other && i > 0 {
            self.extra.push_str(", ");
        }
    }
    fn end_array(&mut self) {
        if self.other {
            self.extra.push(']');
        }
    }
    fn variant(&mut self, _: &str) {
        self.want = false;
    }
    fn end_variant(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_as_debug_quotes_them() {
        let ascii: Vec<u8> = (0u8..=0x7f).collect();
        let cases: [&[u8]; 5] = [&ascii, b"plain", b"", "\u{e9}\n\"".as_bytes(), b"\xff\0a"];
        for s in cases {
            let mut sink = DepthSink::with_text(String::new(), "", true);
            sink.other = true;
            crate::decode::plan::Sink::string(&mut sink, s);
            assert_eq!(
                sink.extra,
                format!("{:?}", String::from_utf8_lossy(s)),
                "{s:?}"
            );
        }
    }

    #[test]
    fn classes_are_told_by_their_names() {
        let cases: &[(&str, &str)] = &[
            ("fn.app.io.read.entry", "entry app::io::read"),
            ("fn.app.io.read.exit", "exit app::io::read"),
            ("fn.app.io.read.ret", "ret app::io::read"),
            ("latency.db.commit.entry", "entry latency::db::commit"),
            (
                "tracing.app.info.request.entry",
                "entry tracing::app::info::request",
            ),
            (
                "tracing.app.info.request.exit",
                "exit tracing::app::info::request",
            ),
            // A span's fields, an event, a `tracing` event named like a span's
            // point (tape-tracing appends `_`), and names of no tracer.
            ("tracing.app.info.request.new", "other"),
            ("tracing.app.info.src/main.rs:3", "other"),
            ("tracing.app.info.x.entry_", "other"),
            ("tracing.app.info.x.ret", "other"),
            (
                "tracing.app.info.request.close",
                "close tracing::app::info::request",
            ),
            ("fn.app.conn.close", "other"),
            ("app.conn.close", "other"),
            ("app.net.rx", "other"),
            ("fn.app.main", "other"),
        ];
        for &(name, want) in cases {
            let got = match kind(name) {
                Kind::Entry(f) => format!("entry {f}"),
                Kind::Exit(f) => format!("exit {f}"),
                Kind::Ret(f) => format!("ret {f}"),
                Kind::Close(f) => format!("close {f}"),
                Kind::Other => "other".to_owned(),
            };
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn durations_and_marks_are_the_kernels() {
        // (ns, mark, text): the examples of ftrace.txt and its edges.
        let cases: &[(u128, char, &str)] = &[
            (1_382, ' ', "1.382 us    "),
            (0, ' ', "0.000 us    "),
            (10_000, ' ', "10.000 us   "),
            (10_001, '+', "10.001 us   "),
            (58_628, '+', "58.628 us   "),
            (115_305, '!', "115.305 us  "),
            (1_837_709, '#', "1837.709 us "),
            (10_000_001, '*', "10000.00 us "),
            (119_760_234, '@', "119760.2 us "),
            (3_594_274_000, '$', "3594274 us  "),
            (12_345_678_901_000, '$', "12345678901 us "),
            (
                u128::from(u64::MAX) * 1000 + 7,
                '$',
                "18446744073709551615 us ",
            ),
            (10u128.pow(22), '$', "10000000000000000000 us "),
        ];
        for &(ns, m, text) in cases {
            let mut s = String::new();
            duration_text(&mut s, ns);
            assert_eq!((mark(ns), s.as_str()), (m, text), "{ns} ns");
        }
    }
}
