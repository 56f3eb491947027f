//! A thread's life with its ring: the writer state in a const thread
//! local (what the emit path reads), the ring made at the thread's first
//! enabled event (or [`register_thread`]), closed at its exit, and the
//! fork handlers that keep the list of rings consistent in a child.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::buffer::{Backing, Head, Ring};
use super::list::{forget_excess_exited, RINGS};
use super::threads;
use crate::knobs::{self, GEOMETRY};

/// The owner thread's writer state. Plain `Cell`s: only this thread touches
/// them, and a signal handler on this thread is kept out by `busy`.
pub(super) struct Local {
    pub(super) ring: Cell<*const Ring>,
    /// The ring's head, where every commit publishes (the ring's parts lie
    /// in its region: caching the pointer keeps the commit's loads what
    /// they were when the head was a field of the ring).
    pub(super) head: Cell<*const Head>,
    /// Start of the slot being written.
    pub(super) base: Cell<*mut u8>,
    /// Bytes used in the slot.
    pub(super) off: Cell<usize>,
    /// Usable bytes of the slot; 0 while there is no ring, so that the
    /// bounds check sends the first emit to the cold path.
    pub(super) cap: Cell<usize>,
    /// `packet index << 32`.
    pub(super) pos_base: Cell<u64>,
    /// An emit is in progress on this thread.
    pub(super) busy: Cell<bool>,
    /// The thread is exiting: its ring is closed.
    pub(super) gone: Cell<bool>,
    /// The [`GEOMETRY`] for which this thread's ring could not be
    /// allocated (0: none failed).
    pub(super) failed: Cell<u64>,
    /// The thread filter left this thread out: `cap` is 0, so that every
    /// emit comes to the cold path, which counts it as filtered until the
    /// filter lets the thread in again.
    pub(super) filtered: Cell<bool>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            ring: Cell::new(ptr::null()),
            head: Cell::new(ptr::null()),
            base: Cell::new(ptr::null_mut()),
            off: Cell::new(0),
            cap: Cell::new(0),
            pos_base: Cell::new(0),
            busy: Cell::new(false),
            gone: Cell::new(false),
            failed: Cell::new(0),
            filtered: Cell::new(false),
        }
    };
    /// Registered with the ring; its destructor closes the ring at thread exit.
    static EXIT: ExitGuard = const { ExitGuard };
}

pub(super) struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        // `try_with`: LOCAL has no destructor, so it is still reachable here.
        let _ = LOCAL.try_with(|l| {
            let r = l.ring.replace(ptr::null());
            l.head.set(ptr::null());
            // No room (`fits` checks its addition): every later
            // emit takes the cold path, which sees `gone` and counts it.
            l.cap.set(0);
            l.gone.set(true);
            if !r.is_null() {
                // SAFETY: the registry holds an Arc to this ring until it sees
                // `exited`, which we set only now.
                let ring = unsafe { &*r };
                ring.events_at_exit
                    .store(ring.accounted(), Ordering::Relaxed);
                // Release: pairs with the Acquire in `exited()`; every event
                // of this thread (and `events_at_exit`) was published before.
                ring.exited.store(true, Ordering::Release);
                forget_excess_exited();
            }
        });
    }
}

/// The calling thread's writer state (`None` only in the thread's very
/// end). Only the address is taken inside `try_with` (never panics, even
/// during thread-local destruction): a closure this small is always
/// inlined, while a whole emit inside one was outlined by the compiler for
/// larger payloads, costing a call and spills per event.
#[inline(always)]
pub(super) fn local<'a>() -> Option<&'a Local> {
    let l = LOCAL.try_with(|l| l as *const Local).ok()?;
    // SAFETY: LOCAL is const-initialised and has no destructor, so its
    // storage stays valid until this thread ends, which it cannot do while
    // the caller (an emit on this thread) runs; `Local` is not `Sync`, so
    // the reference stays on this thread.
    Some(unsafe { &*l })
}

