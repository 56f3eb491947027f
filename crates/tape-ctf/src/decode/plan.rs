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

use std::sync::Arc;

use crate::decode::DecodeError;
use crate::{Base, ByteOrder, Encoding, Enum, Struct, Type};

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

/// An event header whose every member has a static offset from its
/// aligned start, for each option of its variant if it has one: LTTng's
/// compact and large headers, tape's and DPDK's fixed ones.
///
/// ```text
///   LTTng compact, align(8):  id:5 │ v.compact.timestamp:27            (32 bits)
///                   id = 31:  id:5 │ pad:3 │ v.extended.id:32 │ v.extended.timestamp:64
/// ```
#[derive(Debug)]
pub(crate) struct HeaderPlan {
    align: u64,
    /// Members before the variant.
    prefix: Vec<HeaderMember>,
    variant: Option<HeaderVariant>,
    /// The most bits any option takes.
    max_bits: u64,
}

/// The variant of a [`HeaderPlan`].
#[derive(Debug)]
struct HeaderVariant {
    /// The slot of its tag.
    tag: usize,
    /// Ranges of tag values, to option indices.
    ranges: Vec<(i128, i128, usize)>,
    /// Per option: where it ends (bits from the header's start) and its members.
    options: Vec<(u64, Vec<HeaderMember>)>,
}

/// One integer of a [`HeaderPlan`], at a static bit offset from the
/// header's start. When the start is a byte boundary and the member lies
/// within 8 bytes, it is read as one little-endian word at `byte`, shifted
/// and masked.
#[derive(Debug)]
struct HeaderMember {
    off: u64,
    op: IntOp,
    /// The one-word read, when the member allows it.
    word: Option<Word>,
}

impl HeaderMember {
    fn new(off: u64, op: IntOp, byte_aligned: bool) -> HeaderMember {
        let (byte, shift) = ((off / 8) as usize, (off % 8) as u32);
        let fits = byte_aligned && op.order == ByteOrder::Little && shift + op.size <= 64;
        let mask = if op.size >= 64 {
            u64::MAX
        } else {
            (1u64 << op.size) - 1
        };
        let word = Word {
            byte,
            shift,
            mask,
            size: op.size,
        };
        HeaderMember {
            off,
            word: (fits && op.size > 0).then_some(word),
            op,
        }
    }

    /// Reads the member of the header starting at bit `start` (its bits
    /// are known to be within the content): the clock, its slot, and the
    /// event id into `id`.
    #[inline(always)]
    fn read(
        &self,
        b: &Bits<'_>,
        start: u64,
        st: &mut State,
        id: &mut i128,
    ) -> Result<(), RunError> {
        let raw = match self.word.and_then(|w| w.read(b.buf, (start / 8) as usize)) {
            Some(v) => v,
            None => {
                let mut bits = Bits {
                    buf: b.buf,
                    pos: start + self.off,
                    end: b.end,
                };
                read_bits(&mut bits, self.op.size, self.op.order)?
            }
        };
        let i = &self.op;
        if i.clock == ClockUse::Update {
            st.update_clock(i.size, raw);
        }
        if i.store.is_none() && !i.event_id {
            return Ok(());
        }
        let value = if i.signed {
            let s = 64 - i.size.clamp(1, 64);
            i128::from(((raw << s) as i64) >> s)
        } else {
            i128::from(raw)
        };
        if let Some(slot) = i.store {
            st.slots[slot] = value;
        }
        if i.event_id {
            *id = value;
        }
        Ok(())
    }
}

impl HeaderPlan {
    /// The header plan of an event header scope, when its layout allows.
    pub(crate) fn new(scope: &ScopePlan) -> Option<HeaderPlan> {
        let [Op::Struct { align: a, body }] = scope.ops.as_slice() else {
            return None;
        };
        let byte_aligned = *a >= 8;
        // Members of fixed runs at their offsets from `base`; `base` must
        // be aligned at least as much as each run.
        let items = |runs: &[Op], base: u64| -> Option<(Vec<HeaderMember>, u64)> {
            let mut out = Vec::new();
            let mut end = base;
            for op in runs {
                let Op::Fixed(r) = op else { return None };
                if r.align > *a {
                    return None;
                }
                let start = (end + r.align - 1) & !(r.align - 1);
                for (off, f) in &r.items {
                    let Op::Field(_, _, inner) = f else {
                        return None;
                    };
                    let Op::Int(i) = &**inner else { return None };
                    out.push(HeaderMember::new(start + off, i.clone(), byte_aligned));
                }
                end = start + r.bits;
            }
            Some((out, end))
        };
        let (fixed, rest) = match body.iter().position(|op| !matches!(op, Op::Fixed(_))) {
            Some(k) => (&body[..k], &body[k..]),
            None => (body.as_slice(), &[][..]),
        };
        let (prefix, prefix_end) = items(fixed, 0)?;
        let mut max_bits = prefix_end;
        let variant = match rest {
            [] => None,
            [Op::Field(_, _, v)] => {
                let Op::Variant {
                    tag,
                    options,
                    bodies,
                    ..
                } = &**v
                else {
                    return None;
                };
                let mut opts = Vec::new();
                for body in bodies {
                    let Op::Struct { align: oa, body } = body else {
                        return None;
                    };
                    if oa > a {
                        return None;
                    }
                    let start = (prefix_end + oa - 1) & !(oa - 1);
                    let (members, end) = items(body, start)?;
                    max_bits = max_bits.max(end);
                    opts.push((end, members));
                }
                Some(HeaderVariant {
                    tag: *tag,
                    ranges: options.clone(),
                    options: opts,
                })
            }
            _ => return None,
        };
        Some(HeaderPlan {
            align: *a,
            prefix,
            variant,
            max_bits,
        })
    }

