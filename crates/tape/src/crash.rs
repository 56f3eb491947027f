//! Dump on crash: the trace is saved when the program dies (ftrace's
//! `ftrace_dump_on_oops`).
//!
//! [`install`] (called by [`crate::init`] unless `TAPE_DUMP=off`) sets a
//! panic hook and handlers for the fatal signals SIGSEGV, SIGBUS, SIGILL,
//! SIGFPE and SIGABRT. The trace then says which thread crashed and why:
//!
//! * an event **`tape.crash`** (`signal`, `code`, `addr`, `what`) in the
//!   crashing thread's stream, its last event (when that thread has a ring:
//!   a signal handler must not create one);
//! * `env` entries `tape_crash_signal`, `tape_crash_code`,
//!   `tape_crash_addr`, `tape_crash_tid`, `tape_crash_reason`, always.
//!
//! ## A panic
//!
//! The hook runs the previous hook (the usual message), records
//! `tape.crash` with signal 0 and `what` = `panicked at FILE:LINE:COL:
//! MESSAGE`, and saves the trace as [`crate::save()`] does, into
//! `<program>-crash-<pid>` (`-2`, `-3`... beside it) in the trace directory;
//! then the panic goes on (unwinds, or aborts with `panic = "abort"`: that
//! thread's `abort()` is then the panic's end, not a second crash, and
//! makes no second dump). A program that catches panics gets a dump
//! for each, up to [`MAX_DUMPS`]; a probe's panic, which tape catches and
//! reports itself ([`crate::probe`]), gets none.
//!
//! ## A fatal signal
//!
//! The handler runs on the thread's alternate signal stack (`SA_ONSTACK`;
//! Rust gives every thread it starts one, 8 KiB), so a stack overflow is
//! caught too, and does only async-signal-safe work:
//!
//! 1. it takes the dump (an atomic flag): a second crash on the same thread
//!    during the dump (or a second signal) goes straight to step 5; a crash
//!    of another thread meanwhile waits for the dump to end (at most
//!    [`DUMP_WAIT`]) so the process does not die under it;
//! 2. records `tape.crash` with a constant text per signal and code (no
//!    formatting);
//! 3. writes the trace with raw system calls (`mkdirat`, `openat`, `write`,
//!    `close`) from memory prepared at [`install`]: the metadata text with
//!    holes for the clock's calibration, the losses and the crash, filled by
//!    hand-written integer formatting; the stream files are written straight
//!    from the rings' memory (no copy, no allocation), each packet pinned
//!    as a save pins it. The rings are reached with a `try_lock` of their
//!    registry and each ring's copy claim is tried, each a bounded number of
//!    times: if the crashing thread held one (a crash inside tape's own save
//!    or ring creation), that part is skipped, never waited for;
//! 4. writes `metadata` last: a dump cut short (a second fault, `kill -9`)
//!    has none, and `tape check` names the directory as no trace;
//! 5. puts the previous handler back and, for a signal that was sent
//!    (`kill`, `abort()`), raises it again; for a fault it returns, the
//!    instruction faults again and the previous handler (Rust's stack
//!    overflow report, the default action and its core dump) sees the real
//!    fault. So the exit status and core dump are what they would have
//!    been without tape.
//!
//! The dump goes to `<trace dir>/<program>-crash-<pid>` (`-2`... if taken):
//! the trace directory known at [`install`] (created at the crash if
//! missing, one level), else `/tmp`. `stderr` gets one line naming it. The
//! dump itself runs on a 256 KiB static stack of its own (the alternate
//! signal stack only has to hold the handler's first frame).
//!
//! ## `TAPE_DUMP=text`
//!
//! After the dump, each thread's last [`TEXT_EVENTS_PER_THREAD`] events are
//! printed on stderr as ftrace text. From a signal handler nothing that
//! decodes and formats may run, so the program re-executes itself: a child
//! made with the raw `clone` system call (no `atfork` handler) calls
//! `execve("/proc/self/exe")` with only `TAPE_DUMP_SHOW=<dump>` in its
//! environment; a constructor of tape's (`.init_array`, before `main`)
//! sees it, prints the dump and exits. The crashed process waits for it at
//! most [`DUMP_WAIT`].
//!
//! This is the second home of real `unsafe` (after `ring/`): the signal
//! handler and the raw system calls, each block with its argument.

