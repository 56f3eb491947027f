//! The function profile of a trace (`tape profile`): ftrace's
//! `function_profile_enabled` and its `trace_stat/function<cpu>` files,
//! computed at read time from the entries and exits of `#[tape::traced]`
//! functions, for the whole process or per thread.
//!
//! ```text
//!   Function                Hit    Time            Avg             s^2             Self            p50             p99             Max
//!   --------                ---    ----            ---             ---             ----            ---             ---             ---
//!   app::serve::request       4    0.852 us        0.213 us        0.000 us        0.311 us        0.150 us        0.471 us        0.471 us
//! ```
//!
//! * **Hit, Time, Avg, s^2** are the kernel's (`function_stat_show`):
//!   calls, total time (children included: `graph-time`), average, and
//!   the sample variance `(n·Σx² − (Σx)²) / (n·(n−1))` in µs² printed as
//!   the kernel prints it (its unit reads `us`). A call counts at its exit,
//!   when its entry is in the trace (an entry never exited and an exit
//!   whose entry was overwritten are not counted, as the kernel counts at
//!   return with the call time the return carries).
//! * Beyond the kernel: **Self** (the time not spent in traced callees:
//!   ftrace's `graph-time` off), and **p50, p99, Max** of the call
//!   durations. Max is exact; the percentiles come from a log-linear
//!   histogram of 128 steps per power of two, so each is the lower bound
//!   of its step, within 1/128 (0.8 %) below the true value, in bounded
//!   memory whatever the number of calls.
//! * **Off CPU**, with a kernel trace beside the program's (`tape record
//!   --kernel`): the time its calls spent switched out (asleep or
//!   preempted), children included, as Time counts it ([`OffCpu`]: each
//!   thread's intervals off CPU, from the kernel's `sched_switch`es; one
//!   ends at the switch back, or, where the kernel traced none, at the
//!   thread's next record).
//! * Names are printed whole (the kernel cuts them at 30 characters:
//!   `--ftrace` does that, with the kernel's four columns only), rows
//!   sorted by total time, highest first (as the kernel sorts with the
//!   graph tracer), or by another column.

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;

use crate::output::function::duration_text;

/// Steps per power of two of the duration histogram.
const STEPS: u32 = 128;

/// The durations of one function's calls.
#[derive(Default, Clone)]
pub struct Stat {
    /// Calls counted.
    pub hits: u64,
    /// Their total duration, ns.
    pub time: u128,
    /// The sum of their squares, ns².
    pub time_squared: u128,
    /// Their total time outside traced callees, ns.
    pub self_time: u128,
    /// The longest, ns.
    pub max: u64,
    /// Their total time off CPU (children included), ns.
    pub off: u128,
    /// Calls per histogram step ([`step`]).
    histogram: Vec<u64>,
}

/// The histogram step of a duration: exact below [`STEPS`] ns, then
/// [`STEPS`] steps per power of two.
fn step(ns: u64) -> usize {
    if ns < u64::from(STEPS) {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros(); // >= 7
    let sub = (ns >> (e - 7)) & u64::from(STEPS - 1);
    ((e - 6) * STEPS) as usize + sub as usize
}

/// The smallest duration of step `i`.
fn step_floor(i: usize) -> u64 {
    let i = i as u64;
    let steps = u64::from(STEPS);
    if i < steps {
        return i;
    }
    let e = i / steps + 6;
    let sub = i % steps;
    (steps + sub) << (e - 7)
}

impl Stat {
    /// Counts a call of `ns` of which `self_ns` outside traced callees.
    pub fn add(&mut self, ns: u64, self_ns: u64) {
        self.hits += 1;
        self.time += u128::from(ns);
        self.time_squared += u128::from(ns) * u128::from(ns);
        self.self_time += u128::from(self_ns);
        self.max = self.max.max(ns);
        let s = step(ns);
        if self.histogram.len() <= s {
            self.histogram.resize(s + 1, 0);
        }
        self.histogram[s] += 1;
    }

    /// Adds the calls of `o` (the same function, counted elsewhere).
    pub fn merge(&mut self, o: &Stat) {
        self.hits += o.hits;
        self.time += o.time;
        self.time_squared += o.time_squared;
        self.self_time += o.self_time;
        self.off += o.off;
        self.max = self.max.max(o.max);
        if self.histogram.len() < o.histogram.len() {
            self.histogram.resize(o.histogram.len(), 0);
        }
        for (a, b) in self.histogram.iter_mut().zip(&o.histogram) {
            *a += b;
        }
    }

    /// The average, ns (the kernel's integer division).
    pub fn avg(&self) -> u128 {
        self.time.checked_div(u128::from(self.hits)).unwrap_or(0)
    }

    /// The kernel's s², in the unit it prints (ns² / 1000, shown by
    /// `trace_print_graph_duration` as µs²).
    pub fn s2(&self) -> u128 {
        let n = u128::from(self.hits);
        let denom = n * n.saturating_sub(1) * 1000;
        if denom == 0 {
            return 0;
        }
        (n * self.time_squared).saturating_sub(self.time * self.time) / denom
    }

    /// The `q`-quantile (0..=1) of the durations: the floor of its
    /// histogram step (the longest, exact, for the last rank).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.hits == 0 {
            return 0;
        }
        let rank = ((q * self.hits as f64).ceil() as u64).clamp(1, self.hits);
        if rank == self.hits {
            return self.max;
        }
        let mut seen = 0;
        for (i, n) in self.histogram.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return step_floor(i).min(self.max);
            }
        }
        self.max
    }
}

