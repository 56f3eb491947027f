//! Streaming to LTTng's relay daemon (`lttng-relayd`), the collector that
//! babeltrace2 and Trace Compass read live (issue 39): the producer
//! protocol's bytes (`wire`), a connection that speaks it (`client`), and
//! tape's side of it, a process's rings forwarded as a trace of a relay
//! session (`producer`), fed by the same consuming reader of the shared
//! rings that `tape record -o DIR` and `tape pipe` use.
//!
//! This file follows the processes: one (`tape record PID --relayd`) or
//! every tape process of this user on the host as they start and exit
//! (`--all`, the ring directories), each a trace of one relay session, in
//! turns of read, look for new ones, publish, send (`producer.rs` says
//! why in that order); a process gone is ended, and its trace's streams
//! stay open, beaconed at every tick, until the session ends (up to
//! [`MAX_ENDED_OPEN`] of them). A relay that goes away is retried with
//! backoff, the rings unread meanwhile, and the session resumed anew.
//!
//! **A live viewer behind** (a loaded host: issue 48 measured it with
//! lttng-relayd 2.13.9's and babeltrace2 2.0.4's logs) loses nothing: a
//! trace's streams are closed only after the session's trace chunk, so
//! the relay moves them all to no chunk in one rotation and the viewer
//! reads each to its end (a stream closed alone has its chunk dropped
//! without a rotation, and the relay hangs up a viewer behind on it, and
//! on the others with it); and a trace's metadata stream is published
//! with its first data streams, never alone (`producer.rs`).
//!
//! **No authentication.** The relay daemon trusts every peer and has no
//! TLS: keep it on loopback, a trusted network, or an ssh tunnel. What it
//! answers is read bounded and checked (`wire.rs`, `client.rs`).

pub(crate) mod client;
pub(crate) mod kernel;
pub(crate) mod producer;
pub(crate) mod wire;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::output::{output_error, Failure};
use kernel::KernelFeed;
use producer::{Feed, Options, Session};

/// The options of `tape record --relayd URL [--session NAME] [--live-timer
/// D] [--hostname H]`, checked (the error names the one that is wrong).
pub(crate) fn options(
    url: &str,
    session: String,
    live_timer: Option<&str>,
    hostname: Option<String>,
    live_port: u16,
    keep_unconfirmed: Option<&str>,
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
    let keep_unconfirmed = match keep_unconfirmed {
        None => producer::DEFAULT_KEEP_UNCONFIRMED,
        Some(v) => tape::config::parse_size("--keep-unconfirmed", v).map_err(|e| e.to_string())?,
    };
    Ok(Options {
        url,
        session,
        hostname,
        live_timer,
        live_port,
        keep_unconfirmed,
    })
}

/// What `tape record --relayd` follows: one process (its rings'
/// directory), or every tape process of this user on the host, as they
/// start (`--all`).
#[derive(Clone, Copy)]
pub(crate) enum Follow<'a> {
    One(&'a Path),
    All,
}

/// A process being forwarded, or waiting for its clock's calibration.
enum Traced {
    Waiting(tape_consumer::record::Recorder),
    Fed(Feed),
    /// Its data ended ([`Feed::end`]) at this instant: its streams kept
    /// open, beaconed, until the session ends ([`MAX_ENDED_OPEN`]).
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

impl Report {
    /// Of a process whose trace was never started (nothing of it sent).
    fn unstarted(r: &tape_consumer::record::Recorder) -> Report {
        Report {
            path: producer::trace_path(&r.program(), r.pid()),
            pid: r.pid(),
            sent: producer::Sent::default(),
            how: "not started: nothing sent",
        }
    }
}

/// The followed processes of one `tape record --relayd`, and its relay
/// session.
struct Host<'a> {
    follow: Follow<'a>,
    session: Session,
    traced: Vec<Traced>,
    /// Ring directories looked at already (followed, dead, our own).
    seen: HashSet<PathBuf>,
    /// Those that could not be followed yet (said once; tried again).
    refused: HashSet<PathBuf>,
    reports: Vec<Report>,
    /// Processes left out after a failure of their own (each said).
    left_out: usize,
    bytes_closed: u64,
    me: u32,
    /// The ring directory was refused (said once).
    dir_refused: bool,
    /// Unconfirmed packets were dropped past the cap (said once).
    unkept_said: bool,
    /// The kernel's events (`--kernel`), a trace of the session.
    kernel: Option<KernelFeed>,
    /// Why the kernel's events ended early (the exit says it failed).
    kernel_failed: Option<String>,
}

