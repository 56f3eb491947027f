//! USDT probes (issue 40): every `tracepoint!` is also a SystemTap SDT
//! probe, so that bpftrace (`usdt:PATH:PROVIDER:NAME`), `perf probe
//! sdt_PROVIDER:NAME`, gdb (`info probes`) and SystemTap attach to a
//! running program with no tape tool.
//!
//! **What the binary holds.** For each tracepoint `tracepoint!` writes (on
//! Linux x86-64) an ELF note in `.note.stapsdt` (SystemTap SDT version 3:
//! the address of a `nop`, the provider and probe names, the arguments'
//! formats, the address of a *semaphore*) and the semaphore, a `u16` in
//! `.probes` that the kernel increments while a uprobe is attached to the
//! probe and decrements when it goes. The `nop` lies in a function of its
//! own, called only when a tool is attached: the tracepoint's disabled and
//! enabled paths are unchanged.
//!
//! ```text
//!  bpftrace attaches          kernel: semaphore += 1      watcher (this module,
//!  usdt:./app:app:net_rx  ->  nop -> int3 (uprobe)    ->  every WATCH): sees it,
//!                                                          attaches a probe that
//!  tracepoint hit -> probes -> __tape_usdt(args) -> nop -> trap -> bpftrace
//! ```
//!
//! **How a tool makes the tracepoint fire.** The disabled path tests one
//! bit of the state word; the kernel cannot set it (it adds 1 to a `u16`
//! of its choosing, not atomically with tape's read-modify-writes). So a
//! watcher thread reads every semaphore every [`WATCH`] and, for one that
//! became non-zero, attaches a probe ([`crate::probe`]) that calls the SDT
//! site with the arguments; when it returns to zero (the tool detached),
//! the probe is detached and the tracepoint, if nothing else wants it,
//! is back on its one-load-one-branch path. A tool therefore sees a
//! tracepoint's events from at most [`WATCH`] after it attached. As a
//! probe, the SDT site runs after the event is recorded (or filtered out:
//! filters do not concern probes), after triggers, in probe priority order
//! ([`PRIORITY`]: after the user's probes of default priority).
//!
//! **Names.** The provider is the dotted name's first part, the probe the
//! rest with `.` as `_` (`app.net.rx`: provider `app`, probe `net_rx`);
//! a name of one part is provider `tape`. Characters other than letters,
//! digits and `_` become `_`, and a leading digit gets a `_` before it, as
//! bpftrace's `usdt:PATH:PROVIDER:NAME` needs.
//!
//! **Arguments**, as bpftrace's `argN`: integers, bools, chars, enums and
//! flags by value (signed ones sign-extended), floats as their bits, a
//! `Duration` in nanoseconds; `&str` and slices two arguments, a pointer
//! and a length (`str(arg2, arg3)`); any other field (a struct, an array,
//! an `Option`) the address of its value. At most [`MAX_ARGS`] arguments:
//! the fields past them are not given.
//!
//! **`#[traced]` functions** are probes too (`fn.app.io.read.entry`:
//! `fn:app_io_read_entry`, and `_exit`, `_ret`). Their names are made by
//! the compiler (`module_path!()`), so the note's strings are a constant
//! ([`note_strings`]) written word by word; their arguments are the
//! event's encoded payload, a pointer and a size (`arg0`, `arg1`: for an
//! entry without `args(..)`, a `u32` depth). `printk!` is the probe
//! `tape:printk`: the format id (the trace's `tape_printk_<id>`), then the
//! address of the arguments.
//!
//! **Tracepoints made at run time** (tape-tracing's callsites) have no
//! note: a binary's notes are written when it is built. They all go through
//! one probe, [`runtime_event()`] (`tape:runtime_event`: the tracepoint's
//! name and the event's payload, each a pointer and a length). While a
//! tool is attached to it, the watcher gives every tracepoint without a
//! note of its own a probe that fires it; tape-tracing does so as it
//! registers a callsite ([`cover`]), so a tool sees a new callsite's
//! events from the first one.
//!
//! **Fork.** A child keeps what the parent had at the fork: the kernel
//! copies the uprobe's breakpoint and the semaphore's count, tape the
//! attached probe, so a tool attached then still sees the child's events.
//! The child runs no watcher (threads do not survive a fork, and a fork
//! handler may not start one), so the probe stays until the child ends;
//! [`attached`] answers without a lock, and a [`look`] of the child's own
//! gives up after [`LOOK_WAIT`] if the parent's watcher held its lock.
//!
//! `TAPE_USDT=off` (or [`crate::Config::usdt`]) runs no watcher: the notes
//! stay in the binary, and a tool attached then sees nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::Duration;