/// The column rows are sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Calls.
    Hit,
    /// Total time (the kernel's order).
    Time,
    /// Average.
    Avg,
    /// Self time.
    SelfTime,
    /// Longest call.
    Max,
    /// 99th percentile.
    P99,
    /// Name, ascending.
    Name,
}

/// An open call: its function (index), entry time (ns), the time spent
/// in traced callees so far, and its thread's time off CPU at its entry.
type Open = (u32, i128, u64, i128);

/// One thread's calls: its open calls by depth, its functions' stats by
/// function index.
#[derive(Default)]
struct ThreadCalls {
    open: Vec<Option<Open>>,
    stats: Vec<Stat>,
}

/// The profile being gathered: per thread, per function (interned: a
/// call costs no string hashing or copying).
pub struct Profile {
    per_thread: bool,
    /// Whether calls were timed off CPU (a kernel trace was read).
    off_cpu: bool,
    names: crate::output::function::Names,
    threads: crate::output::function::Threads<ThreadCalls>,
}

impl Profile {
    /// An empty profile; `per_thread` keeps threads apart.
    pub fn new(per_thread: bool) -> Profile {
        Profile {
            per_thread,
            off_cpu: false,
            names: crate::output::function::Names::default(),
            threads: crate::output::function::Threads::default(),
        }
    }

    /// The index of function `name` (added if new).
    pub fn function(&mut self, name: &str) -> u32 {
        self.names.id(name)
    }

    /// A traced function's entry on thread `tid` at `t` (ns).
    pub fn entry(&mut self, tid: i64, func: &str, depth: u32, t: i128) {
        let f = self.function(func);
        self.entry_of(tid, f, depth, t);
    }

    /// A traced function's exit.
    pub fn exit(&mut self, tid: i64, func: &str, depth: u32, t: i128) {
        let f = self.function(func);
        self.exit_of(tid, f, depth, t);
    }

    /// [`Profile::entry`] of function index `f`.
    pub fn entry_of(&mut self, tid: i64, f: u32, depth: u32, t: i128) {
        self.entry_off(tid, f, depth, t, 0);
    }

    /// [`Profile::entry_of`], the thread having been off CPU `off` ns so
    /// far ([`OffCpu`]).
    fn entry_off(&mut self, tid: i64, f: u32, depth: u32, t: i128, off: i128) {
        if depth > crate::output::function::MAX_CALL_DEPTH {
            return; // a damaged depth: no state for it (see there)
        }
        let th = self.threads.get(tid);
        let d = depth as usize;
        if th.open.len() <= d {
            th.open.resize(d + 1, None);
        }
        th.open[d] = Some((f, t, 0, off));
        // Deeper calls left open (their exits lost) end here.
        th.open.truncate(d + 1);
    }

    /// [`Profile::exit`] of function index `f`.
    pub fn exit_of(&mut self, tid: i64, f: u32, depth: u32, t: i128) {
        self.exit_off(tid, f, depth, t, 0);
    }

