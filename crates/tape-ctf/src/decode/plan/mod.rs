//! Decode plans: the metadata compiled into flat operations, so the hot
//! loop of a reader does no lookup by name and builds no value tree.
//!
//! Every sequence length and variant tag is resolved once, when the plan is
//! compiled, to a **slot**: the integer field it names stores its value into
//! that slot when decoded, and the sequence or variant reads it back. The
//! fields the reader itself needs (`magic`, `stream_id`, `content_size`,
//! `packet_size`, `timestamp_begin`, `timestamp_end`, `events_discarded`,
//! the event header's `id`) get well-known slots the same way.
//!
//! Decoded values go to a [`Sink`]: the text sink of `tape show` writes
//! babeltrace2's format straight into its output buffer; `tape check` uses
//! a sink that does nothing.
//!
//! Three shapes are decoded without walking the operation tree, because
//! nearly every real event has them:
//!
//! * **fixed runs** (`FixedRun`): consecutive integers and floats whose
//!   offsets are static; one alignment and one bounds check for all;
//! * **flat scopes** (`ScopePlan::flat`): a struct of fixed runs and
//!   strings, decoded in one loop, and for text compiled to a
//!   `TextProgram` (in `line`) with no sink at all;
//! * **header plans** (`HeaderPlan`): an event header of static layout,
//!   with at most one variant of static layouts (LTTng's compact and large
//!   headers, tape's and DPDK's fixed ones).
//!
//! Each falls back to the general interpreter near the end of a packet's
//! content, which then reports the exact position of an error.
//!
//! ```text
//! mod.rs      the slots, the operations, scope plans, StructPlan
//! compile.rs  the metadata compiled into operations (Compiler)
//! header.rs   event header plans (HeaderPlan, QuickHeader)
//! skip.rs     skip plans: scopes stepped over unread
//! bits.rs     a packet's bits, the interpreter's state, reads at any bit
//! run.rs      the interpreter: operations run, values to a Sink
//! ```

use std::sync::Arc;

use crate::decode::DecodeError;
use crate::{Base, ByteOrder, Encoding, Enum, Struct, Type};

mod bits;
mod compile;
mod header;
mod run;
mod skip;

pub(crate) use bits::*;
pub(crate) use compile::*;
pub(crate) use header::*;
pub(crate) use run::*;
pub(crate) use skip::*;

/// Well-known slots.
pub(crate) const SLOT_MAGIC: usize = 0;
pub(crate) const SLOT_STREAM_ID: usize = 1;
pub(crate) const SLOT_CONTENT_SIZE: usize = 2;
pub(crate) const SLOT_PACKET_SIZE: usize = 3;
pub(crate) const SLOT_TS_BEGIN: usize = 4;
pub(crate) const SLOT_TS_END: usize = 5;
pub(crate) const SLOT_DISCARDED: usize = 6;
pub(crate) const SLOT_SEQ_NUM: usize = 7;
pub(crate) const SLOT_EVENT_ID: usize = 8;
/// tape's `lost_<cause>` packet context fields ([`LOSS_CAUSES`]: of its
/// losses stream, or of each stream in traces made before that stream),
/// in that order from this slot on.
pub(crate) const SLOT_LOST: usize = 9;
const FIRST_FREE_SLOT: usize = SLOT_LOST + LOSS_CAUSES.len();

/// "No value" in a slot.
pub(crate) const NONE: i128 = i128::MIN;

/// How an integer touches the stream clock (§8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClockUse {
    None,
    /// Updates the running clock value (with the N-bit extension rule).
    Update,
}

#[derive(Clone, Debug)]
pub(crate) struct IntOp {
    align: u64,
    pub(crate) size: u32,
    signed: bool,
    pub(crate) order: ByteOrder,
    pub(crate) base: Base,
    clock: ClockUse,
    store: Option<usize>,
    /// The event header's `id` also goes to `SLOT_EVENT_ID`.
    event_id: bool,
    enumeration: Option<Arc<Enum>>,
}

