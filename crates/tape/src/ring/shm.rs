//! Shared mappings for rings (the default; [`crate::Config::shared_rings`],
//! `TAPE_SHM`):
//! each ring a file in a directory of this process, mapped shared, so that
//! another process can read the ring while the program runs (`tape record`
//! and `tape pipe`, `tape_consumer::record`) and after it died (`tape recover`,
//! `tape_consumer::recover`), with no daemon, as LTTng-UST's `--shm-path`
//! buffers. A ring's region has the same layout on the heap (without
//! `TAPE_SHM=off`), so the ring's code is one.
//!
//! ```text
//!  /dev/shm/tape-<uid>/<pid>/          mode 0700, checked (owner, no link)
//!      process                         the process file (ProcessHeader, a page):
//!                                      pid, start time, boot id, clock source,
//!                                      anchor and latest calibration, mode,
//!                                      losses outside rings, the recorder's pid
//!      metadata-template               the trace's metadata with holes (crate::template)
//!      snapshots                       the latency snapshots saved, a path a line
//!                                      (for `tape record --kernel`: note_snapshot)
//!      ring-<tid>-<n>                  mode 0600, one per ring:
//!      +--------------------+  0
//!      | FileHeader         |  magic "TAPERING", version, sizes, offsets
//!      +--------------------+  4096
//!      | the ring's parts   |  head, drop counters, gate (pins, copy claim,
//!      | (at the offsets    |  packets freed by a recorder), slot metadata
//!      |  the header gives) |  and the packet memory
//!      +--------------------+  len
//! ```
//!
//! Where: `$TAPE_SHM_DIR` if set, else `/dev/shm` (tmpfs: pages written
//! there are never written back to a disk, so the emit path takes no page
//! fault after creation, which a disk-backed file's writeback would cause by
//! write-protecting cleaned pages), else `$XDG_RUNTIME_DIR`. The space is
//! reserved with `posix_fallocate` when the file is created, so a full
//! tmpfs is an error then (the ring falls back to private memory), never a
//! `SIGBUS` on a later write; every page is written once at creation, so
//! the emit path takes no page fault. A process's ring files stay within
//! `TAPE_SHM_MAX` (default: half the filesystem's size); past it, rings are
//! made in private memory. Such a ring is counted in the process file
//! (`unshared_rings`: `tape recover` and `tape record` name the loss of
//! sight) and its reason kept for `tape ctl status`; stderr says it once
//! only when shared rings were asked for (`TAPE_SHM=on`), since by default
//! a program that merely has no room (a container's 64 MB `/dev/shm`)
//! should not print.
//!
//! Only this user can read the rings: the directory is 0700 and checked as
//! the control socket's is (`crate::sys::ensure_private_dir`),
//! the files 0600; readers open only files of this user.
//!
//! A normal exit removes the directory, but for the description and the
//! process file while a consuming reader follows (`ProcessHeader::reader`,
//! alive): they are its to read to the end and remove (`Recorder`). A
//! death leaves it all. A forked child
//! copies its own ring into private memory (`Mapping::detach_after_fork`)
//! and never removes the parent's files; it makes a directory of its own
//! for rings it makes later. A directory left by a dead process whose pid
//! is reused is set aside (`<pid>-<start time>`), not mixed with the new
//! process's.
//!
//! Shared by default, since a flight recorder is for the death nobody
//! expected: the cost is at ring creation (a file made, reserved and
//! mapped, ~50 µs per thread), none on the emit path (same instructions;
//! `benches/RESULTS.md`), and a directory left per dead process, kept
//! within `TAPE_SHM_KEEP_SIZE` / `TAPE_SHM_KEEP_AGE`. `TAPE_SHM=off`
//! keeps rings private.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// First bytes of a ring file.
pub(crate) const MAGIC: [u8; 8] = *b"TAPERING";
/// Layout version of [`FileHeader`] and the parts after it.
pub(crate) const VERSION: u32 = 2;
/// Bytes reserved for the header (the parts start at or after it).
pub(crate) const HEADER_SPACE: usize = 4096;

/// The start of a ring file: what a reader in another process needs to
/// find the parts. `repr(C)`: read by other builds of tape.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FileHeader {
    pub magic: [u8; 8],
    pub version: u32,
    /// `size_of::<FileHeader>()` when written.
    pub header_size: u32,
    pub pid: u32,
    pub tid: u32,
    pub slot_size: u64,
    pub slots: u64,
    /// Byte offsets of the parts from the start of the file.
    pub head_at: u64,
    pub dropped_at: u64,
    pub gate_at: u64,
    pub metas_at: u64,
    pub mem_at: u64,
    /// Clock value at the ring's creation.
    pub created_ts: u64,
    /// The thread's name, NUL-padded.
    pub name: [u8; 64],
}

