//! The function_graph view of a trace (`tape graph`): the entries and
//! exits of `#[tape::traced]` functions drawn as ftrace's function_graph
//! tracer draws them (`ftrace.txt`, "function graph tracer"; the layout of
//! the kernel's `trace_functions_graph.c`), per thread where ftrace prints
//! a CPU:
//!
//! ```text
//! # tracer: function_graph
//! #
//! #     TID  DURATION                  FUNCTION CALLS
//! #     |     |   |                     |   |   |   |
//!
//!  4242)               |  app::serve() {
//!  4242)   1.382 us    |    app::parse();
//!  4242)               |    app::io::Store::put() {
//!  4242)               |      /* app.net.tx: port=3 len=64 */
//!  4242) + 12.011 us   |    }
//!  4242) ! 150.210 us  |  }
//! ```
//!
//! * A call whose next event on its thread is its own exit is a leaf: one
//!   line, `f();`, with its duration. Otherwise `f() {` at the entry and
//!   `}` at the exit with the duration; `} /* f */` when the entry is not
//!   in the trace (overwritten, or before the trace began), with the
//!   duration column empty (the kernel's exit event carries its call time;
//!   tape's does not). An entry never exited stays open, as the kernel
//!   draws it.
//! * Durations are `trace_print_graph_duration`'s: microseconds with as
//!   many nanosecond digits as fit in 7 characters, then ` us`; the
//!   overhead mark before it is the kernel's `trace_find_mark`: `+` over
//!   10 µs, `!` over 100 µs, `#` over 1 ms, `*` over 10 ms, `@` over 100
//!   ms, `$` over 1 s.
//! * Other events print as comments (`/* name: text */`, the text their
//!   read-time format gives), indented as the kernel indents
//!   `trace_printk` comments (`print_graph_comment`: two more than the
//!   current depth, none at depth 0).
//! * Options mirror `trace_options`: `funcgraph-proc` (the `TASK/PID`
//!   column, centred in 14), `funcgraph-abstime` (`seconds.micros |`),
//!   `funcgraph-duration`, `funcgraph-overhead`, `funcgraph-tail` (the
//!   function's name after every `}`); and `set_graph_function` (only
//!   calls under matching functions, drawn from depth 0),
//!   `max_graph_depth` and a thread filter.
//!
//! Lines are printed in the trace's time order across threads. A call's
//! entry line waits for the thread's next event (is it a leaf?); lines of
//! other threads after it wait in a queue until it is decided, bounded
//! ([`QUEUE_LIMIT`]: past it, the oldest undecided entry is drawn as
//! `f() {`, which is what the kernel draws for an entry whose next event
//! is not its exit).

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;

/// The most lines held behind an undecided entry before it is decided as
/// not a leaf.
pub const QUEUE_LIMIT: usize = 1 << 16;

/// `set_graph_function`'s test of a function's displayed name.
pub type FunctionFilter = Box<dyn Fn(&str) -> bool>;

/// What to draw (ftrace's `trace_options` for the graph tracer).
pub struct Options {
    /// `funcgraph-proc`: the `TASK/PID` column.
    pub proc_: bool,
    /// `funcgraph-abstime`: the time of each line.
    pub abstime: bool,
    /// `funcgraph-duration`: the `DURATION` column.
    pub duration: bool,
    /// `funcgraph-overhead`: the marks before long durations.
    pub overhead: bool,
    /// `funcgraph-tail`: `} /* f */` on every closing line.
    pub tail: bool,
    /// `set_graph_function`: only calls under a function it matches (by
    /// the function's displayed name), drawn from depth 0.
    pub functions: Option<FunctionFilter>,
    /// `max_graph_depth`: calls at this depth or deeper are not drawn (0:
    /// no limit).
    pub max_depth: u32,
    /// Only these threads (none: all).
    pub threads: Vec<i64>,
    /// Digits of the thread id column (ftrace sizes its CPU column to the
    /// largest CPU number).
    pub tid_width: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            proc_: false,
            abstime: false,
            duration: true,
            overhead: true,
            tail: false,
            functions: None,
            max_depth: 0,
            threads: Vec::new(),
            tid_width: 1,
        }
    }
}

