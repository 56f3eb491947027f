//! Filters set on tracepoints (`TAPE_FILTER`, `tape ctl PID filter`,
//! [`set`]): installed in the tracepoint's slot with its FILTER bit, kept
//! for the process's life once replaced (an emit may still read one), and
//! the keys of the latency tracer's wakeup pairs, read with the filter's
//! own field walk.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::compile::{pointed, Context, Filter, Leaf};
use super::layout::{locate, read_uint};
use crate::error::{Error, ErrorKind};
use crate::field::Encode;
use crate::point::{Tracepoint, FILTER, RECORD};
use crate::registry;

/// Filters replaced or cleared: kept, never freed (a thread may be
/// evaluating one; they are small and set by hand), and counted.
pub(super) static REPLACED: Mutex<Vec<&'static Filter>> = Mutex::new(Vec::new());

/// Sets the filter `expr` on every tracepoint that `pattern` selects (a
/// name, a glob, a `/regex/`): each then records only the events that
/// match. The expression is checked against each tracepoint's fields
/// before any filter is set; returns how many tracepoints got it.
pub fn set(pattern: &str, expr: &str) -> Result<usize, Error> {
    set_warned(pattern, expr).map(|(n, _)| n)
}

/// [`set`], and the [`Filter::warnings`] of the filters set (each once,
/// naming its tracepoint).
pub fn set_warned(pattern: &str, expr: &str) -> Result<(usize, Vec<String>), Error> {
    let points = registry::select(pattern)?;
    let compiled: Vec<(&'static Tracepoint, Filter)> = points
        .iter()
        .map(|tp| Filter::new(tp, expr).map(|f| (*tp, f)))
        .collect::<Result<_, _>>()?;
    let n = compiled.len();
    let mut warnings: Vec<String> = Vec::new();
    for (tp, f) in compiled {
        for w in f.warnings() {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
        install(tp, Some(Box::leak(Box::new(f))));
    }
    registry::changed();
    Ok((n, warnings))
}

/// Removes the filter of every tracepoint that `pattern` selects; returns
/// how many had one.
pub fn clear(pattern: &str) -> Result<usize, Error> {
    let points = registry::select(pattern)?;
    let n = points.into_iter().filter(|tp| install(tp, None)).count();
    registry::changed();
    Ok(n)
}

/// Puts `f` in place of `tp`'s filter; whether it had one.
pub(super) fn install(tp: &'static Tracepoint, f: Option<&'static Filter>) -> bool {
    let new = f.map_or(std::ptr::null_mut(), |f| (f as *const Filter).cast_mut());
    // Release: pairs with the Acquire in `emit_filtered`; the filter is
    // whole before a thread can see it.
    let old = tp.filter.swap::<Filter>(new, Ordering::AcqRel);
    tp.update(FILTER, !new.is_null());
    if old.is_null() {
        return false;
    }
    // SAFETY: filters are leaked when set (`set`), never freed.
    REPLACED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(unsafe { &*old });
    true
}

/// The filter of `tp`, if it has one.
pub fn get(tp: &'static Tracepoint) -> Option<&'static Filter> {
    let p = tp.filter.load::<Filter>(Ordering::Acquire);
    // SAFETY: filters are leaked when set, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// A field of a tracepoint's events, read from their encoded bytes as a
/// 64-bit key: an integer, enum or float by its value (its bits), a string
/// or text by a hash of its bytes (FNV-1a). The latency tracer's wakeup
/// pairs match two events on such a key (a request id). The path is a
/// filter's (`id`, `hdr.id`, `ids[0]`), compiled by the filter's compiler,
/// so it is read the same way: no allocation, never a panic.
#[derive(Clone, Debug)]
pub struct Key {
    pub(super) filter: Filter,
}

impl Key {
    /// The field `path` of `tp`'s events; an error names `what` (the
    /// tracer asking), the event and the position in the path.
    pub fn new(tp: &'static Tracepoint, path: &str, what: &str) -> Result<Key, Error> {
        let fields = crate::probe::described_fields(tp)?;
        let head = format!("{what}: key of {}", tp.name());
        let path = path.trim();
        let fail = |at: usize, why: String| {
            Error::new(
                ErrorKind::BadFilter,
                pointed(&head, why, path, at.min(path.len())),
            )
        };
        if path.is_empty() {
            return Err(fail(0, "no field named".into()));
        }
        // As a number, else as a string: the first error is the one told
        // (a missing field says so either way).
        let filter = Filter::compile_with(tp.name(), fields, &format!("{path} == 0"), &fail)
            .or_else(|e| {
                Filter::compile_with(tp.name(), fields, &format!("{path} == \"\""), &fail)
                    .map_err(|_| e)
            })?;
        let only = filter.steps.len() == 1 && filter.steps[0].cmp.common.is_none();
        if !only {
            return Err(fail(
                0,
                "a key is one field of the event (not a common field, not an expression)".into(),
            ));
        }
        Ok(Key { filter })
    }

    /// The key of the event whose encoded fields are `payload`, if the
    /// field can be read there.
    pub fn read(&self, payload: &[u8]) -> Option<u64> {
        let c = &self.filter.steps.first()?.cmp;
        let at = c
            .fixed
            .or_else(|| locate(&self.filter.root, &c.path, payload))?;
        let bytes = payload.get(at..)?;
        let fnv = |b: &[u8]| {
            b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
                (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        match c.leaf {
            Leaf::UInt(n) | Leaf::Enum { size: n, .. } | Leaf::Float(n) => read_uint(bytes, n),
            Leaf::SInt(n) => read_uint(bytes, n).map(|v| {
                let shift = 64 - 8 * n as u32;
                (((v << shift) as i64) >> shift) as u64
            }),
            Leaf::Str => memchr::memchr(0, bytes).map(|end| fnv(&bytes[..end])),
            Leaf::Text(n) => {
                let b = bytes.get(..n)?;
                let end = b.iter().position(|&x| x == 0).unwrap_or(n);
                Some(fnv(&b[..end]))
            }
        }
    }
}

/// Events of `tp` its filter rejected (not recorded, not lost), over every
/// thread.
pub fn rejected(tp: &'static Tracepoint) -> u64 {
    crate::ring::rejected(usize::from(tp.id()))
}

/// Records an event of a tracepoint with a filter (the cold path that
/// `tracepoint!` generates calls it): encoded in the ring, tested, and
/// published only if it matches.
#[doc(hidden)]
#[inline(never)]
pub fn emit_filtered<P: Encode>(tp: &'static Tracepoint, state: u64, payload: P) {
    if state & RECORD == 0 {
        return;
    }
    let Some(f) = get(tp) else {
        return crate::ring::emit(state, payload);
    };
    let keep = |bytes: &[u8], ring: &crate::ring::Ring| {
        f.matches(bytes, &Context::of(Some(ring), f.uses_cpu))
    };
    if crate::ring::emit_tested(state, &payload, keep) {
        return;
    }
    crate::ring::emit_if(state, payload, keep);
}
