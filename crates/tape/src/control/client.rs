//! The client side of the control socket: what `tape ctl` and `tape ps`
//! call. Every failure names the process and says what to do: a process
//! that does not exist, one of another user, one with no socket (not a tape
//! program, `tape::init()` not called, `TAPE_CONTROL=off`), a stale socket
//! (removed), a refusal.
//!
//! **Whom the client talks to.** The server checks its peer; the client
//! checks its server just as much, since whoever answers is believed
//! (`tape ctl PID off` answered `tracing_on: 0` by someone else would leave
//! the program tracing). Before a command is sent:
//!
//! 1. the directory (`/tmp/tape-<uid>` is a name anyone can create first)
//!    must be a real directory of this user with no access for group or
//!    others ([`server::check_private`], the server's own check);
//! 2. the socket file must be a socket owned by this user;
//! 3. the connected server's credentials (`SO_PEERCRED`, taken by the
//!    kernel when the server called `listen`) must carry this user's uid
//!    and the pid asked for.
//!
//! Any failure refuses the exchange with a message naming the path and
//! the owner found. The reply's text reaches the terminal with its control
//! characters (escape sequences) shown as `\x1b`, never interpreted.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::server::{self, kind_of, socket_dir, socket_of};
use crate::error::{Error, ErrorKind};

/// How long a command may take to answer (a save of large rings included).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

fn control_error(message: String) -> Error {
    Error::new(ErrorKind::Control, message)
}

/// The name of process `pid` (`/proc/PID/comm`), if readable.
fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// Why there is no usable socket for `pid` at `path`.
fn diagnose(pid: u32, path: &Path, connect: Option<std::io::Error>) -> Error {
    let name = comm(pid).map(|c| format!(" ({c})")).unwrap_or_default();
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return control_error(format!("{pid} is not a process id"));
    };
    // SAFETY: signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(p, 0) } == 0;
    let errno = std::io::Error::last_os_error().raw_os_error();
    if !alive && errno == Some(libc::ESRCH) {
        let stale = path.exists() && std::fs::remove_file(path).is_ok();
        return control_error(format!(
            "no process {pid} exists{}",
            if stale {
                format!(" (its stale control socket {} was removed)", path.display())
            } else {
                String::new()
            }
        ));
    }
    // Root may signal anyone, so kill(pid, 0) does not tell another
    // user's process: its owner does.
    let owner = std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid());
    if let Some(uid) = owner.filter(|&u| u != crate::sys::euid() && !path.exists()) {
        return control_error(format!(
            "process {pid}{name} belongs to uid {uid}: only that user can control it (its socket \
             would be in that user's directory, not in {})",
            socket_dir().display()
        ));
    }
    if !alive && errno == Some(libc::EPERM) && !path.exists() {
        return control_error(format!(
            "process {pid}{name} belongs to another user: only its own user can control it \
             (its socket would be in that user's directory, not in {})",
            socket_dir().display()
        ));
    }
    match connect {
        Some(e) if e.kind() == std::io::ErrorKind::PermissionDenied => control_error(format!(
            "process {pid}{name}: permission denied on {}: the socket is another user's",
            path.display()
        )),
        Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => control_error(format!(
            "process {pid}{name} does not answer on {} (its control thread is gone: was it \
             forked from a tape program?)",
            path.display()
        )),
        Some(e) => control_error(format!(
            "process {pid}{name}: cannot connect to {}: {e}",
            path.display()
        )),
        None => control_error(format!(
            "process {pid}{name} has no tape control socket ({} does not exist): it is not a \
             tape program, it has not called tape::init(), or it runs with TAPE_CONTROL=off",
            path.display()
        )),
    }
}

/// The control directory, if it exists, checked as the server checks it
/// (module docs): a directory of this user that no one else may enter.
pub fn check_dir() -> Result<(), Error> {
    let dir = socket_dir();
    match std::fs::symlink_metadata(&dir) {
        Err(_) => Ok(()),
        Ok(m) => crate::sys::check_private(&m, crate::sys::euid()).map_err(|why| {
            control_error(format!(
                "control directory {}: {why}; not talking through it (another user may have \
                 made it to answer in the programs' place: remove it, or set XDG_RUNTIME_DIR \
                 to a directory of yours)",
                dir.display()
            ))
        }),
    }
}

