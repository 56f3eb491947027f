//! Evaluating a compiled filter on an encoded payload: the fast
//! comparisons' program first, each other comparison by walking to its
//! field ([`super::layout`]); numbers, floats, strings and globs compared
//! as the kernel compares them. No allocation, no panic on any bytes.

use super::compile::{Cmp, Common, Context, Fast, Filter, Leaf, Rhs, FALSE, TRUE};
use super::layout::{locate, read_uint};
use super::parse::Op;

/// Runs a program of fast comparisons only (see [`Filter::matches`]).
#[inline]
pub(super) fn run_fast(program: &[(Fast, u32, u32)], entry: u32, payload: &[u8]) -> bool {
    let mut at = entry;
    loop {
        match at {
            TRUE => return true,
            FALSE => return false,
            _ => {
                let Some((f, t, e)) = program.get(at as usize) else {
                    return false;
                };
                at = if f.eval(payload) { *t } else { *e };
            }
        }
    }
}

#[inline]
pub(super) fn order<T: PartialOrd>(op: Op, a: T, b: T) -> bool {
    match op {
        Op::Eq => a == b,
        Op::Ne => a != b,
        Op::Lt => a < b,
        Op::Le => a <= b,
        Op::Gt => a > b,
        Op::Ge => a >= b,
        Op::And | Op::Glob => false,
    }
}

/// An integer compared with a float constant (a float field's `Leaf` at
/// read time is known, but a reader may hand integers of a float-typed
/// comparison's field only if the trace says so: never; kept total).
pub(super) fn float_rhs(c: &Cmp, v: f64) -> bool {
    matches!(c.rhs, Rhs::Float(_)) && float(c.op, v, &c.rhs)
}

/// A value a [`Capture`] caught.
pub(super) enum Found<'a> {
    UInt(u64),
    SInt(i64),
    Int(i128),
    Float(f64),
    Text(&'a [u8]),
}

pub(super) fn num(op: Op, v: i128, rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Int(r) if op == Op::And => v & *r != 0,
        Rhs::Int(r) => order(op, v, *r),
        Rhs::Float(r) => float(op, v as f64, &Rhs::Float(*r)),
        _ => false,
    }
}

pub(super) fn float(op: Op, v: f64, rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Float(r) => order(op, v, *r),
        Rhs::Int(r) => order(op, v, *r as f64),
        _ => false,
    }
}

pub(super) fn text(op: Op, v: &[u8], rhs: &Rhs) -> bool {
    match (op, rhs) {
        (Op::Eq, Rhs::Bytes(r)) => v == &r[..],
        (Op::Ne, Rhs::Bytes(r)) => v != &r[..],
        (Op::Glob, Rhs::Glob(g)) => glob(g, v),
        (Op::Glob, Rhs::Prefix(p)) => v.starts_with(p),
        _ => false,
    }
}

/// Glob matching on bytes with no allocation: `*`, `?`, `[abc]`,
/// `[a-z]`, `[!x]` (iterative, with one backtrack point per `*`).
pub(super) fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(p, pi, s[si]) {
                        if hit {
                            pi = next;
                            si += 1;
                            continue;
                        }
                    } else if s[si] == b'[' {
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A `[...]` class at `p[at]`: whether `c` is in it, and where the pattern
/// goes on; `None` if the class is not closed (a literal `[`).
pub(super) fn class(p: &[u8], at: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() && (p[i] != b']' || first) {
        first = false;
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            hit |= (p[i]..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    (i < p.len()).then_some((hit != negate, i + 1))
}

impl Fast {
    #[inline(always)]
    pub(super) fn eval(&self, payload: &[u8]) -> bool {
        let raw = match payload.get(self.at..self.at + 8) {
            Some(b) => u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])),
            // Near the end of the payload: only the field's own bytes.
            None => match payload.get(self.at..).and_then(|b| read_uint(b, self.size)) {
                Some(x) => x,
                None => return false,
            },
        };
        // Little-endian: the field's bytes are the low ones.
        let up = raw << self.shift;
        let x = if self.signed {
            ((up as i64) >> self.shift) as u64
        } else {
            up >> self.shift
        } ^ self.bias;
        let hit = if self.is_and {
            x & self.and != 0
        } else {
            x.wrapping_sub(self.lo) <= self.span
        };
        hit != self.negate
    }
}

