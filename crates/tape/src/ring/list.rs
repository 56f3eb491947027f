//! Every ring of the process: the live threads' and the exited ones kept
//! for the next save (at most [`MAX_EXITED_RINGS`]); the mode they all
//! follow.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::buffer::Ring;
use super::outside::Outside;
use super::shm;
use crate::knobs::{self, Mode};

/// Every thread's ring, kept until saved after the thread exits.
pub(super) static RINGS: Mutex<Vec<Arc<Ring>>> = Mutex::new(Vec::new());

/// Switches the mode of every ring, at once (it takes effect at each ring's
/// next packet switch), and says so in the shared rings' process file.
pub fn set_mode(mode: Mode) {
    knobs::set_mode(mode);
    if let Some(p) = shm::process() {
        p.mode
            .store(u32::from(mode == Mode::Discard), Ordering::Relaxed);
    }
}

/// Rings of exited threads kept for the next save, at most. A program whose
/// threads come and go without saves would otherwise keep every ring it ever
/// had; past this many, the oldest exited ring is freed and its events are
/// counted in `EVENTS_LOST_EXITED` (reported by `tape::stats()` and in the
/// trace's `env` block).
pub const MAX_EXITED_RINGS: usize = 256;

/// Frees the oldest exited rings beyond [`MAX_EXITED_RINGS`] (at thread exit,
/// not on the emit path).
pub(super) fn forget_excess_exited() {
    let mut rings = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    let mut excess = rings
        .iter()
        .filter(|r| r.exited())
        .count()
        .saturating_sub(MAX_EXITED_RINGS);
    rings.retain(|r| {
        if excess > 0 && r.exited() {
            excess -= 1;
            let lost = r.events_at_exit.load(Ordering::Relaxed);
            Outside::Exited.lose(lost);
            retire_counts(r);
            return false;
        }
        true
    });
}

/// Every ring, if the registry's lock can be taken within `tries` yields
/// (the crash dump's: it may not wait for a lock the crashing thread holds);
/// `f` runs with the lock held and reads the rings in place.
pub(crate) fn with_rings_for_crash(tries: u32, f: impl FnOnce(&[Arc<Ring>])) -> bool {
    for _ in 0..tries {
        match RINGS.try_lock() {
            Ok(g) => {
                f(&g);
                return true;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                f(&p.into_inner());
                return true;
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }
    false
}

/// Every registered ring.
pub(crate) fn rings() -> Vec<Arc<Ring>> {
    RINGS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Forgets the rings of exited threads that are in `saved` (a save has
/// written them; their memory is freed).
pub(crate) fn release_saved(saved: &[Arc<Ring>]) {
    let mut rings = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    rings.retain(|r| {
        let keep = !(r.exited() && saved.iter().any(|s| Arc::ptr_eq(s, r)));
        if !keep {
            retire_counts(r);
        }
        keep
    });
}

/// Events rejected by event filters in the rings freed so far, by
/// tracepoint id: a ring's counts outlive it.
pub(super) static RETIRED_REJECTED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

pub(super) fn retire_counts(r: &Ring) {
    let mut all = RETIRED_REJECTED.lock().unwrap_or_else(|e| e.into_inner());
    if all.len() < r.rejected.len() {
        all.resize(r.rejected.len(), 0);
    }
    for (sum, c) in all.iter_mut().zip(r.rejected.iter()) {
        *sum += c.load(Ordering::Relaxed);
    }
}

/// Events of tracepoint `id` rejected by its filter, in every ring, freed
/// or not.
pub(crate) fn rejected(id: usize) -> u64 {
    let freed = RETIRED_REJECTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(id)
        .copied()
        .unwrap_or(0);
    freed
        + rings()
            .iter()
            .filter_map(|r| r.rejected.get(id))
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>()
}