use std::ffi::{c_int, c_void, CString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ring::{self, PacketMeta, Ring};
use crate::save::{self, Context};
use crate::template::{self, Hole};

tape_macros::tracepoint! {
    /// The program crashed: the signal (0 for a panic) and its `si_code`,
    /// the faulting address (0 if none), and what happened.
    pub fn crash_event(signal: i32, code: i32, addr: u64, what: &str) = "tape.crash";
}

/// What to do when the program crashes (`TAPE_DUMP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dump {
    /// Nothing: the program dies as it would without tape.
    Off,
    /// Save the trace (the default once [`crate::init`] ran).
    Trace,
    /// Save the trace, and print each thread's last events as ftrace text
    /// on stderr, as the kernel prints its buffer on an oops.
    Text,
}

/// Events of each thread that [`Dump::Text`] prints.
pub use crate::dump_text::TEXT_EVENTS_PER_THREAD;

/// Dumps made for panics, at most (a program that catches panics in a loop
/// does not fill the disk).
pub const MAX_DUMPS: u32 = 8;

/// How long a second crashing thread waits for the first one's dump.
pub const DUMP_WAIT: Duration = Duration::from_secs(10);

const SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// The handlers in place before ours, by index in [`SIGNALS`]; written
/// once, before our handlers are installed, then only read.
struct OldActions(std::cell::UnsafeCell<[libc::sigaction; 5]>);
// SAFETY: written only in `install_signals` under `INSTALL` (before any of
// our handlers can run), read-only afterwards.
unsafe impl Sync for OldActions {}
static OLD: OldActions = OldActions(std::cell::UnsafeCell::new(
    // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, no flags).
    unsafe { std::mem::zeroed() },
));

static MODE: AtomicU8 = AtomicU8::new(0);
static PANIC_DUMPS: AtomicU32 = AtomicU32::new(0);
/// The thread (tid) that is dumping; 0: none.
static DUMPING: AtomicI32 = AtomicI32::new(0);
/// The dump of a signal is over (written or given up).
static DUMP_DONE: AtomicBool = AtomicBool::new(false);
/// The thread whose panic was dumped last: its `abort()` (with
/// `panic = "abort"`) is that panic's end, not a second crash to dump.
static PANIC_DUMPED_BY: AtomicI32 = AtomicI32::new(0);

/// What the signal path needs, prepared at [`install`] (it may not
/// allocate): leaked, never freed.
struct Prepared {
    /// The trace directory, and the fallback.
    dir: CString,
    /// Sanitised program name.
    program: Vec<u8>,
    /// The metadata text cut at its holes.
    pieces: Vec<Vec<u8>>,
    /// What each hole holds, in order.
    holes: Vec<Hole>,
    uuid: [u8; 16],
}

static PREPARED: AtomicPtr<Prepared> = AtomicPtr::new(std::ptr::null_mut());

/// Installs the panic hook and the signal handlers (once; later calls
/// change only the mode).
pub fn install(mode: Dump) {
    MODE.store(
        match mode {
            Dump::Off => 0,
            Dump::Trace => 1,
            Dump::Text => 2,
        },
        Ordering::Relaxed,
    );
    if mode == Dump::Off {
        return;
    }
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        prepare();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            on_panic(info);
        }));
        install_signals();
    });
}