impl FileHeader {
    /// A copy of the header at the start of `bytes`, if they hold one of
    /// this version.
    pub(crate) fn read(bytes: &[u8]) -> Result<FileHeader, String> {
        if bytes.len() < size_of::<FileHeader>() {
            return Err(format!("{} bytes, shorter than a ring header", bytes.len()));
        }
        // SAFETY: `bytes` holds at least a header's size; every field is an
        // integer or an array of them, valid for any bits.
        let h = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<FileHeader>()) };
        if h.magic != MAGIC {
            return Err("no TAPERING magic at offset 0: not a tape ring file".into());
        }
        if h.version != VERSION || h.header_size as usize != size_of::<FileHeader>() {
            return Err(format!(
                "layout version {} of {} bytes; this tape reads version {VERSION} of {} bytes",
                h.version,
                h.header_size,
                size_of::<FileHeader>()
            ));
        }
        Ok(h)
    }
}

/// Why the first ring that could not be shared was made in private
/// memory (`tape ctl status` shows it).
static UNSHARED_WHY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A ring could not be made shared (it lives on the heap, as with
/// `TAPE_SHM=off`): counted in the process file, if there is one, so that
/// `tape recover` and `tape record` say which threads they cannot see; the
/// first reason kept for `tape ctl status`, and said on stderr once if
/// shared rings were asked for (`TAPE_SHM=on`; by default it is quiet).
pub(crate) fn unshared(e: &io::Error) {
    if let Some(p) = process() {
        p.unshared_rings.fetch_add(1, Ordering::Relaxed);
    }
    // A directory that is not this user's (another user made it first,
    // to turn the rings' sharing off or to read them) is said at once,
    // whatever was asked: it is an attack, not a lack of room.
    let hostile = e.kind() == io::ErrorKind::PermissionDenied;
    if UNSHARED_WHY.set(e.to_string()).is_ok() && (hostile || crate::knobs::shared_rings_asked()) {
        eprintln!(
            "tape: rings in private memory, not shared (TAPE_SHM): {e}{}",
            if hostile {
                " (if another user made it, remove it: until then `tape recover` has nothing \
                 to recover after a crash, and `tape pipe`/`record` cannot attach)"
            } else {
                ""
            }
        );
    }
}

/// Why rings of this process are in private memory, if some are.
pub(crate) fn unshared_why() -> Option<&'static str> {
    UNSHARED_WHY.get().map(String::as_str)
}

/// Name of the process file in a process's directory.
pub const PROCESS_FILE: &str = "process";
/// Name of the metadata text with holes (`crate::template`).
pub const METADATA_FILE: &str = "metadata-template";
/// Largest process file read (it is one page).
pub(crate) const PROCESS_FILE_MAX: u64 = 4096;
/// Largest metadata template read (a program with tens of thousands of
/// tracepoints has a few MiB).
pub const METADATA_FILE_MAX: u64 = 64 << 20;

/// Name of the list of the latency snapshots this process saved (a path
/// a line), for `tape record --kernel` to add the kernel's events of each
/// one's window (`note_snapshot`).
pub const SNAPSHOTS_FILE: &str = "snapshots";
/// Largest snapshot list: past it, no more lines are added (a recorder
/// then adds nothing to later snapshots).
pub const SNAPSHOTS_FILE_MAX: u64 = 1 << 20;

/// Opens a file of a shared-ring directory for reading as a hostile
/// directory may hold it: no symbolic link followed (`O_NOFOLLOW`), no
/// wait on a FIFO or a device (`O_NONBLOCK`), and then only a regular file
/// of this user's of at most `max` bytes; the error names the path and
/// what it is.
pub fn open_checked(path: &Path, max: u64) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let named = |e: String| io::Error::other(format!("{}: {e}", path.display()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => named("is a symbolic link: not followed".into()),
            _ => named(e.to_string()),
        })?;
    let m = f.metadata().map_err(|e| named(e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(named("not a regular file".into()));
    }
    let own = crate::sys::euid();
    if m.uid() != own {
        return Err(named(format!(
            "owned by uid {}, not this user ({own})",
            m.uid()
        )));
    }
    if m.len() > max {
        return Err(named(format!(
            "{} bytes, more than the {max} expected",
            m.len()
        )));
    }
    Ok(f)
}

/// The whole of a file of a shared-ring directory, read as
/// [`open_checked`] opens it, `max` bytes at most (a file that grows while
/// read is cut there and refused).
pub fn read_checked(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let f = open_checked(path, max)?;
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!(
            "{}: grew past the {max} bytes expected while read",
            path.display()
        )));
    }
    Ok(bytes)
}

