//! Streaming to LTTng's relay daemon (`lttng-relayd`), the collector that
//! babeltrace2 and Trace Compass read live (issue 39): the producer
//! protocol's bytes (`wire`), a connection that speaks it (`client`), and
//! tape's side of it, a process's rings forwarded as a trace of a relay
//! session (`producer`), fed by the same consuming reader of the shared
//! rings that `tape record -o DIR` and `tape pipe` use.
//!
//! **No authentication.** The relay daemon trusts every peer and has no
//! TLS: keep it on loopback, a trusted network, or an ssh tunnel.

pub(crate) mod client;
pub(crate) mod producer;
pub(crate) mod wire;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{output_error, Failure};
use producer::{Feed, Options, Session};

/// The options of `tape record --relayd URL [--session NAME] [--live-timer
/// D] [--hostname H]`, checked (the error names the one that is wrong).
pub(crate) fn options(
    url: &str,
    session: String,
    live_timer: Option<&str>,
    hostname: Option<String>,
) -> Result<Options, String> {
    let url = client::RelayUrl::parse(url)?;
    wire::check_name("--session", &session, 255)?;
    let hostname = hostname.unwrap_or_else(producer::hostname);
    wire::check_name("--hostname", &hostname, 64)?;
    let live_timer = match live_timer {
        None => producer::DEFAULT_LIVE_TIMER,
        Some(t) => {
            let ns = tape::latency::parse_duration_ns(t)
                .map_err(|e| format!("--live-timer {t:?}: {e}"))?;
            let d = Duration::from_nanos(ns);
            if d < Duration::from_millis(1) || d > Duration::from_secs(60) {
                return Err(format!(
                    "--live-timer {t:?}: from 1ms to 60s (a viewer's delay is about two ticks)"
                ));
            }
            d
        }
    };
    Ok(Options {
        url,
        session,
        hostname,
        live_timer,
    })
}

/// What `tape record --relayd` follows: one process (its rings'
/// directory), or every tape process of this user on the host, as they
/// start (`--all`).
pub(crate) enum Follow<'a> {
    One(&'a Path),
    All,
}

/// A process being forwarded, or waiting for its clock's calibration.
enum Traced {
    Waiting(tape::record::Recorder),
    Fed(Feed),
    /// Its data ended ([`Feed::end`]) at this instant: closed after the
    /// linger.
    Ending(Feed, Instant),
    /// Left out, or closed: removed at the end of the turn.
    Dropped,
}

/// What was sent of one process, once closed.
struct Report {
    path: String,
    pid: u32,
    sent: producer::Sent,
    how: &'static str,
}

