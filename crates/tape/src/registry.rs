//! The registry of tracepoints: link-section registration, ids, duplicate
//! detection, and selection by name, glob or regex.
//!
//! `tracepoint!` puts a `&'static Tracepoint` into the [`TRACEPOINTS`]
//! distributed slice (`linkme`), so every tracepoint of every crate linked
//! into the binary is known at start-up without a register call. The first
//! use of the registry sorts them by name and gives each its id (its index:
//! ids are stable for a given binary) and records the names declared twice.
//!
//! Selection patterns, as accepted by [`enable_pattern`] and `TAPE_TRACE`:
//!
//! | pattern          | selects                                   |
//! |------------------|-------------------------------------------|
//! | `app.net.rx`     | that tracepoint (one not registered yet: pending, below) |
//! | `app.net.*`      | a glob (`*`, `?`, `[..]`, `{a,b}`)         |
//! | `/^app\.(rx|tx)$/` | a regex, between slashes                |

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::error::{Error, ErrorKind};
use crate::point::Tracepoint;
use crate::point::{function_of, EXIT, RET};

/// Every tracepoint of the binary (filled at link time by `tracepoint!`).
#[linkme::distributed_slice]
pub static TRACEPOINTS: [&'static Tracepoint];

/// One `printk!` call site (see [`crate::printk!`]), registered at link
/// time as tracepoints are; its id is its index among the sorted sites.
#[derive(Debug)]
pub struct PrintkSite {
    /// The format, as written.
    pub fmt: &'static str,
    /// Source file.
    pub file: &'static str,
    /// Source line.
    pub line: u32,
    id: AtomicU32,
}

/// Not yet given an id.
pub(crate) const NO_PRINTK_ID: u32 = u32::MAX;

impl PrintkSite {
    /// A site (used by `printk!`).
    pub const fn new(fmt: &'static str, file: &'static str, line: u32) -> PrintkSite {
        PrintkSite {
            fmt,
            file,
            line,
            id: AtomicU32::new(NO_PRINTK_ID),
        }
    }

    /// The format id (valid once the registry is built, which enabling
    /// `tape.printk` does).
    pub fn id(&self) -> u32 {
        // Relaxed: written once, under the registry's `OnceLock`, before
        // `tape.printk` can be enabled (its enable goes through the same
        // registry); an emit that saw the enable bit sees the id.
        self.id.load(Ordering::Relaxed)
    }
}

/// Every `printk!` site of the binary (filled at link time by `printk!`).
#[linkme::distributed_slice]
pub static PRINTK_SITES: [&'static PrintkSite];

/// The sites sorted by file, line and format: the index is the id. Called
/// when the registry is built.
fn assign_printk_ids() -> Vec<&'static PrintkSite> {
    let mut sites: Vec<&'static PrintkSite> = PRINTK_SITES.iter().copied().collect();
    sites.sort_by_key(|s| (s.file, s.line, s.fmt));
    for (i, s) in sites.iter().enumerate() {
        s.id.store(i as u32, Ordering::Relaxed);
    }
    sites
}

struct Registry {
    /// The link-time tracepoints sorted by name, then those registered at
    /// run time ([`register`]) in their order; the index is the id.
    points: Table,
    /// How many are link-time (sorted) ones.
    linked: usize,
    /// `printk!` sites, sorted; the index is the format id.
    printk_sites: Vec<&'static PrintkSite>,
    /// Names declared more than once (or too many tracepoints).
    duplicates: Option<Error>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let mut points: Vec<&'static Tracepoint> = TRACEPOINTS.iter().copied().collect();
        points.sort_by(|a, b| {
            (a.name(), a.desc().file, a.desc().line).cmp(&(b.name(), b.desc().file, b.desc().line))
        });
        let mut dups = Vec::new();
        for w in points.windows(2) {
            if w[0].name() == w[1].name() {
                dups.push(format!(
                    "tracepoint {:?} is declared twice: at {} and at {}",
                    w[0].name(),
                    w[0].location(),
                    w[1].location()
                ));
            }
        }
        if points.len() > usize::from(u16::MAX) {
            dups.push(format!(
                "{} tracepoints are declared; event ids are 16-bit, so only the first {} \
                 (by name) can be used",
                points.len(),
                u16::MAX
            ));
            points.truncate(usize::from(u16::MAX));
        }
        for (id, p) in points.iter().enumerate() {
            p.set_id(id as u16);
        }
        let linked = points.len();
        Registry {
            points: Table::new(points),
            linked,
            // Before any enable: `tape.printk` emits only once enabled.
            printk_sites: assign_printk_ids(),
            duplicates: (!dups.is_empty())
                .then(|| Error::new(ErrorKind::Duplicate, dups.join("; "))),
        }
    })
}

