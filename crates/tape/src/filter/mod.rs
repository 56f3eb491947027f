//! Event filters: the kernel's filter expressions (Documentation/trace/
//! events.rst §5), compiled against a tracepoint's fields and evaluated on
//! an event's encoded bytes.
//!
//! ```text
//! len > 1400 && ifname == "eth1"
//! op == Write || (hdr.len >= 512 && !(name ~ "tmp*"))
//! flags & 0x4
//! data[0] == 0x45 && common_thread ~ "worker-*"
//! ```
//!
//! * numbers (integers, floats, enums by value): `== != < <= > >=`, and
//!   `&` on integers (true when the bits are not all clear);
//! * strings (and `[u8; N]` text): `== !=` and `~`, a glob (`*`, `?`,
//!   `[abc]`, `[a-z]`, `[!x]`);
//! * enums, `bool` included: by label (`op == Write`, `ok == true`) or by
//!   value;
//! * struct members with dots (`hdr.len`), array and sequence elements with
//!   `[i]` (an index past the end compares false); an `Option` field
//!   compares its value when it is `Some`, and is false when `None`;
//! * the common fields `common_tid`, `common_thread` (the thread's name)
//!   and `common_cpu`;
//! * `&&`, `||`, `!`, parentheses.
//!
//! [`Filter::new`] parses and type-checks once, against the fields as the
//! trace describes them; an error names the event and the field, and
//! draws a caret under the position, as the kernel's `error_log` does:
//!
//! ```text
//! filter for app.net.rx: no field `lenn` (fields: port, len, ifname, common_tid, common_thread, common_cpu)
//!   lenn > 1400
//!   ^
//! ```
//!
//! On a tracepoint ([`set`], `tape ctl PID filter`, `TAPE_FILTER`), an
//! event is encoded in place in the ring, tested, and only if it matches
//! read the clock for and published; a rejected event is counted per
//! tracepoint ([`rejected`]), not as a loss. An event that finds no room
//! (discard mode with the ring full, too big) is dropped and counted as
//! lost before the filter sees it, as ftrace reserves before it filters.
//!
//! [`Filter::matches`] walks the encoded payload to each field it compares
//! (fixed offsets summed, strings and sequences stepped over) with no
//! allocation, and never panics on bytes it cannot read: a comparison whose
//! field is not there is false.

mod parse;

pub use parse::{parse, Expr, Literal, Op, Step, SyntaxError, MAX_DEPTH, MAX_TERMS};

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use tape_ctf_model::{Struct, Type};

use crate::error::{Error, ErrorKind};
use crate::field::Encode;
use crate::point::{Tracepoint, FILTER, RECORD};
use crate::registry;

/// Fields of one struct a walk can remember (sequence lengths, variant
/// tags); wider structs cannot be filtered on past this member.
const MAX_MEMBERS: usize = 64;

/// How the bytes of a value are laid out.
#[derive(Clone, Debug)]
enum Shape {
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

/// What a comparison reads at the end of its path.
#[derive(Clone, Debug)]
enum Leaf {
    UInt(usize),
    SInt(usize),
    Float(usize),
    Str,
    /// Text bytes in a fixed array of `n` bytes, up to the first NUL.
    Text(usize),
    Enum {
        size: usize,
        signed: bool,
    },
}

/// One step of a compiled path.
#[derive(Clone, Copy, Debug)]
enum Go {
    /// Member `i` of the current struct.
    Member(usize),
    /// Element `i` of the current array or sequence.
    Element(u64),
    /// Into a variant's option with this tag value (false if another).
    Option(i128),
}

/// One step of a path as a decoder walks it ([`Capture`]).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    /// A struct member, by its name as shown.
    Member(String),
    /// An array or sequence element.
    Element(u64),
    /// A variant's option, by name.
    Option(String),
}

#[derive(Clone, Copy, Debug)]
enum Common {
    Tid,
    Thread,
    Cpu,
}

#[derive(Clone, Debug)]
enum Rhs {
    Int(i128),
    Float(f64),
    Bytes(Box<[u8]>),
    Glob(Box<[u8]>),
    /// A glob that is a literal then one `*` at the end: a prefix test.
    Prefix(Box<[u8]>),
}

#[derive(Clone, Debug)]
struct Cmp {
    common: Option<Common>,
    path: Box<[Go]>,
    /// The same path as a reader's sink sees it (names as shown).
    parts: Box<[Part]>,
    /// Its index among the filter's comparisons (a reader's capture slot).
    slot: usize,
    /// The value's offset when every field before it has a fixed size
    /// (most events): read there, with no walk.
    fixed: Option<usize>,
    /// An integer at a fixed offset compared with a constant: the common
    /// case, evaluated in a few instructions.
    fast: Option<Fast>,
    leaf: Leaf,
    op: Op,
    rhs: Rhs,
}