/// One event as the graph sees it.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A traced function's entry at `depth`.
    Entry {
        /// The function's displayed name (`app::io::read`).
        func: &'a str,
        /// Its depth among the thread's traced calls.
        depth: u32,
    },
    /// A traced function's exit.
    Exit {
        /// The function's displayed name.
        func: &'a str,
        /// The depth its entry had.
        depth: u32,
    },
    /// Any other event: its name and text (`app.net.rx: port=3`).
    Comment(&'a str),
    /// Events the thread lost here.
    Lost(u64),
}

/// A thread, as the kernel's per-CPU graph data.
#[derive(Default)]
struct Thread {
    comm: String,
    /// The thread and task columns of its lines (they do not change while
    /// the name does not).
    prefix: String,
    /// `cpu_data->depth`: where comments indent.
    depth: i64,
    /// `enter_funcs[depth]`: the open calls and their entry times.
    open: Vec<Option<(u32, Option<i128>)>>,
    /// An entry waiting for the thread's next event: its queue slot,
    /// function, depth, time.
    pending: Option<Pending>,
    /// `set_graph_function`: the depth of the matching call this thread is
    /// in, if any.
    under: Option<u32>,
}

struct Pending {
    slot: u64,
    func: u32,
    depth: u32,
    t: Option<i128>,
}

/// The function_graph renderer: events in, lines out, in order.
pub struct Graph {
    opts: Options,
    threads: HashMap<i64, Thread>,
    /// Function names, interned: a call's entry and exit compare by index.
    names: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    /// Line buffers written out, for the next lines (no allocation a line).
    pool: Vec<String>,
    /// Lines not yet written; `None`: an entry's line still undecided.
    queue: VecDeque<Option<String>>,
    /// The slot number of `queue[0]`.
    base: u64,
}

impl Graph {
    /// A renderer with `opts`.
    pub fn new(opts: Options) -> Graph {
        Graph {
            opts,
            threads: HashMap::default(),
            names: Vec::new(),
            ids: HashMap::default(),
            pool: Vec::new(),
            queue: VecDeque::new(),
            base: 0,
        }
    }

    /// The two header lines (with `# tracer: function_graph` and `#`
    /// before them, a blank line after, as the `trace` file has them). The
    /// kernel's ` CPU` heads a column of ` %*d) `; `TID` heads one as wide
    /// as the thread ids.
    pub fn header(&self) -> String {
        let o = &self.opts;
        let col = o.tid_width.max(1) + 3;
        let mut s = String::from("# tracer: function_graph\n#\n#");
        if o.abstime {
            s.push_str("     TIME       ");
        }
        let _ = write!(s, "{:<col$}", " TID");
        if o.proc_ {
            s.push_str("  TASK/PID       ");
        }
        if o.duration {
            s.push_str("  DURATION   ");
        }
        s.push_str("               FUNCTION CALLS\n#");
        if o.abstime {
            s.push_str("      |         ");
        }
        let _ = write!(s, "{:<col$}", " |");
        if o.proc_ {
            s.push_str("   |    |        ");
        }
        if o.duration {
            s.push_str("   |   |      ");
        }
        s.push_str("               |   |   |   |\n\n");
        s
    }

