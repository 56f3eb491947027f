//! Compiling a filter: the expression, parsed ([`super::parse`]), checked
//! against the event's fields (each comparison's field, its type, the
//! constant's range), and made into comparisons over the payload's bytes,
//! most of them "fast" (a fixed offset and a load), and a program of jumps.

use tape_ctf_model::{Struct, Type};

use super::layout::{fixed_offset, shape_of_struct, sibling, Go, Shape, MAX_MEMBERS};
use super::parse::{parse, Expr, Literal, Op, Step, MAX_DEPTH};
use crate::error::{Error, ErrorKind};
use crate::point::Tracepoint;

/// What a comparison reads at the end of its path.
#[derive(Clone, Debug)]
pub(super) enum Leaf {
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

/// One step of a path as a decoder walks it ([`Capture`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// A struct member, by its name as shown.
    Member(String),
    /// An array or sequence element.
    Element(u64),
    /// A variant's option, by name.
    Option(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Common {
    Tid,
    Thread,
    Cpu,
}

impl Common {
    /// The common field a filter names: `common_tid` (ftrace's
    /// `common_pid`, which is the kernel's task id, a thread's),
    /// `common_thread` (ftrace's `common_comm`), `common_cpu`.
    fn named(n: &str) -> Option<Common> {
        match n {
            "common_tid" | "common_pid" => Some(Common::Tid),
            "common_thread" | "common_comm" => Some(Common::Thread),
            "common_cpu" => Some(Common::Cpu),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Common::Tid => "common_tid",
            Common::Thread => "common_thread",
            Common::Cpu => "common_cpu",
        }
    }
}

/// The common fields the events being filtered carry besides their
/// payload. On a tracepoint, all of them (the emitting thread's id and
/// name, the CPU asked of the system); in a trace, those its scopes hold
/// ([`Commons::in_scopes`]): a tape trace has no CPU, a kernel trace of
/// LTTng no thread name unless a context added it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commons {
    /// `common_tid` (`common_pid`).
    pub tid: bool,
    /// `common_thread` (`common_comm`).
    pub thread: bool,
    /// `common_cpu`.
    pub cpu: bool,
}

impl Commons {
    /// Every common field: a tracepoint's.
    pub const ALL: Commons = Commons {
        tid: true,
        thread: true,
        cpu: true,
    };

    /// The common fields of a trace's events: the members of their
    /// stream's packet context, and of their stream's and their own event
    /// contexts, that hold one (tape's `tid` and `thread_name`, LTTng's
    /// `vtid`, `procname` and `cpu_id`, DPDK's packet `name`).
    pub fn in_scopes<'a>(
        packet: Option<&Struct>,
        contexts: impl IntoIterator<Item = &'a Struct>,
    ) -> Commons {
        let mut c = Commons {
            tid: false,
            thread: false,
            cpu: false,
        };
        let mut add = |name: &str, packet: bool| match common_named(name, packet) {
            Some(Common::Tid) => c.tid = true,
            Some(Common::Thread) => c.thread = true,
            Some(Common::Cpu) => c.cpu = true,
            None => {}
        };
        for f in packet.into_iter().flat_map(|s| &s.fields) {
            add(&f.name, true);
        }
        for f in contexts.into_iter().flat_map(|s| &s.fields) {
            add(&f.name, false);
        }
        c
    }

    fn has(self, c: Common) -> bool {
        match c {
            Common::Tid => self.tid,
            Common::Thread => self.thread,
            Common::Cpu => self.cpu,
        }
    }

    /// Their names, for messages.
    fn names(self) -> impl Iterator<Item = &'static str> {
        [Common::Tid, Common::Thread, Common::Cpu]
            .into_iter()
            .filter(move |c| self.has(*c))
            .map(Common::name)
    }
}

/// What a filter is checked against besides the payload's fields: the
/// paths of its `Duration` fields (what `took > 30us` compares with) and
/// the common fields its events carry.
#[derive(Clone, Copy, Debug)]
pub(super) struct Given<'a> {
    pub(super) durations: &'a [String],
    pub(super) commons: Commons,
}

#[derive(Clone, Debug)]
pub(super) enum Rhs {
    Int(i128),
    Float(f64),
    Bytes(Box<[u8]>),
    Glob(Box<[u8]>),
    /// A glob that is a literal then one `*` at the end: a prefix test.
    Prefix(Box<[u8]>),
}

