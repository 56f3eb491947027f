//! `tape recover` and `tape ps --dead`: the shared rings a dead process
//! left (`tape_consumer::recover`).

use std::io::Write;
use std::path::PathBuf;
use std::time::SystemTime;

use tape_consumer::kernel::snapshots::SnapshotList;
use tape_consumer::kernel::{KernelRecorder, WindowStats};

use crate::output::{output_error, Failure};

/// `tape recover [TARGET] [-o OUT]`, `tape recover --clean TARGET|--all`.
pub(crate) fn recover(
    target: Option<String>,
    output: Option<PathBuf>,
    clean: bool,
    all: bool,
) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if clean {
        let dirs = match &target {
            Some(t) => vec![tape_consumer::recover::find(t).map_err(|e| e.to_string())?],
            // Every dead process's rings, other programs' too: only when
            // asked for by name (issue 38).
            None if !all => {
                return Err(Failure::Error(
                    "tape recover --clean: name the dead process whose rings to remove (its \
                     pid, or its rings' directory: `tape ps --dead` lists them), or give --all \
                     to remove every dead process's rings of this user"
                        .into(),
                ))
            }
            None => tape_consumer::recover::ring_dirs()
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|d| !d.alive)
                .map(|d| d.dir)
                .collect(),
        };
        for d in dirs {
            tape_consumer::recover::remove(&d).map_err(|e| e.to_string())?;
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
    let dir = tape_consumer::recover::find(&target).map_err(|e| e.to_string())?;
    let out_dir = match output {
        Some(o) => o,
        None => {
            let d = tape_consumer::recover::ring_dirs()
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
    let r = tape_consumer::recover::recover(&dir, &out_dir).map_err(|e| e.to_string())?;
    for u in &r.unreadable {
        crate::output::say!("tape recover: left out {u}");
    }
    // What was written is read back whole, as `tape check` reads it: a
    // recovery is said to succeed only if its trace reads.
    let verified = crate::check::verify(std::slice::from_ref(&r.trace), false, true);
    let mut text = format!(
        "recovered process {} ({}) into {}\n  streams: {}\n  lost in rings: {}{}\n  lost outside rings: {}\n  last event: {}\n  clock: {}\n",
        r.pid,
        r.program,
        r.trace.display(),
        r.rings,
        r.lost.total(),
        causes(&r.lost),
        r.lost_outside,
        r.last_event_ns
            .map_or_else(|| "none".into(), tape_consumer::recover::utc_text),
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
    if r.unshared > 0 {
        text.push_str(&format!("  {}\n", unshared_text(r.unshared)));
    }
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)?;
    if let Err(e) = verified {
        let why = match e {
            Failure::Error(m) => m,
            Failure::Closed => "its output closed".into(),
        };
        return Err(Failure::Error(format!(
            "tape recover: the trace written at {} does not read back (the rings were damaged \
             or tampered with): {why}",
            r.trace.display()
        )));
    }
    if !r.unreadable.is_empty() {
        return Err(Failure::Error(format!(
            "tape recover: {} ring file(s) left out (above): the trace at {} lacks their events",
            r.unreadable.len(),
            r.trace.display()
        )));
    }
    Ok(())
}

/// `tape ps --dead`: the shared rings of dead processes.
pub(crate) fn ps_dead() -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let mut text = format!(
        "{:>8}  {:<16} {:>5} {:>10} {:>9}  {}\n",
        "PID", "NAME", "RINGS", "KB", "AGE", "DIRECTORY"
    );
    let now = SystemTime::now();
    for d in tape_consumer::recover::ring_dirs()
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
            // Cut to 16, as `ps` cuts a command name: the columns stay put.
            d.program.chars().take(16).collect::<String>(),
            d.rings,
            d.bytes / 1024,
            age,
            d.dir.display()
        ));
    }
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// What `tape record` records: a running process (or, `None`, with
/// `--all`, every one), or a program it starts.
pub(crate) enum Recorded<'a> {
    Target(Option<&'a str>),
    Command(&'a [String]),
}

/// Starts `command` (its output the terminal's) and waits for its shared
/// rings' directory: as long as it runs, no longer (a program that exits
/// before making a ring is an error naming it).
fn start(command: &[String]) -> Result<(std::process::Child, PathBuf), Failure> {
    let mut child = std::process::Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .map_err(|e| format!("tape record -- {}: cannot start it: {e}", command[0]))?;
    let pid = child.id().to_string();
    loop {
        // Its directory, and in it its process file and template written.
        if let Ok(dir) = tape_consumer::recover::find(&pid) {
            if tape_consumer::recover::made_whole(&dir).is_ok() {
                return Ok((child, dir));
            }
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!(
                "tape record -- {}: it ended ({status}) before making a shared ring (does it \
                 call tape::init, with a tracepoint enabled, and TAPE_SHM not off?)",
                command[0]
            )
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// What `--kernel` asks: the events and each CPU's buffer (KiB).
pub(crate) struct KernelOptions {
    events: String,
    buffer_kb: u32,
}

/// `--kernel EVENTS [--kernel-buffer SIZE]`.
pub(crate) fn kernel_options(
    events: String,
    buffer: Option<&str>,
) -> Result<KernelOptions, Failure> {
    let buffer_kb = match buffer {
        None => tape_consumer::kernel::DEFAULT_BUFFER_KB,
        Some(text) => {
            let bytes =
                tape::config::parse_size("--kernel-buffer", text).map_err(|e| e.to_string())?;
            u32::try_from(bytes.div_ceil(1024))
                .ok()
                .filter(|kb| *kb >= 4)
                .ok_or_else(|| format!("--kernel-buffer {text}: from 4K to 4T a CPU"))?
        }
    };
    Ok(KernelOptions { events, buffer_kb })
}

/// What `--kernel` asks, where the kernel trace goes, and its recorder
/// when it was started before the program (`out`: none with a relay,
/// which gets the kernel trace as a trace of its session).
struct KernelPlan {
    options: KernelOptions,
    out: Option<PathBuf>,
    started: Option<KernelRecorder>,
}

impl KernelPlan {
    /// Starts the kernel's recording on clock `source`, following `tids`.
    fn start(&self, source: u32, tids: &[u32]) -> Result<KernelRecorder, Failure> {
        Ok(KernelRecorder::start(
            &self.options.events,
            self.out.as_deref(),
            source,
            tids,
            self.options.buffer_kb,
            &mut |m| crate::output::say!("tape record: {m}"),
        )?)
    }
}

/// The clock source (a process header's code) of the programs this
/// recorder starts, before they run: tape's own choice, as they will
/// make it (`tape::clock`): the monotonic clock when asked or when the
/// TSC is not invariant. Checked against each program once attached.
fn expected_clock_source() -> u32 {
    // (A bad value is the programs' error to give, at their `init`.)
    if tape::__consumer::monotonic_asked().unwrap_or(false) || !tape::clock::invariant_tsc() {
        3
    } else {
        1
    }
}

/// `tape record TARGET|--all|-- PROGRAM (-o OUT | --relayd URL)
/// [--duration S] [--size LIMIT] [--kernel EVENTS]`.
pub(crate) fn record(
    recorded: Recorded<'_>,
    output: Option<PathBuf>,
    relay: Option<crate::relay::producer::Options>,
    duration: Option<f64>,
    size: Option<String>,
    kernel: Option<KernelOptions>,
) -> Result<(), Failure> {
    let limit = size
        .map(|s| tape::config::parse_size("--size", &s).map(|n| n as u64))
        .transpose()
        .map_err(|e| e.to_string())?;
    let duration = match duration {
        None => None,
        Some(d) => match std::time::Duration::try_from_secs_f64(d) {
            Ok(t) if d > 0.0 => Some(t),
            _ => {
                return Err(Failure::Error(format!(
                    "--duration {d}: a positive number of seconds, at most {}",
                    std::time::Duration::MAX.as_secs()
                )))
            }
        },
    };
    // With --kernel, the directory is a session's: `kernel/` and
    // `ust/PROGRAM-PID/` (made once the program is known); with a relay,
    // the kernel's is a trace of the relay session.
    let mut kernel = match (kernel, &output) {
        (None, _) => None,
        (Some(options), Some(out)) => {
            std::fs::create_dir(out)
                .and_then(|()| std::fs::create_dir(out.join("ust")))
                .map_err(|e| format!("tape record: cannot create {}: {e}", out.display()))?;
            Some(KernelPlan {
                options,
                out: Some(out.join("kernel")),
                started: None,
            })
        }
        (Some(options), None) => Some(KernelPlan {
            options,
            out: None,
            started: None,
        }),
    };
    if let Some(k) = kernel.as_mut() {
        match &recorded {
            // Following this process, with its children, before the
            // program starts: the program is followed from its first
            // instruction.
            Recorded::Command(_) => {
                k.started = Some(k.start(expected_clock_source(), &[std::process::id()])?)
            }
            // Every process followed as it comes (none yet).
            Recorded::Target(None) => k.started = Some(k.start(expected_clock_source(), &[])?),
            Recorded::Target(Some(_)) => {}
        }
    }
    let mut child = None;
    let (dir, target) = match recorded {
        Recorded::Target(None) => {
            let relay = relay.ok_or_else(|| "tape record --all: give --relayd URL".to_owned())?;
            let kernel = kernel.and_then(|k| k.started);
            return crate::relay::record(crate::relay::Follow::All, relay, duration, limit, kernel);
        }
        Recorded::Target(Some(t)) => (
            tape_consumer::recover::find_running(t, crate::reader::STARTING)
                .map_err(|e| e.to_string())?,
            t.to_owned(),
        ),
        Recorded::Command(command) => {
            let (c, dir) = start(command)?;
            let target = format!("{} (pid {})", command[0], c.id());
            child = Some(c);
            (dir, target)
        }
    };
    let r = record_dir(&dir, &target, output, relay, duration, limit, kernel);
    if let Some(mut c) = child {
        // The recording ends when the program exits (or earlier: then it
        // goes on, said).
        match c.try_wait() {
            Ok(Some(status)) if !status.success() => {
                crate::output::say!("tape record: {target} ended: {status}")
            }
            Ok(None) => crate::output::say!("tape record: {target} still runs"),
            _ => {}
        }
    }
    r
}

/// `tape record --relayd` of the running process whose rings are in
/// `dir` (and of the kernel's events beside it, with `kernel`).
fn record_dir_to_relay(
    dir: &std::path::Path,
    relay: crate::relay::producer::Options,
    duration: Option<std::time::Duration>,
    limit: Option<u64>,
    kernel: Option<KernelPlan>,
) -> Result<(), Failure> {
    let kernel = match kernel {
        Some(k) => {
            let (_, pid) = tape_consumer::recover::process_of(dir).map_err(|e| e.to_string())?;
            let source = tape_consumer::recover::clock_source_of(dir).map_err(|e| e.to_string())?;
            Some(follow_kernel(k, pid, source)?)
        }
        None => None,
    };
    let follow = crate::relay::Follow::One(dir);
    crate::relay::record(follow, relay, duration, limit, kernel)
}

/// `tape record` of the running process whose rings are in `dir`.
fn record_dir(
    dir: &std::path::Path,
    target: &str,
    output: Option<PathBuf>,
    relay: Option<crate::relay::producer::Options>,
    duration: Option<std::time::Duration>,
    limit: Option<u64>,
    kernel: Option<KernelPlan>,
) -> Result<(), Failure> {
    let output = match (output, relay) {
        (_, Some(relay)) => return record_dir_to_relay(dir, relay, duration, limit, kernel),
        (Some(o), None) => o,
        (None, None) => return Err("tape record: give -o DIR or --relayd URL".to_owned().into()),
    };
    crate::reader::catch_stop();
    let output = match &kernel {
        None => output,
        Some(_) => {
            let (program, pid) =
                tape_consumer::recover::process_of(dir).map_err(|e| e.to_string())?;
            output.join("ust").join(format!("{program}-{pid}"))
        }
    };
    let mut r = tape_consumer::record::Recorder::attach(dir, &output).map_err(|e| e.to_string())?;
    let mut kernel = kernel
        .map(|k| follow_kernel(k, r.pid(), r.clock_source()))
        .transpose()?;
    let mut kernel_failed = None;
    // The program's latency snapshots, each given the kernel's window.
    let mut windows = Windows {
        list: SnapshotList::of(dir),
        pid: r.pid(),
        given: 0,
        failed: 0,
    };
    crate::output::say!(
        "tape record: recording process {} into {} (until it exits{}{}; Ctrl-C ends)",
        r.pid(),
        output.display(),
        duration.map_or(String::new(), |d| format!(", {} s", d.as_secs_f64())),
        limit.map_or(String::new(), |l| format!(", {l} bytes"))
    );
    let start = std::time::Instant::now();
    let mut idle = tape_consumer::record::REST_MIN;
    let mut turned = start;
    let mut checked = start;
    let why = loop {
        if crate::reader::stopped() {
            break "interrupted";
        }
        if duration.is_some_and(|d| start.elapsed() >= d) {
            break "--duration reached";
        }
        if limit.is_some_and(|l| r.progress().bytes >= l) {
            break "--size reached";
        }
        if checked.elapsed() >= std::time::Duration::from_millis(50) {
            checked = std::time::Instant::now();
            if !r.process_alive() {
                break "the process exited";
            }
            if let Some(k) = kernel.as_mut() {
                windows.look(k);
            }
        }
        let since = turned.elapsed();
        turned = std::time::Instant::now();
        if let Err(e) = r.poll(false) {
            return Err(r.end_after_error(e).to_string().into());
        }
        if let Some(Err(e)) = kernel.as_mut().map(KernelRecorder::poll) {
            // The program's recording goes on; the exit says it failed.
            crate::output::say!("tape record: the kernel's events end here: {e}");
            kernel = None;
            kernel_failed = Some(e);
        }
        idle = tape_consumer::record::rest(r.fill(), since, idle);
        std::thread::sleep(idle);
    };
    // (before the recorder's end removes the list with the directory)
    if let Some(k) = kernel.as_mut() {
        windows.look(k);
    }
    let unshared = r.unshared_rings();
    // One clock for both traces, stated alike: their times compare exactly.
    let clock = r.clock_params();
    r.set_clock(clock);
    let p = r.finish().map_err(|e| e.to_string())?;
    let kernel_stats = kernel.map(|k| k.finish(clock)).transpose()?;
    let mut text = recorded_text(target, &output, why, &p, start.elapsed().as_secs_f64());
    if unshared > 0 {
        text.push_str(&format!("  {}\n", unshared_text(unshared)));
    }
    if let Some(k) = &kernel_stats {
        text.push_str(&k.summary_line());
        text.push_str(&windows.text());
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)?;
    match kernel_failed {
        Some(e) => Err(format!("tape record: the kernel's events ended early: {e}").into()),
        None => Ok(()),
    }
}

/// What `tape record` says it recorded of `target` into `output` and why
/// it ended, after `run` seconds: streams, events, bytes and their rates,
/// losses by cause, and the events' span.
fn recorded_text(
    target: &str,
    output: &std::path::Path,
    why: &str,
    p: &tape_consumer::record::Progress,
    run: f64,
) -> String {
    // The rate is over the events' own span (their packets' times), not
    // the recorder's run: a recorder started after a pipe, or long after
    // the program went idle, takes events of another time.
    let span = events_span(output);
    let secs = span.unwrap_or(run);
    format!(
        "recorded {} into {} ({why})\n  streams: {}\n  events: {} ({:.0}/s)\n  bytes: {} ({:.1} MB/s)\n  lost: {}{}\n  {}\n",
        target,
        output.display(),
        p.streams,
        p.events,
        p.events as f64 / secs,
        p.bytes,
        p.bytes as f64 / secs / 1e6,
        p.lost.total(),
        causes(&p.lost),
        match span {
            Some(s) => format!(
                "span: {s:.3} s of events (rates above over it), recorded in {run:.3} s"
            ),
            None => format!("span: not known (rates above over the recording's {run:.3} s)"),
        },
    )
}

/// The kernel recorder of `k`, following the threads of process `pid`
/// (whose clock is of `source`): started now, or (started before the
/// program) narrowed to them.
fn follow_kernel(k: KernelPlan, pid: u32, source: u32) -> Result<KernelRecorder, Failure> {
    use tape_consumer::kernel::tracefs::threads;
    let tids = threads(pid);
    let mut kr = match k.started {
        Some(mut kr) => {
            if kr.clock_source() != source {
                return Err(format!(
                    "tape record --kernel: process {pid} keeps time by another clock than the \
                     kernel's recording was started on (source {source} against {})",
                    kr.clock_source()
                )
                .into());
            }
            // The program and its threads were followed from its fork.
            kr.unfollow(std::process::id());
            kr.follow(&tids);
            kr
        }
        None => k.start(source, &tids)?,
    };
    // A thread made while the first list was read is in the second.
    kr.follow(&threads(pid));
    Ok(kr)
}

/// The latency snapshots of the recorded process, each given the kernel's
/// events of its window (`SNAPSHOT/kernel`, owned as the snapshot is, so
/// that the program's removal of old snapshots removes it too).
struct Windows {
    list: SnapshotList,
    pid: u32,
    given: u64,
    failed: u64,
}

impl Windows {
    /// Gives the snapshots listed since the last look their windows (the
    /// first of each outcome said).
    fn look(&mut self, k: &mut KernelRecorder) {
        let paths = match self.list.new_ones() {
            Ok(p) => p,
            Err(e) => {
                if self.failed == 0 {
                    crate::output::say!("tape record: latency snapshots: {e}");
                }
                self.failed += 1;
                return;
            }
        };
        for p in paths {
            // A relative path is the program's (its working directory).
            let p = match p.is_relative() {
                true => std::fs::read_link(format!("/proc/{}/cwd", self.pid))
                    .map_or(p.clone(), |cwd| cwd.join(&p)),
                false => p,
            };
            match kernel_window(k, &p) {
                Ok(w) => {
                    if self.given == 0 {
                        crate::output::say!(
                            "tape record: latency snapshot {}: the kernel's events of its \
                             window added ({} events{}{})",
                            p.display(),
                            w.events,
                            match w.lost {
                                0 => String::new(),
                                n => format!(", {n} lost"),
                            },
                            match w.incomplete {
                                true => ", its start no longer held",
                                false => "",
                            }
                        );
                    }
                    self.given += 1;
                }
                Err(e) => {
                    if self.failed == 0 {
                        crate::output::say!(
                            "tape record: latency snapshot {}: the kernel's events not added: {e}",
                            p.display()
                        );
                    }
                    self.failed += 1;
                }
            }
        }
    }

    /// The summary's line, when there were snapshots.
    fn text(&self) -> String {
        match (self.given, self.failed) {
            (0, 0) => String::new(),
            (given, 0) => {
                format!("  latency snapshots: {given} given the kernel's events of their window\n")
            }
            (given, failed) => format!(
                "  latency snapshots: {given} given the kernel's events of their window, {failed} \
                 not (the first said why)\n"
            ),
        }
    }
}

/// Writes `snapshot/kernel`: the kernel's events of the latency
/// snapshot's window (its env's `tape_latency_start` and `_end`), on its
/// clock, owned by the snapshot's owner.
fn kernel_window(
    k: &mut KernelRecorder,
    snapshot: &std::path::Path,
) -> Result<WindowStats, String> {
    let t = tape_ctf::metadata::open_trace(snapshot).map_err(|e| e.to_string())?;
    let int = |name: &str| {
        t.trace
            .env
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| match v {
                tape_ctf::EnvValue::Int(i) => u64::try_from(*i).ok(),
                _ => None,
            })
            .ok_or_else(|| format!("no {name} in its env"))
    };
    let (begin, end) = (int("tape_latency_start")?, int("tape_latency_end")?);
    let clock = t
        .trace
        .clocks
        .first()
        .cloned()
        .ok_or("no clock in its metadata")?;
    let out = snapshot.join("kernel");
    let w = k.write_window(&out, begin, end, clock)?;
    own_as(&out, snapshot)?;
    Ok(w)
}

/// Gives `dir` and its files to the owner of `like`, when they differ.
fn own_as(dir: &std::path::Path, like: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let named = |p: &std::path::Path, e: std::io::Error| format!("{}: {e}", p.display());
    let m = std::fs::metadata(like).map_err(|e| named(like, e))?;
    let mine = std::fs::metadata(dir).map_err(|e| named(dir, e))?;
    if (m.uid(), m.gid()) == (mine.uid(), mine.gid()) {
        return Ok(());
    }
    let mut paths = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).map_err(|e| named(dir, e))? {
        paths.push(e.map_err(|e| named(dir, e))?.path());
    }
    for p in paths {
        std::os::unix::fs::lchown(&p, Some(m.uid()), Some(m.gid())).map_err(|e| named(&p, e))?;
    }
    Ok(())
}

/// The seconds between the first and the last event of the trace at `dir`
/// (its streams' first and last packets' times: read from the packet
/// contexts only), if there are events and the packets say.
fn events_span(dir: &std::path::Path) -> Option<f64> {
    let trace = tape_ctf::metadata::open_trace(dir).ok()?;
    let (mut first, mut last) = (None::<i128>, None::<i128>);
    for mut s in tape_ctf::decode::open_streams(std::slice::from_ref(&trace)).ok()? {
        if let Ok(Some((b, e))) = s.packet_span() {
            first = Some(first.map_or(b, |f| f.min(b)));
            last = Some(last.map_or(e, |l| l.max(e)));
        }
    }
    let ns = last? - first?;
    (ns > 0).then(|| ns as f64 / 1e9)
}

/// The line that says how many of a process's rings no other process can
/// see.
fn unshared_text(n: u32) -> String {
    format!(
        "rings in private memory (not seen: past TAPE_SHM_MAX, or no room): {n}; their \
         threads' events are not here"
    )
}

/// ` (overwritten 12, full 3)`: the causes with losses, or nothing.
pub(crate) fn causes(lost: &tape::Drops) -> String {
    let named: Vec<String> = lost
        .by_cause()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join(", "))
    }
}