/// First bytes of the process file.
pub(crate) const PROCESS_MAGIC: [u8; 8] = *b"TAPEPROC";
/// Layout version of [`ProcessHeader`].
pub(crate) const PROCESS_VERSION: u32 = 1;

/// A counter value paired with `CLOCK_MONOTONIC` and one paired with
/// `CLOCK_REALTIME`, taken together (`clock` module docs).
#[repr(C)]
#[derive(Default, Debug)]
pub struct Calibration {
    /// The counter's value.
    pub counter: AtomicU64,
    /// Nanoseconds, as an `i64`.
    pub mono_ns: AtomicU64,
    /// The counter's value beside `real_ns`.
    pub real_counter: AtomicU64,
    /// Nanoseconds since the epoch, as an `i64`.
    pub real_ns: AtomicU64,
}

/// The process file (`process`, one page, mapped shared for the life of
/// the process): who the process was, how to read its clock, and what it
/// lost outside its rings, for a recovery after its death. `repr(C)`,
/// every field an integer, so any bytes are a value of it.
#[repr(C)]
#[derive(Debug)]
pub struct ProcessHeader {
    /// `TAPEPROC`: the file's kind.
    pub magic: [u8; 8],
    /// The layout's version.
    pub version: u32,
    /// `size_of::<ProcessHeader>()` when written.
    pub header_size: u32,
    /// The process's id.
    pub pid: u32,
    /// `crate::clock::source_code()`: what the timestamps count.
    pub clock_source: u32,
    /// The process's start time (`/proc/self/stat` field 22, clock ticks
    /// since boot): tells it from a later process with the same pid.
    pub start_time: u64,
    /// `/proc/sys/kernel/random/boot_id`: a counter value means the same
    /// instant in another process only within one boot.
    pub boot_id: [u8; 40],
    /// The trace's uuid (the metadata template holds it too).
    pub uuid: [u8; 16],
    /// The program's name, NUL-padded.
    pub program: [u8; 64],
    /// The clock's anchor (`clock` module docs).
    pub anchor_counter: u64,
    /// `CLOCK_MONOTONIC` at the anchor.
    pub anchor_mono_ns: u64,
    /// The latest calibration, in `calib[calib_at - 1]` (0: none yet). A
    /// new one is written into the other entry, then `calib_at` is stored
    /// (`Release`; pairs with a live reader's `Acquire`), so the entry it
    /// names is whole even if the process died while writing the next.
    pub calib: [Calibration; 2],
    /// Which entry of `calib` is the latest (1 or 2; 0: none yet).
    pub calib_at: AtomicU32,
    /// 0: overwrite, 1: discard (`ring::set_mode` keeps it current).
    pub mode: AtomicU32,
    /// Mirrors of `ring::DROPPED_NO_RING`, `ring::DROPPED_NO_MEMORY`,
    /// `ring::EVENTS_LOST_EXITED`, added to with them
    /// (`crate::ring::Outside::lose`).
    pub dropped_no_ring: AtomicU64,
    /// The mirror of `ring::DROPPED_NO_MEMORY`.
    pub dropped_no_memory: AtomicU64,
    /// The mirror of `ring::EVENTS_LOST_EXITED`.
    pub lost_exited: AtomicU64,
    /// The process id of the `tape record` streaming this process's
    /// rings, 0 if none (one at a time: a compare-exchange from 0, or
    /// from a reader found dead).
    pub reader: AtomicU32,
    /// Rings made in private memory after this file was made (past
    /// `TAPE_SHM_MAX`, or no room): their threads' events cannot be read
    /// or recovered from here. (Zero in files of builds before it.)
    pub unshared_rings: AtomicU32,
}