    /// Takes `event` of thread `tid` (named `comm`) at time `t` (ns since
    /// the epoch); lines that are ready are appended to `out`.
    pub fn event(
        &mut self,
        tid: i64,
        comm: &str,
        t: Option<i128>,
        event: Event<'_>,
        out: &mut String,
    ) {
        if !self.opts.threads.is_empty() && !self.opts.threads.contains(&tid) {
            return;
        }
        let th = self.threads.entry(tid).or_default();
        if !comm.is_empty() && th.comm != comm {
            th.comm = comm.to_owned();
            th.prefix.clear();
        }
        // What is drawn, first: a call the options hide is not an event
        // of the graph (as the kernel does not record it), so it does not
        // decide whether the call before it is a leaf.
        let shown = match event {
            Event::Entry { func, depth } => match self.shown_depth(tid, func, depth, true) {
                Some(d) => Some(d),
                None => return,
            },
            Event::Exit { func, depth } => match self.shown_depth(tid, func, depth, false) {
                Some(d) => Some(d),
                None => {
                    self.after_exit(tid, depth);
                    return;
                }
            },
            Event::Comment(_) => {
                if self.threads.get(&tid).is_some_and(|th| self.hidden(th)) {
                    return;
                }
                None
            }
            Event::Lost(_) => None,
        };
        let id = match event {
            Event::Entry { func, .. } | Event::Exit { func, .. } => self.id(func),
            _ => u32::MAX,
        };
        // The undecided entry: is this its exit?
        if let Some(p) = self.threads.get_mut(&tid).and_then(|th| th.pending.take()) {
            if let (Event::Exit { depth: raw, .. }, Some(depth)) = (event, shown) {
                if id == p.func && depth == p.depth {
                    let d = t.zip(p.t).map(|(t1, t0)| t1 - t0);
                    let line = self.leaf_line(tid, p.t, p.func, p.depth, d);
                    let th = self.threads.get_mut(&tid).expect("present");
                    th.depth = i64::from(p.depth) - 1;
                    if let Some(slot) = th.open.get_mut(p.depth as usize) {
                        *slot = None;
                    }
                    self.after_exit(tid, raw);
                    self.fill(p.slot, line, out);
                    return;
                }
            }
            self.decide_nested(tid, p, out);
        }
        match (event, shown) {
            (Event::Entry { .. }, Some(depth)) => {
                let slot = self.base + self.queue.len() as u64;
                self.queue.push_back(None);
                let th = self.threads.get_mut(&tid).expect("present");
                th.pending = Some(Pending {
                    slot,
                    func: id,
                    depth,
                    t,
                });
                if self.queue.len() > QUEUE_LIMIT {
                    self.decide_oldest(out);
                }
            }
            (Event::Exit { func, depth: raw }, Some(depth)) => {
                let th = self.threads.get_mut(&tid).expect("present");
                th.depth = i64::from(depth) - 1;
                let entered = th.open.get_mut(depth as usize).and_then(Option::take);
                let (matched, d) = match &entered {
                    Some((f, t0)) if *f == id => (true, t.zip(*t0).map(|(t1, t0)| t1 - t0)),
                    _ => (false, None),
                };
                let mut line = self.prologue(tid, t);
                self.duration(&mut line, d);
                indent(&mut line, depth);
                if matched && !self.opts.tail {
                    line.push_str("}\n");
                } else {
                    let _ = writeln!(line, "}} /* {func} */");
                }
                self.after_exit(tid, raw);
                self.push(line, out);
            }
            (Event::Comment(text), _) => {
                let depth = self.threads.get(&tid).map_or(0, |th| th.depth);
                let mut line = self.prologue(tid, t);
                self.fill_duration(&mut line);
                if depth > 0 {
                    for _ in 0..(depth + 1) * 2 {
                        line.push(' ');
                    }
                }
                let _ = writeln!(line, "/* {} */", text.trim_end_matches('\n'));
                self.push(line, out);
            }
            // The kernel's `CPU:%d [LOST %lu EVENTS]`.
            (Event::Lost(n), _) => self.push(format!("TID:{tid} [LOST {n} EVENTS]\n"), out),
            (Event::Entry { .. } | Event::Exit { .. }, None) => {}
        }
    }

