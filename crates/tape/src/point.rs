//! The tracepoint object and its packed state word.
//!
//! Every tracepoint is a `static` [`Tracepoint`]: a description (name,
//! source location, fields) and one `AtomicU64`, the **state word**, that the
//! emit path reads with a single relaxed load. Its layout follows DPDK's
//! `rte_trace_point_t` (enable bit, id, size packed in one word), with room
//! for what later features attach to a tracepoint:
//!
//! ```text
//!  63      62        61       60      59..48     47..32          31..16       15..0
//! +-------+---------+--------+-------+----------+---------------+------------+---------+
//! |ENABLED| PROBES  | FILTER |TRIGGER| reserved | fixed size    | reserved   |   id    |
//! +-------+---------+--------+-------+----------+---------------+------------+---------+
//!   emit    probes    filter   trigger            bytes of the               event id
//!   events  attached  set      set                fixed-size fields          in the CTF
//!                                                 (0xffff if larger)         metadata
//! ```
//!
//! The disabled path tests bit 63 (`state as i64 >= 0` after one relaxed
//! load). Why relaxed is enough: enabling is a hint with no data to publish;
//! a thread that sees the bit late emits its first event a few nanoseconds
//! later, exactly as with DPDK's `__atomic_load_n(.., __ATOMIC_RELAXED)`.
//! The id and size bits are written once, by the registry, before the
//! enable bit can be set (both happen under the registry's lock, and the
//! enable is a read-modify-write on the same word, so a thread that sees the
//! enable bit sees the id in the same load).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::field::FieldDesc;

/// Bit 63: the tracepoint records events.
pub const ENABLED: u64 = 1 << 63;
/// Bit 62: probes (callbacks) are attached (reserved for the probes feature).
pub const PROBES: u64 = 1 << 62;
/// Bit 61: a filter is set (reserved for the filters feature).
pub const FILTER: u64 = 1 << 61;
/// Bit 60: a trigger is set (reserved for the triggers feature).
pub const TRIGGER: u64 = 1 << 60;
const ID_MASK: u64 = 0xffff;
const SIZE_SHIFT: u32 = 32;
const SIZE_MASK: u64 = 0xffff << SIZE_SHIFT;

/// What a tracepoint declaration says about itself, written by `tracepoint!`.
#[derive(Debug)]
pub struct TracepointDesc {
    /// Dotted name, e.g. `app.net.rx`.
    pub name: &'static str,
    /// Source file of the declaration.
    pub file: &'static str,
    /// Source line of the declaration.
    pub line: u32,
    /// Module path of the declaration.
    pub module_path: &'static str,
    /// A fast-path tracepoint (compiled in only with the `fast-path` feature).
    pub fast_path: bool,
    /// Fields, in argument order.
    pub fields: &'static [FieldDesc],
    /// Bytes taken by the fields of fixed size.
    pub fixed_size: usize,
    /// The read-time format (`"pid={pid} prio={prio}"`), if declared.
    pub format: Option<&'static str>,
    /// The event class it belongs to, if any.
    pub class: Option<&'static str>,
}

/// A tracepoint: a description plus the state word read by the emit path.
#[derive(Debug)]
pub struct Tracepoint {
    state: AtomicU64,
    desc: &'static TracepointDesc,
}

impl Tracepoint {
    /// A disabled tracepoint with this description (used by `tracepoint!`).
    pub const fn new(desc: &'static TracepointDesc) -> Tracepoint {
        Tracepoint {
            state: AtomicU64::new(0),
            desc,
        }
    }

    /// The state word: one relaxed load, the whole cost of a disabled tracepoint.
    #[inline(always)]
    pub fn state(&self) -> u64 {
        // Relaxed: see the module docs; the id bits were set before ENABLED.
        self.state.load(Ordering::Relaxed)
    }

    /// The description.
    pub fn desc(&self) -> &'static TracepointDesc {
        self.desc
    }

    /// The dotted name.
    pub fn name(&self) -> &'static str {
        self.desc.name
    }

    /// Whether events are recorded.
    pub fn is_enabled(&self) -> bool {
        is_enabled(self.state())
    }

    /// The event id written in the CTF metadata (valid after registration).
    pub fn id(&self) -> u16 {
        (self.state() & ID_MASK) as u16
    }

    /// `file:line` of the declaration.
    pub fn location(&self) -> String {
        format!("{}:{}", self.desc.file, self.desc.line)
    }

    /// Sets the id and size bits; called once by the registry, before any
    /// enable, under its lock.
    pub(crate) fn set_id(&self, id: u16) {
        let size = self.desc.fixed_size.min(0xffff) as u64;
        let bits = u64::from(id) | (size << SIZE_SHIFT);
        // Relaxed RMW: readers of the id are emitters that first saw ENABLED,
        // which is set later by an RMW on this same word (modification order).
        let _ = self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some((s & !(ID_MASK | SIZE_MASK)) | bits)
            });
    }

    /// Sets or clears the enable bit; returns whether it changed.
    pub(crate) fn set_enabled(&self, on: bool) -> bool {
        // Relaxed: the enable bit publishes no data (module docs).
        let old = if on {
            self.state.fetch_or(ENABLED, Ordering::Relaxed)
        } else {
            self.state.fetch_and(!ENABLED, Ordering::Relaxed)
        };
        (old & ENABLED != 0) != on
    }
}

/// Whether a state word has the enable bit.
#[inline(always)]
pub fn is_enabled(state: u64) -> bool {
    (state as i64) < 0
}

/// The event id in a state word.
#[inline(always)]
pub(crate) fn id_of(state: u64) -> u16 {
    (state & ID_MASK) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    static DESC: TracepointDesc = TracepointDesc {
        name: "t.point",
        file: "f.rs",
        line: 1,
        module_path: "m",
        fast_path: false,
        fields: &[],
        fixed_size: 24,
        format: None,
        class: None,
    };

    #[test]
    fn state_word_packs_id_size_and_enable() {
        let tp = Tracepoint::new(&DESC);
        assert!(!tp.is_enabled());
        tp.set_id(513);
        assert_eq!(tp.id(), 513);
        assert_eq!((tp.state() & SIZE_MASK) >> SIZE_SHIFT, 24);
        assert!(tp.set_enabled(true));
        assert!(!tp.set_enabled(true));
        assert!(is_enabled(tp.state()));
        assert_eq!(id_of(tp.state()), 513);
        assert!(tp.set_enabled(false));
        assert_eq!(tp.id(), 513);
        assert_eq!(tp.state() & (PROBES | FILTER | TRIGGER), 0);
    }
}