fn prepare() {
    let uuid = crate::sys::new_uuid();
    let text = template::metadata(
        uuid,
        &[
            ("tape_crash_signal", Hole::Signal),
            ("tape_crash_code", Hole::Code),
            ("tape_crash_addr", Hole::Addr),
            ("tape_crash_tid", Hole::Tid),
            ("tape_crash_reason", Hole::Reason),
        ],
        &crate::save::counts(),
    );
    let text = match text {
        Ok(text) => text,
        Err(e) => {
            // Said once; the program runs on, without a dump on crash.
            eprintln!("tape: no trace will be dumped on a crash: {e}");
            return;
        }
    };
    let (pieces, holes) = template::cut(&text);
    let dir = crate::knobs::trace_dir();
    let dir = CString::new(dir.as_os_str().as_bytes()).unwrap_or_else(|_| c"/tmp".to_owned());
    let program = crate::sys::program_name().into_bytes();
    let p = Box::new(Prepared {
        dir,
        program,
        pieces,
        holes,
        uuid,
    });
    // Release: pairs with the Acquire in the handler.
    PREPARED.store(Box::into_raw(p), Ordering::Release);
}

fn install_signals() {
    // SAFETY: `OLD` is written here only, before any of our handlers is
    // installed (so none reads it yet); each sigaction call gets valid
    // pointers; the handler is an `extern "C"` function valid for the life
    // of the process.
    unsafe {
        let old = &mut *OLD.0.get();
        for (i, &sig) in SIGNALS.iter().enumerate() {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)
                as libc::sighandler_t;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, &mut old[i]);
        }
    }
}

/// The kernel thread id of the calling thread (async-signal-safe).
fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

fn on_panic(info: &PanicHookInfo<'_>) {
    if MODE.load(Ordering::Relaxed) == 0 || crate::probe::in_probe() {
        // A probe's panic is caught, counted and reported by the probe
        // machinery (`crate::probe`): no crash.
        return;
    }
    if PANIC_DUMPS.fetch_add(1, Ordering::Relaxed) >= MAX_DUMPS {
        return;
    }
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "Box<dyn Any>".into());
    let what = match info.location() {
        Some(l) => format!(
            "panicked at {}:{}:{}: {message}",
            l.file(),
            l.line(),
            l.column()
        ),
        None => format!("panicked: {message}"),
    };
    if save::saving_on_this_thread() {
        eprintln!("tape: no crash dump: the panic happened during a save on this thread");
        return;
    }
    record(0, 0, 0, &what, true);
    let parent = crate::knobs::trace_dir();
    let program = crate::sys::program_name();
    let pid = std::process::id();
    let mut target = parent.join(format!("{program}-crash-{pid}"));
    let mut n = 2;
    while target.exists() {
        target = parent.join(format!("{program}-crash-{pid}-{n}"));
        n += 1;
    }
    PANIC_DUMPED_BY.store(gettid(), Ordering::SeqCst);
    match save::save_crash(&target, &what, gettid()) {
        Ok(()) => {
            eprintln!("tape: crash dump saved to {}", target.display());
            if MODE.load(Ordering::Relaxed) == 2 {
                let mut err = std::io::stderr().lock();
                let _ = print_last_events(&target, &mut err);
            }
        }
        Err(e) => eprintln!("tape: crash dump failed: {e}"),
    }
}

pub use crate::dump_text::print_last_events;

/// The re-executed program of [`Dump::Text`]: a constructor, run before
/// `main`, that prints the dump named by `TAPE_DUMP_SHOW` and exits.
#[used]
#[link_section = ".init_array"]
static SHOW_DUMP: extern "C" fn() = show_dump_if_asked;

extern "C" fn show_dump_if_asked() {
    let Some(dir) = std::env::var_os("TAPE_DUMP_SHOW") else {
        return;
    };
    let mut err = std::io::stderr().lock();
    if let Err(e) = print_last_events(std::path::Path::new(&dir), &mut err) {
        let _ = writeln!(err, "tape: cannot print the crash dump: {e}");
    }
    drop(err);
    // SAFETY: _exit ends this (re-executed) process at once, by design.
    unsafe { libc::_exit(0) };
}

