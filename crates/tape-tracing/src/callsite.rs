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
//! The table: slots of leaked `Callsite`s, open addressing by a
//! Fibonacci hash of the metadata's address; a slot is written once
//! (under `INSERT`, Release) and read with Acquire. It has no limit: when
//! half full, a table twice its size is filled and published in its
//! place (Release), and the old one is leaked, never freed, so that a
//! reader still probing it is safe; a reader that misses a callsite there
//! registers it under the lock, which finds it in the new table.
//!
//! ```text
//! TABLE ──> Table { slots: [ptr; 2^k] }      (2^k ≥ 2 × callsites; from 2^10)
//!                     │
//!                     └──> Callsite { meta, main, span }   (leaked, written once)
//! ```
//!
//! A callsite that gets no tracepoint (the registry's 65,535 event ids are
//! all given, or its name is taken by a declared tracepoint of another
//! class) records nothing: its events are counted
//! (`events_lost_tracing_unregistered` in every trace's `env`, which
//! `tape stats` adds to the losses), and the first is said on stderr.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tape::field::{Field as TapeField, FieldDesc};
use tape::{Tracepoint, TracepointDesc};
use tracing_core::Metadata;

use crate::value::{Gather, Kind, Value, MAX_FIELDS};

/// Slots of the first callsite table (a power of two).
const FIRST_SLOTS: usize = 1 << 10;

/// Callsites that got no tracepoint (the ids are full, or the name was
/// taken): their events are not recorded.
pub(crate) static UNREGISTERED: AtomicU64 = AtomicU64::new(0);

/// Events of callsites that got no tracepoint: not recorded, counted
/// (`events_lost_tracing_unregistered`).
pub(crate) static UNREGISTERED_EVENTS: AtomicU64 = AtomicU64::new(0);

/// A callsite's tracepoints.
pub(crate) struct Callsite {
    meta: &'static Metadata<'static>,
    /// An event's tracepoint, or a span's `.new` (its fields at creation).
    pub(crate) main: &'static Tracepoint,
    /// The types of `main`'s fields, set at its first event ([`Typing`]).
    pub(crate) main_kinds: Typing,
    /// A span's tracepoints: `.record`, `.entry`, `.exit`.
    pub(crate) span: Option<SpanPoints>,
    /// Whether a thread noted a span of it as made (`crate::made`): its
    /// closes elsewhere then make older entries stale.
    noted: AtomicBool,
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
pub(crate) struct Typing(OnceLock<Kinds>);

/// A [`Typing`] once set: the kinds, and when none is [`Kind::Any`], the
/// least bytes an event's values take (8 a number, 1 a boolean or a
/// string's NUL): such an event is encoded as `tracing` visits it
/// ([`crate::value::Direct`]).
struct Kinds {
    kinds: Box<[Kind]>,
    direct: Option<usize>,
}

impl Kinds {
    fn new(kinds: Box<[Kind]>) -> Kinds {
        let direct = kinds
            .iter()
            .map(|k| match k {
                Kind::U64 | Kind::I64 | Kind::F64 => Some(8),
                Kind::Bool | Kind::Text => Some(1),
                Kind::Any => None,
            })
            .sum();
        Kinds { kinds, direct }
    }
}

impl Typing {
    /// The kinds and the least size of an event's values, when they are
    /// set and all typed: the event can be encoded as it is visited.
    #[inline(always)]
    pub(crate) fn direct(&self) -> Option<(&[Kind], usize)> {
        let t = self.0.get()?;
        Some((&t.kinds, t.direct?))
    }

    fn new() -> Typing {
        Typing(OnceLock::new())
    }

