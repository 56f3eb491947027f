//! The function_graph view of a trace (`tape graph`): the entries and
//! exits of `#[tape::traced]` functions drawn as ftrace's function_graph
//! tracer draws them (`ftrace.txt`, "function graph tracer"; the layout of
//! the kernel's `trace_functions_graph.c`), per thread where ftrace prints
//! a CPU:
//!
//! ```text
//! # tracer: function_graph
//! #
//! # TID     DURATION                  FUNCTION CALLS
//! # |        |   |                     |   |   |   |
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
//! * A kernel trace beside the program's (`tape record --kernel`): each
//!   `sched_switch` that takes a traced thread off its CPU, or puts it
//!   back, is drawn in that thread's graph as function_graph draws a
//!   context switch on a CPU (`verif_pid`):
//!
//!   ```text
//!    ------------------------------------------
//!    4242)  napper--4242  =>  swapper-0
//!    ------------------------------------------
//!
//!   ```
//!
//!   and a call that was off CPU inside says how long on its closing line:
//!   `} /* off CPU 3081.342 us */` (its duration counts that time, as the
//!   kernel's with `sleep-time` on, its default). A thread put back with no
//!   `sched_switch` into it (a kernel that did not trace one) is back at its
//!   next record. These need every stream in one pass ([`render`]).
//! * Options mirror `trace_options`: `funcgraph-proc` (the `TASK/PID`
//!   column, centred in 14), `funcgraph-abstime` (`seconds.micros |`),
//!   `funcgraph-duration`, `funcgraph-overhead`, `funcgraph-tail` (the
//!   function's name after every `}`); and `set_graph_function` (only
//!   calls under matching functions, drawn from depth 0),
//!   `max_graph_depth` and a thread filter.
//!
//! Lines are printed in the trace's time order across threads, each at the
//! time of the event it is drawn at (a leaf's line at its entry). A
//! thread's calls are all on its stream, so [`render_streams`] draws each
//! stream on a thread of its own and merges the lines by time (the speed,
//! `scripts/graph-speed.sh`: 10 M events in 0.56-0.62 s against
//! babeltrace2's 16-17 s, 27-30×, two streams on two cores: a line is
//! written straight into its stream's output, and a comment of integers
//! and strings decoded with no value tree); [`render`] draws them in one
//! merged pass (past
//! [`STREAM_THREADS`] streams), where a call's entry line waits for its
//! thread's next event (is it a leaf?) and the other threads' lines after
//! it wait in a queue, bounded ([`QUEUE_LIMIT`]: past it, the oldest
//! undecided entry is drawn as `f() {`, what the kernel draws for an entry
//! whose next event is not its exit). Both give the same lines otherwise
//! (tested). Maps are `rustc_hash`'s: the hot loop looks up threads and
//! names at every event, and SipHash's resistance to chosen keys buys
//! nothing against a trace file.

use std::collections::VecDeque;

use crate::output::function::{
    depth_only, duration_text, kind, mark, DepthSink, Kind, Names, ThreadOf, Threads,
};
use std::fmt::Write as _;

/// The most lines held behind an undecided entry before it is decided as
/// not a leaf.
pub const QUEUE_LIMIT: usize = 1 << 16;

