//! `tape stats`: counts per event name and per stream, losses by cause,
//! time span and rates; each stream counted on its own core.

use std::io::Write;
use std::path::PathBuf;

use crate::filter;
use crate::output::{open, print, say, Failure};
use crate::select::{causes_text, Filtered};
use tape_ctf::decode::{losses_by_stream, LostByCause, StreamReader, TracePlan};

use crate::select::stream_losses;

/// Per stream, in file order: the streams need no merge to be counted,
/// so they are counted on all cores at once.
pub(crate) fn stats(paths: &[PathBuf], filter: Option<&str>) -> Result<(), Failure> {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
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
    let mut by_event: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_stream: Vec<(String, u64, u64)> = Vec::new();
    let mut by_cause: Option<LostByCause> = None;
    let (mut first, mut last): (Option<i128>, Option<i128>) = (None, None);
    let (mut total, mut lost_total) = (0u64, 0u64);
    let mut stopped = Vec::new();
    for ((_, path, k), c) in jobs.iter().zip(counted) {
        let mut c = c?;
        if let Some(e) = c.stopped.take() {
            stopped.push(e.to_string());
        }
        for (class, n) in c.by_class {
            *by_event.entry(class.name.clone()).or_default() += n;
        }
        first = match (first, c.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        last = last.max(c.last);
        total += c.events;
        lost_total += c.lost;
        let causes = match &side[*k] {
            Some(by_stream) => Some(stream_losses(by_stream, path)),
            None => c.lost_by_cause,
        };
        if let Some(causes) = causes {
            let sum = by_cause.get_or_insert_with(Default::default);
            sum.iter_mut()
                .zip(causes)
                .for_each(|(s, n)| *s = s.saturating_add(n));
        }
        by_stream.push((path.display().to_string(), c.events, c.lost));
    }
    let span = match (first, last) {
        (Some(f), Some(l)) => Some(l - f),
        _ => None,
    };
    // Events a tape recorder lost outside any stream (no ring to count them
    // in: the ring could not be allocated, the thread was exiting, or an
    // exited thread's ring was freed unsaved), from the trace's `env`.
    let mut outside: BTreeMap<&str, i64> = BTreeMap::new();
    for t in &traces {
        let tape = t.trace.written_by_tape();
        for (k, v) in t.trace.env.iter().filter(|_| tape) {
            if let (true, tape_ctf::EnvValue::Int(n)) = (is_env_loss(k), v) {
                let e = outside.entry(k.as_str()).or_default();
                *e = e.saturating_add((*n).max(0));
            }
        }
    }
    let outside_total: u64 = outside.values().map(|&n| n as u64).sum();
    lost_total += outside_total;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "traces: {}, streams: {}",
        traces.len(),
        by_stream.len()
    );
    let _ = writeln!(text, "events: {total}, lost: {lost_total}");
    if let Some(causes) = by_cause {
        let _ = writeln!(
            text,
            "lost in streams by cause: {}",
            causes_text(&causes, true)
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
    if let Some(span) = span {
        let secs = span as f64 / 1e9;
        let _ = writeln!(text, "time span: {secs:.9} s");
        if secs > 0.0 {
            let _ = writeln!(text, "rate: {:.1} events/s", total as f64 / secs);
        }
    }
    let _ = writeln!(text);
    let _ = writeln!(text, "{:>12}  {:>6}  event", "count", "%");
    let mut ev: Vec<_> = by_event.into_iter().collect();
    ev.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, c) in ev {
        let _ = writeln!(
            text,
            "{c:>12}  {:>6.2}  {name}",
            100.0 * c as f64 / total.max(1) as f64
        );
    }
    let _ = writeln!(text);
    let _ = writeln!(text, "{:>12}  {:>12}  stream", "events", "lost");
    for (path, n, l) in by_stream {
        let _ = writeln!(text, "{n:>12}  {l:>12}  {path}");
    }
    print(&text)?;
    // Damaged streams were counted up to the damage: the figures above are
    // those of what could be read; where each stopped is an error.
    if let Some((last, others)) = stopped.split_last() {
        for e in others {
            say!("tape: error: {e}");
        }
        return Err(Failure::Error(format!(
            "{last} (the figures above count what was read before)"
        )));
    }
    Ok(())
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
pub(crate) fn is_env_loss(k: &str) -> bool {
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
