//! What the readers of running processes share (`tape pipe`, `tape
//! record -o`, `tape record --relayd`): the stop they obey (SIGINT,
//! SIGTERM), how long they wait for a process that has just started, and
//! the in-memory file a packet is decoded from.

/// How long `tape pipe` and `tape record` wait for a process that runs
/// but has no shared rings yet (just started).
pub(crate) const STARTING: std::time::Duration = std::time::Duration::from_secs(3);

/// Set by SIGINT / SIGTERM during `tape record`: end the recording.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn stop_recording(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// SIGINT and SIGTERM end `tape record` and `tape pipe` at their next
/// turn ([`stopped`]).
pub(crate) fn catch_stop() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, stop_recording as *const () as libc::sighandler_t) };
    }
}

/// Whether SIGINT or SIGTERM came.
pub(crate) fn stopped() -> bool {
    STOP.load(std::sync::atomic::Ordering::Relaxed)
}

/// The file each packet is decoded from: anonymous memory (`memfd_create`),
/// or where that is refused (an old kernel, a seccomp policy) a file of the
/// temporary directory unlinked at once. Either way nothing is left behind.
pub(crate) fn packet_file() -> Result<std::fs::File, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated string; memfd_create has no
    // other memory preconditions.
    let fd = unsafe { libc::memfd_create(c"tape-pipe-packet".as_ptr(), libc::MFD_CLOEXEC) };
    if fd >= 0 {
        // SAFETY: `fd` was just opened here and is owned by nothing else.
        return Ok(unsafe { std::fs::File::from_raw_fd(fd) });
    }
    let path = std::env::temp_dir().join(format!("tape-pipe-{}", std::process::id()));
    // One left by an earlier process with this pid.
    let _ = std::fs::remove_file(&path);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// Makes `file` hold exactly `packet`.
pub(crate) fn put_packet(file: &std::fs::File, packet: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(packet, 0)?;
    file.set_len(packet.len() as u64)
}
