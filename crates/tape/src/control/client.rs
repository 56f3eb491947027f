//! The client side of the control socket: what `tape ctl` and `tape ps`
//! call. Every failure names the process and says what to do: a process
//! that does not exist, one of another user, one with no socket (not a tape
//! program, `tape::init()` not called, `TAPE_CONTROL=off`), a stale socket
//! (removed), a refusal.

use std::io::{Read, Write};
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
    if !path.exists() {
        return Err(diagnose(pid, &path, None));
    }
    let mut stream = UnixStream::connect(&path).map_err(|e| diagnose(pid, &path, Some(e)))?;
    let _ = stream.set_read_timeout(Some(REPLY_TIMEOUT));
    let _ = stream.set_write_timeout(Some(server::REQUEST_TIMEOUT));
    let mut req = words.join("\n");
    req.push_str("\n\n");
    let io = |e: std::io::Error| control_error(format!("process {pid}: {e}"));
    stream.write_all(req.as_bytes()).map_err(io)?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(io)?;
    let reply = String::from_utf8_lossy(&reply);
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
                [p, name, on, enabled, rings, bytes] => Some(Process {
                    pid: p.parse().ok()?,
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
