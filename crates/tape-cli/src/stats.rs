//! `tape stats`: counts per event name and per stream, losses by cause,
//! time span and rates; each stream counted on its own core.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use crate::filter;
use crate::output::{open, print, say, Failure};
use crate::select::{causes_text, Filtered};
use tape_ctf::decode::{losses_by_stream, LostByCause, StreamCount, StreamReader, TracePlan};
use tape_ctf::metadata::TraceDir;

use crate::select::stream_losses;

/// Per stream, in file order: the streams need no merge to be counted,
/// so they are counted on all cores at once.
pub(crate) fn stats(paths: &[PathBuf], filter: Option<&str>) -> Result<(), Failure> {
    let traces = open(paths)?;
    let filter = filter
        .map(|text| filter::ValueFilter::new(text, filter::classes_of(&traces).into_iter()))
        .transpose()?;
    let filtered = filter.as_ref().map(Filtered);
    let mut jobs = Vec::new();
    // Each trace's losses by cause per stream, from its losses stream
    // (`None`: in the streams' own packet contexts, if anywhere).
    let mut side = Vec::new();
    for (k, t) in traces.iter().enumerate() {
        let plan = std::sync::Arc::new(
            TracePlan::new(&t.trace).map_err(|e| format!("{}/metadata: {e}", t.dir.display()))?,
        );
        jobs.extend(t.streams.iter().map(|p| (plan.clone(), p.clone(), k)));
        side.push(losses_by_stream(t)?);
    }
    let counted = parallel_map(&jobs, |(plan, path, _)| {
        StreamReader::open(plan.clone(), path)
            .and_then(|mut s| match &filtered {
                None => s.count(),
                Some(f) => {
                    if f.0.uses_common() {
                        s.keep_packet_values();
                    }
                    s.count_shown(f)
                }
            })
            .map_err(|e| e.to_string())
    });
    let mut totals = Totals::default();
    for ((_, path, k), c) in jobs.iter().zip(counted) {
        totals.add(path, c?, side[*k].as_ref());
    }
    let outside = outside_losses(&traces);
    let text = totals.text(traces.len(), &outside);
    print(&text)?;
    // Damaged streams were counted up to the damage: the figures above are
    // those of what could be read; where each stopped is an error.
    if let Some((last, others)) = totals.stopped.split_last() {
        for e in others {
            say!("tape: error: {e}");
        }
        return Err(Failure::Error(format!(
            "{last} (the figures above count what was read before)"
        )));
    }
    Ok(())
}

/// What the streams' counts add up to, in file order.
#[derive(Default)]
struct Totals {
    by_event: BTreeMap<String, u64>,
    /// Each stream's file, events and events lost.
    by_stream: Vec<(String, u64, u64)>,
    by_cause: Option<LostByCause>,
    first: Option<i128>,
    last: Option<i128>,
    events: u64,
    lost: u64,
    /// Where damaged streams stopped being read.
    stopped: Vec<String>,
}