/// Checks that no two tracepoints share a name; the error names both
/// declarations (`file:line`) of each duplicate.
pub fn check() -> Result<(), Error> {
    match &registry().duplicates {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

/// Every tracepoint, the index its event id: the link-time ones sorted by
/// name, then those registered at run time ([`register`]) in their order.
/// A later call may return more (never fewer, never in another order).
pub fn tracepoints() -> &'static [&'static Tracepoint] {
    registry().points.as_slice()
}

/// The most tracepoints a process can have: event ids are 16-bit.
pub const MAX_TRACEPOINTS: usize = u16::MAX as usize;

/// An append-only table of tracepoints, read without a lock: a buffer of
/// [`MAX_TRACEPOINTS`] entries allocated once (its pages touched only as
/// they fill) and never freed or moved; `len` entries are set, and an
/// entry never changes once `len` covers it.
///
/// ```text
///   buf: [ p0 p1 ... p(linked-1) | d0 d1 ... d(k-1) | (unset) ... ]
///          link-time, by name      run time           len = linked + k
/// ```
struct Table {
    buf: *mut &'static Tracepoint,
    /// Entries set. Stored with Release after the entry below it is
    /// written (under [`CONTROL`]); loaded with Acquire by readers, which
    /// then read only entries below it.
    len: AtomicUsize,
}

// SAFETY: the buffer is shared read-only below `len` (entries are never
// written again once published) and written only above it, by one writer
// at a time (under `CONTROL`); `&'static Tracepoint` is Send and Sync.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

impl Table {
    fn new(points: Vec<&'static Tracepoint>) -> Table {
        let mut buf = std::mem::ManuallyDrop::new(Vec::with_capacity(MAX_TRACEPOINTS));
        buf.extend(points.into_iter().take(MAX_TRACEPOINTS));
        Table {
            buf: buf.as_mut_ptr(),
            len: AtomicUsize::new(buf.len()),
        }
    }

    fn as_slice(&self) -> &'static [&'static Tracepoint] {
        let len = self.len.load(Ordering::Acquire);
        // SAFETY: `buf` holds `MAX_TRACEPOINTS` entries' room, allocated
        // once and never freed; the `len` first are initialised (written
        // before the Release store of `len` this Acquire load read) and
        // never written again, so a shared slice of them is valid for ever.
        unsafe { std::slice::from_raw_parts(self.buf, len) }
    }

    /// Appends `p` (the caller holds `CONTROL`: one writer); its id.
    fn push(&self, p: &'static Tracepoint) -> Option<usize> {
        let len = self.len.load(Ordering::Relaxed);
        if len >= MAX_TRACEPOINTS {
            return None;
        }
        // SAFETY: `len < MAX_TRACEPOINTS`, inside the allocation; no reader
        // reads index `len` before the store below publishes it, and no
        // other writer runs (`CONTROL`).
        unsafe { self.buf.add(len).write(p) };
        self.len.store(len + 1, Ordering::Release);
        Some(len)
    }
}

/// Every `printk!` site, sorted (the index is the format id).
pub fn printk_sites() -> &'static [&'static PrintkSite] {
    &registry().printk_sites
}

