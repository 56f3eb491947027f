//! An event's layout as the filter walks it: each field's shape (fixed
//! bytes, a string, an array, a sequence and its length, a variant and its
//! tag), made from the tracepoint's description, and the walk over an
//! encoded payload to a field, which never reads past the bytes it has.

use tape_ctf_model::{Struct, Type};

/// Fields of one struct a walk can remember (sequence lengths, variant
/// tags); wider structs cannot be filtered on past this member.
pub(super) const MAX_MEMBERS: usize = 64;

/// How the bytes of a value are laid out.
#[derive(Clone, Debug)]
pub(super) enum Shape {
    /// Fixed size, in bytes.
    Fixed(usize),
    /// A NUL-terminated string.
    Str,
    /// `n` elements.
    Array(u64, Box<Shape>),
    /// As many elements as the integer member `len` of the same struct.
    Seq(usize, Box<Shape>),
    /// Members in order.
    Struct(Vec<Shape>),
    /// The option whose tag value (member `tag` of the same struct) it has.
    Variant(usize, Vec<(i128, Shape)>),
}

/// One step of a compiled path.
#[derive(Clone, Copy, Debug)]
pub(super) enum Go {
    /// Member `i` of the current struct.
    Member(usize),
    /// Element `i` of the current array or sequence.
    Element(u64),
    /// Into a variant's option with this tag value (false if another).
    Option(i128),
}

#[inline]
pub(super) fn read_uint(b: &[u8], n: usize) -> Option<u64> {
    // One load per size (a copy of a variable length would be a call).
    Some(match n {
        1 => u64::from(*b.first()?),
        2 => u64::from(u16::from_ne_bytes(b.get(..2)?.try_into().ok()?)),
        4 => u64::from(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?)),
        8 => u64::from_ne_bytes(b.get(..8)?.try_into().ok()?),
        _ => {
            let b = b.get(..n.min(8))?;
            let mut w = [0u8; 8];
            if cfg!(target_endian = "little") {
                w[..b.len()].copy_from_slice(b);
            } else {
                w[8 - b.len()..].copy_from_slice(b);
            }
            u64::from_ne_bytes(w)
        }
    })
}

/// The bytes `shape` takes at `pos` (with `siblings`, the integer members
/// read so far in the enclosing struct); `None` past the end.
pub(super) fn size_at(shape: &Shape, b: &[u8], pos: usize, siblings: &[u64]) -> Option<usize> {
    match shape {
        Shape::Fixed(n) => (pos + n <= b.len()).then_some(*n),
        Shape::Str => b.get(pos..)?.iter().position(|&x| x == 0).map(|n| n + 1),
        Shape::Array(n, e) => elements(e, *n, b, pos),
        Shape::Seq(len, e) => elements(e, *siblings.get(*len)?, b, pos),
        Shape::Struct(members) => {
            let mut vals = [0u64; MAX_MEMBERS];
            let mut at = pos;
            for (i, m) in members.iter().enumerate() {
                if let Shape::Fixed(n @ 1..=8) = m {
                    vals[i] = read_uint(b.get(at..)?, *n)?;
                }
                at += size_at(m, b, at, &vals[..i])?;
            }
            Some(at - pos)
        }
        Shape::Variant(tag, options) => {
            let t = i128::from(*siblings.get(*tag)?);
            let (_, s) = options.iter().find(|(v, _)| *v == t)?;
            size_at(s, b, pos, siblings)
        }
    }
}

pub(super) fn elements(e: &Shape, n: u64, b: &[u8], pos: usize) -> Option<usize> {
    if let Shape::Fixed(k) = e {
        let total = usize::try_from(n).ok()?.checked_mul(*k)?;
        return (pos.checked_add(total)? <= b.len()).then_some(total);
    }
    let mut at = pos;
    for _ in 0..n {
        at += size_at(e, b, at, &[])?;
    }
    Some(at - pos)
}