use crate::point::Tracepoint;
use crate::probe::Probe;

/// How often the watcher reads the semaphores.
pub const WATCH: Duration = Duration::from_millis(50);

/// The longest [`look`] waits for another one to end.
pub const LOOK_WAIT: Duration = Duration::from_secs(1);

/// The priority of the probe that fires an SDT site: after the user's
/// probes of the default priority.
pub const PRIORITY: i32 = crate::probe::DEFAULT_PRIORITY - 1;

/// The most SDT arguments a probe site has (`&str` and slices count two).
pub const MAX_ARGS: usize = 10;

/// The words of the strings of a note written for a tracepoint named by
/// the compiler (`#[traced]`: from `module_path!()`), whose strings are
/// `const` operands of the probe site's `asm!` (tape-macros' `usdt.rs`).
pub const NOTE_WORDS: usize = 40;

/// [`NOTE_WORDS`] in bytes: the provider, probe and argument strings of
/// such a note, each with its NUL, fit in it (or the program does not
/// compile).
pub const NOTE_BYTES: usize = NOTE_WORDS * 8;

/// One byte of an SDT name: letters, digits and `_` as they are, any other
/// byte `_`.
const fn name_byte(b: u8) -> u8 {
    if b.is_ascii_alphanumeric() {
        b
    } else {
        b'_'
    }
}

/// Writes `part` of a tracepoint name into `out` at `at` as an SDT name
/// (the module's rule), then its NUL; the index after it.
const fn put_name(out: &mut [u8; NOTE_BYTES], mut at: usize, part: &[u8]) -> usize {
    if part.is_empty() || part[0].is_ascii_digit() {
        out[at] = b'_';
        at += 1;
    }
    let mut i = 0;
    while i < part.len() {
        out[at] = name_byte(part[i]);
        at += 1;
        i += 1;
    }
    at + 1
}

/// The strings of the SDT note of the tracepoint named `tracepoint`, its
/// arguments described by `args`: provider, probe and arguments, each
/// NUL-terminated, then zeros. For notes whose names the compiler knows
/// only as constants (`#[traced]`); a name too long for [`NOTE_BYTES`]
/// fails the compilation.
#[doc(hidden)]
pub const fn note_strings(tracepoint: &str, args: &str) -> [u8; NOTE_BYTES] {
    let name = tracepoint.as_bytes();
    let mut dot = 0;
    while dot < name.len() && name[dot] != b'.' {
        dot += 1;
    }
    let (provider, probe) = if dot == name.len() {
        ("tape".as_bytes(), name)
    } else {
        name.split_at(dot)
    };
    let probe = if dot == name.len() {
        probe
    } else {
        probe.split_at(1).1
    };
    let args = args.as_bytes();
    assert!(
        provider.len() + probe.len() + args.len() + 5 <= NOTE_BYTES,
        "a traced function's name is too long for its USDT note: at most 300 bytes"
    );
    let mut out = [0u8; NOTE_BYTES];
    let at = put_name(&mut out, 0, provider);
    let mut at = put_name(&mut out, at, probe);
    let mut i = 0;
    while i < args.len() {
        out[at] = args[i];
        at += 1;
        i += 1;
    }
    out
}

/// Word `i` of `strings` as the assembler writes it (`.8byte`, little
/// endian).
#[doc(hidden)]
pub const fn note_word(strings: &[u8; NOTE_BYTES], i: usize) -> u64 {
    let mut w = [0u8; 8];
    let mut k = 0;
    while k < 8 {
        w[k] = strings[i * 8 + k];
        k += 1;
    }
    u64::from_le_bytes(w)
}

