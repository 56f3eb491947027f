//! The control socket: a Unix stream socket per process, accepted by one
//! thread (`tape-ctl`) and each connection served on a thread of its own
//! (`tape-ctl-conn`, bounded below), reachable by the process's own user
//! only.
//!
//! ```text
//!   $XDG_RUNTIME_DIR/tape/        (else /tmp/tape-<uid>/)   mode 0700, owned by the user
//!       <pid>.sock                one per controlled process, mode 0600
//! ```
//!
//! **Who may connect.** Two checks, both required:
//!
//! 1. the directory: created with mode 0700; if it exists, it must be a
//!    real directory (not a symbolic link) owned by the process's effective
//!    uid with no permission for group or others, else the server does not
//!    start and says why on stderr (another user could otherwise have
//!    planted it);
//! 2. the peer: every connection's credentials (`SO_PEERCRED`, taken by
//!    the kernel at `connect`) must carry the process's effective uid; any
//!    other uid (root included) is refused with a message, counted
//!    ([`refused`]) and reported once per uid on stderr.
//!
//! **Protocol** (one command per connection): the client sends the
//! command's words, one per line, then an empty line; the server answers
//! `ok` or `error KIND` on the first line, then the text, and closes. A
//! request cut by the end of its stream before its empty line is refused,
//! not executed.
//!
//! **Bounds.** A request must arrive whole within 5 s of the connection
//! (one deadline for the request, not per read: a client sending a byte
//! every few seconds is cut off at 5 s) and hold at most 64 KiB. Each
//! connection is served on a thread of its own (`tape-ctl-conn`, at most
//! [`MAX_CONNECTIONS`] at once; one more is answered "busy" at once), so
//! a stalled or slow client delays no other; the commands themselves run
//! one at a time, a command waiting at most [`EXECUTE_WAIT`] for the one
//! before it. A reply is given 5 s to be taken.
//!
//! **Life.** [`start`] (called by [`crate::init`] unless
//! `TAPE_CONTROL=off`) removes the sockets of processes that no longer
//! exist, binds `<pid>.sock`, and serves on its thread; `exit()` removes the
//! socket (an `atexit` handler); a process killed by a signal leaves it,
//! and the next start of any tape process of the user removes it.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};
use crate::sys::ensure_private_dir;
pub use crate::sys::{check_private, euid};

/// Largest request accepted.
pub const MAX_REQUEST: usize = 64 << 10;
/// How long a request may take to arrive (from the connection), and a
/// reply to be taken.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; one more is answered "busy".
pub const MAX_CONNECTIONS: usize = 16;
/// How long a command waits for the command before it to end.
pub const EXECUTE_WAIT: Duration = Duration::from_secs(60);

/// Connections being served (their threads).
static SERVING: AtomicUsize = AtomicUsize::new(0);
/// Commands run one at a time.
static EXECUTING: Mutex<()> = Mutex::new(());

static SOCKET: OnceLock<PathBuf> = OnceLock::new();
/// The socket path as a C string, for the `atexit` handler.
static SOCKET_C: OnceLock<CString> = OnceLock::new();
static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Uids already reported as refused (each once).
static REPORTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The socket this process serves, once started.
pub fn socket_path() -> Option<PathBuf> {
    if OWNER.load(Ordering::Relaxed) != u64::from(std::process::id()) {
        return None; // a forked child: the socket is its parent's
    }
    SOCKET.get().cloned()
}

/// Connections refused because their peer was another user.
pub fn refused() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// Where the sockets of this user's processes are:
/// `$XDG_RUNTIME_DIR/tape` when that variable is an absolute path, else
/// `/tmp/tape-<uid>`.
pub fn socket_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if Path::new(&d).is_absolute() => Path::new(&d).join("tape"),
        _ => PathBuf::from(format!("/tmp/tape-{}", euid())),
    }
}

/// The socket of process `pid`.
pub fn socket_of(pid: u32) -> PathBuf {
    socket_dir().join(format!("{pid}.sock"))
}

/// The peer check: `Ok` if the connecting uid is the process's own.
pub fn check_peer(peer_uid: u32, own_uid: u32) -> Result<(), String> {
    if peer_uid == own_uid {
        Ok(())
    } else {
        Err(format!(
            "refused: uid {peer_uid} may not control this process (only its user, uid {own_uid})"
        ))
    }
}

