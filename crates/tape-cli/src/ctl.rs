//! `tape ctl PID COMMAND...` and `tape ps`: the control protocol's client
//! (`tape::control`).

use crate::output::{output_error, Failure};
use std::io::Write;

/// `tape ctl PID COMMAND...`: the process's answer on stdout.
pub(crate) fn ctl(pid: u32, command: &[String]) -> Result<(), Failure> {
    let text = tape::control::client::request(pid, command).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// `tape ps`: one line per controllable process.
pub(crate) fn ps() -> Result<(), Failure> {
    // A directory another user could answer from lists nothing.
    tape::control::client::check_dir().map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    let mut text = format!(
        "{:>8}  {:<16} {:>7} {:>7} {:>5} {:>10}\n",
        "PID", "NAME", "TRACING", "ENABLED", "RINGS", "RING KB"
    );
    for p in tape::control::client::processes() {
        text.push_str(&format!(
            "{:>8}  {:<16} {:>7} {:>7} {:>5} {:>10}\n",
            p.pid,
            p.name,
            if p.tracing_on { "on" } else { "off" },
            p.enabled,
            p.rings,
            p.bytes / 1024
        ));
    }
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)?;
    // The shared rings' directory another user made (or opened) hides
    // every process's rings from `tape pipe`, `record` and `recover`:
    // said, with its owner, and the exit status 1.
    tape_consumer::recover::ring_dir_paths()
        .map(|_| ())
        .map_err(|e| format!("{e} (the processes' rings cannot be shared there: remove it)").into())
}
