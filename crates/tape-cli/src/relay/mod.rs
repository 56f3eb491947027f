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

/// `tape record TARGET --relayd URL`: the process whose rings are in
/// `dir` streamed to a relay session until it exits (or `--duration`,
/// `--size`, SIGINT).
pub(crate) fn record(
    dir: &Path,
    target: &str,
    options: Options,
    duration: Option<Duration>,
    limit: Option<u64>,
) -> Result<(), Failure> {
    let live_timer = options.live_timer;
    // The relay first: one that is not there leaves the process unread.
    let mut session = Session::create(options)?;
    let recorder = tape::record::Recorder::attach_live(dir).map_err(|e| e.to_string())?;
    crate::recover::catch_stop();
    let mut feed = Feed::start(&mut session, recorder)?;
    let url = &session.options.url;
    crate::say!(
        "tape record: streaming process {} to the relay daemon at {}:{} as {}/{} (live: \
         babeltrace2 --input-format=lttng-live net://{}/host/{}/{}; until it exits{}{}; \
         Ctrl-C ends)",
        feed.recorder.pid(),
        url.host,
        url.control,
        session.path,
        feed.path,
        url.host,
        session.options.hostname,
        session.options.session,
        duration.map_or(String::new(), |d| format!(", {} s", d.as_secs_f64())),
        limit.map_or(String::new(), |l| format!(", {l} bytes"))
    );
    let start = Instant::now();
    let mut tick = start;
    let mut checked = start;
    let mut idle = Duration::from_millis(1);
    let why = loop {
        if crate::recover::stopped() {
            break "interrupted";
        }
        if duration.is_some_and(|d| start.elapsed() >= d) {
            break "--duration reached";
        }
        if limit.is_some_and(|l| feed.sent.bytes >= l) {
            break "--size reached";
        }
        if checked.elapsed() >= Duration::from_millis(50) {
            checked = Instant::now();
            if !feed.recorder.process_alive() {
                break "the process exited";
            }
        }
        let ticked = tick.elapsed() >= live_timer;
        if ticked {
            tick = Instant::now();
        }
        let came = feed.turn(&mut session, ticked)?;
        idle = if came {
            Duration::from_millis(1)
        } else {
            (idle * 2).min(Duration::from_millis(20))
        };
        std::thread::sleep(idle.min(live_timer.saturating_sub(tick.elapsed())));
    };
    let unshared = feed.recorder.unshared_rings();
    let path = format!("{}/{}", session.path, feed.path);
    let sent = feed.finish(&mut session)?;
    session.close()?;
    let secs = start.elapsed().as_secs_f64();
    let mut text = format!(
        "streamed {target} to the relay daemon as {path} ({why})\n  events: {} ({:.0}/s)\n  \
         packets: {}\n  bytes: {} ({:.1} MB/s)\n  lost: {}\n",
        sent.events,
        sent.events as f64 / secs,
        sent.packets,
        sent.bytes,
        sent.bytes as f64 / secs / 1e6,
        sent.lost,
    );
    if sent.late > 0 {
        text.push_str(&format!(
            "  late for a live viewer (older than a beacon sent): {}\n",
            sent.late
        ));
    }
    if unshared > 0 {
        text.push_str(&format!(
            "  rings in private memory (not seen): {unshared}; their threads' events are not \
             here\n"
        ));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}
