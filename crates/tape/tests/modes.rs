//! Overwrite and discard modes: what the ring keeps and how every lost
//! event is counted, checked through babeltrace2 and babeltrace 1.5.
//!
//! Each test emits from a thread of its own (its own ring) and reads back
//! only that thread's stream; the tests share the process-wide mode and
//! sizes, so they run one at a time.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use common::{discarded_reported, events, field_u64, read, Reader};

tape::tracepoint! {
    /// A numbered event (18 bytes with its header).
    pub fn seq(n: u64) = "test.modes.seq";
    /// An event of any size.
    pub fn blob(n: u64, data: &[u8]) = "test.modes.blob";
}

static SERIAL: Mutex<()> = Mutex::new(());

const RING: usize = 64 << 10;
const PACKET: usize = 4 << 10;
/// Bytes of one `seq` event: 2 (id) + 8 (timestamp) + 8 (n).
const SEQ_EVENT: usize = 18;

fn setup(mode: tape::Mode) -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tape::Config::new()
        .enable("test.modes.*")
        .buffer_size(RING)
        .packet_size(PACKET)
        .mode(mode)
        .init()
        .expect("init")
        .disarm();
    guard
}

/// Runs `f` on a new thread; returns its kernel thread id.
fn on_thread(f: impl FnOnce() + Send + 'static) -> u32 {
    thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        f();
        tid
    })
    .join()
    .expect("thread")
}

/// What a reader saw of one thread's stream.
struct Seen {
    seqs: Vec<u64>,
    discarded: u64,
}

fn read_thread(reader: Reader, dir: &std::path::Path, tid: u32) -> Option<Seen> {
    let out = read(reader, dir, &[])?;
    let ctx = format!("tid = {tid},");
    let seqs = events(&out.stdout)
        .into_iter()
        .filter(|e| e.context.starts_with(&ctx))
        .map(|e| field_u64(&e.payload, "n"))
        .collect();
    let discarded = discarded_reported(&out.stderr);
    Some(Seen { seqs, discarded })
}

#[test]
fn overwrite_keeps_the_newest_events_and_counts_the_rest() {
    let _s = setup(tape::Mode::Overwrite);
    let capacity = RING / SEQ_EVENT;
    let per_packet = PACKET / SEQ_EVENT;
    let emitted = (100 * capacity) as u64;
    let tid = on_thread(move || (0..emitted).for_each(seq));
    // The ring's own account: emitted = recorded + overwritten, exactly.
    let stats = tape::stats();
    let mine = stats.threads.iter().find(|t| t.tid == tid).expect("ring");
    assert!(mine.drops.overwritten > 0, "{mine:?}");
    assert_eq!(mine.recorded + mine.drops.overwritten, emitted, "{mine:?}");
    assert_eq!(mine.emitted(), emitted, "nothing but overwritten: {mine:?}");
    let dir = common::trace_path("overwrite");
    tape::save_to(&dir).expect("save");
    for reader in [Reader::Bt2, Reader::Bt1, Reader::Tape] {
        let Some(seen) = read_thread(reader, &dir, tid) else {
            continue;
        };
        let n = seen.seqs.len();
        assert_eq!(n as u64, mine.recorded, "{reader:?}: saved vs recorded");
        assert_eq!(seen.discarded, mine.drops.overwritten, "{reader:?}");
        assert!(
            n >= capacity - per_packet,
            "{reader:?}: kept {n} events, capacity {capacity}, packet {per_packet}"
        );
        assert!(n <= capacity, "{reader:?}: {n} > capacity {capacity}");
        // The newest, in order, without a gap.
        let want: Vec<u64> = (emitted - n as u64..emitted).collect();
        assert_eq!(seen.seqs, want, "{reader:?}");
        assert_eq!(
            seen.discarded + n as u64,
            emitted,
            "{reader:?}: discarded {} + saved {n}",
            seen.discarded
        );
    }
}