    /// The kinds of `tp`'s fields, set from `first` (the values of the
    /// event about to be recorded, `call` before them for a span's) if no
    /// event set them yet. Other threads at the same first event wait for
    /// it (a registration's work: once per tracepoint).
    pub(crate) fn kinds(&self, tp: &'static Tracepoint, call: bool, first: &Gather) -> &[Kind] {
        &self
            .0
            .get_or_init(|| {
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
                Kinds::new(
                    match tape::probe::describe_at_first_event(tp, fields, fixed) {
                        Ok(true) => kinds.into_boxed_slice(),
                        Ok(false) => vec![Kind::Any; kinds.len()].into_boxed_slice(),
                        Err(e) => {
                            // The description holds; the shared rings' metadata
                            // (for a recovery, a recorder) did not take it.
                            eprintln!("tape-tracing: {e}");
                            kinds.into_boxed_slice()
                        }
                    },
                )
            })
            .kinds
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

    /// Whether it got no tracepoint: its events are counted, not recorded.
    pub(crate) fn unregistered(&self) -> bool {
        std::ptr::eq(self.main, &NOWHERE)
    }

    /// Counts an event (or a span's creation) of a callsite that got no
    /// tracepoint, and says whether it was one.
    pub(crate) fn lost(&self) -> bool {
        let lost = self.unregistered();
        if lost {
            // Relaxed: a counter read at a save.
            UNREGISTERED_EVENTS.fetch_add(1, Ordering::Relaxed);
        }
        lost
    }

    /// How many fields its `tracing` metadata names.
    #[inline]
    pub(crate) fn fields(&self) -> usize {
        self.meta.fields().len()
    }

    /// Marks that a thread noted a span of it as made (`crate::made`).
    #[inline]
    pub(crate) fn note_made(&self) {
        // Relaxed: the closing thread learns of the span, and of this
        // store before it, through the span's own hand-over.
        if !self.noted.load(Ordering::Relaxed) {
            self.noted.store(true, Ordering::Relaxed);
        }
    }

    /// Whether [`Callsite::note_made`] was called.
    #[inline]
    pub(crate) fn was_made_noted(&self) -> bool {
        // Relaxed: as in `note_made`.
        self.noted.load(Ordering::Relaxed)
    }

    /// Whether any of its tracepoints is active now (records, or has
    /// probes, a filter or triggers).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        // The event's (or `.new`'s) first, with no iterator: asked at each
        // event while `tracing` asks the filter.
        let active = |tp: &Tracepoint| tape::__private::is_active(tp.state());
        active(self.main)
            || self
                .span
                .as_ref()
                .is_some_and(|s| [s.record, s.entry, s.exit, s.close].into_iter().any(active))
    }
}

/// The open-addressed table of callsites (module docs).
struct Table {
    slots: Box<[AtomicPtr<Callsite>]>,
}

impl Table {
    fn new(slots: usize) -> Table {
        Table {
            slots: (0..slots)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        }
    }

    fn slot_of(&self, meta: usize) -> usize {
        // Fibonacci hashing of the address.
        meta.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (usize::BITS - self.slots.len().trailing_zeros())
    }

    fn find(&self, key: usize) -> Option<&'static Callsite> {
        let n = self.slots.len();
        let mut i = self.slot_of(key);
        for _ in 0..n {
            // Acquire: pairs with the Release store of `put`: the
            // callsite is whole.
            let p = self.slots[i].load(Ordering::Acquire);
            if p.is_null() {
                return None;
            }
            // SAFETY: a non-null slot holds a `Callsite` leaked by
            // `insert`, never freed or changed.
            let c = unsafe { &*p };
            if self::key(c.meta) == key {
                return Some(c);
            }
            i = (i + 1) & (n - 1);
        }
        None
    }

    /// Puts `c` in a free slot (the caller holds `INSERT`; the table is
    /// at most half full, so there is one).
    fn put(&self, c: &'static Callsite) {
        let n = self.slots.len();
        let mut i = self.slot_of(key(c.meta));
        while !self.slots[i].load(Ordering::Relaxed).is_null() {
            i = (i + 1) & (n - 1);
        }
        // Release: pairs with the Acquire of `find`.
        self.slots[i].store((c as *const Callsite).cast_mut(), Ordering::Release);
    }
}

/// The current table; null until the first registration. Old tables are
/// leaked (module docs).
static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
/// Orders registrations (one writer of the table at a time); holds the
/// number of callsites in the table.
static INSERT: Mutex<usize> = Mutex::new(0);

fn key(meta: &Metadata<'_>) -> usize {
    meta as *const Metadata<'_> as usize
}

