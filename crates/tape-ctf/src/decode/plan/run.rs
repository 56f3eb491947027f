//! The interpreter: the operations of a plan run over a packet's bits,
//! their values sent to a [`Sink`].

use super::*;

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
pub(super) fn run_fixed<S: Sink>(
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

/// Runs `ops` on the packet bits, sending values to `sink`.
pub(super) fn run<S: Sink>(
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
pub(super) fn run_str<S: Sink>(b: &mut Bits<'_>, sink: &mut S) -> Result<(), RunError> {
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