#[derive(Clone, Debug)]
pub(super) struct Cmp {
    pub(super) common: Option<Common>,
    pub(super) path: Box<[Go]>,
    /// The same path as a reader's sink sees it (names as shown).
    pub(super) parts: Box<[Part]>,
    /// Its index among the filter's comparisons (a reader's capture slot).
    pub(super) slot: usize,
    /// The value's offset when every field before it has a fixed size
    /// (most events): read there, with no walk.
    pub(super) fixed: Option<usize>,
    /// An integer at a fixed offset compared with a constant: the common
    /// case, evaluated in a few instructions.
    pub(super) fast: Option<Fast>,
    pub(super) leaf: Leaf,
    pub(super) op: Op,
    pub(super) rhs: Rhs,
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
pub(super) struct Fast {
    pub(super) at: usize,
    /// Bytes of the field (1, 2, 4 or 8).
    pub(super) size: usize,
    pub(super) shift: u32,
    pub(super) signed: bool,
    pub(super) bias: u64,
    pub(super) lo: u64,
    pub(super) span: u64,
    pub(super) and: u64,
    pub(super) is_and: bool,
    pub(super) negate: bool,
}

/// The operands of the chain of `&&` (or of `||`) that `e` heads, in
/// order.
pub(super) fn chain(head: &Expr) -> Vec<&Expr> {
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

/// One instruction of the compiled program: a comparison and where to go after it: the
/// expression is flattened into a decision graph (each `&&`, `||` and `!`
/// resolved into jumps when compiled), so evaluation is one loop over
/// comparisons, with no recursion and no operator nodes, and stops as soon
/// as the answer is known (short-circuit, as C's).
#[derive(Clone, Debug)]
pub(super) struct Insn {
    pub(super) cmp: Cmp,
    /// The next step if the comparison holds, or [`TRUE`] / [`FALSE`].
    pub(super) on_true: u32,
    /// The next step if it does not.
    pub(super) on_false: u32,
}

/// Jump targets that end the program.
pub(super) const TRUE: u32 = u32::MAX;

pub(super) const FALSE: u32 = u32::MAX - 1;

/// A filter compiled for one tracepoint.
#[derive(Clone, Debug)]
pub struct Filter {
    /// The program when every comparison has a fast form: (comparison,
    /// on true, on false), compact, run with no call per comparison.
    pub(super) fast_program: Option<Box<[(Fast, u32, u32)]>>,
    /// The same when the program is `a && b && ...` in order (one
    /// comparison alone, the common filter, included).
    pub(super) all_of: Option<Box<[Fast]>>,
    pub(super) event: String,
    pub(super) text: String,
    pub(super) root: Shape,
    pub(super) steps: Vec<Insn>,
    /// The first step (or [`TRUE`] / [`FALSE`]).
    pub(super) entry: u32,
    pub(super) uses_cpu: bool,
    /// See [`Filter::warnings`].
    pub(super) warnings: Vec<String>,
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
pub(super) fn common_named(name: &str, packet: bool) -> Option<Common> {
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
pub(super) fn failing<'a>(event: &'a str, text: &'a str) -> impl Fn(usize, String) -> Error + 'a {
    move |at, why| {
        Error::new(
            ErrorKind::BadFilter,
            pointed(&format!("filter for {event}"), why, text, at),
        )
    }
}

/// The paths of `tp`'s `Duration` fields as a filter names them (their
/// `duration` display hints).
fn durations_of(tp: &'static Tracepoint) -> Vec<String> {
    let mut layout = crate::field::Layout::default();
    for f in tp.desc().fields {
        (f.describe)(f.name, &mut layout);
    }
    duration_paths(layout.hints.iter().map(|(p, h)| (p.as_str(), h.as_str())))
}

/// The paths hinted `duration` among `(path, hint)` pairs whose paths are
/// the recorder's (TSDL identifiers: `field::Layout`), each name as a
/// filter writes it (the user's: `display`). A reader's hints
/// (`tape_ctf`'s formats) hold the user's names already.
pub fn duration_paths<'a>(hints: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    hints
        .filter(|(_, hint)| *hint == "duration")
        .map(|(path, _)| path.split('.').map(display).collect::<Vec<_>>().join("."))
        .collect()
}

/// A field's name as its user wrote it (`http.method`), from the
/// identifier the metadata holds (`_http_2e_method`): what the probe
/// view's sink and the reader's JSON see.
pub(super) fn display(name: &str) -> std::borrow::Cow<'_, str> {
    tape_ctf_model::name_of(name)
}

/// Whether a filter's `n` names the field whose identifier is `ident`:
/// the user's own name (`http.method`), or the name babeltrace2 prints
/// (`http_2e_method`), or the identifier itself.
pub(super) fn is_named(ident: &str, n: &str) -> bool {
    display(ident) == n || ident.strip_prefix('_') == Some(n) || ident == n
}

/// Field names of a struct as the user writes them, then the common
/// fields there are, for messages.
pub(super) fn names(s: &Struct, commons: Commons) -> String {
    let mut v: Vec<std::borrow::Cow<'_, str>> = s.fields.iter().map(|f| display(&f.name)).collect();
    for c in commons.names() {
        v.push(std::borrow::Cow::Borrowed(c));
    }
    v.join(", ")
}

/// A comparison as parsed (`hdr.len >= 512`): the field's path, the
/// operator, the value, and where each stands in the expression.
pub(super) struct Compared<'e> {
    pub(super) path: &'e [Step],
    pub(super) field_at: usize,
    pub(super) op: Op,
    pub(super) op_at: usize,
    pub(super) value: &'e Literal,
    pub(super) value_at: usize,
}

/// Compiles comparison `c` against the event's `fields` (`reader`: for a
/// reader, handed values of any size): a common field's, or a path into
/// the payload to its leaf, the value checked against the leaf's type.
pub(super) fn compile_cmp(
    fields: &Struct,
    c: &Compared<'_>,
    fail: &impl Fn(usize, String) -> Error,
    reader: bool,
    given: &Given<'_>,
) -> Result<Cmp, Error> {
    let Compared {
        path,
        field_at,
        op,
        op_at,
        value,
        value_at,
    } = *c;
    let shown: Vec<String> = path
        .iter()
        .map(|s| match s {
            Step::Name(n) => n.clone(),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect();
    let shown = shown.join(".").replace(".[", "[");
    let in_ns;
    let value = match in_nanoseconds(value, &shown, given.durations) {
        Ok(Some(ns)) => {
            in_ns = ns;
            &in_ns
        }
        Ok(None) => value,
        Err(why) => return Err(fail(value_at, why)),
    };
    if let [Step::Name(n)] = path {
        if let Some(cmp) = common_cmp(fields, n, &shown, c, value, fail, given)? {
            return Ok(cmp);
        }
    }
    let (go, parts, t) = walk(fields, path, &shown, field_at, fail, given)?;
    let (leaf, labels) = leaf_of(t, reader, &shown, field_at, fail)?;
    let rhs = check(&shown, &leaf, labels, op, op_at, value, value_at, fail)?;
    warn_if_constant(t, &rhs, op, &shown, value_at, fail);
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

/// A duration (`30us`) is its nanoseconds, for a field that holds one
/// (`Some`); another value is as it is (`None`); an error for a duration
/// compared with a field that is not one.
fn in_nanoseconds(
    value: &Literal,
    shown: &str,
    durations: &[String],
) -> Result<Option<Literal>, String> {
    match value {
        Literal::Duration(ns) if durations.iter().any(|d| d == shown) => {
            Ok(Some(Literal::Int(*ns)))
        }
        Literal::Duration(_) => Err(format!(
            "`{shown}` is not a duration field: a value with a unit (ns, us, µs, ms, s) \
             compares with a Duration (shown as `1.5ms`){}",
            if durations.is_empty() {
                String::new()
            } else {
                format!("; the event's: {}", durations.join(", "))
            }
        )),
        _ => Ok(None),
    }
}

/// The comparison of common field `n` (the thread's id or name, the CPU),
/// unless the payload has a field by that name; an error for one these
/// events do not carry.
fn common_cmp(
    fields: &Struct,
    n: &str,
    shown: &str,
    c: &Compared<'_>,
    value: &Literal,
    fail: &impl Fn(usize, String) -> Error,
    given: &Given<'_>,
) -> Result<Option<Cmp>, Error> {
    // A field of the payload by that name is the payload's.
    let own = fields.fields.iter().any(|f| is_named(&f.name, n));
    let common = Common::named(n).filter(|_| !own);
    if let Some(m) = common.filter(|m| !given.commons.has(*m)) {
        return Err(fail(
            c.field_at,
            format!(
                "no field `{n}`: these events carry no {} (fields: {})",
                match m {
                    Common::Tid => "thread id",
                    Common::Thread => "thread name",
                    Common::Cpu => "CPU",
                },
                names(fields, given.commons)
            ),
        ));
    }
    let Some(m) = common else {
        return Ok(None);
    };
    let leaf = match m {
        Common::Tid | Common::Cpu => Leaf::UInt(4),
        Common::Thread => Leaf::Str,
    };
    let rhs = check(shown, &leaf, None, c.op, c.op_at, value, c.value_at, fail)?;
    Ok(Some(Cmp {
        common: Some(m),
        path: Box::new([]),
        parts: Box::new([]),
        slot: 0,
        fixed: None,
        fast: None,
        leaf,
        op: c.op,
        rhs,
    }))
}

/// The way from the payload to the field `path` names: each step (a
/// member, an `Option`'s value, an element), its part as shown, and the
/// field's type.
fn walk<'f>(
    fields: &'f Struct,
    path: &[Step],
    shown: &str,
    field_at: usize,
    fail: &impl Fn(usize, String) -> Error,
    given: &Given<'_>,
) -> Result<(Vec<Go>, Vec<Part>, &'f Type), Error> {
    let mut go = Vec::new();
    let mut parts = Vec::new();
    let mut ty: Option<&Type> = None;
    let mut at_struct = Some(fields);
    let mut next = 0;
    while next < path.len() {
        let k = next;
        let step = &path[k];
        next += 1;
        match step {
            Step::Name(n) => {
                let Some(s) = at_struct else {
                    return Err(fail(
                        field_at,
                        format!("`{shown}`: `{n}` follows a field that is not a struct"),
                    ));
                };
                // A name with dots of its own (`http.method`, from
                // `tracing`) before a member of a struct: the longest run
                // of names that one field has.
                let run: Vec<&str> = path[k..]
                    .iter()
                    .map_while(|s| match s {
                        Step::Name(n) => Some(n.as_str()),
                        Step::Index(_) => None,
                    })
                    .collect();
                let found = (1..=run.len()).rev().find_map(|len| {
                    let joined = run[..len].join(".");
                    let i = s.fields.iter().position(|f| is_named(&f.name, &joined))?;
                    Some((i, len))
                });
                if let Some((_, len)) = found {
                    next = k + len;
                }
                let Some(i) = found.map(|(i, _)| i) else {
                    let what = if k == 0 {
                        format!("no field `{n}` (fields: {})", names(s, given.commons))
                    } else {
                        format!("`{shown}`: no member `{n}` (members: {})", {
                            let v: Vec<_> = s.fields.iter().map(|f| display(&f.name)).collect();
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
                parts.push(Part::Member(display(&s.fields[i].name).into_owned()));
                let mut t = &s.fields[i].ty;
                // An Option's value: into its `some` option.
                if let Type::Variant { tag, options } = t {
                    if let (Ok(ti), Some(some)) =
                        (sibling(s, tag), options.iter().find(|o| o.name == "some"))
                    {
                        if let Type::Enum(e) = &s.fields[ti].ty {
                            if let Some(v) = e.entries.iter().find(|x| x.label == "some") {
                                go.push(Go::Option(v.start));
                                parts.push(Part::Option(display(&some.name).into_owned()));
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
    // (A path has a first name: the parser makes none without.)
    let t = ty.ok_or_else(|| fail(field_at, format!("`{shown}`: no field")))?;
    Ok((go, parts, t))
}

/// The leaf a field of type `t` is compared as, and its enum's labels; an
/// error for a type filters cannot compare. A reader is handed values,
/// whatever their size and byte order: any integer, enum or float of up
/// to 64 bits, any text array or sequence.
fn leaf_of<'t>(
    t: &'t Type,
    reader: bool,
    shown: &str,
    field_at: usize,
    fail: &impl Fn(usize, String) -> Error,
) -> Result<(Leaf, Option<&'t tape_ctf_model::Enum>), Error> {
    Ok(match t {
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
    })
}

/// A constant outside the field's type makes the comparison the same for
/// every event (`worker == 256` on a u8: never true): a warning, with the
/// position, since the comparison is still well defined.
fn warn_if_constant(
    t: &Type,
    rhs: &Rhs,
    op: Op,
    shown: &str,
    value_at: usize,
    fail: &impl Fn(usize, String) -> Error,
) {
    let bits = match t {
        Type::Integer(i) => Some((i.size, i.signed)),
        Type::Enum(e) => Some((e.container.size, e.container.signed)),
        _ => None,
    };
    if let (Some((size @ 1..=64, signed)), Rhs::Int(v), false) = (bits, rhs, op == Op::And) {
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
}

/// Checks that `op` and `value` suit a field of kind `leaf`; the value as
/// compared.
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
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
        // `compile_cmp` turned the duration of a duration field into ns.
        Literal::Duration(_) => Err(fail(value_at, format!("`{shown}` is not a duration field"))),
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

impl Fast {
    /// The fast form of a comparison, if it has one.
    pub(super) fn of(c: &Cmp) -> Option<Fast> {
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
}

impl Filter {
    /// Parses `text` and checks it against the fields of `tp`.
    pub fn new(tp: &'static Tracepoint, text: &str) -> Result<Filter, Error> {
        let fields = crate::probe::described_fields(tp)?;
        let event = tp.name();
        let durations = durations_of(tp);
        let given = Given {
            durations: &durations,
            commons: Commons::ALL,
        };
        Filter::build(event, fields, &given, text, &failing(event, text), false)
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
        let given = Given {
            durations: &[],
            commons: Commons::ALL,
        };
        Filter::build(event, fields, &given, text, fail, false)
    }

    /// A filter for a reader: `text` checked against an event class of
    /// any CTF trace (its integers, enums and floats of any size and byte
    /// order), evaluated on the values a decoder hands to a [`Capture`](super::Capture)
    /// instead of on tape's encoded bytes.
    pub fn for_reader(event: &str, fields: &Struct, text: &str) -> Result<Filter, Error> {
        Filter::for_reader_with(event, fields, &[], Commons::ALL, text)
    }

    /// [`Filter::for_reader`] knowing which fields hold a `Duration`
    /// (their paths, from the trace's `duration` hints), which a duration
    /// literal (`took > 30us`) then compares with, and which common fields
    /// the events carry ([`Commons::in_scopes`]): naming another is an
    /// error that lists those there are.
    pub fn for_reader_with(
        event: &str,
        fields: &Struct,
        durations: &[String],
        commons: Commons,
        text: &str,
    ) -> Result<Filter, Error> {
        let given = Given { durations, commons };
        Filter::build(event, fields, &given, text, &failing(event, text), true)
    }

    /// What in the expression is legal but surely not meant: a constant
    /// outside its field's type. Each names the position, as an error
    /// does; `tape ctl`, `TAPE_FILTER` and the readers' `--filter` print
    /// them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub(super) fn build(
        event: &str,
        fields: &Struct,
        given: &Given<'_>,
        text: &str,
        fail: &impl Fn(usize, String) -> Error,
        reader: bool,
    ) -> Result<Filter, Error> {
        WARNINGS.with(|w| w.borrow_mut().clear());
        let r = Filter::build_inner(event, fields, given, text, fail, reader);
        let warnings = WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()));
        r.map(|mut f| {
            f.warnings = warnings;
            f
        })
    }

    pub(super) fn build_inner(
        event: &str,
        fields: &Struct,
        given: &Given<'_>,
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
        f.entry = f.compile(&expr, fields, given, 0, fail, reader, TRUE, FALSE)?;
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
    /// `common_cpu`): a reader then sets them ([`Capture::set_packet`](super::Capture::set_packet)).
    pub fn uses_common(&self) -> bool {
        self.comparisons().any(|c| c.common.is_some())
    }

    /// Compiles `e` so that it goes on to `on_true` when it holds and to
    /// `on_false` when not; returns its entry. Built from the end: the
    /// right operand of `&&` / `||` first, so the left one can jump to it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn compile(
        &mut self,
        e: &Expr,
        fields: &Struct,
        given: &Given<'_>,
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
                        self.compile(t, fields, given, d, fail, reader, next, on_false)?
                    } else {
                        self.compile(t, fields, given, d, fail, reader, on_true, next)?
                    };
                }
                next
            }
            Expr::Not(a) => self.compile(a, fields, given, d, fail, reader, on_false, on_true)?,
            Expr::Cmp {
                field,
                field_at,
                op,
                op_at,
                value,
                value_at,
            } => {
                let c = Compared {
                    path: field,
                    field_at: *field_at,
                    op: *op,
                    op_at: *op_at,
                    value,
                    value_at: *value_at,
                };
                let cmp = compile_cmp(fields, &c, fail, reader, given)?;
                self.steps.push(Insn {
                    cmp,
                    on_true,
                    on_false,
                });
                (self.steps.len() - 1) as u32
            }
        })
    }

    /// Numbers the comparisons (their capture slots).
    pub(super) fn number_slots(&mut self) {
        for (k, step) in self.steps.iter_mut().enumerate() {
            step.cmp.slot = k;
        }
    }

    pub(super) fn comparisons(&self) -> impl Iterator<Item = &Cmp> {
        self.steps.iter().map(|s| &s.cmp)
    }
}