    /// Ends the trace: undecided entries are drawn open (`f() {`), every
    /// line is appended to `out`.
    pub fn finish(&mut self, out: &mut String) {
        let mut tids: Vec<i64> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            if let Some(p) = self.threads.get_mut(&tid).and_then(|th| th.pending.take()) {
                self.decide_nested(tid, p, out);
            }
        }
        self.flush(out);
    }

    /// The depth a call is drawn at, if it is drawn (`set_graph_function`,
    /// `max_graph_depth`); keeps the thread's `under` current at entries.
    fn shown_depth(&mut self, tid: i64, func: &str, depth: u32, entry: bool) -> Option<u32> {
        let max = self.opts.max_depth;
        let th = self.threads.get_mut(&tid).expect("present");
        let depth = match &self.opts.functions {
            None => depth,
            Some(set) => match th.under {
                Some(base) if depth >= base => depth - base,
                _ if entry && set(func) => {
                    th.under = Some(depth);
                    0
                }
                _ => return None,
            },
        };
        if max > 0 && depth >= max {
            return None;
        }
        Some(depth)
    }

    /// After an exit at (raw) depth `raw`: leaves a `set_graph_function`
    /// call that ends there.
    fn after_exit(&mut self, tid: i64, raw: u32) {
        if let Some(th) = self.threads.get_mut(&tid) {
            if th.under.is_some_and(|base| raw <= base) {
                th.under = None;
            }
        }
    }

    /// Whether a thread's events are outside every `set_graph_function`
    /// call (comments too).
    fn hidden(&self, th: &Thread) -> bool {
        self.opts.functions.is_some() && th.under.is_none()
    }

    fn decide_nested(&mut self, tid: i64, p: Pending, out: &mut String) {
        let mut line = self.prologue(tid, p.t);
        self.fill_duration(&mut line);
        indent(&mut line, p.depth);
        line.push_str(&self.names[p.func as usize]);
        line.push_str("() {\n");
        let th = self.threads.get_mut(&tid).expect("present");
        th.depth = i64::from(p.depth);
        let d = p.depth as usize;
        if th.open.len() <= d {
            th.open.resize(d + 1, None);
        }
        th.open[d] = Some((p.func, p.t));
        self.fill(p.slot, line, out);
    }

    /// The queue is too long behind an undecided entry: decide it.
    fn decide_oldest(&mut self, out: &mut String) {
        let slot = self.base;
        let tid = self
            .threads
            .iter()
            .find(|(_, th)| th.pending.as_ref().is_some_and(|p| p.slot == slot))
            .map(|(&tid, _)| tid);
        if let Some(tid) = tid {
            let p = self.threads.get_mut(&tid).and_then(|th| th.pending.take());
            if let Some(p) = p {
                self.decide_nested(tid, p, out);
            }
        }
    }

    fn leaf_line(
        &mut self,
        tid: i64,
        t: Option<i128>,
        func: u32,
        depth: u32,
        d: Option<i128>,
    ) -> String {
        let mut line = self.prologue(tid, t);
        self.duration(&mut line, d);
        indent(&mut line, depth);
        line.push_str(&self.names[func as usize]);
        line.push_str("();\n");
        line
    }

    /// The index of function `name`.
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.into());
        self.ids.insert(name.into(), i);
        i
    }

    /// `print_graph_prologue`: the time, thread and task columns, in a
    /// line buffer from the pool.
    fn prologue(&mut self, tid: i64, t: Option<i128>) -> String {
        let mut s = self
            .pool
            .pop()
            .unwrap_or_else(|| String::with_capacity(128));
        if self.opts.abstime {
            match t {
                Some(ns) => {
                    let us = ns.div_euclid(1000);
                    let _ = write!(
                        s,
                        "{:>5}.{:06} |  ",
                        us.div_euclid(1_000_000),
                        us.rem_euclid(1_000_000)
                    );
                }
                None => s.push_str("    ?.?????? |  "),
            }
        }
        let (w, proc_) = (self.opts.tid_width.max(1), self.opts.proc_);
        let th = self.threads.entry(tid).or_default();
        if th.prefix.is_empty() {
            let _ = write!(th.prefix, " {tid:>w$}) ");
            if proc_ {
                let comm = if th.comm.is_empty() {
                    "<...>"
                } else {
                    th.comm.as_str()
                };
                let mut col = String::new();
                proc_column(&mut col, comm, tid);
                th.prefix.push_str(&col);
                th.prefix.push_str(" | ");
            }
        }
        s.push_str(&th.prefix);
        s
    }

    /// `print_graph_duration` with a value (or, without one, the empty
    /// column).
    fn duration(&self, s: &mut String, d: Option<i128>) {
        if !self.opts.duration {
            return;
        }
        let Some(d) = d.filter(|d| *d >= 0) else {
            self.fill_duration(s);
            return;
        };
        let d = d as u128;
        if self.opts.overhead {
            s.push(mark(d));
            s.push(' ');
        } else {
            s.push_str("  ");
        }
        duration_text(s, d);
        s.push_str("|  ");
    }

    /// `print_graph_duration(.., FLAGS_FILL_FULL)`.
    fn fill_duration(&self, s: &mut String) {
        if self.opts.duration {
            s.push_str("              |  ");
        }
    }

    /// Appends a ready line (after every line before it).
    fn push(&mut self, line: String, out: &mut String) {
        if self.queue.is_empty() {
            out.push_str(&line);
            self.recycle(line);
            self.base += 1;
        } else {
            self.queue.push_back(Some(line));
        }
    }

    /// Fills the undecided slot `slot` and writes what became ready.
    fn fill(&mut self, slot: u64, line: String, out: &mut String) {
        if let Some(at) = slot.checked_sub(self.base) {
            if let Some(s) = self.queue.get_mut(at as usize) {
                *s = Some(line);
            }
        }
        self.flush_ready(out);
    }

    fn flush_ready(&mut self, out: &mut String) {
        while let Some(Some(_)) = self.queue.front() {
            if let Some(Some(line)) = self.queue.pop_front() {
                out.push_str(&line);
                self.recycle(line);
            }
            self.base += 1;
        }
    }

    /// Keeps a written line's buffer for a later line.
    fn recycle(&mut self, mut line: String) {
        if self.pool.len() < 1024 {
            line.clear();
            self.pool.push(line);
        }
    }

    fn flush(&mut self, out: &mut String) {
        while let Some(line) = self.queue.pop_front() {
            if let Some(line) = line {
                out.push_str(&line);
            }
            self.base += 1;
        }
    }
}