/// Credentials of the peer of a connected Unix socket: (pid, uid).
pub(crate) fn peer(stream: &UnixStream) -> std::io::Result<(i32, u32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a valid ucred and `len` its size, as SO_PEERCRED
    // requires; the fd is open for the life of `stream`.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cred.pid, cred.uid))
}

/// Removes the sockets of processes that no longer exist (and, with
/// `own`, the one of this pid, left by an earlier process of the same pid,
/// before binding it); returns how many.
pub fn remove_stale(dir: &Path, own_too: bool) -> usize {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".sock"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let stale = if pid == own {
            own_too
        } else {
            !crate::sys::process_exists(pid)
        };
        if stale && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// The pid that bound the socket: a forked child, which inherits the
/// statics but serves nothing, must not remove its parent's socket.
static OWNER: AtomicU64 = AtomicU64::new(0);

extern "C" fn remove_socket_at_exit() {
    if OWNER.load(Ordering::Relaxed) != u64::from(std::process::id()) {
        return;
    }
    if let Some(c) = SOCKET_C.get() {
        // SAFETY: a valid NUL-terminated path; unlink has no other
        // precondition (and is async-signal-safe).
        unsafe { libc::unlink(c.as_ptr()) };
    }
}

/// What runs a request's words: [`crate::control::execute`], handed over
/// by the composition root (`config`), so that the socket's code does not
/// import the commands it serves.
pub type Execute = fn(&[String]) -> Result<String, Error>;

/// The commands the server runs, set by the first [`start`].
static EXECUTE: OnceLock<Execute> = OnceLock::new();

/// Starts the control thread (once per process), serving each request with
/// `execute`. The program goes on if it cannot: the error says why (an
/// unsafe directory, a bind failure), and [`crate::init`] prints it.
pub fn start(execute: Execute) -> Result<PathBuf, Error> {
    static STARTED: Mutex<Option<Result<PathBuf, Error>>> = Mutex::new(None);
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = started.as_ref() {
        return r.clone();
    }
    let _ = EXECUTE.set(execute);
    let r = bind_and_serve();
    *started = Some(r.clone());
    r
}

fn bind_and_serve() -> Result<PathBuf, Error> {
    let dir = socket_dir();
    ensure_private_dir(&dir, "control directory")?;
    remove_stale(&dir, true);
    let path = socket_of(std::process::id());
    let listener = UnixListener::bind(&path).map_err(|e| {
        Error::new(
            ErrorKind::Control,
            format!("control socket {}: cannot bind: {e}", path.display()),
        )
    })?;
    // The directory already keeps others out; the socket says so too.
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let _ = SOCKET.set(path.clone());
    OWNER.store(u64::from(std::process::id()), Ordering::Relaxed);
    if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
        if SOCKET_C.set(c).is_ok() {
            // SAFETY: an extern "C" fn valid for the life of the process.
            unsafe { libc::atexit(remove_socket_at_exit) };
        }
    }
    std::thread::Builder::new()
        .name("tape-ctl".into())
        .spawn(move || serve(listener))
        .map_err(|e| {
            let _ = std::fs::remove_file(&path);
            Error::new(
                ErrorKind::Control,
                format!("control thread cannot start: {e}"),
            )
        })?;
    Ok(path)
}

fn serve(listener: UnixListener) {
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        // Relaxed: a count of threads, read and changed only as a bound.
        if SERVING.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            SERVING.fetch_sub(1, Ordering::Relaxed);
            refuse_busy(stream);
            continue;
        }
        let spawned = std::thread::Builder::new()
            .name("tape-ctl-conn".into())
            .spawn(move || {
                // A command that panics (it should not) must not take the
                // count with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    handle(stream, deadline)
                }));
                SERVING.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // No thread to be had: nothing is answered, the client sees the
            // connection close.
            SERVING.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Answers a connection past [`MAX_CONNECTIONS`] without waiting for it.
fn refuse_busy(stream: UnixStream) {
    let _ = stream.set_nonblocking(true);
    let _ = (&stream).write_all(
        format!(
            "error Control\nbusy: {MAX_CONNECTIONS} control connections are being served; try \
             again\n"
        )
        .as_bytes(),
    );
}

