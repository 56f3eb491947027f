//! `tracing` callsites and their tape tracepoints: made once, when
//! `tracing` registers the callsite, and found at each event by the
//! callsite's metadata address in a table read without a lock.
//!
//! ```text
//! tracing::info!(target: "app::db", rows, "query")   at src/db.rs:42
//!   event   tracing.app.db.info                       fields: message, rows
//!                                                     model.emf.uri "src/db.rs:42", loglevel 6
//! tracing::info!(target: "app::db", name: "slow", ms)
//!   event   tracing.app.db.info.slow                  fields: ms
//!
//! tracing::info_span!(target: "app::db", "request", id)
//!   span    tracing.app.db.info.request.entry         class fn_poll (depth, call)
//!           tracing.app.db.info.request.exit          class fn_poll (depth, call)
//!           tracing.app.db.info.request.new           fields: call, id    (Span::new)
//!           tracing.app.db.info.request.record        fields: call, id    (Span::record)
//!           tracing.app.db.info.request.close         fields: call        (the span closed)
//! ```
//!
//! Names are `tracing.`, the target (`::` as `.`), the level, then an
//! event's own name if it was given one (`name: "slow"`) or a span's: not
//! its place, so that a line added above a callsite does not rename its
//! events. Callsites of one name share it ([`tape::registry::register_shared`]):
//! each is an event class of its own (its id, its fields), its place in
//! the metadata's `model.emf.uri` (`file:line`) and its level in
//! `loglevel`, as LTTng writes both (`TRACE_ERR` 3, `TRACE_WARNING` 4,
//! `TRACE_INFO` 6, `TRACE_DEBUG_LINE` 13 for debug, `TRACE_DEBUG` 14 for
//! trace; `babeltrace2 --fields=loglevel,emf` prints them). Two span
//! callsites of one name share the entry and exit (one function to `tape
//! graph`) and the names of their `.new` and `.record`. An event whose
//! name ends as a span's tracepoints do (`.entry`, `.exit`) gets a `_`
//! after it, so readers never take it for a span's.
//!
//! The table: `SLOTS` slots of leaked `Callsite`s, open addressing by
//! a Fibonacci hash of the metadata's address; a slot is written once
//! (under `INSERT`, Release) and read with Acquire.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tape::field::{Field as TapeField, FieldDesc};
use tape::{Tracepoint, TracepointDesc};
use tracing_core::Metadata;

use crate::value::{Gather, Kind, Value, MAX_FIELDS};

/// Slots of the callsite table (a power of two).
const SLOTS: usize = 1 << 13;

/// Callsites that got no tracepoint (the table or the ids are full, or the
/// name was taken): their events are not recorded.
pub(crate) static UNREGISTERED: AtomicU64 = AtomicU64::new(0);

/// A callsite's tracepoints.
pub(crate) struct Callsite {
    meta: usize,
    /// An event's tracepoint, or a span's `.new` (its fields at creation).
    pub(crate) main: &'static Tracepoint,
    /// The types of `main`'s fields, set at its first event ([`Typing`]).
    pub(crate) main_kinds: Typing,
    /// A span's tracepoints: `.record`, `.entry`, `.exit`.
    pub(crate) span: Option<SpanPoints>,
}

/// A span callsite's other tracepoints.
pub(crate) struct SpanPoints {
    pub(crate) record: &'static Tracepoint,
    /// The types of `record`'s fields, set at its first event.
    pub(crate) record_kinds: Typing,
    pub(crate) entry: &'static Tracepoint,
    pub(crate) exit: &'static Tracepoint,
    /// `.close`: the span closed (its call ends; readers then know it was
    /// entered once, or more).
    pub(crate) close: &'static Tracepoint,
}

/// The types of a tracepoint's fields (a [`Kind`] each), set once, by the
/// first event to be recorded: `tracing` names a callsite's fields when
/// it registers the callsite, but gives their types only with values.
/// That event describes the tracepoint anew
/// ([`tape::probe::describe_at_first_event`]) before it is recorded:
/// `message = "worker started", worker = 0` in every reader, instead of a
/// tagged value per field. A field the first event does not record stays
/// tagged ([`Kind::Any`]); so do all when tape refuses the new description
/// (a probe or filter read the old one first).
pub(crate) struct Typing(OnceLock<Box<[Kind]>>);

