//! `tape recover` and `tape ps --dead`: the shared rings a dead process
//! left (`tape::recover`).

use std::io::Write;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::{output_error, Failure};

/// `tape recover [TARGET] [-o OUT]`, `tape recover --clean [TARGET]`.
pub(crate) fn recover(
    target: Option<String>,
    output: Option<PathBuf>,
    clean: bool,
) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if clean {
        let dirs = match &target {
            Some(t) => vec![tape::recover::find(t).map_err(|e| e.to_string())?],
            None => tape::recover::ring_dirs()
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|d| !d.alive)
                .map(|d| d.dir)
                .collect(),
        };
        for d in dirs {
            tape::recover::remove(&d).map_err(|e| e.to_string())?;
            writeln!(out, "removed {}", d.display()).map_err(output_error)?;
        }
        return out.flush().map_err(output_error);
    }
    let Some(target) = target else {
        return Err(Failure::Error(
            "tape recover: name the dead process (its pid, or its rings' directory: `tape ps \
             --dead` lists them), or give --clean"
                .into(),
        ));
    };
    let dir = tape::recover::find(&target).map_err(|e| e.to_string())?;
    let out_dir = match output {
        Some(o) => o,
        None => {
            let d = tape::recover::ring_dirs()
                .ok()
                .and_then(|all| all.into_iter().find(|d| d.dir == dir));
            let stem = match &d {
                Some(d) if d.pid != 0 => format!("{}-recovered-{}", d.program, d.pid),
                _ => "recovered".to_owned(),
            };
            (1..1000)
                .map(|n| {
                    PathBuf::from(if n == 1 {
                        stem.clone()
                    } else {
                        format!("{stem}-{n}")
                    })
                })
                .find(|p| std::fs::symlink_metadata(p).is_err())
                .unwrap_or_else(|| PathBuf::from(stem))
        }
    };
    let r = tape::recover::recover(&dir, &out_dir).map_err(|e| e.to_string())?;
    for u in &r.unreadable {
        crate::say!("tape recover: left out {u}");
    }
    let causes: Vec<String> = r
        .lost
        .by_cause()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    let mut text = format!(
        "recovered process {} ({}) into {}\n  streams: {}\n  lost in rings: {}{}\n  lost outside rings: {}\n  last event: {}\n  clock: {}\n",
        r.pid,
        r.program,
        r.trace.display(),
        r.rings,
        r.lost.total(),
        if causes.is_empty() {
            String::new()
        } else {
            format!(" ({})", causes.join(", "))
        },
        r.lost_outside,
        r.last_event_ns
            .map_or_else(|| "none".into(), tape::recover::utc_text),
        r.clock
    );
    if r.unborn > 0 {
        text.push_str(&format!(
            "  rings being made at the death (empty): {}\n",
            r.unborn
        ));
    }
    if !r.unreadable.is_empty() {
        text.push_str(&format!("  ring files left out: {}\n", r.unreadable.len()));
    }
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// `tape ps --dead`: the shared rings of dead processes.
pub(crate) fn ps_dead() -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let mut text = format!(
        "{:>8}  {:<16} {:>5} {:>10} {:>9}  {}\n",
        "PID", "NAME", "RINGS", "KB", "AGE", "DIRECTORY"
    );
    let now = SystemTime::now();
    for d in tape::recover::ring_dirs()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|d| !d.alive)
    {
        let age = now.duration_since(d.modified).unwrap_or_default().as_secs();
        let age = match age {
            a if a < 120 => format!("{a}s"),
            a if a < 7200 => format!("{}m", a / 60),
            a if a < 172_800 => format!("{}h", a / 3600),
            a => format!("{}d", a / 86_400),
        };
        text.push_str(&format!(
            "{:>8}  {:<16} {:>5} {:>10} {:>9}  {}\n",
            d.pid,
            d.program,
            d.rings,
            d.bytes / 1024,
            age,
            d.dir.display()
        ));
    }
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}