    /// Decodes the header at `b.pos` and returns the event id (`NONE`
    /// when the header has none); `Ok(None)` when it may go past the end
    /// of the content (the caller then runs the general plan, which finds
    /// where).
    #[inline]
    pub(crate) fn run(&self, b: &mut Bits<'_>, st: &mut State) -> Result<Option<i128>, RunError> {
        let start = (b.pos + self.align - 1) & !(self.align - 1);
        if start + self.max_bits > b.end {
            return Ok(None);
        }
        let mut id = NONE;
        for m in &self.prefix {
            m.read(b, start, st, &mut id)?;
        }
        let mut end = start + self.max_bits;
        if let Some(var) = &self.variant {
            let v = st.slots[var.tag];
            let Some(&(_, _, k)) = var.ranges.iter().find(|(lo, hi, _)| *lo <= v && v <= *hi)
            else {
                return Ok(None);
            };
            let (option_end, members) = &var.options[k];
            for m in members {
                m.read(b, start, st, &mut id)?;
            }
            end = start + option_end;
        }
        b.pos = end;
        Ok(Some(id))
    }
}

/// A [`HeaderPlan`] of the common shape, compiled to straight-line code
/// for the hot loops of `tape show`, `tape stats` and `tape check`: its
/// members are unsigned little-endian words at byte offsets, each one the
/// event id or a clock value, and a variant, if any, is tagged by the id
/// before it. LTTng's compact and large headers, tape's and DPDK's have it:
///
/// ```text
///   LTTng compact:  prefix { id: bits 0..5 }
///                   id 0..=30 → { clock: bits 5..32 },  ends at bit 32
///                   id 31     → { id: bits 8..40, clock: bits 40..104 }
/// ```
#[derive(Debug)]
pub(crate) struct QuickHeader {
    /// The header's alignment in bits (8 at least).
    align: u64,
    max_bits: u64,
    /// Whether some member is the event id.
    has_id: bool,
    prefix: IdClock,
    /// The slot the prefix id goes to (the variant's tag), if any.
    tag_slot: Option<usize>,
    /// The variant's options: tag range, where the option ends (bits from
    /// the header's start) and its members. Empty without a variant.
    options: Vec<QuickOption>,
}

/// One option of a [`QuickHeader`]'s variant.
#[derive(Debug)]
struct QuickOption {
    lo: i128,
    hi: i128,
    end: u64,
    members: IdClock,
}

/// The members of a header part: the event id and a clock value, each
/// maybe.
#[derive(Debug, Default)]
struct IdClock {
    id: Option<Word>,
    clock: Option<Word>,
}

/// A header member: `(u64 at byte) >> shift & mask`, `size` bits.
#[derive(Clone, Copy, Debug)]
struct Word {
    byte: usize,
    shift: u32,
    mask: u64,
    size: u32,
}

impl Word {
    #[inline(always)]
    fn read(&self, buf: &[u8], base: usize) -> Option<u64> {
        let at = base + self.byte;
        let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
        Some((u64::from_le_bytes(b) >> self.shift) & self.mask)
    }
}

impl IdClock {
    /// The members `ms` as an id and a clock, when they are that; `store`
    /// is where the id may go (the tag of a variant after it).
    fn new(ms: &[HeaderMember], store: Option<usize>) -> Option<IdClock> {
        let mut out = IdClock::default();
        for m in ms {
            let w = m.word?;
            let clock = m.op.clock == ClockUse::Update;
            if m.op.signed || m.op.store.is_some() && m.op.store != store {
                return None;
            }
            match (m.op.event_id, clock) {
                (true, false) if out.id.is_none() => out.id = Some(w),
                (false, true) if out.clock.is_none() => out.clock = Some(w),
                _ => return None,
            }
        }
        Some(out)
    }
}

impl QuickHeader {
    /// The quick form of `h`, when it has the shape (see the type's docs).
    pub(crate) fn new(h: &HeaderPlan) -> Option<QuickHeader> {
        if h.align < 8 {
            return None;
        }
        let tag_slot = h.variant.as_ref().map(|v| v.tag);
        let prefix = IdClock::new(&h.prefix, tag_slot)?;
        let mut options = Vec::new();
        if let Some(v) = &h.variant {
            // The tag must be the prefix's id (stored to the tag's slot).
            let id = h.prefix.iter().find(|m| m.op.event_id)?;
            if id.op.store != Some(v.tag) {
                return None;
            }
            for &(lo, hi, k) in &v.ranges {
                let (end, ms) = v.options.get(k)?;
                options.push(QuickOption {
                    lo,
                    hi,
                    end: *end,
                    members: IdClock::new(ms, None)?,
                });
            }
        }
        let has_id = prefix.id.is_some() || options.iter().any(|o| o.members.id.is_some());
        Some(QuickHeader {
            align: h.align,
            max_bits: h.max_bits,
            has_id,
            prefix,
            tag_slot,
            options,
        })
    }