impl Typing {
    fn new() -> Typing {
        Typing(OnceLock::new())
    }

    /// The kinds of `tp`'s fields, set from `first` (the values of the
    /// event about to be recorded, `call` before them for a span's) if no
    /// event set them yet. Other threads at the same first event wait for
    /// it (a registration's work: once per tracepoint).
    pub(crate) fn kinds(&self, tp: &'static Tracepoint, call: bool, first: &Gather) -> &[Kind] {
        self.0.get_or_init(|| {
            let kinds = first.kinds();
            let old = tp.desc().fields;
            let own = &old[usize::from(call)..];
            let mut fixed = if call { 8 } else { 0 };
            let mut fields: Vec<FieldDesc> = old[..usize::from(call)]
                .iter()
                .map(|f| FieldDesc {
                    name: f.name,
                    describe: f.describe,
                })
                .collect();
            for (f, kind) in own.iter().zip(&kinds) {
                let (describe, size) = kind.describe();
                fixed += size;
                fields.push(FieldDesc {
                    name: f.name,
                    describe,
                });
            }
            let fields: &'static [FieldDesc] = Box::leak(fields.into_boxed_slice());
            match tape::probe::describe_at_first_event(tp, fields, fixed) {
                Ok(true) => kinds.into_boxed_slice(),
                Ok(false) => vec![Kind::Any; kinds.len()].into_boxed_slice(),
                Err(e) => {
                    // The description holds; the shared rings' metadata
                    // (for a recovery, a recorder) did not take it.
                    eprintln!("tape-tracing: {e}");
                    kinds.into_boxed_slice()
                }
            }
        })
    }
}

impl Callsite {
    /// Its tracepoints: the event's, or a span's four.
    fn points(&self) -> impl Iterator<Item = &'static Tracepoint> + '_ {
        let span = self
            .span
            .iter()
            .flat_map(|s| [s.record, s.entry, s.exit, s.close]);
        std::iter::once(self.main).chain(span)
    }

    /// Whether any of its tracepoints is enabled, or has probes, a filter
    /// or triggers: what the user chose, whether tracing is on or off.
    pub(crate) fn wanted(&self) -> bool {
        use tape::__private::{FILTER, PROBES, TRIGGER};
        self.points()
            .any(|tp| tp.is_enabled() || tp.state() & (PROBES | FILTER | TRIGGER) != 0)
    }

    /// Whether any of its tracepoints is active now (records, or has
    /// probes, a filter or triggers).
    pub(crate) fn active(&self) -> bool {
        self.points()
            .any(|tp| tape::__private::is_active(tp.state()))
    }
}

static TABLE: [AtomicPtr<Callsite>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// Orders registrations (one writer of the table at a time).
static INSERT: Mutex<()> = Mutex::new(());

fn slot_of(meta: usize) -> usize {
    // Fibonacci hashing of the address.
    meta.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - SLOTS.trailing_zeros())
}

fn key(meta: &Metadata<'_>) -> usize {
    meta as *const Metadata<'_> as usize
}

/// The tracepoints of the callsite whose metadata is `meta`, if made.
#[inline]
pub(crate) fn find(meta: &Metadata<'_>) -> Option<&'static Callsite> {
    let key = key(meta);
    let mut i = slot_of(key);
    for _ in 0..SLOTS {
        // Acquire: pairs with the Release store of `insert`: the callsite
        // is whole.
        let p = TABLE[i].load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null slot holds a `Callsite` leaked by `insert`,
        // never freed or changed.
        let c = unsafe { &*p };
        if c.meta == key {
            return Some(c);
        }
        i = (i + 1) % SLOTS;
    }
    None
}

/// Whether `meta` is a hint (`tracing::enabled!`, `event_enabled!`): a
/// question about events, with no event of its own. `tracing_core` keeps
/// the kind private: a hint is neither an event nor a span, or is named
/// `enabled <place>` as the macros name it.
pub(crate) fn is_hint(meta: &Metadata<'_>) -> bool {
    (!meta.is_event() && !meta.is_span()) || meta.name().starts_with("enabled ")
}

/// The callsite of `meta`, registered now if no thread has yet (one that
/// is hit while another thread registers it: `tracing` lets it through
/// before the registration reached the layer).
#[inline]
pub(crate) fn find_or_register(meta: &'static Metadata<'static>) -> Option<&'static Callsite> {
    find(meta).or_else(|| register(meta))
}

