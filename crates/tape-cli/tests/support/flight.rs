//! The flight example (`examples/flight.rs`: threads emitting numbered,
//! checksummed events into shared rings) driven by the `tape recover` and
//! `tape record` tests, and the checks of the traces made from it.

#![allow(dead_code)] // each test uses what it needs

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::pipeline::{self, TAPE};

/// The flight example's checksum (`examples/flight.rs`), again: the test
/// checks the events against its own copy.
pub fn checksum(thread: u32, seq: u64, text: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in thread
        .to_le_bytes()
        .iter()
        .chain(seq.to_le_bytes().iter())
        .chain(text.iter())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub fn base(tag: &str) -> PathBuf {
    let b = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("recover-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&b);
    std::fs::create_dir_all(&b).unwrap();
    b
}

pub fn user_dir(base: &Path) -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    base.join(format!("tape-{}", unsafe { libc::geteuid() }))
}

/// The flight example with its rings under `shm`, in `mode`, rings of
/// 64 KiB in 4 KiB packets (they wrap every few milliseconds).
pub fn flight(shm: &Path, mode: &str, extra: &[&str]) -> Child {
    flight_command(shm, mode).args(extra).spawn().unwrap()
}

/// The command [`flight`] runs, to change before spawning it.
pub fn flight_command(shm: &Path, mode: &str) -> Command {
    let mut c = Command::new(pipeline::example("flight"));
    c.env("TAPE_SHM", "on")
        .env("TAPE_SHM_DIR", shm)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_DUMP", "off")
        .env("TAPE_TRACE", "flight.*")
        .env("TAPE_TRACE_MODE", mode)
        .env("TAPE_TRACE_BUFSZ", "64K")
        .env("TAPE_TRACE_PACKETSZ", "4K")
        .env("TAPE_TRACE_DIR", shm.join("saved"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// Waits until `dir` holds `n` ring files with their header written.
pub fn wait_for_rings(dir: &Path, n: usize) {
    let t = Instant::now();
    while ring_files(dir) < n {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no {n} rings in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Ring files made (their header written) in `dir`.
pub fn ring_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with("ring-"))
                })
                .filter(|e| std::fs::read(e.path()).is_ok_and(|b| b.starts_with(b"TAPERING")))
                .count()
        })
        .unwrap_or(0)
}

pub fn tape(args: &[&str], shm: &Path) -> Output {
    Command::new(TAPE)
        .args(args)
        .env("TAPE_SHM_DIR", shm)
        .output()
        .unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A thread's events in a recovered trace.
#[derive(Default, Debug)]
pub struct Stream {
    pub seqs: Vec<u64>,
    /// `events_discarded` of the first and of the last event's packet.
    pub first_discarded: Option<u64>,
    pub last_discarded: u64,
    pub lost_full: u64,
}

/// Every `flight.event` of the trace, by stream, checked whole (its
/// checksum) and in its own thread's stream.
pub fn streams_of(trace: &Path) -> BTreeMap<String, Stream> {
    let out = Command::new(TAPE)
        .args(["show", "--format", "json", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut all: BTreeMap<String, Stream> = BTreeMap::new();
    let mut thread_of: BTreeMap<String, u64> = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v.get("lost").is_some() {
            continue; // a `[LOST n EVENTS]` line: counted from the packets
        }
        assert_eq!(v["name"], "flight.event", "{line}");
        let stream = v["stream"].as_str().unwrap().to_owned();
        let f = &v["fields"];
        let (thread, seq) = (f["thread"].as_u64().unwrap(), f["seq"].as_u64().unwrap());
        let t = f["text"].as_str().unwrap();
        assert_eq!(
            f["sum"].as_u64().unwrap(),
            checksum(thread as u32, seq, t.as_bytes()),
            "a torn or altered event: {line}"
        );
        assert_eq!(
            *thread_of.entry(stream.clone()).or_insert(thread),
            thread,
            "two threads' events in one stream: {line}"
        );
        let ctx = &v["packet_context"];
        let s = all.entry(stream).or_default();
        s.seqs.push(seq);
        let discarded = ctx["events_discarded"].as_u64().unwrap();
        s.first_discarded.get_or_insert(discarded);
        s.last_discarded = discarded;
    }
    // The losses by cause, from the trace's losses stream.
    let t = tape_ctf::metadata::open_trace(trace).unwrap();
    let by_stream = tape_ctf::decode::losses_by_stream(&t)
        .unwrap()
        .expect("a tape trace declares its losses stream");
    for (stream, s) in &mut all {
        let name = stream.rsplit('/').next().unwrap();
        let full = tape_ctf::LOSS_CAUSES
            .iter()
            .position(|c| *c == "full")
            .unwrap();
        s.lost_full = by_stream.get(name).map_or(0, |c| c[full]);
    }
    all
}

/// A small deterministic random sequence (the test prints its seed).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// babeltrace2's reading of `trace`: it must succeed, and say nothing on
/// stderr but the losses it reports; the events lost, summed per stream
/// file name.
pub fn babeltrace2_losses(trace: &Path, what: &str) -> BTreeMap<String, u64> {
    let b = Command::new("babeltrace2")
        .arg(trace)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        b.status.success(),
        "{what}: babeltrace2: {}",
        text(&b.stderr)
    );
    let mut lost: BTreeMap<String, u64> = BTreeMap::new();
    for line in text(&b.stderr).lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line
            .strip_prefix("WARNING: Tracer discarded ")
            .unwrap_or_else(|| panic!("{what}: babeltrace2 says: {line}"))
            .split(' ');
        let n = words
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{what}: babeltrace2 says: {line}"));
        match words.next() {
            Some("events") => {}
            // Packets lost whole (their sequence numbers skipped): said
            // too, their events counted in the events line.
            Some("packets") => continue,
            _ => panic!("{what}: babeltrace2 says: {line}"),
        }
        let stream = line
            .split("within stream \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("{what}: {line}"));
        let name = Path::new(stream).file_name().unwrap().to_str().unwrap();
        *lost.entry(name.to_owned()).or_default() += n;
    }
    lost
}
