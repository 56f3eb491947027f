//! Saving while threads emit: four threads emit events of varying size that
//! carry a checksum of their own fields, while another thread saves 100
//! times. Every saved trace must be read by babeltrace2 without error, and
//! every event in it must verify: no torn event, no event from a previous
//! lap of the ring mixed into a newer packet, per-thread order kept, and
//! saved + reported-lost events accounting for every event emitted up to
//! the last one saved, and for no more than were emitted when the save
//! returned (events dropped after the last saved one, while a save held the
//! slot the thread was about to overwrite, are counted in the save too).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use common::{events, field, field_u64, read, Reader};

tape::tracepoint! {
    /// An event whose `sum` checks the other fields.
    pub fn checked(thread: u64, seq: u64, word: u64, text: &str, sum: u64) = "test.stress.checked";
}

/// FNV-1a over the fields.
fn checksum(thread: u64, seq: u64, word: u64, text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = thread
        .to_le_bytes()
        .into_iter()
        .chain(seq.to_le_bytes())
        .chain(word.to_le_bytes())
        .chain(text.bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const THREADS: u64 = 4;
const SAVES: usize = 100;

#[test]
fn saves_while_four_threads_emit_are_always_consistent() {
    let _g = tape::Config::new()
        .enable("test.stress.*")
        .buffer_size(128 << 10)
        .packet_size(8 << 10)
        .init()
        .expect("init");
    _g.disarm();
    // Never empty: babeltrace2 2.0.4 prints an empty string as an earlier
    // event's string when streams interleave (its known bug; seen here as
    // checksum failures on events whose text was ""). Empty strings are
    // checked against babeltrace 1.5 in field_types.rs.
    let texts: Vec<String> = (0..64).map(|n| "abcdefghij".repeat(1 + n % 13)).collect();
    let texts = Arc::new(texts);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    // Events emitted (attempted) by each thread so far.
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
    let mut emitters = Vec::new();
    for t in 0..THREADS {
        let (stop, texts, started) = (stop.clone(), texts.clone(), started.clone());
        let progress = progress.clone();
        emitters.push(thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let word = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ t;
                let text = &texts[(seq % 64) as usize];
                checked(t, seq, word, text, checksum(t, seq, word, text));
                if seq == 0 {
                    started.fetch_add(1, Ordering::Relaxed);
                }
                seq += 1;
                // Release: pairs with the Acquire after each save.
                progress[t as usize].store(seq, Ordering::Release);
            }
            seq
        }));
    }
    // Every saved trace must hold all four threads: start saving once each
    // has emitted.
    while started.load(Ordering::Relaxed) < THREADS {
        thread::yield_now();
    }
    let saver = {
        let progress = progress.clone();
        thread::spawn(move || {
            (0..SAVES)
                .map(|i| {
                    let dir = common::trace_path(&format!("stress-{i}"));
                    tape::save_to(&dir).expect("save while emitting");
                    // + 1: the emit in flight when the save returned.
                    let bound: Vec<u64> = progress
                        .iter()
                        .map(|p| p.load(Ordering::Acquire) + 1)
                        .collect();
                    (dir, bound)
                })
                .collect::<Vec<_>>()
        })
    };
    let dirs = saver.join().expect("saver");
    stop.store(true, Ordering::Relaxed);
    for e in emitters {
        e.join().expect("emitter");
    }

    let mut verified = 0usize;
    for (n, (dir, bound)) in dirs.iter().enumerate() {
        // babeltrace2 and tape read every trace, babeltrace 1.5 every tenth.
        let readers: &[Reader] = if n % 10 == 0 {
            &[Reader::Bt2, Reader::Tape, Reader::Bt1]
        } else {
            &[Reader::Bt2, Reader::Tape]
        };
        for &reader in readers {
            let Some(out) = read(reader, dir, &[]) else {
                continue;
            };
            verified += verify(dir, bound, reader, &out.stdout, &out.stderr);
        }
    }
    eprintln!(
        "{} traces, {verified} events verified; dropped while a save held a slot: {}",
        dirs.len(),
        tape::stats().drops.saving
    );
    for (d, _) in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Checks one reader's view of one trace; returns the events verified.
fn verify(
    dir: &std::path::Path,
    bound: &[u64],
    reader: Reader,
    stdout: &str,
    stderr: &str,
) -> usize {
    let at = format!("{} ({reader:?})", dir.display());
    // Lost-event reports are expected (overwrite mode, fast writers);
    // anything else on stderr is a problem. They are summed per stream file
    // (`<thread>-<tid>`): babeltrace2 names it `within stream "PATH"`,
    // babeltrace 1.5 `at relative path: "FILE"`.
    let mut lost: HashMap<u64, u64> = HashMap::new();
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let rest = line
            .strip_prefix("WARNING: Tracer discarded ")
            .or_else(|| line.strip_prefix("[warning] Tracer discarded "))
            .unwrap_or_else(|| panic!("{at}: {line}"));
        let n: u64 = rest.split(' ').next().unwrap().parse().unwrap();
        let stream = rest
            .split("within stream \"")
            .nth(1)
            .or_else(|| rest.split("relative path: \"").nth(1))
            .unwrap_or_else(|| panic!("{at}: no stream in {line}"));
        let stream = &stream[..stream.find('"').unwrap()];
        let tid: u64 = stream.rsplit('-').next().unwrap().parse().unwrap();
        *lost.entry(tid).or_default() += n;
    }
    // Per stream (tid): events saved, the last seq and the emitter; per
    // emitter: order.
    let mut per_tid: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    let mut last: HashMap<u64, u64> = HashMap::new();
    let mut verified = 0;
    for e in events(stdout)
        .into_iter()
        .filter(|e| e.name == "test.stress.checked")
    {
        let p = &e.payload;
        let (t, seq, word) = (
            field_u64(p, "thread"),
            field_u64(p, "seq"),
            field_u64(p, "word"),
        );
        let text = field(p, "text").expect("text").trim_matches('"');
        assert_eq!(
            field_u64(p, "sum"),
            checksum(t, seq, word, text),
            "{at}: torn event {p}"
        );
        let tid: u64 = e.context["tid = ".len()..]
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let entry = per_tid.entry(tid).or_default();
        *entry = (entry.0 + 1, seq, t);
        if let Some(prev) = last.insert(t, seq) {
            assert!(seq > prev, "{at}: thread {t}: {seq} after {prev}");
        }
        verified += 1;
    }
    assert_eq!(last.len(), THREADS as usize, "{at}: a thread is missing");
    // In overwrite mode an event is lost only overwritten, or dropped while
    // a save holds the slot to overwrite; so in each stream, saved + reported
    // lost covers every event up to the last saved, and no more than the
    // thread had emitted when the save returned.
    for (tid, (saved, last_seq, t)) in per_tid {
        let lost = lost.get(&tid).copied().unwrap_or(0);
        assert!(
            saved + lost > last_seq && saved + lost <= bound[t as usize],
            "{at}: stream of tid {tid}: {saved} saved + {lost} lost, last seq {last_seq}, \
             {} emitted when the save returned",
            bound[t as usize]
        );
    }
    verified
}
