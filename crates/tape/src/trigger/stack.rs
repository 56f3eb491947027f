//! The `stacktrace` trigger: the emitting thread's call stack, recorded as
//! a `tape.stacktrace` event of return addresses.
//!
//! The stack is walked with the unwinder (`backtrace::trace_unsynchronized`:
//! `_Unwind_Backtrace` on the binary's unwind tables, which works without
//! frame pointers) into an array on the stack: no allocation, no lock (the
//! unwinder finds each object's tables with glibc's lock-free
//! `_dl_find_object`), no system call. The frames of tape itself are
//! skipped: the first address is in the tracepoint's `__hit` (its symbol
//! names the tracepoint), the next in the function that hit it.
//!
//! The addresses are symbolised at read time (`tape show --format ftrace`
//! prints ` => function` lines, as ftrace prints a `<stack trace>`), from
//! the executable named in the trace's `env` (`tape_exe`) and where it was
//! loaded (`tape_exe_base`); addresses in shared libraries stay numbers.
//! Recorded only while tracing is on, like every event. The executable's
//! GNU build id is recorded too (`tape_exe_build_id`), so that a reader
//! symbolises only against the very binary that ran.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::field::Hex;
use crate::ring;

/// Frames recorded at most (the innermost ones).
pub const MAX_FRAMES: usize = 64;

/// Stack traces recorded (or handed to the ring, which counts its drops).
pub(crate) static RECORDED: AtomicU64 = AtomicU64::new(0);

crate::tracepoint! {
    /// The call stack of a thread whose event fired a `stacktrace`
    /// trigger: return addresses, innermost first.
    pub fn stacktrace_event(frames: &[Hex<u64>]) = "tape.stacktrace";
}

/// Records the calling thread's stack (called by `trigger::hit`, through
/// an inlined `Trigger::fire`, which the tracepoint's `__hit` called).
#[inline(never)]
pub(crate) fn record() {
    if !crate::registry::tracing_on() {
        return;
    }
    let mut frames = [Hex(0u64); MAX_FRAMES];
    let mut n = 0;
    // Frames up to this function's own are the unwinder's; the next is
    // `trigger::hit`; then the tracepoint's `__hit`.
    let me = record as *const () as usize;
    let mut skip: Option<usize> = None;
    let mut walk = |f: &backtrace::Frame| {
        match skip {
            None => {
                if f.symbol_address() as usize == me {
                    skip = Some(1);
                }
                return true;
            }
            Some(k) if k > 0 => {
                skip = Some(k - 1);
                return true;
            }
            Some(_) => {}
        }
        if f.ip().is_null() {
            // The unwinder's last frame, past the thread's entry.
            return false;
        }
        frames[n] = Hex(f.ip() as u64);
        n += 1;
        n < MAX_FRAMES
    };
    // SAFETY: `trace_unsynchronized` must not run concurrently with the
    // backtrace crate's other unsynchronised functions in a way that
    // races their global state; on Linux it only calls
    // `_Unwind_Backtrace`, which is thread-safe and keeps no such state.
    unsafe { backtrace::trace_unsynchronized(&mut walk) };
    if skip.is_none() {
        // Our frame was not found (no unwind tables?): record what there
        // is rather than nothing.
        let mut all = |f: &backtrace::Frame| {
            if f.ip().is_null() {
                return false;
            }
            frames[n] = Hex(f.ip() as u64);
            n += 1;
            n < MAX_FRAMES
        };
        // SAFETY: as above.
        unsafe { backtrace::trace_unsynchronized(&mut all) };
    }
    RECORDED.fetch_add(1, Ordering::Relaxed);
    ring::emit(
        stacktrace_event::TRACEPOINT.state(),
        (&frames[..n.min(MAX_FRAMES)],),
    );
}

/// The running executable, as a reader needs it to symbolise addresses:
/// its path, its load bias (0 unless position-independent) and its GNU
/// build id in hex (empty if it has none).
#[derive(Clone, Debug)]
pub struct Executable {
    /// `/proc/self/exe`'s target.
    pub path: String,
    /// What was added to the ELF's addresses when it was loaded.
    pub base: u64,
    /// The `NT_GNU_BUILD_ID` note, in hex.
    pub build_id: String,
}

/// The running executable (computed once).
pub fn executable() -> &'static Executable {
    static EXE: OnceLock<Executable> = OnceLock::new();
    EXE.get_or_init(|| {
        let path = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut found = (0u64, String::new());
        // SAFETY: `first_object` matches dl_iterate_phdr's callback type and
        // only writes through `data`, which points to `found`, alive for the
        // call.
        unsafe {
            libc::dl_iterate_phdr(Some(first_object), (&raw mut found).cast::<c_void>());
        }
        Executable {
            path,
            base: found.0,
            build_id: found.1,
        }
    })
}

/// dl_iterate_phdr's callback: the first object is the executable; takes
/// its load bias and build id, and stops.
extern "C" fn first_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info; `data` is the
    // `(u64, String)` that `executable` passed.
    let (info, out) = unsafe { (&*info, &mut *data.cast::<(u64, String)>()) };
    out.0 = info.dlpi_addr;
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_NOTE {
            continue;
        }
        let start = (info.dlpi_addr + ph.p_vaddr) as *const u8;
        // SAFETY: a PT_NOTE segment is loaded (it lies in a PT_LOAD), so its
        // p_memsz bytes at its address are mapped and readable.
        let notes = unsafe { std::slice::from_raw_parts(start, ph.p_memsz as usize) };
        if let Some(id) = build_id(notes) {
            out.1 = id;
            break;
        }
    }
    1
}

/// The GNU build id among ELF notes, in hex.
fn build_id(mut notes: &[u8]) -> Option<String> {
    let word = |b: &[u8], at: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let pad = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name = notes.get(12..12 + namesz)?;
        let desc_at = 12 + pad(namesz);
        let desc = notes.get(desc_at..desc_at + descsz)?;
        if kind == 3 && name == b"GNU\0" {
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        notes = notes.get(desc_at + pad(descsz)..)?;
    }
    None
}