impl ProcessHeader {
    /// A copy of the header at the start of `bytes`, if they hold one of
    /// this version (any bytes are a value of it: integers only).
    pub fn read(bytes: &[u8]) -> Result<ProcessHeader, String> {
        if bytes.len() < size_of::<ProcessHeader>() {
            return Err(format!(
                "{} bytes, shorter than a process header ({})",
                bytes.len(),
                size_of::<ProcessHeader>()
            ));
        }
        // SAFETY: `bytes` holds at least a header's size; every field is an
        // integer, an array of them or an atomic integer, valid for any
        // bits; an unaligned read copies them out.
        let h = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<ProcessHeader>()) };
        if h.magic != PROCESS_MAGIC {
            return Err("no TAPEPROC magic at offset 0: not a tape process file".into());
        }
        if h.version != PROCESS_VERSION || h.header_size as usize != size_of::<ProcessHeader>() {
            return Err(format!(
                "layout version {} of {} bytes; this tape reads version {} of {} bytes",
                h.version,
                h.header_size,
                PROCESS_VERSION,
                size_of::<ProcessHeader>()
            ));
        }
        Ok(h)
    }

    /// The latest calibration written, if any: (counter, monotonic ns,
    /// counter, realtime ns).
    pub fn calibration(&self) -> Option<(u64, i128, u64, i128)> {
        let at = self.calib_at.load(Ordering::Acquire) as usize;
        let c = self.calib.get(at.checked_sub(1)?)?;
        Some((
            c.counter.load(Ordering::Relaxed),
            i128::from(c.mono_ns.load(Ordering::Relaxed) as i64),
            c.real_counter.load(Ordering::Relaxed),
            i128::from(c.real_ns.load(Ordering::Relaxed) as i64),
        ))
    }

    /// The program's name.
    pub fn program(&self) -> String {
        text(&self.program)
    }
}

/// A NUL-padded name as text.
pub(crate) fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The ring files in a process's directory `dir`, in name order.
pub fn ring_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("ring-"))
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    Ok(v)
}

/// The directory made for this process's rings, and the process it is
/// for (a forked child inherits the record, not the directory).
static MADE: std::sync::Mutex<Option<(u32, PathBuf)>> = std::sync::Mutex::new(None);

/// This process's process file, once its directory is made (null before,
/// and in a forked child until it makes its own). Stored `Release` once
/// the header is written; loaded `Acquire`.
static PROCESS: AtomicPtr<ProcessHeader> = AtomicPtr::new(std::ptr::null_mut());

/// At a normal exit: the process's ring directory goes (a death leaves it
/// for `tape recover`). Registered with `atexit` by the first shared ring.
extern "C" fn remove_at_exit() {
    let made = MADE.lock().map(|m| m.clone()).unwrap_or(None);
    let Some((pid, dir)) = made else {
        return;
    };
    if pid != std::process::id() {
        return;
    }
    if followed() {
        // The rings go (their reader has them mapped, reads them to their
        // end, and takes a ring file gone for its thread's end); the
        // description and the process file stay for it, which removes
        // them once done (`Recorder`): the events of a tracepoint
        // registered just before the exit are read with the description
        // written then, which the reader may not have read yet.
        for ring in ring_files(&dir).unwrap_or_default() {
            let _ = std::fs::remove_file(ring);
        }
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Whether a consuming reader (`tape record`, `tape pipe`) follows this
/// process's rings now.
fn followed() -> bool {
    process().is_some_and(|h| {
        // Relaxed: a pid, read alone.
        let reader = h.reader.load(Ordering::Relaxed);
        reader != 0 && reader != std::process::id() && crate::sys::process_exists(reader)
    })
}

/// In a forked child: the process file is the parent's.
extern "C" fn forget_process_after_fork() {
    PROCESS.store(std::ptr::null_mut(), Ordering::Relaxed);
}

/// The directory of this process's shared rings, if it made one.
pub(crate) fn current_dir() -> Option<PathBuf> {
    let made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    made.as_ref()
        .filter(|(pid, _)| *pid == std::process::id())
        .map(|(_, d)| d.clone())
}

/// The directory under which every process of this user keeps its rings:
/// `$TAPE_SHM_DIR`, `/dev/shm` or `$XDG_RUNTIME_DIR`, then `tape-<uid>`.
pub fn user_dir() -> io::Result<PathBuf> {
    let asked = crate::knobs::setting("TAPE_SHM_DIR", crate::knobs::parse_absolute_dir)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.message().to_owned()))?;
    let base = match asked {
        Some(d) => d,
        _ if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        _ => match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no /dev/shm and no XDG_RUNTIME_DIR for shared rings",
                ))
            }
        },
    };
    Ok(base.join(format!("tape-{}", crate::sys::euid())))
}

fn private(d: &Path) -> io::Result<()> {
    crate::sys::ensure_private_dir(d, "ring directory")
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.message().to_owned()))
}