/// Creates this thread's ring and registers it; false if the ring could not
/// be allocated.
pub(super) fn attach(l: &Local) -> bool {
    let generation = GEOMETRY.load(Ordering::Relaxed);
    let (size, packet) = knobs::ring_geometry();
    let Some(ring) = Ring::new(size, packet) else {
        l.failed.set(generation);
        return false;
    };
    let ring = Arc::new(ring);
    l.base.set(ring.slot_ptr(0));
    l.off.set(0);
    l.cap.set(ring.slot_size);
    l.pos_base.set(0);
    l.head.set(&ring.head.0);
    l.ring.set(Arc::as_ptr(&ring));
    // Touch the exit guard so its destructor runs at thread exit.
    let _ = EXIT.try_with(|_| {});
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        // SAFETY: the three handlers are `extern "C"` functions valid for
        // the life of the process; registering them has no other effect.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_parent),
                Some(after_fork_child),
            )
        };
    });
    RINGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ring.clone());
    // After the push: see `threads::apply_to`.
    threads::apply_to(&ring);
    true
}

// Fork. The child of a multi-threaded process has one thread, a copy of
// every ring, and a copy of the registry's lock, which another thread may
// have held at the instant of the fork. So the forking thread takes the lock
// before the fork (`before_fork`) and releases it on both sides; in the
// child, the rings of the threads that do not exist there are forgotten
// (their events are the parent's to save) and the forking thread's ring is
// kept, with the child's thread id. A ring copied while its owner was in
// the middle of an emit is consistent in the child: a snapshot only reads
// what the last `head.pos` store published. (`tests/fork.rs` hangs without
// these handlers.)
pub(super) type RingsGuard = std::sync::MutexGuard<'static, Vec<Arc<Ring>>>;

thread_local! {
    static FORK_HOLD: std::cell::RefCell<Option<RingsGuard>> =
        const { std::cell::RefCell::new(None) };
}

extern "C" fn before_fork() {
    let guard = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    let _ = FORK_HOLD.try_with(|h| *h.borrow_mut() = Some(guard));
}

extern "C" fn after_fork_parent() {
    let _ = FORK_HOLD.try_with(|h| h.borrow_mut().take());
}

extern "C" fn after_fork_child() {
    let _ = FORK_HOLD.try_with(|h| {
        if let Some(mut rings) = h.borrow_mut().take() {
            let mine = LOCAL.try_with(|l| l.ring.get()).unwrap_or(ptr::null());
            // Shared rings are the parent's files: the child's copy of its
            // own ring becomes private memory, and no file is removed when
            // the child drops a ring.
            for r in rings.iter() {
                if let Backing::Shared(m) = &r.backing {
                    if ptr::eq(Arc::as_ptr(r), mine) {
                        m.detach_after_fork();
                    } else {
                        m.forget_file();
                    }
                }
            }
            rings.retain(|r| ptr::eq(Arc::as_ptr(r), mine));
            // SAFETY: getpid has no preconditions; in the child's only
            // thread, the thread id is the process id.
            let tid = unsafe { libc::getpid() } as u32;
            for r in rings.iter() {
                r.tid.store(tid, Ordering::Relaxed);
                // A save of the parent's that was copying this ring does not
                // exist here: its pin and its claim go.
                r.gate.0.clear_pin();
            }
        }
    });
}

/// Whether the calling thread has a ring: an emit then allocates nothing
/// (the crash dump emits its event only then).
pub(crate) fn has_ring() -> bool {
    LOCAL
        .try_with(|l| !l.ring.get().is_null() && !l.gone.get())
        .unwrap_or(false)
}

/// Creates the calling thread's ring now, so its first event does not
/// allocate (call it before a thread may emit from a signal handler).
pub fn register_thread() {
    let _ = LOCAL.try_with(|l| {
        if l.ring.get().is_null() && !l.gone.get() && !l.busy.get() {
            l.busy.set(true);
            attach(l);
            l.busy.set(false);
        }
    });
}