/// From the signal handler: prints the dump by re-executing the program
/// (`/proc/self/exe`) with only `TAPE_DUMP_SHOW=<dump>` in its environment,
/// in a child made with the raw `clone` system call (no `atfork` handler
/// runs, no lock of this process is inherited into code that runs), and
/// waits for it at most [`DUMP_WAIT`].
fn show_from_signal(dir: &[u8]) {
    let mut env = Buf::<1100>::new();
    env.put(b"TAPE_DUMP_SHOW=").put(dir);
    let envp: [*const libc::c_char; 2] = [env.c(), std::ptr::null()];
    let argv: [*const libc::c_char; 2] = [c"tape-dump-show".as_ptr(), std::ptr::null()];
    // SAFETY: a raw clone with only SIGCHLD is a fork without glibc's
    // atfork handlers; the child calls only execve and _exit, which are
    // async-signal-safe, with valid NUL-terminated arrays.
    let child =
        unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    if child == 0 {
        // SAFETY: as above.
        unsafe {
            libc::execve(c"/proc/self/exe".as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    if child < 0 {
        return;
    }
    let child = child as libc::pid_t;
    let step = Duration::from_millis(5);
    let mut waited = Duration::ZERO;
    loop {
        let mut status = 0;
        // SAFETY: waiting for our own child; async-signal-safe.
        let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if r != 0 {
            return;
        }
        if waited >= DUMP_WAIT {
            // SAFETY: our own child.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                libc::waitpid(child, &mut status, 0);
            }
            return;
        }
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: step.as_nanos() as libc::c_long,
        };
        // SAFETY: valid pointer; async-signal-safe.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        waited += step;
    }
}

/// Records `tape.crash` on the calling thread, whether or not it is
/// enabled; from a signal only if the thread has a ring already.
fn record(signal: i32, code: i32, addr: u64, what: &str, may_allocate: bool) {
    if may_allocate || ring::has_ring() {
        ring::emit(crash_event::TRACEPOINT.state(), (signal, code, addr, what));
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut c_void) {
    let me = gettid();
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe {
        if info.is_null() {
            (0, 0)
        } else {
            let code = (*info).si_code;
            // si_addr means something only for a fault (code > 0); for a
            // sent signal the union holds the sender's pid.
            (
                code,
                if code > 0 {
                    (*info).si_addr() as u64
                } else {
                    0
                },
            )
        }
    };
    // A ring file cut under its mapping: repaired, and the access retried
    // (`ring::cut`), before anything here touches a ring.
    if sig == libc::SIGBUS && code > 0 && crate::ring::cut::on_sigbus(addr as usize) {
        return;
    }
    match DUMPING.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            let panic_abort =
                sig == libc::SIGABRT && code <= 0 && PANIC_DUMPED_BY.load(Ordering::SeqCst) == me;
            if MODE.load(Ordering::Relaxed) != 0 && !panic_abort {
                let mut args = DumpArgs {
                    sig,
                    code,
                    addr,
                    tid: me,
                };
                // SAFETY: only the thread that won DUMPING runs on the
                // crash stack, once (a nested crash of this thread does not
                // come back here); `dump_on_stack` is an extern "C" fn that
                // takes the args pointer, valid for the call.
                unsafe {
                    call_on_crash_stack(dump_on_stack, (&mut args as *mut DumpArgs).cast());
                }
            }
            DUMP_DONE.store(true, Ordering::SeqCst);
        }
        Err(owner) if owner != me => {
            // Another thread is dumping: let it finish before this one
            // takes the process down.
            let mut waited = Duration::ZERO;
            let step = Duration::from_millis(1);
            while !DUMP_DONE.load(Ordering::SeqCst) && waited < DUMP_WAIT {
                let ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: step.as_nanos() as libc::c_long,
                };
                // SAFETY: nanosleep is async-signal-safe; valid pointer.
                unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
                waited += step;
            }
        }
        Err(_) => {} // A crash inside this thread's own dump: go on dying.
    }
    chain(sig, code);
}