/// The relay gone (its connection failed): retried with backoff.
struct Outage {
    since: Instant,
    next_try: Instant,
    backoff: Duration,
    tries: u32,
}

/// The first retry's delay, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// A relay session that fails within this of its start delivered nothing
/// worth the retry: a relay that takes the connection but refuses a
/// command or garbles a reply fails every session so.
const FRUITFUL: Duration = Duration::from_secs(10);

/// Sessions in a row that fail within [`FRUITFUL`] before the recorder
/// gives the relay up (an error, the exit status 1): the backoff grows
/// across them, as it does while the relay does not answer at all.
const MAX_FRUITLESS: u32 = 5;

/// The most traces of ended processes kept open, their streams beaconed at
/// each tick, until the session ends: closing a trace's streams while a
/// live viewer has not read them all loses the rest for that viewer with
/// lttng-relayd 2.13 (the relay stream's chunk is put at its close, and
/// the viewer's streams are moved to no chunk: they hang up), so they are
/// closed with the session, after its trace chunk (module docs). Past
/// this, the oldest are closed (after the linger).
const MAX_ENDED_OPEN: usize = 64;

/// Why the relay is given up after `fruitless` sessions that each failed
/// at once, the last with `e`.
fn given_up_text(fruitless: u32, e: &dyn std::fmt::Display) -> String {
    format!(
        "the relay daemon failed {fruitless} sessions in a row, each within {} s of its start; \
         the last: {e}",
        FRUITFUL.as_secs()
    )
}

/// `tape record TARGET --relayd URL` and `tape record --all --relayd URL`:
/// the processes followed streamed to one relay session until they exit
/// (one process) or until stopped (`--all`: SIGINT, SIGTERM,
/// `--duration`, `--size`).
///
/// A relay that goes away mid-session (its connection fails) is retried
/// with backoff ([`RETRY_FIRST`] doubling to [`RETRY_MAX`]); meanwhile the
/// rings are not read, so they fill and their owners drop and count (the
/// programs never wait). Once it answers, the streams go on in a new
/// relay session: the packets the old one had not confirmed (`DATA_PENDING`)
/// sent again, and each stream's first packet there stating the losses
/// so far, so that the next one states what the outage cost.
pub(crate) fn record(
    follow: Follow<'_>,
    options: Options,
    duration: Option<Duration>,
    limit: Option<u64>,
    kernel: Option<tape_consumer::kernel::KernelRecorder>,
) -> Result<(), Failure> {
    // From here: a stop ends the run within its grace, and --duration
    // holds (from the command's start) whatever the relay does.
    let begun = Instant::now();
    crate::reader::catch_stop();
    if let Some(d) = duration {
        crate::reader::end_at(begun + d);
    }
    // Following every process: a ring directory that is not this user's
    // own and private (another user made it first) hides them all, so it
    // is an error naming it and its owner, not an empty session.
    if matches!(follow, Follow::All) {
        tape_consumer::recover::ring_dir_paths()
            .map_err(|e| format!("{e} (no process's rings can be followed there: remove it)"))?;
    }
    // The relay first: one that is not there leaves the processes unread.
    let session = Session::create(options).map_err(|e| e.to_string())?;
    let mut host = Host {
        follow,
        session,
        traced: Vec::new(),
        seen: HashSet::new(),
        refused: HashSet::new(),
        reports: Vec::new(),
        left_out: 0,
        bytes_closed: 0,
        me: std::process::id(),
        dir_refused: false,
        unkept_said: false,
        kernel: kernel.map(KernelFeed::new),
        kernel_failed: None,
    };
    if let Follow::One(dir) = follow {
        let r = tape_consumer::record::Recorder::attach_live(dir).map_err(|e| e.to_string())?;
        host.seen.insert(dir.to_path_buf());
        host.traced.push(Traced::Waiting(r));
    }
    say_start(&host, duration, limit);
    let mut run = Run::new(begun, host.session.path.clone());
    let why = loop {
        if let Some(why) = run.over(&host, duration, limit) {
            break why;
        }
        let stop = if run.outage.is_some() {
            run.retry(&mut host)
        } else {
            run.turn(&mut host)
        };
        if let Some(why) = stop {
            break why;
        }
    };
    run.end(host, why)
}