/// `tape record TARGET --relayd URL` and `tape record --all --relayd URL`:
/// the processes followed streamed to one relay session until they exit
/// (one process) or until stopped (`--all`: SIGINT, SIGTERM,
/// `--duration`, `--size`).
pub(crate) fn record(
    follow: Follow<'_>,
    options: Options,
    duration: Option<Duration>,
    limit: Option<u64>,
) -> Result<(), Failure> {
    let live_timer = options.live_timer;
    // The relay first: one that is not there leaves the processes unread.
    let mut session = Session::create(options)?;
    let mut traced: Vec<Traced> = Vec::new();
    let mut seen: std::collections::HashSet<std::path::PathBuf> = Default::default();
    if let Follow::One(dir) = follow {
        let r = tape::record::Recorder::attach_live(dir).map_err(|e| e.to_string())?;
        seen.insert(dir.to_path_buf());
        traced.push(Traced::Waiting(r));
    }
    crate::recover::catch_stop();
    let url = &session.options.url;
    crate::say!(
        "tape record: streaming {} to the relay daemon at {}:{} as {} (live: babeltrace2 \
         --input-format=lttng-live net://{}/host/{}/{}){}{}; Ctrl-C ends",
        match follow {
            Follow::One(_) => "the process",
            Follow::All => "every tape process of this user on this host",
        },
        url.host,
        url.control,
        session.path,
        url.host,
        session.options.hostname,
        session.options.session,
        duration.map_or(String::new(), |d| format!(" for {} s", d.as_secs_f64())),
        limit.map_or(String::new(), |l| format!(", up to {l} bytes"))
    );
    let me = std::process::id();
    let start = Instant::now();
    let mut tick = start;
    let mut checked = start;
    let mut refused: std::collections::HashSet<std::path::PathBuf> = Default::default();
    let mut idle = Duration::from_millis(1);
    let mut reports: Vec<Report> = Vec::new();
    let mut bytes_closed = 0u64;
    let why = loop {
        if crate::recover::stopped() {
            break "interrupted";
        }
        if duration.is_some_and(|d| start.elapsed() >= d) {
            break "--duration reached";
        }
        let bytes = bytes_closed
            + traced
                .iter()
                .map(|t| match t {
                    Traced::Fed(f) | Traced::Ending(f, _) => f.sent.bytes,
                    Traced::Waiting(_) | Traced::Dropped => 0,
                })
                .sum::<u64>();
        if limit.is_some_and(|l| bytes >= l) {
            break "--size reached";
        }
        if matches!(follow, Follow::One(_)) && traced.is_empty() {
            break "the process exited";
        }
        let ticked = tick.elapsed() >= live_timer;
        if ticked {
            tick = Instant::now();
        }
        let check = checked.elapsed() >= Duration::from_millis(50);
        if check {
            checked = Instant::now();
        }
        // 1. Read every followed process's rings (its death seen first, so
        //    that the end reads what it left).
        let mut came = false;
        let mut gone: Vec<bool> = Vec::with_capacity(traced.len());
        for t in &mut traced {
            let dead = match t {
                Traced::Fed(f) => {
                    let dead = check && !f.recorder.process_alive();
                    match f.take(ticked) {
                        Ok(c) => came |= c,
                        Err(e) => return_or_drop(&mut session, t, e)?,
                    }
                    dead
                }
                _ => false,
            };
            gone.push(dead);
        }
        // 2. New processes, and the ones waiting for their clock, started
        //    (published) before anything read is sent.
        if matches!(follow, Follow::All) {
            // At every turn: a process not seen now makes its events only
            // after what was read above (one directory listing; only the
            // new ones are read).
            for dir in tape::recover::ring_dir_paths().map_err(|e| e.to_string())? {
                if seen.contains(&dir) {
                    continue;
                }
                let d = tape::recover::describe_dir(&dir);
                if !d.alive || d.pid == me {
                    seen.insert(dir);
                    continue;
                }
                match tape::record::Recorder::attach_live(&dir) {
                    Ok(r) => {
                        seen.insert(dir);
                        traced.push(Traced::Waiting(r));
                        gone.push(false);
                    }
                    // Being made (its process file not yet whole), or read
                    // by another reader: tried again at the next turn,
                    // said once.
                    Err(e) => {
                        if refused.insert(dir) {
                            crate::say!(
                                "tape record: process {} ({}) not followed yet: {e}",
                                d.pid,
                                d.program
                            );
                        }
                    }
                }
            }
        }
        for t in &mut traced {
            if let Traced::Waiting(r) = t {
                if session.must_wait(r) {
                    continue;
                }
                let Traced::Waiting(r) = std::mem::replace(t, Traced::Dropped) else {
                    unreachable!()
                };
                let pid = r.pid();
                match Feed::start(&mut session, r) {
                    Ok(f) => *t = Traced::Fed(f),
                    Err(producer::Fault::Feed(e)) => {
                        crate::say!("tape record: process {pid}: {e}: left out")
                    }
                    Err(e) => return Err(e.to_string().into()),
                }
            }
        }
        // 3. Every ring made meanwhile published, 4. then what was read
        //    sent; a process gone ended (its last events sent).
        for t in &mut traced {
            if let Traced::Fed(f) = t {
                if let Err(e) = f.publish(&mut session) {
                    return_or_drop(&mut session, t, e)?;
                }
            }
        }
        for (t, dead) in traced.iter_mut().zip(gone) {
            if let Traced::Fed(f) = t {
                let sent = f.send(&mut session, ticked);
                let died = dead && f.recorder.rings_left();
                let ended = sent.and_then(|()| {
                    if dead {
                        f.end(&mut session, died)
                    } else {
                        Ok(())
                    }
                });
                if let Err(e) = ended {
                    return_or_drop(&mut session, t, e)?;
                    continue;
                }
                if dead {
                    let Traced::Fed(f) = std::mem::replace(t, Traced::Dropped) else {
                        unreachable!()
                    };
                    *t = Traced::Ending(f, Instant::now());
                }
            }
        }
        // 5. The ended ones closed after the linger.
        for t in &mut traced {
            if let Traced::Ending(_, since) = t {
                if since.elapsed() < session.linger() {
                    continue;
                }
                let Traced::Ending(f, _) = std::mem::replace(t, Traced::Dropped) else {
                    unreachable!()
                };
                let (path, pid) = (f.path.clone(), f.recorder.pid());
                match f.close(&mut session) {
                    Ok(sent) => {
                        bytes_closed += sent.bytes;
                        let how = if sent.died { "died" } else { "exited" };
                        reports.push(Report {
                            path,
                            pid,
                            sent,
                            how,
                        });
                    }
                    Err(producer::Fault::Feed(e)) => crate::say!("tape record: {path}: {e}"),
                    Err(e) => return Err(e.to_string().into()),
                }
            }
        }
        traced.retain(|t| !matches!(t, Traced::Dropped));
        idle = if came {
            Duration::from_millis(1)
        } else {
            (idle * 2).min(Duration::from_millis(20))
        };
        std::thread::sleep(idle.min(live_timer.saturating_sub(tick.elapsed())));
    };
    // The end: every process's data out, a linger for live viewers, the
    // streams closed, then the session.
    let mut ending: Vec<(Feed, &'static str)> = Vec::new();
    for t in traced {
        let (feed, how) = match t {
            Traced::Waiting(r) => match Feed::start(&mut session, r) {
                Ok(f) => (f, why),
                Err(producer::Fault::Feed(e)) => {
                    crate::say!("tape record: {e}");
                    continue;
                }
                Err(e) => return Err(e.to_string().into()),
            },
            Traced::Fed(f) => (f, why),
            Traced::Ending(f, _) => {
                let how = if f.sent.died { "died" } else { "exited" };
                (f, how)
            }
            Traced::Dropped => continue,
        };
        ending.push((feed, how));
    }
    for (f, _) in &mut ending {
        if let Err(e) = f.end(&mut session, false) {
            match e {
                producer::Fault::Feed(e) => crate::say!("tape record: {}: {e}", f.path),
                e => return Err(e.to_string().into()),
            }
        }
    }
    if !ending.is_empty() {
        std::thread::sleep(session.linger());
    }
    for (f, how) in ending {
        let (path, pid) = (f.path.clone(), f.recorder.pid());
        let sent = f.close(&mut session).map_err(|e| e.to_string())?;
        reports.push(Report {
            path,
            pid,
            sent,
            how,
        });
    }
    let session_path = session.path.clone();
    session.close()?;
    let secs = start.elapsed().as_secs_f64();
    let mut total = producer::Sent::default();
    let mut text = format!("streamed to the relay daemon as {session_path} ({why})\n");
    for r in &reports {
        text.push_str(&format!(
            "  {} (pid {}, {}): events {}, lost {}{}\n",
            r.path,
            r.pid,
            r.how,
            r.sent.events,
            r.sent.lost,
            if r.sent.late > 0 {
                format!(", late for a live viewer {}", r.sent.late)
            } else {
                String::new()
            }
        ));
        total.events += r.sent.events;
        total.bytes += r.sent.bytes;
        total.packets += r.sent.packets;
        total.lost += r.sent.lost;
    }
    text.push_str(&format!(
        "  processes: {}\n  events: {} ({:.0}/s)\n  packets: {}\n  bytes: {} ({:.1} MB/s)\n  lost: {}\n",
        reports.len(),
        total.events,
        total.events as f64 / secs,
        total.packets,
        total.bytes,
        total.bytes as f64 / secs / 1e6,
        total.lost,
    ));
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// A followed process's failure: the relay's is the error (every trace
/// is concerned); the trace's own is said, its streams closed (what it
/// sent stays readable), and it is left out.
fn return_or_drop(
    session: &mut Session,
    t: &mut Traced,
    e: producer::Fault,
) -> Result<(), Failure> {
    let producer::Fault::Feed(why) = e else {
        return Err(e.to_string().into());
    };
    if let Traced::Fed(f) | Traced::Ending(f, _) = std::mem::replace(t, Traced::Dropped) {
        crate::say!("tape record: {}: {why}: left out", f.path);
        let _ = f.close(session);
    }
    Ok(())
}