struct DumpArgs {
    sig: c_int,
    code: c_int,
    addr: u64,
    tid: i32,
}

extern "C" fn dump_on_stack(args: *mut c_void) {
    // SAFETY: `on_signal` passes a valid `DumpArgs` for the call's length.
    let a = unsafe { &*args.cast::<DumpArgs>() };
    dump_from_signal(a.sig, a.code, a.addr, a.tid);
}

/// The stack the dump runs on: the thread's alternate signal stack (8 KiB
/// for Rust's threads) is too small for an unoptimised build's frames, and
/// one thread dumps at a time. Untouched (and so not resident) until used.
const CRASH_STACK_SIZE: usize = 256 << 10;

#[repr(C, align(16))]
struct CrashStack(std::cell::UnsafeCell<[u8; CRASH_STACK_SIZE]>);
// SAFETY: used by the one thread that won DUMPING, once.
unsafe impl Sync for CrashStack {}
static CRASH_STACK: CrashStack = CrashStack(std::cell::UnsafeCell::new([0; CRASH_STACK_SIZE]));

/// Calls `f(arg)` with the stack pointer at the top of [`CRASH_STACK`],
/// then restores it.
///
/// # Safety
/// One caller at a time (the crash stack is not reentrant); `f` must not
/// unwind.
unsafe fn call_on_crash_stack(f: extern "C" fn(*mut c_void), arg: *mut c_void) {
    let top = CRASH_STACK
        .0
        .get()
        .cast::<u8>()
        .wrapping_add(CRASH_STACK_SIZE);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `top` is the 16-aligned end of a static buffer no one else
    // uses now; the old stack pointer is kept in r12, callee-saved, so `f`
    // preserves it; `f` follows the C ABI (clobber_abi).
    unsafe {
        core::arch::asm!(
            "mov r12, rsp",
            "mov rsp, {top}",
            "call {f}",
            "mov rsp, r12",
            top = in(reg) top,
            f = in(reg) f,
            in("rdi") arg,
            out("r12") _,
            clobber_abi("C"),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above, with the old stack pointer in x19 (callee-saved).
    unsafe {
        core::arch::asm!(
            "mov x19, sp",
            "mov sp, {top}",
            "blr {f}",
            "mov sp, x19",
            top = in(reg) top,
            f = in(reg) f,
            in("x0") arg,
            out("x19") _,
            clobber_abi("C"),
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = top;
        f(arg);
    }
}

/// Puts the previous handler back; raises a sent signal again (a fault
/// faults again by itself when the handler returns).
fn chain(sig: c_int, code: c_int) {
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    // SAFETY: OLD is read-only once handlers are installed; sigaction and
    // raise are async-signal-safe.
    unsafe {
        let old = &(*OLD.0.get())[i];
        libc::sigaction(sig, old, std::ptr::null_mut());
        if code <= 0 {
            // Sent (SI_USER, SI_TKILL, SI_QUEUE...): pending until this
            // handler returns, then delivered to the previous action.
            libc::raise(sig);
        }
    }
}

/// A constant text for a signal and its code.
fn reason(sig: c_int, code: c_int) -> &'static str {
    match (sig, code) {
        (libc::SIGSEGV, 1) => "SIGSEGV: address not mapped",
        (libc::SIGSEGV, 2) => "SIGSEGV: invalid permissions for the mapped address",
        (libc::SIGSEGV, _) => "SIGSEGV: segmentation fault",
        (libc::SIGBUS, 1) => "SIGBUS: invalid address alignment",
        (libc::SIGBUS, 2) => "SIGBUS: nonexistent physical address",
        (libc::SIGBUS, _) => "SIGBUS: bus error",
        (libc::SIGILL, _) => "SIGILL: illegal instruction",
        (libc::SIGFPE, 1) => "SIGFPE: integer divide by zero",
        (libc::SIGFPE, _) => "SIGFPE: arithmetic exception",
        (libc::SIGABRT, _) => "SIGABRT: aborted",
        _ => "fatal signal",
    }
}

/// A small buffer on the stack, written with text and numbers (no
/// allocation).
struct Buf<const N: usize> {
    b: [u8; N],
    n: usize,
}

impl<const N: usize> Buf<N> {
    fn new() -> Self {
        Buf { b: [0; N], n: 0 }
    }
    fn put(&mut self, s: &[u8]) -> &mut Self {
        let k = s.len().min(N - self.n);
        self.b[self.n..self.n + k].copy_from_slice(&s[..k]);
        self.n += k;
        self
    }
    fn num(&mut self, v: i128) -> &mut Self {
        let mut digits = [0u8; 40];
        let mut i = digits.len();
        let neg = v < 0;
        let mut u = v.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if neg {
            self.put(b"-");
        }
        self.put(&digits[i..])
    }
    fn pad2(&mut self, v: i64) -> &mut Self {
        if v < 10 {
            self.put(b"0");
        }
        self.num(v.into())
    }
    /// NUL-terminated, for a system call.
    fn c(&mut self) -> *const libc::c_char {
        if self.n == N {
            self.n -= 1;
        }
        self.b[self.n] = 0;
        self.b.as_ptr().cast()
    }
    fn bytes(&self) -> &[u8] {
        &self.b[..self.n]
    }
}

/// Writes all of `bytes` to `fd`; false on an error.
fn write_all(fd: c_int, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is valid for its length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return false;
        }
        bytes = &bytes[n as usize..];
    }
    true
}

