//! What tape asks of the operating system, for every floor above: the
//! process's uid, whether a process exists, its state and start time in
//! `/proc`, the boot's id, and private directories (a directory of this
//! user's that no one else may enter: the control sockets', the shared
//! rings'). Plain functions over `libc` and `std::fs`, importing nothing of
//! tape but its error type.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

use crate::error::{Error, ErrorKind};

/// The process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether process `pid` exists (`kill(pid, 0)`: only `ESRCH` says no; a
/// process of another user exists).
pub(crate) fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 sends nothing; it only checks that `pid` exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// This boot's id, NUL-padded (zeros if it cannot be read).
pub(crate) fn boot_id() -> [u8; 40] {
    let mut id = [0u8; 40];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let s = s.trim().as_bytes();
        let n = s.len().min(40);
        id[..n].copy_from_slice(&s[..n]);
    }
    id
}

/// The fields of a `/proc/.../stat` file from field 3 on (the command, in
/// parentheses, may hold spaces: fields are counted after its closing
/// one), or `None` if it cannot be read.
pub(crate) fn stat_fields(path: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Field `n` (numbered as in proc(5), 3 or more) of `fields`, from
/// [`stat_fields`].
pub(crate) fn stat_field<T: std::str::FromStr>(fields: &[String], n: usize) -> Option<T> {
    fields.get(n.checked_sub(3)?)?.parse().ok()
}

/// Whether process `pid` is dead and not reaped yet (state `Z` or `X` in
/// `/proc/PID/stat`).
pub(crate) fn zombie(pid: u32) -> bool {
    stat_fields(&format!("/proc/{pid}/stat"))
        .and_then(|f| stat_field::<String>(&f, 3))
        .is_some_and(|st| st == "Z" || st == "X")
}

/// The start time of process `pid` in clock ticks since boot
/// (`/proc/PID/stat` field 22), or 0 if it cannot be read.
pub(crate) fn start_time(pid: u32) -> u64 {
    stat_fields(&format!("/proc/{pid}/stat"))
        .and_then(|f| stat_field(&f, 22))
        .unwrap_or(0)
}

/// Creates `dir` (mode 0700) if needed and checks it is private to this
/// user: a directory, not a link, owned by the effective uid, no access for
/// group or others. `what` names it in the error ("control directory").
pub fn ensure_private_dir(dir: &Path, what: &str) -> Result<(), Error> {
    let fail = |why: String| {
        Error::new(
            ErrorKind::Control,
            format!("{what} {}: {why}", dir.display()),
        )
    };
    if let Err(e) = std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(false)
        .create(dir)
    {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(fail(format!("cannot be created: {e}")));
        }
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| fail(format!("cannot be read: {e}")))?;
    check_private(&m, euid()).map_err(fail)
}

/// The directory check on its metadata (separate, to be tested with any
/// owner and mode).
pub fn check_private(m: &std::fs::Metadata, uid: u32) -> Result<(), String> {
    if m.file_type().is_symlink() {
        return Err("is a symbolic link; it must be a directory of this user's".into());
    }
    if !m.is_dir() {
        return Err("is not a directory".into());
    }
    if m.uid() != uid {
        return Err(format!(
            "is owned by uid {}, not by this process's uid {uid}",
            m.uid()
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(format!(
            "has mode {:o}: group or others may enter it; it must be 700",
            m.mode() & 0o777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_directory_must_be_private() {
        let base = std::env::temp_dir().join(format!("tape-dir-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let private = base.join("private");
        ensure_private_dir(&private, "test directory").unwrap();
        let m = std::fs::symlink_metadata(&private).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        assert!(check_private(&m, euid()).is_ok());
        let e = check_private(&m, euid() + 1).unwrap_err();
        assert!(e.contains("owned by uid"), "{e}");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = ensure_private_dir(&private, "test directory").unwrap_err();
        assert!(e.message().contains("mode 755"), "{e}");
        let link = base.join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        let e = ensure_private_dir(&link, "test directory").unwrap_err();
        assert!(e.message().contains("symbolic link"), "{e}");
        let file = base.join("file");
        std::fs::write(&file, b"").unwrap();
        let e = ensure_private_dir(&file, "test directory").unwrap_err();
        assert!(e.message().contains("not a directory"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