/// `tape record --relayd`'s first line: what it streams, where, and the
/// live URL a viewer opens.
fn say_start(host: &Host<'_>, duration: Option<Duration>, limit: Option<u64>) {
    let url = &host.session.options.url;
    crate::output::say!(
        "tape record: streaming {} to the relay daemon at {}:{} as {} (live: babeltrace2 \
         --input-format=lttng-live net://{}{}/host/{}/{}){}{}; Ctrl-C ends",
        match host.follow {
            Follow::One(_) => "the process",
            Follow::All => "every tape process of this user on this host",
        },
        url.host,
        url.control,
        host.session.path,
        url.host,
        match host.session.options.live_port {
            5344 => String::new(),
            p => format!(":{p}"),
        },
        host.session.options.hostname,
        host.session.options.session,
        duration.map_or(String::new(), |d| format!(" for {} s", d.as_secs_f64())),
        limit.map_or(String::new(), |l| format!(", up to {l} bytes"))
    );
}

/// The relay loop's state from turn to turn ([`record`]): the live
/// timer's tick, the rest between turns, an outage and its backoff, and
/// the relay sessions used.
struct Run {
    start: Instant,
    tick: Instant,
    checked: Instant,
    /// The next rest, and the last one as slept (cut by a tick).
    idle: Duration,
    slept: Duration,
    turned: Instant,
    outage: Option<Outage>,
    sessions: Vec<String>,
    /// When the session in use began, the backoff the next outage starts
    /// from, the sessions in a row that failed at once, and the error that
    /// made the recorder give the relay up.
    session_began: Instant,
    backoff: Duration,
    fruitless: u32,
    given_up: Option<String>,
}

impl Run {
    fn new(start: Instant, session: String) -> Run {
        let now = Instant::now();
        Run {
            start,
            tick: now,
            checked: start,
            idle: tape_consumer::record::REST_MIN,
            slept: tape_consumer::record::REST_MIN,
            turned: now,
            outage: None,
            sessions: vec![session],
            session_began: now,
            backoff: RETRY_FIRST,
            fruitless: 0,
            given_up: None,
        }
    }