/// An integer field at a fixed offset compared with a constant, in a form
/// evaluated without branching on the operator or the size: the 8 bytes at
/// `at` are loaded, shifted left by `shift` and back (arithmetically for
/// a signed field: sign extension; logically for an unsigned one), biased
/// by `bias` (`1 << 63` for signed values, which maps their order onto
/// the unsigned one), then tested: `(x & and) != 0` when `is_and`, else
/// `x - lo <= span` (wrapping: a range `lo ..= lo + span`), and `negate`d.
/// Every operator is such a range (`==`: span 0; `!=`: its negation; `<`,
/// `<=`, `>`, `>=`: a range to either end; one that cannot hold: the
/// negation of "everything").
#[derive(Clone, Copy, Debug)]
struct Fast {
    at: usize,
    /// Bytes of the field (1, 2, 4 or 8).
    size: usize,
    shift: u32,
    signed: bool,
    bias: u64,
    lo: u64,
    span: u64,
    and: u64,
    is_and: bool,
    negate: bool,
}

/// The operands of the chain of `&&` (or of `||`) that `e` heads, in
/// order.
fn chain(head: &Expr) -> Vec<&Expr> {
    let mut rights = Vec::new();
    let mut e = head;
    while let (Expr::And(..), Expr::And(a, b)) | (Expr::Or(..), Expr::Or(a, b)) = (head, e) {
        rights.push(&**b);
        e = a;
    }
    rights.push(e);
    rights.reverse();
    rights
}

