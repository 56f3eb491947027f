//! Triggers: actions an event sets off when it is hit, with the syntax of
//! the kernel's `events/<sys>/<event>/trigger` files (Documentation/trace/
//! events.rst §6).
//!
//! ```text
//! traceoff:1 if depth > 1000          stop recording (once) when the queue overflows
//! snapshot:3 if status == Error       save a trace, at most three times
//! stacktrace if len > 65536           record the call stack as a tape.stacktrace event
//! enable_event:app.disk.*:1           start recording the disk events, once
//! disable_event:app.net.rx            stop recording app.net.rx
//! traceon                             turn tracing on again
//! ```
//!
//! A trigger is `COMMAND[:TARGET][:N] [if EXPR]`: `N` (also `count=N`, or
//! `unlimited`) is how many times it may fire, `EXPR` a filter expression
//! ([`crate::filter`]'s grammar) on the event's fields. `!COMMAND[:TARGET]`
//! removes it (a count and an `if` are ignored, as the kernel ignores
//! them). An event has at most one trigger of each command (and target),
//! as in the kernel; another is an error until the first is removed.
//!
//! Read back ([`list`], `tape ctl PID status`) as the kernel's trigger file
//! reads, the count being the count left: `traceoff:count=1 if depth >
//! 1000`, `stacktrace:unlimited`, plus the times each fired. What is read
//! back is accepted as input: the text round-trips.
//!
//! ## When a trigger fires
//!
//! On every hit of its tracepoint, enabled or not (the kernel's "soft
//! mode": a trigger makes the tracepoint active), after the event is
//! recorded (so `traceoff` leaves the triggering event as its thread's
//! last), and independently of the event's own filter. A condition is
//! tested on the encoded fields: on the bytes just written in the ring when
//! the event is recorded (no second encoding), else on an encoding in a
//! stack buffer of [`STACK_PAYLOAD`] bytes; an event too big for it
//! fires only its triggers without condition and is counted
//! ([`Stats::unchecked`]).
//!
//! As in the kernel, `traceon`, `traceoff`, `enable_event` and
//! `disable_event` fire (and use up their count) only when they change
//! something: `traceoff:1` on an event seen while tracing is already off
//! keeps its count.
//!
//! The emitting thread never blocks, locks, allocates or makes a system
//! call for a trigger: `traceon` / `traceoff` / `enable_event` /
//! `disable_event` change state words with atomic read-modify-writes (one
//! per tracepoint for tracing on/off, see [`crate::Tracepoint`]); `stacktrace`
//! walks the stack with the unwinder (`backtrace::trace_unsynchronized`,
//! return addresses into a stack array) and records them; `snapshot` only
//! counts a request, which the `tape-trigger` thread takes within
//! [`SNAPSHOT_POLL`] by saving a trace into a new directory (the thread
//! polls only while a snapshot trigger is set or the latency tracer is on,
//! and is started by the first one; it also takes the latency tracer's
//! snapshots, [`crate::latency`]). A ring that wraps faster than that poll has overwritten part of
//! what led to the trigger by the time the snapshot reads it. A forked
//! child has no such thread (threads do not survive `fork`): its snapshot
//! triggers are counted as asked ([`Stats::snapshots_asked`]) and not
//! taken.

mod stack;

pub use stack::{executable, stacktrace_event, Executable, MAX_FRAMES};

use std::cell::Cell;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{Error, ErrorKind};
use crate::field::Encode;
use crate::filter::{Context, Filter};
use crate::point::{Tracepoint, FILTER, RECORD, TRIGGER};
use crate::registry;
use crate::ring::{self, Ring};

/// Triggers one event can have.
pub const MAX_PER_EVENT: usize = 64;

/// Events up to this size are encoded on the stack to test a condition
/// when they are not recorded.
pub const STACK_PAYLOAD: usize = 1024;

pub use crate::snapshot_thread::SNAPSHOT_POLL;

/// The commands, for messages.
const COMMANDS: &str = "traceon, traceoff, snapshot, stacktrace, enable_event:PATTERN, \
                        disable_event:PATTERN";

const UNLIMITED: u64 = u64::MAX;