    /// Why the run ends now, if it does: a stop, `--duration`, `--size`,
    /// or the one process followed gone.
    fn over(
        &self,
        host: &Host<'_>,
        duration: Option<Duration>,
        limit: Option<u64>,
    ) -> Option<&'static str> {
        if crate::reader::stopped() {
            return Some("interrupted");
        }
        if duration.is_some_and(|d| self.start.elapsed() >= d) {
            return Some("--duration reached");
        }
        if limit.is_some_and(|l| host.bytes() >= l) {
            return Some("--size reached");
        }
        // (An ended trace stays open until the session ends: it does not
        // count as followed.)
        if matches!(host.follow, Follow::One(_))
            && !host
                .traced
                .iter()
                .any(|t| matches!(t, Traced::Waiting(_) | Traced::Fed(_)))
        {
            return Some("the process exited");
        }
        None
    }

    /// In an outage: the relay tried again once its backoff is over (a
    /// new session, what the old one had not confirmed sent again); why
    /// the run ends, if the relay is given up.
    fn retry(&mut self, host: &mut Host<'_>) -> Option<&'static str> {
        let o = self.outage.as_mut()?;
        if Instant::now() >= o.next_try {
            o.tries += 1;
            match host.resume() {
                Ok(()) => {
                    crate::output::say!(
                        "tape record: the relay daemon answers again after {:.1} s: the \
                         streams go on in a new relay session, {} (what the old one had \
                         not confirmed sent again; the outage's losses counted in the \
                         rings)",
                        o.since.elapsed().as_secs_f64(),
                        host.session.path
                    );
                    self.sessions.push(host.session.path.clone());
                    self.session_began = Instant::now();
                    self.outage = None;
                }
                Err(e) => {
                    // It answers, and fails the new session at once.
                    if !matches!(
                        e,
                        producer::Fault::Relay(client::RelayError::Unreachable(_))
                    ) {
                        self.fruitless += 1;
                        if self.fruitless >= MAX_FRUITLESS {
                            self.given_up = Some(given_up_text(self.fruitless, &e));
                            return Some("the relay daemon given up");
                        }
                    }
                    if o.tries == 1 {
                        crate::output::say!("tape record: still no relay daemon: {e}; retrying");
                    }
                    o.backoff = (o.backoff * 2).min(RETRY_MAX);
                    self.backoff = o.backoff;
                    o.next_try = Instant::now() + o.backoff;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        None
    }

    /// One turn of every trace, then the rest; a failed turn begins an
    /// outage (or gives the relay up: why the run ends).
    fn turn(&mut self, host: &mut Host<'_>) -> Option<&'static str> {
        let live_timer = host.session.options.live_timer;
        let ticked = self.tick.elapsed() >= live_timer;
        if ticked {
            self.tick = Instant::now();
        }
        let check = self.checked.elapsed() >= Duration::from_millis(50);
        if check {
            self.checked = Instant::now();
        }
        let since = self.turned.elapsed();
        self.turned = Instant::now();
        match host.turn(ticked, check) {
            Ok(()) => self.idle = tape_consumer::record::rest(host.fill(), since, self.slept),
            Err(e) => {
                // A session that failed at once (a refusal, a garbled
                // reply) does not reset the backoff; enough of them in a
                // row and the relay is given up.
                if self.session_began.elapsed() < FRUITFUL {
                    self.fruitless += 1;
                    self.backoff = (self.backoff * 2).min(RETRY_MAX);
                } else {
                    self.fruitless = 1;
                    self.backoff = RETRY_FIRST;
                }
                if self.fruitless >= MAX_FRUITLESS {
                    self.given_up = Some(given_up_text(self.fruitless, &e));
                    return Some("the relay daemon given up");
                }
                crate::output::say!(
                    "tape record: the relay daemon went away ({e}); retrying in {:.1} s, the \
                     rings not read meanwhile (their losses counted)",
                    self.backoff.as_secs_f64()
                );
                let now = Instant::now();
                self.outage = Some(Outage {
                    since: now,
                    next_try: now + self.backoff,
                    backoff: self.backoff,
                    tries: 0,
                });
                return None;
            }
        }
        // (Cut short by the live timer's tick: what the next rest is
        // worked out from is the time slept.)
        self.slept = self
            .idle
            .min(live_timer.saturating_sub(self.tick.elapsed()));
        std::thread::sleep(self.slept);
        None
    }

    /// Ends the run (`why`): however it ends, what each process got, a
    /// failure's report too (what was sent before it), then the error.
    fn end(self, mut host: Host<'_>, why: &'static str) -> Result<(), Failure> {
        let mut sessions = self.sessions;
        let secs = || self.start.elapsed().as_secs_f64();
        let failed = |host: Host<'_>, sessions: &[String], e: String| -> Result<(), Failure> {
            let kernel = host.kernel_text();
            let (reports, left_out) = host.reports_so_far();
            let why = "ended by the error below";
            print_summary(&reports, left_out, sessions, why, secs(), &kernel)?;
            Err(e.into())
        };
        if let Some(e) = self.given_up {
            let e = format!(
                "{e}; sent before: {} bytes in {} relay session(s) ({})",
                host.bytes(),
                sessions.len(),
                sessions.join(", ")
            );
            return failed(host, &sessions, e);
        }
        if self.outage.is_some() {
            // One last try: what the rings hold is sent if the relay is back.
            if let Err(e) = host.resume() {
                let e = format!(
                    "the relay daemon is still away ({e}): the events since it went are not \
                     sent (the rings of the processes still running hold the newest)"
                );
                return failed(host, &sessions, e);
            }
            sessions.push(host.session.path.clone());
        }
        let (reports, left_out, failure, kernel) = host.finish(why);
        match failure {
            None => {
                print_summary(&reports, left_out, &sessions, why, secs(), &kernel.0)?;
                match kernel.1 {
                    Some(e) => {
                        Err(format!("tape record: the kernel's events ended early: {e}").into())
                    }
                    None => Ok(()),
                }
            }
            Some(e) => {
                let why = "its end cut short";
                print_summary(&reports, left_out, &sessions, why, secs(), &kernel.0)?;
                Err(e.into())
            }
        }
    }
}

/// What a summary line adds to a trace's events and losses, when it
/// has some: late ones, those sent again, those no longer kept.
fn sent_extras(sent: &producer::Sent) -> String {
    let mut extra = String::new();
    if sent.late > 0 {
        extra.push_str(&format!(", late for a live viewer {}", sent.late));
    }
    if sent.resent > 0 {
        extra.push_str(&format!(", sent again after an outage {}", sent.resent));
    }
    if sent.unkept > 0 {
        extra.push_str(&format!(
            ", not kept for sending again {} (lost if the relay had not written them)",
            sent.unkept
        ));
    }
    extra
}

/// `tape record --relayd`'s summary on stdout: each process with what it
/// sent and lost, then the totals.
fn print_summary(
    reports: &[Report],
    left_out: usize,
    sessions: &[String],
    why: &str,
    secs: f64,
    kernel: &str,
) -> Result<(), Failure> {
    let mut total = producer::Sent::default();
    let mut text = format!(
        "streamed to the relay daemon as {} ({why})\n",
        sessions.join(", then ")
    );
    for r in reports {
        let extra = sent_extras(&r.sent);
        text.push_str(&format!(
            "  {} (pid {}, {}): events {}, lost {}{extra}\n",
            r.path, r.pid, r.how, r.sent.events, r.sent.lost,
        ));
        total.events += r.sent.events;
        total.bytes += r.sent.bytes;
        total.packets += r.sent.packets;
        total.lost += r.sent.lost;
    }
    text.push_str(&format!(
        "  processes: {}\n  events: {} ({:.0}/s)\n  packets: {}\n  bytes: {} ({:.1} MB/s)\n  \
         lost: {}\n",
        reports.len(),
        total.events,
        total.events as f64 / secs,
        total.packets,
        total.bytes,
        total.bytes as f64 / secs / 1e6,
        total.lost,
    ));
    if left_out > 0 {
        text.push_str(&format!(
            "  left out: {left_out} process(es), each said above with why (nothing of it sent \
             after that)\n"
        ));
    }
    text.push_str(kernel);
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

impl Host<'_> {
    /// Bytes sent so far.
    fn bytes(&self) -> u64 {
        self.bytes_closed
            + self
                .traced
                .iter()
                .map(|t| match t {
                    Traced::Fed(f) | Traced::Ending(f, _) => f.sent.bytes,
                    Traced::Waiting(_) | Traced::Dropped => 0,
                })
                .sum::<u64>()
    }

    /// One turn (how much of a ring it took: [`Host::fill`]). A trace's
    /// own failure leaves it out (said); the relay's is the error.
    fn turn(&mut self, ticked: bool, check: bool) -> Result<(), producer::Fault> {
        // 1. Read every followed process's rings (its death seen first, so
        //    that the end reads what it left).
        let mut gone: Vec<bool> = Vec::with_capacity(self.traced.len());
        for t in &mut self.traced {
            let dead = match t {
                Traced::Fed(f) => {
                    let dead = check && !f.recorder.process_alive();
                    if let Err(e) = f.take(ticked) {
                        drop_feed(&mut self.session, t, e, &mut self.left_out)?;
                    }
                    dead
                }
                _ => false,
            };
            gone.push(dead);
        }
        // 2. New processes, and the ones waiting for their clock, started
        //    (published) before anything read is sent.
        if matches!(self.follow, Follow::All) {
            self.look_for_processes(&mut gone);
        }
        for t in &mut self.traced {
            if let Traced::Waiting(r) = t {
                // Its rings mapped as they come: a ring file goes with its
                // thread, and the mapping keeps what it holds. A process
                // gone waits no longer for a longer calibration (none is
                // coming): its trace starts with the one it has.
                r.find_new_rings();
                if self.session.must_wait(r) && r.process_alive() {
                    continue;
                }
                let Traced::Waiting(r) = std::mem::replace(t, Traced::Dropped) else {
                    unreachable!()
                };
                let (pid, dir) = (r.pid(), r.dir().to_path_buf());
                match Feed::start(&mut self.session, r) {
                    Ok(f) => *t = Traced::Fed(f),
                    Err(producer::Fault::Feed(e)) => {
                        self.left_out += 1;
                        crate::output::say!("tape record: process {pid}: {e}: left out")
                    }
                    Err(e) => {
                        // Followed again once the relay is back.
                        self.seen.remove(&dir);
                        return Err(e);
                    }
                }
            }
        }
        // 3. Every ring made meanwhile published, 4. then what was read
        //    sent; a process gone ended (its last events sent).
        for t in &mut self.traced {
            if let Traced::Fed(f) = t {
                if let Err(e) = f.publish(&mut self.session) {
                    drop_feed(&mut self.session, t, e, &mut self.left_out)?;
                }
            }
        }
        for (t, dead) in self.traced.iter_mut().zip(gone) {
            // An ended trace's streams stay open, their times carried on by
            // beacons (module docs: a live viewer behind).
            if let Traced::Ending(f, _) = t {
                if let Err(e) = f.send(&mut self.session, ticked) {
                    drop_feed(&mut self.session, t, e, &mut self.left_out)?;
                }
                continue;
            }
            if let Traced::Fed(f) = t {
                let died = dead && f.recorder.rings_left();
                let sent = f.send(&mut self.session, ticked);
                let ended = sent.and_then(|()| {
                    if dead {
                        f.end(&mut self.session, died)
                    } else {
                        Ok(())
                    }
                });
                if let Err(e) = ended {
                    drop_feed(&mut self.session, t, e, &mut self.left_out)?;
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
        // The kernel's, after the programs' (their clocks known first).
        if let Some(k) = self.kernel.as_mut() {
            if let Err(e) = k.turn(&mut self.session, ticked) {
                self.drop_kernel(e)?;
            }
        }
        self.trim_kept();
        // 5. Past MAX_ENDED_OPEN ended traces, the oldest closed (after
        //    the linger at least).
        let linger = self.session.linger();
        let mut ended: Vec<(Instant, usize)> = self
            .traced
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match t {
                Traced::Ending(_, since) if since.elapsed() >= linger => Some((*since, i)),
                _ => None,
            })
            .collect();
        let open = self
            .traced
            .iter()
            .filter(|t| matches!(t, Traced::Ending(..)))
            .count();
        ended.sort();
        let mut lingered = Vec::new();
        for &(_, i) in ended.iter().take(open.saturating_sub(MAX_ENDED_OPEN)) {
            let Traced::Ending(f, _) = std::mem::replace(&mut self.traced[i], Traced::Dropped)
            else {
                unreachable!()
            };
            lingered.push(f);
        }
        for f in lingered {
            self.close(f, None)?;
        }
        self.traced.retain(|t| !matches!(t, Traced::Dropped));
        Ok(())
    }

    /// The largest share of a ring's room the last turn took, over every
    /// process followed.
    fn fill(&self) -> f64 {
        self.traced
            .iter()
            .filter_map(|t| match t {
                Traced::Fed(f) | Traced::Ending(f, _) => Some(f.fill()),
                _ => None,
            })
            .fold(0.0, f64::max)
    }

    /// Keeps the unconfirmed packets of every trace within the cap
    /// (`--keep-unconfirmed`): the oldest of the session go first,
    /// counted by their traces as not kept (said once).
    fn trim_kept(&mut self) {
        let cap = self.session.options.keep_unconfirmed;
        let feeds = || {
            self.traced.iter().filter_map(|t| match t {
                Traced::Fed(f) | Traced::Ending(f, _) => Some(f),
                _ => None,
            })
        };
        let mut kept: usize = feeds().map(Feed::kept_bytes).sum::<usize>()
            + self.kernel.as_ref().map_or(0, KernelFeed::kept_bytes);
        if kept <= cap {
            return;
        }
        if !self.unkept_said {
            self.unkept_said = true;
            crate::output::say!(
                "tape record: the relay daemon has not confirmed {kept} bytes of packets sent \
                 (DATA_PENDING): past --keep-unconfirmed ({cap} bytes) the oldest are no \
                 longer kept for sending again after an outage (counted: \"not kept for \
                 sending again\")"
            );
        }
        while kept > cap {
            let oldest = self
                .traced
                .iter_mut()
                .filter_map(|t| match t {
                    Traced::Fed(f) | Traced::Ending(f, _) => Some(f),
                    _ => None,
                })
                .filter_map(|f| f.oldest_kept().map(|o| (o, f)))
                .min_by_key(|(o, _)| *o);
            let kernel = self
                .kernel
                .as_mut()
                .and_then(|k| k.oldest_kept().map(|o| (o, k)));
            let freed = match (oldest, kernel) {
                (Some((o, _)), Some((ko, k))) if ko < o => k.drop_oldest_kept(),
                (Some((_, f)), _) => f.drop_oldest_kept(),
                (None, Some((_, k))) => k.drop_oldest_kept(),
                (None, None) => break,
            };
            if freed == 0 {
                break;
            }
            kept -= freed;
        }
    }

    /// The ring directories that appeared since the last look: their
    /// processes followed (one directory listing; only new ones read).
    fn look_for_processes(&mut self, gone: &mut Vec<bool>) {
        let dirs = match tape_consumer::recover::ring_dir_paths() {
            Ok(d) => d,
            // Made unusable under a running recorder: said once.
            Err(e) => {
                if !self.dir_refused {
                    self.dir_refused = true;
                    crate::output::say!("tape record: no new process can be followed: {e}");
                }
                return;
            }
        };
        for dir in dirs {
            if self.seen.contains(&dir) {
                continue;
            }
            let d = tape_consumer::recover::describe_dir(&dir);
            if !d.alive || d.pid == self.me {
                self.seen.insert(dir);
                continue;
            }
            match tape_consumer::record::Recorder::attach_live(&dir) {
                Ok(r) => {
                    if let Some(k) = self.kernel.as_mut() {
                        // From now (before this turn's read of the
                        // kernel's pages), not once its trace starts; its
                        // threads made later are its forks: followed.
                        k.recorder
                            .follow(&tape_consumer::kernel::tracefs::threads(r.pid()));
                    }
                    self.seen.insert(dir);
                    self.traced.push(Traced::Waiting(r));
                    gone.push(false);
                }
                // Being made (its process file not yet whole), or read by
                // another reader: tried again at the next turn, said once.
                Err(e) => {
                    if self.refused.insert(dir) {
                        crate::output::say!(
                            "tape record: process {} ({}) not followed yet: {e}",
                            d.pid,
                            d.program
                        );
                    }
                }
            }
        }
    }

    /// Closes `f`'s streams and reports it (`how`: as it ended, by
    /// default whether its process exited or died).
    fn close(&mut self, f: Feed, how: Option<&'static str>) -> Result<(), producer::Fault> {
        let (path, pid) = (f.path.clone(), f.recorder.pid());
        let sent = f.close(&mut self.session)?;
        let how = how.unwrap_or(if sent.died { "died" } else { "exited" });
        self.bytes_closed += sent.bytes;
        self.reports.push(Report {
            path,
            pid,
            sent,
            how,
        });
        Ok(())
    }

    /// The kernel's own failure: said, its streams closed (what it sent
    /// stays readable), its instance removed, the exit made a failure;
    /// the relay's is the error.
    fn drop_kernel(&mut self, e: producer::Fault) -> Result<(), producer::Fault> {
        let producer::Fault::Feed(why) = e else {
            return Err(e);
        };
        crate::output::say!("tape record: the kernel's events end here: {why}");
        if let Some(k) = self.kernel.take() {
            let _ = k.close(&mut self.session);
        }
        self.kernel_failed = Some(why);
        Ok(())
    }

    /// The summary's lines for the kernel's events (none without
    /// `--kernel`).
    fn kernel_text(&self) -> String {
        let Some(k) = &self.kernel else {
            return match &self.kernel_failed {
                Some(e) => format!("  kernel: ended early: {e}\n"),
                None => String::new(),
            };
        };
        let sent = &k.sent;
        let mut t = match &k.stats {
            Some(stats) => stats.summary_line(),
            None => String::new(),
        };
        t.push_str(&format!(
            "  its trace on the relay (`{}`): events {} in {} packets",
            kernel::PATH,
            sent.events,
            sent.packets
        ));
        t.push_str(&sent_extras(sent));
        t.push('\n');
        t
    }

    /// After an outage: a new relay session, every trace's streams made
    /// again in it. Traces that ended meanwhile are reported.
    fn resume(&mut self) -> Result<(), producer::Fault> {
        self.session.reconnect()?;
        if let Some(k) = self.kernel.as_mut() {
            if let Err(e) = k.resume(&mut self.session) {
                self.drop_kernel(e)?;
            }
        }
        for t in &mut self.traced {
            match t {
                Traced::Fed(f) => f.resume(&mut self.session)?,
                // Everything of it was confirmed before it ended.
                Traced::Ending(..) => {
                    let Traced::Ending(f, _) = std::mem::replace(t, Traced::Dropped) else {
                        unreachable!()
                    };
                    let how = if f.sent.died { "died" } else { "exited" };
                    self.reports.push(Report {
                        path: f.path.clone(),
                        pid: f.recorder.pid(),
                        sent: f.sent,
                        how,
                    });
                }
                Traced::Waiting(_) | Traced::Dropped => {}
            }
        }
        self.traced.retain(|t| !matches!(t, Traced::Dropped));
        Ok(())
    }

    /// What each process got so far, without ending anything (the run
    /// ends by an error: the relay is gone): the closed ones' reports and
    /// the others' as they stand; and how many were left out.
    fn reports_so_far(mut self) -> (Vec<Report>, usize) {
        let mut reports = std::mem::take(&mut self.reports);
        for t in &self.traced {
            let (f, how) = match t {
                Traced::Fed(f) => (f, "cut off by the relay's failure"),
                Traced::Ending(f, _) if f.sent.died => (f, "died"),
                Traced::Ending(f, _) => (f, "exited"),
                Traced::Waiting(r) => {
                    reports.push(Report::unstarted(r));
                    continue;
                }
                Traced::Dropped => continue,
            };
            reports.push(Report {
                path: f.path.clone(),
                pid: f.recorder.pid(),
                sent: f.sent,
                how,
            });
        }
        (reports, self.left_out)
    }

    /// The end: every process's data out, a linger for live viewers, the
    /// streams closed, then the session. The reports, how many processes
    /// were left out, and the relay's failure if one cut the end short
    /// (the reports then say what each had sent).
    /// With the kernel's summary lines, and why its events ended early.
    #[allow(clippy::type_complexity)]
    fn finish(
        mut self,
        why: &'static str,
    ) -> (Vec<Report>, usize, Option<String>, (String, Option<String>)) {
        let mut ending: Vec<(Feed, &'static str)> = Vec::new();
        let mut failure: Option<String> = None;
        for t in std::mem::take(&mut self.traced) {
            let (feed, how) = match t {
                Traced::Waiting(r) if failure.is_none() => {
                    let unstarted = Report::unstarted(&r);
                    match Feed::start(&mut self.session, r) {
                        Ok(f) => (f, why),
                        Err(producer::Fault::Feed(e)) => {
                            self.left_out += 1;
                            crate::output::say!("tape record: {e}: left out");
                            continue;
                        }
                        Err(e) => {
                            failure = Some(e.to_string());
                            self.reports.push(unstarted);
                            continue;
                        }
                    }
                }
                Traced::Waiting(r) => {
                    self.reports.push(Report::unstarted(&r));
                    continue;
                }
                Traced::Fed(f) => (f, why),
                Traced::Ending(f, _) => {
                    let how = if f.sent.died { "died" } else { "exited" };
                    (f, how)
                }
                Traced::Dropped => continue,
            };
            ending.push((feed, how));
        }
        for (f, how) in &mut ending {
            if failure.is_some() {
                break;
            }
            if let Err(e) = f.end(&mut self.session, false) {
                match e {
                    producer::Fault::Feed(e) => crate::output::say!("tape record: {}: {e}", f.path),
                    e => {
                        failure = Some(e.to_string());
                        *how = "its end cut off by the relay's failure";
                    }
                }
            }
        }
        // The kernel's last events, after the programs' (a program's
        // end is in the kernel's too).
        if let (Some(k), None) = (self.kernel.as_mut(), &failure) {
            if let Err(e) = k.end(&mut self.session) {
                if let Err(e) = self.drop_kernel(e) {
                    failure = Some(e.to_string());
                }
            }
        }
        if (!ending.is_empty() || self.kernel.is_some()) && failure.is_none() {
            std::thread::sleep(self.session.linger());
        }
        // The chunk first, then the streams (`Session::close_chunk`).
        if failure.is_none() {
            if let Err(e) = self.session.close_chunk() {
                failure = Some(e.to_string());
            }
        }
        for (f, how) in ending {
            if failure.is_some() {
                // Not closed (the relay failed): reported as it stands.
                self.reports.push(Report {
                    path: f.path.clone(),
                    pid: f.recorder.pid(),
                    sent: f.sent,
                    how: if how == why {
                        "cut off by the relay's failure"
                    } else {
                        how
                    },
                });
                continue;
            }
            let (path, pid, sent) = (f.path.clone(), f.recorder.pid(), f.sent);
            if let Err(e) = self.close(f, Some(how)) {
                failure = Some(e.to_string());
                self.reports.push(Report {
                    path,
                    pid,
                    sent,
                    how: "its end cut off by the relay's failure",
                });
            }
        }
        if let (Some(k), None) = (self.kernel.as_ref(), &failure) {
            if let Err(e) = k.close(&mut self.session) {
                failure = Some(e.to_string());
            }
        }
        let kernel = (self.kernel_text(), self.kernel_failed.take());
        let reports = std::mem::take(&mut self.reports);
        (reports, self.left_out, failure, kernel)
    }
}

/// A followed process's failure: the relay's is the error (every trace
/// is concerned); the trace's own is said, its streams closed (what it
/// sent stays readable), and it is left out.
fn drop_feed(
    session: &mut Session,
    t: &mut Traced,
    e: producer::Fault,
    left_out: &mut usize,
) -> Result<(), producer::Fault> {
    let producer::Fault::Feed(why) = e else {
        return Err(e);
    };
    if let Traced::Fed(f) | Traced::Ending(f, _) = std::mem::replace(t, Traced::Dropped) {
        *left_out += 1;
        crate::output::say!("tape record: {}: {why}: left out", f.path);
        let _ = f.close(session);
    }
    Ok(())
}
