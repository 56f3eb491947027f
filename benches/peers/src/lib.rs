//! The harness of the peer benchmarks (`benches/traced.rs`: a traced
//! call; `benches/events.rs`: an event with three fields; `run.sh`: both
//! and the readers, in one table).
//!
//! Method (as `crates/tape/benches/emit.rs`): a sample times `ITERS` calls
//! of a row's function in a loop unrolled 8 times, with `rdtsc` and
//! `Instant` around it; a row is one warm-up sample and `ROUNDS` samples;
//! the rows alternate in rounds (every row once per round), so a noisy
//! stretch of the machine touches every row alike. The table gives the
//! median and minimum ticks per call, ns per call at the TSC rate measured
//! over the run, and the ratio of the median to a chosen row's.

use std::hint::black_box;
use std::time::Instant;

/// Rounds of every row.
pub const ROUNDS: usize = 15;
const UNROLL: u64 = 8;

/// The time-stamp counter.
#[inline(always)]
pub fn ticks() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Calls `f` for `from..to`, unrolled `UNROLL` times (`to - from` a
/// multiple of 8).
#[inline(always)]
pub fn unrolled(f: &dyn Fn(u64) -> u64, from: u64, to: u64) {
    let mut i = from;
    while i < to {
        black_box(f(i));
        black_box(f(i + 1));
        black_box(f(i + 2));
        black_box(f(i + 3));
        black_box(f(i + 4));
        black_box(f(i + 5));
        black_box(f(i + 6));
        black_box(f(i + 7));
        i += UNROLL;
    }
}

/// One timed loop of `iters` calls of `f`: (ticks, ns).
#[inline(never)]
pub fn timed(f: &dyn Fn(u64) -> u64, iters: u64) -> (u64, u64) {
    let start = Instant::now();
    let t0 = ticks();
    unrolled(f, 0, iters);
    let t1 = ticks();
    (t1 - t0, start.elapsed().as_nanos() as u64)
}

/// A row: its name, and a sample of it (ticks, ns).
pub type Row = (&'static str, Box<dyn Fn() -> (u64, u64)>);

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `rows` in alternating rounds of `iters` calls each (`between`
/// after every round) and prints their table, ratios to row `base`
/// (column `ratio`); returns the TSC rate in GHz.
///
/// `PEERS_ONLY=a,b` keeps only the rows whose names contain one of those
/// words, the baselines (`(baseline)`) and row `base`: paired runs of a
/// few rows, as when one of them is being made faster. The last column,
/// "paired", is the median over rounds of the row's sample over the base
/// row's sample of the same round.
pub fn run(rows: &[Row], iters: u64, base: usize, ratio: &str, between: &dyn Fn()) -> f64 {
    let only = std::env::var("PEERS_ONLY").unwrap_or_default();
    let words: Vec<&str> = only.split(',').filter(|w| !w.is_empty()).collect();
    let keep = |i: usize, name: &str| {
        words.is_empty()
            || i == base
            || name.contains("(baseline)")
            || words.iter().any(|w| name.contains(w))
    };
    let kept: Vec<&Row> = rows
        .iter()
        .enumerate()
        .filter(|(i, r)| keep(*i, r.0))
        .map(|(_, r)| r)
        .collect();
    let base = rows[..base]
        .iter()
        .filter(|r| kept.iter().any(|k| std::ptr::eq(*k, *r)))
        .count();
    let rows = kept;
    // `PEERS_BASE=word`: the ratios to the first row whose name contains
    // it instead (a peer's row, when tape's layer is compared with it).
    let base = std::env::var("PEERS_BASE")
        .ok()
        .and_then(|w| rows.iter().position(|r| r.0.contains(w.as_str())))
        .unwrap_or(base);
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    let (mut all_ticks, mut all_ns) = (0u128, 0u128);
    // `PEERS_ROUNDS=N`: more rounds, for a profiler's samples.
    let rounds = std::env::var("PEERS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS);
    for round in 0..=rounds {
        for (i, (_, sample)) in rows.iter().copied().enumerate() {
            let (t, ns) = sample();
            if round > 0 {
                per[i].push(t as f64 / iters as f64);
                all_ticks += u128::from(t);
                all_ns += u128::from(ns);
            }
        }
        between();
    }
    let ghz = all_ticks as f64 / all_ns as f64;
    // Paired: the row over the base row in the same round, the median of
    // those (a noisy stretch of the machine slows both of a round's rows:
    // their ratio holds where the medians of each drift apart).
    let paired: Vec<f64> = (0..rows.len())
        .map(|i| {
            let mut r: Vec<f64> = per[i].iter().zip(&per[base]).map(|(a, b)| a / b).collect();
            median(&mut r)
        })
        .collect();
    let base = median(&mut per[base].clone());
    println!("| row | ticks (median) | ns | ticks (min) | {ratio} | paired |");
    println!("|---|--:|--:|--:|--:|--:|");
    for (i, (name, _)) in rows.iter().copied().enumerate() {
        let min = per[i].iter().copied().fold(f64::INFINITY, f64::min);
        let m = median(&mut per[i]);
        println!(
            "| {name} | {m:.2} | {:.2} | {min:.2} | {:.2} | {:.2} |",
            m / ghz,
            m / base,
            paired[i]
        );
    }
    println!(
        "\nTicks are TSC ticks; ns = ticks / {ghz:.3}. {} rounds of {iters} calls a row, rows \
         alternating; each row includes its loop and the call's `black_box` (the empty-loop row).",
        rounds
    );
    ghz
}
