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
//! * Names are printed whole (the kernel cuts them at 30 characters:
//!   `--ftrace` does that, with the kernel's four columns only), rows
//!   sorted by total time, highest first (as the kernel sorts with the
//!   graph tracer), or by another column.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::graph::duration_text;

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

/// An open call: its function, entry time (ns), and the time spent in
/// traced callees so far.
type Open = (String, i128, u64);

/// The profile being gathered: per (thread or 0, function).
pub struct Profile {
    per_thread: bool,
    stats: HashMap<(i64, String), Stat>,
    /// Per thread, the open calls by depth.
    open: HashMap<i64, Vec<Option<Open>>>,
}

impl Profile {
    /// An empty profile; `per_thread` keeps threads apart.
    pub fn new(per_thread: bool) -> Profile {
        Profile {
            per_thread,
            stats: HashMap::new(),
            open: HashMap::new(),
        }
    }

    /// A traced function's entry on thread `tid` at `t` (ns).
    pub fn entry(&mut self, tid: i64, func: &str, depth: u32, t: i128) {
        let open = self.open.entry(tid).or_default();
        let d = depth as usize;
        if open.len() <= d {
            open.resize(d + 1, None);
        }
        open[d] = Some((func.to_owned(), t, 0));
        // Deeper calls left open (their exits lost) end here.
        open.truncate(d + 1);
    }

    /// A traced function's exit.
    pub fn exit(&mut self, tid: i64, func: &str, depth: u32, t: i128) {
        let Some(open) = self.open.get_mut(&tid) else {
            return;
        };
        let d = depth as usize;
        let Some(Some((f, t0, children))) = open.get_mut(d).map(Option::take) else {
            return;
        };
        if f != func || t < t0 {
            return;
        }
        let ns = u64::try_from(t - t0).unwrap_or(u64::MAX);
        if let Some(Some((_, _, parent_children))) = d.checked_sub(1).and_then(|p| open.get_mut(p))
        {
            *parent_children = parent_children.saturating_add(ns);
        }
        let key = (if self.per_thread { tid } else { 0 }, f);
        self.stats
            .entry(key)
            .or_default()
            .add(ns, ns.saturating_sub(children));
    }

    /// The rows: (thread or 0, function, stat), sorted by `by`.
    pub fn rows(&self, by: SortBy) -> Vec<(i64, &str, &Stat)> {
        let mut v: Vec<(i64, &str, &Stat)> = self
            .stats
            .iter()
            .map(|((tid, f), s)| (*tid, f.as_str(), s))
            .collect();
        v.sort_by(|a, b| {
            let key = |r: &(i64, &str, &Stat)| -> u128 {
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
        for (tid, func, s) in rows {
            if last_thread != Some(tid) {
                if self.per_thread {
                    if last_thread.is_some() {
                        out.push('\n');
                    }
                    let _ = writeln!(out, "thread {tid}:");
                }
                header(&mut out, width, ftrace);
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
fn header(out: &mut String, width: usize, ftrace: bool) {
    let pad = width - 30;
    let _ = write!(
        out,
        "  Function{:pad$}                               Hit    Time            Avg             s^2",
        ""
    );
    if !ftrace {
        out.push_str("             Self            p50             p99             Max");
    }
    let _ = write!(
        out,
        "\n  --------{:pad$}                               ---    ----            ---             ---",
        ""
    );
    if !ftrace {
        out.push_str("             ----            ---             ---             ---");
    }
    out.push('\n');
}

/// Gathers the profile of the events of `merge`.
pub fn gather(
    merge: &mut crate::fast::FastMerge,
    per_thread: bool,
) -> Result<Profile, crate::decode::DecodeError> {
    use crate::fast::{Step, ValueSink};
    merge.keep_packet_values();
    let mut p = Profile::new(per_thread);
    let mut kinds: HashMap<usize, crate::graph::Kind> = HashMap::new();
    while let Some(step) = merge.next() {
        let Step::Event(stream, t) = step? else {
            continue;
        };
        let Some(class) = stream.class().cloned() else {
            let _ = stream.emit(&mut crate::plan::Discard);
            continue;
        };
        let k = kinds
            .entry(std::sync::Arc::as_ptr(&class) as usize)
            .or_insert_with(|| crate::graph::kind(&class.name));
        if matches!(k, crate::graph::Kind::Other) {
            if let Err(e) = stream.emit(&mut crate::plan::Discard) {
                merge.fail(e);
            }
            continue;
        }
        let mut sink = ValueSink::default();
        if let Err(e) = stream.emit(&mut sink) {
            merge.fail(e);
            continue;
        }
        let Some(t) = t else { continue };
        let tid = crate::ftrace::task(stream.packet_value.as_ref(), &[]).1;
        let depth = crate::graph::depth_of(&sink.scopes);
        match k {
            crate::graph::Kind::Entry(f) => p.entry(tid, f, depth, t),
            crate::graph::Kind::Exit(f) => p.exit(tid, f, depth, t),
            crate::graph::Kind::Other => {}
        }
    }
    Ok(p)
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
}