#[test]
fn discard_keeps_the_oldest_events_and_counts_the_rest() {
    let _s = setup(tape::Mode::Discard);
    let capacity = RING / SEQ_EVENT;
    let emitted = (100 * capacity) as u64;
    let before = tape::stats().drops.full;
    let tid = on_thread(move || (0..emitted).for_each(seq));
    let full = tape::stats().drops.full - before;
    let dir = common::trace_path("discard");
    tape::save_to(&dir).expect("save");
    for reader in [Reader::Bt2, Reader::Bt1, Reader::Tape] {
        let Some(seen) = read_thread(reader, &dir, tid) else {
            continue;
        };
        let n = seen.seqs.len() as u64;
        assert!(n > 0 && n <= capacity as u64, "{reader:?}: {n}");
        assert_eq!(seen.seqs, (0..n).collect::<Vec<_>>(), "{reader:?}");
        assert!(
            seen.discarded > 0,
            "{reader:?} reported no discarded events"
        );
        assert_eq!(seen.discarded, full, "{reader:?}: reported vs counted");
        assert_eq!(seen.discarded + n, emitted, "{reader:?}");
    }
}

#[test]
fn events_larger_than_a_packet_are_dropped_and_counted() {
    let _s = setup(tape::Mode::Overwrite);
    let before = tape::stats().drops.big;
    let tid = on_thread(|| {
        let big = vec![7u8; PACKET];
        let small = vec![1u8; 16];
        for n in 0..10u64 {
            blob(n, if n % 3 == 1 { &big } else { &small });
        }
    });
    assert_eq!(tape::stats().drops.big - before, 3);
    let dir = common::trace_path("big");
    tape::save_to(&dir).expect("save");
    let Some(out) = read(Reader::Bt2, &dir, &[]) else {
        return;
    };
    let ctx = format!("tid = {tid},");
    let ns: Vec<u64> = events(&out.stdout)
        .into_iter()
        .filter(|e| e.context.starts_with(&ctx))
        .map(|e| field_u64(&e.payload, "n"))
        .collect();
    assert_eq!(ns, vec![0, 2, 3, 5, 6, 8, 9]);
    assert_eq!(discarded_reported(&out.stderr), 3);
}

#[test]
fn mode_switch_while_emitting() {
    let _s = setup(tape::Mode::Overwrite);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let (stop2, count2) = (stop.clone(), count.clone());
    let emitter = thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let mut n = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            seq(n);
            n += 1;
        }
        count2.store(n, Ordering::Relaxed);
        tid
    });
    for i in 0..200 {
        tape::config::set_mode(if i % 2 == 0 {
            tape::Mode::Discard
        } else {
            tape::Mode::Overwrite
        });
        thread::sleep(std::time::Duration::from_micros(200));
    }
    stop.store(true, Ordering::Relaxed);
    let tid = emitter.join().expect("emitter");
    let emitted = count.load(Ordering::Relaxed);
    let dir = common::trace_path("switch");
    tape::save_to(&dir).expect("save");
    tape::config::set_mode(tape::Mode::Overwrite);
    let Some(seen) = read_thread(Reader::Bt2, &dir, tid) else {
        return;
    };
    assert!(!seen.seqs.is_empty());
    assert!(
        seen.seqs.windows(2).all(|w| w[0] < w[1]),
        "events out of order"
    );
    assert_eq!(seen.discarded + seen.seqs.len() as u64, emitted);
}

#[test]
fn a_thread_that_exited_is_saved_once() {
    let _s = setup(tape::Mode::Overwrite);
    let tid = on_thread(|| (0..100).for_each(seq));
    let dir = common::trace_path("exited");
    tape::save_to(&dir).expect("save");
    if let Some(seen) = read_thread(Reader::Bt2, &dir, tid) {
        assert_eq!(seen.seqs, (0..100).collect::<Vec<_>>());
    }
    // Saved once, the ring of an exited thread is freed.
    let again = common::trace_path("exited-again");
    tape::save_to(&again).expect("save");
    let streams: Vec<String> = std::fs::read_dir(&again)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !streams.iter().any(|s| s.ends_with(&format!("-{tid}"))),
        "{streams:?}"
    );
}
