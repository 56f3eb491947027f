//! Recovery: a CTF trace rebuilt from the shared rings of a process that
//! died without saving (`kill -9`, the OOM killer, a power cut of the
//! container), as `lttng-crash` rebuilds one from LTTng-UST's `--shm-path`
//! buffers. `tape recover PID|DIR`, `tape ps --dead`, `tape recover
//! --clean`.
//!
//! A process with shared rings (the default, `ring/shm.rs`)
//! keeps, in its directory:
//!
//! ```text
//!  /dev/shm/tape-<uid>/<pid>/      (<pid>-<start time>: set aside when the pid was reused)
//!      process              the process file: pid, start time, boot id, clock source,
//!                           anchor and latest calibration, mode, losses outside rings
//!      metadata-template    the trace's metadata with holes (crate::template)
//!      ring-<tid>-<n>       a ring each: header, head, drop counters, gate,
//!                           slot metadata, packets
//! ```
//!
//! Recovery maps each ring file copy-on-write and copies its packets as a
//! save does (`tape::save`): from the oldest packet the owner had not
//! started to overwrite (the gate's word says which packet it entered
//! last, even if it died before publishing it) to the one it was writing,
//! up to the last event it published. An event is published by one store
//! after its bytes (`ring/emit.rs`): a death between the two leaves the event
//! unpublished, so the trace holds only whole events, never a torn one.
//! The losses are the ring's own counters (every cause, as a save writes
//! them) and the events overwritten before the oldest packet.
//!
//! The clock: timestamps are counter values of the dead process. When the
//! recovery runs in the same boot (the process file's boot id) and can read
//! the same counter, it pairs the counter with `CLOCK_MONOTONIC` now: the
//! frequency then comes from the span since the dead process's anchor
//! (the longest span, the best frequency) and the offset from a pair with
//! `CLOCK_REALTIME` now. Otherwise (the directory was on a disk and the
//! machine rebooted, or another machine reads it) the latest calibration
//! the process wrote (at each ring made and each save) gives both.
//!
//! The trace says it was recovered: `env.tape_source` (which process,
//! from where) and `env.tape_last_event` (the newest event's time: when
//! the process was last seen doing anything).
//!
//! Dead directories are kept within a size and an age: when a process
//! makes its directory, the dead ones beyond `TAPE_SHM_KEEP_SIZE` (total
//! bytes, default 1G; oldest first) or older than `TAPE_SHM_KEEP_AGE`
//! (default `7d`) are removed, each with a line on stderr.
//!
//! Only this user's directories are read: `tape-<uid>` is 0700 and checked
//! (`sys::ensure_private_dir`'s check), and every file
//! must be owned by this user.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tape::__consumer as tape_rings;
use tape::{Error, ErrorKind};
pub(crate) use tape_rings::dirs::{alive, describe, read_header};
pub use tape_rings::dirs::{describe_dir, parse_age, ring_dir_paths, ring_dirs, RingDir};
use tape_rings::shm::{self, ProcessHeader};
use tape_rings::Hole;
use tape_rings::{Drops, Ring};

fn error(message: String) -> Error {
    tape_rings::error(ErrorKind::Io, message)
}

/// The ring directory `what` names: a directory path, or a pid (the
/// newest directory of that pid).
pub fn find(what: &str) -> Result<PathBuf, Error> {
    let as_path = Path::new(what);
    if what.contains('/') || as_path.is_dir() {
        return Ok(as_path.to_path_buf());
    }
    let pid: u32 = what.parse().map_err(|_| {
        error(format!(
            "{what:?} is neither a process id nor a directory of shared rings (`tape ps --dead` \
             lists them)"
        ))
    })?;
    ring_dirs()?
        .into_iter()
        .find(|d| d.pid == pid)
        .map(|d| d.dir)
        .ok_or_else(|| {
            error(format!(
                "no shared rings of process {pid} (under {}): it ran with TAPE_SHM=off, exited \
                 normally (its rings go with it), or they were removed",
                shm::user_dir().map_or_else(|e| e.to_string(), |d| d.display().to_string())
            ))
        })
}

/// The program and process id a directory of shared rings states (its
/// process file), once the process has written it (a directory found an
/// instant after the process made it may not have it yet).
pub fn process_of(dir: &Path) -> Result<(String, u32), Error> {
    let h = read_header(dir).map_err(|e| {
        error(format!(
            "{} is not a directory of shared rings: {e}",
            dir.display()
        ))
    })?;
    Ok((h.program(), h.pid))
}

