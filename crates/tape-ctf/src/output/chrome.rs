//! The Chrome JSON export (`tape export --format chrome`): the Trace Event
//! Format that chrome://tracing, Perfetto's legacy importer, speedscope and
//! most trace tools read, for the tools that read only that. Perfetto's
//! protobuf export (`output::perfetto`) is the one to use where it can be:
//! JSON cannot name a track, its slices must nest, its times are floating
//! point microseconds, and viewers load it whole (`docs/11-view.md` says where it
//! stops scaling).
//!
//! ```text
//! {"displayTimeUnit":"ns","otherData":{"tape_time_origin_ns":"1795626716973994281"},
//!  "traceEvents":[
//!   {"ph":"M","name":"process_name","pid":4112,"tid":4112,"args":{"name":"quickstart"}},
//!   {"ph":"M","name":"thread_name","pid":4112,"tid":4117,"args":{"name":"dispatcher"}},
//!   {"ph":"i","s":"t","name":"app.reply","pid":4112,"tid":4117,"ts":12.345,"args":{"fields":{...}}},
//!   {"ph":"X","name":"app::parse","pid":4112,"tid":4117,"ts":20.001,"dur":0.445,"args":{"entry":{...},"exit":{...}}},
//!   {"ph":"b","cat":"async","id":"0x2a","name":"app::fetch",...}, {"ph":"e",...},
//!   {"ph":"C","name":"net.rx.len","pid":4112,"ts":30.5,"args":{"value":1500}},
//!   {"ph":"i","s":"t","name":"lost events",...,"args":{"count":12}}
//!  ]}
//! ```
//!
//! * Times are microseconds after the first event's time (with three
//!   decimals: nanoseconds), because a double holds about 16 digits and
//!   nanoseconds since 1970 are 19; the origin is in `otherData`.
//! * Traced calls are complete events (`X`) written at their exit (see
//!   `output::calls`): they always nest. A call whose exit is not in the
//!   trace is an instant at its entry with `exit_not_in_trace` (JSON has no
//!   child track to move it to); calls open at the end are begun (`B`) and
//!   never ended; an exit without its entry is an instant with
//!   `entry_not_in_trace`. Async polls are also `b`/`e` pairs with the
//!   call's id, which viewers draw as one async track per call. A
//!   `tracing` span (`tape-tracing`, whose `.close` says when its call
//!   ends) is drawn as the Perfetto export draws it: entered once then
//!   closed, it is one `X` on its thread; its first interval's `b`/`e`
//!   pair waits until a second interval shows it is async (then both are
//!   written, one async track), the close drops it, and one whose close is
//!   not in the trace is written at the end.
//! * Args are the scopes as `tape show --format json` writes them
//!   (`{"fields":{...}}`); a call's are its entry's, exit's and return
//!   value's scopes under `entry`, `exit` and `ret`.

use std::io::Write;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::decode::json::JsonSink;
use crate::decode::plan::Sink;
use crate::decode::stream::StreamReader;
use crate::decode::DecodeError;
use crate::merge::StreamMerge;
use crate::metadata::read::TraceDir;
use crate::output::calls::{CallStack, OpenCall};
use crate::output::export::{process, run, stream_key, time, Export, Exported, Failure, Options};
use crate::output::function::{kind, Kind, Names, ThreadOf};
use crate::{Base, Enum};