    /// Decodes the header at bit `pos` (aligned first) and returns where it ends and the
    /// event id (`None` when it has no id member). `None` when the header
    /// is near the end of the content or odd: the general plan then
    /// decodes it again (the clock and slot set here get the same values).
    #[inline(always)] // once per event in the hot loops of show, stats and check
    pub(crate) fn run(
        &self,
        buf: &[u8],
        pos: u64,
        end: u64,
        st: &mut State,
    ) -> Option<(u64, Option<u64>)> {
        let start = (pos + self.align - 1) & !(self.align - 1);
        if start + self.max_bits > end {
            return None;
        }
        let base = (start / 8) as usize;
        let mut id = u64::MAX;
        if let Some(w) = &self.prefix.id {
            id = w.read(buf, base)?;
            if let Some(slot) = self.tag_slot {
                st.slots[slot] = i128::from(id);
            }
        }
        if let Some(w) = &self.prefix.clock {
            st.update_clock(w.size, w.read(buf, base)?);
        }
        let mut stop = start + self.max_bits;
        if !self.options.is_empty() {
            let tag = i128::from(id);
            let o = self.options.iter().find(|o| o.lo <= tag && tag <= o.hi)?;
            if let Some(w) = &o.members.id {
                id = w.read(buf, base)?;
            }
            if let Some(w) = &o.members.clock {
                st.update_clock(w.size, w.read(buf, base)?);
            }
            stop = start + o.end;
        }
        // An id of u64::MAX is no event's: the general plan reports it.
        match self.has_id {
            true if id == u64::MAX => None,
            true => Some((stop, Some(id))),
            false => Some((stop, None)),
        }
    }
}

/// How to step over an event's scopes without reading anything: for
/// flat scopes whose members nothing needs (no length, tag, clock or id).
#[derive(Debug)]
pub(crate) struct SkipPlan(Vec<Skip>);

#[derive(Debug)]
enum Skip {
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
    fn push(plan: &mut Vec<Skip>, s: Skip) {
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

/// The bits of a packet being decoded.
pub(crate) struct Bits<'a> {
    pub buf: &'a [u8],
    pub pos: u64,
    pub end: u64,
}

/// State shared by the operations of one stream.
pub(crate) struct State {
    pub slots: Vec<i128>,
    pub clock: u64,
}

impl State {
    pub(crate) fn new(nslots: usize) -> State {
        State {
            slots: vec![NONE; nslots],
            clock: 0,
        }
    }

    fn update_clock(&mut self, size: u32, v: u64) {
        if size >= 64 {
            self.clock = v;
            return;
        }
        let mask = (1u64 << size) - 1;
        if v < self.clock & mask {
            self.clock = self.clock.wrapping_add(mask + 1);
        }
        self.clock = (self.clock & !mask) | v;
    }
}

/// An error in a plan's run: bit offset and message (the reader adds file
/// and packet). Boxed, so that every `Result` of the hot loop fits in a
/// register.
pub(crate) struct RunError(Box<(u64, String)>);

impl RunError {
    pub(crate) fn into_decode(self, file: &std::path::Path, packet: u64) -> DecodeError {
        let (bit, message) = *self.0;
        DecodeError {
            file: file.to_path_buf(),
            packet_offset: packet,
            bit_offset: bit,
            message,
        }
    }
}

#[cold]
fn err(bits: &Bits<'_>, m: impl Into<String>) -> RunError {
    RunError(Box::new((bits.pos, m.into())))
}

#[inline]
fn align(b: &mut Bits<'_>, a: u64) -> Result<(), RunError> {
    if a > 1 {
        // Alignments are powers of two (checked by the parser): a mask, not
        // a division.
        let p = (b.pos + a - 1) & !(a - 1);
        if p > b.end {
            return Err(err(b, "alignment goes past the end of the packet content"));
        }
        b.pos = p;
    }
    Ok(())
}

/// The error of a `size`-bit field that does not fit in the content.
#[cold]
fn past_end(b: &Bits<'_>, size: u32) -> RunError {
    err(
        b,
        format!(
            "a {size}-bit field goes past the end of the packet content (bit {})",
            b.end
        ),
    )
}

/// Advances over `size` bits without reading them.
#[inline]
fn skip(b: &mut Bits<'_>, size: u32) -> Result<(), RunError> {
    let size64 = u64::from(size);
    if b.pos + size64 > b.end {
        return Err(past_end(b, size));
    }
    b.pos += size64;
    Ok(())
}

/// An integer of `size` bits (any size) at `b.pos`, as little-endian
/// bytes of its two's complement (`ceil(size / 8)` of them, the bits past
/// `size` zero). Bit `j` of the value is bit `j` from the field's start
/// for little endian, from its end for big endian (§4.1.5).
#[cold]
fn read_wide(b: &mut Bits<'_>, size: u32, order: ByteOrder) -> Result<Vec<u8>, RunError> {
    let (start, size64) = (b.pos, u64::from(size));
    skip(b, size)?;
    let bit = |p: u64| b.buf[(p / 8) as usize] >> (p % 8) & 1;
    let bit_be = |p: u64| b.buf[(p / 8) as usize] >> (7 - p % 8) & 1;
    let mut v = vec![0u8; size.div_ceil(8) as usize];
    for j in 0..size64 {
        let x = match order {
            ByteOrder::Little => bit(start + j),
            ByteOrder::Big => bit_be(start + size64 - 1 - j),
        };
        v[(j / 8) as usize] |= x << (j % 8);
    }
    Ok(v)
}

#[inline]
fn read_bits(b: &mut Bits<'_>, size: u32, order: ByteOrder) -> Result<u64, RunError> {
    let size64 = u64::from(size);
    if b.pos + size64 > b.end || size > 64 {
        return Err(past_end(b, size));
    }
    let start = b.pos;
    b.pos += size64;
    if let Some(v) = extract(b.buf, start, size, order) {
        return Ok(v);
    }
    // Unaligned: gather the bytes covering [start, start + size) into a u128.
    let first = (start / 8) as usize;
    let last = ((start + size64 - 1) / 8) as usize;
    let mut acc: u128 = 0;
    let shift = start % 8;
    match order {
        ByteOrder::Little => {
            for (k, &x) in b.buf[first..=last].iter().enumerate() {
                acc |= u128::from(x) << (8 * k);
            }
            acc >>= shift;
        }
        ByteOrder::Big => {
            for &x in &b.buf[first..=last] {
                acc = (acc << 8) | u128::from(x);
            }
            let total = ((last - first + 1) * 8) as u64;
            acc >>= total - shift - size64;
        }
    }
    let mask = if size == 64 {
        u128::from(u64::MAX)
    } else {
        (1u128 << size) - 1
    };
    Ok((acc & mask) as u64)
}

/// An integer's value as shown.
pub(crate) enum IntVal<'a> {
    Unsigned(u64),
    Signed(i64),
    Enum(i128, &'a Enum),
}

/// What an integer does once read (the clock, its slots), and its value.
#[inline(always)]
pub(crate) fn int_read<'a>(i: &'a IntOp, raw: u64, st: &mut State) -> IntVal<'a> {
    if i.clock == ClockUse::Update {
        st.update_clock(i.size, raw);
    }
    let signed = |raw: u64| {
        let s = 64 - i.size.clamp(1, 64);
        ((raw << s) as i64) >> s
    };
    if i.store.is_none() && !i.event_id && i.enumeration.is_none() {
        // The common case: no i128 work.
        return if i.signed {
            IntVal::Signed(signed(raw))
        } else {
            IntVal::Unsigned(raw)
        };
    }
    let value: i128 = if i.signed {
        i128::from(signed(raw))
    } else {
        i128::from(raw)
    };
    if let Some(slot) = i.store {
        st.slots[slot] = value;
    }
    if i.event_id {
        st.slots[SLOT_EVENT_ID] = value;
    }
    match &i.enumeration {
        Some(e) => IntVal::Enum(value, e),
        None if i.signed => IntVal::Signed(value as i64),
        None => IntVal::Unsigned(raw),
    }
}