fn handle(mut stream: UnixStream, deadline: Instant) {
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let own = euid();
    let reply = match peer(&stream) {
        Err(e) => Err((
            "Control",
            format!("cannot read the peer's credentials: {e}"),
        )),
        Ok((pid, uid)) => match check_peer(uid, own) {
            Err(why) => {
                REFUSED.fetch_add(1, Ordering::Relaxed);
                let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
                if !reported.contains(&uid) {
                    reported.push(uid);
                    eprintln!(
                        "tape: refused a control connection from uid {uid} (pid {pid}): only \
                         uid {own} may control this process"
                    );
                }
                Err(("Control", why))
            }
            Ok(()) => match read_request(&mut stream, deadline) {
                Err(why) => Err(("Command", why)),
                Ok(words) => execute_in_turn(&words),
            },
        },
    };
    let text = match reply {
        Ok(t) => format!("ok\n{t}"),
        Err((kind, m)) => format!("error {kind}\n{m}\n"),
    };
    let _ = stream.write_all(text.as_bytes());
    // Close gently: a request left unread (a refused peer's) would make
    // the close a reset, and the client would lose the reply.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut rest = [0u8; 4096];
    let mut drained = 0;
    while drained < MAX_REQUEST {
        match stream.read(&mut rest) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Runs a command when the one before it is done, waiting at most
/// [`EXECUTE_WAIT`].
fn execute_in_turn(words: &[String]) -> Result<String, (&'static str, String)> {
    let until = Instant::now() + EXECUTE_WAIT;
    let _turn = loop {
        match EXECUTING.try_lock() {
            Ok(g) => break g,
            Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err((
                    "Control",
                    format!(
                        "busy: the command before this one has run for more than {} s",
                        EXECUTE_WAIT.as_secs()
                    ),
                ))
            }
        }
    };
    let Some(execute) = EXECUTE.get() else {
        return Err(("Control", "no commands are served".to_owned()));
    };
    execute(words).map_err(|e| (kind_name(e.kind()), e.message().to_owned()))
}

/// Reads the words of one request (one a line, ended by an empty line),
/// whole by `deadline`.
fn read_request(stream: &mut UnixStream, deadline: Instant) -> Result<Vec<String>, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if buf.ends_with(b"\n\n") || buf == b"\n" {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the request did not arrive whole within {} s ({} bytes came)",
                REQUEST_TIMEOUT.as_secs(),
                buf.len()
            ));
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(format!(
                    "the request ended after {} bytes without its empty line: not executed",
                    buf.len()
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue; // the deadline above says how long is left
            }
            Err(e) => return Err(format!("the request did not arrive: {e}")),
        }
        if buf.len() > MAX_REQUEST {
            return Err(format!("the request is larger than {MAX_REQUEST} bytes"));
        }
    }
    let text = String::from_utf8(buf).map_err(|e| {
        format!(
            "the request is not UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(text
        .split('\n')
        .take_while(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// The name an error kind travels under.
pub(crate) fn kind_name(k: ErrorKind) -> &'static str {
    match k {
        ErrorKind::NotFound => "NotFound",
        ErrorKind::BadPattern => "BadPattern",
        ErrorKind::Duplicate => "Duplicate",
        ErrorKind::Config => "Config",
        ErrorKind::Io => "Io",
        ErrorKind::Decode => "Decode",
        ErrorKind::Command => "Command",
        ErrorKind::BadFilter => "BadFilter",
        ErrorKind::BadTrigger => "BadTrigger",
        ErrorKind::Control => "Control",
        ErrorKind::Metadata => "Metadata",
    }
}

/// The kind named `s` (a reply's); `Control` when unknown.
pub(crate) fn kind_of(s: &str) -> ErrorKind {
    [
        ErrorKind::NotFound,
        ErrorKind::BadPattern,
        ErrorKind::Duplicate,
        ErrorKind::Config,
        ErrorKind::Io,
        ErrorKind::Decode,
        ErrorKind::Command,
        ErrorKind::BadFilter,
        ErrorKind::BadTrigger,
        ErrorKind::Metadata,
    ]
    .into_iter()
    .find(|k| kind_name(*k) == s)
    .unwrap_or(ErrorKind::Control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_processs_own_uid_passes() {
        assert!(check_peer(1000, 1000).is_ok());
        let e = check_peer(0, 1000).unwrap_err();
        assert!(e.contains("uid 0") && e.contains("uid 1000"), "{e}");
        assert!(check_peer(1001, 1000).is_err());
    }

    #[test]
    fn kinds_travel_by_name() {
        for k in [
            ErrorKind::NotFound,
            ErrorKind::BadPattern,
            ErrorKind::Config,
            ErrorKind::Command,
            ErrorKind::Control,
            ErrorKind::Metadata,
        ] {
            assert_eq!(kind_of(kind_name(k)), k);
        }
    }
}