/// What the sink reads besides writing the JSON: the top-level `depth` and
/// `call` of a function event, and counter fields.
#[derive(Default)]
struct Read {
    depth: u32,
    call: Option<u64>,
    counter_fields: Vec<(Box<str>, usize)>,
    counters: Vec<(usize, f64, Option<i64>)>,
    want: Want,
    level: u32,
    in_fields: bool,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum Want {
    #[default]
    Nothing,
    Depth,
    Call,
    Counter(usize),
}

/// A JSON sink that also reads what [`Read`] wants.
struct Tee<'a, 'b> {
    json: JsonSink<'a>,
    read: &'b mut Read,
}

impl Tee<'_, '_> {
    fn take(&mut self) -> Want {
        std::mem::take(&mut self.read.want)
    }
}

impl Sink for Tee<'_, '_> {
    fn scope(&mut self, name: &'static str) {
        self.read.in_fields = name == "fields";
        self.read.level = 0;
        self.json.scope(name);
    }
    fn field(&mut self, name: &str) {
        let r = &mut *self.read;
        r.want = Want::Nothing;
        if r.in_fields && r.level == 1 {
            r.want = match name {
                "depth" => Want::Depth,
                "call" => Want::Call,
                _ => r
                    .counter_fields
                    .iter()
                    .find(|(f, _)| **f == *name)
                    .map_or(Want::Nothing, |&(_, i)| Want::Counter(i)),
            };
        }
        self.json.field(name);
    }
    fn uint(&mut self, v: u64, base: Base, bits: u32) {
        match self.take() {
            Want::Depth => self.read.depth = u32::try_from(v).unwrap_or(u32::MAX),
            Want::Call => self.read.call = Some(v),
            Want::Counter(i) => self
                .read
                .counters
                .push((i, v as f64, i64::try_from(v).ok())),
            Want::Nothing => {}
        }
        self.json.uint(v, base, bits);
    }
    fn sint(&mut self, v: i64, base: Base, bits: u32) {
        match self.take() {
            Want::Depth => self.read.depth = u32::try_from(v).unwrap_or(0),
            Want::Call => self.read.call = u64::try_from(v).ok(),
            Want::Counter(i) => self.read.counters.push((i, v as f64, Some(v))),
            Want::Nothing => {}
        }
        self.json.sint(v, base, bits);
    }
    fn enumeration(&mut self, v: i128, e: &Enum) {
        if let Want::Counter(i) = self.take() {
            self.read
                .counters
                .push((i, v as f64, i64::try_from(v).ok()));
        }
        self.json.enumeration(v, e);
    }
    fn float(&mut self, v: f64) {
        if let Want::Counter(i) = self.take() {
            self.read.counters.push((i, v, None));
        }
        self.json.float(v);
    }
    fn string(&mut self, s: &[u8]) {
        self.take();
        self.json.string(s);
    }
    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, base: Base) {
        self.take();
        self.json.wide(v, signed, bits, base);
    }
    fn begin_struct(&mut self) {
        self.take();
        self.read.level += 1;
        self.json.begin_struct();
    }
    fn end_struct(&mut self) {
        self.read.level = self.read.level.saturating_sub(1);
        self.json.end_struct();
    }
    fn begin_array(&mut self, len: u64) {
        self.take();
        self.read.level += 1;
        self.json.begin_array(len);
    }
    fn item(&mut self, i: u64) {
        self.json.item(i);
    }
    fn end_array(&mut self) {
        self.read.level = self.read.level.saturating_sub(1);
        self.json.end_array();
    }
    fn variant(&mut self, option: &str) {
        self.take();
        self.json.variant(option);
    }
    fn end_variant(&mut self) {
        self.json.end_variant();
    }
}

/// A thread: its process and call stack.
struct Thread {
    pid: i64,
    tid: i64,
    calls: CallStack,
    last_ts: u64,
}

/// What the export knows of an event class: its kind, its name's id (a
/// function's for its entries and exits), the counters reading it.
struct Class {
    kind: Kind,
    name: u32,
    /// A `.close`'s function (its span's name), else `name`.
    function: u32,
    counters: Vec<usize>,
}

/// The async part of a closing function's call's first interval (module
/// docs): its thread and times, until the call shows whether it has more.
struct Held {
    th: usize,
    begin: u64,
    end: u64,
}

struct Exporter<W: Write> {
    out: W,
    line: Vec<u8>,
    first: bool,
    origin: Option<u64>,
    names: Names,
    /// Per trace directory: (pid, name, described).
    processes: Vec<(i64, String, bool)>,
    process_of_dir: HashMap<std::path::PathBuf, usize>,
    threads: ThreadOf,
    thread_of: HashMap<(usize, i64), usize>,
    list: Vec<Thread>,
    classes: Vec<Class>,
    /// By (plan's address, stream class, event class).
    class_of: HashMap<(usize, usize, usize), usize>,
    opts: Options,
    read: Read,
    args: Vec<u8>,
    exit_args: Vec<u8>,
    /// Functions whose calls say when they end (a `tracing` span's
    /// `.close`).
    closing: HashSet<u32>,
    /// Calls of those with a second interval: async, drawn as such.
    async_calls: HashSet<(u32, u64)>,
    /// A closing function's call's first interval's async part (by
    /// function and call), until a second interval or its close.
    held: HashMap<(u32, u64), Held>,
    done: Exported,
}