/// Sends one command to process `pid` and returns its text; an error
/// reply comes back as the [`Error`] the process gave.
pub fn request(pid: u32, words: &[String]) -> Result<String, Error> {
    if let Some(w) = words.iter().find(|w| w.contains('\n') || w.is_empty()) {
        return Err(Error::new(
            ErrorKind::Command,
            format!("a command word may not be empty or hold a newline: {w:?}"),
        ));
    }
    let path = socket_of(pid);
    let own = crate::sys::euid();
    check_dir()?;
    let Ok(m) = std::fs::symlink_metadata(&path) else {
        return Err(diagnose(pid, &path, None));
    };
    if !m.file_type().is_socket() || m.uid() != own {
        return Err(control_error(format!(
            "{} is {} owned by uid {}, not a socket of this user (uid {own}): refusing it",
            path.display(),
            if m.file_type().is_socket() {
                "a socket"
            } else {
                "not a socket"
            },
            m.uid()
        )));
    }
    let mut stream = UnixStream::connect(&path).map_err(|e| diagnose(pid, &path, Some(e)))?;
    let (peer_pid, peer_uid) = server::peer(&stream).map_err(|e| {
        control_error(format!(
            "{}: cannot read the server's credentials: {e}",
            path.display()
        ))
    })?;
    if peer_uid != own || u32::try_from(peer_pid).ok() != Some(pid) {
        return Err(control_error(format!(
            "{} is served by process {peer_pid} of uid {peer_uid}, not by process {pid} of uid \
             {own}: refusing to talk to it",
            path.display()
        )));
    }
    let _ = stream.set_read_timeout(Some(REPLY_TIMEOUT));
    let _ = stream.set_write_timeout(Some(server::REQUEST_TIMEOUT));
    let mut req = words.join("\n");
    req.push_str("\n\n");
    let io = |e: std::io::Error| control_error(format!("process {pid}: {e}"));
    stream.write_all(req.as_bytes()).map_err(io)?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(io)?;
    let reply = printable(&String::from_utf8_lossy(&reply));
    if reply.is_empty() {
        return Err(control_error(format!(
            "process {pid} closed the connection without a reply (it exited, or its control \
             thread ended, during the command)"
        )));
    }
    let (status, text) = reply.split_once('\n').unwrap_or((&reply, ""));
    if status == "ok" {
        return Ok(text.to_owned());
    }
    if let Some(kind) = status.strip_prefix("error ") {
        return Err(Error::new(
            kind_of(kind),
            format!("process {pid}: {}", text.trim_end()),
        ));
    }
    Err(control_error(format!(
        "process {pid} sent a reply that is not tape's: {:?}",
        reply.chars().take(80).collect::<String>()
    )))
}

/// `text` with every control character but newline and tab shown as an
/// escape (`\x1b`; `\x9b` for C1 ones), so that a reply cannot drive the terminal.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A process that answers `tape ps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Program name.
    pub name: String,
    /// Whether tracing is on.
    pub tracing_on: bool,
    /// Tracepoints enabled.
    pub enabled: usize,
    /// Rings (threads recording).
    pub rings: usize,
    /// Bytes of all its rings.
    pub bytes: usize,
}

/// The controllable processes of this user, by pid; sockets of processes
/// that no longer exist are removed on the way.
pub fn processes() -> Vec<Process> {
    let dir = socket_dir();
    server::remove_stale(&dir, false);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".sock")?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter()
        .filter_map(|pid| {
            let line = request(pid, &["ps".to_owned()]).ok()?;
            let f: Vec<&str> = line.trim_end().split('\t').collect();
            match f.as_slice() {
                // A row for the pid asked, or none.
                [p, name, on, enabled, rings, bytes] if p.parse() == Ok(pid) => Some(Process {
                    pid,
                    name: (*name).to_owned(),
                    tracing_on: *on == "1",
                    enabled: enabled.parse().ok()?,
                    rings: rings.parse().ok()?,
                    bytes: bytes.parse().ok()?,
                }),
                _ => None,
            }
        })
        .collect()
}