/// What a trigger does.
#[derive(Clone, Debug)]
enum Command {
    TraceOn,
    TraceOff,
    Snapshot,
    StackTrace,
    /// `enable_event` (`true`) or `disable_event`: the pattern as given and
    /// the tracepoints it selected when the trigger was set.
    Event {
        enable: bool,
        pattern: String,
        targets: Box<[&'static Tracepoint]>,
    },
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::TraceOn => "traceon",
            Command::TraceOff => "traceoff",
            Command::Snapshot => "snapshot",
            Command::StackTrace => "stacktrace",
            Command::Event { enable: true, .. } => "enable_event",
            Command::Event { enable: false, .. } => "disable_event",
        }
    }

    /// The command and its target: what identifies a trigger on an event.
    fn key(&self) -> String {
        match self {
            Command::Event { pattern, .. } => format!("{}:{pattern}", self.name()),
            _ => self.name().to_owned(),
        }
    }

    /// Whether firing now would change nothing (the kernel's count
    /// triggers skip then, keeping their count).
    fn idle(&self) -> bool {
        match self {
            Command::TraceOn => registry::tracing_on_now(),
            Command::TraceOff => !registry::tracing_on_now(),
            Command::Event {
                enable, targets, ..
            } => targets.iter().all(|t| t.is_enabled() == *enable),
            Command::Snapshot | Command::StackTrace => false,
        }
    }
}

/// One trigger on one tracepoint.
#[derive(Debug)]
pub struct Trigger {
    command: Command,
    condition: Option<Filter>,
    /// Firings left ([`UNLIMITED`]: no count).
    left: AtomicU64,
    /// Times it fired.
    fired: AtomicU64,
}

impl Trigger {
    /// Uses one firing; false when none is left.
    fn take(&self) -> bool {
        // Relaxed: a count publishes nothing; the RMW makes each firing
        // take a distinct unit, so `:N` fires exactly N times.
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| match n {
                UNLIMITED => Some(UNLIMITED),
                0 => None,
                n => Some(n - 1),
            })
            .is_ok()
    }

    /// Runs the action on the emitting thread (nothing here blocks).
    /// Inlined into `hit`, so `stacktrace` knows the frames above it.
    #[inline(always)]
    fn fire(&self, tp: &'static Tracepoint) {
        if self.command.idle() || !self.take() {
            return;
        }
        // Relaxed: counters read back for display; they publish nothing.
        self.fired.fetch_add(1, Ordering::Relaxed);
        FIRED.fetch_add(1, Ordering::Relaxed);
        match &self.command {
            Command::TraceOn => {
                registry::switch_tracing(true);
            }
            Command::TraceOff => {
                registry::switch_tracing(false);
            }
            Command::Event {
                enable, targets, ..
            } => {
                for t in targets.iter() {
                    t.set_enabled(*enable);
                }
            }
            Command::Snapshot => {
                // Relaxed: only names the event in the thread's message;
                // the request below is the one the thread acts on.
                LAST_SNAPSHOT_EVENT.store(usize::from(tp.id()), Ordering::Relaxed);
                // Release: pairs with the Acquire in the trigger thread.
                if self.left().is_some() {
                    COUNTED_ASKED.fetch_add(1, Ordering::Release);
                } else {
                    UNCOUNTED_ASKED.fetch_add(1, Ordering::Release);
                }
            }
            Command::StackTrace => stack::record(),
        }
    }

    /// The trigger as the kernel's trigger file reads it back (the count
    /// being the count left).
    pub fn text(&self) -> String {
        let mut s = self.command.key();
        match self.left.load(Ordering::Relaxed) {
            UNLIMITED => s.push_str(":unlimited"),
            n => {
                let _ = write!(s, ":count={n}");
            }
        }
        if let Some(c) = &self.condition {
            let _ = write!(s, " if {}", c.text());
        }
        s
    }

    /// Times it fired.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// Firings left, if it has a count.
    pub fn left(&self) -> Option<u64> {
        match self.left.load(Ordering::Relaxed) {
            UNLIMITED => None,
            n => Some(n),
        }
    }
}