/// The tracepoint named `name`.
pub fn lookup(name: &str) -> Option<&'static Tracepoint> {
    linked_lookup(name).or_else(|| {
        LATER
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    })
}

/// The link-time tracepoint named `name` (a binary search).
fn linked_lookup(name: &str) -> Option<&'static Tracepoint> {
    let points = tracepoints();
    let linked = &points[..registry().linked.min(points.len())];
    linked
        .binary_search_by(|p| p.name().cmp(name))
        .ok()
        .map(|i| linked[i])
}

/// The tracepoints registered at run time, by name (the first of a
/// shared name): [`lookup`] without a walk of them all, which made
/// registering 100,000 `tracing` callsites take minutes. Its lock also
/// makes a registration's check and push one step.
static LATER: Mutex<BTreeMap<&'static str, &'static Tracepoint>> = Mutex::new(BTreeMap::new());

/// Registers a tracepoint made at run time (a `tracing` callsite's, or any
/// whose name is known only then): it gets the next event id, the saves
/// describe it from `desc` as they describe link-time ones, and it is
/// enabled if the patterns applied so far (in order: the last that matches
/// it wins) enable it, so `TAPE_TRACE='tracing.*'` takes in callsites seen
/// later. Errors: the name is taken, or the 16-bit ids are all given.
///
/// What was sized before it does not grow with it: a ring made before it
/// was registered does not count its events that a filter rejects (rings
/// made after do), and typed probes cannot attach to it (untyped ones can).
pub fn register(desc: &'static crate::point::TracepointDesc) -> Result<&'static Tracepoint, Error> {
    register_as(desc, false, false)
}

/// Names that several tracepoints registered at run time share
/// ([`register_shared`]).
static SHARED_NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// [`register`] for a tracepoint whose name other tracepoints registered
/// this way share: CTF gives each an event class of its own (its id), told
/// apart by their fields and `model.emf.uri`, as LTTng's callsites of one
/// event are. `tape-tracing` names a callsite's events by target and level
/// only (`tracing.app.db.info`), so that a line added above a callsite
/// does not rename its events. Patterns select them all; [`lookup`] finds
/// the first. A name a tracepoint took with [`register`] (or a link-time
/// one) is not shared.
pub fn register_shared(
    desc: &'static crate::point::TracepointDesc,
) -> Result<&'static Tracepoint, Error> {
    register_as(desc, true, false)
}

/// [`register_shared`], for a tracepoint whose fields its first event
/// describes ([`crate::probe::describe_at_first_event`]): until then its
/// id is listed as awaiting its description (the shared rings'
/// metadata's `tape_awaiting_description`), so that a
/// reader that sends event classes once (the relay) waits for the final
/// one. No event of it is written before.
pub fn register_shared_awaiting(
    desc: &'static crate::point::TracepointDesc,
) -> Result<&'static Tracepoint, Error> {
    register_as(desc, true, true)
}

