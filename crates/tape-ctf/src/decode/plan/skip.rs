//! Skip plans: stepping over an event's scopes without reading them.

use super::*;

/// How to step over an event's scopes without reading anything: for
/// flat scopes whose members nothing needs (no length, tag, clock or id).
#[derive(Debug)]
pub(crate) struct SkipPlan(pub(super) Vec<Skip>);

#[derive(Debug)]
pub(super) enum Skip {
    /// Align, then advance this many bits.
    Fixed(u64, u64),
    /// A NUL-terminated string.
    Str,
}

impl Skip {
    /// Appends `s` to `plan`, folded into a fixed step before it when the
    /// two make one: alignments are powers of two, so an alignment after
    /// a step that keeps it (`bits` a multiple of it, itself no coarser)
    /// does nothing, and a step of no bits only aligns.
    pub(super) fn push(plan: &mut Vec<Skip>, s: Skip) {
        if let (Some(Skip::Fixed(a1, b1)), Skip::Fixed(a2, b2)) = (plan.last_mut(), &s) {
            if *b1 == 0 {
                (*a1, *b1) = ((*a1).max(*a2), *b2);
                return;
            }
            if *a2 <= *a1 && *b1 % *a2 == 0 {
                *b1 += *b2;
                return;
            }
        }
        plan.push(s);
    }
}

impl SkipPlan {
    /// The skip plan of `scopes` (in decoding order), when they allow one.
    pub(crate) fn new<'a>(scopes: impl IntoIterator<Item = &'a ScopePlan>) -> Option<SkipPlan> {
        let mut v = Vec::new();
        for scope in scopes {
            if !scope.flat {
                return None;
            }
            let [Op::Struct { align, body }] = scope.ops.as_slice() else {
                return None;
            };
            Skip::push(&mut v, Skip::Fixed(*align, 0));
            for op in body {
                match op {
                    Op::Fixed(r) if !r.needs_read => {
                        Skip::push(&mut v, Skip::Fixed(r.align, r.bits))
                    }
                    Op::Field(_, _, inner) if matches!(**inner, Op::Str) => v.push(Skip::Str),
                    _ => return None,
                }
            }
        }
        Some(SkipPlan(v))
    }

    /// The bit position after the event's scopes, from `pos`; `None` when
    /// they go past `end` (the general plan then reports where).
    #[inline]
    pub(crate) fn run(&self, buf: &[u8], mut pos: u64, end: u64) -> Option<u64> {
        for s in &self.0 {
            match *s {
                Skip::Fixed(a, bits) => {
                    pos = ((pos + a - 1) & !(a - 1)) + bits;
                    if pos > end {
                        return None;
                    }
                }
                Skip::Str => {
                    let start = (pos + 7) & !7;
                    let e = ((end / 8) as usize).min(buf.len());
                    let rest = buf.get((start / 8) as usize..e)?;
                    pos = start + (nul(rest)? as u64 + 1) * 8;
                }
            }
        }
        Some(pos)
    }
}