    /// [`Profile::exit_of`], the thread having been off CPU `off` ns so
    /// far ([`OffCpu`]).
    fn exit_off(&mut self, tid: i64, f: u32, depth: u32, t: i128, off: i128) {
        let th = self.threads.get(tid);
        let d = depth as usize;
        let Some(Some((g, t0, children, off0))) = th.open.get_mut(d).map(Option::take) else {
            return;
        };
        if g != f || t < t0 {
            return;
        }
        let ns = u64::try_from(t - t0).unwrap_or(u64::MAX);
        if let Some(Some((_, _, parent, _))) = d.checked_sub(1).and_then(|p| th.open.get_mut(p)) {
            *parent = parent.saturating_add(ns);
        }
        let f = f as usize;
        if th.stats.len() <= f {
            th.stats.resize(f + 1, Stat::default());
        }
        th.stats[f].add(ns, ns.saturating_sub(children));
        th.stats[f].off += u128::try_from(off - off0).unwrap_or(0);
    }

    /// Adds the calls counted in `o` (another part of the same trace).
    pub fn absorb(&mut self, o: Profile) {
        self.off_cpu |= o.off_cpu;
        for (tid, th) in o.threads.iter() {
            for (f, st) in th.stats.iter().enumerate() {
                if st.hits == 0 {
                    continue;
                }
                let g = self.names.id(o.names.name(f as u32)) as usize;
                let mine = self.threads.get(tid);
                if mine.stats.len() <= g {
                    mine.stats.resize(g + 1, Stat::default());
                }
                mine.stats[g].merge(st);
            }
        }
    }

    /// The rows: (thread or 0, function, stat), sorted by `by` (per
    /// thread first with `per_thread`).
    pub fn rows(&self, by: SortBy) -> Vec<(i64, &str, Stat)> {
        let mut merged: HashMap<(i64, usize), Stat> = HashMap::default();
        for (tid, th) in self.threads.iter() {
            let tid = if self.per_thread { tid } else { 0 };
            for (f, st) in th.stats.iter().enumerate() {
                if st.hits > 0 {
                    merged.entry((tid, f)).or_default().merge(st);
                }
            }
        }
        let mut v: Vec<(i64, &str, Stat)> = merged
            .into_iter()
            .map(|((tid, f), st)| (tid, self.names.name(f as u32), st))
            .collect();
        let key = |r: &(i64, &str, Stat)| -> u128 {
            match by {
                SortBy::Hit => u128::from(r.2.hits),
                SortBy::Time => r.2.time,
                SortBy::Avg => r.2.avg(),
                SortBy::SelfTime => r.2.self_time,
                SortBy::Max => u128::from(r.2.max),
                SortBy::P99 => u128::from(r.2.quantile(0.99)),
                SortBy::Name => 0,
            }
        };
        v.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| key(b).cmp(&key(a)))
                .then_with(|| a.1.cmp(b.1))
        });
        v
    }

    /// The table: the kernel's columns (names cut at 30, as
    /// `function_stat_show`) with `ftrace`, else every column, names
    /// whole.
    pub fn table(&self, by: SortBy, ftrace: bool) -> String {
        let rows = self.rows(by);
        let mut out = String::new();
        let mut last_thread = None;
        let width = if ftrace {
            30
        } else {
            rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(30)
        };
        for (tid, func, s) in &rows {
            let (tid, func) = (*tid, *func);
            if last_thread != Some(tid) {
                if self.per_thread {
                    if last_thread.is_some() {
                        out.push('\n');
                    }
                    let _ = writeln!(out, "thread {tid}:");
                }
                header(&mut out, width, ftrace, self.off_cpu);
                last_thread = Some(tid);
            }
            let name: String = if ftrace {
                func.chars().take(30).collect()
            } else {
                func.to_owned()
            };
            let _ = write!(out, "  {name:<width$}  {:>10}", s.hits);
            out.push_str("    ");
            duration_text(&mut out, s.time);
            out.push_str("    ");
            duration_text(&mut out, s.avg());
            out.push_str("    ");
            duration_text(&mut out, s.s2());
            if !ftrace {
                for v in [
                    s.self_time,
                    u128::from(s.quantile(0.5)),
                    u128::from(s.quantile(0.99)),
                    u128::from(s.max),
                ] {
                    out.push_str("    ");
                    duration_text(&mut out, v);
                }
                if self.off_cpu {
                    out.push_str("    ");
                    duration_text(&mut out, s.off);
                }
            }
            while out.ends_with(' ') {
                out.pop();
            }
            out.push('\n');
        }
        out
    }
}

