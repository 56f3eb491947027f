//! What tape asks of the operating system, for every floor above: the
//! process's uid, whether a process exists, its state and start time in
//! `/proc`, the boot's id, and private directories (a directory of this
//! user's that no one else may enter: the control sockets', the shared
//! rings'), and the running executable (its path, load bias and build id,
//! for symbolising the stack traces a trigger records). Plain functions over `libc` and `std::fs`, importing nothing of
//! tape but its error type.

use std::ffi::{c_int, c_void};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;
use std::sync::OnceLock;

use crate::error::{Error, ErrorKind};

/// The process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether process `pid` exists (`kill(pid, 0)`: only `ESRCH` says no; a
/// process of another user exists).
pub fn process_exists(pid: u32) -> bool {
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
pub fn boot_id() -> [u8; 40] {
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

/// The running executable, as a reader needs it to symbolise addresses:
/// its path, its load bias (0 unless position-independent) and its GNU
/// build id in hex (empty if it has none).
#[derive(Clone, Debug)]
pub struct Executable {
    /// `/proc/self/exe`'s target.
    pub path: String,
    /// What was added to the ELF's addresses when it was loaded.
    pub base: u64,
    /// The `NT_GNU_BUILD_ID` note, in hex.
    pub build_id: String,
}

/// The running executable (computed once).
pub fn executable() -> &'static Executable {
    static EXE: OnceLock<Executable> = OnceLock::new();
    EXE.get_or_init(|| {
        let path = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut found = (0u64, String::new());
        // SAFETY: `first_object` matches dl_iterate_phdr's callback type and
        // only writes through `data`, which points to `found`, alive for the
        // call.
        unsafe {
            libc::dl_iterate_phdr(Some(first_object), (&raw mut found).cast::<c_void>());
        }
        Executable {
            path,
            base: found.0,
            build_id: found.1,
        }
    })
}

/// dl_iterate_phdr's callback: the first object is the executable; takes
/// its load bias and build id, and stops.
extern "C" fn first_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info; `data` is the
    // `(u64, String)` that `executable` passed.
    let (info, out) = unsafe { (&*info, &mut *data.cast::<(u64, String)>()) };
    out.0 = info.dlpi_addr;
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_NOTE {
            continue;
        }
        let start = (info.dlpi_addr + ph.p_vaddr) as *const u8;
        // SAFETY: a PT_NOTE segment is loaded (it lies in a PT_LOAD), so its
        // p_memsz bytes at its address are mapped and readable.
        let notes = unsafe { std::slice::from_raw_parts(start, ph.p_memsz as usize) };
        if let Some(id) = build_id(notes) {
            out.1 = id;
            break;
        }
    }
    1
}

/// The GNU build id among ELF notes, in hex.
fn build_id(mut notes: &[u8]) -> Option<String> {
    let word = |b: &[u8], at: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let pad = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name = notes.get(12..12 + namesz)?;
        let desc_at = 12 + pad(namesz);
        let desc = notes.get(desc_at..desc_at + descsz)?;
        if kind == 3 && name == b"GNU\0" {
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        notes = notes.get(desc_at + pad(descsz)..)?;
    }
    None
}

/// `s` up to its first NUL, cut to at most `max` bytes on a character
/// boundary.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    let s = s.split('\0').next().unwrap_or("");
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `name` as a file name: its first 32 characters, each not in
/// `[A-Za-z0-9_-]` made `_` (`thread` when empty).
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .take(32)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "thread".into()
    } else {
        s
    }
}

/// The program's name (file name of argv[0]).
pub(crate) fn program_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .map(|n| sanitize(&n))
        .unwrap_or_else(|| "program".into())
}

/// The machine's host name (`unknown` if the system does not say).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for buf.len() bytes; gethostname NUL-terminates
    // within that length when it succeeds (we also cap at the first NUL).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Local date and time as `YYYY-MM-DD-HH-MM-SS` (DPDK's directory naming).
pub fn local_date() -> String {
    // SAFETY: time(NULL) has no preconditions.
    local_date_of(unsafe { libc::time(std::ptr::null_mut()) })
}

/// [`local_date`] of `now` (seconds since the epoch).
pub(crate) fn local_date_of(now: libc::time_t) -> String {
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid; localtime_r is the thread-safe variant.
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        return format!("{now}");
    }
    format!(
        "{:04}-{:02}-{:02}-{:02}-{:02}-{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// A random (version 4) UUID from the standard library's OS-seeded hasher.
pub fn new_uuid() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i as u64);
        h.write_u128(crate::clock::realtime_ns() as u128);
        h.write_u32(std::process::id());
        chunk.copy_from_slice(&h.finish().to_ne_bytes());
    }
    out[6] = (out[6] & 0x0f) | 0x40;
    out[8] = (out[8] & 0x3f) | 0x80;
    out
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
