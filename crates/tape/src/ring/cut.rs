//! Ring files cut under their mappings: someone (`truncate -s 4096
//! ring-...`, a full tmpfs reclaimed by hand) shortens a shared ring's file
//! while it is mapped, and the next access to a page past the new end is a
//! `SIGBUS`. Without this module that kills the traced program (with no
//! dump: the crash handler's first step, recording `tape.crash` into the
//! faulting ring, faults again) and the `tape pipe` reading it.
//!
//! Every shared ring mapping is listed in a fixed, lock-free table that a
//! signal handler can read. A `SIGBUS` whose address lies in one of them
//! is answered there, and the faulting access is retried:
//!
//! ```text
//!  owner (the traced program)          reader (tape pipe, record, recover)
//!  ---------------------------         -----------------------------------
//!  reopen the file by its path,        map zero pages (anonymous, private)
//!  same inode? ftruncate it back to    over the mapping: the reader reads
//!  its length: the cut pages come      zeros and, at its next turn, sees
//!  back as zeros, shared again; the    the ring marked cut and ends its
//!  events that were in them are lost   stream at the last packet copied
//!  (said on stderr, counted)           before (said, with the path)
//! ```
//!
//! What cannot be answered (the file replaced by another, its table slot
//! missing, a fault outside any ring) goes to the handler that was there
//! before (tape's crash dump, or the default action).
//!
//! Only async-signal-safe calls run in the handler (`open`, `fstat`,
//! `ftruncate`, `mmap`, `write`, `close`), and only atomics are read.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Mappings the table holds at once; a mapping past it is not covered (a
/// cut then kills as before).
const SLOTS: usize = 4096;
/// Longest path kept (with its NUL); a longer one's mapping is not
/// covered.
const PATH_MAX: usize = 256;

struct Entry {
    /// The mapping's start; 0 when the slot is free. Stored last (Release)
    /// when an entry is made, cleared first when it goes: a handler that
    /// sees a start (Acquire) sees the rest.
    start: AtomicUsize,
    len: AtomicUsize,
    /// Taken (the slot is being filled or is in use).
    taken: AtomicBool,
    /// The file's path, NUL-terminated: bytes a handler reads while it
    /// may run on any thread (so atomics, written before `start`).
    path: [AtomicU8; PATH_MAX],
    dev: AtomicU64,
    ino: AtomicU64,
    /// The traced program's own ring (repaired), else a reader's (fenced).
    owner: AtomicBool,
    /// A cut was met: the reader's view is zero pages now.
    cut: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array
const EMPTY: Entry = Entry {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    taken: AtomicBool::new(false),
    path: [const { AtomicU8::new(0) }; PATH_MAX],
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    owner: AtomicBool::new(false),
    cut: AtomicBool::new(false),
};

static TABLE: [Entry; SLOTS] = [EMPTY; SLOTS];

/// Rings of this program repaired after a cut (the trace's
/// `tape_rings_cut`).
pub(crate) static REPAIRED: AtomicU64 = AtomicU64::new(0);

/// The handler in place before ours.
struct Old(std::cell::UnsafeCell<libc::sigaction>);
// SAFETY: written once, in `install`, before our handler is installed;
// only read after.
unsafe impl Sync for Old {}
// SAFETY: an all-zero sigaction is SIG_DFL with no flags.
static OLD: Old = Old(std::cell::UnsafeCell::new(unsafe { std::mem::zeroed() }));

/// Lists the mapping `[start, start + len)` of the file at `path` (whose
/// inode is `dev`/`ino`); the slot, to [`remove`] it with, or `None` when
/// the table is full.
pub(crate) fn add(
    start: usize,
    len: usize,
    path: &CString,
    dev: u64,
    ino: u64,
    owner: bool,
) -> Option<usize> {
    let bytes = path.as_bytes_with_nul();
    if bytes.len() > PATH_MAX || start == 0 {
        return None;
    }
    install();
    for (i, e) in TABLE.iter().enumerate() {
        if e.taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        for (d, b) in e.path.iter().zip(bytes) {
            d.store(*b, Ordering::Relaxed);
        }
        e.len.store(len, Ordering::Relaxed);
        e.dev.store(dev, Ordering::Relaxed);
        e.ino.store(ino, Ordering::Relaxed);
        e.owner.store(owner, Ordering::Relaxed);
        e.cut.store(false, Ordering::Relaxed);
        // Release: pairs with the Acquire in `find`.
        e.start.store(start, Ordering::Release);
        return Some(i);
    }
    None
}

/// Removes slot `i` (the mapping is about to go).
pub(crate) fn remove(i: usize) {
    if let Some(e) = TABLE.get(i) {
        e.start.store(0, Ordering::Release);
        // Release: the next `add`'s Acquire sees the slot emptied.
        e.taken.store(false, Ordering::Release);
    }
}

/// Whether the mapping of slot `i` met a cut (a reader's: its view is
/// zero pages since).
pub(crate) fn is_cut(i: usize) -> bool {
    TABLE.get(i).is_some_and(|e| e.cut.load(Ordering::Acquire))
}

/// The entry whose mapping holds `addr`.
fn find(addr: usize) -> Option<&'static Entry> {
    TABLE.iter().find(|e| {
        // Acquire: pairs with the Release in `add`.
        let start = e.start.load(Ordering::Acquire);
        start != 0 && addr >= start && addr - start < e.len.load(Ordering::Relaxed)
    })
}