/// What an integer does once read: clock, slots, then the sink.
#[inline(always)]
fn int_value<S: Sink>(i: &IntOp, raw: u64, st: &mut State, sink: &mut S) {
    match int_read(i, raw, st) {
        IntVal::Unsigned(v) => sink.uint(v, i.base, i.size),
        IntVal::Signed(v) => sink.sint(v, i.base, i.size),
        IntVal::Enum(v, e) => sink.enumeration(v, e),
    }
}

/// A float of `bits` (32 or 64) from its raw bits.
#[inline(always)]
pub(crate) fn float_of(bits: u32, raw: u64) -> f64 {
    if bits == 32 {
        f64::from(f32::from_bits(raw as u32))
    } else {
        f64::from_bits(raw)
    }
}

#[inline(always)]
fn float_value<S: Sink>(bits: u32, raw: u64, sink: &mut S) {
    sink.float(float_of(bits, raw));
}

/// `size` bits at bit `p` of `buf`, when one 8-byte load covers them;
/// `None` near the end of the buffer or for a field straddling 9 bytes.
#[inline(always)]
pub(crate) fn extract(buf: &[u8], p: u64, size: u32, order: ByteOrder) -> Option<u64> {
    let i = (p / 8) as usize;
    let sh = (p % 8) as u32;
    if size == 0 || sh + size > 64 {
        return None;
    }
    let w: [u8; 8] = buf.get(i..i + 8)?.try_into().ok()?;
    Some(match order {
        // (`size` is 1 to 64: the mask needs no branch for 64.)
        ByteOrder::Little => (u64::from_le_bytes(w) >> sh) & (u64::MAX >> (64 - size)),
        // Big endian: the field starts `sh` bits below the first byte's
        // most significant bit.
        ByteOrder::Big => (u64::from_be_bytes(w) << sh) >> (64 - size),
    })
}

/// A fixed run: one alignment, one bounds check, then each member at its
/// static offset. Near the end of the content the members are decoded one
/// by one, which gives the exact position of a member that goes past it.
fn run_fixed<S: Sink>(
    run: &FixedRun,
    b: &mut Bits<'_>,
    st: &mut State,
    sink: &mut S,
) -> Result<(), RunError> {
    align(b, run.align)?;
    let start = b.pos;
    if start + run.bits > b.end {
        for (_, op) in &run.items {
            run_op(op, b, st, sink)?;
        }
        return Ok(());
    }
    if !S::WANTS_VALUES && !run.needs_read {
        b.pos = start + run.bits;
        return Ok(());
    }
    for (off, op) in &run.items {
        let Op::Field(name, sep, inner) = op else {
            unreachable!("fixed runs hold fields")
        };
        match &**inner {
            Op::Int(i) => {
                if !S::WANTS_VALUES && i.store.is_none() && !i.event_id && i.clock == ClockUse::None
                {
                    continue;
                }
                let p = start + off;
                let raw = match extract(b.buf, p, i.size, i.order) {
                    Some(v) => v,
                    None => {
                        b.pos = p;
                        read_bits(b, i.size, i.order)?
                    }
                };
                sink.field_with_text(name, sep);
                int_value(i, raw, st, sink);
            }
            Op::Float { bits, order, .. } => {
                if !S::WANTS_VALUES {
                    continue;
                }
                let p = start + off;
                let raw = match extract(b.buf, p, *bits, *order) {
                    Some(v) => v,
                    None => {
                        b.pos = p;
                        read_bits(b, *bits, *order)?
                    }
                };
                sink.field_with_text(name, sep);
                float_value(*bits, raw, sink);
            }
            _ => unreachable!("fixed runs hold integers and floats"),
        }
    }
    b.pos = start + run.bits;
    Ok(())
}