/// Ids of tracepoints registered with [`register_shared_awaiting`] whose
/// first event has not described them yet.
static AWAITING: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// The ids awaiting their description, in registration order.
pub(crate) fn awaiting_description() -> Vec<u16> {
    AWAITING.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Tracepoint `id` was described (or will not be): it awaits nothing.
/// Whether it did.
pub(crate) fn settled(id: u16) -> bool {
    let mut a = AWAITING.lock().unwrap_or_else(|e| e.into_inner());
    let had = a.contains(&id);
    a.retain(|&i| i != id);
    had
}

fn register_as(
    desc: &'static crate::point::TracepointDesc,
    shared: bool,
    awaiting: bool,
) -> Result<&'static Tracepoint, Error> {
    // A NUL would end the name (or place) in a reader in C, and the
    // metadata writer refuses it: refused here, so no save fails for it.
    if let Some(text) = std::iter::once(desc.name)
        .chain(desc.emf_uri)
        .find(|t| t.contains('\0'))
    {
        return Err(Error::new(
            ErrorKind::Metadata,
            format!(
                "cannot register {:?}: {text:?} holds a NUL, which no trace can name",
                desc.name
            ),
        ));
    }
    let history = control();
    let mut later = LATER.lock().unwrap_or_else(|e| e.into_inner());
    let mut names = SHARED_NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let taken = linked_lookup(desc.name).is_some() || later.contains_key(desc.name);
    if taken && !(shared && names.contains(&desc.name)) {
        return Err(Error::new(
            ErrorKind::Duplicate,
            format!("tracepoint {:?} is already registered", desc.name),
        ));
    }
    if shared && !taken {
        names.insert(desc.name);
    }
    drop(names);
    let r = registry();
    if tracepoints().len() >= MAX_TRACEPOINTS {
        return Err(Error::new(
            ErrorKind::Duplicate,
            format!(
                "cannot register {:?}: all {MAX_TRACEPOINTS} event ids are given",
                desc.name
            ),
        ));
    }
    let p: &'static Tracepoint = Box::leak(Box::new(Tracepoint::new(desc)));
    p.set_id(tracepoints().len() as u16);
    let on = history
        .iter()
        .rev()
        .find(|(pattern, _)| pattern.matches(p.name()))
        .is_some_and(|(_, on)| *on);
    if on {
        p.set_enabled(true);
    }
    if awaiting {
        // Before the hook below: no template names it without the mark.
        AWAITING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p.id());
    }
    r.points.push(p).ok_or_else(|| {
        settled(p.id());
        Error::new(
            ErrorKind::Duplicate,
            format!("cannot register {:?}: all event ids are given", desc.name),
        )
    })?;
    later.entry(desc.name).or_insert(p);
    drop(later);
    // The shared rings' description (for a recovery, a recorder, a pipe)
    // names it too; without it their readers could not decode its events.
    registered().map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!(
                "{:?} is registered, but the shared rings' metadata could not be rewritten: {e}",
                desc.name
            ),
        )
    })?;
    Ok(p)
}

/// The function [`on_register`] set (a `fn() -> io::Result<()>` as a
/// pointer; null: none).
static ON_REGISTER: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Sets `hook` to be called after each tracepoint [`register`] adds, on the
/// registering thread: the shared rings (a floor above) set it when they
/// make their metadata template, which must then name the new tracepoint.
/// An error of the hook is [`register`]'s.
pub(crate) fn on_register(hook: fn() -> std::io::Result<()>) {
    ON_REGISTER.store(hook as *mut (), Ordering::Relaxed);
    // SeqCst fence: pairs with the one in `registered`. Either this
    // store is seen there (the hook runs after the push), or the push is
    // seen by what the caller reads next (the template, written after this
    // returns, names the new tracepoint): never neither.
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// Tells the [`on_register`] hook that a registered tracepoint's fields
/// were described anew (at its first event): the shared rings' metadata
/// must say so before its events are written.
pub(crate) fn redescribed() -> std::io::Result<()> {
    registered()
}

/// Calls the [`on_register`] hook, if set.
fn registered() -> std::io::Result<()> {
    // SeqCst fence: pairs with the one in `on_register` (the push of the
    // new tracepoint is before it).
    std::sync::atomic::fence(Ordering::SeqCst);
    let p = ON_REGISTER.load(Ordering::Relaxed);
    if p.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null ON_REGISTER was stored from a `fn() ->
    // io::Result<()>` by `on_register`; a fn pointer round-trips through a
    // data pointer on every target Rust supports with `std`.
    let hook = unsafe { std::mem::transmute::<*mut (), fn() -> std::io::Result<()>>(p) };
    hook()
}

/// The function [`on_change`] set (a `fn()` as a pointer; null: none).
static ON_CHANGE: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Sets `hook` to be called after each change the control plane makes to
/// which tracepoints are enabled or have probes, a filter or triggers:
/// patterns applied (by the program, `TAPE_TRACE` or `tape ctl`), probes
/// attached or detached, filters and triggers set or cleared. It runs on
/// the thread that made the change, after tape's locks are released, and
/// may call tape (lookups, [`register`]). What changes on the emit path is
/// not reported: a trigger's `enable_event`/`disable_event` (see
/// [`crate::trigger::switches_events`]). `tape-tracing` uses it to have
/// `tracing` ask again which callsites are wanted. One hook per process:
/// a second call replaces the first.
pub fn on_change(hook: fn()) {
    // Release: pairs with the Acquire in `changed`.
    ON_CHANGE.store(hook as *mut (), Ordering::Release);
}

/// Calls the [`on_change`] hook, if set (never with a lock of tape held).
pub(crate) fn changed() {
    // Acquire: pairs with the Release in `on_change`.
    let p = ON_CHANGE.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: a non-null ON_CHANGE was stored from a `fn()` by
        // `on_change`; a fn pointer round-trips through a data pointer on
        // every target Rust supports with `std`.
        let hook: fn() = unsafe { std::mem::transmute::<*mut (), fn()>(p) };
        hook();
    }
}