/// The triggers of one tracepoint, published whole (replaced, never
/// changed in place).
#[derive(Debug)]
pub struct List {
    triggers: Box<[&'static Trigger]>,
    /// Bits of the triggers with no condition.
    always: u64,
    uses_cpu: bool,
}

impl List {
    fn new(triggers: Vec<&'static Trigger>) -> List {
        let mut always = 0;
        for (i, t) in triggers.iter().enumerate() {
            if t.condition.is_none() {
                always |= 1 << i;
            }
        }
        let uses_cpu = triggers
            .iter()
            .any(|t| t.condition.as_ref().is_some_and(Filter::uses_cpu));
        List {
            triggers: triggers.into_boxed_slice(),
            always,
            uses_cpu,
        }
    }

    fn conditional(&self) -> bool {
        self.always.count_ones() as usize != self.triggers.len()
    }

    /// The bits of the triggers whose condition the event meets.
    fn test(&self, payload: &[u8], ctx: &Context<'_>) -> u64 {
        let mut bits = self.always;
        for (i, t) in self.triggers.iter().enumerate() {
            if let Some(c) = &t.condition {
                if c.matches(payload, ctx) {
                    bits |= 1 << i;
                }
            }
        }
        bits
    }
}

// ---------------------------------------------------------------------------
// The hit path.

/// Triggers fired, over all events.
static FIRED: AtomicU64 = AtomicU64::new(0);
/// Events whose triggers' conditions could not be tested (too big).
static UNCHECKED: AtomicU64 = AtomicU64::new(0);

/// Records an event of a tracepoint with triggers (the cold path that
/// `tracepoint!` generates calls it), through its filter if it has one,
/// then fires the triggers whose condition it meets.
#[doc(hidden)]
#[inline(never)]
pub fn hit<P: Encode>(tp: &'static Tracepoint, state: u64, payload: P) {
    let p = tp.triggers.load::<List>(Ordering::Acquire);
    if p.is_null() {
        // Removed since the state word was read.
        if state & FILTER != 0 {
            return crate::filter::emit_filtered(tp, state, payload);
        }
        if state & RECORD != 0 {
            ring::emit(state, payload);
        }
        return;
    }
    // SAFETY: lists are leaked when published (`install`), never freed.
    let list: &'static List = unsafe { &*p };
    let tested: Cell<Option<u64>> = Cell::new(None);
    if state & RECORD != 0 {
        let filter = if state & FILTER != 0 {
            crate::filter::get(tp)
        } else {
            None
        };
        if filter.is_none() && !list.conditional() {
            ring::emit(state, &payload);
        } else {
            let uses_cpu = list.uses_cpu || filter.is_some_and(Filter::uses_cpu);
            ring::emit_if(state, &payload, |bytes: &[u8], ring: &Ring| {
                let ctx = Context::of(Some(ring), uses_cpu);
                tested.set(Some(list.test(bytes, &ctx)));
                filter.is_none_or(|f| f.matches(bytes, &ctx))
            });
        }
    }
    let bits = match tested.get() {
        Some(bits) => bits,
        None if !list.conditional() => list.always,
        None => test_apart(list, &payload),
    };
    for (i, t) in list.triggers.iter().enumerate() {
        if bits & (1 << i) != 0 {
            t.fire(tp);
        }
    }
}

/// The trigger bits of an event that was not recorded: encoded on the
/// stack and tested.
fn test_apart<P: Encode>(list: &List, payload: &P) -> u64 {
    let tested = crate::field::with_encoded::<STACK_PAYLOAD, _, _>(payload, |bytes| {
        ring::with_current(|ring| list.test(bytes, &Context::of(ring, list.uses_cpu)))
    });
    tested.unwrap_or_else(|| {
        // Relaxed: a counter, read back for display.
        UNCHECKED.fetch_add(1, Ordering::Relaxed);
        list.always
    })
}

// ---------------------------------------------------------------------------
// Setting and removing.

/// Lists replaced and triggers removed: kept, never freed (a thread may be
/// reading one; they are small and set by hand).
static RETIRED: Mutex<Vec<&'static List>> = Mutex::new(Vec::new());
/// Orders changes of trigger lists.
static WRITER: Mutex<()> = Mutex::new(());

/// A parsed trigger text.
#[derive(Debug)]
struct Spec<'a> {
    remove: bool,
    /// `traceon`, ... (checked).
    command: &'a str,
    target: Option<&'a str>,
    count: Option<u64>,
    /// The expression after `if`, and its byte offset in the text.
    condition: Option<(&'a str, usize)>,
}

fn bad(event: &str, text: &str, at: usize, why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::BadTrigger,
        crate::filter::pointed(&format!("trigger for {event}"), why, text, at),
    )
}