/// The kernel's two header lines (`function_stat_headers`), widened to
/// `width` names and with tape's columns unless `ftrace`.
fn header(out: &mut String, width: usize, ftrace: bool, off_cpu: bool) {
    let pad = width - 30;
    let _ = write!(
        out,
        "  Function{:pad$}                               Hit    Time            Avg             s^2",
        ""
    );
    if !ftrace {
        out.push_str("             Self            p50             p99             Max");
        if off_cpu {
            out.push_str("             Off CPU");
        }
    }
    let _ = write!(
        out,
        "\n  --------{:pad$}                               ---    ----            ---             ---",
        ""
    );
    if !ftrace {
        out.push_str("             ----            ---             ---             ---");
        if off_cpu {
            out.push_str("             -------");
        }
    }
    out.push('\n');
}

/// Gathers the profile of `streams`, each read on its own (a call's
/// entry and exit are on its thread's stream: no merge across streams is
/// needed), on up to `workers` threads, the partial profiles summed;
/// only the events `keep` keeps (`--filter`; a call whose entry or exit
/// it drops is not timed).
pub fn gather_streams(
    streams: Vec<crate::decode::stream::StreamReader>,
    per_thread: bool,
    workers: usize,
    keep: Option<&crate::decode::stream::Keep>,
    off: Option<&OffCpu>,
) -> Result<Profile, crate::decode::DecodeError> {
    let workers = workers.clamp(1, streams.len().max(1));
    let mut shares: Vec<Vec<crate::decode::stream::StreamReader>> =
        (0..workers).map(|_| Vec::new()).collect();
    for (i, s) in streams.into_iter().enumerate() {
        shares[i % workers].push(s);
    }
    let parts: Vec<Result<Profile, crate::decode::DecodeError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    let mut p = Profile::new(per_thread);
                    p.off_cpu = off.is_some();
                    for mut s in share {
                        read_stream(&mut s, &mut p, keep, off)?;
                    }
                    Ok(p)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a profile worker panicked"))
            .collect()
    });
    let mut all = Profile::new(per_thread);
    all.off_cpu = off.is_some();
    for p in parts {
        all.absorb(p?);
    }
    Ok(all)
}

/// Adds the calls of one stream to `p`.
fn read_stream(
    s: &mut crate::decode::stream::StreamReader,
    p: &mut Profile,
    keep: Option<&crate::decode::stream::Keep>,
    off: Option<&OffCpu>,
) -> Result<(), crate::decode::DecodeError> {
    use crate::decode::stream::Next;
    use crate::output::function::Kind;
    /// What a class is here: not a traced function's, or (entry?, index).
    #[derive(Clone, Copy)]
    enum Role {
        Other,
        Call(bool, u32),
    }
    s.keep_packet_values();
    // By event class id (one stream: one stream class).
    let mut roles: Vec<Option<Role>> = Vec::new();
    let mut threads = crate::output::function::ThreadOf::default();
    // Per thread: its next interval off CPU, and its time off so far.
    let mut offs: HashMap<i64, (usize, i128)> = HashMap::default();
    loop {
        match s.peek()? {
            Next::End => return Ok(()),
            Next::Lost(..) => s.take_lost(),
            Next::Event(_) if !keep.is_none_or(|k| k(s)) => {
                s.emit(&mut crate::decode::plan::Discard)?;
            }
            Next::Event(t) => {
                let Some(class) = s.class() else {
                    s.emit(&mut crate::decode::plan::Discard)?;
                    continue;
                };
                let id = usize::try_from(class.id).unwrap_or(usize::MAX);
                let role = match roles.get(id).copied().flatten() {
                    Some(r) => r,
                    None => {
                        let r = match crate::output::function::kind(&class.name) {
                            Kind::Entry(f) => Role::Call(true, p.function(&f)),
                            Kind::Exit(f) => Role::Call(false, p.function(&f)),
                            Kind::Ret(_) | Kind::Close(_) | Kind::Other => Role::Other,
                        };
                        if id < 1 << 16 {
                            if roles.len() <= id {
                                roles.resize(id + 1, None);
                            }
                            roles[id] = Some(r);
                        }
                        r
                    }
                };
                let Role::Call(entry, f) = role else {
                    s.emit(&mut crate::decode::plan::Discard)?;
                    continue;
                };
                let mut sink = crate::output::function::DepthSink::default();
                s.emit(&mut sink)?;
                let depth = crate::output::function::checked_depth(s, sink.depth)?;
                let (Some(t), tid) = (t, threads.of(s).0) else {
                    continue;
                };
                let so_far = match off {
                    Some(o) => o.so_far(tid, t, offs.entry(tid).or_default()),
                    None => 0,
                };
                if entry {
                    p.entry_off(tid, f, depth, t, so_far);
                } else {
                    p.exit_off(tid, f, depth, t, so_far);
                }
            }
        }
    }
}