/// Adds `c` (the caller holds `INSERT`); false if the table is full.
fn insert(c: Callsite) -> Option<&'static Callsite> {
    let mut i = slot_of(c.meta);
    for _ in 0..SLOTS {
        if TABLE[i].load(Ordering::Relaxed).is_null() {
            let c: &'static Callsite = Box::leak(Box::new(c));
            // Release: pairs with the Acquire of `find`.
            TABLE[i].store((c as *const Callsite).cast_mut(), Ordering::Release);
            return Some(c);
        }
        i = (i + 1) % SLOTS;
    }
    None
}

/// `tracing.` + the target (`::` as `.`) + the level.
fn prefix(meta: &Metadata<'_>) -> String {
    let target = meta.target().replace("::", ".");
    let level = meta.level().as_str().to_ascii_lowercase();
    format!("tracing.{target}.{level}")
}

/// The tracepoint name of an event callsite (module docs): its target and
/// level, and its own name when it has one (`tracing` names the others
/// `event <file>:<line>`).
pub fn event_name(meta: &Metadata<'_>) -> String {
    let mut n = match meta.name().strip_prefix("event ") {
        Some(_) => prefix(meta),
        None => format!("{}.{}", prefix(meta), meta.name()),
    };
    if n.ends_with(tape::traced::ENTRY) || n.ends_with(tape::traced::EXIT) || n.ends_with(".close")
    {
        n.push('_');
    }
    n
}

/// The name a span callsite's tracepoints start with (module docs).
pub fn span_name(meta: &Metadata<'_>) -> String {
    format!("{}.{}", prefix(meta), meta.name())
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The descriptions of `meta`'s fields, `call` first for a span's: names
/// made unique (a repeated one gets `_2`, `_3`, ...: CTF wants distinct
/// names), at most [`MAX_FIELDS`] of the callsite's.
fn fields(meta: &'static Metadata<'static>, call: bool) -> &'static [FieldDesc] {
    let mut out: Vec<FieldDesc> = Vec::new();
    let mut taken: Vec<&str> = Vec::new();
    if call {
        out.push(FieldDesc {
            name: "call",
            describe: <u64 as TapeField>::describe,
        });
        taken.push("call");
    }
    for f in meta.fields().iter().take(MAX_FIELDS) {
        let mut name: &'static str = f.name();
        let mut k = 2;
        while taken.contains(&name) {
            name = leak(format!("{}_{k}", f.name()));
            k += 1;
        }
        taken.push(name);
        out.push(FieldDesc {
            name,
            describe: <Value<'_> as TapeField>::describe,
        });
    }
    Box::leak(out.into_boxed_slice())
}

/// A `tracing` level as LTTng's log levels number it (module docs).
pub fn loglevel(level: &tracing_core::Level) -> i32 {
    match *level {
        tracing_core::Level::ERROR => 3,
        tracing_core::Level::WARN => 4,
        tracing_core::Level::INFO => 6,
        tracing_core::Level::DEBUG => 13,
        _ => 14,
    }
}

fn desc(
    meta: &'static Metadata<'static>,
    name: String,
    fields: &'static [FieldDesc],
) -> &'static TracepointDesc {
    let file = meta.file().unwrap_or("?");
    let line = meta.line().unwrap_or(0);
    Box::leak(Box::new(TracepointDesc {
        name: leak(name),
        file,
        line,
        module_path: meta.module_path().unwrap_or(meta.target()),
        fast_path: false,
        fields,
        fixed_size: 0,
        format: None,
        class: None,
        loglevel: Some(loglevel(meta.level())),
        emf_uri: Some(leak(format!("{file}:{line}"))),
    }))
}