fn parse_count(s: &str) -> Option<Option<u64>> {
    if s == "unlimited" {
        return Some(None);
    }
    let n = s.strip_prefix("count=").unwrap_or(s);
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // u64::MAX stands for "unlimited": the largest count is one less.
    n.parse().ok().filter(|&n| n != UNLIMITED).map(Some)
}

fn parse_spec<'a>(event: &str, text: &'a str) -> Result<Spec<'a>, Error> {
    let lead = text.len() - text.trim_start().len();
    let body = text.trim_end();
    let (head_end, condition) = match body[lead..].find(char::is_whitespace) {
        None => (body.len(), None),
        Some(ws) => {
            let ws = lead + ws;
            let rest = &body[ws..];
            let at = ws + (rest.len() - rest.trim_start().len());
            let after = &body[at..];
            let is_if = after == "if"
                || (after.starts_with("if") && after[2..].starts_with(char::is_whitespace));
            if !is_if {
                return Err(bad(
                    event,
                    text,
                    at,
                    "expected `if` and a condition after the command",
                ));
            }
            let expr_rest = &after[2..];
            let expr_at = at + 2 + (expr_rest.len() - expr_rest.trim_start().len());
            let expr = body[expr_at..].trim();
            if expr.is_empty() {
                return Err(bad(event, text, at, "`if` without a condition"));
            }
            (ws, Some((expr, expr_at)))
        }
    };
    let mut head = &body[lead..head_end];
    let mut head_at = lead;
    let remove = head.starts_with('!');
    if remove {
        head = &head[1..];
        head_at += 1;
    }
    if head.is_empty() {
        return Err(bad(
            event,
            text,
            head_at,
            format!("no command (commands: {COMMANDS})"),
        ));
    }
    let (command, rest) = match head.split_once(':') {
        Some((c, r)) => (c, Some(r)),
        None => (head, None),
    };
    let rest_at = head_at + command.len() + 1;
    let known = [
        "traceon",
        "traceoff",
        "snapshot",
        "stacktrace",
        "enable_event",
        "disable_event",
    ];
    if !known.contains(&command) {
        return Err(bad(
            event,
            text,
            head_at,
            format!("unknown command {command:?} (commands: {COMMANDS})"),
        ));
    }
    let mut target = None;
    let mut count = None;
    if let Some(rest) = rest {
        if command.ends_with("_event") {
            // The target may contain ':' (a regex); a last part that reads
            // as a count is the count.
            let (t, c) = match rest.rsplit_once(':') {
                Some((t, c)) if parse_count(c).is_some() => (t, parse_count(c)),
                _ => (rest, None),
            };
            if t.is_empty() {
                return Err(bad(
                    event,
                    text,
                    rest_at,
                    format!("{command} needs a tracepoint pattern: {command}:PATTERN[:N]"),
                ));
            }
            target = Some(t);
            count = c.flatten();
        } else {
            count = parse_count(rest).ok_or_else(|| {
                bad(
                    event,
                    text,
                    rest_at,
                    format!(
                        "{rest:?} is not a count (a number, count=N or unlimited) after {command}"
                    ),
                )
            })?;
        }
    } else if command.ends_with("_event") {
        return Err(bad(
            event,
            text,
            head_at + command.len(),
            format!("{command} needs a tracepoint pattern: {command}:PATTERN[:N]"),
        ));
    }
    if count == Some(0) && !remove {
        return Err(bad(
            event,
            text,
            rest_at,
            "a count of 0 would never fire (give N >= 1, or none for unlimited)",
        ));
    }
    Ok(Spec {
        remove,
        command,
        target,
        count,
        condition,
    })
}