/// Orders the control plane's changes (one `enable` or `on` at a time, one
/// [`register`]); the state words stay right without it (triggers do not
/// take it). It holds the patterns applied so far, in order (each at most
/// once: applied again, it moves to the end), for tracepoints registered
/// later.
static CONTROL: Mutex<Vec<(Pattern, bool)>> = Mutex::new(Vec::new());

fn control() -> MutexGuard<'static, Vec<(Pattern, bool)>> {
    CONTROL.lock().unwrap_or_else(|e| e.into_inner())
}

pub use crate::point::tracing_on;
pub(crate) use crate::point::tracing_on_now;

/// Turns tracing on or off (ftrace's `tracing_on`): off stops every
/// tracepoint from recording without forgetting which are enabled; on
/// records them again. Probes keep running either way. Returns the
/// previous setting.
pub fn set_tracing(on: bool) -> bool {
    let _c = control();
    switch_tracing(on)
}

/// [`set_tracing`] with no lock, no allocation and no system call: what a
/// `traceon` / `traceoff` trigger runs on the emitting thread. Costs one
/// read-modify-write per tracepoint.
pub(crate) fn switch_tracing(on: bool) -> bool {
    let was = crate::point::swap_tracing_on(on);
    for p in tracepoints() {
        p.sync_record();
    }
    was
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, Error> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            Error::new(
                ErrorKind::BadPattern,
                format!("bad glob pattern {pattern:?}: {}", e.kind()),
            )
        })
}

fn regex(pattern: &str) -> Result<regex::Regex, Error> {
    regex::Regex::new(pattern).map_err(|e| {
        Error::new(
            ErrorKind::BadPattern,
            format!("bad regex pattern {pattern:?}:\n{e}"),
        )
    })
}

/// Enables the tracepoint named `name`, or the one registered later by
/// that name (a `tracing` callsite becomes a tracepoint at its first
/// event): a name that matches nothing yet stays pending, as a glob does.
pub fn enable(name: &str) -> Result<(), Error> {
    Pattern::Exact(name.to_owned()).apply(true).map(|_| ())
}

/// Disables the tracepoint named `name` (as [`enable`], a name not
/// registered yet is kept for when it is).
pub fn disable(name: &str) -> Result<(), Error> {
    Pattern::Exact(name.to_owned()).apply(false).map(|_| ())
}

/// Enables every tracepoint whose name matches the glob; returns how many.
pub fn enable_glob(pattern: &str) -> Result<usize, Error> {
    Pattern::Glob(pattern.to_owned()).apply(true)
}

/// Disables every tracepoint whose name matches the glob; returns how many.
pub fn disable_glob(pattern: &str) -> Result<usize, Error> {
    Pattern::Glob(pattern.to_owned()).apply(false)
}

/// Enables every tracepoint whose name matches the regex (unanchored, as
/// DPDK's `rte_trace_regexp`); returns how many.
pub fn enable_regex(pattern: &str) -> Result<usize, Error> {
    Pattern::Regex(pattern.to_owned()).apply(true)
}