thread_local! {
    /// The callsite this thread found last, by key: an event is looked up
    /// twice when `tracing` asks the filter first (interest "sometimes"),
    /// and a loop's events are one callsite's. Callsites are never freed,
    /// so the entry never dangles; no destructor, so it is there in any
    /// thread-local destructor too.
    static LAST: std::cell::Cell<(usize, Option<&'static Callsite>)> =
        const { std::cell::Cell::new((0, None)) };
}

/// The tracepoints of the callsite whose metadata is `meta`, if made.
#[inline]
pub(crate) fn find(meta: &Metadata<'_>) -> Option<&'static Callsite> {
    let key = key(meta);
    if let (k, Some(c)) = LAST.get() {
        if k == key {
            return Some(c);
        }
    }
    // Acquire: pairs with the Release store of `insert`: the table (and
    // what its slots held when it was published) is whole.
    let t = TABLE.load(Ordering::Acquire);
    if t.is_null() {
        return None;
    }
    // SAFETY: a non-null `TABLE` is a table leaked by `insert`, never
    // freed; its slots are atomics, its length fixed.
    let found = unsafe { &*t }.find(key);
    if found.is_some() {
        LAST.set((key, found));
    }
    found
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
pub(crate) fn find_or_register(meta: &'static Metadata<'static>) -> &'static Callsite {
    find(meta).unwrap_or_else(|| register(meta))
}

/// Adds `c` (the caller holds `INSERT`, whose count is `len`), in a
/// table twice as large when the current one would be more than half
/// full (module docs).
fn insert(c: Callsite, len: &mut usize) -> &'static Callsite {
    let c: &'static Callsite = Box::leak(Box::new(c));
    // Relaxed: only `insert`, under `INSERT`, stores `TABLE`.
    let cur = TABLE.load(Ordering::Relaxed);
    // SAFETY: as in `find`.
    let cur: Option<&Table> = unsafe { cur.as_ref() };
    *len += 1;
    match cur {
        Some(t) if 2 * *len <= t.slots.len() => t.put(c),
        old => {
            let slots = old.map_or(FIRST_SLOTS, |t| 2 * t.slots.len());
            let new = Table::new(slots);
            for old in old.iter().flat_map(|t| t.slots.iter()) {
                let p = old.load(Ordering::Relaxed);
                if !p.is_null() {
                    // SAFETY: as in `Table::find`.
                    new.put(unsafe { &*p });
                }
            }
            new.put(c);
            // Release: pairs with the Acquire of `find`. The old table
            // stays allocated (leaked) for readers still in it.
            TABLE.store(Box::into_raw(Box::new(new)), Ordering::Release);
        }
    }
    c
}

/// `s` with each NUL as U+FFFD: a CTF reader in C (babeltrace2) ends a
/// string at a NUL, and the registry refuses a tracepoint whose name or
/// place holds one (the metadata writer would).
fn no_nul(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}").into()
    } else {
        s.into()
    }
}

/// Longest name kept, in bytes (a field's, a tracepoint's before a span's
/// suffix): LTTng-UST's limit for its event and field names (256).
pub const MAX_NAME: usize = 256;

/// Names cut to [`MAX_NAME`] bytes so far.
pub(crate) static NAMES_CUT: AtomicU64 = AtomicU64::new(0);

/// The name tape-tracing records for `s` (a field's name, or a
/// tracepoint's): `s`, or when longer than [`MAX_NAME`] bytes its start
/// (cut at a character boundary) and [`crate::CUT_MARK`], as a value is
/// cut. Names are counted when their callsite is registered.
pub fn kept_name(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= MAX_NAME {
        return s.into();
    }
    let mut n = MAX_NAME - crate::CUT_MARK.len();
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    format!("{}{}", &s[..n], crate::CUT_MARK).into()
}

/// Counts a name of `len` bytes if [`kept_name`] cuts it (the first said
/// on stderr).
fn count_cut(len: usize) {
    if len <= MAX_NAME {
        return;
    }
    // Relaxed: a counter read back for display.
    if NAMES_CUT.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!(
            "tape-tracing: a `tracing` name of {len} bytes is cut to {MAX_NAME} (its start and \
             {:?}); names cut are counted (tape_tracing::cut_names)",
            crate::CUT_MARK
        );
    }
}

/// A tracepoint name before [`kept_name`]: `tracing.`, the target and
/// level, and the callsite's own name when `own`.
fn full_name(meta: &Metadata<'_>, own: bool) -> String {
    if own {
        format!("{}.{}", prefix(meta), no_nul(meta.name()))
    } else {
        prefix(meta)
    }
}

/// `tracing.` + the target (`::` as `.`) + the level.
fn prefix(meta: &Metadata<'_>) -> String {
    let target = no_nul(meta.target()).replace("::", ".");
    let level = meta.level().as_str().to_ascii_lowercase();
    format!("tracing.{target}.{level}")
}

/// The tracepoint name of an event callsite (module docs): its target and
/// level, and its own name when it has one (`tracing` names the others
/// `event <file>:<line>`).
pub fn event_name(meta: &Metadata<'_>) -> String {
    let n = full_name(meta, !meta.name().starts_with("event "));
    let mut n = kept_name(&n).into_owned();
    if n.ends_with(tape::__private::traced::ENTRY)
        || n.ends_with(tape::__private::traced::EXIT)
        || n.ends_with(".close")
    {
        n.push('_');
    }
    n
}