/// Groups the members of a struct body into fixed runs where it can. The
/// body starts aligned to `start_align` (the struct's alignment).
fn fuse(body: Vec<Op>, start_align: u64) -> Vec<Op> {
    let mut out = Vec::new();
    let mut run: Option<FixedRun> = None;
    // Alignment known for the current position when no run is open.
    let mut known = start_align;
    let close = |run: &mut Option<FixedRun>, out: &mut Vec<Op>| {
        if let Some(r) = run.take() {
            out.push(Op::Fixed(r));
        }
    };
    for op in body {
        let fixed = match &op {
            Op::Field(_, _, inner) => match &**inner {
                Op::Int(i) if i.size <= 64 => Some((
                    i.align,
                    u64::from(i.size),
                    i.store.is_some() || i.event_id || i.clock != ClockUse::None,
                )),
                Op::Float { align, bits, .. } => Some((*align, u64::from(*bits), false)),
                _ => None,
            },
            _ => None,
        };
        let Some((a, size, needs)) = fixed else {
            close(&mut run, &mut out);
            known = 1;
            out.push(op);
            continue;
        };
        if run.as_ref().is_some_and(|r| a > r.align) {
            close(&mut run, &mut out);
            known = 1;
        }
        let r = run.get_or_insert_with(|| FixedRun {
            align: a.max(known),
            bits: 0,
            items: Vec::new(),
            needs_read: false,
        });
        let off = (r.bits + a - 1) & !(a - 1);
        r.bits = off + size;
        r.needs_read |= needs;
        r.items.push((off, op));
    }
    close(&mut run, &mut out);
    out
}

/// Runs `ops` on the packet bits, sending values to `sink`.
fn run<S: Sink>(
    ops: &[Op],
    b: &mut Bits<'_>,
    st: &mut State,
    sink: &mut S,
) -> Result<(), RunError> {
    for op in ops {
        // The common members are handled here, without a call per level.
        match op {
            Op::Fixed(r) => run_fixed(r, b, st, sink)?,
            Op::Field(name, sep, inner) => {
                sink.field_with_text(name, sep);
                match &**inner {
                    Op::Str => run_str(b, sink)?,
                    other => run_op(other, b, st, sink)?,
                }
            }
            other => run_op(other, b, st, sink)?,
        }
    }
    Ok(())
}

/// The index of the first NUL of `s`: the first 16 bytes word by word
/// (most strings of a trace are short), the rest with `memchr`.
#[inline(always)]
pub(crate) fn nul(s: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    for k in [0, 8] {
        let Some(w) = s.get(k..k + 8) else { break };
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        // The lowest byte that is zero sets its high bit (exact for the
        // lowest one; higher ones may be false positives).
        let z = w.wrapping_sub(LO) & !w & HI;
        if z != 0 {
            return Some(k + (z.trailing_zeros() / 8) as usize);
        }
        if k == 8 {
            return memchr::memchr(0, &s[16..]).map(|i| i + 16);
        }
    }
    memchr::memchr(0, s)
}

/// A NUL-terminated string at a byte boundary.
#[inline(always)]
fn run_str<S: Sink>(b: &mut Bits<'_>, sink: &mut S) -> Result<(), RunError> {
    align(b, 8)?;
    let start = (b.pos / 8) as usize;
    let end = ((b.end / 8) as usize).min(b.buf.len());
    let rest = b.buf.get(start..end).unwrap_or(&[]);
    let n = nul(rest).ok_or_else(|| {
        err(
            b,
            "a string has no NUL before the end of the packet content",
        )
    })?;
    sink.string(&rest[..n]);
    b.pos += (n as u64 + 1) * 8;
    Ok(())
}