/// The directory of this process's ring files (created 0700 and checked),
/// with its process file and metadata template, made with it; `true` the
/// first time (the caller then copies the losses counted so far into the
/// process file and limits the dead processes' rings).
pub(crate) fn process_dir() -> io::Result<(PathBuf, bool)> {
    let user = user_dir()?;
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id();
    if let Some((pid, dir)) = made.as_ref() {
        if *pid == me {
            return Ok((dir.clone(), false));
        }
    }
    private(&user)?;
    let dir = user.join(me.to_string());
    set_aside_earlier(&dir);
    private(&dir)?;
    let header = make_process_file(&dir)?;
    // Before the template is written: a tracepoint registered from now on
    // rewrites it (see `registry::on_register`).
    crate::registry::on_register(rewrite_template);
    write_template(&dir, header)?;
    if made.is_none() {
        // SAFETY: `extern "C"` functions valid for the life of the
        // process; registering them has no other effect.
        unsafe {
            libc::atexit(remove_at_exit);
            libc::pthread_atfork(None, None, Some(forget_process_after_fork));
        }
    }
    // Release: pairs with the Acquire of `process()`: the header is whole.
    PROCESS.store(std::ptr::from_ref(header).cast_mut(), Ordering::Release);
    *made = Some((me, dir.clone()));
    Ok((dir, true))
}

/// A directory of this pid left by an earlier process (it died, and its
/// pid was reused, or this is a forked child of a process that had one,
/// which never happens: a child's pid is new) is renamed
/// `<pid>-<its start time>` so that its rings stay recoverable and apart
/// from this process's.
fn set_aside_earlier(dir: &Path) {
    if std::fs::symlink_metadata(dir).is_err() {
        return;
    }
    let earlier = read_checked(&dir.join(PROCESS_FILE), PROCESS_FILE_MAX)
        .ok()
        .and_then(|b| ProcessHeader::read(&b).ok())
        .map_or(0, |h| h.start_time);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 0..100u64 {
        let to = dir.with_file_name(format!("{name}-{}", earlier + n));
        if std::fs::symlink_metadata(&to).is_err() && std::fs::rename(dir, &to).is_ok() {
            return;
        }
    }
}

/// This process's process file, if its directory was made.
pub(crate) fn process() -> Option<&'static ProcessHeader> {
    // Acquire: pairs with the Release store of `process_dir`.
    let p = PROCESS.load(Ordering::Acquire);
    // SAFETY: a mapping leaked by `make_process_file`, never unmapped, that
    // holds a written header.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Creates the process file in `dir` (a page, mapped shared, never
/// unmapped) and writes its header.
fn make_process_file(dir: &Path) -> io::Result<&'static ProcessHeader> {
    let m = Mapping::create(&dir.join(PROCESS_FILE), 4096)?;
    let (counter, mono) = crate::clock::anchor();
    let mut program = [0u8; 64];
    let name = crate::sys::program_name();
    let k = name.len().min(63);
    program[..k].copy_from_slice(&name.as_bytes()[..k]);
    let h = ProcessHeader {
        magic: PROCESS_MAGIC,
        version: PROCESS_VERSION,
        header_size: size_of::<ProcessHeader>() as u32,
        pid: std::process::id(),
        clock_source: u32::from(crate::clock::source_code()),
        start_time: crate::sys::start_time(std::process::id()),
        boot_id: crate::sys::boot_id(),
        uuid: crate::sys::new_uuid(),
        program,
        anchor_counter: counter,
        anchor_mono_ns: mono as i64 as u64,
        calib: Default::default(),
        calib_at: AtomicU32::new(0),
        mode: AtomicU32::new(u32::from(
            crate::knobs::mode() == crate::knobs::Mode::Discard,
        )),
        dropped_no_ring: AtomicU64::new(0),
        dropped_no_memory: AtomicU64::new(0),
        lost_exited: AtomicU64::new(0),
        reader: AtomicU32::new(0),
        unshared_rings: AtomicU32::new(0),
    };
    // SAFETY: the mapping is a page, zeroed, page-aligned: room for the
    // header, aligned for it; nothing else writes there yet.
    let header = unsafe {
        let p = m.as_ptr().cast::<ProcessHeader>();
        std::ptr::write(p, h);
        &*p
    };
    std::mem::forget(m);
    calibrate(header);
    Ok(header)
}

/// Writes the metadata template again, when this process has shared rings:
/// a tracepoint registered at run time ([`crate::registry::register`],
/// which calls this as its `on_register` hook) is then described to `tape recover`, `record` and `pipe` as the others.
pub(crate) fn rewrite_template() -> io::Result<()> {
    let made = MADE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match (made, process()) {
        (Some((pid, dir)), Some(header)) if pid == std::process::id() => {
            write_template(&dir, header)
        }
        _ => Ok(()),
    }
}