/// `TRACE_GRAPH_INDENT` (2) spaces per depth.
fn indent(s: &mut String, depth: u32) {
    const SPACES: &str = "                                                                ";
    let mut n = depth as usize * 2;
    while n > 0 {
        let k = n.min(SPACES.len());
        s.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// `print_graph_proc`: `comm-pid` (comm cut to 7 bytes) centred in 14.
fn proc_column(s: &mut String, comm: &str, tid: i64) {
    let mut end = comm.len().min(7);
    while !comm.is_char_boundary(end) {
        end -= 1;
    }
    let text = format!("{}-{tid}", &comm[..end]);
    let spaces = 14usize.saturating_sub(text.len());
    for _ in 0..spaces / 2 {
        s.push(' ');
    }
    s.push_str(&text);
    for _ in 0..spaces - spaces / 2 {
        s.push(' ');
    }
}

/// Appends `v` in decimal (the duration columns' hot path: no
/// formatter).
fn push_decimal(s: &mut String, mut v: u128) {
    let mut digits = [0u8; 40];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &c in &digits[at..] {
        s.push(char::from(c));
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
pub fn duration_text(s: &mut String, d: u128) {
    let usecs = d / 1000;
    let rem = (d % 1000) as u32;
    let before = s.len();
    push_decimal(s, usecs);
    let mut len = s.len() - before;
    if len < 7 {
        // snprintf(nsecs_str, min(5, 8 - len), "%03lu"): at most 7 - len
        // of the three digits.
        let digits = [
            b'0' + (rem / 100) as u8,
            b'0' + (rem / 10 % 10) as u8,
            b'0' + (rem % 10) as u8,
        ];
        let keep = (7 - len).min(3);
        s.push('.');
        for &c in &digits[..keep] {
            s.push(char::from(c));
        }
        len += keep + 1;
    }
    s.push_str(" us ");
    for _ in len..8 {
        s.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ];
        for &(ns, m, text) in cases {
            let mut s = String::new();
            duration_text(&mut s, ns);
            assert_eq!((mark(ns), s.as_str()), (m, text), "{ns} ns");
        }
    }
}

/// What an event class is to the graph: a traced function's entry or exit
/// (its displayed name), or anything else (a comment).
#[derive(Clone)]
pub(crate) enum Kind {
    Entry(String),
    Exit(String),
    Other,
}

/// The kind of a class named `name` with the function tracer's class:
/// `fn.app.io.read.entry` is the entry of `app::io::read`.
pub(crate) fn kind(name: &str) -> Kind {
    let Some(rest) = name.strip_prefix("fn.") else {
        return Kind::Other;
    };
    let display = |f: &str| f.replace('.', "::");
    if let Some(f) = rest.strip_suffix(".entry") {
        Kind::Entry(display(f))
    } else if let Some(f) = rest.strip_suffix(".exit") {
        Kind::Exit(display(f))
    } else {
        Kind::Other
    }
}

/// The thread of a stream's current packet (its context's `tid` and
/// `thread_name`, as tape writes them), found once per packet.
#[derive(Default)]
pub(crate) struct ThreadOf {
    /// By stream (its path's address): packet number, tid, name.
    known: HashMap<usize, (u64, i64, String)>,
}

impl ThreadOf {
    /// The thread of `stream`'s packet.
    pub(crate) fn of(&mut self, stream: &crate::fast::FastStream) -> (i64, &str) {
        let key = stream.path().as_os_str().as_encoded_bytes().as_ptr() as usize;
        let packet = stream.packet_times().0;
        let e = self
            .known
            .entry(key)
            .or_insert((u64::MAX, 0, String::new()));
        if e.0 != packet {
            let (comm, tid) = crate::ftrace::task(stream.packet_value.as_ref(), &[]);
            *e = (packet, tid, comm.to_owned());
        }
        (e.1, e.2.as_str())
    }
}

/// A sink that keeps only the payload's top-level `depth` (a traced
/// function's events have no other field): no value tree per event.
#[derive(Default)]
pub(crate) struct DepthSink {
    in_fields: bool,
    level: u32,
    want: bool,
    /// The depth read (0 if none).
    pub(crate) depth: u32,
}

impl crate::plan::Sink for DepthSink {
    fn scope(&mut self, name: &'static str) {
        self.in_fields = name == "fields";
        self.level = 0;
    }
    fn field(&mut self, name: &str) {
        self.want = self.in_fields && self.level == 1 && name == "depth";
    }
    fn uint(&mut self, v: u64, _: crate::Base, _: u32) {
        if std::mem::take(&mut self.want) {
            self.depth = u32::try_from(v).unwrap_or(u32::MAX);
        }
    }
    fn sint(&mut self, v: i64, _: crate::Base, _: u32) {
        if std::mem::take(&mut self.want) {
            self.depth = u32::try_from(v).unwrap_or(0);
        }
    }
    fn enumeration(&mut self, _: i128, _: &crate::Enum) {
        self.want = false;
    }
    fn float(&mut self, _: f64) {
        self.want = false;
    }
    fn string(&mut self, _: &[u8]) {
        self.want = false;
    }
    fn wide(&mut self, _: &[u8], _: bool, _: u32, _: crate::Base) {
        self.want = false;
    }
    fn begin_struct(&mut self) {
        self.level += 1;
        self.want = false;
    }
    fn end_struct(&mut self) {
        self.level = self.level.saturating_sub(1);
    }
    fn begin_array(&mut self, _: u64) {
        self.want = false;
    }
    fn item(&mut self, _: u64) {}
    fn end_array(&mut self) {}
    fn variant(&mut self, _: &str) {
        self.want = false;
    }
    fn end_variant(&mut self) {}
}

/// The thread ids of the streams at `paths` (the `tid` of each one's first
/// packet context), for the width of the thread column.
pub fn thread_ids(streams: &mut [crate::fast::FastStream]) -> Vec<i64> {
    let mut ids = Vec::new();
    for s in streams {
        s.keep_packet_values();
        if s.peek().is_err() {
            continue;
        }
        if let Some(v) = s.packet_value.as_ref() {
            let (_, tid) = crate::ftrace::task(Some(v), &[]);
            ids.push(tid);
        }
    }
    ids
}

/// Draws the events of `merge` (time order across its streams) with
/// `opts`, handing the text to `each` in pieces (stop with `false`); the
/// events lost.
pub fn render(
    merge: &mut crate::fast::FastMerge,
    opts: Options,
    shown: impl crate::fast::Shown,
    mut each: impl FnMut(&str) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    use crate::fast::{Step, ValueSink};
    merge.keep_packet_values();
    let mut g = Graph::new(opts);
    let mut out = g.header();
    let mut kinds: HashMap<usize, Kind> = HashMap::default();
    let mut threads = ThreadOf::default();
    let mut lost = 0u64;
    let mut text = String::new();
    while let Some(step) = merge.next() {
        match step? {
            Step::Event(stream, t) => {
                let Some(class) = stream.class().cloned() else {
                    let _ = stream.emit(&mut crate::plan::Discard);
                    continue;
                };
                if !(shown.class(&class, t) && shown.event(stream)) {
                    if let Err(e) = stream.emit(&mut crate::plan::Discard) {
                        merge.fail(e);
                    }
                    continue;
                }
                let k = kinds
                    .entry(std::sync::Arc::as_ptr(&class) as usize)
                    .or_insert_with(|| kind(&class.name));
                if let Kind::Entry(f) | Kind::Exit(f) = &*k {
                    let mut sink = DepthSink::default();
                    if let Err(e) = stream.emit(&mut sink) {
                        merge.fail(e);
                        continue;
                    }
                    let (tid, comm) = threads.of(stream);
                    let event = if matches!(k, Kind::Entry(_)) {
                        Event::Entry {
                            func: f,
                            depth: sink.depth,
                        }
                    } else {
                        Event::Exit {
                            func: f,
                            depth: sink.depth,
                        }
                    };
                    g.event(tid, comm, t, event, &mut out);
                } else {
                    let mut sink = ValueSink::default();
                    if let Err(e) = stream.emit(&mut sink) {
                        merge.fail(e);
                        continue;
                    }
                    let (comm, tid) =
                        crate::ftrace::task(stream.packet_value.as_ref(), &sink.scopes);
                    text.clear();
                    text.push_str(&class.name);
                    text.push_str(": ");
                    let formats = &stream.plan().formats;
                    crate::ftrace::write_text(&mut text, formats.get(class.id), &sink.scopes);
                    let comm = comm.to_owned();
                    g.event(tid, &comm, t, Event::Comment(&text), &mut out);
                }
            }
            Step::Lost(stream, n, t) => {
                lost += n;
                let tid = crate::ftrace::task(stream.packet_value.as_ref(), &[]).1;
                g.event(tid, "", t, Event::Lost(n), &mut out);
            }
        }
        if out.len() >= 1 << 20 {
            if !each(&out) {
                return Ok(lost);
            }
            out.clear();
        }
    }
    g.finish(&mut out);
    each(&out);
    Ok(lost)
}
