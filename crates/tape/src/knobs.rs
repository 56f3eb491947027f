//! The settings every floor reads: the rings' mode and geometry, the trace
//! directory, whether rings are shared, whether `init` has run.
//!
//! They are set by [`crate::config`] (the composition root: the
//! environment, the [`crate::Config`] builder, `tape ctl`) and read by the
//! rings, the saves and the control plane. Each is an independent setting
//! in an atomic read relaxed on a cold path (the mode at a ring's packet
//! switch, the sizes at ring creation): no ordering with other memory is
//! needed. Kept apart from `config` so that the floors below it can read a
//! knob without importing the code that starts every feature.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, ErrorKind};

/// The settings read where they are used, not only by `init` (a process
/// that never calls it makes rings and saves; the consumer, `tape ps` or
/// `tape record`, finds the rings): each a row of `config::SETTINGS`
/// (checked there), read by [`setting_os`] or [`setting_text`] and taken
/// by the parser its row uses, so a bad value is the same error wherever
/// it is read.
pub(crate) const READ_WHERE_USED: &[&str] = &[
    "TAPE_TRACE",
    "TAPE_TRACE_DIR",
    "TAPE_SHM_DIR",
    "TAPE_SHM_MAX",
    "TAPE_SHM_KEEP_SIZE",
    "TAPE_SHM_KEEP_AGE",
];

/// Setting `var` (one of [`READ_WHERE_USED`]) as the environment holds it.
pub(crate) fn setting_os(var: &'static str) -> Option<std::ffi::OsString> {
    debug_assert!(READ_WHERE_USED.contains(&var), "{var} is read where used");
    std::env::var_os(var)
}

/// Setting `var` (one of [`READ_WHERE_USED`]) taken by `parse`, its row's
/// parser, if it is set: the errors `init` gives (not UTF-8, a bad value).
pub(crate) fn setting<T>(
    var: &'static str,
    parse: impl FnOnce(&str, &str) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    setting_os(var)
        .map(|v| parse(var, &utf8(var, v)?))
        .transpose()
}

/// `v`, the value of `var`, as text; an error naming the variable and the
/// first byte that is not UTF-8.
pub(crate) fn utf8(var: &str, v: std::ffi::OsString) -> Result<String, Error> {
    v.into_string().map_err(|v| {
        let bytes = v.as_encoded_bytes();
        let at = std::str::from_utf8(bytes)
            .err()
            .map_or(0, |e| e.valid_up_to());
        let shown = String::from_utf8_lossy(bytes);
        bad(var, &shown, at, "is not UTF-8", "UTF-8 text")
    })
}

/// The modes a ring takes, as `TAPE_TRACE_MODE` and `tape ctl PID mode`
/// accept them.
pub(crate) const MODE_ACCEPTS: &str = "`overwrite` or `discard`";

/// A mode (`TAPE_TRACE_MODE`'s value, or `tape ctl`'s `mode` command's,
/// `var` naming which in the error).
pub(crate) fn parse_mode(var: &str, v: &str) -> Result<Mode, Error> {
    match v.trim() {
        "overwrite" => Ok(Mode::Overwrite),
        "discard" => Ok(Mode::Discard),
        _ => Err(bad(var, v, 0, "is not a mode", MODE_ACCEPTS)),
    }
}

/// An absolute directory (`TAPE_SHM_DIR`'s value).
pub(crate) fn parse_absolute_dir(var: &str, v: &str) -> Result<PathBuf, Error> {
    if !v.starts_with('/') {
        return Err(bad(
            var,
            v,
            0,
            "is not an absolute path",
            "an absolute directory",
        ));
    }
    Ok(PathBuf::from(v))
}

/// The ages [`parse_age_of`] takes.
pub(crate) const AGE_ACCEPTS: &str = "seconds, or with `s`, `m`, `h`, `d` (`7d`)";

/// An age (`TAPE_SHM_KEEP_AGE`'s value), `var` naming it in the error.
pub(crate) fn parse_age_of(var: &str, v: &str) -> Result<std::time::Duration, Error> {
    parse_age(v).ok_or_else(|| bad(var, v, 0, "is not an age", AGE_ACCEPTS))
}

/// Parses an age: seconds, or with a unit `s`, `m`, `h`, `d` (`7d`).
pub fn parse_age(v: &str) -> Option<std::time::Duration> {
    let v = v.trim();
    let (num, unit) = match v.char_indices().last()? {
        (i, c @ ('d' | 'h' | 'm' | 's')) => (&v[..i], c),
        _ => (v, 's'),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        'd' => n.checked_mul(86_400)?,
        'h' => n.checked_mul(3600)?,
        'm' => n.checked_mul(60)?,
        _ => n,
    };
    Some(std::time::Duration::from_secs(secs))
}

/// The tracers `TAPE_TRACER` and `tape ctl tracer` choose among
/// (ftrace's `available_tracers`).
pub const TRACERS: [&str; 4] = ["nop", "function", "function_graph", "latency"];