/// Compiles `text` for `tp` into a trigger (not installed).
fn compile(tp: &'static Tracepoint, spec: &Spec<'_>, text: &str) -> Result<Trigger, Error> {
    let event = tp.name();
    let command = match spec.command {
        "traceon" => Command::TraceOn,
        "traceoff" => Command::TraceOff,
        "snapshot" => Command::Snapshot,
        "stacktrace" => Command::StackTrace,
        c => {
            let pattern = spec.target.unwrap_or_default();
            let targets = registry::select(pattern).map_err(|e| {
                let at = text.find(pattern).unwrap_or(0);
                // One line (a regex error draws its own caret below it).
                let m = e.message();
                let first = m.lines().next().unwrap_or_default();
                let why = match m.lines().last() {
                    Some(last) if m.contains('\n') => {
                        format!("{} {}", first, last.trim().trim_start_matches("error: "))
                    }
                    _ => m.to_owned(),
                };
                bad(event, text, at, why)
            })?;
            Command::Event {
                enable: c == "enable_event",
                pattern: pattern.to_owned(),
                targets: targets.into_boxed_slice(),
            }
        }
    };
    let condition = match spec.condition {
        None => None,
        Some((expr, at)) => {
            let fields = crate::probe::described_fields(tp)?;
            let fail = |pos: usize, why: String| bad(event, text, at + pos, why);
            Some(Filter::compile_with(event, fields, expr, &fail)?)
        }
    };
    Ok(Trigger {
        command,
        condition,
        left: AtomicU64::new(spec.count.unwrap_or(UNLIMITED)),
        fired: AtomicU64::new(0),
    })
}