/// The civil date of a Unix time, UTC: `YYYY-MM-DD-HH-MM-SS`.
fn utc_date(out: &mut Buf<32>, secs: i64) {
    let [y, m, d, h, mi, sec] = crate::clock::civil_utc(secs);
    out.num(y.into())
        .put(b"-")
        .pad2(m)
        .put(b"-")
        .pad2(d)
        .put(b"-");
    out.pad2(h).put(b"-").pad2(mi).put(b"-").pad2(sec);
}

/// The dump of a fatal signal (module docs): only async-signal-safe steps.
fn dump_from_signal(sig: c_int, code: c_int, addr: u64, tid: i32) {
    // Acquire: pairs with the Release store of `prepare`.
    let p = PREPARED.load(Ordering::Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: leaked by `prepare`, never freed.
    let p = unsafe { &*p };
    let what = reason(sig, code);
    record(sig, code, addr, what, false);

    // The directory: the trace directory (made if missing), else /tmp.
    let mut parent_name: &[u8] = p.dir.as_bytes();
    // SAFETY: valid NUL-terminated paths; open/mkdir are async-signal-safe.
    let parent = unsafe {
        let mut fd = libc::open(
            p.dir.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            libc::mkdir(p.dir.as_ptr(), 0o755);
            fd = libc::open(
                p.dir.as_ptr(),
                libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
            );
        }
        if fd < 0 {
            parent_name = b"/tmp";
            fd = libc::open(
                c"/tmp".as_ptr(),
                libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
            );
        }
        fd
    };
    if parent < 0 {
        return;
    }
    let pid = std::process::id();
    let mut name = Buf::<256>::new();
    let mut made = false;
    for n in 1..100 {
        name.n = 0;
        name.put(&p.program).put(b"-crash-").num(pid.into());
        if n > 1 {
            name.put(b"-").num(n.into());
        }
        // SAFETY: `parent` is an open directory, the name NUL-terminated.
        if unsafe { libc::mkdirat(parent, name.c(), 0o755) } == 0 {
            made = true;
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            break;
        }
    }
    let dir = if made {
        // SAFETY: `parent` is an open directory, the name NUL-terminated.
        unsafe {
            libc::openat(
                parent,
                name.c(),
                libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
            )
        }
    } else {
        -1
    };
    if dir < 0 {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(parent) };
        return;
    }
    let mut rings_written = 0u32;
    // Rings the dump could not reach (their lock or copy claim held by the
    // crashing thread, or a reader stopped in its copy) are missing from
    // it, their events counted in `events_skipped_ring_busy`; the streams
    // written are whole.
    let mut skipped = 0u64;
    // The losses stream, opened at the first stream that lost events, and
    // its packets' time (non-decreasing: readers merge by time).
    let mut losses_fd: c_int = -1;
    let mut losses_ts = 0u64;
    let _reached = ring::with_rings_for_crash(1000, |rings| {
        for r in rings {
            match write_stream(dir, p, r, (&mut losses_fd, &mut losses_ts)) {
                Some(true) => rings_written += 1,
                Some(false) => {}
                None => skipped = skipped.saturating_add(r.held()),
            }
        }
    });
    let happened = Happened {
        sig,
        code,
        addr,
        tid,
        what,
        skipped,
    };
    write_metadata(dir, p, &happened);
    // SAFETY: closing our own descriptors.
    unsafe {
        if losses_fd >= 0 {
            libc::close(losses_fd);
        }
        libc::close(dir);
        libc::close(parent);
    }
    let mut line = Buf::<512>::new();
    line.put(b"tape: crash dump saved to ");
    line.put(parent_name)
        .put(b"/")
        .put(name.bytes())
        .put(b" (")
        .put(what.as_bytes())
        .put(b")\n");
    let _ = write_all(2, line.bytes());
    if MODE.load(Ordering::Relaxed) == 2 {
        let mut path = Buf::<1024>::new();
        path.put(parent_name).put(b"/").put(name.bytes());
        show_from_signal(path.bytes());
    }
}