/// Adds `saved` (a latency snapshot just saved) to this process's list of
/// them, when it has a directory of shared rings: a line, appended whole
/// by one `write` (`O_APPEND`), so that a reader sees whole lines or none.
/// Called by the snapshot thread, never on the emit path.
pub(crate) fn note_snapshot(saved: &Path) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let made = MADE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some((pid, dir)) = made else {
        return Ok(());
    };
    let path = saved.as_os_str().as_bytes();
    if pid != std::process::id() || path.contains(&b'\n') {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(SNAPSHOTS_FILE))?;
    if f.metadata()?.len() + path.len() as u64 >= SNAPSHOTS_FILE_MAX {
        return Ok(());
    }
    let mut line = path.to_vec();
    line.push(b'\n');
    f.write_all(&line)
}

/// The metadata text with holes, beside the rings (written whole, then
/// renamed: a reader never sees half of it).
fn write_template(dir: &Path, h: &ProcessHeader) -> io::Result<()> {
    // One writer at a time, each describing the registry as it is once it
    // holds the lock: threads registering at once (tape-tracing's
    // callsites, first hit on several threads) shared the temporary file,
    // and an older text could be renamed in last, without a tracepoint
    // whose events were then written (a reader: "unknown event id").
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let text = crate::template::metadata(
        h.uuid,
        &[
            ("tape_source", crate::template::Hole::Source),
            ("tape_last_event", crate::template::Hole::LastEvent),
        ],
        // The counts are holes, filled in by the reader, but for the ring
        // files cut so far.
        &crate::metadata::Counts {
            rings_cut: super::cut::REPAIRED.load(std::sync::atomic::Ordering::Relaxed),
            ..Default::default()
        },
    )
    .map_err(io::Error::other)?;
    let tmp = dir.join(format!(".{METADATA_FILE}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, dir.join(METADATA_FILE))
}

/// Writes a new calibration into this process's file (at each ring made
/// and each save: the longer the span from the anchor, the better the
/// frequency a recovery computes when it cannot read the clock itself).
pub(crate) fn calibrate_now() {
    if let Some(h) = process() {
        calibrate(h);
    }
}

fn calibrate(h: &ProcessHeader) {
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let (counter, mono) = crate::clock::monotonic_pair();
    let (real_counter, real) = crate::clock::realtime_pair();
    let at = h.calib_at.load(Ordering::Relaxed) as usize;
    let next = if at == 1 { 2 } else { 1 };
    let c = &h.calib[next - 1];
    c.counter.store(counter, Ordering::Relaxed);
    c.mono_ns.store(mono as i64 as u64, Ordering::Relaxed);
    c.real_counter.store(real_counter, Ordering::Relaxed);
    c.real_ns.store(real as i64 as u64, Ordering::Relaxed);
    // Release: pairs with the Acquire of `ProcessHeader::calibration`.
    h.calib_at.store(next as u32, Ordering::Release);
}

/// Bytes of this process's ring files now (their mappings add and
/// subtract them). Relaxed: a running total checked against the cap.
static SHARED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The most bytes of ring files a process keeps: `TAPE_SHM_MAX` (`4G`),
/// else half the size of the filesystem they are on (a tmpfs: memory).
fn shared_cap(dir: &Path) -> usize {
    static CAP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        // (A bad value stops `init`; a process that did not call it takes
        // the default, said.)
        let asked = crate::knobs::setting("TAPE_SHM_MAX", crate::knobs::parse_size);
        match asked {
            Ok(Some(v)) => return v,
            Ok(None) => {}
            Err(e) => eprintln!("tape: {e}; half the filesystem is taken instead"),
        }
        let Ok(c) = cstring(dir) else {
            return usize::MAX;
        };
        // SAFETY: an all-zero statvfs is a valid value; `c` is a valid
        // path and `st` a valid place for the answer.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return usize::MAX;
        }
        usize::try_from(u128::from(st.f_blocks) * u128::from(st.f_frsize) / 2).unwrap_or(usize::MAX)
    })
}