fn current(tp: &'static Tracepoint) -> &'static [&'static Trigger] {
    let p = tp.triggers.load::<List>(Ordering::Acquire);
    if p.is_null() {
        return &[];
    }
    // SAFETY: lists are leaked when published, never freed.
    unsafe { &(*p).triggers }
}

/// Triggers set whose command is `enable_event` or `disable_event`.
static EVENT_SWITCHES: AtomicUsize = AtomicUsize::new(0);

/// Whether a trigger that enables or disables events is set somewhere: a
/// tracepoint disabled now may then be enabled from the emit path, where
/// no [`registry::on_change`] hook runs.
pub fn switches_events() -> bool {
    EVENT_SWITCHES.load(Ordering::Relaxed) != 0
}

/// Publishes `triggers` as the list of `tp` (none: no list, TRIGGER off).
/// Called under [`WRITER`].
fn install(tp: &'static Tracepoint, triggers: Vec<&'static Trigger>) {
    let count = |list: &[&'static Trigger], of: fn(&Command) -> bool| {
        list.iter().filter(|t| of(&t.command)).count()
    };
    let snapshot: fn(&Command) -> bool = |c| matches!(c, Command::Snapshot);
    let switch: fn(&Command) -> bool = |c| matches!(c, Command::Event { .. });
    let (snapshots_before, snapshots_after) =
        (count(current(tp), snapshot), count(&triggers, snapshot));
    let (switches_before, switches_after) = (count(current(tp), switch), count(&triggers, switch));
    let new = if triggers.is_empty() {
        std::ptr::null_mut()
    } else {
        Box::into_raw(Box::new(List::new(triggers)))
    };
    // Release: pairs with the Acquire in `hit`; the list is whole before a
    // thread can see it.
    let old = tp.triggers.swap::<List>(new, Ordering::AcqRel);
    tp.update(TRIGGER, !new.is_null());
    if !old.is_null() {
        // SAFETY: lists are leaked when published, never freed.
        RETIRED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(unsafe { &*old });
    }
    // Relaxed: read by `switches_events` as a hint for the next rebuild
    // of interests, which the hook (`registry::changed`) asks for after
    // the lock is released.
    EVENT_SWITCHES.fetch_add(switches_after, Ordering::Relaxed);
    EVENT_SWITCHES.fetch_sub(switches_before, Ordering::Relaxed);
    // Relaxed: the count only tells the trigger thread whether to poll
    // (under WRITER here); it is woken by `unpark` when one is added.
    if snapshots_after > snapshots_before {
        SNAPSHOT_TRIGGERS.fetch_add(snapshots_after - snapshots_before, Ordering::Relaxed);
        worker_wake();
    } else {
        SNAPSHOT_TRIGGERS.fetch_sub(snapshots_before - snapshots_after, Ordering::Relaxed);
    }
}

/// Sets the trigger `text` (`COMMAND[:TARGET][:N] [if EXPR]`) on every
/// tracepoint that `pattern` selects, or removes it if it starts with `!`.
/// Everything is checked before anything changes. Returns how many
/// tracepoints got (or lost) it.
pub fn set(pattern: &str, text: &str) -> Result<usize, Error> {
    let points = registry::select_for_trigger(pattern)?;
    let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let mut plan = Vec::new();
    for tp in &points {
        let spec = parse_spec(tp.name(), text)?;
        let existing = current(tp);
        if spec.remove {
            let key = match spec.target {
                Some(t) => format!("{}:{t}", spec.command),
                None => spec.command.to_owned(),
            };
            let kept: Vec<_> = existing
                .iter()
                .copied()
                .filter(|t| t.command.key() != key)
                .collect();
            if kept.len() != existing.len() {
                plan.push((*tp, kept));
            }
            continue;
        }
        let t = compile(tp, &spec, text)?;
        if let Some(old) = existing.iter().find(|o| o.command.key() == t.command.key()) {
            return Err(Error::new(
                ErrorKind::BadTrigger,
                format!(
                    "{} already has the trigger {}; remove it first with '!{}'",
                    tp.name(),
                    old.text(),
                    old.command.key()
                ),
            ));
        }
        if existing.len() >= MAX_PER_EVENT {
            return Err(Error::new(
                ErrorKind::BadTrigger,
                format!(
                    "{} has {MAX_PER_EVENT} triggers, the most an event can have",
                    tp.name()
                ),
            ));
        }
        let mut all = existing.to_vec();
        all.push(Box::leak(Box::new(t)));
        plan.push((*tp, all));
    }
    if points.is_empty() {
        // Still check the text, so a typo is not silently accepted.
        parse_spec(pattern, text)?;
    }
    let n = plan.len();
    for (tp, triggers) in plan {
        install(tp, triggers);
    }
    drop(_w);
    registry::changed();
    Ok(n)
}

/// Removes every trigger of the tracepoints `pattern` selects; returns
/// how many had some.
pub fn clear(pattern: &str) -> Result<usize, Error> {
    let points = registry::select(pattern)?;
    let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let mut n = 0;
    for tp in points {
        if !current(tp).is_empty() {
            install(tp, Vec::new());
            n += 1;
        }
    }
    drop(_w);
    registry::changed();
    Ok(n)
}

/// The triggers of `tp`, in the order they were set.
pub fn list(tp: &'static Tracepoint) -> &'static [&'static Trigger] {
    current(tp)
}

/// What the triggers did, over the process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Times a trigger fired.
    pub fired: u64,
    /// Events whose triggers' conditions were not tested (bigger than
    /// [`STACK_PAYLOAD`] and not recorded): only triggers with no
    /// condition fired for them.
    pub unchecked: u64,
    /// Snapshots asked for by `snapshot` triggers.
    pub snapshots_asked: u64,
    /// Snapshots saved.
    pub snapshots_saved: u64,
    /// Snapshots that failed (the reason went to stderr, for the first
    /// [`FAILURES_SAID`]).
    pub snapshots_failed: u64,
    /// Requests of triggers without a count taken by the snapshot of an
    /// earlier request (at most one such snapshot per
    /// [`SNAPSHOT_INTERVAL`]: the requests in between share the next one).
    pub snapshots_merged: u64,
    /// Requests of triggers without a count not taken: past
    /// [`MAX_UNCOUNTED_SNAPSHOTS`] (said once on stderr).
    pub snapshots_dropped: u64,
    /// The latest snapshot's directory.
    pub last_snapshot: Option<PathBuf>,
    /// `tape.stacktrace` events recorded, and those dropped (the ring's
    /// loss counters count them too).
    pub stacktraces: u64,
}

/// The counters of every trigger, together.
pub fn stats() -> Stats {
    let w = worker_state();
    Stats {
        fired: FIRED.load(Ordering::Relaxed),
        unchecked: UNCHECKED.load(Ordering::Relaxed),
        snapshots_asked: COUNTED_ASKED.load(Ordering::Relaxed)
            + UNCOUNTED_ASKED.load(Ordering::Relaxed),
        snapshots_saved: w.saved,
        snapshots_failed: w.failed,
        snapshots_merged: w.merged,
        snapshots_dropped: w.dropped,
        last_snapshot: w.last.clone(),
        stacktraces: stack::RECORDED.load(Ordering::Relaxed),
    }
}

// ---------------------------------------------------------------------------
// The snapshot thread.

/// Snapshot triggers set, over all events (the thread polls while > 0).
static SNAPSHOT_TRIGGERS: AtomicUsize = AtomicUsize::new(0);
/// Snapshots asked for by firings of triggers with a count (`snapshot:3`:
/// each is taken) and without one (`snapshot`: at most one per
/// [`SNAPSHOT_INTERVAL`], [`MAX_UNCOUNTED_SNAPSHOTS`] in all).
static COUNTED_ASKED: AtomicU64 = AtomicU64::new(0);
static UNCOUNTED_ASKED: AtomicU64 = AtomicU64::new(0);
static LAST_SNAPSHOT_EVENT: AtomicUsize = AtomicUsize::new(0);

/// The least time between two snapshots of triggers without a count: the
/// requests in between share the next one (a snapshot saves the rings as
/// they are then, which holds what each request wanted). A trigger with a
/// count takes a snapshot per firing, as many as its count.
pub const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(1);
/// Snapshots that triggers without a count take in a process's life; the
/// requests past it are counted ([`Stats::snapshots_dropped`]) and said
/// once on stderr. (Crash dumps have `crash::MAX_DUMPS`.)
pub const MAX_UNCOUNTED_SNAPSHOTS: u64 = 100;
/// Failed snapshots said on stderr; later ones are counted only.
pub const FAILURES_SAID: u64 = 8;

#[derive(Default)]
struct WorkerState {
    /// Requests handled (taken, merged, dropped), of each kind.
    counted_taken: u64,
    uncounted_taken: u64,
    /// Snapshots of triggers without a count taken, and when the last was.
    uncounted_saved: u64,
    uncounted_last: Option<std::time::Instant>,
    /// Snapshots being saved now (their requests marked taken).
    saving: u32,
    saved: u64,
    failed: u64,
    merged: u64,
    dropped: u64,
    last: Option<PathBuf>,
}

static WORKER_STATE: Mutex<WorkerState> = Mutex::new(WorkerState {
    counted_taken: 0,
    uncounted_taken: 0,
    uncounted_saved: 0,
    uncounted_last: None,
    saving: 0,
    saved: 0,
    failed: 0,
    merged: 0,
    dropped: 0,
    last: None,
});
fn worker_state() -> std::sync::MutexGuard<'static, WorkerState> {
    WORKER_STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The snapshot thread's service of the triggers.
static SERVICE: crate::snapshot_thread::Service = crate::snapshot_thread::Service {
    take: take_snapshots,
    polling: || SNAPSHOT_TRIGGERS.load(Ordering::Relaxed) > 0,
};

/// Starts the snapshot thread (once) and wakes it for the triggers.
pub(crate) fn worker_wake() {
    crate::snapshot_thread::wake(&SERVICE);
}

/// Takes the snapshots asked for and not yet taken: one trace per request
/// of a trigger with a count; for those without, one trace for all the
/// requests pending, at most one per [`SNAPSHOT_INTERVAL`] (with
/// `at_exit`, the last pending is taken now) and
/// [`MAX_UNCOUNTED_SNAPSHOTS`] in all. A request is marked taken before
/// its save, so two threads taking snapshots (this one and the exit)
/// never take the same.
fn take_snapshots(at_exit: bool) {
    loop {
        // Acquire: pairs with the Release increments in `Trigger::fire`.
        let counted = COUNTED_ASKED.load(Ordering::Acquire);
        let uncounted = UNCOUNTED_ASKED.load(Ordering::Acquire);
        let mut w = worker_state();
        if w.counted_taken < counted {
            w.counted_taken += 1;
        } else if w.uncounted_taken < uncounted {
            let pending = uncounted - w.uncounted_taken;
            let since = w.uncounted_last.map(|t| t.elapsed());
            let turn = uncounted_turn(w.uncounted_saved, since, at_exit);
            if turn == Turn::Drop {
                w.uncounted_taken = uncounted;
                if w.dropped == 0 {
                    eprintln!(
                        "tape: snapshot triggers without a count took their \
                         {MAX_UNCOUNTED_SNAPSHOTS} snapshots: further requests are counted, \
                         not saved (`tape ctl PID status`; give the trigger a count, or \
                         `tape ctl PID save`)"
                    );
                }
                w.dropped += pending;
                return;
            }
            if turn == Turn::Later {
                return; // the next poll takes them
            }
            w.uncounted_taken = uncounted;
            w.uncounted_saved += 1;
            w.uncounted_last = Some(std::time::Instant::now());
            w.merged += pending - 1;
        } else {
            return;
        }
        w.saving += 1;
        drop(w);
        let r = crate::save::save();
        let id = LAST_SNAPSHOT_EVENT.load(Ordering::Relaxed);
        let event = registry::tracepoints()
            .iter()
            .find(|t| usize::from(t.id()) == id)
            .map_or("?", |t| t.name());
        let mut w = worker_state();
        w.saving -= 1;
        match r {
            Ok(dir) => {
                w.saved += 1;
                eprintln!("tape: snapshot trigger on {event}: saved {}", dir.display());
                w.last = Some(dir);
            }
            Err(e) => {
                w.failed += 1;
                if w.failed <= FAILURES_SAID {
                    eprintln!(
                        "tape: snapshot trigger on {event}: {e}{}",
                        if w.failed == FAILURES_SAID {
                            " (further failures are counted, not said: `tape ctl PID status`)"
                        } else {
                            ""
                        }
                    );
                }
            }
        }
    }
}

/// What to do with the pending requests of triggers without a count.
#[derive(Debug, PartialEq, Eq)]
enum Turn {
    /// One snapshot for all of them, now.
    Take,
    /// Not yet: the last one was less than [`SNAPSHOT_INTERVAL`] ago.
    Later,
    /// Never: [`MAX_UNCOUNTED_SNAPSHOTS`] were taken.
    Drop,
}

/// The turn of requests of triggers without a count, when `saved`
/// snapshots of theirs were taken, the last `since` ago (the exit does
/// not wait for the interval).
fn uncounted_turn(saved: u64, since: Option<Duration>, at_exit: bool) -> Turn {
    if saved >= MAX_UNCOUNTED_SNAPSHOTS {
        Turn::Drop
    } else if !at_exit && since.is_some_and(|s| s < SNAPSHOT_INTERVAL) {
        Turn::Later
    } else {
        Turn::Take
    }
}

/// Blocks until every snapshot asked for so far is taken (or `timeout`
/// passes); true if they were. For programs and tests that must see the
/// snapshots before going on.
pub fn wait_for_snapshots(timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    let counted = COUNTED_ASKED.load(Ordering::Acquire);
    let uncounted = UNCOUNTED_ASKED.load(Ordering::Acquire);
    loop {
        let w = worker_state();
        if w.counted_taken >= counted && w.uncounted_taken >= uncounted && w.saving == 0 {
            return true;
        }
        drop(w);
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (snapshots taken, time since the last, at the exit) -> the turn.
    #[test]
    fn triggers_without_a_count_are_held_to_a_rate_and_a_cap() {
        let ms = Duration::from_millis;
        let cases = [
            (0, None, false, Turn::Take),
            (1, Some(ms(10)), false, Turn::Later),
            (1, Some(ms(999)), false, Turn::Later),
            (1, Some(ms(1000)), false, Turn::Take),
            (1, Some(ms(10)), true, Turn::Take),
            (99, Some(ms(5000)), false, Turn::Take),
            (100, Some(ms(5000)), false, Turn::Drop),
            (100, None, true, Turn::Drop),
            (u64::MAX, None, false, Turn::Drop),
        ];
        for (saved, since, at_exit, turn) in cases {
            assert_eq!(
                uncounted_turn(saved, since, at_exit),
                turn,
                "{saved} taken, {since:?} ago, at exit {at_exit}"
            );
        }
    }
}
