//! Event header plans: an event header of static layout (each option of
//! its variant too) read with fixed offsets, and the quick header of a
//! stream whose events all begin alike.

use super::*;

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
