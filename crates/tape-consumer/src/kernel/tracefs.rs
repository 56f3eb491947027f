//! tape's own ftrace instance: `instances/tape-PID` under tracefs, made
//! for one recording and removed after it, whatever ends it. The system's
//! tracer and other instances are never touched.
//!
//! ```text
//! /sys/kernel/tracing/instances/tape-4242/      (4242: the recorder's pid)
//!   trace_clock       x86-tsc (tape's clock is the TSC) or mono
//!   buffer_size_kb    per CPU
//!   events/sched/sched_switch/enable, format     the events asked, and their layouts
//!   tracing_on
//!   per_cpu/cpuN/trace_pipe_raw                  read non-blocking, a page at a time
//!   per_cpu/cpuN/stats                           the kernel's own counts
//! ```
//!
//! A recorder killed with -9 leaves its instance: the next recording
//! removes every `tape-PID` instance whose process is gone (said).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted: `/sys/kernel/tracing`, the older
/// `/sys/kernel/debug/tracing`, or wherever `/proc/mounts` says.
pub fn root() -> Result<PathBuf, String> {
    let mut places: Vec<PathBuf> = vec![
        "/sys/kernel/tracing".into(),
        "/sys/kernel/debug/tracing".into(),
    ];
    if let Ok(mounts) = std::fs::read_to_string("/proc/mounts") {
        for line in mounts.lines() {
            let mut w = line.split_whitespace();
            if let (Some(_), Some(at), Some("tracefs")) = (w.next(), w.next(), w.next()) {
                places.push(at.into());
            }
        }
    }
    for p in places {
        match std::fs::metadata(p.join("trace_clock")) {
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(format!(
                    "--kernel: tracefs at {} cannot be read: {e} (recording the kernel needs \
                     root, or access to tracefs)",
                    p.display()
                ))
            }
            Err(_) => {}
        }
    }
    Err(
        "--kernel: tracefs is not mounted (as root: mount -t tracefs nodev \
         /sys/kernel/tracing)"
            .to_owned(),
    )
}

/// The instance of one recording.
pub struct Instance {
    dir: PathBuf,
    pipes: Vec<(u32, File)>,
}

/// A simple glob: `*` any run, `?` one character (matched with one
/// backtrack point: linear in practice, whatever the pattern).
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && (p[i] == b'?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            star = Some((si, sj + 1));
            i = si + 1;
            j = sj + 1;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

impl Instance {
    /// Removes the instances left by recorders that are gone, then makes
    /// this one's. `said` hears of each removed.
    pub fn create(root: &Path, said: &mut dyn FnMut(String)) -> Result<Instance, String> {
        let instances = root.join("instances");
        if let Ok(all) = std::fs::read_dir(&instances) {
            for e in all.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix("tape-")
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                // (one of this pid is of a recorder gone whose pid this
                // one got: this one has made none yet)
                if pid == std::process::id() as i32 || !recorder_alive(pid) {
                    match std::fs::remove_dir(e.path()) {
                        Ok(()) => said(format!(
                            "removed the ftrace instance {} left by a recorder that is gone",
                            e.path().display()
                        )),
                        Err(err) => said(format!(
                            "the ftrace instance {} was left by a recorder that is gone and \
                             cannot be removed: {err}",
                            e.path().display()
                        )),
                    }
                }
            }
        }
        let dir = instances.join(format!("tape-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    " (recording the kernel needs root, or write access to tracefs)".to_owned()
                }
                std::io::ErrorKind::AlreadyExists => {
                    " (another recorder of this pid? remove it with rmdir)".to_owned()
                }
                _ => String::new(),
            };
            format!(
                "--kernel: cannot make the ftrace instance {}: {e}{why}",
                dir.display()
            )
        })?;
        Ok(Instance {
            dir,
            pipes: Vec::new(),
        })
    }

    /// Writes `text` to the instance's file `rel` (appended when `append`,
    /// as `>>` does: `set_event_pid` keeps what it had).
    pub fn write(&self, rel: &str, text: &str, append: bool) -> Result<(), String> {
        let path = self.dir.join(rel);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(!append)
            .append(append)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        f.write_all(text.as_bytes())
            .map_err(|e| format!("{}: writing {:?}: {e}", path.display(), text.trim()))
    }

    /// Reads the instance's file `rel`.
    pub fn read(&self, rel: &str) -> Result<String, String> {
        read_file(&self.dir.join(rel))
    }

    /// Sets the trace clock, if the kernel has it.
    pub fn set_clock(&self, clock: &str) -> Result<(), String> {
        let offered = self.read("trace_clock")?;
        let names: Vec<&str> = offered
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
            .collect();
        if !names.contains(&clock) {
            return Err(format!(
                "--kernel: this kernel's ftrace has no {clock:?} clock (it offers: {}), so its \
                 events cannot be put on tape's clock",
                names.join(" ")
            ));
        }
        self.write("trace_clock", clock, false)
    }

    /// The events that `spec` names (`sched`, `sched:sched_switch,irq`,
    /// `syscalls:sys_enter_*`): (system, event), each once, in the
    /// order of the events directory.
    pub fn select(&self, spec: &str) -> Result<Vec<(String, String)>, String> {
        let events = self.dir.join("events");
        let mut systems: Vec<String> = dir_names(&events)?;
        systems.sort();
        let mut chosen: Vec<(String, String)> = Vec::new();
        for (i, item) in spec.split(',').enumerate() {
            let item = item.trim();
            let (sys, ev) = item.split_once(':').unwrap_or((item, "*"));
            if item.is_empty() || sys.is_empty() || ev.is_empty() {
                return Err(format!(
                    "--kernel {spec:?}: item {} ({item:?}) is not SYSTEM or SYSTEM:EVENT",
                    i + 1
                ));
            }
            let mut matched = false;
            for s in systems.iter().filter(|s| glob(sys, s)) {
                let mut names = dir_names(&events.join(s))?;
                names.sort();
                for e in names.into_iter().filter(|e| glob(ev, e)) {
                    matched = true;
                    let pair = (s.clone(), e);
                    if !chosen.contains(&pair) {
                        chosen.push(pair);
                    }
                }
            }
            if !matched {
                return Err(format!(
                    "--kernel {spec:?}: {item:?} matches no kernel event (the names are in {})",
                    events.display()
                ));
            }
        }
        Ok(chosen)
    }

    /// Opens every online CPU's `trace_pipe_raw`, non-blocking.
    pub fn open_pipes(&mut self) -> Result<(), String> {
        let per_cpu = self.dir.join("per_cpu");
        let mut cpus: Vec<u32> = dir_names(&per_cpu)?
            .iter()
            .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        for cpu in cpus {
            let path = per_cpu.join(format!("cpu{cpu}/trace_pipe_raw"));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            self.pipes.push((cpu, f));
        }
        Ok(())
    }

    /// The CPUs whose pipes are open.
    pub fn cpus(&self) -> Vec<u32> {
        self.pipes.iter().map(|(c, _)| *c).collect()
    }

    /// One page from pipe `i` into `page`: its length, `Ok(0)` when none
    /// is ready.
    pub fn read_page(&mut self, i: usize, page: &mut [u8]) -> Result<usize, String> {
        let (cpu, f) = &mut self.pipes[i];
        match f.read(page) {
            Ok(n) => Ok(n),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                Ok(0)
            }
            // A CPU gone offline: nothing more comes from it.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(0),
            Err(e) => Err(format!("cpu{cpu}/trace_pipe_raw: {e}")),
        }
    }

    /// The kernel's own count of what it lost on `cpu` (`overrun` +
    /// `dropped events` of its `stats`).
    pub fn kernel_lost(&self, cpu: u32) -> Option<u64> {
        let text = self.read(&format!("per_cpu/cpu{cpu}/stats")).ok()?;
        let mut lost = 0;
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == "overrun" || k.trim() == "dropped events" {
                    lost += v.trim().parse::<u64>().ok()?;
                }
            }
        }
        Some(lost)
    }
}

