//! The end of a program saves the trace: the [`Guard`](crate::Guard)'s drop
//! at the end of `main`, `exit()` while it lives ([`save_at_end`]), and a
//! stop.
//!
//! ## A stop
//!
//! SIGTERM (`kill`, `systemctl stop`, `docker stop`), SIGINT (Ctrl-C)
//! and SIGHUP (the terminal closed) end a program without running the end
//! of `main`, so the guard would never save. For a flight recorder a normal stop is the commonest ending.
//!
//! [`install_stop`] (called by [`crate::init`] unless `TAPE_SAVE_ON_STOP=off`)
//! takes each of the three signals whose disposition is the default: the
//! program has no handler of its own and does not ignore it. One it handles
//! or ignores is left alone (its program saves at the end of `main`, as
//! without a stop).
//!
//! ```text
//!   signal ──► handler (async-signal-safe)          thread `tape-stop`
//!              │ not the process that installed it         │ read(pipe) blocks
//!              │ (a fork's child), or another handler      │
//!              │ installed over it and calling it          │
//!              │ (signal-hook chains): nothing              │
//!              │ default disposition back ──────────┐      │
//!              └ write(pipe, signal number) ────────┼─────►│ save, as the end
//!                                                   │      │ of `main` (its
//!   a second signal: the default action, at once ◄──┘      │ path on stderr)
//!   (the rings stay for `tape recover`)                    │ raise(signal):
//!                                                          ▼ dies of it (128+N)
//! ```
//!
//! The handler only calls `getpid`, `sigaction` and `write`, all
//! async-signal-safe; the save runs on an ordinary thread, where it may
//! allocate and lock as `tape::save()` does. The save at the end of `main`
//! and this one take the same lock, so a stop during the end of `main`
//! makes one trace, not two. The process then dies of the signal, as it
//! would have without tape: exit status 128+N in a shell, `WIFSIGNALED`
//! for its parent.
//!
//! This is one of the homes of `unsafe` (with `ring/` and `crash`): the
//! handler and the system calls, each block with its argument.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals a stop is.
pub(crate) const STOP_SIGNALS: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// The pipe's write end (-1: none). Set once by [`install_stop`] before the
/// first handler is; the handler reads it. Relaxed: `sigaction` orders the
/// store before any delivery of the signal it installs the handler of.
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// The process that installed the handlers: a fork's child, which has
/// them but not the thread, dies as without tape. Relaxed, as [`WAKE`].
static OWNER: AtomicI32 = AtomicI32::new(0);

/// Installs the stop handlers (once; later calls do nothing). The thread that
/// saves starts here; an error (no pipe, no thread) is said on stderr and
/// the program goes on with the signals untouched.
pub(crate) fn install_stop() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = start() {
            eprintln!("tape: a stop (SIGTERM, SIGINT, SIGHUP) will not save the trace: {e}");
        }
    });
}

fn start() -> std::io::Result<()> {
    let defaults: Vec<c_int> = STOP_SIGNALS
        .into_iter()
        .filter(|&s| current(s).is_some_and(|a| a.sa_sigaction == libc::SIG_DFL))
        .collect();
    if defaults.is_empty() {
        return Ok(());
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read, write] = fds;
    std::thread::Builder::new()
        .name("tape-stop".into())
        .spawn(move || wait_and_save(read))
        .inspect_err(|_| {
            // SAFETY: both descriptors are this function's, used nowhere else.
            unsafe {
                libc::close(read);
                libc::close(write);
            }
        })?;
    WAKE.store(write, Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    for sig in defaults {
        // SAFETY: a zeroed sigaction is a valid value; the handler is an
        // `extern "C"` function of the signature SA_SIGINFO calls, valid
        // for the life of the process; `sa_mask` is initialised by
        // sigemptyset before use.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction =
                on_stop as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    Ok(())
}

/// The disposition of `sig` now.
fn current(sig: c_int) -> Option<libc::sigaction> {
    // SAFETY: a zeroed sigaction is a valid value for sigaction to fill; a
    // null new action only reads.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, std::ptr::null(), &mut old) == 0).then_some(old)
    }
}

/// The handler: async-signal-safe calls only (module docs).
extern "C" fn on_stop(sig: c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // errno is the interrupted code's: kept.
    // SAFETY: __errno_location returns this thread's errno, always valid.
    let errno = unsafe { *libc::__errno_location() };
    let ours = on_stop as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
    // SAFETY: getpid has no preconditions.
    let forked = unsafe { libc::getpid() } != OWNER.load(Ordering::Relaxed);
    // Another handler installed over ours that calls it (signal-hook
    // chains to the previous handler): the program handles the stop.
    let chained = current(sig).is_some_and(|a| a.sa_sigaction != ours);
    if !chained {
        // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
        unsafe {
            let dfl: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        let fd = WAKE.load(Ordering::Relaxed);
        if forked || fd < 0 {
            // No thread to save: dies of it as without tape (the signal
            // is blocked in its handler: delivered at its return).
            // SAFETY: raise is async-signal-safe.
            unsafe { libc::raise(sig) };
        } else {
            let byte = sig as u8;
            // SAFETY: one byte from a live local to a descriptor this
            // process opened; a failed write leaves the signal unsaved
            // (nothing else can be done in a handler).
            unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The thread: waits for a stop, saves, dies of the signal.
fn wait_and_save(read: c_int) {
    let mut byte = 0u8;
    loop {
        // SAFETY: one byte into a live local from this thread's descriptor.
        let n = unsafe { libc::read(read, (&mut byte as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // The pipe is gone (not expected): no stop to save.
        return;
    }
    let sig = c_int::from(byte);
    eprintln!("tape: {} received: saving the trace", name(sig));
    save_at_end();
    // Dies of the signal as without tape: its default disposition is back
    // (the handler put it), and this thread unblocks it.
    // SAFETY: an initialised set with one signal; pthread_sigmask and
    // raise act on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    // A handler the program installed meanwhile took the signal: it ends
    // the program as it means to.
}

/// The signal's name, for the line on stderr.
fn name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "a stop signal",
    }
}

/// The save at the end of the program (the [`Guard`](crate::Guard)'s
/// drop, `exit()`), or at a stop: one at a time (the second finds nothing
/// unsaved).
pub(crate) fn save_at_end() {
    use std::io::Write;
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Snapshots asked for in the program's last milliseconds (a trigger,
    // the latency tracer's worst case) are taken before the last save.
    crate::snapshot_thread::take_pending_at_exit();
    let mut err = std::io::stderr();
    let mut said = String::new();
    if !crate::save::unsaved() {
        if crate::save::saves() == 0 {
            said = crate::save::why_empty();
            let _ = writeln!(err, "tape: no trace saved: nothing was recorded: {said}");
        }
    } else {
        let _ = match crate::save::save() {
            Ok(p) => writeln!(err, "tape: trace saved to {}", p.display()),
            Err(e) => writeln!(err, "tape: could not save the trace: {e}"),
        };
    }
    // A pattern that never matched (said at init as matching nothing yet)
    // is said again, unless the line above named it.
    for p in crate::registry::enabling_nothing() {
        if !said.contains(&format!("{p:?}")) {
            let _ = writeln!(
                err,
                "tape: the pattern {p:?} matched no tracepoint in this run{}",
                crate::registry::nearest_said(&p)
            );
        }
    }
}