impl IntOp {
    /// Whether it is an unsigned little-endian integer shown in decimal
    /// and nothing else (no clock, slot, id or enumeration).
    pub(crate) fn plain_decimal(&self) -> bool {
        self.order == ByteOrder::Little
            && !self.signed
            && self.base == Base::Decimal
            && self.clock == ClockUse::None
            && self.store.is_none()
            && !self.event_id
            && self.enumeration.is_none()
    }
}

/// One operation of a plan.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A struct member: the name as shown, `", NAME = "`, then the value's
    /// operation.
    Field(Arc<str>, Arc<[u8]>, Box<Op>),
    Int(IntOp),
    Float {
        align: u64,
        bits: u32,
        order: ByteOrder,
    },
    Str,
    /// An integer wider than 64 bits (CTF 1.8 allows any size): read bit
    /// by bit into little-endian bytes, off the hot paths.
    Wide(WideOp),
    Struct {
        align: u64,
        body: Vec<Op>,
    },
    Array {
        align: u64,
        len: Len,
        elem: Box<Op>,
        text: bool,
        min_bits: u64,
    },
    Variant {
        tag: usize,
        options: Vec<(i128, i128, usize)>,
        names: Vec<Arc<str>>,
        bodies: Vec<Op>,
    },
    /// A run of struct members of fixed size and static offsets: one
    /// alignment and one bounds check for all of them.
    Fixed(FixedRun),
}

/// An integer of more than 64 bits: how to read and show it.
#[derive(Clone, Debug)]
pub(crate) struct WideOp {
    pub align: u64,
    pub size: u32,
    pub signed: bool,
    pub order: ByteOrder,
    pub base: Base,
}

/// Consecutive struct members (integers and floats) whose offsets from an
/// aligned start are known when the plan is compiled:
///
/// ```text
///   align(8) ─┬─ u32 a ──┬─ pad ─┬─ u64 b ───────┬─ u5 id ┬─ u27 ts ──┐
///   bit       0          32      64              128      133         160
/// ```
///
/// A member joins the run while its alignment is at most the run's: its
/// padding is then the same wherever the run starts. A string, a sequence,
/// a variant or a more aligned member ends the run.
#[derive(Debug, Clone)]
pub(crate) struct FixedRun {
    pub(crate) align: u64,
    /// Size of the run in bits, padding included.
    pub(crate) bits: u64,
    /// Each member: bit offset from the start, and its `Op::Field`.
    pub(crate) items: Vec<(u64, Op)>,
    /// Whether some member must be read even when values are not wanted
    /// (a length, a tag, the clock, the event id).
    needs_read: bool,
}

#[derive(Debug, Clone)]
pub(crate) enum Len {
    Fixed(u64),
    Slot(usize),
}

/// A compiled scope (one of the six of §6) and the slots it needs.
#[derive(Debug, Default)]
pub(crate) struct ScopePlan {
    pub ops: Vec<Op>,
    /// Whether the scope is one struct of fixed runs and strings only,
    /// which [`run_flat`] decodes without recursion.
    pub flat: bool,
}

impl ScopePlan {
    fn new(ops: Vec<Op>) -> ScopePlan {
        let flat = match ops.as_slice() {
            [Op::Struct { body, .. }] => body.iter().all(|op| match op {
                Op::Fixed(_) => true,
                Op::Field(_, _, inner) => matches!(**inner, Op::Str),
                _ => false,
            }),
            _ => false,
        };
        ScopePlan { ops, flat }
    }
}

/// Decodes a scope: a flat one (see [`ScopePlan::flat`]) in one loop, any
/// other with the general interpreter. Both send the same calls to `sink`.
#[inline]
pub(crate) fn run_scope<S: Sink>(
    scope: &ScopePlan,
    b: &mut Bits<'_>,
    st: &mut State,
    sink: &mut S,
) -> Result<(), RunError> {
    if !scope.flat {
        return run(&scope.ops, b, st, sink);
    }
    let [Op::Struct { align: a, body }] = scope.ops.as_slice() else {
        unreachable!("a flat scope is one struct")
    };
    align(b, *a)?;
    sink.begin_struct();
    for op in body {
        match op {
            Op::Fixed(r) => run_fixed(r, b, st, sink)?,
            Op::Field(name, sep, _) => {
                sink.field_with_text(name, sep);
                run_str(b, sink)?;
            }
            _ => unreachable!("checked by ScopePlan::new"),
        }
    }
    sink.end_struct();
    Ok(())
}