/// Writes every event `merge` gives (that `opts` selects) as a Chrome JSON
/// trace into `out`; errors as [`crate::output::perfetto::export`]'s.
pub fn export<W: Write>(
    merge: &mut StreamMerge,
    traces: &[TraceDir],
    opts: &Options,
    out: W,
) -> std::io::Result<(Exported, Option<DecodeError>)> {
    let mut x = Exporter {
        out,
        line: Vec::with_capacity(4096),
        first: true,
        origin: None,
        names: Names::default(),
        processes: Vec::new(),
        process_of_dir: HashMap::default(),
        threads: ThreadOf::default(),
        thread_of: HashMap::default(),
        list: Vec::new(),
        classes: Vec::new(),
        class_of: HashMap::default(),
        opts: opts.clone(),
        read: Read::default(),
        args: Vec::new(),
        exit_args: Vec::new(),
        closing: HashSet::default(),
        async_calls: HashSet::default(),
        held: HashMap::default(),
        done: Exported::default(),
    };
    for (i, t) in traces.iter().enumerate() {
        let (pid, name) = process(i, t);
        x.processes.push((pid, name, false));
        x.process_of_dir.insert(t.dir.clone(), i);
        // The functions whose calls close (`tape-tracing`'s spans).
        for e in &t.trace.events {
            if let Kind::Close(f) = kind(&e.name) {
                let id = x.names.id(&f);
                x.closing.insert(id);
            }
        }
    }
    x.out
        .write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
    let failed = run(merge, opts, &mut x)?;
    Ok((x.done, failed))
}

/// Appends `s` as a JSON string.
fn json_str(out: &mut Vec<u8>, s: &str) {
    let mut sink = JsonSink::new(out);
    sink.string(s.as_bytes());
}

impl<W: Write> Exporter<W> {
    /// Writes `self.line` as the next element of `traceEvents`.
    fn flush_line(&mut self) -> std::io::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.out.write_all(b",\n")?;
        } else {
            self.out.write_all(b"\n")?;
        }
        self.out.write_all(&self.line)?;
        self.done.packets += 1;
        self.done.bytes += self.line.len() as u64 + 2;
        Ok(())
    }

    /// Starts an event line: `{"ph":PH,"name":NAME,"pid":P,"tid":T,"ts":US`.
    fn start(&mut self, ph: &str, name: &str, th: usize, ts: u64) {
        let t = &self.list[th];
        let origin = *self.origin.get_or_insert(ts);
        self.line.clear();
        let _ = write!(self.line, "{{\"ph\":\"{ph}\",\"name\":");
        json_str(&mut self.line, name);
        let rel = ts.saturating_sub(origin);
        let _ = write!(
            self.line,
            ",\"pid\":{},\"tid\":{},\"ts\":{}.{:03}",
            t.pid,
            t.tid,
            rel / 1000,
            rel % 1000
        );
    }

    /// The thread of `stream`, its metadata written at its first event.
    fn thread(&mut self, stream: &StreamReader) -> std::io::Result<usize> {
        let p = stream
            .path()
            .parent()
            .and_then(|d| self.process_of_dir.get(d).copied())
            .unwrap_or(0);
        let (tid, name) = self.threads.of(stream);
        // Not said (tid 0): a thread per stream, numbered after the others.
        let key = if tid == 0 { stream_key(stream) } else { tid };
        if let Some(&t) = self.thread_of.get(&(p, key)) {
            return Ok(t);
        }
        let name = if tid == 0 {
            stream
                .path()
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        } else {
            name.to_owned()
        };
        let tid = if tid == 0 {
            i64::try_from(self.list.len()).unwrap_or(0) + 1
        } else {
            tid
        };
        let pid = self.processes[p].0;
        if !self.processes[p].2 {
            self.processes[p].2 = true;
            self.line.clear();
            let _ = write!(
                self.line,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":{pid},\"args\":{{\"name\":"
            );
            let pname = self.processes[p].1.clone();
            json_str(&mut self.line, &pname);
            self.line.extend_from_slice(b"}}");
            self.flush_line()?;
        }
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        );
        json_str(&mut self.line, &name);
        self.line.extend_from_slice(b"}}");
        self.flush_line()?;
        self.list.push(Thread {
            pid,
            tid,
            calls: CallStack::default(),
            last_ts: 0,
        });
        self.done.threads += 1;
        self.thread_of.insert((p, key), self.list.len() - 1);
        Ok(self.list.len() - 1)
    }

    /// The time of an event at `t` on thread `th` (see
    /// [`time`]); the first is the origin.
    fn time(&mut self, th: usize, t: Option<i128>) -> u64 {
        let ts = time(t, &mut self.list[th].last_ts, &mut self.done);
        // Times are after the first event's (the merge gives it first).
        self.origin.get_or_insert(ts);
        ts
    }

    fn exit(&mut self, th: usize, ts: u64, name: u32, fname: &str) -> std::io::Result<()> {
        let depth = self.read.depth;
        while let Some(c) = self.list[th].calls.unexited_before_exit(depth) {
            self.no_exit(th, c)?;
        }
        let mut exit = std::mem::take(&mut self.exit_args);
        exit.clear();
        exit.extend_from_slice(&self.args);
        let mut ret = Vec::new();
        self.list[th].calls.take_ret(name, &mut ret);
        let Some(c) = self.list[th].calls.exit(depth, name) else {
            self.start("i", fname, th, ts);
            self.line
                .extend_from_slice(b",\"s\":\"t\",\"args\":{\"entry_not_in_trace\":true");
            self.scopes("exit", &exit);
            self.scopes("ret", &ret);
            self.line.extend_from_slice(b"}}");
            self.exit_args = exit;
            self.done.no_entry += 1;
            return self.flush_line();
        };
        self.start("X", fname, th, c.ts);
        let dur = ts.saturating_sub(c.ts);
        let _ = write!(
            self.line,
            ",\"dur\":{}.{:03},\"args\":{{",
            dur / 1000,
            dur % 1000
        );
        let empty = self.line.len();
        self.scopes("entry", &c.args);
        self.scopes("exit", &exit);
        self.scopes("ret", &ret);
        if self.line.len() > empty && self.line[empty] == b',' {
            self.line.remove(empty);
        }
        self.line.extend_from_slice(b"}}");
        self.flush_line()?;
        if let Some(call) = c.call {
            if !self.closing.contains(&name) || self.async_calls.contains(&(name, call)) {
                self.async_pair(th, fname, call, c.ts, ts)?;
            } else {
                // A closing function's first interval: its async part
                // waits for the call to show whether it has more.
                self.held.insert(
                    (name, call),
                    Held {
                        th,
                        begin: c.ts,
                        end: ts,
                    },
                );
            }
        }
        self.list[th].calls.recycle(c);
        self.exit_args = exit;
        self.done.slices += 1;
        Ok(())
    }

    /// An interval of async call `call` of `fname` on thread `th`: a
    /// `b`/`e` pair with the call's id (one async track per call).
    fn async_pair(
        &mut self,
        th: usize,
        fname: &str,
        call: u64,
        begin: u64,
        end: u64,
    ) -> std::io::Result<()> {
        for (ph, at) in [("b", begin), ("e", end)] {
            self.start(ph, fname, th, at);
            let _ = write!(self.line, ",\"cat\":\"async\",\"id\":\"{call:#x}\"}}");
            self.flush_line()?;
        }
        self.done.polls += 1;
        Ok(())
    }

    /// Appends `,"NAME":{SCOPES}` when `scopes` is not empty.
    fn scopes(&mut self, name: &str, scopes: &[u8]) {
        if scopes.is_empty() {
            return;
        }
        let _ = write!(self.line, ",\"{name}\":{{");
        self.line.extend_from_slice(scopes);
        self.line.push(b'}');
    }

    /// Call `c` lost its exit: an instant at its entry, marked.
    fn no_exit(&mut self, th: usize, c: OpenCall) -> std::io::Result<()> {
        let fname = self.names.name(c.name).to_owned();
        self.start("i", &fname, th, c.ts);
        self.line
            .extend_from_slice(b",\"s\":\"t\",\"args\":{\"exit_not_in_trace\":true");
        self.scopes("entry", &c.args);
        self.line.extend_from_slice(b"}}");
        self.list[th].calls.recycle(c);
        self.done.no_exit += 1;
        self.flush_line()
    }
}