/// Each thread's intervals off CPU (ns, the trace's times), from a
/// kernel trace's `sched_switch`es read in time order ([`OffCpu::add`]):
/// one begins when a switch takes the thread off, and ends when one puts it
/// back or, where the kernel traced none, at the thread's next record (its
/// next kernel record here, its next event of the program's when timed).
#[derive(Default)]
pub struct OffCpu {
    intervals: HashMap<i64, Vec<(i128, i128)>>,
    open: HashMap<i64, i128>,
}

impl OffCpu {
    /// A kernel record at `t` written by thread `writer`; `switch`: a
    /// `sched_switch` of (out, in) threads.
    pub fn add(&mut self, t: i128, writer: i64, switch: Option<(i64, i64)>) {
        // The writer runs at `t`: whatever took it off has ended.
        self.back(writer, t);
        if let Some((out, into)) = switch {
            self.back(out, t);
            if out != into {
                self.open.insert(out, t);
                self.back(into, t);
            }
        }
    }

    fn back(&mut self, tid: i64, t: i128) {
        if let Some(since) = self.open.remove(&tid) {
            self.intervals.entry(tid).or_default().push((since, t));
        }
    }

    /// Ends the reading: intervals still open end at the thread's next
    /// program event.
    pub fn finish(&mut self) {
        for (tid, since) in self.open.drain() {
            self.intervals
                .entry(tid)
                .or_default()
                .push((since, i128::MAX));
        }
        for v in self.intervals.values_mut() {
            v.sort_unstable();
        }
    }

    /// Thread `tid`'s time off CPU before `t` (`at`: its next interval and
    /// the sum so far, for calls in time order): an interval is cut at the
    /// thread's first event after it began (it runs then).
    fn so_far(&self, tid: i64, t: i128, at: &mut (usize, i128)) -> i128 {
        if let Some(v) = self.intervals.get(&tid) {
            while let Some(&(a, b)) = v.get(at.0) {
                if a >= t {
                    break;
                }
                at.1 += b.min(t) - a;
                at.0 += 1;
            }
        }
        at.1
    }
}