impl Filter {
    /// Whether the event whose encoded fields are `payload` passes.
    #[inline]
    pub fn matches(&self, payload: &[u8], ctx: &Context<'_>) -> bool {
        if let Some(all) = &self.all_of {
            // No jump depends on the previous comparison's outcome but the
            // exit: the processor runs ahead on the predicted path.
            return all.iter().all(|f| f.eval(payload));
        }
        if let Some(program) = &self.fast_program {
            return run_fast(program, self.entry, payload);
        }
        self.eval(payload, ctx)
    }

    pub(super) fn eval(&self, payload: &[u8], ctx: &Context<'_>) -> bool {
        self.run(|c| self.cmp(c, payload, ctx))
    }

    /// Runs the program, each comparison's outcome from `cmp`.
    #[inline]
    pub(super) fn run(&self, mut cmp: impl FnMut(&Cmp) -> bool) -> bool {
        let mut at = self.entry;
        loop {
            match at {
                TRUE => return true,
                FALSE => return false,
                _ => {
                    let Some(step) = self.steps.get(at as usize) else {
                        return false;
                    };
                    at = if cmp(&step.cmp) {
                        step.on_true
                    } else {
                        step.on_false
                    };
                }
            }
        }
    }

    #[inline]
    pub(super) fn cmp(&self, c: &Cmp, payload: &[u8], ctx: &Context<'_>) -> bool {
        if let Some(f) = c.fast {
            return f.eval(payload);
        }
        self.cmp_slow(c, payload, ctx)
    }

    pub(super) fn cmp_slow(&self, c: &Cmp, payload: &[u8], ctx: &Context<'_>) -> bool {
        if let Some(common) = c.common {
            return match common {
                Common::Tid => num(c.op, i128::from(ctx.tid), &c.rhs),
                Common::Cpu => num(c.op, i128::from(ctx.cpu), &c.rhs),
                Common::Thread => text(c.op, ctx.thread.as_bytes(), &c.rhs),
            };
        }
        let Some(at) = c.fixed.or_else(|| locate(&self.root, &c.path, payload)) else {
            return false;
        };
        let Some(bytes) = payload.get(at..) else {
            return false;
        };
        match c.leaf {
            Leaf::UInt(n)
            | Leaf::Enum {
                size: n,
                signed: false,
            } => read_uint(bytes, n).is_some_and(|v| num(c.op, i128::from(v), &c.rhs)),
            Leaf::SInt(n)
            | Leaf::Enum {
                size: n,
                signed: true,
            } => read_uint(bytes, n).is_some_and(|v| {
                let shift = 64 - 8 * n as u32;
                let v = ((v << shift) as i64) >> shift;
                num(c.op, i128::from(v), &c.rhs)
            }),
            Leaf::Float(n) => {
                let v = match n {
                    4 => read_uint(bytes, 4).map(|b| f64::from(f32::from_bits(b as u32))),
                    _ => read_uint(bytes, 8).map(f64::from_bits),
                };
                v.is_some_and(|v| float(c.op, v, &c.rhs))
            }
            // An equality or a prefix needs no search for the end: the
            // string's first bytes (and its NUL, for equality) are read.
            Leaf::Str => match &c.rhs {
                Rhs::Bytes(r) if !r.contains(&0) => {
                    let eq = bytes.get(..r.len()) == Some(&r[..]) && bytes.get(r.len()) == Some(&0);
                    eq == (c.op == Op::Eq)
                }
                Rhs::Prefix(p) => bytes.starts_with(p),
                _ => match memchr::memchr(0, bytes) {
                    Some(end) => text(c.op, &bytes[..end], &c.rhs),
                    None => false,
                },
            },
            Leaf::Text(n) => {
                let Some(b) = bytes.get(..n) else {
                    return false;
                };
                let end = b.iter().position(|&x| x == 0).unwrap_or(n);
                text(c.op, &b[..end], &c.rhs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        for (p, s, m) in [
            ("eth*", "eth0", true),
            ("eth*", "lo", false),
            ("*0", "eth0", true),
            ("*th*", "eth0", true),
            ("e?h0", "eth0", true),
            ("e?h0", "eh0", false),
            ("eth[0-3]", "eth2", true),
            ("eth[0-3]", "eth5", false),
            ("eth[!0-3]", "eth5", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("", "", true),
            ("*", "", true),
            ("[", "[", true),
            ("a[", "a[", true),
        ] {
            assert_eq!(glob(p.as_bytes(), s.as_bytes()), m, "{p} ~ {s}");
        }
    }
}
