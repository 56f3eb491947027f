//! The tracepoint object and its packed state word.
//!
//! Every tracepoint is a `static` [`Tracepoint`]: a description (name,
//! source location, fields), one `AtomicU64`, the **state word**, that the
//! emit path reads with a single relaxed load, and the list of its probes
//! (see [`crate::probe`]). The word's layout follows DPDK's
//! `rte_trace_point_t` (enable bit, id, size packed in one word), with a bit
//! for each thing a tracepoint can do when it is hit:
//!
//! ```text
//!  63     62     61     60      59     58     57..48   47..32       31..16    15..0
//! +------+------+------+-------+------+------+--------+------------+---------+------+
//! |ACTIVE|PROBES|FILTER|TRIGGER|RECORD|WANTED|reserved| fixed size | reserved|  id  |
//! +------+------+------+-------+------+------+--------+------------+---------+------+
//!   any of  probes  filter trigger events enabled       bytes of the          event id
//!   62..59  attached set   set     recorded by the      fixed-size fields     in the CTF
//!                                          user         (0xffff if larger)    metadata
//! ```
//!
//! **WANTED** is the user's selection (ftrace's `set_event`); **RECORD**
//! is WANTED while tracing is on (ftrace's `tracing_on`): turning tracing
//! off clears every RECORD and keeps every WANTED, so turning it on again
//! records what was enabled, and enabling while it is off takes effect when
//! it is turned on. Only RECORD is an action.
//!
//! **ACTIVE** is set exactly when one of the four bits below it is: the
//! disabled path tests it alone (`state as i64 >= 0` after one relaxed
//! load: one load, one `test`, one branch), so the four are tested at once
//! without a mask that x86 cannot encode in an instruction. Every change
//! recomputes it in the same read-modify-write (`Tracepoint::update`).
//! The enabled path then tests `PROBES | FILTER | TRIGGER` on the register
//! it already holds: clear, the event is only recorded (the path of a
//! tracepoint with no probes, as before probes existed); set, the cold
//! path of [`crate::probe`] runs.
//!
//! Why relaxed is enough: enabling is a hint with no data to publish;
//! a thread that sees the bit late emits its first event a few nanoseconds
//! later, exactly as with DPDK's `__atomic_load_n(.., __ATOMIC_RELAXED)`.
//! The id and size bits are written once, by the registry, before the
//! enable bit can be set (both happen under the registry's lock, and the
//! enable is a read-modify-write on the same word, so a thread that sees the
//! enable bit sees the id in the same load). A probe list is published with
//! its own Release store, which the cold path reads with Acquire.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use crate::field::FieldDesc;

/// Bit 63: one of [`PROBES`], [`FILTER`], [`TRIGGER`], [`RECORD`] is set;
/// the only bit the disabled path tests.
pub const ACTIVE: u64 = 1 << 63;
/// Bit 62: probes (callbacks) are attached.
pub const PROBES: u64 = 1 << 62;
/// Bit 61: a filter is set ([`crate::filter`]).
pub const FILTER: u64 = 1 << 61;
/// Bit 60: a trigger is set ([`crate::trigger`]).
pub const TRIGGER: u64 = 1 << 60;
/// Bit 59: the tracepoint records events into the rings.
pub const RECORD: u64 = 1 << 59;
/// Bit 58: enabled for recording by the user; [`RECORD`] follows it while
/// tracing is on.
pub const WANTED: u64 = 1 << 58;
/// The bits whose union is [`ACTIVE`].
pub const ACTIONS: u64 = PROBES | FILTER | TRIGGER | RECORD;
/// The bits that send an enabled tracepoint to the cold path.
pub const COLD: u64 = PROBES | FILTER | TRIGGER;
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
    /// Its log level, as LTTng numbers them (`loglevel` in the metadata:
    /// 3 error, 4 warning, 6 info, 13 debug line, 14 debug), if it has one
    /// (`tape-tracing`'s, from `tracing`'s level).
    pub loglevel: Option<i32>,
    /// Where it is emitted, as the metadata's `model.emf.uri` (LTTng's
    /// `TRACEPOINT_MODEL_EMF_URI`), if said (`tape-tracing`: the
    /// callsite's `file:line`, which its name leaves out).
    pub emf_uri: Option<&'static str>,
}

/// A tracepoint: a description plus the state word read by the emit path.
#[derive(Debug)]
pub struct Tracepoint {
    state: AtomicU64,
    desc: &'static TracepointDesc,
    /// The attached probes (null: none): a `probe::List`, owned by
    /// [`crate::probe`].
    pub(crate) probes: Slot,
    /// The event filter (null: none): a `filter::Filter`, owned by
    /// [`crate::filter`].
    pub(crate) filter: Slot,
    /// The triggers (null: none): a `trigger::List`, owned by
    /// [`crate::trigger`].
    pub(crate) triggers: Slot,
    /// Its fields' description as a reader sees them (null: not made
    /// yet): a `tape_ctf_model::Struct`, made once by the untyped probe
    /// view ([`crate::probe`]) and never freed.
    pub(crate) described: Slot,
    /// The description of a tracepoint registered at run time whose
    /// fields were given at its first event (null: `desc`'s hold): a
    /// leaked `TracepointDesc`, published once by
    /// [`crate::probe::describe_at_first_event`] and never freed.
    pub(crate) first_event_desc: Slot,
}