/// The [`OffCpu`] intervals of the kernel traces `merge` reads (their
/// `sched_switch`es and the tasks that wrote each record).
pub fn off_cpu(
    merge: &mut crate::merge::StreamMerge,
) -> Result<OffCpu, crate::decode::DecodeError> {
    use crate::merge::Step;
    let mut off = OffCpu::default();
    while let Some(step) = merge.next() {
        let Step::Event(s, t) = step? else { continue };
        let switch = s.class().is_some_and(|c| c.name == "sched_switch");
        let mut sink = crate::decode::plan::ValueSink::default();
        if let Err(e) = s.emit(&mut sink) {
            merge.fail(e);
            continue;
        }
        let Some(t) = t else { continue };
        let writer = crate::output::event_text::task(None, &sink.scopes).1;
        let pair = if switch {
            crate::output::event_text::switch_of(&sink.scopes).map(|(a, b)| (a.1, b.1))
        } else {
            None
        };
        off.add(t, writer, pair);
    }
    off.finish();
    Ok(off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_exact_below_128_and_within_one_128th_above() {
        for ns in (0..5000u64).chain([1 << 20, 123_456_789, u64::MAX / 3]) {
            let f = step_floor(step(ns));
            assert!(f <= ns, "{ns}: floor {f}");
            if ns < 128 {
                assert_eq!(f, ns);
            } else {
                assert!(ns - f <= ns / 128, "{ns}: floor {f}");
            }
        }
    }

    #[test]
    fn stats_are_the_kernels_formulas() {
        let mut s = Stat::default();
        for ns in [1_000, 2_000, 3_000, 10_000] {
            s.add(ns, ns / 2);
        }
        assert_eq!((s.hits, s.time, s.avg(), s.max), (4, 16_000, 4_000, 10_000));
        // Sample variance of 1, 2, 3, 10 µs: 16.667 µs², printed as the
        // kernel does from ns²/1000.
        assert_eq!(s.s2(), 16_666);
        assert_eq!(s.self_time, 8_000);
        assert_eq!(s.quantile(0.5), step_floor(step(2_000)));
        assert_eq!(s.quantile(1.0), 10_000);
    }

    #[test]
    fn nested_recursive_and_unmatched_calls() {
        let mut p = Profile::new(false);
        // f { g { g } } on thread 1; an exit without its entry; an entry
        // never exited.
        p.entry(1, "f", 0, 0);
        p.entry(1, "g", 1, 100);
        p.entry(1, "g", 2, 200);
        p.exit(1, "g", 2, 300);
        p.exit(1, "g", 1, 600);
        p.exit(1, "f", 0, 1000);
        p.exit(2, "lost", 0, 50);
        p.entry(2, "open", 0, 60);
        let rows = p.rows(SortBy::Time);
        let got: Vec<(&str, u64, u128, u128)> = rows
            .iter()
            .map(|(_, f, s)| (*f, s.hits, s.time, s.self_time))
            .collect();
        // f: 1000 of which 500 in g; g: 500 + 100, self 400 + 100.
        assert_eq!(got, vec![("f", 1, 1000, 500), ("g", 2, 600, 500)]);
    }

    #[test]
    fn time_off_cpu_from_the_kernels_switches() {
        // (kernel records: (time, writer, switch), the thread's calls:
        // (entry, exit), the off CPU each call gets)
        type Case = (
            Vec<(i128, i64, Option<(i64, i64)>)>,
            Vec<(i128, i128)>,
            Vec<i128>,
        );
        let cases: Vec<Case> = vec![
            // out at 10, back at 30 (traced)
            (
                vec![(10, 7, Some((7, 0))), (30, 0, Some((0, 7)))],
                vec![(0, 40)],
                vec![20],
            ),
            // out at 10, back untraced: its next kernel record (25)
            (
                vec![(10, 7, Some((7, 0))), (25, 7, None)],
                vec![(0, 40)],
                vec![15],
            ),
            // out at 10, never back: cut at its next program event (50)
            (vec![(10, 7, Some((7, 0)))], vec![(0, 50)], vec![40]),
            // two calls, one off in each; another thread's switches ignored
            (
                vec![
                    (5, 7, Some((7, 9))),
                    (8, 9, Some((9, 7))),
                    (21, 7, Some((7, 0))),
                    (26, 3, Some((3, 7))),
                    (27, 3, Some((3, 4))),
                ],
                vec![(0, 10), (20, 30)],
                vec![3, 5],
            ),
        ];
        for (records, calls, want) in cases {
            let mut off = OffCpu::default();
            for &(t, w, sw) in &records {
                off.add(t, w, sw);
            }
            off.finish();
            let mut p = Profile::new(true);
            p.off_cpu = true;
            let mut at = (0, 0);
            let f = p.function("f");
            let mut got = Vec::new();
            for &(a, b) in &calls {
                let o = off.so_far(7, a, &mut at);
                p.entry_off(7, f, 0, a, o);
                let before = p.rows(SortBy::Name).first().map_or(0, |r| r.2.off);
                let o = off.so_far(7, b, &mut at);
                p.exit_off(7, f, 0, b, o);
                got.push(p.rows(SortBy::Name)[0].2.off as i128 - before as i128);
            }
            assert_eq!(got, want, "{records:?} {calls:?}");
        }
    }
}