impl<W: Write> Export for Exporter<W> {
    fn event(&mut self, stream: &mut StreamReader, t: Option<i128>) -> Result<(), Failure> {
        self.done.events += 1;
        let (sc, ec) = stream.class_index().unwrap_or((0, 0));
        let key = (stream.plan() as *const _ as usize, sc, ec);
        let c = match self.class_of.get(&key) {
            Some(&c) => c,
            None => {
                let class_name = stream.class().map_or(String::new(), |c| c.name.clone());
                let k = kind(&class_name);
                let name = match &k {
                    Kind::Entry(f) | Kind::Exit(f) | Kind::Ret(f) => self.names.id(f),
                    Kind::Close(_) | Kind::Other => self.names.id(&class_name),
                };
                let function = match &k {
                    Kind::Close(f) => self.names.id(f),
                    _ => name,
                };
                let counters = (0..self.opts.counters.len())
                    .filter(|&i| (self.opts.counters[i].event)(&class_name))
                    .collect();
                self.classes.push(Class {
                    kind: k,
                    name,
                    function,
                    counters,
                });
                self.class_of.insert(key, self.classes.len() - 1);
                self.classes.len() - 1
            }
        };
        let th = self.thread(stream)?;
        let ts = self.time(th, t);
        let name = self.classes[c].name;
        self.read.counter_fields.clear();
        for &i in &self.classes[c].counters {
            let f: Box<str> = self.opts.counters[i].field.as_str().into();
            self.read.counter_fields.push((f, i));
        }
        self.read.counters.clear();
        self.read.depth = 0;
        self.read.call = None;
        // The event's scopes as members of an object (`"fields":{...}`).
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        let r = stream.emit(&mut Tee {
            json: JsonSink::in_object(&mut args, 0),
            read: &mut self.read,
        });
        self.args = args;
        r.map_err(Failure::Decode)?;
        let fname = self.names.name(name).to_owned();
        match self.classes[c].kind {
            Kind::Entry(_) => {
                while let Some(c) = self.list[th].calls.unexited_before_entry(self.read.depth) {
                    self.no_exit(th, c)?;
                }
                let (depth, call) = (self.read.depth, self.read.call);
                // A second interval of a closing function's call: it is
                // async; its first interval's pair is written now.
                if let Some(h) = call.and_then(|c| self.held.remove(&(name, c))) {
                    let call = call.unwrap_or(0);
                    self.async_calls.insert((name, call));
                    self.async_pair(h.th, &fname, call, h.begin, h.end)?;
                }
                let args = std::mem::take(&mut self.args);
                self.list[th].calls.push(depth, ts, name, call, &args);
                self.args = args;
            }
            Kind::Ret(_) => {
                let args = std::mem::take(&mut self.args);
                self.list[th].calls.set_ret(name, &args);
                self.args = args;
            }
            Kind::Exit(_) => self.exit(th, ts, name, &fname)?,
            Kind::Close(_) | Kind::Other => {
                // The span's call ends: a first interval still held was
                // its only one (a synchronous span: its `X` is enough).
                if let (Kind::Close(_), Some(call)) = (&self.classes[c].kind, self.read.call) {
                    let function = self.classes[c].function;
                    self.held.remove(&(function, call));
                    self.async_calls.remove(&(function, call));
                }
                self.start("i", &fname, th, ts);
                self.line.extend_from_slice(b",\"s\":\"t\",\"args\":{");
                self.line.extend_from_slice(&self.args);
                self.line.extend_from_slice(b"}}");
                self.flush_line()?;
                self.done.instants += 1;
            }
        }
        for i in 0..self.read.counters.len() {
            let (spec, v, exact) = self.read.counters[i];
            let name = self.opts.counters[spec].name.clone();
            self.start("C", &name, th, ts);
            match exact {
                Some(v) => {
                    let _ = write!(self.line, ",\"args\":{{\"value\":{v}}}}}");
                }
                None if v.is_finite() => {
                    let _ = write!(self.line, ",\"args\":{{\"value\":{v:?}}}}}");
                }
                // JSON has no NaN or infinity: a counter cannot show it.
                None => continue,
            }
            self.flush_line()?;
            self.done.counter_values += 1;
        }
        Ok(())
    }

