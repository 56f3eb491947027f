//! The ring directories of this user (`ring/shm.rs` draws them): listed
//! and described for `tape ps --dead`, `tape recover` and the readers,
//! whether their process still runs, and the dead ones kept within
//! `TAPE_SHM_KEEP_SIZE` / `TAPE_SHM_KEEP_AGE` (checked when a process makes
//! its directory). Every file is read as a hostile directory may hold it
//! (`shm::read_checked`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::shm::{self, ProcessHeader};
use crate::error::{Error, ErrorKind};
use crate::knobs;

fn error(message: String) -> Error {
    Error::new(ErrorKind::Io, message)
}

/// The shared rings a process left, alive or dead.
#[derive(Clone, Debug)]
pub struct RingDir {
    /// The directory.
    pub dir: PathBuf,
    /// The process's id.
    pub pid: u32,
    /// Its program's name.
    pub program: String,
    /// The process still runs (same pid, same start time).
    pub alive: bool,
    /// Ring files in it.
    pub rings: usize,
    /// Bytes of its files.
    pub bytes: u64,
    /// When a file of it was last changed.
    pub modified: SystemTime,
}

/// Every ring directory of this user (under `$TAPE_SHM_DIR`, `/dev/shm`
/// or `$XDG_RUNTIME_DIR`), newest first. A directory without a readable
/// process file is listed with pid 0 and program `?`.
pub fn ring_dirs() -> Result<Vec<RingDir>, Error> {
    let mut all: Vec<RingDir> = ring_dir_paths()?.iter().map(|d| describe(d)).collect();
    all.sort_by_key(|d| std::cmp::Reverse(d.modified));
    Ok(all)
}

/// The paths of [`ring_dirs`], unread (one directory listing): for a
/// reader that looks for new processes often and describes only those
/// ([`describe_dir`]).
pub fn ring_dir_paths() -> Result<Vec<PathBuf>, Error> {
    let user = shm::user_dir().map_err(|e| error(format!("shared rings: {e}")))?;
    let entries = match std::fs::read_dir(&user) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(error(format!("{}: {e}", user.display()))),
    };
    let m =
        std::fs::symlink_metadata(&user).map_err(|e| error(format!("{}: {e}", user.display())))?;
    crate::sys::check_private(&m, crate::sys::euid())
        .map_err(|why| error(format!("{}: {why}", user.display())))?;
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.split('-')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .map(|e| e.path())
        .collect())
}

/// What the ring directory `dir` holds (as [`ring_dirs`] lists it).
pub fn describe_dir(dir: &Path) -> RingDir {
    describe(dir)
}

/// What a ring directory holds.
pub fn describe(dir: &Path) -> RingDir {
    let header = read_header(dir).ok();
    let (mut rings, mut bytes) = (0, 0);
    let mut modified = std::fs::symlink_metadata(dir)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            bytes += m.len();
            if let Ok(t) = m.modified() {
                modified = modified.max(t);
            }
            if e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("ring-"))
            {
                rings += 1;
            }
        }
    }
    // Without a process file (one being made, or lost), the name tells
    // the pid, and a process of that pid counts as alive.
    let named = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('-').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    RingDir {
        dir: dir.to_path_buf(),
        pid: header.as_ref().map_or(named, |h| h.pid),
        program: header.as_ref().map_or_else(|| "?".into(), |h| h.program()),
        alive: header
            .as_ref()
            .map_or_else(|| crate::sys::process_exists(named), alive),
        rings,
        bytes,
        modified,
    }
}

/// Whether the process a process file describes still runs: its pid
/// exists with the same start time (a reused pid is another process).
/// A zombie (dead, not yet reaped by its parent) is dead.
pub fn alive(h: &ProcessHeader) -> bool {
    crate::sys::process_exists(h.pid)
        && crate::sys::start_time(h.pid) == h.start_time
        && !crate::sys::zombie(h.pid)
}

/// A copy of the process file's header in ring directory `dir`.
pub fn read_header(dir: &Path) -> Result<ProcessHeader, String> {
    let path = dir.join(shm::PROCESS_FILE);
    let bytes = shm::read_checked(&path, shm::PROCESS_FILE_MAX).map_err(|e| e.to_string())?;
    ProcessHeader::read(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Limits of the dead directories kept (module docs).
const KEEP_SIZE: u64 = 1 << 30;
const KEEP_AGE: Duration = Duration::from_secs(7 * 86_400);

/// Removes the dead processes' directories beyond the size and age kept
/// (`TAPE_SHM_KEEP_SIZE`, `TAPE_SHM_KEEP_AGE`), oldest first, saying so on
/// stderr; called when a process makes its directory. Best effort.
pub(crate) fn limit_dead() {
    // (A bad value stops `init`; a process that did not call it keeps
    // the defaults, said.)
    let size = knobs::setting("TAPE_SHM_KEEP_SIZE", knobs::parse_size)
        .unwrap_or_else(|e| {
            eprintln!("tape: {e}; the dead processes' rings are kept to 1G");
            None
        })
        .map_or(KEEP_SIZE, |s| s as u64);
    let age = knobs::setting("TAPE_SHM_KEEP_AGE", knobs::parse_age_of)
        .unwrap_or_else(|e| {
            eprintln!("tape: {e}; the dead processes' rings are kept 7 days");
            None
        })
        .unwrap_or(KEEP_AGE);
    let Ok(dirs) = ring_dirs() else { return };
    let now = SystemTime::now();
    let mut total = 0u64;
    // Newest first: the oldest go once the newer ones fill the size.
    for d in dirs
        .iter()
        .filter(|d| !d.alive && d.pid != std::process::id())
    {
        let old = now.duration_since(d.modified).unwrap_or_default();
        total += d.bytes;
        let why = if old > age {
            format!("older than TAPE_SHM_KEEP_AGE ({}s)", age.as_secs())
        } else if total > size {
            format!("beyond TAPE_SHM_KEEP_SIZE ({size} bytes of dead processes' rings)")
        } else {
            continue;
        };
        if std::fs::remove_dir_all(&d.dir).is_ok() {
            total -= d.bytes;
            eprintln!(
                "tape: removed the rings of dead process {} ({}) at {}: {why}",
                d.pid,
                d.program,
                d.dir.display()
            );
        }
    }
}

pub use crate::knobs::parse_age;