/// `set_graph_function`'s test of a function's displayed name.
pub type FunctionFilter = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What to draw (ftrace's `trace_options` for the graph tracer).
#[derive(Clone)]
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
    /// Only the events it keeps (`--filter`: a call whose entry or exit
    /// it drops is drawn as one cut short; none: all).
    pub keep: Option<crate::decode::stream::Keep>,
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
            keep: None,
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
        /// Its other fields as `name=value, ...` (an async poll's call id,
        /// chosen arguments), drawn in the parentheses; empty if none.
        args: &'a str,
    },
    /// A traced function's exit.
    Exit {
        /// The function's displayed name.
        func: &'a str,
        /// The depth its entry had.
        depth: u32,
        /// Its return value (or its own fields, `name=value, ...`), drawn
        /// as it is where funcgraph-retval draws one (`} /* f = 42 */`);
        /// empty if none.
        ret: &'a str,
    },
    /// Any other event: its name and text (`app.net.rx: port=3`).
    Comment(&'a str),
    /// Events the thread lost here.
    Lost(u64),
    /// A task switch on a CPU (the kernel's `sched_switch`): `out` (its
    /// name and thread id) left it for `into`; given to the graph of each
    /// of the two threads.
    Switch {
        /// The thread switched out.
        out: (&'a str, i64),
        /// The thread switched in.
        into: (&'a str, i64),
    },
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
    /// `enter_funcs[depth]`: the open calls, their entry times and how
    /// long each has been off CPU so far.
    open: Vec<Option<(u32, Option<i128>, i128)>>,
    /// Whether it made a traced call: a thread with none has no graph of
    /// its own, and its task switches are not drawn.
    called: bool,
    /// Since when it is off CPU (switched out, not yet back).
    off_since: Option<i128>,
    /// An entry waiting for the thread's next event: its queue slot,
    /// function, depth, time.
    pending: Option<Pending>,
    /// `set_graph_function`: the depth of the matching call this thread is
    /// in, if any.
    under: Option<u32>,
    /// The arguments of the pending entry (see [`Event::Entry`]): one
    /// buffer per thread, reused (a thread has one pending entry at most).
    args: String,
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
    threads: Threads<Thread>,
    /// Function names, interned: a call's entry and exit compare by index.
    names: Names,
    /// Line buffers written out, for the next lines (no allocation a line).
    pool: Vec<String>,
    /// Lines not yet written; `None`: an entry's line still undecided.
    queue: VecDeque<Option<(i128, String)>>,
    /// With [`Graph::keep_keys`]: each line's time and end in the output.
    keys: Option<Vec<(i128, usize)>>,
    /// The slot number of `queue[0]`.
    base: u64,
}

impl Graph {
    /// A renderer with `opts`.
    pub fn new(opts: Options) -> Graph {
        Graph {
            opts,
            threads: Threads::default(),
            names: Names::default(),
            pool: Vec::new(),
            keys: None,
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
        // Each column: shown?, its title, its bar (the kernel's strings).
        let columns: [(bool, String, String); 4] = [
            (
                o.abstime,
                "     TIME       ".into(),
                "      |         ".into(),
            ),
            (true, format!("{:<col$}", " TID"), format!("{:<col$}", " |")),
            (
                o.proc_,
                "  TASK/PID       ".into(),
                "   |    |        ".into(),
            ),
            (o.duration, "  DURATION   ".into(), "   |   |      ".into()),
        ];
        let (mut titles, mut bars) = (String::from("#"), String::from("#"));
        for (_, title, bar) in columns.iter().filter(|c| c.0) {
            titles.push_str(title);
            bars.push_str(bar);
        }
        format!(
            "# tracer: function_graph\n#\n{titles}               FUNCTION CALLS\n\
             {bars}               |   |   |   |\n\n"
        )
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
        let id = match event {
            Event::Entry { func, .. } | Event::Exit { func, .. } => self.id(func),
            _ => u32::MAX,
        };
        self.event_with_id(tid, comm, t, event, id, out);
    }

    /// [`Graph::event`] with the function's index ([`Graph::function_id`])
    /// known: a reader that keeps it per event class looks no name up.
    pub(crate) fn event_with_id(
        &mut self,
        tid: i64,
        comm: &str,
        t: Option<i128>,
        event: Event<'_>,
        id: u32,
        out: &mut String,
    ) {
        if !self.opts.threads.is_empty() && !self.opts.threads.contains(&tid) {
            return;
        }
        if let Event::Switch { out: off, into } = event {
            self.switch(tid, t, off, into, out);
            return;
        }
        // A record of its own: it runs (its switch back, if the kernel
        // traced none).
        self.back_on_cpu(tid, t);
        // The name is drawn only in the task column.
        let proc_ = self.opts.proc_;
        let th = self.thread(tid);
        if proc_ && !comm.is_empty() && th.comm != comm {
            th.comm = comm.to_owned();
            th.prefix.clear();
        }
        let Some(shown) = self.shown(tid, event) else {
            return;
        };
        // The undecided entry: is this its exit?
        if let Some(p) = self.thread(tid).pending.take() {
            match (event, shown) {
                (
                    Event::Exit {
                        depth: raw, ret, ..
                    },
                    Some(depth),
                ) if id == p.func && depth == p.depth => {
                    self.leaf(&p, tid, t, raw, ret, out);
                    return;
                }
                _ => self.decide_nested(tid, p, out),
            }
        }
        match (event, shown) {
            (Event::Entry { args, .. }, Some(depth)) => self.entry(tid, t, args, depth, id, out),
            (Event::Exit { .. }, Some(depth)) => self.exit(tid, t, event, depth, id, out),
            (Event::Comment(text), _) => self.comment(tid, t, text, out),
            // The kernel's `CPU:%d [LOST %lu EVENTS]`.
            (Event::Lost(n), _) => {
                self.put(None, t.unwrap_or(i128::MIN), out, |_, line| {
                    let _ = writeln!(line, "TID:{tid} [LOST {n} EVENTS]");
                });
            }
            (Event::Entry { .. } | Event::Exit { .. }, None) | (Event::Switch { .. }, _) => {}
        }
    }

    /// What is drawn of `event`, first: `None` if nothing (a call the
    /// options hide is not an event of the graph, as the kernel does not
    /// record it, so it does not decide whether the call before it is a
    /// leaf), else the depth it is drawn at (`None` for a line without
    /// one).
    fn shown(&mut self, tid: i64, event: Event<'_>) -> Option<Option<u32>> {
        match event {
            Event::Entry { func, depth, .. } => self.shown_depth(tid, func, depth, true).map(Some),
            Event::Exit { func, depth, .. } => match self.shown_depth(tid, func, depth, false) {
                Some(d) => Some(Some(d)),
                None => {
                    self.after_exit(tid, depth);
                    None
                }
            },
            Event::Comment(_) => {
                if self.opts.functions.is_some() && self.thread(tid).under.is_none() {
                    return None;
                }
                Some(None)
            }
            Event::Lost(_) | Event::Switch { .. } => Some(None),
        }
    }

    /// The undecided entry `p` ended by its exit (at `raw` depth,
    /// returning `ret`) at `t`: the call is drawn as a leaf (`f();` with
    /// its duration).
    fn leaf(
        &mut self,
        p: &Pending,
        tid: i64,
        t: Option<i128>,
        raw: u32,
        ret: &str,
        out: &mut String,
    ) {
        let d = t.zip(p.t).map(|(t1, t0)| t1 - t0);
        let th = self.thread(tid);
        th.depth = i64::from(p.depth) - 1;
        if let Some(slot) = th.open.get_mut(p.depth as usize) {
            *slot = None;
        }
        self.after_exit(tid, raw);
        self.put(Some(p.slot), p.t.unwrap_or(i128::MIN), out, |g, line| {
            g.leaf_line(line, tid, p, d, ret);
        });
    }

    /// An entry at `depth`: undecided (a leaf or not) until the thread's
    /// next event, its line's place kept in the queue.
    fn entry(
        &mut self,
        tid: i64,
        t: Option<i128>,
        args: &str,
        depth: u32,
        id: u32,
        out: &mut String,
    ) {
        let slot = self.base + self.queue.len() as u64;
        self.queue.push_back(None);
        let th = self.thread(tid);
        th.called = true;
        th.pending = Some(Pending {
            slot,
            func: id,
            depth,
            t,
        });
        th.args.clear();
        th.args.push_str(args);
        if self.queue.len() > QUEUE_LIMIT {
            self.decide_oldest(out);
        }
    }

    /// An exit (`event`) at `depth` whose entry was decided: `}`, with the
    /// call's duration if its entry is the one open at that depth, the
    /// function's name where it is not (or with --tail), and its return
    /// value and time off CPU.
    fn exit(
        &mut self,
        tid: i64,
        t: Option<i128>,
        event: Event<'_>,
        depth: u32,
        id: u32,
        out: &mut String,
    ) {
        let Event::Exit {
            func,
            depth: raw,
            ret,
        } = event
        else {
            return;
        };
        let th = self.thread(tid);
        th.depth = i64::from(depth) - 1;
        let entered = th.open.get_mut(depth as usize).and_then(Option::take);
        let (matched, d, off) = match &entered {
            Some((f, t0, off)) if *f == id => (true, t.zip(*t0).map(|(t1, t0)| t1 - t0), *off),
            _ => (false, None, 0),
        };
        self.after_exit(tid, raw);
        self.put(None, t.unwrap_or(i128::MIN), out, |g, line| {
            g.prologue(line, tid, t);
            g.duration(line, d);
            indent(line, depth);
            if !ret.is_empty() {
                line.push_str("} /* ");
                line.push_str(func);
                line.push_str(" = ");
                line.push_str(ret);
                line.push_str(" */");
            } else if matched && !g.opts.tail {
                line.push('}');
            } else {
                line.push_str("} /* ");
                line.push_str(func);
                line.push_str(" */");
            }
            if off > 0 {
                let _ = write!(line, " /* off CPU {}.{:03} us */", off / 1000, off % 1000);
            }
            line.push('\n');
        });
    }

    /// Another event: a comment at the thread's depth.
    fn comment(&mut self, tid: i64, t: Option<i128>, text: &str, out: &mut String) {
        let depth = self.thread(tid).depth;
        self.put(None, t.unwrap_or(i128::MIN), out, |g, line| {
            g.prologue(line, tid, t);
            g.fill_duration(line);
            if depth > 0 {
                indent(line, u32::try_from(depth + 1).unwrap_or(u32::MAX));
            }
            line.push_str("/* ");
            line.push_str(text.trim_end_matches('\n'));
            line.push_str(" */\n");
        });
    }

    /// Ends the trace: undecided entries are drawn open (`f() {`), every
    /// line is appended to `out`.
    pub fn finish(&mut self, out: &mut String) {
        let mut tids: Vec<i64> = self.threads.iter().map(|(tid, _)| tid).collect();
        tids.sort_unstable();
        for tid in tids {
            if let Some(p) = self.thread(tid).pending.take() {
                self.decide_nested(tid, p, out);
            }
        }
        self.flush(out);
    }

    /// The depth a call is drawn at, if it is drawn (`set_graph_function`,
    /// `max_graph_depth`); keeps the thread's `under` current at entries.
    fn shown_depth(&mut self, tid: i64, func: &str, depth: u32, entry: bool) -> Option<u32> {
        let Graph { opts, threads, .. } = self;
        let depth = match &opts.functions {
            None => depth,
            Some(set) => match threads.get(tid).under {
                Some(base) if depth >= base => depth - base,
                _ if entry && set(func) => {
                    threads.get(tid).under = Some(depth);
                    0
                }
                _ => return None,
            },
        };
        if opts.max_depth > 0 && depth >= opts.max_depth {
            return None;
        }
        Some(depth)
    }

    /// After an exit at (raw) depth `raw`: leaves a `set_graph_function`
    /// call that ends there.
    fn after_exit(&mut self, tid: i64, raw: u32) {
        let th = self.thread(tid);
        if th.under.is_some_and(|base| raw <= base) {
            th.under = None;
        }
    }

    fn decide_nested(&mut self, tid: i64, p: Pending, out: &mut String) {
        self.put(Some(p.slot), p.t.unwrap_or(i128::MIN), out, |g, line| {
            g.prologue(line, tid, p.t);
            g.fill_duration(line);
            indent(line, p.depth);
            line.push_str(g.names.name(p.func));
            line.push('(');
            line.push_str(&g.threads.get(tid).args);
            line.push_str(") {\n");
        });
        let th = self.thread(tid);
        th.depth = i64::from(p.depth);
        let d = p.depth as usize;
        // A damaged depth keeps no state (`function::MAX_CALL_DEPTH`).
        if p.depth <= crate::output::function::MAX_CALL_DEPTH {
            if th.open.len() <= d {
                th.open.resize(d + 1, None);
            }
            th.open[d] = Some((p.func, p.t, 0));
        }
    }

    /// A task switch concerning thread `tid` (switched out of its CPU, or
    /// into one) at `t`: drawn in its graph, as function_graph draws a
    /// context switch; its time off CPU counted for its open calls.
    fn switch(
        &mut self,
        tid: i64,
        t: Option<i128>,
        off: (&str, i64),
        into: (&str, i64),
        out: &mut String,
    ) {
        if !self.thread(tid).called {
            return;
        }
        // A switch inside a call: the call has lines inside, no leaf.
        if let Some(p) = self.thread(tid).pending.take() {
            self.decide_nested(tid, p, out);
        }
        if tid == off.1 && tid != into.1 {
            self.back_on_cpu(tid, t);
            self.thread(tid).off_since = t;
        } else {
            self.back_on_cpu(tid, t);
        }
        let w = self.opts.tid_width.max(1);
        self.put(None, t.unwrap_or(i128::MIN), out, |_, line| {
            line.push_str(" ------------------------------------------\n");
            let _ = write!(line, " {tid:>w$}) ");
            proc_column(line, off.0, off.1);
            line.push_str(" => ");
            proc_column(line, into.0, into.1);
            line.push_str("\n ------------------------------------------\n\n");
        });
    }

    /// Thread `tid` runs at `t`: the time since it was switched out, if it
    /// was, is off CPU for each of its open calls.
    fn back_on_cpu(&mut self, tid: i64, t: Option<i128>) {
        let th = self.thread(tid);
        let Some(since) = th.off_since.take() else {
            return;
        };
        let Some(t) = t else {
            return;
        };
        let d = (t - since).max(0);
        for (_, _, off) in th.open.iter_mut().flatten() {
            *off += d;
        }
    }

    /// The queue is too long behind an undecided entry: decide it.
    fn decide_oldest(&mut self, out: &mut String) {
        let slot = self.base;
        let tid = self
            .threads
            .iter()
            .find(|(_, th)| th.pending.as_ref().is_some_and(|p| p.slot == slot))
            .map(|(tid, _)| tid);
        if let Some(tid) = tid {
            let p = self.thread(tid).pending.take();
            if let Some(p) = p {
                self.decide_nested(tid, p, out);
            }
        }
    }

    /// The one line of the call `p` that ended `d` later, returning `ret`
    /// (empty: nothing shown).
    fn leaf_line(&mut self, line: &mut String, tid: i64, p: &Pending, d: Option<i128>, ret: &str) {
        self.prologue(line, tid, p.t);
        self.duration(line, d);
        indent(line, p.depth);
        line.push_str(self.names.name(p.func));
        line.push('(');
        line.push_str(&self.threads.get(tid).args);
        if ret.is_empty() {
            line.push_str(");\n");
        } else {
            line.push_str("); /* = ");
            line.push_str(ret);
            line.push_str(" */\n");
        }
    }

    /// Thread `tid`'s state (made at its first event).
    fn thread(&mut self, tid: i64) -> &mut Thread {
        self.threads.get(tid)
    }

    /// The index of function `name`.
    fn id(&mut self, name: &str) -> u32 {
        self.names.id(name)
    }

    /// The index of function `name`, for [`Graph::event_with_id`].
    pub(crate) fn function_id(&mut self, name: &str) -> u32 {
        self.names.id(name)
    }

    /// `print_graph_prologue`: the time, thread and task columns.
    fn prologue(&mut self, s: &mut String, tid: i64, t: Option<i128>) {
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
        let th = self.thread(tid);
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

    /// Draws a line with `draw`, at time `key`: into the undecided entry's
    /// `slot`, or (`None`) after every line before it. Straight into `out`
    /// when no line waits before it (the usual case: a thread's events
    /// decide its entries at once), else into a buffer in the queue.
    fn put(
        &mut self,
        slot: Option<u64>,
        key: i128,
        out: &mut String,
        draw: impl FnOnce(&mut Graph, &mut String),
    ) {
        let direct = match slot {
            None => self.queue.is_empty(),
            Some(s) => s == self.base && self.queue.len() == 1,
        };
        if direct {
            draw(self, out);
            if let Some(keys) = &mut self.keys {
                keys.push((key, out.len()));
            }
            if slot.is_some() {
                self.queue.pop_front();
            }
            self.base += 1;
            return;
        }
        let mut line = self
            .pool
            .pop()
            .unwrap_or_else(|| String::with_capacity(128));
        draw(self, &mut line);
        match slot {
            None => self.queue.push_back(Some((key, line))),
            Some(slot) => self.fill(slot, key, line, out),
        }
    }

    /// Fills the undecided slot `slot` and writes what became ready.
    fn fill(&mut self, slot: u64, key: i128, line: String, out: &mut String) {
        if let Some(at) = slot.checked_sub(self.base) {
            if let Some(s) = self.queue.get_mut(at as usize) {
                *s = Some((key, line));
            }
        }
        self.flush_ready(out);
    }

    fn flush_ready(&mut self, out: &mut String) {
        while let Some(Some(_)) = self.queue.front() {
            if let Some(Some((key, line))) = self.queue.pop_front() {
                self.write(key, line, out);
            }
            self.base += 1;
        }
    }

    fn flush(&mut self, out: &mut String) {
        while let Some(line) = self.queue.pop_front() {
            if let Some((key, line)) = line {
                self.write(key, line, out);
            }
            self.base += 1;
        }
    }

    /// Writes a line out (and its key, when kept), keeping its buffer for
    /// a later line.
    fn write(&mut self, key: i128, mut line: String, out: &mut String) {
        out.push_str(&line);
        if let Some(keys) = &mut self.keys {
            keys.push((key, out.len()));
        }
        if self.pool.len() < 1024 {
            line.clear();
            self.pool.push(line);
        }
    }

    /// Keeps, for every line written from now on, its time (the event it
    /// is drawn at: a call's entry for its line) and where it ends in the
    /// output: what merges the graphs of several streams drawn apart.
    pub fn keep_keys(&mut self) {
        self.keys = Some(Vec::new());
    }

    /// The keys kept since the last call ([`Graph::keep_keys`]).
    pub fn take_keys(&mut self) -> Vec<(i128, usize)> {
        self.keys
            .as_mut()
            .map(|k| std::mem::replace(k, Vec::with_capacity(k.len())))
            .unwrap_or_default()
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

/// The thread ids of the streams at `paths` (the `tid` of each one's first
/// packet context), for the width of the thread column.
pub fn thread_ids(streams: &mut [crate::decode::stream::StreamReader]) -> Vec<i64> {
    let mut ids = Vec::new();
    for s in streams {
        s.keep_packet_values();
        if s.peek().is_err() {
            continue;
        }
        if let Some(v) = s.packet_value.as_ref() {
            let (_, tid) = crate::output::event_text::task(Some(v), &[]);
            ids.push(tid);
        }
    }
    ids
}

/// What an event class is to the graph, found at its first event.
#[derive(Clone, Copy)]
struct ClassInfo {
    /// A traced function's entry, exit or return value, or (`None`) a
    /// comment.
    role: Option<Role>,
    /// The function's index in the graph ([`Graph::function_id`]) and in
    /// [`Feed::funcs`].
    id: u32,
    /// For a class whose fields are the one `depth` (the function
    /// tracer's `fn_call`), its byte order: read from the event's bytes
    /// with no decoding.
    raw: Option<crate::ByteOrder>,
    /// A comment decoded by a [`crate::output::event_text::FlatSink`] (no value tree).
    flat: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Entry,
    Exit,
    Ret,
}

/// What the graph keeps about the classes and threads it has seen, and
/// how it hands one decoded event to a [`Graph`].
#[derive(Default)]
struct Feed {
    /// By trace plan (its address), by stream class and event
    /// ([`crate::decode::stream::StreamReader::class_index`]): no hashing per event.
    classes: Vec<(usize, Vec<Vec<Option<ClassInfo>>>)>,
    /// The functions' displayed names, by index.
    funcs: Vec<Box<str>>,
    threads: ThreadOf,
    text: String,
    flat: crate::output::event_text::FlatSink,
    /// Per thread, the return value recorded last and its function's
    /// index (`u32::MAX`: none waiting), for the exit that follows it: a
    /// buffer reused from call to call.
    rets: Vec<(i64, u32, String)>,
}

impl Feed {
    /// What the class of the event `stream` found is to the graph (`None`:
    /// no class).
    #[inline]
    fn info(
        &mut self,
        g: &mut Graph,
        stream: &crate::decode::stream::StreamReader,
    ) -> Option<ClassInfo> {
        let (sc, ev) = stream.class_index()?;
        let plan = std::ptr::from_ref(stream.plan()) as usize;
        let known = self
            .classes
            .iter()
            .find(|(p, _)| *p == plan)
            .and_then(|(_, table)| table.get(sc)?.get(ev));
        match known {
            Some(Some(info)) => Some(*info),
            _ => self.learn(g, stream, plan, sc, ev),
        }
    }

    /// [`Feed::info`] at a class's first event.
    #[cold]
    fn learn(
        &mut self,
        g: &mut Graph,
        stream: &crate::decode::stream::StreamReader,
        plan: usize,
        sc: usize,
        ev: usize,
    ) -> Option<ClassInfo> {
        let class = stream.class()?;
        let (role, func) = match kind(&class.name) {
            Kind::Entry(f) => (Some(Role::Entry), Some(f)),
            Kind::Exit(f) => (Some(Role::Exit), Some(f)),
            Kind::Ret(f) => (Some(Role::Ret), Some(f)),
            // A span's close draws nothing (its exit ended its interval).
            Kind::Close(_) => return None,
            Kind::Other => (None, None),
        };
        let id = match func {
            Some(f) => {
                let id = g.function_id(&f);
                if self.funcs.len() <= id as usize {
                    self.funcs.resize(id as usize + 1, "".into());
                }
                self.funcs[id as usize] = f.into();
                id
            }
            None => u32::MAX,
        };
        let info = ClassInfo {
            role,
            id,
            raw: depth_only(class, stream.plan().byte_order),
            flat: role.is_none()
                && crate::output::event_text::flat_class(class, stream.has_context()),
        };
        let at = match self.classes.iter().position(|(p, _)| *p == plan) {
            Some(at) => at,
            None => {
                self.classes.push((plan, Vec::new()));
                self.classes.len() - 1
            }
        };
        let table = &mut self.classes[at].1;
        if table.len() <= sc {
            table.resize_with(sc + 1, Vec::new);
        }
        if table[sc].len() <= ev {
            table[sc].resize(ev + 1, None);
        }
        table[sc][ev] = Some(info);
        Some(info)
    }

    /// Decodes the event `stream` found (at `t`) into `g`.
    fn event(
        &mut self,
        g: &mut Graph,
        stream: &mut crate::decode::stream::StreamReader,
        t: Option<i128>,
        out: &mut String,
    ) -> Result<(), crate::decode::DecodeError> {
        let Some(info) = self.info(g, stream) else {
            return stream.emit(&mut crate::decode::plan::Discard);
        };
        let id = info.id;
        match info.role {
            Some(Role::Ret) => {
                let mut sink = DepthSink::with_text(std::mem::take(&mut self.text), "", true);
                stream.emit(&mut sink)?;
                let (tid, _) = self.threads.of(stream);
                let at = match self.rets.iter().position(|r| r.0 == tid) {
                    Some(at) => at,
                    None => {
                        self.rets.push((tid, u32::MAX, String::new()));
                        self.rets.len() - 1
                    }
                };
                let r = &mut self.rets[at];
                r.1 = id;
                std::mem::swap(&mut r.2, &mut sink.extra);
                self.text = sink.extra;
            }
            Some(role) => {
                let exit = role == Role::Exit;
                let quick = info.raw.and_then(|order| {
                    let b: [u8; 4] = stream.emit_raw(4)?.try_into().ok()?;
                    Some(match order {
                        crate::ByteOrder::Big => u32::from_be_bytes(b),
                        crate::ByteOrder::Little => u32::from_le_bytes(b),
                    })
                });
                let depth = match quick {
                    Some(depth) => {
                        self.text.clear();
                        depth
                    }
                    None => {
                        let skip = if exit { "call" } else { "" };
                        let text = std::mem::take(&mut self.text);
                        let mut sink = DepthSink::with_text(text, skip, false);
                        let decoded = stream.emit(&mut sink);
                        self.text = sink.extra;
                        decoded?;
                        sink.depth
                    }
                };
                let depth = crate::output::function::checked_depth(stream, depth)?;
                let (tid, comm) = self.threads.of(stream);
                let func = &self.funcs[id as usize];
                let mut extra = self.text.as_str();
                if exit && !self.rets.is_empty() {
                    // The return value recorded just before, for this function.
                    if let Some(r) = self.rets.iter_mut().find(|r| r.0 == tid && r.1 != u32::MAX) {
                        if r.1 == id && extra.is_empty() {
                            extra = &r.2;
                        }
                        r.1 = u32::MAX;
                    }
                }
                let event = if exit {
                    Event::Exit {
                        func,
                        depth,
                        ret: extra,
                    }
                } else {
                    Event::Entry {
                        func,
                        depth,
                        args: extra,
                    }
                };
                g.event_with_id(tid, comm, t, event, id, out);
            }
            None if info.flat => {
                self.text.clear();
                let mut format = None;
                if let Some(class) = stream.class() {
                    self.text.push_str(&class.name);
                    format = Some(class.id);
                }
                self.text.push_str(": ");
                self.flat.clear();
                stream.emit(&mut self.flat)?;
                let formats = &stream.plan().formats;
                let format = format.and_then(|id| formats.get(id));
                crate::output::event_text::write_flat(&mut self.text, format, &self.flat);
                let (tid, comm) = self.threads.of(stream);
                g.event_with_id(tid, comm, t, Event::Comment(&self.text), u32::MAX, out);
            }
            None => {
                let Some(class) = stream.class().cloned() else {
                    return stream.emit(&mut crate::decode::plan::Discard);
                };
                let mut sink = crate::decode::plan::ValueSink::default();
                stream.emit(&mut sink)?;
                if class.name == "sched_switch" {
                    if let Some((off, into)) = crate::output::event_text::switch_of(&sink.scopes) {
                        let e = Event::Switch {
                            out: (&off.0, off.1),
                            into: (&into.0, into.1),
                        };
                        g.event(off.1, "", t, e, out);
                        if into.1 != off.1 {
                            g.event(into.1, "", t, e, out);
                        }
                        return Ok(());
                    }
                }
                let (comm, tid) =
                    crate::output::event_text::task(stream.packet_value.as_ref(), &sink.scopes);
                self.text.clear();
                self.text.push_str(&class.name);
                self.text.push_str(": ");
                let formats = &stream.plan().formats;
                crate::output::event_text::write_text(
                    &mut self.text,
                    formats.get(class.id),
                    &sink.scopes,
                );
                let comm = comm.to_owned();
                g.event(tid, &comm, t, Event::Comment(&self.text), out);
            }
        }
        Ok(())
    }
}

/// Draws the events of `merge` (time order across its streams) with
/// `opts`, handing the text to `each` in pieces (stop with `false`); the
/// events lost. (One thread; [`render_streams`] draws each stream on its
/// own thread.)
pub fn render(
    merge: &mut crate::merge::StreamMerge,
    opts: Options,
    shown: impl crate::decode::stream::Shown,
    mut each: impl FnMut(&str) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    use crate::merge::Step;
    merge.keep_packet_values();
    let mut g = Graph::new(opts);
    let mut out = g.header();
    let mut feed = Feed::default();
    let mut lost = 0u64;
    while let Some(step) = merge.next() {
        match step? {
            Step::Event(stream, t) => {
                let shows = stream.class().is_some_and(|c| shown.class(c, t));
                let kept = |s: &mut crate::decode::stream::StreamReader| {
                    g.opts.keep.as_ref().is_none_or(|k| k(s))
                };
                if !(shows && shown.event(stream) && kept(stream)) {
                    if let Err(e) = stream.emit(&mut crate::decode::plan::Discard) {
                        merge.fail(e);
                    }
                    continue;
                }
                if let Err(e) = feed.event(&mut g, stream, t, &mut out) {
                    merge.fail(e);
                }
            }
            Step::Lost(stream, n, t) => {
                lost += n;
                let tid = crate::output::event_text::task(stream.packet_value.as_ref(), &[]).1;
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

/// The most streams [`render_streams`] draws on a thread each (more go
/// through [`render`]).
pub const STREAM_THREADS: usize = 64;

/// A piece of one stream's graph: lines, and each one's time and end.
struct Piece {
    text: String,
    keys: Vec<(i128, usize)>,
}

/// Draws each of `streams` on a thread of its own (a thread's calls are on
/// its stream: the graph of each is independent of the others') and
/// merges their lines by time, each line at the time of the event it is
/// drawn at (as [`render`] orders them; a line of equal time comes first
/// from the stream listed first). No line waits behind another thread's
/// undecided entry, so no entry is decided early (`QUEUE_LIMIT`).
/// Hands the text to `each` in pieces (stop with `false`); the events lost.
pub fn render_streams(
    streams: Vec<crate::decode::stream::StreamReader>,
    opts: &Options,
    mut each: impl FnMut(&str) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    use std::sync::mpsc::sync_channel;
    if !each(&Graph::new(opts.clone()).header()) {
        return Ok(0);
    }
    std::thread::scope(|scope| {
        let mut pieces = Vec::new();
        let mut workers = Vec::new();
        for mut stream in streams {
            let (tx, rx) = sync_channel::<Piece>(4);
            let o = opts.clone();
            workers.push(
                scope.spawn(move || -> Result<u64, crate::decode::DecodeError> {
                    draw_stream(&mut stream, o, |p| tx.send(p).is_ok())
                }),
            );
            pieces.push(rx);
        }
        // Per stream: its current piece and the next line in it.
        struct Head {
            piece: Piece,
            line: usize,
            from: usize,
        }
        let mut heads: Vec<Option<Head>> = pieces
            .iter()
            .map(|rx| {
                rx.recv().ok().map(|piece| Head {
                    piece,
                    line: 0,
                    from: 0,
                })
            })
            .collect();
        let mut order = std::collections::BinaryHeap::new();
        for (i, h) in heads.iter().enumerate() {
            if let Some(h) = h {
                if let Some(&(k, _)) = h.piece.keys.first() {
                    order.push(std::cmp::Reverse((k, i)));
                }
            }
        }
        let mut out = String::with_capacity(1 << 20);
        let mut stopped = false;
        while let Some(std::cmp::Reverse((_, i))) = order.pop() {
            let Some(h) = heads[i].as_mut() else { continue };
            // Every line of this stream before the next of any other, in
            // one copy.
            let bound = order.peek().map(|std::cmp::Reverse(b)| *b);
            let mut end = h.piece.keys[h.line].1;
            h.line += 1;
            while let Some(&(k, e)) = h.piece.keys.get(h.line) {
                if bound.is_some_and(|b| (k, i) > b) {
                    break;
                }
                end = e;
                h.line += 1;
            }
            out.push_str(&h.piece.text[h.from..end]);
            h.from = end;
            if h.line == h.piece.keys.len() {
                // The next non-empty piece of this stream, if any.
                heads[i] = loop {
                    match pieces[i].recv() {
                        Ok(piece) if piece.keys.is_empty() => continue,
                        Ok(piece) => {
                            break Some(Head {
                                piece,
                                line: 0,
                                from: 0,
                            })
                        }
                        Err(_) => break None,
                    }
                };
            }
            if let Some(h) = &heads[i] {
                order.push(std::cmp::Reverse((h.piece.keys[h.line].0, i)));
            }
            if out.len() >= 1 << 20 {
                if !each(&out) {
                    stopped = true;
                    break;
                }
                out.clear();
            }
        }
        drop(pieces);
        if !stopped {
            each(&out);
        }
        let mut lost = 0;
        let mut failed = None;
        for w in workers {
            match w.join().expect("a graph worker panicked") {
                Ok(n) => lost += n,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(lost),
        }
    })
}

/// One stream's graph, in pieces handed to `send` (stop with `false`).
fn draw_stream(
    stream: &mut crate::decode::stream::StreamReader,
    opts: Options,
    mut send: impl FnMut(Piece) -> bool,
) -> Result<u64, crate::decode::DecodeError> {
    use crate::decode::stream::Next;
    stream.keep_packet_values();
    let mut g = Graph::new(opts);
    g.keep_keys();
    let mut feed = Feed::default();
    // A piece is sent once past PIECE: room for the event that crosses
    // it, so that the buffer does not grow (and copy) for its last lines.
    const PIECE: usize = 1 << 18;
    let mut out = String::with_capacity(PIECE + (1 << 16));
    let mut lost = 0;
    loop {
        match stream.peek()? {
            Next::End => break,
            Next::Lost(n, t) => {
                stream.take_lost();
                lost += n;
                let tid = feed.threads.of(stream).0;
                g.event(tid, "", t, Event::Lost(n), &mut out);
            }
            Next::Event(_) if !g.opts.keep.as_ref().is_none_or(|k| k(stream)) => {
                stream.emit(&mut crate::decode::plan::Discard)?;
            }
            Next::Event(t) => feed.event(&mut g, stream, t, &mut out)?,
        }
        if out.len() >= PIECE {
            let piece = Piece {
                text: std::mem::replace(&mut out, String::with_capacity(PIECE + (1 << 16))),
                keys: g.take_keys(),
            };
            if !send(piece) {
                return Ok(lost);
            }
        }
    }
    g.finish(&mut out);
    let keys = g.take_keys();
    send(Piece { text: out, keys });
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines `events` draw: (tid, time ns, event).
    fn draw(events: &[(i64, i128, Event<'_>)]) -> String {
        let mut g = Graph::new(Options {
            tid_width: 4,
            ..Options::default()
        });
        let mut out = String::new();
        for (tid, t, e) in events {
            g.event(*tid, "", Some(*t), *e, &mut out);
        }
        g.finish(&mut out);
        out
    }

    const NAP: Event<'static> = Event::Entry {
        func: "naps::nap",
        depth: 0,
        args: "",
    };
    const NAPPED: Event<'static> = Event::Exit {
        func: "naps::nap",
        depth: 0,
        ret: "",
    };
    const OUT: Event<'static> = Event::Switch {
        out: ("napper-0", 4242),
        into: ("swapper/1", 0),
    };
    const IN: Event<'static> = Event::Switch {
        out: ("swapper/1", 0),
        into: ("napper-0", 4242),
    };

    #[test]
    fn a_task_switch_inside_a_call_is_drawn_and_its_time_off_cpu_said() {
        let marker = |a: &str, b: &str| {
            format!(
                " ------------------------------------------\n 4242) {a} => {b}\n \
                 ------------------------------------------\n\n"
            )
        };
        let (away, back) = (
            marker(" napper--4242 ", "  swapper-0   "),
            marker("  swapper-0   ", " napper--4242 "),
        );
        // (events, the lines)
        type Case<'a> = (Vec<(i64, i128, Event<'a>)>, String);
        let cases: Vec<Case> = vec![
            // out and back in, traced: off CPU from one to the other
            (
                vec![(4242, 0, NAP), (4242, 10, OUT), (4242, 3_000_020, IN), (4242, 3_000_100, NAPPED)],
                format!(
                    " 4242)               |  naps::nap() {{\n{away}{back} 4242) # 3000.100 us |  }} /* off CPU 3000.010 us */\n"
                ),
            ),
            // back in untraced (this kernel): back at its next own record
            (
                vec![(4242, 0, NAP), (4242, 10, OUT), (4242, 2_000_010, NAPPED)],
                format!(" 4242)               |  naps::nap() {{\n{away} 4242) # 2000.010 us |  }} /* off CPU 2000.000 us */\n"),
            ),
            // a thread with no traced call has no graph: its switches are not drawn
            (
                vec![(7, 5, Event::Switch { out: ("other", 7), into: ("swapper/0", 0) })],
                String::new(),
            ),
            // a call with no switch inside stays a leaf, no off-CPU note
            (
                vec![(4242, 0, NAP), (4242, 500, NAPPED)],
                " 4242)   0.500 us    |  naps::nap();\n".to_owned(),
            ),
        ];
        for (events, want) in cases {
            let got = draw(&events);
            let body = got
                .split_once("|   |   |   |\n\n")
                .map_or(got.as_str(), |(_, b)| b);
            assert_eq!(body, want, "{events:?}");
        }
    }
}