/// One ring's stream file, written from the ring's memory, and its packet
/// of the losses stream (into its descriptor, opened in `dir` if it is -1,
/// at a time not before the last one's) when it lost events; whether it
/// was written, `None` if the ring's copy claim stayed held by another
/// copier.
fn write_stream(
    dir: c_int,
    p: &Prepared,
    r: &Arc<Ring>,
    (losses_fd, losses_ts): (&mut c_int, &mut u64),
) -> Option<bool> {
    let tid = r.tid();
    let mut file = Buf::<96>::new();
    let name = crate::sys::truncate_utf8(&r.name, 255);
    for c in name.bytes().take(32) {
        file.put(&[if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' {
            c
        } else {
            b'_'
        }]);
    }
    if name.is_empty() {
        file.put(b"thread");
    }
    file.put(b"-").num(tid.into());
    let ctx = Context {
        uuid: &p.uuid,
        tid,
        name,
    };
    let head = ctx.head_size();
    if head > 512 {
        return Some(false);
    }
    let mut fd: c_int = -1;
    let mut ok = true;
    let mut losses = save::StreamLosses::default();
    let created = r.created_ts;
    let base = file.n;
    let mut open_file = |fd: &mut c_int| -> bool {
        // Two threads of the same name and tid (a tid reused): `-2`...
        for n in 1..10 {
            if *fd >= 0 {
                break;
            }
            file.n = base;
            if n > 1 {
                file.put(b"-").num(n.into());
            }
            // SAFETY: `dir` is open, the name NUL-terminated.
            *fd = unsafe {
                libc::openat(
                    dir,
                    file.c(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o644,
                )
            };
        }
        *fd >= 0
    };
    let walked = r.walk_for_crash(1000, |m: &PacketMeta, events: *const u8, len: usize| {
        if !ok {
            return;
        }
        let mut hdr = [0u8; 512];
        let (leading, kept) = losses.packet(m, created);
        if let Some(t) = leading {
            ctx.leading_header(&mut hdr[..head], t, m);
            ok = open_file(&mut fd) && write_all(fd, &hdr[..head]);
        }
        let Some(d) = kept else {
            return;
        };
        ctx.packet_header(&mut hdr[..head], m, d);
        // SAFETY: `events .. + len` is the pinned packet's content in the
        // ring (`walk_for_crash`), valid and unchanging while we read it.
        let body = unsafe { std::slice::from_raw_parts(events, len) };
        ok = ok && open_file(&mut fd) && write_all(fd, &hdr[..head]) && write_all(fd, body);
    });
    if fd >= 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
    }
    let d = losses.last().unwrap_or_default();
    if walked && ok && fd >= 0 && d.total() > 0 {
        // The file's name as opened (ASCII: sanitized above).
        let name = std::str::from_utf8(file.bytes()).unwrap_or("thread");
        let size = save::losses_packet_size(name);
        let mut packet = [0u8; 512];
        if size <= packet.len() {
            *losses_ts = (*losses_ts).max(losses.ts());
            save::losses_packet(&mut packet[..size], &p.uuid, *losses_ts, name, d);
            if *losses_fd < 0 {
                let mut path = Buf::<16>::new();
                path.put(tape_ctf_model::LOSSES_STREAM.as_bytes());
                // SAFETY: `dir` is open, the name NUL-terminated.
                *losses_fd = unsafe {
                    libc::openat(
                        dir,
                        path.c(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                        0o644,
                    )
                };
            }
            if *losses_fd >= 0 {
                let _ = write_all(*losses_fd, &packet[..size]);
            }
        }
    }
    walked.then_some(ok && fd >= 0)
}

