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
//! `TAPE_USDT=off` (or [`crate::Config::usdt`]) runs no watcher: the notes
//! stay in the binary, and a tool attached then sees nothing.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::point::Tracepoint;
use crate::probe::Probe;

/// How often the watcher reads the semaphores.
pub const WATCH: Duration = Duration::from_millis(50);

/// The priority of the probe that fires an SDT site: after the user's
/// probes of the default priority.
pub const PRIORITY: i32 = crate::probe::DEFAULT_PRIORITY - 1;

/// The most SDT arguments a probe site has (`&str` and slices count two).
pub const MAX_ARGS: usize = 10;

/// One tracepoint's SDT probe, registered at link time by `tracepoint!`.
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

/// One look at every semaphore: a probe attached where a tool came, and
/// detached where it went.
pub fn look() {
    let mut attached = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
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
    }
}

/// Whether a USDT tool is attached to `tp` (as the watcher last saw), and
/// its SDT provider and probe names.
pub fn attached(tp: &Tracepoint) -> Option<(&'static str, &'static str, bool)> {
    let i = USDT_SITES
        .iter()
        .position(|s| std::ptr::eq(s.tracepoint, tp))?;
    let site = &USDT_SITES[i];
    let on = ATTACHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(i)
        .is_some_and(Option::is_some);
    Some((site.provider, site.name, on))
}