/// The name a span callsite's tracepoints start with (module docs).
pub fn span_name(meta: &Metadata<'_>) -> String {
    kept_name(&full_name(meta, true)).into_owned()
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
        count_cut(f.name().len());
        let base: &'static str = match kept_name(f.name()) {
            std::borrow::Cow::Borrowed(_) => f.name(),
            std::borrow::Cow::Owned(cut) => leak(cut),
        };
        let mut name = base;
        let mut k = 2;
        while taken.contains(&name) {
            name = leak(format!("{base}_{k}"));
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
        emf_uri: Some(leak(format!("{}:{line}", no_nul(file)))),
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
) -> Result<[&'static Tracepoint; N], String> {
    let mut out = [None; N];
    for (o, suffix) in out.iter_mut().zip(suffixes) {
        let d = desc(meta, format!("{base}{suffix}"), fields);
        let r = if typed {
            tape::registry::register_shared_awaiting(d)
        } else {
            tape::registry::register_shared(d)
        };
        *o = Some(r.map_err(|e| e.to_string())?);
    }
    Ok(out.map(|o| o.expect("set above")))
}

/// A span's entry or exit tracepoint, `name`: the one made for another
/// callsite of the same name if there is one (of the class `fn_poll`),
/// else a new one.
fn span_point(
    meta: &'static Metadata<'static>,
    name: String,
) -> Result<&'static Tracepoint, String> {
    if let Some(tp) = tape::registry::lookup(&name) {
        return match tp.desc().class {
            Some("fn_poll") => Ok(tp),
            _ => Err(format!(
                "{name:?} is taken by a tracepoint that is not a span's"
            )),
        };
    }
    let d: &'static TracepointDesc = Box::leak(Box::new(tape::__private::traced::poll_desc(
        leak(name),
        meta.file().unwrap_or("?"),
        meta.line().unwrap_or(0),
        meta.module_path().unwrap_or(meta.target()),
    )));
    tape::registry::register(d).map_err(|e| e.to_string())
}

/// The tracepoints of `meta`'s callsite, made and registered the first
/// time (with a lock and allocations; once per callsite). When they cannot
/// be made, counted in [`UNREGISTERED`] (the first said on stderr) and
/// kept as a callsite that records nothing, whose events
/// [`Callsite::lost`] counts.
pub(crate) fn register(meta: &'static Metadata<'static>) -> &'static Callsite {
    if let Some(c) = find(meta) {
        return c;
    }
    let mut len = INSERT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = find(meta) {
        return c;
    }
    count_cut(full_name(meta, meta.is_span() || !meta.name().starts_with("event ")).len());
    let made = if meta.is_span() {
        make_span(meta)
    } else {
        register_shared(meta, &event_name(meta), [""], fields(meta, false), true).map(|[main]| {
            Callsite {
                meta,
                main,
                main_kinds: Typing::new(),
                span: None,
                noted: AtomicBool::new(false),
            }
        })
    };
    let made = made.unwrap_or_else(|why| {
        // Relaxed: a counter read back for display.
        if UNREGISTERED.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "tape-tracing: the `tracing` callsite {:?} at {}:{} gets no tracepoint ({why}); \
                 its events, and those of any other callsite without one, are not recorded \
                 and are counted as lost (events_lost_tracing_unregistered)",
                meta.name(),
                meta.file().unwrap_or("?"),
                meta.line().unwrap_or(0),
            );
        }
        // Kept, so its events find it and are counted, without trying
        // again at each one.
        Callsite {
            meta,
            main: &NOWHERE,
            main_kinds: Typing::new(),
            span: None,
            noted: AtomicBool::new(false),
        }
    });
    // A tool attached to `tape:runtime_event` sees the callsite's events
    // from the first one (not from the watcher's next look): its
    // tracepoints are given to the probe before the callsite is in the
    // table, where another thread may find it and emit at once (it did:
    // bpftrace saw 39 of 40 `.new` events). Under `INSERT`: `cover` waits
    // a bounded time for the probes' lock, whose holder never waits for a
    // subscriber (`tape::usdt`).
    for tp in made.points() {
        if !std::ptr::eq(tp, &NOWHERE) {
            tape::__private::usdt::cover(tp);
        }
    }
    let c = insert(made, &mut len);
    drop(len);
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

fn make_span(meta: &'static Metadata<'static>) -> Result<Callsite, String> {
    let base = span_name(meta);
    let entry = span_point(meta, format!("{base}{}", tape::__private::traced::ENTRY))?;
    let exit = span_point(meta, format!("{base}{}", tape::__private::traced::EXIT))?;
    let f = fields(meta, true);
    let [main, record] = register_shared(meta, &base, [".new", ".record"], f, true)?;
    static CALL_ONLY: [FieldDesc; 1] = [FieldDesc {
        name: "call",
        describe: <u64 as TapeField>::describe,
    }];
    let [close] = register_shared(meta, &base, [".close"], &CALL_ONLY, false)?;
    Ok(Callsite {
        meta,
        main,
        main_kinds: Typing::new(),
        span: Some(SpanPoints {
            record,
            record_kinds: Typing::new(),
            entry,
            exit,
            close,
        }),
        noted: AtomicBool::new(false),
    })
}