/// A tracer's name (`TAPE_TRACER`, `tape ctl tracer`): its index in
/// [`TRACERS`], or what is wrong with it (the caller names the input and
/// where: one parser for the variable and the command).
pub(crate) fn parse_tracer(v: &str) -> Result<usize, &'static str> {
    let v = v.trim();
    TRACERS
        .iter()
        .position(|t| *t == v)
        .ok_or("is not a tracer")
}

/// The counts [`parse_keep`] takes.
pub(crate) const KEEP_ACCEPTS: &str = "a count, 1 or more";

/// Snapshots kept per latency tracker (`TAPE_LATENCY`'s `keep=N`,
/// `tape ctl latency keep N`), or what is wrong with it.
pub(crate) fn parse_keep(v: &str) -> Result<usize, &'static str> {
    v.trim()
        .parse()
        .ok()
        .filter(|&k: &usize| k > 0)
        .ok_or("not a count (1 or more)")
}

/// The durations [`parse_duration_ns`] takes.
pub(crate) const DURATION_ACCEPTS: &str = "a number with `ns`, `us`, `ms` or `s` (50us, 2ms); \
                                           a bare number is microseconds";

/// Parses a duration: a number with `ns`, `us`, `ms` or `s`; a bare number
/// is microseconds (ftrace's unit for `tracing_thresh`). The error says
/// what is wrong; the caller names the input.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "us" => 1e3,
        "ns" => 1.0,
        "ms" => 1e6,
        "s" => 1e9,
        u => return Err(format!("unknown unit `{u}` (ns, us, ms or s)")),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{t}` is not a duration (such as 50us, 2ms, 100)"))?;
    let ns = v * scale;
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("`{t}` is too long"));
    }
    Ok(ns.round() as u64)
}

/// Smallest slot: room for an event header and a few fields.
pub(crate) const MIN_PACKET_SIZE: usize = 256;

/// Bumped by every change of the ring geometry, so that a thread whose ring
/// could not be allocated tries again only when the size changed (not at
/// every event). Relaxed: an independent setting.
pub(crate) static GEOMETRY: AtomicU64 = AtomicU64::new(1);

/// What a ring does when it is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Flight recorder: the oldest packet is overwritten; the ring holds the
    /// newest events.
    Overwrite,
    /// New events are dropped (and counted); the ring keeps the oldest.
    Discard,
}

/// Default ring size per thread.
pub const DEFAULT_BUFFER_SIZE: usize = 1 << 20;

// Control-plane globals, read relaxed by the cold paths of the rings (mode
// at each packet switch, sizes at ring creation). Each is an independent
// setting: no ordering with other memory is needed.
static MODE: AtomicU8 = AtomicU8::new(0);
static BUFFER_SIZE: AtomicUsize = AtomicUsize::new(DEFAULT_BUFFER_SIZE);
static PACKET_SIZE: AtomicUsize = AtomicUsize::new(0);
static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Whether rings created from now on are made in shared files
/// ([`Config::shared_rings`], `TAPE_SHM`): [`SHARED_OFF`], [`SHARED_AUTO`]
/// (the default) or [`SHARED_ON`]. Read relaxed at ring creation.
static SHARED_RINGS: AtomicU8 = AtomicU8::new(SHARED_AUTO);
const SHARED_OFF: u8 = 0;
/// Shared where there is room; where there is not, private memory and no
/// notice (`tape ctl status` says why).
const SHARED_AUTO: u8 = 1;
/// Asked for (`TAPE_SHM=on`): a ring that cannot be shared says why on
/// stderr, once.
const SHARED_ON: u8 = 2;

/// Whether rings are made in shared files (see [`Config::shared_rings`]).
pub(crate) fn shared_rings() -> bool {
    SHARED_RINGS.load(Ordering::Relaxed) != SHARED_OFF
}

/// Whether shared rings were asked for explicitly (`TAPE_SHM=on`), so that
/// a ring made in private memory instead is said on stderr.
pub(crate) fn shared_rings_asked() -> bool {
    SHARED_RINGS.load(Ordering::Relaxed) == SHARED_ON
}

/// The current mode.
pub fn mode() -> Mode {
    if MODE.load(Ordering::Relaxed) == 1 {
        Mode::Discard
    } else {
        Mode::Overwrite
    }
}

/// Sets the mode the rings read at their next packet switch (the shared
/// rings' process file is written by [`crate::config::set_mode`]).
pub(crate) fn set_mode(mode: Mode) {
    MODE.store(u8::from(mode == Mode::Discard), Ordering::Relaxed);
}

/// Sets the ring size (and packet size, `None` for the default) of rings
/// created from now on.
pub fn set_buffer_size(buffer: usize, packet: Option<usize>) -> Result<(), Error> {
    let packet = check_geometry(buffer, packet, "buffer size")?;
    BUFFER_SIZE.store(buffer, Ordering::Relaxed);
    PACKET_SIZE.store(packet, Ordering::Relaxed);
    // A thread whose ring could not be allocated tries again at this size.
    GEOMETRY.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// (ring bytes, packet bytes) for a new ring.
pub(crate) fn ring_geometry() -> (usize, usize) {
    let b = BUFFER_SIZE.load(Ordering::Relaxed);
    let p = PACKET_SIZE.load(Ordering::Relaxed);
    (b, if p == 0 { default_packet(b) } else { p })
}

fn default_packet(buffer: usize) -> usize {
    (buffer / 16).clamp(4096, 1 << 20).min(buffer / 2)
}

pub(crate) fn check_geometry(
    buffer: usize,
    packet: Option<usize>,
    what: &str,
) -> Result<usize, Error> {
    let p = packet.unwrap_or_else(|| default_packet(buffer));
    if buffer < 2 * MIN_PACKET_SIZE
        || p < MIN_PACKET_SIZE
        || p > buffer / 2
        || p > u32::MAX as usize
    {
        return Err(Error::new(
            ErrorKind::Config,
            format!(
                "{what}: a ring of {buffer} bytes with packets of {p} bytes is not possible: \
                 packets must be at least {MIN_PACKET_SIZE} bytes and the ring must hold two"
            ),
        ));
    }
    if let Some(memory) = physical_memory().filter(|&m| buffer as u64 > m) {
        return Err(Error::new(
            ErrorKind::Config,
            format!(
                "{what}: a ring of {buffer} bytes per thread is more than this machine's \
                 memory ({memory} bytes)"
            ),
        ));
    }
    Ok(p)
}

/// The machine's physical memory in bytes, if the system says.
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let (pages, page) = (u64::try_from(pages).ok()?, u64::try_from(page).ok()?);
    pages.checked_mul(page).filter(|&m| m > 0)
}

/// The directory where [`crate::save()`] creates traces: the one
/// configured ([`crate::Config::dir`], `TAPE_TRACE_DIR` read by [`crate::init`]), else
/// `TAPE_TRACE_DIR` (read now: a program may save without `init`), else
/// `$HOME/tape-traces`.
pub fn trace_dir() -> PathBuf {
    if let Some(d) = DIR.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        return d;
    }
    // (An empty one is refused by `init`; here, as unset.)
    match setting_os("TAPE_TRACE_DIR") {
        Some(d) if !d.is_empty() => return PathBuf::from(d),
        _ => {}
    }
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Path::new(&h).join("tape-traces"),
        _ => PathBuf::from("tape-traces"),
    }
}

/// Sets the directory [`trace_dir`] returns (`None`: the environment's).
pub(crate) fn set_dir(dir: Option<PathBuf>) {
    *DIR.lock().unwrap_or_else(|e| e.into_inner()) = dir;
}

/// Sets whether rings created from now on are shared: `None` where there
/// is room (quietly), `Some(true)` asked for (a ring that cannot be shared
/// says why), `Some(false)` never.
pub(crate) fn set_shared_rings(shared: Option<bool>) {
    SHARED_RINGS.store(
        match shared {
            None => SHARED_AUTO,
            Some(true) => SHARED_ON,
            Some(false) => SHARED_OFF,
        },
        Ordering::Relaxed,
    );
}

/// Whether [`crate::Config::init`] (or [`crate::init`]) has run. Relaxed:
/// a flag read by the cold paths that report how the program was set up.
static INITIALISED: AtomicBool = AtomicBool::new(false);

pub(crate) fn initialised() -> bool {
    INITIALISED.load(Ordering::Relaxed)
}

pub(crate) fn set_initialised() {
    INITIALISED.store(true, Ordering::Relaxed);
}

pub(crate) fn bad(var: &str, value: &str, at: usize, what: &str, accepted: &str) -> Error {
    Error::new(
        ErrorKind::Config,
        format!("{var}={value:?}: at byte {at}: {what}; accepted: {accepted}"),
    )
}

/// The value of the switch `var`, `on` or `off` (`accepted` says what
/// each means, for the error).
pub(crate) fn on_off(var: &str, value: &str, accepted: &str) -> Result<bool, Error> {
    match value.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(bad(var, value, 0, "is not on or off", accepted)),
    }
}

/// Parses `1048576`, `512K`, `4M`, `1G` (also `KB`, `KiB`, lowercase);
/// an error names `var` (the variable or option it came from) and the
/// position.
pub fn parse_size(var: &str, v: &str) -> Result<usize, Error> {
    const ACCEPTED: &str = "a size in bytes such as 1048576, 512K, 4M or 1G";
    let s = v.trim();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad(var, v, 0, "expected a number", ACCEPTED));
    }
    let n: usize = s[..digits]
        .parse()
        .map_err(|_| bad(var, v, 0, "number too large", ACCEPTED))?;
    let mult: usize = match s[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad(var, v, digits, "unknown unit", ACCEPTED)),
    };
    n.checked_mul(mult)
        .ok_or_else(|| bad(var, v, 0, "size too large", ACCEPTED))
}