/// The clock source (a process header's code) of the process of `dir`.
pub fn clock_source_of(dir: &Path) -> Result<u32, Error> {
    let h = read_header(dir).map_err(|e| {
        error(format!(
            "{} is not a directory of shared rings: {e}",
            dir.display()
        ))
    })?;
    Ok(h.clock_source)
}

/// Whether the process of `dir` has made it whole: its process file
/// written, then its metadata template (written an instant after, which a
/// reader needs before its first packet).
pub fn made_whole(dir: &Path) -> Result<(), Error> {
    process_of(dir)?;
    let template = dir.join(shm::METADATA_FILE);
    match std::fs::symlink_metadata(&template) {
        Ok(_) => Ok(()),
        Err(e) => Err(error(format!("{}: {e}", template.display()))),
    }
}

/// [`find`] for a reader of a running process (`tape pipe`, `tape
/// record`): a process that runs but has not made its shared rings yet
/// (started an instant ago: `prog & tape pipe $!`) is waited for, up to
/// `patience`, then the error says that it runs.
pub fn find_running(what: &str, patience: std::time::Duration) -> Result<PathBuf, Error> {
    let until = std::time::Instant::now() + patience;
    loop {
        let e = match find(what) {
            // Its process file and template written too (not an instant
            // after it made the directory).
            Ok(dir) => match made_whole(&dir) {
                Ok(_) => return Ok(dir),
                Err(e) => e,
            },
            Err(e) => e,
        };
        let running = what.parse::<u32>().is_ok_and(tape_rings::process_exists);
        if !running {
            return Err(e);
        }
        if std::time::Instant::now() >= until {
            return Err(error(format!(
                "{e} (process {what} runs, but made no shared rings within {} s: has it called \
                 tape::init, and enabled a tracepoint?)",
                patience.as_secs_f64()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// What [`recover`] made.
#[derive(Clone, Debug)]
pub struct Recovered {
    /// The trace written.
    pub trace: PathBuf,
    /// The dead process.
    pub pid: u32,
    /// Its program's name.
    pub program: String,
    /// Streams written (threads with events or losses).
    pub rings: usize,
    /// Ring files the process was making when it died (empty).
    pub unborn: usize,
    /// Ring files that could not be read, and why (the others are in the
    /// trace).
    pub unreadable: Vec<String>,
    /// Rings the process made in private memory (past `TAPE_SHM_MAX`, or
    /// no room): those threads' events are not in the trace.
    pub unshared: u32,
    /// Every ring's losses, summed (the trace's `events_discarded`).
    pub lost: Drops,
    /// Events lost outside any ring (the process file's counters).
    pub lost_outside: u64,
    /// The newest event's time, ns since the epoch, if any.
    pub last_event_ns: Option<i128>,
    /// How the clock was calibrated, in words.
    pub clock: String,
}

/// Rebuilds a CTF trace at `out` (which must not exist) from the shared
/// rings in `dir`, left by a process that died. A running process is
/// refused (save it with `tape ctl PID save`); a ring file that cannot
/// be read is left out and named in [`Recovered::unreadable`].
pub fn recover(dir: &Path, out: &Path) -> Result<Recovered, Error> {
    let h = read_header(dir).map_err(|e| {
        error(format!(
            "{} is not a directory of shared rings: {e}",
            dir.display()
        ))
    })?;
    if alive(&h) {
        return Err(error(format!(
            "process {} ({}) is running: its rings are recovered only after it died (`tape ctl \
             {} save` saves them now)",
            h.pid,
            h.program(),
            h.pid
        )));
    }
    let template_path = dir.join(shm::METADATA_FILE);
    let template = read_template(&template_path)?;
    let names = shm::ring_files(dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    let mut rings = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let mut unborn = 0;
    for p in &names {
        match Ring::open_recovered(p) {
            Ok(r) => rings.push(Arc::new(r)),
            // The process died while it made this ring (its header is
            // written last): no event can be in it.
            Err(_) if unborn_ring(p) => unborn += 1,
            Err(e) => unreadable.push(format!("{}: {e}", p.display())),
        }
    }
    let last_ts = rings
        .iter()
        .filter(|r| r.written() > 0)
        .map(|r| r.last_ts())
        .max();
    let source = format!(
        "process {} ({}) died; recovered from {} by tape {}",
        h.pid,
        h.program(),
        dir.display(),
        env!("CARGO_PKG_VERSION")
    );
    // Checked before anything is written; filled again with the rings
    // left out once the streams are written.
    let filled = fill_metadata(&h, &template, &source, last_ts, 0, 0).map_err(|hole| {
        error(format!(
            "{}: the value of {hole:?} has no place in a recovery (not a template of this tape)",
            template_path.display()
        ))
    })?;
    let (how, last_event_ns) = (filled.how, filled.last_event_ns);
    let outside = filled.outside;
    let mut lost = Drops::default();
    let uuid = h.uuid;
    let filled = tape_rings::write_atomically(out, |tmp| {
        let filled = tape_rings::write_streams(tmp, &rings, &uuid)?;
        let skipped = filled.skipped.iter().map(|s| s.events).sum();
        let metadata = fill_metadata(&h, &template, &source, last_ts, skipped, 0)
            .map(|m| m.text)
            .unwrap_or_default();
        tape_rings::write_file(&tmp.join("metadata"), metadata.as_bytes())?;
        Ok(filled)
    })
    .map_err(|e| error(format!("recovering into {}: {}", out.display(), e.message)))?;
    unreadable.extend(filled.skipped.iter().map(|s| s.describe()));
    for r in &rings {
        lost += r.drops();
    }
    Ok(Recovered {
        trace: out.to_path_buf(),
        pid: h.pid,
        program: h.program(),
        rings: filled.streams,
        unborn,
        unreadable,
        unshared: h.unshared_rings.load(std::sync::atomic::Ordering::Relaxed),
        lost,
        lost_outside: outside.iter().fold(0u64, |a, &n| a.saturating_add(n)),
        last_event_ns,
        clock: how,
    })
}

/// Whether the ring file at `p` is one the process was making when it
/// died: its header is still all zeros (the header is written once the
/// file's pages are, before any event).
fn unborn_ring(p: &Path) -> bool {
    use std::io::Read as _;
    // A ring being made has every byte zero (the header is written after
    // the pages): one whose header is zero but whose body is not was
    // damaged, and its events and losses are not to be called empty.
    let Ok(f) = shm::open_checked(p, u64::MAX) else {
        return false;
    };
    let mut buf = vec![0u8; 1 << 16];
    let mut r = f.take(64 << 20);
    loop {
        match r.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) if buf[..n].iter().all(|&b| b == 0) => {}
            _ => return false,
        }
    }
}

/// The metadata template of a ring directory (regular, bounded, UTF-8).
pub(crate) fn read_template(path: &Path) -> Result<String, Error> {
    let bytes =
        shm::read_checked(path, shm::METADATA_FILE_MAX).map_err(|e| error(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| {
        error(format!(
            "{}: not UTF-8 text (at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// A process's metadata text, its holes filled.
pub(crate) struct Metadata {
    pub(crate) text: String,
    /// How the clock was calibrated, in words.
    pub(crate) how: String,
    /// The time of the event at `last_ts`, ns since the epoch.
    pub(crate) last_event_ns: Option<i128>,
    /// Losses outside the rings: no ring, ring allocation, exited rings.
    pub(crate) outside: [u64; 3],
}

/// Fills the holes of the process's metadata `template`: its clock now
/// ([`clock_of`]), its losses outside the rings and mode (from its
/// process file), where the trace comes from, and the time of its last
/// event (the counter value `last_ts`). `Err` names a hole with no value
/// here.
pub(crate) fn fill_metadata(
    h: &ProcessHeader,
    template: &str,
    source: &str,
    last_ts: Option<u64>,
    skipped_busy: u64,
    not_written: u64,
) -> Result<Metadata, Hole> {
    fill_metadata_with(
        h,
        None,
        template,
        source,
        last_ts,
        skipped_busy,
        not_written,
    )
}

/// [`fill_metadata`], the clock (freq, offset_s, offset) given, if it is.
pub(crate) fn fill_metadata_with(
    h: &ProcessHeader,
    clock: Option<(u64, i64, i64)>,
    template: &str,
    source: &str,
    last_ts: Option<u64>,
    skipped_busy: u64,
    not_written: u64,
) -> Result<Metadata, Hole> {
    use std::sync::atomic::Ordering::Relaxed;
    let (freq, offset_s, offset, how) = match clock {
        Some((f, s, o)) => (f, s, o, "given by the reader".to_owned()),
        None => clock_of(h),
    };
    let clock = tape_rings::clock_description(freq, offset_s, offset);
    let last_event_ns = last_ts.map(|t| tape_rings::to_realtime_ns(&clock, t));
    let outside = [
        h.dropped_no_ring.load(Relaxed),
        h.dropped_no_memory.load(Relaxed),
        h.lost_exited.load(Relaxed),
    ];
    let last_event = last_event_ns.map_or_else(|| "none".to_owned(), utc_text);
    let text = tape_rings::fill(template, |hole| {
        Some(match hole {
            Hole::Freq => freq.to_string(),
            Hole::OffsetS => offset_s.to_string(),
            Hole::Offset => offset.to_string(),
            // Counts read from the process file may be anything: at most
            // i64::MAX, the largest an `env` integer holds.
            Hole::DroppedNoRing => env_count(outside[0]),
            Hole::DroppedNoMemory => env_count(outside[1]),
            Hole::LostExited => env_count(outside[2]),
            Hole::SkippedBusy => env_count(skipped_busy),
            Hole::NotWritten => env_count(not_written),
            Hole::Date => tape_rings::local_date(),
            Hole::Mode => {
                if h.mode.load(Relaxed) == 1 {
                    "discard".into()
                } else {
                    "overwrite".into()
                }
            }
            Hole::Source => source.to_owned(),
            Hole::LastEvent => last_event.clone(),
            _ => return None,
        })
    })?;
    Ok(Metadata {
        text,
        how,
        last_event_ns,
        outside,
    })
}

/// A count as an `env` value: saturated at `i64::MAX` (TSDL's readers,
/// babeltrace2 and tape's, take signed 64-bit integers).
fn env_count(n: u64) -> String {
    n.min(i64::MAX as u64).to_string()
}

/// The clock of the dead process: (freq, offset_s, offset, how).
pub(crate) fn clock_of(h: &ProcessHeader) -> (u64, i64, i64, String) {
    let source = u8::try_from(h.clock_source).unwrap_or(0);
    let anchor = (h.anchor_counter, i128::from(h.anchor_mono_ns as i64));
    let same_boot = h.boot_id != [0; 40] && h.boot_id == tape_rings::boot_id();
    if same_boot {
        if let Some((mono, real)) = tape_rings::pairs_of_source(source) {
            if let Some(freq) = tape_rings::frequency(anchor, mono) {
                let (offset_s, offset) = tape_rings::offsets(real.0, real.1, freq);
                return (
                    freq,
                    offset_s,
                    offset,
                    "the process's counter read again now (same boot): frequency over the whole \
                     span since its start"
                        .into(),
                );
            }
        }
    }
    if let Some((counter, mono, real_counter, real)) = h.calibration() {
        let freq = tape_rings::frequency(anchor, (counter, mono)).unwrap_or(1_000_000_000);
        let (offset_s, offset) = tape_rings::offsets(real_counter, real, freq);
        return (
            freq,
            offset_s,
            offset,
            "the process's last calibration (another boot, or a counter this machine cannot \
             read)"
                .into(),
        );
    }
    (
        1_000_000_000,
        0,
        0,
        "unknown: no calibration in the process file (times are counter values at 1 GHz)".into(),
    )
}

/// A time (ns since the epoch) as `YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ`.
pub fn utc_text(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000) as i64;
    let [y, m, d, h, mi, sec] = tape_rings::civil_utc(secs);
    format!(
        "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{sec:02}.{:09}Z",
        ns.rem_euclid(1_000_000_000)
    )
}

/// Removes the ring directory `dir` of a dead process (never a running
/// one's).
pub fn remove(dir: &Path) -> Result<(), Error> {
    let d = describe(dir);
    if d.alive {
        return Err(error(format!(
            "{}: process {} ({}) is running; its rings go when it exits",
            dir.display(),
            d.pid,
            d.program
        )));
    }
    if !dir.join(shm::PROCESS_FILE).exists() && d.rings == 0 {
        return Err(error(format!(
            "{} is not a directory of shared rings (no process file, no ring file)",
            dir.display()
        )));
    }
    std::fs::remove_dir_all(dir).map_err(|e| error(format!("{}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            utc_text(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            utc_text(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
    }

    #[test]
    fn ages_parse() {
        for (text, secs) in [
            ("7d", Some(604_800)),
            ("12h", Some(43_200)),
            ("30m", Some(1800)),
            ("90s", Some(90)),
            ("45", Some(45)),
            ("", None),
            ("d", None),
            ("-1d", None),
            ("1w", None),
        ] {
            assert_eq!(parse_age(text).map(|d| d.as_secs()), secs, "{text:?}");
        }
    }
}