fn run_op<S: Sink>(
    op: &Op,
    b: &mut Bits<'_>,
    st: &mut State,
    sink: &mut S,
) -> Result<(), RunError> {
    match op {
        Op::Field(name, sep, inner) => {
            sink.field_with_text(name, sep);
            run_op(inner, b, st, sink)
        }
        Op::Int(i)
            if !S::WANTS_VALUES
                && i.store.is_none()
                && !i.event_id
                && i.clock == ClockUse::None =>
        {
            align(b, i.align)?;
            skip(b, i.size)
        }
        Op::Float { align: a, bits, .. } if !S::WANTS_VALUES => {
            align(b, *a)?;
            skip(b, *bits)
        }
        Op::Int(i) => {
            align(b, i.align)?;
            let raw = read_bits(b, i.size, i.order)?;
            int_value(i, raw, st, sink);
            Ok(())
        }
        Op::Float {
            align: a,
            bits,
            order,
        } => {
            align(b, *a)?;
            let raw = read_bits(b, *bits, *order)?;
            float_value(*bits, raw, sink);
            Ok(())
        }
        Op::Str => run_str(b, sink),
        Op::Wide(w) if !S::WANTS_VALUES => {
            align(b, w.align)?;
            skip(b, w.size)
        }
        Op::Wide(w) => {
            align(b, w.align)?;
            let v = read_wide(b, w.size, w.order)?;
            sink.wide(&v, w.signed, w.size, w.base);
            Ok(())
        }
        Op::Struct { align: a, body } => {
            align(b, *a)?;
            sink.begin_struct();
            run(body, b, st, sink)?;
            sink.end_struct();
            Ok(())
        }
        Op::Array {
            align: a,
            len,
            elem,
            text,
            min_bits,
        } => {
            let n = match len {
                Len::Fixed(n) => *n,
                Len::Slot(s) => {
                    let v = st.slots[*s];
                    u64::try_from(v).map_err(|_| {
                        err(
                            b,
                            "a sequence length is not an unsigned integer decoded before",
                        )
                    })?
                }
            };
            align(b, *a)?;
            if *text && b.pos % 8 == 0 {
                let bytes = n
                    .checked_mul(8)
                    .filter(|x| b.pos + x <= b.end)
                    .ok_or_else(|| {
                        err(
                            b,
                            format!("a text of {n} bytes goes past the end of the packet content"),
                        )
                    })?;
                let start = (b.pos / 8) as usize;
                let raw = &b.buf[start..start + n as usize];
                let t = raw.split(|&c| c == 0).next().unwrap_or(&[]);
                sink.string(t);
                b.pos += bytes;
                return Ok(());
            }
            let room = b.end - b.pos;
            if (*min_bits > 0 && n > room / min_bits) || (*min_bits == 0 && n > 1 << 20) {
                return Err(err(
                    b,
                    format!("a length of {n} goes past the end of the packet content"),
                ));
            }
            sink.begin_array(n);
            for i in 0..n {
                sink.item(i);
                run_op(elem, b, st, sink)?;
            }
            sink.end_array();
            Ok(())
        }
        Op::Fixed(run) => run_fixed(run, b, st, sink),
        Op::Variant {
            tag,
            options,
            names,
            bodies,
        } => {
            let v = st.slots[*tag];
            let idx = options
                .iter()
                .find(|(lo, hi, _)| *lo <= v && v <= *hi)
                .map(|(_, _, i)| *i)
                .ok_or_else(|| err(b, format!("variant tag value {v} selects no option")))?;
            sink.variant(&names[idx]);
            run_op(&bodies[idx], b, st, sink)?;
            sink.end_variant();
            Ok(())
        }
    }
}

// ------------------------------------------------------------ compiling

/// A field's identity: its scope and the names leading to it.
type FieldId = (&'static str, Vec<String>);

/// Compiles plans for one stream class (and its event classes): resolves
/// paths to slots first, then emits operations.
pub(crate) struct Compiler<'t> {
    trace_order: ByteOrder,
    /// Fields whose value some length or tag needs, and their slot.
    wanted: Vec<(FieldId, usize)>,
    next_slot: usize,
    scopes: Vec<(&'static str, &'t Struct)>,
}

const WELL_KNOWN: [(&str, &str, usize); 8] = [
    ("trace.packet.header", "magic", SLOT_MAGIC),
    ("trace.packet.header", "stream_id", SLOT_STREAM_ID),
    ("stream.packet.context", "content_size", SLOT_CONTENT_SIZE),
    ("stream.packet.context", "packet_size", SLOT_PACKET_SIZE),
    ("stream.packet.context", "timestamp_begin", SLOT_TS_BEGIN),
    ("stream.packet.context", "timestamp_end", SLOT_TS_END),
    ("stream.packet.context", "events_discarded", SLOT_DISCARDED),
    ("stream.packet.context", "packet_seq_num", SLOT_SEQ_NUM),
];