/// A ring file of `len` bytes at `path` in this process's directory
/// `dir`, if the process's ring files stay within the cap
/// ([`shared_cap`]): past it, an error (the ring is then made in private
/// memory: traced and saved, not recoverable).
pub(crate) fn ring_file(dir: &Path, path: &Path, len: usize) -> io::Result<Mapping> {
    let cap = shared_cap(dir);
    let now = SHARED_BYTES.fetch_add(len, Ordering::Relaxed);
    if now.saturating_add(len) > cap {
        SHARED_BYTES.fetch_sub(len, Ordering::Relaxed);
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "this process's ring files would pass TAPE_SHM_MAX ({cap} bytes; {now} in use): \
                 rings of later threads are made in private memory (traced and saved, not \
                 recoverable)"
            ),
        ));
    }
    match Mapping::create(path, len) {
        Ok(mut m) => {
            m.counted = true;
            Ok(m)
        }
        Err(e) => {
            SHARED_BYTES.fetch_sub(len, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// A file mapped shared and read-write, removed (and unmapped) when
/// dropped.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    path: PathBuf,
    /// Whether dropping it removes the file (not in a forked child: the
    /// file is the parent's).
    owns_file: std::sync::atomic::AtomicBool,
    /// Counted in [`SHARED_BYTES`] (a ring file of this process).
    counted: bool,
    /// Its slot in the table of mappings a cut file is answered for
    /// ([`super::cut`]), if it got one.
    cut_slot: Option<usize>,
}

// SAFETY: the mapping is plain memory owned by this value; sharing it
// between threads is what the ring's own protocol governs.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

impl Mapping {
    /// Creates `path` (which must not exist; mode 0600) of `len` bytes,
    /// reserves its space, maps it and writes every page once.
    pub(crate) fn create(path: &Path, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an empty mapping",
            ));
        }
        let c = cstring(path)?;
        // SAFETY: a valid NUL-terminated path; the flags create a new file
        // only (O_EXCL), not following a link planted at its name.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                0o600,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fail = |e: io::Error| {
            // SAFETY: `fd` is ours and open; `c` names the file we created.
            unsafe {
                libc::close(fd);
                libc::unlink(c.as_ptr());
            }
            e
        };
        let size = libc::off_t::try_from(len)
            .map_err(|_| fail(io::Error::new(io::ErrorKind::InvalidInput, "too large")))?;
        // SAFETY: `fd` is open for writing.
        let r = unsafe { libc::posix_fallocate(fd, 0, size) };
        if r != 0 {
            return Err(fail(io::Error::from_raw_os_error(r)));
        }
        // SAFETY: a new shared mapping of `len` bytes of the open file,
        // at an address the kernel chooses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(fail(io::Error::last_os_error()));
        }
        // Listed for a cut of the file (`super::cut`): its inode, to know
        // it again at its path.
        // SAFETY: an all-zero stat is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open; `st` is valid for writing.
        let cut_slot = (unsafe { libc::fstat(fd, &mut st) } == 0)
            .then(|| super::cut::add(p as usize, len, &c, st.st_dev, st.st_ino, true))
            .flatten();
        // SAFETY: the mapping holds its own reference to the file.
        unsafe { libc::close(fd) };
        let ptr = NonNull::new(p.cast::<u8>()).expect("mmap does not return null on success");
        // Every page written once now, so the emit path takes no fault.
        // SAFETY: `sysconf` has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(1);
        let mut at = 0;
        while at < len {
            // SAFETY: `at < len`, inside the mapping just made, writable.
            unsafe { std::ptr::write_volatile(ptr.as_ptr().add(at), 0) };
            at += page;
        }
        Ok(Mapping {
            ptr,
            len,
            path: path.to_path_buf(),
            owns_file: std::sync::atomic::AtomicBool::new(true),
            counted: false,
            cut_slot,
        })
    }

    /// Maps the ring file `path` of another process: copy-on-write for a
    /// dead one's (what this process writes stays its own), or `shared`
    /// with a running one (a reader's pins and claims reach the owner);
    /// the file is never removed. It must be a regular file of this
    /// user's, of at least `HEADER_SPACE` bytes.
    pub fn open_file(path: &Path, shared: bool) -> io::Result<Mapping> {
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
        let named = |e: String| io::Error::other(format!("{}: {e}", path.display()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(shared)
            // No wait on a FIFO planted in place of a ring file.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| named(e.to_string()))?;
        let meta = f.metadata().map_err(|e| named(e.to_string()))?;
        if !meta.file_type().is_file() {
            return Err(named("not a regular file".into()));
        }
        if meta.uid() != crate::sys::euid() {
            return Err(named(format!(
                "owned by uid {}, not this user ({})",
                meta.uid(),
                crate::sys::euid()
            )));
        }
        let len = usize::try_from(meta.len()).map_err(|_| named("too large".into()))?;
        if len < HEADER_SPACE {
            return Err(named(format!(
                "{len} bytes, shorter than a ring file's header ({HEADER_SPACE})"
            )));
        }
        use std::os::fd::AsRawFd as _;
        // SAFETY: a mapping of `len` bytes of the open file (opened for
        // writing when shared), at an address the kernel chooses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                if shared {
                    libc::MAP_SHARED
                } else {
                    libc::MAP_PRIVATE
                },
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(named(io::Error::last_os_error().to_string()));
        }
        let cut_slot = cstring(path)
            .ok()
            .and_then(|c| super::cut::add(p as usize, len, &c, meta.dev(), meta.ino(), false));
        Ok(Mapping {
            ptr: NonNull::new(p.cast::<u8>()).expect("mmap does not return null on success"),
            len,
            path: path.to_path_buf(),
            owns_file: std::sync::atomic::AtomicBool::new(false),
            counted: false,
            cut_slot,
        })
    }

    /// The start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it maps no byte (never: a mapping holds at least a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file behind it.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether its file was cut under it while read (`super::cut`): its
    /// pages are zeros since.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut_slot.is_some_and(super::cut::is_cut)
    }
}

