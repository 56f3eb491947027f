//! What the readers of running processes share (`tape pipe`, `tape
//! record -o`, `tape record --relayd`): the stop they obey (SIGINT,
//! SIGTERM) and the end they hold to ([`deadline`]: within a second of a
//! stop or of `--duration`, whatever a relay does), how long they wait for
//! a process that has just started, and the in-memory file a packet is
//! decoded from.

/// How long `tape pipe` and `tape record` wait for a process that runs
/// but has no shared rings yet (just started).
pub(crate) const STARTING: std::time::Duration = std::time::Duration::from_secs(3);

/// Set by SIGINT / SIGTERM during `tape record`: end the recording.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn stop_recording(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// SIGINT and SIGTERM end `tape record` and `tape pipe` at their next
/// turn ([`stopped`]). The handler is installed without `SA_RESTART`
/// (`signal()` would set it): a read or write blocked on a relay's socket
/// returns `EINTR`, and the relay client ([`deadline`]) ends it.
pub(crate) fn catch_stop() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid value; the handler only
        // stores to an atomic (async-signal-safe); `sa_mask` is set by
        // sigemptyset before use.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = stop_recording as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// How long a relay may take to answer once the run is ending (a stop
/// seen, or `--duration` over): a relay that does not answer within it
/// ends the run within a second; one that answers goes on sending what the
/// rings still hold and closing the streams, for [`ENDING_CAP`] at most.
pub(crate) const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(800);

/// The most an ending run may take, a relay answering all along.
pub(crate) const ENDING_CAP: std::time::Duration = std::time::Duration::from_secs(5);

/// When the run ends (`--duration`'s end; a stop sets it when first seen).
static END_AT: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// The run ends at `t` (`--duration`), or earlier (a stop).
pub(crate) fn end_at(t: std::time::Instant) {
    let mut e = END_AT.lock().unwrap_or_else(|e| e.into_inner());
    *e = Some(e.map_or(t, |was| was.min(t)));
}

/// The deadline of an exchange that may take `patience` (a relay's whole
/// reply, not each read): `patience` from now. Before the run's end, no
/// later than [`STOP_GRACE`] after it; once it is ending (a stop seen,
/// `--duration` over), [`STOP_GRACE`] from now and no later than
/// [`ENDING_CAP`] after the end. Called again between reads, so a stop
/// seen meanwhile shortens the exchange under way.
pub(crate) fn deadline(patience: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    if stopped() {
        static SEEN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        end_at(*SEEN.get_or_init(|| now));
    }
    let d = now + patience;
    let end = *END_AT.lock().unwrap_or_else(|e| e.into_inner());
    match end {
        None => d,
        Some(e) if now < e => d.min(e + STOP_GRACE),
        Some(e) => d.min(now + STOP_GRACE).min(e + ENDING_CAP),
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