impl Totals {
    /// Stream `path`'s count `c` added; its losses by cause from its
    /// trace's losses stream (`side`) if it has one, else its own.
    fn add(
        &mut self,
        path: &std::path::Path,
        mut c: StreamCount,
        side: Option<&std::collections::HashMap<String, LostByCause>>,
    ) {
        if let Some(e) = c.stopped.take() {
            self.stopped.push(e.to_string());
        }
        for (class, n) in c.by_class {
            *self.by_event.entry(class.name.clone()).or_default() += n;
        }
        self.first = match (self.first, c.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last = self.last.max(c.last);
        self.events += c.events;
        self.lost += c.lost;
        let causes = match side {
            Some(by_stream) => Some(stream_losses(by_stream, path)),
            None => c.lost_by_cause,
        };
        if let Some(causes) = causes {
            let sum = self.by_cause.get_or_insert_with(Default::default);
            sum.iter_mut()
                .zip(causes)
                .for_each(|(s, n)| *s = s.saturating_add(n));
        }
        self.by_stream
            .push((path.display().to_string(), c.events, c.lost));
    }

    /// The summary of `traces` traces, the losses `outside` any stream
    /// added: totals, losses by cause, span and rate, then the events by
    /// name (most first) and the streams.
    fn text(&self, traces: usize, outside: &BTreeMap<&str, i64>) -> String {
        let mut text = String::new();
        let outside_total = outside_total(outside);
        let (total, lost_total) = (self.events, self.lost + outside_total);
        let _ = writeln!(text, "traces: {traces}, streams: {}", self.by_stream.len());
        let _ = writeln!(text, "events: {total}, lost: {lost_total}");
        if let Some(causes) = &self.by_cause {
            let _ = writeln!(
                text,
                "lost in streams by cause: {}",
                causes_text(causes, true)
            );
        }
        if outside_total > 0 {
            let causes: Vec<String> = outside
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(k, n)| format!("{k} = {n}"))
                .collect();
            let _ = writeln!(
                text,
                "lost outside any stream: {outside_total} ({})",
                causes.join(", ")
            );
        }
        if let (Some(f), Some(l)) = (self.first, self.last) {
            let secs = (l - f) as f64 / 1e9;
            let _ = writeln!(text, "time span: {secs:.9} s");
            if secs > 0.0 {
                let _ = writeln!(text, "rate: {:.1} events/s", total as f64 / secs);
            }
        }
        let _ = writeln!(text);
        let _ = writeln!(text, "{:>12}  {:>6}  event", "count", "%");
        let mut ev: Vec<_> = self.by_event.iter().collect();
        ev.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (name, c) in ev {
            let _ = writeln!(
                text,
                "{c:>12}  {:>6.2}  {name}",
                100.0 * *c as f64 / total.max(1) as f64
            );
        }
        let _ = writeln!(text);
        let _ = writeln!(text, "{:>12}  {:>12}  stream", "events", "lost");
        for (path, n, l) in &self.by_stream {
            let _ = writeln!(text, "{n:>12}  {l:>12}  {path}");
        }
        text
    }
}

/// Events a tape recorder lost outside any stream (no ring to count them
/// in: the ring could not be allocated, the thread was exiting, or an
/// exited thread's ring was freed unsaved), from the traces' `env`, by
/// entry.
pub(crate) fn outside_losses(traces: &[TraceDir]) -> BTreeMap<&str, i64> {
    let mut outside: BTreeMap<&str, i64> = BTreeMap::new();
    for t in traces {
        let tape = t.trace.written_by_tape();
        for (k, v) in t.trace.env.iter().filter(|_| tape) {
            if let (true, tape_ctf::EnvValue::Int(n)) = (is_env_loss(k), v) {
                let e = outside.entry(k.as_str()).or_default();
                *e = e.saturating_add((*n).max(0));
            }
        }
    }
    outside
}

/// The events of [`outside_losses`] in all.
pub(crate) fn outside_total(outside: &BTreeMap<&str, i64>) -> u64 {
    outside
        .values()
        .fold(0u64, |sum, &n| sum.saturating_add(n.max(0) as u64))
}

/// The `env` entries in which tape's recorder counts the events it lost
/// outside any stream.
pub(crate) const ENV_LOSSES: [&str; 5] = [
    "events_skipped_ring_busy",
    "events_not_written",
    "events_dropped_ring_alloc",
    "events_dropped_without_ring",
    "events_lost_with_exited_threads",
];

/// Whether the `env` entry `k` of a tape trace counts events lost
/// outside any stream: the recorder's own ([`ENV_LOSSES`]) and those of
/// the layers above it (`events_lost_*`, `tape::layer_losses`).
fn is_env_loss(k: &str) -> bool {
    ENV_LOSSES.contains(&k) || k.starts_with("events_lost_")
}

/// `f` applied to every job, on as many threads as there are cores (each
/// takes the next job left), results in job order.
pub(crate) fn parallel_map<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len());
    if threads <= 1 {
        return jobs.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                // Relaxed: the counter only hands out indices; the results
                // are published through the mutex and the scope's join.
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = f(job);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}