/// What a feature above hangs on a tracepoint (its probes, its filter, its
/// triggers): a pointer, null for none. The tracepoint only carries it, so
/// that the model does not import the features; the one module that owns a
/// slot (named at each field) gives it its type, publishes, swaps and frees
/// it, and says what each ordering pairs with.
#[derive(Debug)]
pub(crate) struct Slot(AtomicPtr<()>);

impl Slot {
    const fn empty() -> Slot {
        Slot(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The pointer, as the owner's type.
    #[inline(always)]
    pub(crate) fn load<T>(&self, order: Ordering) -> *mut T {
        self.0.load(order).cast()
    }

    /// Publishes `new`.
    pub(crate) fn store<T>(&self, new: *mut T, order: Ordering) {
        self.0.store(new.cast(), order);
    }

    /// Publishes `new`, returning the pointer it replaces.
    pub(crate) fn swap<T>(&self, new: *mut T, order: Ordering) -> *mut T {
        self.0.swap(new.cast(), order).cast()
    }

    /// Publishes `new` if the slot is empty: `Ok(new)`, or `Err` with
    /// what another thread published first.
    pub(crate) fn publish_once<T>(&self, new: *mut T) -> Result<*mut T, *mut T> {
        // AcqRel on success: releases what `new` points to; Acquire on
        // failure: pairs with the winner's release.
        self.0
            .compare_exchange(
                std::ptr::null_mut(),
                new.cast(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(|_| new)
            .map_err(|p| p.cast())
    }
}

impl Tracepoint {
    /// A disabled tracepoint with this description (used by `tracepoint!`).
    pub const fn new(desc: &'static TracepointDesc) -> Tracepoint {
        Tracepoint {
            state: AtomicU64::new(0),
            desc,
            probes: Slot::empty(),
            filter: Slot::empty(),
            triggers: Slot::empty(),
            described: Slot::empty(),
            first_event_desc: Slot::empty(),
        }
    }

    /// The state word: one relaxed load, the whole cost of a disabled tracepoint.
    #[inline(always)]
    pub fn state(&self) -> u64 {
        // Relaxed: see the module docs; the id bits were set before ENABLED.
        self.state.load(Ordering::Relaxed)
    }

    /// The description (for a run-time tracepoint given its fields at
    /// its first event, with those fields).
    pub fn desc(&self) -> &'static TracepointDesc {
        // Acquire: pairs with the Release of `describe_at_first_event`:
        // the new description is whole.
        let p = self
            .first_event_desc
            .load::<TracepointDesc>(Ordering::Acquire);
        if p.is_null() {
            return self.desc;
        }
        // SAFETY: a non-null slot holds a description leaked by
        // `describe_at_first_event`, never freed nor written again.
        unsafe { &*p }
    }

    /// The dotted name.
    pub fn name(&self) -> &'static str {
        self.desc.name
    }

    /// Whether the tracepoint is enabled for recording (it records while
    /// tracing is on).
    pub fn is_enabled(&self) -> bool {
        self.state() & WANTED != 0
    }

    /// Whether events are recorded now (enabled, and tracing on).
    pub fn is_recording(&self) -> bool {
        self.state() & RECORD != 0
    }

    /// Whether probes are attached.
    pub fn has_probes(&self) -> bool {
        self.state() & PROBES != 0
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

    /// Sets or clears the bits of `bits` (among [`ACTIONS`]) and
    /// recomputes [`ACTIVE`] in the same read-modify-write; returns the old
    /// word.
    pub(crate) fn update(&self, bits: u64, on: bool) -> u64 {
        debug_assert_eq!(bits & !(ACTIONS | WANTED), 0);
        // Relaxed: the action bits publish no data (module docs); a probe
        // list is published by its own Release store before PROBES is set.
        let r = self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                let s = if on { s | bits } else { s & !bits };
                Some(if s & ACTIONS != 0 {
                    s | ACTIVE
                } else {
                    s & !ACTIVE
                })
            });
        match r {
            Ok(old) | Err(old) => old,
        }
    }

    /// Enables or disables recording: sets or clears WANTED, then makes
    /// RECORD follow it ([`Tracepoint::sync_record`]); returns whether
    /// WANTED changed. Lock-free, so a trigger (`enable_event`) can call it
    /// from the emitting thread.
    pub(crate) fn set_enabled(&self, on: bool) -> bool {
        // SeqCst: one total order with the TRACING_ON store and loads of
        // `sync_record` (below).
        let r = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                Some(if on { s | WANTED } else { s & !WANTED })
            });
        let old = match r {
            Ok(old) | Err(old) => old,
        };
        self.sync_record();
        (old & WANTED != 0) != on
    }

    /// Makes RECORD equal WANTED while tracing is on, with no lock: a
    /// trigger's `traceoff` and a control thread's `enable` may race. Each
    /// writer stores its change (WANTED here, TRACING_ON below)
    /// before it syncs, and syncs again until TRACING_ON read after its
    /// read-modify-write is what it used: all SeqCst, so whichever writer
    /// acts last in that order sees the final value, and a writer that
    /// wrote from a stale one sees the change and writes again.
    pub(crate) fn sync_record(&self) {
        loop {
            let tracing = tracing_on_now();
            let _ = self
                .state
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                    let s = if s & WANTED != 0 && tracing {
                        s | RECORD
                    } else {
                        s & !RECORD
                    };
                    Some(if s & ACTIONS != 0 {
                        s | ACTIVE
                    } else {
                        s & !ACTIVE
                    })
                });
            if tracing_on_now() == tracing {
                return;
            }
        }
    }
}