    fn lost(&mut self, stream: &StreamReader, n: u64, t: Option<i128>) -> std::io::Result<()> {
        let th = self.thread(stream)?;
        let ts = self.time(th, t);
        self.start("i", "lost events", th, ts);
        let _ = write!(self.line, ",\"s\":\"t\",\"args\":{{\"count\":{n}}}}}");
        self.done.lost += n;
        self.flush_line()
    }

    /// Calls still open are begun (`B`) and never ended; then the trailer
    /// with the time origin.
    fn finish(&mut self) -> std::io::Result<()> {
        // First intervals still held: their calls' closes are not in the
        // trace (async or not, unknown): drawn as polls, in time order.
        let mut held: Vec<((u32, u64), Held)> = self.held.drain().collect();
        held.sort_by_key(|(k, h)| (h.begin, h.th, *k));
        for ((name, call), h) in held {
            let fname = self.names.name(name).to_owned();
            self.async_pair(h.th, &fname, call, h.begin, h.end)?;
        }
        for th in 0..self.list.len() {
            for c in self.list[th].calls.drain() {
                let fname = self.names.name(c.name).to_owned();
                self.start("B", &fname, th, c.ts);
                self.line.extend_from_slice(b",\"args\":{");
                self.line.extend_from_slice(&c.args);
                self.line.extend_from_slice(b"}}");
                self.flush_line()?;
                self.done.open += 1;
            }
        }
        let origin = self.origin.unwrap_or(0);
        write!(
            self.out,
            "\n],\"otherData\":{{\"tape_time_origin_ns\":\"{origin}\"}}}}\n"
        )?;
        self.out.flush()
    }
}