/// What the dump's metadata says of the crash, and of the rings it lacks.
struct Happened<'a> {
    sig: c_int,
    code: c_int,
    addr: u64,
    tid: i32,
    what: &'a str,
    /// Events in rings whose copy another copier held (not in the dump).
    skipped: u64,
}

fn write_metadata(dir: c_int, p: &Prepared, happened: &Happened<'_>) {
    // SAFETY: `dir` is open; the name is a literal.
    let fd = unsafe {
        libc::openat(
            dir,
            c"metadata".as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return;
    }
    let (freq, offset_s, offset) = crate::clock::crash_clock();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let mut date = Buf::<32>::new();
    utc_date(&mut date, ts.tv_sec);
    let mode: &[u8] = match crate::knobs::mode() {
        crate::knobs::Mode::Overwrite => b"overwrite",
        crate::knobs::Mode::Discard => b"discard",
    };
    let mut ok = true;
    for (i, piece) in p.pieces.iter().enumerate() {
        ok = ok && write_all(fd, piece);
        let Some(hole) = p.holes.get(i) else { continue };
        let h = happened;
        let mut v = Buf::<64>::new();
        match hole {
            Hole::Freq => v.num(freq.into()),
            Hole::OffsetS => v.num(offset_s.into()),
            Hole::Offset => v.num(offset.into()),
            Hole::DroppedNoRing => v.num(ring::DROPPED_NO_RING.load(Ordering::Relaxed).into()),
            Hole::DroppedNoMemory => v.num(ring::DROPPED_NO_MEMORY.load(Ordering::Relaxed).into()),
            Hole::LostExited => v.num(ring::EVENTS_LOST_EXITED.load(Ordering::Relaxed).into()),
            Hole::SkippedBusy => v.num(h.skipped.into()),
            Hole::NotWritten => v.num(0),
            Hole::Date => v.put(date.bytes()).put(b"Z"),
            Hole::Mode => v.put(mode),
            Hole::Signal => v.num(h.sig.into()),
            Hole::Code => v.num(h.code.into()),
            Hole::Addr => v.num(h.addr.into()),
            Hole::Tid => v.num(h.tid.into()),
            Hole::Reason => v.put(h.what.as_bytes()),
            Hole::Source | Hole::LastEvent => &mut v,
        };
        ok = ok && write_all(fd, v.bytes());
    }
    let _ = ok;
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
}
