//! Shared mappings for rings (`TAPE_SHM=on`, [`crate::Config::shared_rings`];
//! issue 16, first slice): each ring a file in a directory of this process,
//! mapped shared, so that another process can read the ring while the
//! program runs (`tape pipe`, to come) and after it died (`tape recover`, to
//! come), with no daemon, as LTTng-UST's `--shm-path` buffers. A ring's
//! region has the same layout on the heap (without `TAPE_SHM`), so the
//! ring's code is one.
//!
//! ```text
//!  /dev/shm/tape-<uid>/<pid>/          mode 0700, checked (owner, no link)
//!      ring-<tid>-<n>                  mode 0600, one per ring:
//!      +--------------------+  0
//!      | FileHeader         |  magic "TAPERING", version, sizes, offsets
//!      +--------------------+  4096
//!      | the ring's parts   |  head, drop counters, gate, slot metadata
//!      | (at the offsets    |  and the packet memory, each at the offset
//!      |  the header gives) |  the header gives
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
//! the emit path takes no page fault.
//!
//! Only this user can read the rings: the directory is 0700 and checked as
//! the control socket's is ([`crate::control::server::ensure_private_dir`]),
//! the files 0600.
//!
//! A normal exit removes the directory; a death leaves it. A forked child
//! copies its own ring into private memory ([`Mapping::detach_after_fork`])
//! and never removes the parent's files.
//!
//! Still to do (issue 16, the sessions that follow): the trace's metadata
//! text beside the rings; the clock calibration in the header; `tape
//! recover` (the crash dump's packet walk over the files of a dead
//! process), `tape ps --dead` and a size/age limit, `tape pipe` and `tape
//! record` on the same files; then shared rings by default.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// First bytes of a ring file.
pub(crate) const MAGIC: [u8; 8] = *b"TAPERING";
/// Layout version of [`FileHeader`] and the parts after it.
pub(crate) const VERSION: u32 = 1;
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

/// Says once on stderr why shared rings could not be made (the rings then
/// live on the heap, as without `TAPE_SHM`).
pub(crate) fn say_once(e: &io::Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!("tape: rings in private memory, not shared (TAPE_SHM): {e}");
    });
}

/// The directory made for this process's rings, and the process it is
/// for (a forked child inherits the record, not the directory).
static MADE: std::sync::Mutex<Option<(u32, PathBuf)>> = std::sync::Mutex::new(None);

/// At a normal exit: the process's ring directory goes (a death leaves it
/// for `tape recover`). Registered with `atexit` by the first shared ring.
extern "C" fn remove_at_exit() {
    let made = MADE.lock().map(|m| m.clone()).unwrap_or(None);
    if let Some((pid, dir)) = made {
        if pid == std::process::id() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The directory of this process's shared rings, if it made one.
pub(crate) fn current_dir() -> Option<PathBuf> {
    let made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    made.as_ref()
        .filter(|(pid, _)| *pid == std::process::id())
        .map(|(_, d)| d.clone())
}

/// The directory of this process's ring files (created 0700 and checked).
pub(crate) fn process_dir() -> io::Result<PathBuf> {
    let base = match std::env::var_os("TAPE_SHM_DIR") {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
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
    let user = base.join(format!("tape-{}", crate::control::server::euid()));
    let private = |d: &Path| {
        crate::control::server::ensure_private_dir(d)
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.message().to_owned()))
    };
    private(&user)?;
    let dir = user.join(std::process::id().to_string());
    private(&dir)?;
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if made
        .as_ref()
        .is_none_or(|(pid, _)| *pid != std::process::id())
    {
        if made.is_none() {
            // SAFETY: an `extern "C"` function valid for the life of the
            // process; registering it has no other effect.
            unsafe { libc::atexit(remove_at_exit) };
        }
        *made = Some((std::process::id(), dir.clone()));
    }
    Ok(dir)
}

/// A file mapped shared and read-write, removed (and unmapped) when
/// dropped.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    path: PathBuf,
    /// Whether dropping it removes the file (not in a forked child: the
    /// file is the parent's).
    owns_file: std::sync::atomic::AtomicBool,
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
        })
    }

    /// The start of the mapping.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The file behind it.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
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
        // SAFETY: the mapping was made by `create` with this length and is
        // unmapped only here; nothing borrows from it past its owner.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
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
        let dir = process_dir().unwrap();
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