impl<'t> Compiler<'t> {
    pub(crate) fn new(trace_order: ByteOrder) -> Compiler<'t> {
        let wanted = WELL_KNOWN
            .iter()
            .map(|(s, n, slot)| ((*s, vec![(*n).to_owned()]), *slot))
            .chain(LOSS_CAUSES.iter().enumerate().map(|(i, c)| {
                (
                    ("stream.packet.context", vec![format!("lost_{c}")]),
                    SLOT_LOST + i,
                )
            }))
            .collect();
        Compiler {
            trace_order,
            wanted,
            next_slot: FIRST_FREE_SLOT,
            scopes: Vec::new(),
        }
    }

    /// Number of slots the plans use.
    pub(crate) fn slots(&self) -> usize {
        self.next_slot
    }

    /// Enters scope `name` (the scopes are entered in decoding order).
    pub(crate) fn push(&mut self, name: &'static str, s: &'t Struct) {
        self.scopes.push((name, s));
    }

    /// Leaves the innermost scope.
    pub(crate) fn pop(&mut self) {
        self.scopes.pop();
    }

    /// Pass 1 for the innermost scope: gives a slot to every field that a
    /// length or tag names (all scopes must be collected before any is
    /// emitted, since a later scope may name a field of an earlier one).
    pub(crate) fn collect_scope(&mut self) -> Result<(), String> {
        let (name, s) = *self.scopes.last().expect("a scope");
        self.collect(name, &Type::Struct(s.clone()), &mut Vec::new())
    }

    /// Pass 2 for the innermost scope: its operations.
    pub(crate) fn emit_scope(&mut self) -> Result<ScopePlan, String> {
        let (name, s) = *self.scopes.last().expect("a scope");
        let mut body = Vec::new();
        let mut path = Vec::new();
        for f in &s.fields {
            path.push(f.name.clone());
            let op = self.emit(name, &f.ty, &mut path, &f.name)?;
            path.pop();
            body.push(field(&f.name, op));
        }
        let a = struct_align(s);
        Ok(ScopePlan::new(vec![Op::Struct {
            align: a,
            body: fuse(body, a),
        }]))
    }

    fn slot_for(&mut self, id: FieldId) -> usize {
        if let Some((_, s)) = self.wanted.iter().find(|(w, _)| *w == id) {
            return *s;
        }
        let s = self.next_slot;
        self.next_slot += 1;
        self.wanted.push((id, s));
        s
    }

    /// Resolves a length or tag path seen at `path` (inside scope `scope`)
    /// to a field identity.
    fn resolve(&self, scope: &'static str, target: &str, path: &[String]) -> Option<FieldId> {
        for (prefix, _) in &self.scopes {
            if let Some(rest) = target
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('.'))
            {
                return Some((prefix, rest.split('.').map(str::to_owned).collect()));
            }
        }
        // Relative: the nearest enclosing struct (innermost first) holding a
        // field of that first name, declared before.
        let first = target.split('.').next()?;
        let (_, root) = self.scopes.iter().find(|(n, _)| *n == scope)?;
        let mut structs: Vec<(usize, &Struct)> = vec![(0, root)];
        // Walk down `path` to collect the enclosing structs: through arrays
        // and sequences (their element), and through variants (the option
        // the next segment names), as the decoder goes.
        let mut cur: &Struct = root;
        let mut depth = 0;
        'walk: while depth + 1 < path.len() {
            let Some(f) = cur.fields.iter().find(|f| f.name == path[depth]) else {
                break;
            };
            let mut t = &f.ty;
            depth += 1;
            loop {
                while let Type::Array { element, .. } | Type::Sequence { element, .. } = t {
                    t = element;
                }
                match t {
                    Type::Struct(s) => {
                        cur = s;
                        structs.push((depth, s));
                        continue 'walk;
                    }
                    Type::Variant { options, .. } if depth + 1 < path.len() => {
                        let Some(o) = options.iter().find(|o| o.name == path[depth]) else {
                            break 'walk;
                        };
                        t = &o.ty;
                        depth += 1;
                    }
                    _ => break 'walk,
                }
            }
        }
        for (depth, s) in structs.iter().rev() {
            let here = &path[*depth];
            let before: Vec<&crate::Field> =
                s.fields.iter().take_while(|f| &f.name != here).collect();
            if before.iter().any(|f| f.name == first) {
                let mut id: Vec<String> = path[..*depth].to_vec();
                id.extend(target.split('.').map(str::to_owned));
                return Some((scope, id));
            }
        }
        None
    }

    fn collect(
        &mut self,
        scope: &'static str,
        t: &Type,
        path: &mut Vec<String>,
    ) -> Result<(), String> {
        match t {
            Type::Struct(s) => {
                for f in &s.fields {
                    path.push(f.name.clone());
                    self.collect(scope, &f.ty, path)?;
                    path.pop();
                }
                Ok(())
            }
            Type::Array { element, .. } => self.collect(scope, element, path),
            Type::Sequence { element, length } => {
                let id = self.resolve(scope, length, path).ok_or_else(|| {
                    format!(
                        "{scope}: the length `{length}` of `{}` names no field",
                        path.join(".")
                    )
                })?;
                self.slot_for(id);
                self.collect(scope, element, path)
            }
            Type::Variant { tag, options } => {
                let id = self.resolve(scope, tag, path).ok_or_else(|| {
                    format!(
                        "{scope}: the tag `{tag}` of `{}` names no field",
                        path.join(".")
                    )
                })?;
                self.slot_for(id);
                for o in options {
                    path.push(o.name.clone());
                    self.collect(scope, &o.ty, path)?;
                    path.pop();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn store_for(&self, scope: &'static str, path: &[String]) -> Option<usize> {
        self.wanted
            .iter()
            .find(|((s, p), _)| *s == scope && p.as_slice() == path)
            .map(|(_, slot)| *slot)
    }

    fn int_op(
        &self,
        scope: &'static str,
        i: &crate::Integer,
        path: &[String],
        name: &str,
        e: Option<Arc<Enum>>,
    ) -> IntOp {
        let store = self.store_for(scope, path);
        // The event id: any integer named `id` in the event header, the
        // last one decoded wins (LTTng's variant headers).
        let event_id = scope == "stream.event.header" && name == "id";
        let clock = if (i.map.is_some() || (name == "timestamp" && scope == "stream.event.header"))
            && !(scope == "stream.packet.context" && name == "timestamp_end")
            || (name == "timestamp_begin" && scope == "stream.packet.context")
        {
            ClockUse::Update
        } else {
            ClockUse::None
        };
        IntOp {
            align: i.align.max(1),
            size: i.size,
            signed: i.signed,
            order: i.byte_order.unwrap_or(self.trace_order),
            base: i.base,
            clock,
            store,
            event_id,
            enumeration: e,
        }
    }

    fn emit(
        &mut self,
        scope: &'static str,
        t: &Type,
        path: &mut Vec<String>,
        name: &str,
    ) -> Result<Op, String> {
        Ok(match t {
            Type::Integer(i) if i.size > 64 => {
                // (A wide integer stores no value: a sequence whose length
                // names one stops there with the sequence's error.)
                if i.map.is_some() {
                    return Err(format!(
                        "{scope}: `{}`: a {}-bit integer cannot be a clock value (64 bits at most)",
                        path.join("."),
                        i.size
                    ));
                }
                Op::Wide(WideOp {
                    align: i.align.max(1),
                    size: i.size,
                    signed: i.signed,
                    order: i.byte_order.unwrap_or(self.trace_order),
                    base: i.base,
                })
            }
            Type::Integer(i) => Op::Int(self.int_op(scope, i, path, name, None)),
            Type::Enum(e) => {
                if e.container.size > 64 {
                    return Err(format!(
                        "{scope}: `{}`: enumerations over {}-bit integers are not supported (64 bits at most)",
                        path.join("."),
                        e.container.size
                    ));
                }
                Op::Int(self.int_op(scope, &e.container, path, name, Some(Arc::new(e.clone()))))
            }
            Type::Float(f) => Op::Float {
                align: f.align.max(1),
                bits: f.exp_dig + f.mant_dig,
                order: f.byte_order.unwrap_or(self.trace_order),
            },
            Type::String(_) => Op::Str,
            Type::Struct(s) => {
                let mut body = Vec::new();
                for f in &s.fields {
                    path.push(f.name.clone());
                    let op = self.emit(scope, &f.ty, path, &f.name)?;
                    path.pop();
                    body.push(field(&f.name, op));
                }
                let a = struct_align(s);
                Op::Struct {
                    align: a,
                    body: fuse(body, a),
                }
            }
            Type::Array { element, len } => self.array(scope, element, Len::Fixed(*len), path)?,
            Type::Sequence { element, length } => {
                let id = self
                    .resolve(scope, length, path)
                    .ok_or_else(|| format!("{scope}: unresolved length `{length}`"))?;
                let slot = self.slot_for(id);
                self.array(scope, element, Len::Slot(slot), path)?
            }
            Type::Variant { tag, options } => {
                let id = self
                    .resolve(scope, tag, path)
                    .ok_or_else(|| format!("{scope}: unresolved tag `{tag}`"))?;
                let slot = self.slot_for(id.clone());
                let tag_type = self.type_of(&id);
                let Some(Type::Enum(e)) = tag_type else {
                    return Err(format!("{scope}: the tag `{tag}` is not an enum"));
                };
                let mut ranges = Vec::new();
                let mut names = Vec::new();
                let mut bodies = Vec::new();
                for (i, o) in options.iter().enumerate() {
                    path.push(o.name.clone());
                    bodies.push(self.emit(scope, &o.ty, path, &o.name)?);
                    path.pop();
                    names.push(shown(&o.name));
                    for entry in e.entries.iter().filter(|x| x.label == o.name) {
                        ranges.push((entry.start, entry.end, i));
                    }
                }
                Op::Variant {
                    tag: slot,
                    options: ranges,
                    names,
                    bodies,
                }
            }
            Type::Named(n) => return Err(format!("unresolved type `{n}`")),
        })
    }

    fn array(
        &mut self,
        scope: &'static str,
        element: &Type,
        len: Len,
        path: &mut Vec<String>,
    ) -> Result<Op, String> {
        let text = matches!(element, Type::Integer(i) if i.size == 8 && i.encoding != Encoding::None && i.align <= 8);
        let elem = self.emit(scope, element, path, "")?;
        Ok(Op::Array {
            align: type_align(element),
            len,
            elem: Box::new(elem),
            text,
            min_bits: min_bits(element),
        })
    }

    /// The type of a field identity (for a variant's tag).
    fn type_of(&self, id: &FieldId) -> Option<Type> {
        let (_, root) = self.scopes.iter().find(|(n, _)| *n == id.0)?;
        let mut t = Type::Struct((*root).clone());
        for name in &id.1 {
            let mut cur = t;
            while let Type::Array { element, .. } | Type::Sequence { element, .. } = cur {
                cur = *element;
            }
            t = match cur {
                Type::Struct(s) => s.fields.into_iter().find(|f| &f.name == name)?.ty,
                Type::Variant { options, .. } => options.into_iter().find(|f| &f.name == name)?.ty,
                _ => return None,
            };
        }
        Some(t)
    }
}

/// A name as its user wrote it (`http.method` for `_http_2e_method`;
/// [`crate::name_of`]): what value sinks (JSON, the ftrace text, filters,
/// exports) are given.
fn shown(name: &str) -> Arc<str> {
    Arc::from(crate::name_of(name))
}

/// A struct member's operation, with its name (the user's: [`shown`]) and
/// its text prefix, with the name as babeltrace2 prints it (one leading
/// `_` removed, §4.2.1).
fn field(name: &str, op: Op) -> Op {
    let printed = crate::metadata::shown_name(name);
    let sep = format!(", {printed} = ").into_bytes();
    Op::Field(shown(name), Arc::from(sep), Box::new(op))
}

pub(crate) fn struct_align(s: &Struct) -> u64 {
    s.fields
        .iter()
        .map(|f| type_align(&f.ty))
        .chain(s.min_align)
        .max()
        .unwrap_or(1)
}

pub(crate) fn type_align(t: &Type) -> u64 {
    match t {
        Type::Integer(i) => i.align,
        Type::Enum(e) => e.container.align,
        Type::Float(f) => f.align,
        Type::String(_) => 8,
        Type::Struct(s) => struct_align(s),
        Type::Array { element, .. } | Type::Sequence { element, .. } => type_align(element),
        Type::Variant { .. } | Type::Named(_) => 1,
    }
}

pub(crate) fn min_bits(t: &Type) -> u64 {
    match t {
        Type::Integer(i) => u64::from(i.size),
        Type::Enum(e) => u64::from(e.container.size),
        Type::Float(f) => u64::from(f.exp_dig + f.mant_dig),
        Type::String(_) => 8,
        Type::Struct(s) => s.fields.iter().map(|f| min_bits(&f.ty)).sum(),
        Type::Array { element, len } => min_bits(element).saturating_mul(*len),
        Type::Sequence { .. } | Type::Variant { .. } | Type::Named(_) => 0,
    }
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
/// use tape_ctf::decode::plan::StructPlan;
/// use tape_ctf::{ByteOrder, Field, Integer, Struct, Type};
/// use tape_ctf::decode::Value;
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