/// The offset `path` leads to when it does not depend on the bytes: every
/// member before it of fixed size, no sequence or variant on the way.
pub(super) fn fixed_offset(root: &Shape, path: &[Go]) -> Option<usize> {
    pub(super) fn size(s: &Shape) -> Option<usize> {
        match s {
            Shape::Fixed(n) => Some(*n),
            Shape::Array(n, e) => size(e)?.checked_mul(usize::try_from(*n).ok()?),
            Shape::Struct(m) => m.iter().map(size).sum(),
            _ => None,
        }
    }
    let mut shape = root;
    let mut pos = 0usize;
    for go in path {
        match (go, shape) {
            (Go::Member(i), Shape::Struct(members)) => {
                pos += members[..*i].iter().map(size).sum::<Option<usize>>()?;
                shape = &members[*i];
            }
            (Go::Element(k), Shape::Array(n, e)) if k < n => {
                pos += size(e)?.checked_mul(usize::try_from(*k).ok()?)?;
                shape = e;
            }
            _ => return None,
        }
    }
    Some(pos)
}

/// The position of the value that `path` leads to in `b`; `None` when it
/// is not there (past the end, an element past a sequence's length, a
/// variant with another option).
pub(super) fn locate(root: &Shape, path: &[Go], b: &[u8]) -> Option<usize> {
    let mut shape = root;
    let mut pos = 0usize;
    let mut vals = [0u64; MAX_MEMBERS];
    let mut nvals = 0;
    for go in path {
        match (go, shape) {
            (Go::Member(i), Shape::Struct(members)) => {
                let mut own = [0u64; MAX_MEMBERS];
                for (k, m) in members.iter().enumerate().take(*i) {
                    if let Shape::Fixed(n @ 1..=8) = m {
                        own[k] = read_uint(b.get(pos..)?, *n)?;
                    }
                    pos += size_at(m, b, pos, &own[..k])?;
                }
                vals = own;
                nvals = *i;
                shape = &members[*i];
            }
            (Go::Element(i), Shape::Array(..) | Shape::Seq(..)) => {
                let (count, e) = match shape {
                    Shape::Array(n, e) => (*n, e),
                    Shape::Seq(len, e) => (*vals[..nvals].get(*len)?, e),
                    _ => return None,
                };
                if *i >= count {
                    return None;
                }
                pos += elements(e, *i, b, pos)?;
                shape = e;
                nvals = 0;
            }
            (Go::Option(t), Shape::Variant(tag, options)) => {
                if i128::from(*vals[..nvals].get(*tag)?) != *t {
                    return None;
                }
                shape = &options.iter().find(|(v, _)| v == t)?.1;
            }
            _ => return None,
        }
    }
    (pos <= b.len()).then_some(pos)
}

pub(super) fn shape_of_struct(s: &Struct) -> Result<Shape, String> {
    let mut members = Vec::new();
    for f in &s.fields {
        members.push(shape_of(&f.ty, s)?);
    }
    Ok(Shape::Struct(members))
}

/// The index of the member of `s` named by a length or tag reference
/// (as written: escaped, possibly with a scope prefix).
pub(super) fn sibling(s: &Struct, reference: &str) -> Result<usize, String> {
    let last = reference.rsplit('.').next().unwrap_or(reference);
    s.fields
        .iter()
        .position(|f| f.name == last)
        .ok_or_else(|| format!("the reference `{reference}` names no member before it"))
}

pub(super) fn shape_of(t: &Type, parent: &Struct) -> Result<Shape, String> {
    Ok(match t {
        Type::Integer(i) => Shape::Fixed(i.size.div_ceil(8) as usize),
        Type::Enum(e) => Shape::Fixed(e.container.size.div_ceil(8) as usize),
        Type::Float(f) => Shape::Fixed(((f.exp_dig + f.mant_dig) / 8) as usize),
        Type::String(_) => Shape::Str,
        Type::Struct(s) => shape_of_struct(s)?,
        Type::Array { element, len } => Shape::Array(*len, Box::new(shape_of(element, parent)?)),
        Type::Sequence { element, length } => Shape::Seq(
            sibling(parent, length)?,
            Box::new(shape_of(element, parent)?),
        ),
        Type::Variant { tag, options } => {
            let ti = sibling(parent, tag)?;
            let Type::Enum(e) = &parent.fields[ti].ty else {
                return Err(format!("the tag `{tag}` is not an enumeration"));
            };
            let mut out = Vec::new();
            for o in options {
                let v = e
                    .entries
                    .iter()
                    .find(|x| x.label == o.name)
                    .map(|x| x.start)
                    .ok_or_else(|| format!("the option `{}` has no label in its tag", o.name))?;
                out.push((v, shape_of(&o.ty, parent)?));
            }
            Shape::Variant(ti, out)
        }
        Type::Named(n) => return Err(format!("the type `{n}` is not resolved")),
    })
}