/// Whether a state word asks for anything (the `ACTIVE` bit): the test
/// of the disabled path.
#[inline(always)]
pub fn is_active(state: u64) -> bool {
    (state as i64) < 0
}

/// Whether an active state word only records (no probe, filter or
/// trigger): the enabled path's one extra test, on a register.
#[inline(always)]
pub fn records_only(state: u64) -> bool {
    state & COLD == 0
}

/// The event id in a state word.
#[inline(always)]
pub(crate) fn id_of(state: u64) -> u16 {
    (state & ID_MASK) as u16
}

/// Whether tracing is on (ftrace's `tracing_on`). Written by
/// `registry::set_tracing` and by triggers (`traceon`, `traceoff`), with no
/// lock: see [`Tracepoint::sync_record`] for how RECORD follows it.
static TRACING_ON: AtomicBool = AtomicBool::new(true);

/// Whether tracing is on: enabled tracepoints record.
pub fn tracing_on() -> bool {
    TRACING_ON.load(Ordering::Relaxed)
}

/// [`tracing_on`] in the SeqCst order of [`Tracepoint::sync_record`].
pub(crate) fn tracing_on_now() -> bool {
    TRACING_ON.load(Ordering::SeqCst)
}

/// Sets [`tracing_on`], returning the previous setting; the caller then
/// syncs every tracepoint's RECORD bit.
pub(crate) fn swap_tracing_on(on: bool) -> bool {
    // SeqCst: before every sync that follows, in the order sync_record
    // relies on.
    TRACING_ON.swap(on, Ordering::SeqCst)
}

/// The prefix of the names of traced functions' tracepoints
/// (`#[tape::traced]`): `fn.<module path>.<function>`
/// then one of the suffixes below. The registry selects a function's
/// tracepoints by its name; the model keeps the rule so that both read it.
pub const PREFIX: &str = "fn.";
/// The suffix of an entry's name.
pub const ENTRY: &str = ".entry";
/// The suffix of an exit's name.
pub const EXIT: &str = ".exit";
/// The suffix of a return value's name (`#[tape::traced(ret)]`).
pub const RET: &str = ".ret";

/// The function a traced call's tracepoint name stands for: `fn.a.b.f`
/// for `fn.a.b.f.entry` and `fn.a.b.f.exit`; `None` for other names.
pub fn function_of(name: &str) -> Option<&str> {
    if !name.starts_with(PREFIX) {
        return None;
    }
    name.strip_suffix(ENTRY)
        .or_else(|| name.strip_suffix(EXIT))
        .or_else(|| name.strip_suffix(RET))
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
        loglevel: None,
        emf_uri: None,
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
        assert!(is_active(tp.state()) && records_only(tp.state()));
        assert_eq!(id_of(tp.state()), 513);
        tp.update(PROBES, true);
        assert!(is_active(tp.state()) && !records_only(tp.state()));
        assert!(tp.set_enabled(false));
        assert!(is_active(tp.state()), "probes keep it active");
        tp.update(PROBES, false);
        assert!(!is_active(tp.state()));
        assert_eq!(tp.id(), 513);
        assert_eq!(tp.state() & ACTIONS, 0);
        // RECORD follows WANTED only while tracing is on (the unit tests
        // leave tracing on: the registry's own tests turn it off).
        assert!(tp.set_enabled(true));
        assert!(tp.is_enabled() && tp.is_recording() && is_active(tp.state()));
        tp.update(RECORD, false);
        assert!(tp.is_enabled() && !tp.is_recording() && !is_active(tp.state()));
        tp.sync_record();
        assert!(tp.is_recording() && is_active(tp.state()));
    }
}