/// Registers `base` + each suffix, names shared with the other callsites
/// of the same name (module docs); `typed`: their first event describes
/// their fields ([`Typing`]), which the shared rings' metadata says they
/// await.
fn register_shared<const N: usize>(
    meta: &'static Metadata<'static>,
    base: &str,
    suffixes: [&str; N],
    fields: &'static [FieldDesc],
    typed: bool,
) -> Option<[&'static Tracepoint; N]> {
    let mut out = [None; N];
    for (o, suffix) in out.iter_mut().zip(suffixes) {
        let d = desc(meta, format!("{base}{suffix}"), fields);
        let r = if typed {
            tape::registry::register_shared_awaiting(d)
        } else {
            tape::registry::register_shared(d)
        };
        *o = Some(r.ok()?);
    }
    Some(out.map(|o| o.expect("set above")))
}

/// A span's entry or exit tracepoint, `name`: the one made for another
/// callsite of the same name if there is one (of the class `fn_poll`),
/// else a new one.
fn span_point(meta: &'static Metadata<'static>, name: String) -> Option<&'static Tracepoint> {
    if let Some(tp) = tape::registry::lookup(&name) {
        let poll = tp.desc().class == Some("fn_poll");
        return poll.then_some(tp);
    }
    let d: &'static TracepointDesc = Box::leak(Box::new(tape::traced::poll_desc(
        leak(name),
        meta.file().unwrap_or("?"),
        meta.line().unwrap_or(0),
        meta.module_path().unwrap_or(meta.target()),
    )));
    tape::registry::register(d).ok()
}

/// The tracepoints of `meta`'s callsite, made and registered the first
/// time (with a lock and allocations; once per callsite). When they cannot
/// be made, counted in [`UNREGISTERED`] and kept as a callsite that records
/// nothing. `None` only when the table is full (then each call tries
/// again, under the lock).
pub(crate) fn register(meta: &'static Metadata<'static>) -> Option<&'static Callsite> {
    if let Some(c) = find(meta) {
        return Some(c);
    }
    let _g = INSERT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = find(meta) {
        return Some(c);
    }
    let made = if meta.is_span() {
        make_span(meta)
    } else {
        register_shared(meta, &event_name(meta), [""], fields(meta, false), true).map(|[main]| {
            Callsite {
                meta: key(meta),
                main,
                main_kinds: Typing::new(),
                span: None,
            }
        })
    };
    let made = made.unwrap_or_else(|| {
        // Relaxed: a counter read back for display.
        UNREGISTERED.fetch_add(1, Ordering::Relaxed);
        // Kept, so its events find it and record nothing, without trying
        // again at each one.
        Callsite {
            meta: key(meta),
            main: &NOWHERE,
            main_kinds: Typing::new(),
            span: None,
        }
    });
    let c = insert(made);
    // A tool attached to `tape:runtime_event` sees the callsite's events
    // from the first one (not from the watcher's next look).
    for tp in c.iter().flat_map(|c| c.points()) {
        if !std::ptr::eq(tp, &NOWHERE) {
            tape::usdt::cover(tp);
        }
    }
    c
}

/// The tracepoint of callsites that could get none: never registered,
/// never enabled.
static NOWHERE: Tracepoint = Tracepoint::new(&TracepointDesc {
    name: "tracing.unregistered",
    file: file!(),
    line: line!(),
    module_path: module_path!(),
    fast_path: false,
    fields: &[],
    fixed_size: 0,
    format: None,
    class: None,
    loglevel: None,
    emf_uri: None,
});

fn make_span(meta: &'static Metadata<'static>) -> Option<Callsite> {
    let base = span_name(meta);
    let entry = span_point(meta, format!("{base}{}", tape::traced::ENTRY))?;
    let exit = span_point(meta, format!("{base}{}", tape::traced::EXIT))?;
    let f = fields(meta, true);
    let [main, record] = register_shared(meta, &base, [".new", ".record"], f, true)?;
    static CALL_ONLY: [FieldDesc; 1] = [FieldDesc {
        name: "call",
        describe: <u64 as TapeField>::describe,
    }];
    let [close] = register_shared(meta, &base, [".close"], &CALL_ONLY, false)?;
    Some(Callsite {
        meta: key(meta),
        main,
        main_kinds: Typing::new(),
        span: Some(SpanPoints {
            record,
            record_kinds: Typing::new(),
            entry,
            exit,
            close,
        }),
    })
}