/// Answers a `SIGBUS` at `addr` (module docs); whether the access may be
/// retried. Async-signal-safe.
pub(crate) fn on_sigbus(addr: usize) -> bool {
    let Some(e) = find(addr) else {
        return false;
    };
    let (start, len) = (
        e.start.load(Ordering::Acquire),
        e.len.load(Ordering::Relaxed),
    );
    let mut path = [0u8; PATH_MAX];
    for (d, s) in path.iter_mut().zip(&e.path) {
        *d = s.load(Ordering::Relaxed);
    }
    path[PATH_MAX - 1] = 0;
    let path = path.as_ptr().cast::<libc::c_char>();
    if e.owner.load(Ordering::Relaxed) && repair(e, path, len) {
        REPAIRED.fetch_add(1, Ordering::Relaxed);
        say(
            b"tape: the ring file ",
            path,
            b" was cut while in use (SIGBUS): restored to its size; the events in the cut part \
              are lost\n",
        );
        return true;
    }
    // A reader (or an owner whose file cannot be restored): zero pages in
    // place of the mapping, so that the access goes on; the ring is
    // marked cut for its user to drop.
    // SAFETY: `[start, start + len)` is a mapping of ours (listed in the
    // table until it is unmapped, and unlisted first); replacing it with
    // private anonymous pages leaves the address range valid.
    let p = unsafe {
        libc::mmap(
            start as *mut c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    e.cut.store(true, Ordering::Release);
    if !e.owner.load(Ordering::Relaxed) {
        say(
            b"tape: the ring file ",
            path,
            b" was cut while read (SIGBUS): its stream ends at the last packet read before\n",
        );
    } else {
        say(
            b"tape: the ring file ",
            path,
            b" was cut and replaced while in use (SIGBUS): the ring goes on in private memory\n",
        );
    }
    true
}

/// The owner's repair: the same file (inode) found at its path is grown
/// back to the mapping's length.
fn repair(e: &Entry, path: *const libc::c_char, len: usize) -> bool {
    // SAFETY: `path` is NUL-terminated (the caller's copy).
    let fd = unsafe { libc::open(path, libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is valid for writing.
    let same = unsafe { libc::fstat(fd, &mut st) } == 0
        && st.st_dev == e.dev.load(Ordering::Relaxed)
        && st.st_ino == e.ino.load(Ordering::Relaxed)
        && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
        && usize::try_from(st.st_size).is_ok_and(|s| s < len);
    let grown = same
        && libc::off_t::try_from(len)
            // SAFETY: `fd` is open for writing.
            .is_ok_and(|l| unsafe { libc::ftruncate(fd, l) } == 0);
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    grown
}

/// Writes `a`, the C string `path`, then `b` to stderr (async-signal-safe).
fn say(a: &[u8], path: *const libc::c_char, b: &[u8]) {
    let mut n = 0;
    if !path.is_null() {
        // SAFETY: a NUL-terminated string: read up to its NUL.
        while n < PATH_MAX && unsafe { *path.add(n) } != 0 {
            n += 1;
        }
    }
    for (p, l) in [
        (a.as_ptr(), a.len()),
        (path.cast::<u8>(), n),
        (b.as_ptr(), b.len()),
    ] {
        if l > 0 {
            // SAFETY: `p` is valid for `l` bytes.
            unsafe { libc::write(2, p.cast(), l) };
        }
    }
}

/// Installs the `SIGBUS` handler (once), keeping the one before it.
fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `OLD` is written here only, before our handler is in
        // place; the sigaction structs are valid; the handler is an
        // `extern "C"` function valid for the life of the process.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)
                as libc::sighandler_t;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGBUS, &sa, OLD.0.get());
        }
    });
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe {
        if info.is_null() {
            (0, 0)
        } else {
            ((*info).si_code, (*info).si_addr() as usize)
        }
    };
    if code > 0 && on_sigbus(addr) {
        return;
    }
    // Not ours: the handler before (tape's crash dump, the program's own,
    // or the default action).
    // SAFETY: `OLD` is read-only once installed; calling the previous
    // handler with the kernel's arguments is what it expects; sigaction
    // and raise are async-signal-safe.
    unsafe {
        let old = &*OLD.0.get();
        let h = old.sa_sigaction;
        if h == libc::SIG_IGN {
            return;
        }
        if h == libc::SIG_DFL {
            libc::sigaction(sig, old, std::ptr::null_mut());
            if code <= 0 {
                libc::raise(sig);
            }
            return;
        }
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = std::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(c_int) = std::mem::transmute(h);
            f(sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_outside_every_mapping_is_not_answered() {
        assert!(!on_sigbus(0x10));
        let path = CString::new("/nonexistent/ring").unwrap();
        let i = add(0x1000_0000, 0x1000, &path, 1, 2, true).expect("a slot");
        assert!(find(0x1000_0fff).is_some() && find(0x1000_1000).is_none());
        remove(i);
        assert!(find(0x1000_0000).is_none());
    }
}