/// Disables every tracepoint whose name matches the regex; returns how many.
pub fn disable_regex(pattern: &str) -> Result<usize, Error> {
    Pattern::Regex(pattern.to_owned()).apply(false)
}

/// A parsed selection pattern (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pattern {
    Exact(String),
    Glob(String),
    Regex(String),
}

impl Pattern {
    /// The pattern as written (`/regex/` with its slashes).
    pub(crate) fn text(&self) -> String {
        match self {
            Pattern::Exact(t) | Pattern::Glob(t) => t.clone(),
            Pattern::Regex(r) => format!("/{r}/"),
        }
    }

    pub(crate) fn parse(p: &str) -> Pattern {
        if p.len() >= 2 && p.starts_with('/') && p.ends_with('/') {
            Pattern::Regex(p[1..p.len() - 1].to_owned())
        } else if p.contains(['*', '?', '[', '{']) {
            Pattern::Glob(p.to_owned())
        } else {
            Pattern::Exact(p.to_owned())
        }
    }

    /// Checks the pattern compiles (without applying it).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        match self {
            Pattern::Exact(_) => Ok(()),
            Pattern::Glob(g) => glob(g).map(|_| ()),
            Pattern::Regex(r) => regex(r).map(|_| ()),
        }
    }

    /// The tracepoints it selects, sorted by name; an unknown exact name
    /// is an error, a glob or regex may select none. A traced function's
    /// two tracepoints are also selected by the function's name
    /// (`fn.app.io.read` for `fn.app.io.read.entry` and `.exit`,
    /// [`crate::traced`]).
    pub(crate) fn select(&self) -> Result<Vec<&'static Tracepoint>, Error> {
        self.select_functions(true)
    }

    /// As [`Pattern::select`]; with `exits` false, a pattern that matches a
    /// traced function's name (`fn.app.io.read`, `fn.app.*`) selects its
    /// entry only (ftrace's function commands fire at a function's entry);
    /// an exit is selected only by a pattern for exits (`fn.app.*.exit`).
    pub(crate) fn select_functions(&self, exits: bool) -> Result<Vec<&'static Tracepoint>, Error> {
        let points = tracepoints().iter().copied();
        let keep = |p: &Tracepoint, matches: &dyn Fn(&str) -> bool| {
            let function = function_of(p.name());
            let by_function = function.is_some_and(matches);
            if !exits && by_function && (p.name().ends_with(EXIT) || p.name().ends_with(RET)) {
                return false;
            }
            matches(p.name()) || by_function
        };
        match self {
            Pattern::Exact(n) => {
                let v: Vec<_> = points.filter(|p| keep(p, &|x| x == n)).collect();
                if v.is_empty() {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!("no tracepoint is named {n:?}"),
                    ));
                }
                Ok(v)
            }
            Pattern::Glob(g) => {
                let g = glob(g)?;
                Ok(points.filter(|p| keep(p, &|x| g.is_match(x))).collect())
            }
            Pattern::Regex(r) => {
                let r = regex(r)?;
                Ok(points.filter(|p| keep(p, &|x| r.is_match(x))).collect())
            }
        }
    }

    /// Enables or disables what it selects; returns how many. Kept (under
    /// the lock that [`register`] takes) for tracepoints registered later:
    /// an exact name that selects nothing yet is pending, as a glob that
    /// selects nothing is (LTTng's `enable-event` of an event not loaded
    /// yet); a glob or regex that does not compile is an error.
    pub(crate) fn apply(&self, on: bool) -> Result<usize, Error> {
        let mut history = control();
        let points = match self.select() {
            Ok(v) => v,
            Err(e) if e.kind() == ErrorKind::NotFound && matches!(self, Pattern::Exact(_)) => {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        for p in &points {
            p.set_enabled(on);
        }
        history.retain(|(p, _)| p != self);
        history.push((self.clone(), on));
        drop(history);
        changed();
        Ok(points.len())
    }

    /// Whether it selects a tracepoint named `name` (as [`Pattern::select`]
    /// does, a traced function's by its function's name too); a pattern
    /// that does not compile selects nothing.
    fn matches(&self, name: &str) -> bool {
        let function = function_of(name);
        let test = |m: &dyn Fn(&str) -> bool| m(name) || function.is_some_and(m);
        match self {
            Pattern::Exact(n) => test(&|x| x == n),
            Pattern::Glob(g) => glob(g).is_ok_and(|g| test(&|x| g.is_match(x))),
            Pattern::Regex(r) => regex(r).is_ok_and(|r| test(&|x| r.is_match(x))),
        }
    }
}

/// The tracepoints that `pattern` selects (an exact name, a glob or
/// `/regex/`, as [`enable_pattern`] takes them), sorted by name; an
/// unknown exact name is an error, a glob or regex may select none.
pub fn select(pattern: &str) -> Result<Vec<&'static Tracepoint>, Error> {
    Pattern::parse(pattern).select()
}