/// The length of `strings` up to its third NUL, included: the strings of
/// the note, no zero after.
#[doc(hidden)]
pub const fn note_len(strings: &[u8; NOTE_BYTES]) -> usize {
    let mut at = 0;
    let mut nuls = 0;
    while nuls < 3 {
        if strings[at] == 0 {
            nuls += 1;
        }
        at += 1;
    }
    at
}

/// The `k`-th string of `strings` (0: the provider, 1: the probe).
#[doc(hidden)]
pub const fn note_part(strings: &'static [u8; NOTE_BYTES], k: usize) -> &'static str {
    let mut start = 0;
    let mut n = 0;
    while n < k {
        while strings[start] != 0 {
            start += 1;
        }
        start += 1;
        n += 1;
    }
    let mut end = start;
    while strings[end] != 0 {
        end += 1;
    }
    let (_, tail) = strings.split_at(start);
    let (part, _) = tail.split_at(end - start);
    match std::str::from_utf8(part) {
        Ok(s) => s,
        Err(_) => panic!("an SDT name is ASCII"),
    }
}

/// The SDT provider and probe names of the tracepoint named `tracepoint`
/// (the module's rule), as `tracepoint!` and `#[traced]` write them.
pub fn names(tracepoint: &str) -> (String, String) {
    let ident = |s: &str| {
        let mut out: String = s.bytes().map(|b| name_byte(b) as char).collect();
        if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
            out.insert(0, '_');
        }
        out
    };
    match tracepoint.split_once('.') {
        Some((provider, rest)) => (ident(provider), ident(rest)),
        None => ("tape".to_owned(), ident(tracepoint)),
    }
}

/// One tracepoint's SDT probe, registered at link time by `tracepoint!`
/// and `#[traced]`.
pub struct UsdtSite {
    /// The tracepoint.
    pub tracepoint: &'static Tracepoint,
    /// Its semaphore, which the kernel increments while a tool is attached.
    pub semaphore: &'static AtomicU16,
    /// The SDT provider name.
    pub provider: &'static str,
    /// The SDT probe name.
    pub name: &'static str,
    /// Attaches the probe that calls the SDT site with the arguments.
    pub attach: fn() -> Probe,
    /// Whether the watcher has the probe attached (what [`attached`]
    /// says, without a lock: a forked child may inherit the watcher's
    /// lock held).
    pub on: AtomicBool,
}

impl std::fmt::Debug for UsdtSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsdtSite")
            .field("tracepoint", &self.tracepoint.name())
            .field("provider", &self.provider)
            .field("name", &self.name)
            .finish()
    }
}

tape_macros::tracepoint! {
    /// An event of a tracepoint that has no SDT note of its own (made at
    /// run time: tape-tracing's callsites), as the SDT probe
    /// `tape:runtime_event`: the tracepoint's name, and the event's
    /// encoded payload (each a pointer and a length). Fired by the probes
    /// [`look`] and [`cover`] attach while a tool is attached to it.
    pub fn runtime_event(tracepoint: &str, payload: &[u8]) = "tape.runtime_event";
}

/// Every SDT probe of the binary.
#[linkme::distributed_slice]
pub static USDT_SITES: [UsdtSite];

/// The probes the watcher attached, by site index.
static ATTACHED: Mutex<Vec<Option<Probe>>> = Mutex::new(Vec::new());

/// Whether the watcher runs.
static WATCHING: AtomicBool = AtomicBool::new(false);