/// Runs a program of fast comparisons only (see [`Filter::matches`]).
#[inline]
fn run_fast(program: &[(Fast, u32, u32)], entry: u32, payload: &[u8]) -> bool {
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
fn order<T: PartialOrd>(op: Op, a: T, b: T) -> bool {
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

impl Fast {
    /// The fast form of a comparison, if it has one.
    fn of(c: &Cmp) -> Option<Fast> {
        let at = c.fixed?;
        if c.common.is_some() {
            return None;
        }
        let Rhs::Int(v) = c.rhs else { return None };
        let (size, signed) = match c.leaf {
            Leaf::UInt(size)
            | Leaf::Enum {
                size,
                signed: false,
            } => (size, false),
            Leaf::SInt(size) | Leaf::Enum { size, signed: true } => (size, true),
            _ => return None,
        };
        // The load takes the field's bytes as the low ones.
        if !matches!(size, 1 | 2 | 4 | 8) || cfg!(target_endian = "big") {
            return None;
        }
        // The constant in the biased domain; one out of the 64-bit range
        // is left to the general path (it compares as its clamp).
        let bias = if signed { 1u64 << 63 } else { 0 };
        let k = if signed {
            (i64::try_from(v).ok()? as u64) ^ bias
        } else {
            u64::try_from(v).ok()?
        };
        let mut f = Fast {
            at,
            size,
            shift: 64 - 8 * size as u32,
            signed,
            bias,
            lo: 0,
            span: u64::MAX,
            and: 0,
            is_and: false,
            negate: false,
        };
        match c.op {
            Op::Eq => (f.lo, f.span) = (k, 0),
            Op::Ne => (f.lo, f.span, f.negate) = (k, 0, true),
            Op::Le => (f.lo, f.span) = (0, k),
            Op::Ge => (f.lo, f.span) = (k, u64::MAX - k),
            Op::Lt if k == 0 => f.negate = true,
            Op::Lt => (f.lo, f.span) = (0, k - 1),
            Op::Gt if k == u64::MAX => f.negate = true,
            Op::Gt => (f.lo, f.span) = (k + 1, u64::MAX - (k + 1)),
            // The bits of the constant as the field holds them (no bias:
            // only the field's own bits are tested).
            Op::And => (f.and, f.is_and, f.bias) = ((v as u64) & (u64::MAX >> f.shift), true, 0),
            Op::Glob => return None,
        }
        Some(f)
    }

    #[inline(always)]
    fn eval(&self, payload: &[u8]) -> bool {
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

/// One instruction of the compiled program: a comparison and where to go after it: the
/// expression is flattened into a decision graph (each `&&`, `||` and `!`
/// resolved into jumps when compiled), so evaluation is one loop over
/// comparisons, with no recursion and no operator nodes, and stops as soon
/// as the answer is known (short-circuit, as C's).
#[derive(Clone, Debug)]
struct Insn {
    cmp: Cmp,
    /// The next step if the comparison holds, or [`TRUE`] / [`FALSE`].
    on_true: u32,
    /// The next step if it does not.
    on_false: u32,
}

/// Jump targets that end the program.
const TRUE: u32 = u32::MAX;
const FALSE: u32 = u32::MAX - 1;

/// A filter compiled for one tracepoint.
#[derive(Clone, Debug)]
pub struct Filter {
    /// The program when every comparison has a fast form: (comparison,
    /// on true, on false), compact, run with no call per comparison.
    fast_program: Option<Box<[(Fast, u32, u32)]>>,
    /// The same when the program is `a && b && ...` in order (one
    /// comparison alone, the common filter, included).
    all_of: Option<Box<[Fast]>>,
    event: String,
    text: String,
    root: Shape,
    steps: Vec<Insn>,
    /// The first step (or [`TRUE`] / [`FALSE`]).
    entry: u32,
    uses_cpu: bool,
    /// See [`Filter::warnings`].
    warnings: Vec<String>,
}

thread_local! {
    /// The warnings of the filter being compiled on this thread (gathered
    /// by the comparisons' compiler, moved into the filter at its end).
    static WARNINGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The common fields of an event, given by the emitting thread.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// Kernel thread id.
    pub tid: u32,
    /// Thread name.
    pub thread: &'a str,
    /// The CPU the thread runs on.
    pub cpu: u32,
}

impl<'a> Context<'a> {
    /// The common fields of an event of the calling thread, whose ring is
    /// `ring` (none yet: tid 0, no name); the CPU asked of the system only
    /// if `cpu` (a filter that compares `common_cpu`).
    pub(crate) fn of(ring: Option<&'a crate::ring::Ring>, cpu: bool) -> Context<'a> {
        Context {
            tid: ring.map_or(0, crate::ring::Ring::tid),
            thread: ring.map_or("", |r| r.name.as_str()),
            cpu: if cpu {
                // SAFETY: sched_getcpu has no preconditions (a vDSO call).
                u32::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0)
            } else {
                0
            },
        }
    }
}

/// The common field a context member holds, by its name: tape's `tid`
/// and `thread_name`, LTTng's `vtid`, `procname` and `cpu_id`, and in a
/// `packet` context DPDK's `name` (the thread's).
fn common_named(name: &str, packet: bool) -> Option<Common> {
    match name {
        "tid" | "vtid" => Some(Common::Tid),
        "thread_name" | "procname" => Some(Common::Thread),
        "name" if packet => Some(Common::Thread),
        "cpu_id" => Some(Common::Cpu),
        _ => None,
    }
}

/// `head: why`, then `text` and a caret under its byte `at`, as the
/// kernel's `error_log` draws an error (filters, triggers, `--filter`).
pub fn pointed(head: &str, why: impl std::fmt::Display, text: &str, at: usize) -> String {
    let col = text[..at.min(text.len())].chars().count();
    format!("{head}: {why}\n  {text}\n  {}^", " ".repeat(col))
}

/// A filter's errors for `event`: `fail(byte, reason)`.
fn failing<'a>(event: &'a str, text: &'a str) -> impl Fn(usize, String) -> Error + 'a {
    move |at, why| {
        Error::new(
            ErrorKind::BadFilter,
            pointed(&format!("filter for {event}"), why, text, at),
        )
    }
}

fn display(name: &str) -> &str {
    name.strip_prefix('_').unwrap_or(name)
}

impl Filter {
    /// Parses `text` and checks it against the fields of `tp`.
    pub fn new(tp: &'static Tracepoint, text: &str) -> Result<Filter, Error> {
        let fields = crate::probe::described_fields(tp)?;
        Filter::for_fields(tp.name(), fields, text)
    }

    /// [`Filter::new`] against a description (any CTF event's fields).
    pub fn for_fields(event: &'static str, fields: &Struct, text: &str) -> Result<Filter, Error> {
        Filter::compile_with(event, fields, text, &failing(event, text))
    }

    /// [`Filter::for_fields`] with the caller's error: `fail(byte, reason)`
    /// (a trigger's condition reports against the whole trigger).
    pub(crate) fn compile_with(
        event: &str,
        fields: &Struct,
        text: &str,
        fail: &impl Fn(usize, String) -> Error,
    ) -> Result<Filter, Error> {
        Filter::build(event, fields, text, fail, false)
    }

    /// A filter for a reader: `text` checked against an event class of
    /// any CTF trace (its integers, enums and floats of any size and byte
    /// order), evaluated on the values a decoder hands to a [`Capture`]
    /// instead of on tape's encoded bytes.
    pub fn for_reader(event: &str, fields: &Struct, text: &str) -> Result<Filter, Error> {
        Filter::build(event, fields, text, &failing(event, text), true)
    }

    /// What in the expression is legal but surely not meant: a constant
    /// outside its field's type. Each names the position, as an error
    /// does; `tape ctl`, `TAPE_FILTER` and the readers' `--filter` print
    /// them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn build(
        event: &str,
        fields: &Struct,
        text: &str,
        fail: &impl Fn(usize, String) -> Error,
        reader: bool,
    ) -> Result<Filter, Error> {
        WARNINGS.with(|w| w.borrow_mut().clear());
        let r = Filter::build_inner(event, fields, text, fail, reader);
        let warnings = WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()));
        r.map(|mut f| {
            f.warnings = warnings;
            f
        })
    }

    fn build_inner(
        event: &str,
        fields: &Struct,
        text: &str,
        fail: &impl Fn(usize, String) -> Error,
        reader: bool,
    ) -> Result<Filter, Error> {
        let expr = parse(text).map_err(|e| fail(e.at, e.message))?;
        let root = if reader {
            Shape::Struct(Vec::new())
        } else {
            shape_of_struct(fields).map_err(|e| fail(0, e))?
        };
        let mut f = Filter {
            fast_program: None,
            all_of: None,
            event: event.to_owned(),
            text: text.to_owned(),
            root,
            steps: Vec::new(),
            entry: FALSE,
            uses_cpu: false,
            warnings: Vec::new(),
        };
        f.entry = f.compile(&expr, fields, 0, fail, reader, TRUE, FALSE)?;
        if reader {
            f.number_slots();
            return Ok(f);
        }
        let root = f.root.clone();
        for step in &mut f.steps {
            let c = &mut step.cmp;
            c.fixed = fixed_offset(&root, &c.path);
            c.fast = Fast::of(c);
        }
        f.number_slots();
        f.fast_program = f
            .steps
            .iter()
            .map(|s| s.cmp.fast.map(|fast| (fast, s.on_true, s.on_false)))
            .collect::<Option<Box<[_]>>>();
        // `a && b && c`: from the entry, each step goes on to another when
        // true and to FALSE when not, until TRUE, through every step.
        if let Some(program) = &f.fast_program {
            let mut order = Vec::new();
            let mut at = f.entry;
            while let Some(step) = program.get(at as usize) {
                if step.2 != FALSE || order.len() >= program.len() {
                    break;
                }
                order.push(step.0);
                at = step.1;
            }
            if at == TRUE && order.len() == program.len() {
                f.all_of = Some(order.into_boxed_slice());
            }
        }
        let uses_cpu = f
            .comparisons()
            .any(|c| matches!(c.common, Some(Common::Cpu)));
        f.uses_cpu = uses_cpu;
        Ok(f)
    }

    /// The expression as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The event it was compiled for.
    pub fn event(&self) -> &str {
        &self.event
    }

    /// Whether it compares `common_cpu` (the caller then asks for the CPU).
    pub(crate) fn uses_cpu(&self) -> bool {
        self.uses_cpu
    }

    /// Whether it compares a common field (`common_tid`, `common_thread`,
    /// `common_cpu`): a reader then sets them ([`Capture::set_packet`]).
    pub fn uses_common(&self) -> bool {
        self.comparisons().any(|c| c.common.is_some())
    }

    /// Compiles `e` so that it goes on to `on_true` when it holds and to
    /// `on_false` when not; returns its entry. Built from the end: the
    /// right operand of `&&` / `||` first, so the left one can jump to it.
    #[allow(clippy::too_many_arguments)]
    fn compile(
        &mut self,
        e: &Expr,
        fields: &Struct,
        depth: usize,
        fail: &impl Fn(usize, String) -> Error,
        reader: bool,
        on_true: u32,
        on_false: u32,
    ) -> Result<u32, Error> {
        if depth > MAX_DEPTH {
            return Err(fail(
                0,
                format!("the expression nests deeper than {MAX_DEPTH}"),
            ));
        }
        let d = depth + 1;
        Ok(match e {
            // A chain `a && b && c` (a left-leaning tree) is compiled as a
            // list, from its last operand: its length is no nesting. In
            // `&&` an operand that holds goes on to the next, in `||` one
            // that does not.
            Expr::And(..) | Expr::Or(..) => {
                let and = matches!(e, Expr::And(..));
                let mut next = if and { on_true } else { on_false };
                for t in chain(e).into_iter().rev() {
                    next = if and {
                        self.compile(t, fields, d, fail, reader, next, on_false)?
                    } else {
                        self.compile(t, fields, d, fail, reader, on_true, next)?
                    };
                }
                next
            }
            Expr::Not(a) => self.compile(a, fields, d, fail, reader, on_false, on_true)?,
            Expr::Cmp {
                field,
                field_at,
                op,
                op_at,
                value,
                value_at,
            } => {
                let cmp = compile_cmp(
                    fields, field, *field_at, *op, *op_at, value, *value_at, fail, reader,
                )?;
                self.steps.push(Insn {
                    cmp,
                    on_true,
                    on_false,
                });
                (self.steps.len() - 1) as u32
            }
        })
    }

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

    fn eval(&self, payload: &[u8], ctx: &Context<'_>) -> bool {
        self.run(|c| self.cmp(c, payload, ctx))
    }

    /// Runs the program, each comparison's outcome from `cmp`.
    #[inline]
    fn run(&self, mut cmp: impl FnMut(&Cmp) -> bool) -> bool {
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

    /// Numbers the comparisons (their capture slots).
    fn number_slots(&mut self) {
        for (k, step) in self.steps.iter_mut().enumerate() {
            step.cmp.slot = k;
        }
    }

    fn comparisons(&self) -> impl Iterator<Item = &Cmp> {
        self.steps.iter().map(|s| &s.cmp)
    }

    /// Whether the event whose values `capture` caught passes (a reader's
    /// test; see [`Capture`]).
    pub fn matches_captured(&self, capture: &Capture) -> bool {
        self.run(|c| {
            let v = match c.common {
                Some(Common::Tid) => capture.tid.map(|t| Found::UInt(u64::from(t))),
                Some(Common::Cpu) => capture.cpu.map(|t| Found::UInt(u64::from(t))),
                Some(Common::Thread) => capture.thread.as_deref().map(Found::Text),
                None => capture.found(c.slot),
            };
            match v {
                None => false,
                Some(Found::UInt(v)) => num(c.op, i128::from(v), &c.rhs) || float_rhs(c, v as f64),
                Some(Found::SInt(v)) => num(c.op, i128::from(v), &c.rhs) || float_rhs(c, v as f64),
                Some(Found::Int(v)) => num(c.op, v, &c.rhs),
                Some(Found::Float(v)) => float(c.op, v, &c.rhs),
                Some(Found::Text(b)) => text(c.op, b, &c.rhs),
            }
        })
    }

    #[inline]
    fn cmp(&self, c: &Cmp, payload: &[u8], ctx: &Context<'_>) -> bool {
        if let Some(f) = c.fast {
            return f.eval(payload);
        }
        self.cmp_slow(c, payload, ctx)
    }

    fn cmp_slow(&self, c: &Cmp, payload: &[u8], ctx: &Context<'_>) -> bool {
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

/// An integer compared with a float constant (a float field's `Leaf` at
/// read time is known, but a reader may hand integers of a float-typed
/// comparison's field only if the trace says so: never; kept total).
fn float_rhs(c: &Cmp, v: f64) -> bool {
    matches!(c.rhs, Rhs::Float(_)) && float(c.op, v, &c.rhs)
}

/// A step of the path being decoded, borrowed from the decoder.
enum Step2<'a> {
    Member(&'a str),
    Element(u64),
    Option(&'a str),
}

/// A value a [`Capture`] caught.
enum Found<'a> {
    UInt(u64),
    SInt(i64),
    Int(i128),
    Float(f64),
    Text(&'a [u8]),
}

/// A decoder's sink (`tape_ctf::decode::plan::Sink`) that catches the values one
/// [`Filter`] compares, as an event is decoded: for `tape show --filter`
/// on any CTF trace. Reused from event to event (its buffers keep their
/// capacity); the common fields come from the packet context, set by the
/// reader with [`Capture::set_packet`], or from the event's context.
#[derive(Default)]
pub struct Capture {
    /// The path being decoded, one part per depth (payload scope only):
    /// the first `len` parts (the others keep their buffers for reuse).
    path: Vec<Part>,
    len: usize,
    depth: usize,
    in_payload: bool,
    /// Per comparison: the path it reads (`None`: a common field).
    wanted: Vec<Option<Box<[Part]>>>,
    slots: Vec<Slot>,
    /// Which slots this event filled.
    caught: Vec<bool>,
    /// A common field named at the top of a context scope.
    context_field: Option<Common>,
    tid: Option<u32>,
    thread: Option<Vec<u8>>,
    cpu: Option<u32>,
}

#[derive(Clone, Debug, Default)]
enum Slot {
    #[default]
    Empty,
    UInt(u64),
    SInt(i64),
    Int(i128),
    Float(f64),
    /// Bytes in the capture's buffer.
    Text(Vec<u8>),
}

impl Capture {
    /// A capture for `filter`'s comparisons.
    pub fn new(filter: &Filter) -> Capture {
        let wanted: Vec<Option<Box<[Part]>>> = filter
            .comparisons()
            .map(|c| c.common.is_none().then(|| c.parts.clone()))
            .collect();
        Capture {
            slots: vec![Slot::Empty; wanted.len()],
            caught: vec![false; wanted.len()],
            wanted,
            ..Capture::default()
        }
    }

    /// Forgets the last event's values (call before decoding the next).
    pub fn clear(&mut self) {
        self.caught.iter_mut().for_each(|c| *c = false);
        self.len = 0;
        self.depth = 0;
        self.in_payload = false;
        self.context_field = None;
    }

    /// The common fields of the events that follow (their packet's).
    /// The common fields of the events that follow, from their packet's
    /// context (`tape_ctf`'s decoded value; none: not known).
    pub fn set_packet(&mut self, packet: Option<&tape_ctf_model::Value>) {
        use tape_ctf_model::Value;
        let (mut tid, mut thread, mut cpu) = (None, None, None);
        if let Some(Value::Struct(fields)) = packet {
            for (name, v) in fields {
                match (common_named(name, true), v) {
                    (Some(Common::Tid), Value::UInt(t, _)) => tid = u32::try_from(*t).ok(),
                    (Some(Common::Tid), Value::SInt(t, _)) => tid = u32::try_from(*t).ok(),
                    (Some(Common::Thread), Value::Str(s)) => thread = Some(s.as_bytes()),
                    (Some(Common::Cpu), Value::UInt(c, _)) => cpu = u32::try_from(*c).ok(),
                    _ => {}
                }
            }
        }
        self.set_common(tid, thread, cpu);
    }

    fn set_common(&mut self, tid: Option<u32>, thread: Option<&[u8]>, cpu: Option<u32>) {
        self.tid = tid;
        self.cpu = cpu;
        match (thread, &mut self.thread) {
            (Some(t), Some(b)) => {
                b.clear();
                b.extend_from_slice(t);
            }
            (Some(t), none) => *none = Some(t.to_vec()),
            (None, b) => *b = None,
        }
    }

    fn found(&self, slot: usize) -> Option<Found<'_>> {
        if !self.caught.get(slot).copied().unwrap_or(false) {
            return None;
        }
        Some(match self.slots.get(slot)? {
            Slot::Empty => return None,
            Slot::UInt(v) => Found::UInt(*v),
            Slot::SInt(v) => Found::SInt(*v),
            Slot::Int(v) => Found::Int(*v),
            Slot::Float(v) => Found::Float(*v),
            Slot::Text(b) => Found::Text(b),
        })
    }

    /// Sets the part at the current depth (reusing its buffer).
    fn set(&mut self, step: Step2<'_>) {
        let at = self.depth.saturating_sub(1);
        while self.path.len() <= at {
            self.path.push(Part::Element(0));
        }
        match (&mut self.path[at], step) {
            (Part::Member(b), Step2::Member(n)) | (Part::Option(b), Step2::Option(n)) => {
                b.clear();
                b.push_str(n);
            }
            (slot, Step2::Member(n)) => *slot = Part::Member(n.to_owned()),
            (slot, Step2::Option(n)) => *slot = Part::Option(n.to_owned()),
            (slot, Step2::Element(i)) => *slot = Part::Element(i),
        }
        self.len = at + 1;
    }

    /// Stores a value at the current path into the slots that want it.
    fn catch(&mut self, v: Slot, text: Option<&[u8]>) {
        if !self.in_payload {
            let Some(c) = self.context_field.take() else {
                return;
            };
            match (c, &v, text) {
                (Common::Tid, Slot::UInt(t), _) => self.tid = u32::try_from(*t).ok(),
                (Common::Tid, Slot::SInt(t), _) => self.tid = u32::try_from(*t).ok(),
                (Common::Cpu, Slot::UInt(t), _) => self.cpu = u32::try_from(*t).ok(),
                (Common::Thread, _, Some(t)) => self.set_common(self.tid, Some(t), self.cpu),
                _ => {}
            }
            return;
        }
        for k in 0..self.wanted.len() {
            let Some(w) = &self.wanted[k] else { continue };
            if **w != self.path[..self.len] {
                continue;
            }
            self.caught[k] = true;
            match (text, &mut self.slots[k]) {
                (Some(t), Slot::Text(b)) => {
                    b.clear();
                    b.extend_from_slice(t);
                }
                (Some(t), slot) => *slot = Slot::Text(t.to_vec()),
                (None, slot) => *slot = v.clone(),
            }
        }
    }
}

impl tape_ctf_model::sink::Sink for Capture {
    fn scope(&mut self, name: &'static str) {
        self.in_payload = name == "fields";
        self.depth = 0;
        self.len = 0;
    }

    fn field(&mut self, name: &str) {
        if self.in_payload {
            self.set(Step2::Member(name));
        } else if self.depth == 1 {
            self.context_field = common_named(name, false);
        }
    }

    fn uint(&mut self, v: u64, _: tape_ctf_model::Base, _: u32) {
        self.catch(Slot::UInt(v), None);
    }

    fn sint(&mut self, v: i64, _: tape_ctf_model::Base, _: u32) {
        self.catch(Slot::SInt(v), None);
    }

    fn enumeration(&mut self, v: i128, _: &tape_ctf_model::Enum) {
        self.catch(Slot::Int(v), None);
    }

    fn float(&mut self, v: f64) {
        self.catch(Slot::Float(v), None);
    }

    fn string(&mut self, s: &[u8]) {
        self.catch(Slot::Empty, Some(s));
    }

    fn wide(&mut self, _: &[u8], _: bool, _: u32, _: tape_ctf_model::Base) {
        // Wider than 64 bits: not comparable (the field is refused when
        // the filter is compiled).
        self.context_field = None;
    }

    fn begin_struct(&mut self) {
        self.depth += 1;
    }

    fn end_struct(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.len = self.len.min(self.depth);
    }

    fn begin_array(&mut self, _: u64) {
        self.depth += 1;
    }

    fn item(&mut self, i: u64) {
        if self.in_payload {
            self.set(Step2::Element(i));
        }
    }

    fn end_array(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.len = self.len.min(self.depth);
    }

    fn variant(&mut self, option: &str) {
        self.depth += 1;
        if self.in_payload {
            self.set(Step2::Option(option));
        }
    }

    fn end_variant(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.len = self.len.min(self.depth);
    }
}

// ---------------------------------------------------------------------------
// Filters on tracepoints: set, cleared, applied when an event is recorded.

/// Filters replaced or cleared: kept, never freed (a thread may be
/// evaluating one; they are small and set by hand), and counted.
static REPLACED: Mutex<Vec<&'static Filter>> = Mutex::new(Vec::new());

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
fn install(tp: &'static Tracepoint, f: Option<&'static Filter>) -> bool {
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
    filter: Filter,
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

#[inline]
fn read_uint(b: &[u8], n: usize) -> Option<u64> {
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

fn num(op: Op, v: i128, rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Int(r) if op == Op::And => v & *r != 0,
        Rhs::Int(r) => order(op, v, *r),
        Rhs::Float(r) => float(op, v as f64, &Rhs::Float(*r)),
        _ => false,
    }
}

fn float(op: Op, v: f64, rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Float(r) => order(op, v, *r),
        Rhs::Int(r) => order(op, v, *r as f64),
        _ => false,
    }
}

fn text(op: Op, v: &[u8], rhs: &Rhs) -> bool {
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
fn glob(p: &[u8], s: &[u8]) -> bool {
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
fn class(p: &[u8], at: usize, c: u8) -> Option<(bool, usize)> {
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

/// The bytes `shape` takes at `pos` (with `siblings`, the integer members
/// read so far in the enclosing struct); `None` past the end.
fn size_at(shape: &Shape, b: &[u8], pos: usize, siblings: &[u64]) -> Option<usize> {
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

fn elements(e: &Shape, n: u64, b: &[u8], pos: usize) -> Option<usize> {
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
fn fixed_offset(root: &Shape, path: &[Go]) -> Option<usize> {
    fn size(s: &Shape) -> Option<usize> {
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
fn locate(root: &Shape, path: &[Go], b: &[u8]) -> Option<usize> {
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

fn shape_of_struct(s: &Struct) -> Result<Shape, String> {
    let mut members = Vec::new();
    for f in &s.fields {
        members.push(shape_of(&f.ty, s)?);
    }
    Ok(Shape::Struct(members))
}

/// The index of the member of `s` named by a length or tag reference
/// (as written: escaped, possibly with a scope prefix).
fn sibling(s: &Struct, reference: &str) -> Result<usize, String> {
    let last = reference.rsplit('.').next().unwrap_or(reference);
    s.fields
        .iter()
        .position(|f| f.name == last)
        .ok_or_else(|| format!("the reference `{reference}` names no member before it"))
}

fn shape_of(t: &Type, parent: &Struct) -> Result<Shape, String> {
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

/// Field names of a struct as the user writes them, for messages.
fn names(s: &Struct) -> String {
    let mut v: Vec<&str> = s.fields.iter().map(|f| display(&f.name)).collect();
    v.extend(["common_tid", "common_thread", "common_cpu"]);
    v.join(", ")
}

#[allow(clippy::too_many_arguments)]
fn compile_cmp(
    fields: &Struct,
    path: &[Step],
    field_at: usize,
    op: Op,
    op_at: usize,
    value: &Literal,
    value_at: usize,
    fail: &impl Fn(usize, String) -> Error,
    reader: bool,
) -> Result<Cmp, Error> {
    let shown: Vec<String> = path
        .iter()
        .map(|s| match s {
            Step::Name(n) => n.clone(),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect();
    let shown = shown.join(".").replace(".[", "[");
    // The common fields.
    if let [Step::Name(n)] = path {
        let common = match n.as_str() {
            "common_tid" => Some((Common::Tid, Leaf::UInt(4))),
            "common_cpu" => Some((Common::Cpu, Leaf::UInt(4))),
            "common_thread" => Some((Common::Thread, Leaf::Str)),
            _ => None,
        };
        if let Some((c, leaf)) = common {
            let rhs = check(&shown, &leaf, None, op, op_at, value, value_at, fail)?;
            return Ok(Cmp {
                common: Some(c),
                path: Box::new([]),
                parts: Box::new([]),
                slot: 0,
                fixed: None,
                fast: None,
                leaf,
                op,
                rhs,
            });
        }
    }
    let mut go = Vec::new();
    let mut parts = Vec::new();
    let mut ty: Option<&Type> = None;
    let mut parent = fields;
    let mut at_struct = Some(fields);
    for (k, step) in path.iter().enumerate() {
        match step {
            Step::Name(n) => {
                let Some(s) = at_struct else {
                    return Err(fail(
                        field_at,
                        format!("`{shown}`: `{n}` follows a field that is not a struct"),
                    ));
                };
                let Some(i) = s.fields.iter().position(|f| display(&f.name) == n) else {
                    let what = if k == 0 {
                        format!("no field `{n}` (fields: {})", names(s))
                    } else {
                        format!("`{shown}`: no member `{n}` (members: {})", {
                            let v: Vec<&str> = s.fields.iter().map(|f| display(&f.name)).collect();
                            v.join(", ")
                        })
                    };
                    return Err(fail(field_at, what));
                };
                if i >= MAX_MEMBERS {
                    return Err(fail(
                        field_at,
                        format!("`{shown}` is past the {MAX_MEMBERS}th member of its struct"),
                    ));
                }
                go.push(Go::Member(i));
                parts.push(Part::Member(display(&s.fields[i].name).to_owned()));
                parent = s;
                let mut t = &s.fields[i].ty;
                // An Option's value: into its `some` option.
                if let Type::Variant { tag, options } = t {
                    if let (Ok(ti), Some(some)) =
                        (sibling(s, tag), options.iter().find(|o| o.name == "some"))
                    {
                        if let Type::Enum(e) = &s.fields[ti].ty {
                            if let Some(v) = e.entries.iter().find(|x| x.label == "some") {
                                go.push(Go::Option(v.start));
                                parts.push(Part::Option(display(&some.name).to_owned()));
                                t = &some.ty;
                            }
                        }
                    }
                }
                at_struct = match t {
                    Type::Struct(inner) => Some(inner),
                    _ => None,
                };
                ty = Some(t);
            }
            Step::Index(i) => {
                let element = match ty {
                    Some(Type::Array { element, .. }) | Some(Type::Sequence { element, .. }) => {
                        element
                    }
                    _ => {
                        return Err(fail(
                            field_at,
                            format!("`{shown}`: `[{i}]` follows a field that is not an array"),
                        ))
                    }
                };
                go.push(Go::Element(*i));
                parts.push(Part::Element(*i));
                at_struct = match &**element {
                    Type::Struct(inner) => Some(inner),
                    _ => None,
                };
                ty = Some(element);
            }
        }
    }
    let t = ty.expect("a path has a first name");
    let _ = parent;
    // A reader is handed values, whatever their size and byte order: any
    // integer, enum or float of up to 64 bits, any text array or sequence.
    let (leaf, labels) = match t {
        Type::Integer(i) if reader && i.size <= 64 => (
            if i.signed {
                Leaf::SInt(0)
            } else {
                Leaf::UInt(0)
            },
            None,
        ),
        Type::Enum(e) if reader && e.container.size <= 64 => (
            Leaf::Enum {
                size: 0,
                signed: e.container.signed,
            },
            Some(e),
        ),
        Type::Float(_) if reader => (Leaf::Float(0), None),
        Type::Array { element, .. } | Type::Sequence { element, .. }
            if reader
                && matches!(&**element, Type::Integer(i) if i.size == 8
                    && i.encoding != tape_ctf_model::Encoding::None) =>
        {
            (Leaf::Text(0), None)
        }
        Type::Integer(i) if i.size % 8 == 0 && i.size <= 64 => (
            if i.signed {
                Leaf::SInt((i.size / 8) as usize)
            } else {
                Leaf::UInt((i.size / 8) as usize)
            },
            None,
        ),
        Type::Float(f) => (Leaf::Float(((f.exp_dig + f.mant_dig) / 8) as usize), None),
        Type::String(_) => (Leaf::Str, None),
        Type::Array { element, len }
            if matches!(&**element, Type::Integer(i) if i.size == 8
                && i.encoding != tape_ctf_model::Encoding::None) =>
        {
            (Leaf::Text(*len as usize), None)
        }
        Type::Enum(e) if e.container.size % 8 == 0 && e.container.size <= 64 => (
            Leaf::Enum {
                size: (e.container.size / 8) as usize,
                signed: e.container.signed,
            },
            Some(e),
        ),
        other => {
            let what = match other {
                Type::Struct(_) => "a struct: compare one of its members (`a.b`)",
                Type::Array { .. } | Type::Sequence { .. } => {
                    "an array: compare one of its elements (`a[0]`)"
                }
                Type::Variant { .. } => "a variant",
                _ => "a type filters cannot read",
            };
            return Err(fail(field_at, format!("`{shown}` is {what}")));
        }
    };
    let rhs = check(&shown, &leaf, labels, op, op_at, value, value_at, fail)?;
    // A constant outside the field's type makes the comparison the same
    // for every event (`worker == 256` on a u8: never true): a warning,
    // with the position, since the comparison is still well defined.
    let bits = match t {
        Type::Integer(i) => Some((i.size, i.signed)),
        Type::Enum(e) => Some((e.container.size, e.container.signed)),
        _ => None,
    };
    if let (Some((size @ 1..=64, signed)), Rhs::Int(v), false) = (bits, &rhs, op == Op::And) {
        let (lo, hi) = if signed {
            (-(1i128 << (size - 1)), (1i128 << (size - 1)) - 1)
        } else {
            (0, (1i128 << size) - 1)
        };
        if !(lo..=hi).contains(v) {
            let e = fail(
                value_at,
                format!(
                    "{v} is outside `{shown}`'s type ({}{size}: {lo} to {hi}): `{shown} {} {v}` \
                     is the same for every event",
                    if signed { "i" } else { "u" },
                    op.text()
                ),
            );
            WARNINGS.with(|w| w.borrow_mut().push(e.message().to_owned()));
        }
    }
    Ok(Cmp {
        common: None,
        path: go.into_boxed_slice(),
        parts: parts.into_boxed_slice(),
        slot: 0,
        fixed: None,
        fast: None,
        leaf,
        op,
        rhs,
    })
}

/// Checks that `op` and `value` suit a field of kind `leaf`; the value as
/// compared.
#[allow(clippy::too_many_arguments)]
fn check(
    shown: &str,
    leaf: &Leaf,
    labels: Option<&tape_ctf_model::Enum>,
    op: Op,
    op_at: usize,
    value: &Literal,
    value_at: usize,
    fail: &impl Fn(usize, String) -> Error,
) -> Result<Rhs, Error> {
    let textual = matches!(leaf, Leaf::Str | Leaf::Text(_));
    if textual {
        if !matches!(op, Op::Eq | Op::Ne | Op::Glob) {
            return Err(fail(
                op_at,
                format!(
                    "`{shown}` is a string: it compares with ==, != or ~, not {}",
                    op.text()
                ),
            ));
        }
        let s = match value {
            Literal::Str(s) | Literal::Word(s) => s.as_bytes(),
            _ => {
                return Err(fail(
                    value_at,
                    format!("`{shown}` is a string: compare it with a string (\"...\")"),
                ))
            }
        };
        return Ok(if op == Op::Glob {
            match s.split_last() {
                Some((b'*', lit)) if !lit.iter().any(|b| b"*?[\0".contains(b)) => {
                    Rhs::Prefix(lit.into())
                }
                _ => Rhs::Glob(s.into()),
            }
        } else {
            Rhs::Bytes(s.into())
        });
    }
    if op == Op::Glob {
        return Err(fail(
            op_at,
            format!("`{shown}` is a number: `~` is for strings"),
        ));
    }
    let float = matches!(leaf, Leaf::Float(_));
    if float && op == Op::And {
        return Err(fail(
            op_at,
            format!("`{shown}` is a float: `&` is for integers"),
        ));
    }
    match value {
        Literal::Int(v) => Ok(Rhs::Int(*v)),
        Literal::Float(v) if float => Ok(Rhs::Float(*v)),
        Literal::Float(_) => Err(fail(
            value_at,
            format!("`{shown}` is an integer: compare it with an integer"),
        )),
        Literal::Word(w) | Literal::Str(w) => match labels {
            Some(e) => e
                .entries
                .iter()
                .find(|x| x.label == *w)
                .map(|x| Rhs::Int(x.start))
                .ok_or_else(|| {
                    let all: Vec<&str> = e.entries.iter().map(|x| x.label.as_str()).collect();
                    fail(
                        value_at,
                        format!("`{shown}` has no label `{w}` (labels: {})", all.join(", ")),
                    )
                }),
            None => Err(fail(
                value_at,
                format!("`{shown}` is a number: compare it with a number, not `{w}`"),
            )),
        },
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