impl Drop for Instance {
    /// Tracing off, the pipes closed, the instance removed (retried a
    /// moment: a page being read holds it).
    fn drop(&mut self) {
        let _ = self.write("tracing_on", "0", false);
        self.pipes.clear();
        for _ in 0..50 {
            match std::fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                _ => break,
            }
        }
    }
}

/// A tracefs file's text, read in large reads: some files
/// (`events/header_page`) answer a first short read, then end, so that a
/// reader that probes with a small read first (as `read_to_string` does
/// on a file of size 0) gets a cut text.
pub fn read_file(path: &Path) -> Result<String, String> {
    let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    String::from_utf8(text).map_err(|e| format!("{}: not text: {e}", path.display()))
}

/// Whether `pid` is a running `tape` (a recorder whose instance is in use).
fn recorder_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "tape")
}

/// The names of `dir`'s subdirectories.
fn dir_names(dir: &Path) -> Result<Vec<String>, String> {
    Ok(std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

/// The threads of process `pid` now.
pub fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instance of this pid's name, left by a recorder gone whose pid
    /// this one got, is removed and said, not an error. Needs root and
    /// tracefs (else a notice; a failure under `TAPE_REQUIRE_TOOLS=1`).
    #[test]
    fn an_instance_of_this_pids_name_is_a_stale_one_removed() {
        // SAFETY: geteuid has no preconditions.
        let root = (unsafe { libc::geteuid() } == 0)
            .then(root)
            .and_then(Result::ok);
        let Some(root) = root else {
            assert!(
                std::env::var("TAPE_REQUIRE_TOOLS").map_or(true, |v| v != "1"),
                "TAPE_REQUIRE_TOOLS=1 and no tracefs as root"
            );
            eprintln!("NOTICE: skipped, needs root and tracefs: a stale instance's removal");
            return;
        };
        let stale = root
            .join("instances")
            .join(format!("tape-{}", std::process::id()));
        std::fs::create_dir(&stale).unwrap();
        let mut said = Vec::new();
        let made = Instance::create(&root, &mut |m| said.push(m));
        let ok = made.is_ok();
        drop(made);
        let _ = std::fs::remove_dir(&stale);
        assert!(ok, "{said:?}");
        assert!(
            said.iter()
                .any(|m| m.contains("removed the ftrace instance")),
            "{said:?}"
        );
        assert!(!stale.exists());
    }

    #[test]
    fn globs() {
        for (p, n, want) in [
            ("sched", "sched", true),
            ("sched_*", "sched_switch", true),
            ("sys_enter_*", "sys_exit_read", false),
            ("*", "", true),
            ("s?hed", "sched", true),
            ("s?hed", "shed", false),
            ("*switch", "sched_switch", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            (
                "*a*a*a*a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ] {
            assert_eq!(glob(p, n), want, "{p} {n}");
        }
    }
}