/// What a trigger set by `pattern` goes on: as [`select`], but a traced
/// function named by its name (or a glob over names) gets it at its entry
/// only, as ftrace's function commands (`func:traceoff:5`) fire at entry.
pub(crate) fn select_for_trigger(pattern: &str) -> Result<Vec<&'static Tracepoint>, Error> {
    Pattern::parse(pattern).select_functions(false)
}

/// The tracepoint names nearest to `pattern` (its text without the glob
/// or regex characters, against the same length of each name: the edit
/// distance), at most `n`, nearest first; for messages about a pattern
/// that matches nothing.
pub fn nearest(pattern: &str, n: usize) -> Vec<&'static str> {
    let text: Vec<char> = pattern
        .trim_matches('/')
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '^' | '$' | '\\'))
        .collect();
    let distance = |name: &str| -> usize {
        let name: Vec<char> = name.chars().collect();
        // The name's prefixes around the text's length: a glob's text is
        // a prefix (`myap.` for `myapp.work.start`).
        let lens = text.len().saturating_sub(2)..=(text.len() + 2).min(name.len());
        lens.map(|k| edits(&text, &name[..k.min(name.len())]))
            .min()
            .unwrap_or(usize::MAX)
    };
    let mut all: Vec<(usize, &'static str)> = tracepoints()
        .iter()
        .map(|p| (distance(p.name()), p.name()))
        .collect();
    all.sort();
    let mut out: Vec<&'static str> = Vec::new();
    for (d, name) in all {
        // Beyond a third of the text, nothing is near.
        if out.len() == n || d > text.len().div_ceil(3).max(1) {
            break;
        }
        out.push(name);
    }
    out
}

/// ` (nearest: a, b, c)` for a message about `pattern` matching nothing, or
/// nothing when no name is near.
pub(crate) fn nearest_said(pattern: &str) -> String {
    let near = nearest(pattern, 3);
    if near.is_empty() {
        String::new()
    } else {
        format!(" (nearest: {})", near.join(", "))
    }
}

/// Levenshtein's distance between `a` and `b`.
fn edits(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The enable patterns applied so far (by `TAPE_TRACE`, the program or
/// `tape ctl`) that select no tracepoint now, in the order applied.
pub(crate) fn enabling_nothing() -> Vec<String> {
    let history = control().clone();
    history
        .iter()
        .filter(|(p, on)| *on && p.select().map_or(true, |v| v.is_empty()))
        .map(|(p, _)| p.text())
        .collect()
}

/// Enables by pattern: an exact name, a glob, or `/regex/`; returns how many
/// tracepoints matched.
pub fn enable_pattern(pattern: &str) -> Result<usize, Error> {
    Pattern::parse(pattern).apply(true)
}

/// Disables by pattern (as [`enable_pattern`]).
pub fn disable_pattern(pattern: &str) -> Result<usize, Error> {
    Pattern::parse(pattern).apply(false)
}