impl Mapping {
    /// In a forked child, for a ring it drops: the file is the parent's,
    /// not to be removed.
    pub(crate) fn forget_file(&self) {
        self.owns_file
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// In a forked child: the file is the parent's. Its contents are copied
    /// into private memory at the same address (the child's writes no
    /// longer reach the parent's ring), and dropping the mapping will not
    /// remove the file. Only system calls and copies: fit for an `atfork`
    /// child handler. If private memory cannot be had, the mapping is left
    /// shared and `false` returned.
    pub(crate) fn detach_after_fork(&self) -> bool {
        self.owns_file
            .store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(i) = self.cut_slot {
            // The file is the parent's: nothing of it to repair here.
            super::cut::remove(i);
        }
        let (addr, len) = (self.ptr.as_ptr(), self.len);
        let anon = |at: *mut libc::c_void, fixed: libc::c_int| {
            // SAFETY: an anonymous private mapping; with MAP_FIXED it
            // replaces exactly this mapping's pages, which the caller owns.
            unsafe {
                libc::mmap(
                    at,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
                    -1,
                    0,
                )
            }
        };
        let tmp = anon(std::ptr::null_mut(), 0);
        if tmp == libc::MAP_FAILED {
            return false;
        }
        // SAFETY: both regions are `len` bytes, mapped, distinct.
        unsafe { std::ptr::copy_nonoverlapping(addr, tmp.cast::<u8>(), len) };
        let r = anon(addr.cast(), libc::MAP_FIXED);
        let ok = r != libc::MAP_FAILED;
        if ok {
            // SAFETY: as above; `addr` is now private memory of `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(tmp.cast::<u8>(), addr, len) };
        }
        // SAFETY: `tmp` was mapped above with this length.
        unsafe { libc::munmap(tmp, len) };
        ok
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(i) = self.cut_slot {
            super::cut::remove(i);
        }
        // SAFETY: the mapping was made by `create` with this length and is
        // unmapped only here; nothing borrows from it past its owner.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        if self.counted {
            SHARED_BYTES.fetch_sub(self.len, Ordering::Relaxed);
        }
        if !self.owns_file.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Ok(c) = cstring(&self.path) {
            // SAFETY: a valid path; a file already gone is no error here.
            unsafe { libc::unlink(c.as_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn private_tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tape-shm-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn a_mapping_is_a_private_file_shared_with_readers_and_removed_when_dropped() {
        let d = private_tmp("map");
        let path = d.join("ring-1-0");
        let m = Mapping::create(&path, 3 * 4096 + 100).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 3 * 4096 + 100);
        assert_eq!(meta.mode() & 0o777, 0o600);
        // SAFETY: inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), m.as_ptr(), 8) };
        // Another reader of the file (as another process would) sees it.
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], &MAGIC);
        assert!(bytes[8..].iter().all(|&b| b == 0));
        // The name is taken: no second mapping over it, no link followed.
        assert_eq!(
            Mapping::create(&path, 4096).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(m.len(), 3 * 4096 + 100);
        assert_eq!(m.path(), path);
        drop(m);
        assert!(!path.exists(), "removed with the mapping");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn bad_requests_are_errors() {
        let d = private_tmp("bad");
        assert!(Mapping::create(&d.join("empty"), 0).is_err());
        assert!(Mapping::create(&d.join("no/such/dir/ring"), 4096).is_err());
        assert!(!d.join("empty").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_process_directory_is_private() {
        let base = private_tmp("dir");
        std::env::set_var("TAPE_SHM_DIR", &base);
        let (dir, _) = process_dir().unwrap();
        std::env::remove_var("TAPE_SHM_DIR");
        assert!(dir.ends_with(std::process::id().to_string()));
        for d in [&dir, &dir.parent().unwrap().to_path_buf()] {
            let m = std::fs::symlink_metadata(d).unwrap();
            assert_eq!(m.mode() & 0o777, 0o700, "{}", d.display());
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_header_layout_is_fixed() {
        // Readers of other builds rely on it: a change needs a new VERSION.
        assert_eq!(std::mem::size_of::<FileHeader>(), 8 + 4 * 4 + 8 * 8 + 64);
        assert!(std::mem::size_of::<FileHeader>() <= HEADER_SPACE);
    }
}