pub use tape_ctf_model::sink::{Discard, Sink, ValueSink};
pub use tape_ctf_model::LOSS_CAUSES;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of fixed steps, folded or not, ends where the two steps
    /// one after the other end, from every starting bit.
    #[test]
    fn folded_fixed_steps_end_where_the_steps_do() {
        let aligns = [1u64, 8, 16, 32, 64];
        let bits = [0u64, 1, 8, 24, 32, 40, 64, 96];
        for &a1 in &aligns {
            for &b1 in &bits {
                for &a2 in &aligns {
                    for &b2 in &bits {
                        let mut plan = Vec::new();
                        Skip::push(&mut plan, Skip::Fixed(a1, b1));
                        Skip::push(&mut plan, Skip::Fixed(a2, b2));
                        let folded = SkipPlan(plan);
                        let apart = SkipPlan(vec![Skip::Fixed(a1, b1), Skip::Fixed(a2, b2)]);
                        for pos in 0..200 {
                            assert_eq!(
                                folded.run(&[], pos, u64::MAX),
                                apart.run(&[], pos, u64::MAX),
                                "({a1}, {b1}) then ({a2}, {b2}) from bit {pos}"
                            );
                        }
                        // The bounds check of the last step covers the first.
                        for end in 0..300 {
                            assert_eq!(folded.run(&[], 7, end), apart.run(&[], 7, end));
                        }
                    }
                }
            }
        }
    }
}

/// One structure compiled on its own, to decode a single encoded value of
/// it: an event's payload held in memory rather than read from a stream
/// (tape's untyped probes see each event this way, before or without any
/// trace). Sequence lengths and variant tags must be members of the
/// structure itself, as they are in every event tape writes.
///
/// ```
/// use tape_ctf::decode::StructPlan;
/// use tape_ctf::{ByteOrder, Field, Integer, Struct, Type, Value};
///
/// let s = Struct::new(vec![
///     Field::new("port", Type::Integer(Integer::unsigned(16))),
///     Field::new("len", Type::Integer(Integer::unsigned(32))),
/// ]);
/// let plan = StructPlan::new(&s, ByteOrder::Little).unwrap();
/// let v = plan.value(&[3, 0, 0xdc, 5, 0, 0]).unwrap();
/// assert_eq!(v.field("len").and_then(Value::as_u64), Some(1500));
/// ```
#[derive(Debug)]
pub struct StructPlan {
    scope: ScopePlan,
    slots: usize,
}

impl StructPlan {
    /// Compiles `s`, whose integers without a byte order of their own are
    /// in `order`. An error says which member cannot be compiled.
    pub fn new(s: &Struct, order: ByteOrder) -> Result<StructPlan, String> {
        let mut c = Compiler::new(order);
        c.push("event.fields", s);
        c.collect_scope()?;
        let scope = c.emit_scope()?;
        Ok(StructPlan {
            scope,
            slots: c.slots(),
        })
    }

    /// Decodes one value from the start of `bytes` into `sink`; returns the
    /// bytes it took. An error gives the bit offset and what is wrong.
    pub fn decode<S: Sink>(&self, bytes: &[u8], sink: &mut S) -> Result<usize, String> {
        let mut b = Bits {
            buf: bytes,
            pos: 0,
            end: (bytes.len() as u64).saturating_mul(8),
        };
        let mut st = State::new(self.slots);
        match run_scope(&self.scope, &mut b, &mut st, sink) {
            Ok(()) => Ok(b.pos.div_ceil(8) as usize),
            Err(RunError(e)) => Err(format!("at bit {}: {}", e.0, e.1)),
        }
    }

    /// Decodes one value from the start of `bytes` as a [`Value::Struct`].
    ///
    /// [`Value::Struct`]: crate::decode::Value::Struct
    pub fn value(&self, bytes: &[u8]) -> Result<crate::decode::Value, String> {
        let mut sink = crate::decode::plan::ValueSink::default();
        self.decode(bytes, &mut sink)?;
        sink.scopes
            .pop()
            .ok_or_else(|| "the structure decoded to nothing".to_owned())
    }
}