/// Starts the watcher thread (once; not in a binary without SDT probes;
/// `tape::init` does not call it with `TAPE_USDT=off`). The error says why
/// the thread could not be made.
pub(crate) fn start() -> std::io::Result<()> {
    if USDT_SITES.is_empty() {
        return Ok(());
    }
    if WATCHING.swap(true, Ordering::Relaxed) {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("tape-usdt".into())
        .spawn(|| loop {
            look();
            std::thread::sleep(WATCH);
        })
        .map(|_| ())
        .inspect_err(|_| WATCHING.store(false, Ordering::Relaxed))
}

/// `m`, locked within [`LOOK_WAIT`], or `None` (its holder is busy that
/// long, or gone: a forked child's copy of a lock held at the fork).
fn lock_bounded<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    let until = std::time::Instant::now() + LOOK_WAIT;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// One look at every semaphore: a probe attached where a tool came, and
/// detached where it went. Waits at most [`LOOK_WAIT`] for another look to
/// end, then gives up: in a forked child whose parent's watcher was
/// looking at the fork, the child's copy of the lock stays held.
pub fn look() {
    let Some(mut attached) = lock_bounded(&ATTACHED) else {
        return;
    };
    if attached.len() < USDT_SITES.len() {
        attached.resize_with(USDT_SITES.len(), || None);
    }
    for (site, probe) in USDT_SITES.iter().zip(attached.iter_mut()) {
        // Relaxed: the kernel's increment publishes nothing; seen at the
        // next look at the latest.
        let wanted = site.semaphore.load(Ordering::Relaxed) != 0;
        match (wanted, probe.is_some()) {
            (true, false) => *probe = Some((site.attach)()),
            (false, true) => {
                if let Some(p) = probe.take() {
                    p.detach();
                }
            }
            _ => {}
        }
        // Relaxed: a report (`attached`), ordered with nothing else.
        site.on.store(probe.is_some(), Ordering::Relaxed);
    }
    drop(attached);
    if cover_runtime(crate::registry::tracepoints(), runtime_wanted()) {
        crate::registry::changed();
    }
}

/// The probes that give the events of the tracepoints without a note of
/// their own to `tape:runtime_event`, by their tracepoints' addresses,
/// while a tool is attached to it (`None`: none is).
static RUNTIME: Mutex<Option<HashMap<usize, Probe>>> = Mutex::new(None);

/// The addresses of the tracepoints that have an SDT site of their own.
fn noted() -> &'static HashSet<usize> {
    static NOTED: OnceLock<HashSet<usize>> = OnceLock::new();
    NOTED.get_or_init(|| {
        USDT_SITES
            .iter()
            .map(|s| s.tracepoint as *const Tracepoint as usize)
            .collect()
    })
}

/// The probe that gives one event of a tracepoint without a note to
/// `tape:runtime_event`.
fn forward(e: &crate::probe::Event<'_>) {
    runtime_event(e.name(), e.payload());
}

/// Whether a tool is attached to `tape:runtime_event`.
fn runtime_wanted() -> bool {
    attached(&runtime_event::TRACEPOINT).is_some_and(|(_, _, on)| on)
}

/// Gives `points` (those without a note of their own) to
/// `tape:runtime_event` while its tool is attached, or takes every such
/// probe away once it is gone. Whether a probe came or went.
fn cover_runtime(points: &[&'static Tracepoint], wanted: bool) -> bool {
    // Whoever holds it calls nothing that waits for a subscriber's lock
    // while it does (probes come quietly; they go after it is released).
    let Some(mut runtime) = lock_bounded(&RUNTIME) else {
        return false; // the next look covers them
    };
    if !wanted {
        let Some(probes) = runtime.take() else {
            return false;
        };
        drop(runtime);
        for p in probes.into_values() {
            p.detach();
        }
        return true;
    }
    let probes = runtime.get_or_insert_with(HashMap::new);
    let mut came = false;
    for &tp in points {
        let at = tp as *const Tracepoint as usize;
        if !noted().contains(&at) {
            probes.entry(at).or_insert_with(|| {
                came = true;
                crate::probe::attach_to_quietly(tp, PRIORITY, forward)
            });
        }
    }
    came
}

/// Gives `tp`, a tracepoint registered at run time, to the SDT probe
/// `tape:runtime_event` now if a tool is attached to it (the watcher does
/// so at its next look otherwise: the events between would be missed).
/// Called by tape-tracing as it registers a callsite; does not call the
/// registry's change hook (the caller reads the new state itself); waits
/// at most [`LOOK_WAIT`] for a look that covers at the same time.
pub fn cover(tp: &'static Tracepoint) {
    if runtime_wanted() {
        cover_runtime(&[tp], true);
    }
}

/// Whether a USDT tool is attached to `tp` (as the watcher last saw), and
/// its SDT provider and probe names.
pub fn attached(tp: &Tracepoint) -> Option<(&'static str, &'static str, bool)> {
    let site = USDT_SITES.iter().find(|s| std::ptr::eq(s.tracepoint, tp))?;
    // Relaxed: see `look`.
    Some((site.provider, site.name, site.on.load(Ordering::Relaxed)))
}
