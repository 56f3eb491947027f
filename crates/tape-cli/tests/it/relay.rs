//! `tape record --relayd` (issue 39) against the real relay daemon
//! (Debian's `lttng-relayd`) and the real live viewer (`babeltrace2
//! --input-format=lttng-live`), on loopback: tape's `flight` example
//! (threads of numbered, checksummed events) streamed by `tape record
//! --all`, read back live and from the relay's disk by babeltrace2 and
//! `tape show`. Skipped with a notice without the tools (a failure under
//! `TAPE_REQUIRE_TOOLS=1`).

use crate::flight::{self, base, flight_command, text};
use crate::pipeline::{self, TAPE};
use crate::shared;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on loopback (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child killed when dropped (a failing test leaves no daemon behind).
pub(crate) struct Killed(pub(crate) Child);

impl Killed {
    /// Ends the recorder with SIGINT (as Ctrl-C): its exit status, and what
    /// it printed on stdout and stderr (both piped).
    pub(crate) fn interrupt(&mut self) -> (std::process::ExitStatus, String, String) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let status = self.0.wait().unwrap();
        let (mut said, mut err) = (String::new(), String::new());
        std::io::Read::read_to_string(self.0.stdout.as_mut().unwrap(), &mut said).unwrap();
        std::io::Read::read_to_string(self.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        (status, said, err)
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real relay daemon on loopback, writing under `out`.
pub(crate) struct Relayd {
    _child: Killed,
    pub(crate) out: PathBuf,
    pub(crate) control: u16,
    pub(crate) data: u16,
    pub(crate) live: u16,
}

impl Relayd {
    /// `None` (after a notice) where `lttng-relayd` or `babeltrace2` is
    /// not installed.
    fn start(out: &Path) -> Option<Relayd> {
        let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok();
        if !have("lttng-relayd") || !have("babeltrace2") || !have("stdbuf") {
            shared::required(
                "tape record --relayd against the real relay daemon and live viewer",
                "apt-get install lttng-tools babeltrace2",
            );
            return None;
        }
        let (control, data, live) = (free_port(), free_port(), free_port());
        let mut r = Relayd {
            _child: Killed(Command::new("true").spawn().unwrap()),
            out: out.to_path_buf(),
            control,
            data,
            live,
        };
        r.restart();
        Some(r)
    }

    /// Kills the daemon (SIGKILL) if it runs, and starts it again on the
    /// same ports and output directory; returns once it listens.
    pub(crate) fn restart(&mut self) {
        let tcp = |p: u16| format!("tcp://127.0.0.1:{p}");
        self.kill();
        let child = Command::new("lttng-relayd")
            .args(["-C", &tcp(self.control), "-D", &tcp(self.data)])
            .args(["-L", &tcp(self.live), "-o"])
            .arg(&self.out)
            .env("LTTNG_HOME", &self.out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self._child = Killed(child);
        // It listens once it has started (bounded wait).
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.live)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "lttng-relayd did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the daemon (SIGKILL).
    pub(crate) fn kill(&mut self) {
        let _ = self._child.0.kill();
        let _ = self._child.0.wait();
    }

    pub(crate) fn url(&self) -> String {
        format!("net://127.0.0.1:{}:{}", self.control, self.data)
    }
}

/// `tape record --all --relayd` to `relayd` for the programs of `shm`,
/// host `h`, a live timer of 100 ms, its output piped.
fn record_all(relayd: &Relayd, shm: &Path) -> Killed {
    record_all_as(relayd, shm, "h", "100ms", &[])
}

/// `tape record --all --relayd` to `relayd` for the programs of `shm`,
/// as `host`, with this live timer and `more` options, its output piped.
pub(crate) fn record_all_as(
    relayd: &Relayd,
    shm: &Path,
    host: &str,
    live_timer: &str,
    more: &[&str],
) -> Killed {
    Killed(
        Command::new(TAPE)
            .args(["record", "--all", "--relayd", &relayd.url()])
            .args(["--hostname", host, "--live-timer", live_timer])
            .args(more)
            .env("TAPE_SHM_DIR", shm)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Waits (10 s at most) for `host`'s first session on the relay's disk:
/// a live viewer can attach.
pub(crate) fn wait_for_session(relayd: &Relayd, host: &str) {
    let t = Instant::now();
    while !relayd.out.join(host).is_dir() {
        assert!(t.elapsed() < Duration::from_secs(10), "no relay session");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A line of the live viewer, and when it arrived (ns since the epoch).
struct Arrived {
    at: i128,
    line: String,
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

/// `[1795780950.390109676]` at a line's start, in ns.
fn line_time(line: &str) -> Option<i128> {
    let t = line.strip_prefix('[')?.split(']').next()?;
    let (s, ns) = t.split_once('.')?;
    Some(s.parse::<i128>().ok()? * 1_000_000_000 + ns.parse::<i128>().ok()?)
}

/// The value after `key = ` in a babeltrace2 text line.
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!(" {key} = "))? + key.len() + 4;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The events each flight program said it emitted (its stderr).
pub(crate) fn emitted(c: Child) -> u64 {
    let out = c.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    pipeline::number_after(
        err.lines()
            .find(|l| l.starts_with("flight: "))
            .unwrap_or_else(|| panic!("{err}")),
        "flight: ",
    )
}

/// A test's place: its directory, a relay daemon writing under its
/// `relay`, and its `shm` for the programs' rings; `None` (said) without
/// lttng-relayd.
pub(crate) fn set_up(name: &str) -> Option<(PathBuf, Relayd, PathBuf)> {
    let base = base(name);
    let relayd = Relayd::start(&base.join("relay"))?;
    let shm = base.join("shm");
    std::fs::create_dir_all(&shm).unwrap();
    Some((base, relayd, shm))
}

/// Three tape programs (two threads each, one with a third thread silent
/// until late), started one after the other over 20 s, streamed by one
/// `tape record --all --relayd`, with `babeltrace2 --input-format=lttng-
/// live` attached before the first starts: the live view and the relay's
/// disk (read by babeltrace2, with nothing on its stderr, and by `tape
/// show`) hold every event exactly once, and the live view shows each
/// within 2 s of its time.
#[test]
fn every_process_of_the_host_reaches_the_relay_live_and_on_disk() {
    fleet("relay-fleet", 0);
}

/// The same with four CPU hogs beside it (busy loops: the run queue holds
/// 5 or more threads on this 2-core machine, measured), as a loaded host
/// (issue 48, fault 7: beside a full test run the live viewer stopped,
/// 36,582 of 364,544 events shown). Every event still reaches the live
/// view once; only the live delay is not bounded (the viewer's share of
/// the cores is).
#[test]
fn every_process_reaches_the_live_view_on_a_loaded_host() {
    fleet("relay-fleet-loaded", 4);
}

/// Busy loops, killed when dropped (held for that).
struct Hogs(#[allow(dead_code)] Vec<Killed>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    Killed(
                        Command::new("sh")
                            .args(["-c", "while :; do :; done"])
                            .spawn()
                            .unwrap(),
                    )
                })
                .collect(),
        )
    }
}

/// The threads runnable on the machine (`/proc/stat`'s `procs_running`),
/// sampled every 100 ms while it runs: their mean, when stopped.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<f64>,
}

impl Load {
    fn sample() -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut sum, mut n) = (0u64, 0u64);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
                    if let Some(r) = stat
                        .lines()
                        .find_map(|l| l.strip_prefix("procs_running "))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                    {
                        sum += r;
                        n += 1;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                sum as f64 / n.max(1) as f64
            })
        };
        Load { stop, sampler }
    }

    fn mean(self) -> f64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}

/// Three tape programs streamed by `tape record --all --relayd` with a
/// live viewer attached, `hogs` busy loops beside them (see the two
/// tests above).
fn fleet(name: &str, hogs: usize) {
    let Some((base, relayd, shm)) = set_up(name) else {
        return;
    };
    // It times a live view (each event within 2 s, without hogs): alone,
    // as the pipe's latency tests; the load, if any, is its own hogs'.
    let _alone = crate::ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let _hogs = Hogs::start(hogs);
    let load = Load::sample();
    let host = "tapehost";
    let recorder = record_all_as(&relayd, &shm, host, "200ms", &[]);
    // The viewer attaches once the session exists (its directory).
    wait_for_session(&relayd, host);
    let mut viewer = Killed(
        Command::new("stdbuf")
            .args(["-oL", "babeltrace2", "--clock-seconds"])
            .args(["--input-format=lttng-live"])
            .arg(format!("net://127.0.0.1:{}/host/{host}/tape", relayd.live))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = viewer.0.stdout.take().unwrap();
    let arrived = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let lines = {
        let arrived = arrived.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let a = Arrived { at: now_ns(), line };
                arrived.lock().unwrap().push(a);
            }
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    // 20 s: programs of 12 s started 4 s apart; the second one's third
    // thread emits only after 6 s.
    let mut programs = Vec::new();
    for k in 0..3 {
        let mut c = flight_command(&shm, "discard");
        c.env("TAPE_TRACE_BUFSZ", "1M")
            .env("TAPE_TRACE_PACKETSZ", "16K")
            .args(["--threads", "2", "--seconds", "12", "--pace", "5"]);
        if k == 1 {
            c.args(["--late", "6000"]);
        }
        programs.push(c.spawn().unwrap());
        if k < 2 {
            std::thread::sleep(Duration::from_secs(4));
        }
    }
    let total: u64 = programs.into_iter().map(emitted).sum();
    std::thread::sleep(Duration::from_secs(1));
    let runnable = load.mean();
    // SIGINT ends the recording: what is left is sent, the session closed.
    let mut recorder = recorder;
    let (status, said, err) = recorder.interrupt();
    assert!(status.success(), "{said}{err}");
    assert!(said.contains("processes: 3\n"), "{said}");
    assert!(said.contains("  lost: 0\n"), "{said}");
    assert_eq!(pipeline::number_after(&said, "  events: "), total, "{said}");
    // The viewer ends with the session (bounded).
    let t = Instant::now();
    let status = loop {
        if let Some(s) = viewer.0.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let got = arrived.lock().unwrap();
            panic!(
                "the live viewer did not end: {} of {total} events shown ({runnable:.1} \
                 threads runnable on average), the last: {:?}",
                got.len(),
                got.last().map(|a| &a.line)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(viewer.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "babeltrace2 live: {err}");
    assert!(err.trim().is_empty(), "babeltrace2 live says: {err}");
    lines.join().unwrap();
    let live = std::mem::take(&mut *arrived.lock().unwrap());

    // Live: each event once, each within 2 s of its time.
    let mut seen: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut worst = 0i128;
    let mut delays: Vec<i128> = Vec::new();
    for a in &live {
        let (Some(t), Some(tid), Some(seq)) = (
            line_time(&a.line),
            field(&a.line, "tid"),
            field(&a.line, "seq"),
        ) else {
            panic!("not an event line: {}", a.line);
        };
        assert!(seen.insert((tid, seq)), "twice live: {}", a.line);
        let d = a.at - t;
        worst = worst.max(d);
        delays.push(d);
    }
    assert_eq!(live.len() as u64, total, "live events against emitted");
    delays.sort_unstable();
    let p99 = delays[delays.len() * 99 / 100];
    eprintln!(
        "relay fleet ({hogs} hogs, {runnable:.1} threads runnable on average): {total} \
         events in 20 s; live delay worst {:.3} s, p99 {:.3} s",
        worst as f64 / 1e9,
        p99 as f64 / 1e9
    );
    if hogs == 0 {
        assert!(
            worst < 2_000_000_000,
            "an event shown {worst} ns after its time"
        );
    } else {
        assert!(
            runnable >= 5.0,
            "a loaded host: {runnable:.1} threads runnable on average, not 5"
        );
    }

    // The relay's disk: babeltrace2 reads it with nothing to say, every
    // event once; tape show reads each process's trace whole, every
    // thread's sequence without gaps.
    let disk = relayd.out.join(host);
    let b = Command::new("babeltrace2").arg(&disk).output().unwrap();
    assert!(b.status.success(), "{}", text(&b.stderr));
    assert!(b.stderr.is_empty(), "babeltrace2 says: {}", text(&b.stderr));
    assert_eq!(text(&b.stdout).lines().count() as u64, total);
    let traces: Vec<PathBuf> = walk(&disk)
        .into_iter()
        .filter(|p| p.join("metadata").is_file())
        .collect();
    assert_eq!(traces.len(), 3, "{traces:?}");
    let mut on_disk = 0;
    let mut threads = 0;
    for t in &traces {
        for (stream, s) in flight::streams_of(t) {
            let want: Vec<u64> = (0..s.seqs.len() as u64).collect();
            assert_eq!(s.seqs, want, "{stream}: a gap or a repeat");
            on_disk += s.seqs.len() as u64;
            threads += 1;
        }
    }
    assert_eq!(threads, 7, "two threads a program, one late");
    assert_eq!(on_disk, total);
    // tape show of the whole relay output merges the three in time order.
    let shown = Command::new(TAPE)
        .args(["show", "--clock-seconds"])
        .arg(&disk)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let times: Vec<i128> = text(&shown.stdout)
        .lines()
        .map(|l| line_time(l).unwrap_or_else(|| panic!("{l}")))
        .collect();
    assert_eq!(times.len() as u64, total);
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "tape show out of order"
    );

    let _ = std::fs::remove_dir_all(&base);
}

/// The flight events of the trace `t` as `tape show` reads them: each
/// one's (thread, seq).
pub(crate) fn flight_events(t: &Path) -> Vec<(u64, u64)> {
    let out = Command::new(TAPE)
        .args(["show", "--format", "json"])
        .arg(t)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|v| v["name"] == "flight.event")
        .map(|v| {
            let f = &v["fields"];
            (f["thread"].as_u64().unwrap(), f["seq"].as_u64().unwrap())
        })
        .collect()
}

/// Every directory under `dir`, `dir` included.
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        if let Ok(entries) = std::fs::read_dir(&all[i]) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    all.push(e.path());
                }
            }
        }
        i += 1;
    }
    all
}

/// `tape record --all --relayd URL` with an empty ring directory: its exit
/// status, its stderr, and how long it took.
fn record_all_against(url: &str, shm: &Path) -> (Option<i32>, String, Duration) {
    let t = Instant::now();
    let out = Command::new(TAPE)
        .args(["record", "--all", "--relayd", url, "--hostname", "h"])
        .env("TAPE_SHM_DIR", shm)
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr), t.elapsed())
}

#[test]
fn a_relay_that_is_not_there_is_a_clear_error() {
    let base = base("relay-absent");
    let port = free_port();
    let (code, err, took) = record_all_against(&format!("net://127.0.0.1:{port}"), &base);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot reach the relay daemon's control port at 127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let _ = std::fs::remove_dir_all(&base);
}

/// A fake relay's two ports on loopback: the control listener (the
/// caller answers on it) and both ports; the data port takes anything.
fn fake_ports() -> (std::net::TcpListener, (u16, u16)) {
    let control = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let data = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ports = (
        control.local_addr().unwrap().port(),
        data.local_addr().unwrap().port(),
    );
    std::thread::spawn(move || {
        for s in data.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || std::io::copy(&mut s, &mut std::io::sink()));
        }
    });
    (control, ports)
}

/// A fake relay daemon: on each connection to its control port it reads
/// commands and answers the `n`-th with `replies[n]` (then closes when
/// they run out); its data port takes anything.
fn fake_relay(replies: Vec<Vec<u8>>) -> (u16, u16) {
    use std::io::{Read, Write};
    let (control, ports) = fake_ports();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = control.accept() else {
            return;
        };
        for reply in replies {
            let mut header = [0u8; 24];
            if s.read_exact(&mut header).is_err() {
                return;
            }
            let size = u64::from_be_bytes(header[8..16].try_into().unwrap());
            let mut payload = vec![0u8; size.min(1 << 20) as usize];
            if s.read_exact(&mut payload).is_err() || s.write_all(&reply).is_err() {
                return;
            }
        }
    });
    ports
}

fn be(parts: &[u64], sizes: &[usize]) -> Vec<u8> {
    let mut v = Vec::new();
    for (&p, &n) in parts.iter().zip(sizes) {
        v.extend_from_slice(&p.to_be_bytes()[8 - n..]);
    }
    v
}

/// A relay daemon that answers garbage: each case is a clear error that
/// names what was wrong, never a panic or a hang.
#[test]
fn a_relay_that_answers_garbage_is_a_clear_error() {
    let base = base("relay-garbage");
    let version = be(&[2, 13], &[4, 4]);
    let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        (
            "another major",
            vec![be(&[7, 13], &[4, 4])],
            "speaks protocol 7.13",
        ),
        (
            "a minor without trace chunks",
            vec![be(&[2, 4], &[4, 4])],
            "speaks protocol 2.4",
        ),
        ("a closed connection", vec![], "VERSION"),
        ("a reply cut short", vec![vec![0, 0, 2]], "VERSION"),
        (
            "a path of 4 GiB",
            vec![version.clone(), be(&[1, 10, u32::MAX as u64], &[8, 4, 4])],
            "a path of 4294967295 bytes",
        ),
        (
            "a refusal",
            vec![version.clone(), be(&[1, 11, 0], &[8, 4, 4])],
            "refused CREATE_SESSION (code 11)",
        ),
        (
            "a refused trace chunk",
            vec![
                version.clone(),
                [be(&[1, 10, 6], &[8, 4, 4]), b"h/t-1\0".to_vec()].concat(),
                be(&[25], &[4]),
            ],
            "refused CREATE_TRACE_CHUNK (code 25)",
        ),
    ];
    for (what, replies, want) in cases {
        let (c, d) = fake_relay(replies);
        let (code, err, took) = record_all_against(&format!("net://127.0.0.1:{c}:{d}"), &base);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}");
        assert!(took < Duration::from_secs(5), "{what}: {took:?}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// A fake relay daemon that reads the first command, then answers a byte
/// every 4 s (an 8-byte VERSION reply would take 32 s); its data port
/// takes anything.
fn dribbling_relay() -> (u16, u16) {
    use std::io::{Read, Write};
    let (control, ports) = fake_ports();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = control.accept() else {
            return;
        };
        let mut header = [0u8; 24];
        if s.read_exact(&mut header).is_err() {
            return;
        }
        for b in be(&[2, 13], &[4, 4]) {
            std::thread::sleep(Duration::from_secs(4));
            if s.write_all(&[b]).is_err() {
                return;
            }
        }
    });
    ports
}

/// A relay that answers a byte every 4 s holds nothing past its deadlines
/// (before: `--duration 2` took 186 s and Ctrl-C did nothing): the whole
/// reply has one deadline (10 s), `--duration` holds to within a second,
/// and SIGINT ends the recorder within a second wherever it waits; each
/// ending is an error naming the command.
#[test]
fn a_relay_that_answers_a_byte_at_a_time_holds_nothing_past_its_deadlines() {
    let base = base("relay-dribble");
    let run = |extra: &[&str], interrupt: Option<Duration>| {
        let (c, d) = dribbling_relay();
        let url = format!("net://127.0.0.1:{c}:{d}");
        let t = Instant::now();
        let mut child = Command::new(TAPE)
            .args(["record", "--all", "--relayd", &url, "--hostname", "h"])
            .args(extra)
            .env("TAPE_SHM_DIR", &base)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(after) = interrupt {
            std::thread::sleep(after);
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        let out = loop {
            if child.try_wait().unwrap().is_some() {
                break child.wait_with_output().unwrap();
            }
            if t.elapsed() > Duration::from_secs(40) {
                let _ = child.kill();
                panic!("tape record {extra:?} still runs after 40 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (out.status.code(), text(&out.stderr), t.elapsed())
    };
    // The whole reply's deadline: 10 s, not 10 s a byte.
    let (code, err, took) = run(&[], None);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("VERSION") && err.contains("no whole exchange within 10 s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(12), "{took:?}");
    // --duration 2: over within 2 s and the grace.
    let (code, err, took) = run(&["--duration", "2"], None);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("VERSION"), "{err}");
    assert!(
        took < Duration::from_millis(3500),
        "--duration 2 took {took:?}"
    );
    // SIGINT after 1 s: over within a second of it.
    let (code, err, took) = run(&[], Some(Duration::from_secs(1)));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("stopped (SIGINT or SIGTERM)"), "{err}");
    assert!(
        took < Duration::from_millis(2500),
        "SIGINT at 1 s: ended at {took:?}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// A fake relay daemon that takes every connection and agrees to the
/// session and its chunk, then refuses every later command with code 11
/// (an ADD_STREAM's reply: a handle, then the code); its data port takes
/// anything. How many control connections it took, counted.
fn refusing_relay() -> (u16, u16, std::sync::Arc<std::sync::atomic::AtomicU32>) {
    use std::io::{Read, Write};
    let (control, ports) = fake_ports();
    let sessions = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = sessions.clone();
    std::thread::spawn(move || {
        for s in control.incoming() {
            let Ok(mut s) = s else { return };
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::spawn(move || {
                let agreed = [
                    be(&[2, 13], &[4, 4]),
                    [be(&[1, 10, 6], &[8, 4, 4]), b"h/t-1\0".to_vec()].concat(),
                    be(&[10], &[4]),
                ];
                for n in 0.. {
                    let mut header = [0u8; 24];
                    if s.read_exact(&mut header).is_err() {
                        return;
                    }
                    let size = u64::from_be_bytes(header[8..16].try_into().unwrap());
                    let mut payload = vec![0u8; size.min(1 << 20) as usize];
                    let reply = agreed
                        .get(n)
                        .cloned()
                        .unwrap_or_else(|| be(&[0, 11], &[8, 4]));
                    if s.read_exact(&mut payload).is_err() || s.write_all(&reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (ports.0, ports.1, sessions)
}

/// A relay that takes each session and refuses every stream (before:
/// 40 reconnects in 5 s, each a new relay session, then exit status 0,
/// "processes: 0"): the refusal is said with its command and code, the
/// retries back off across sessions, and after a few sessions that each
/// failed at once the relay is given up: exit status 1, naming it.
#[test]
fn a_relay_that_refuses_every_stream_is_given_up_with_an_error() {
    let base = base("relay-refuses");
    let shm = base.join("shm");
    std::fs::create_dir_all(&shm).unwrap();
    let mut program = flight_command(&shm, "overwrite")
        .args(["--threads", "2", "--pace", "5", "--seconds", "30"])
        .spawn()
        .unwrap();
    flight::wait_for_rings(&flight::user_dir(&shm).join(program.id().to_string()), 2);
    let (c, d, sessions) = refusing_relay();
    let (code, err, took) = record_all_against(&format!("net://127.0.0.1:{c}:{d}"), &shm);
    let _ = program.kill();
    let _ = program.wait();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("refused ADD_STREAM (code 11)"), "{err}");
    assert!(err.contains("failed 5 sessions in a row"), "{err}");
    let n = sessions.load(std::sync::atomic::Ordering::Relaxed);
    assert!((5..=6).contains(&n), "{n} relay sessions: {err}");
    // Backoff across sessions: 0.2 + 0.4 + 0.8 + 1.6 s at least.
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(20),
        "{took:?}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// The live viewer's URL `tape record` prints has the relay's live port
/// when it is not lttng-relayd's default (`--live-port`), and none when it
/// is.
#[test]
fn the_live_url_said_has_the_live_port() {
    let base = base("relay-live-port");
    for (extra, url) in [
        (
            &["--live-port", "6000"][..],
            "net://127.0.0.1:6000/host/h/tape)",
        ),
        (&[][..], "net://127.0.0.1/host/h/tape)"),
    ] {
        let (c, d, _) = refusing_relay();
        let out = Command::new(TAPE)
            .args(["record", "--all", "--hostname", "h", "--duration", "0.5"])
            .args(["--relayd", &format!("net://127.0.0.1:{c}:{d}")])
            .args(extra)
            .env("TAPE_SHM_DIR", &base)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("--input-format=lttng-live {url}")),
            "{extra:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Another user makes this user's shared-ring directory first (`mkdir -m
/// 777 /dev/shm/tape-UID`; /dev/shm is sticky, so its victim cannot remove
/// it). Before: `tape record --all --relayd` started, then exited 0 with
/// "processes: 0". Now every reader names the directory and its owner and
/// exits 1: `tape record --all` (before it makes a relay session), `tape
/// ps`, `tape ps --dead`, `tape recover`, `tape pipe` of a program running
/// there; the program itself says it on stderr and runs. Needs root (to
/// give the directory to another uid): skipped with a notice otherwise.
#[test]
fn a_ring_directory_another_user_made_is_an_error_naming_its_owner() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        crate::shared::required(
            "a ring directory owned by another user (needs root to chown)",
            "run the tests as root, as CI does",
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let base = base("relay-foreign-dir");
    let shm = base.join("shm");
    let user_dir = flight::user_dir(&shm);
    std::fs::create_dir_all(&user_dir).unwrap();
    std::fs::set_permissions(&user_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = std::ffi::CString::new(user_dir.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; chown has no other preconditions.
    assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
    let owner = format!("{}: is owned by uid 65534", user_dir.display());
    let mut program = Command::new(pipeline::binary())
        .args(["--seconds", "5"])
        .env("TAPE_TRACE", "pipeline.*")
        .env("TAPE_TRACE_DIR", base.join("traces"))
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM_DIR", &shm)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(program.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = program.id().to_string();
    for args in [
        vec![
            "record",
            "--all",
            "--relayd",
            "net://127.0.0.1:1",
            "--duration",
            "1",
        ],
        vec!["ps"],
        vec!["ps", "--dead"],
        vec!["recover", "--clean", "--all"],
        vec!["pipe", &pid],
    ] {
        let out = Command::new(TAPE)
            .args(&args)
            .env("TAPE_SHM_DIR", &shm)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "tape {args:?}: {err}");
        assert!(err.contains(&owner), "tape {args:?}: {err}");
    }
    let _ = program.kill();
    let out = program.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(err.contains(&owner), "the program: {err}");
    let _ = std::fs::remove_dir_all(&base);
}

/// kill -9 of one program mid-stream: its trace on the relay holds its
/// events up to the death (each thread's last event the one `tape
/// recover` finds in the rings it left) and ends with
/// `tape.process.died`; the other program's trace goes on, whole.
#[test]
fn a_program_killed_mid_stream_ends_its_trace_and_the_session_goes_on() {
    let Some((base, relayd, shm)) = set_up("relay-kill") else {
        return;
    };
    let mut recorder = record_all(&relayd, &shm);
    let mut doomed = flight_command(&shm, "discard")
        .env("TAPE_TRACE_BUFSZ", "1M")
        .args(["--threads", "2", "--pace", "5"])
        .spawn()
        .unwrap();
    let survivor = flight_command(&shm, "discard")
        .env("TAPE_TRACE_BUFSZ", "1M")
        .args(["--threads", "2", "--pace", "5", "--seconds", "4"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let total = emitted(survivor);
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(recorder.0.id() as i32, libc::SIGINT) };
    let status = recorder.0.wait().unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(recorder.0.stdout.as_mut().unwrap(), &mut said).unwrap();
    assert!(status.success(), "{said}");
    let doomed_path = format!("flight-{}", doomed.id());
    let survivor_path = said
        .lines()
        .find(|l| l.contains(", exited)"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    assert!(
        said.contains(&format!("{doomed_path} (pid {}, died)", doomed.id())),
        "{said}"
    );
    let traces: Vec<PathBuf> = walk(&relayd.out.join("h"))
        .into_iter()
        .filter(|p| p.join("metadata").is_file())
        .collect();
    let find = |name: &str| {
        traces
            .iter()
            .find(|p| p.file_name().unwrap() == name)
            .unwrap_or_else(|| panic!("{name} in {traces:?}"))
            .clone()
    };
    // The killed one: up to its death, as its rings tell.
    let relayed = find(&doomed_path);
    let recovered = base.join("recovered");
    let r = Command::new(TAPE)
        .args(["recover", &doomed.id().to_string(), "-o"])
        .arg(&recovered)
        .env("TAPE_SHM_DIR", &shm)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", text(&r.stderr));
    let last_relayed = last_seqs_by_thread(&relayed);
    let last_recovered = last_seqs_by_thread(&recovered);
    assert_eq!(last_relayed, last_recovered);
    let shown = Command::new(TAPE)
        .arg("show")
        .arg(&relayed)
        .output()
        .unwrap();
    let shown = text(&shown.stdout);
    let last = shown.lines().last().unwrap_or_default();
    assert!(
        last.contains("tape.process.died") && last.contains(&format!("pid = {}", doomed.id())),
        "{last}"
    );
    // The other one: whole.
    let whole = flight::streams_of(&find(&survivor_path));
    let mut n = 0;
    for (stream, s) in whole {
        let want: Vec<u64> = (0..s.seqs.len() as u64).collect();
        assert_eq!(s.seqs, want, "{stream}");
        n += s.seqs.len() as u64;
    }
    assert_eq!(n, total);
    // babeltrace2 reads both, the death's event included, saying nothing.
    let b = Command::new("babeltrace2")
        .arg(relayd.out.join("h"))
        .output()
        .unwrap();
    assert!(b.stderr.is_empty(), "{}", text(&b.stderr));
    assert_eq!(text(&b.stdout).matches("tape.process.died").count(), 1);
    let _ = std::fs::remove_dir_all(&base);
}

/// A process whose metadata babeltrace2 2.0 would refuse (its template,
/// which the process writes itself, given a field declarator `*name`, as
/// an older tape or a hostile process of the same user could): left out
/// before anything of it is sent, said with its class and position, and
/// counted in the summary; the other process streams whole, and
/// babeltrace2 reads the relay's disk without a word.
#[test]
fn a_process_whose_metadata_babeltrace2_refuses_is_left_out_and_the_rest_reads() {
    let Some((base, relayd, shm)) = set_up("relay-strict") else {
        return;
    };
    let args = ["--threads", "2", "--pace", "5", "--seconds", "3"];
    let good = flight_command(&shm, "discard").args(args).spawn().unwrap();
    let bad = flight_command(&shm, "discard").args(args).spawn().unwrap();
    let bad_pid = bad.id();
    let bad_dir = flight::user_dir(&shm).join(bad_pid.to_string());
    flight::wait_for_rings(&bad_dir, 2);
    let template = bad_dir.join("metadata-template");
    let meta = std::fs::read_to_string(&template).unwrap();
    let class = meta.find("\nevent {\n").expect("an event class");
    let field = class + meta[class..].find("} ").expect("a field") + 2;
    let poisoned = format!("{}*{}", &meta[..field], &meta[field..]);
    std::fs::write(&template, poisoned).unwrap();
    let mut recorder = record_all(&relayd, &shm);
    let total = emitted(good);
    emitted(bad);
    std::thread::sleep(Duration::from_millis(500));
    let (status, said, err) = recorder.interrupt();
    assert!(status.success(), "{said}{err}");
    let why = err
        .lines()
        .find(|l| l.contains(&format!("process {bad_pid}")))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        why.contains("event class ")
            && why.contains("a pointer declarator (`*`): babeltrace2 2.0 refuses it")
            && why.ends_with("left out"),
        "{why}"
    );
    assert!(said.contains("  left out: 1 process(es)"), "{said}");
    assert!(said.contains("  processes: 1\n"), "{said}");
    let traces: Vec<PathBuf> = walk(&relayd.out.join("h"))
        .into_iter()
        .filter(|p| p.join("metadata").is_file())
        .collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    let n: u64 = flight::streams_of(&traces[0])
        .values()
        .map(|s| s.seqs.len() as u64)
        .sum();
    assert_eq!(n, total);
    let b = Command::new("babeltrace2")
        .arg(relayd.out.join("h"))
        .output()
        .unwrap();
    assert!(
        b.status.success() && b.stderr.is_empty(),
        "{}",
        text(&b.stderr)
    );
    let lines = text(&b.stdout).lines().count() as u64;
    assert!(lines >= total, "{lines} lines, {total} events");
    let _ = std::fs::remove_dir_all(&base);
}

/// Each thread's (`thread` field) highest `seq` in `trace`, its
/// sequence checked whole from where it starts.
fn last_seqs_by_thread(trace: &Path) -> BTreeMap<u64, u64> {
    let out = Command::new(TAPE)
        .args(["show", "--format", "json"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["name"] != "flight.event" {
            continue;
        }
        let f = &v["fields"];
        let (t, seq) = (f["thread"].as_u64().unwrap(), f["seq"].as_u64().unwrap());
        let l = last.entry(t).or_insert(seq);
        *l = (*l).max(seq);
    }
    last
}

/// The relay daemon killed (SIGKILL) mid-session and started again: the
/// program's emit path never waits (it ends on time), `tape record`
/// resumes in a new relay session, and what is missing from the relay's
/// disk (both sessions, an event sent again counted once) is exactly what
/// the trace says was lost.
#[test]
fn a_relay_killed_and_restarted_costs_counted_losses_only() {
    let Some((base, mut relayd, shm)) = set_up("relay-restart") else {
        return;
    };
    let mut recorder = record_all(&relayd, &shm);
    // 256 KiB rings: full within a second of the outage, so it costs.
    let seconds = 6.0;
    let started = Instant::now();
    let program = flight_command(&shm, "discard")
        .env("TAPE_TRACE_BUFSZ", "256K")
        .args(["--threads", "2", "--pace", "5", "--seconds", "6"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    relayd.kill();
    std::thread::sleep(Duration::from_millis(1500));
    relayd.restart();
    let total = emitted(program);
    let ran = started.elapsed().as_secs_f64();
    assert!(
        ran < seconds + 1.5,
        "the program took {ran} s for {seconds} s"
    );
    std::thread::sleep(Duration::from_millis(500));
    let (status, said, err) = recorder.interrupt();
    assert!(status.success(), "{said}{err}");
    assert!(err.contains("the relay daemon went away"), "{err}");
    assert!(err.contains("answers again"), "{err}");
    let lost = pipeline::number_after(&said, "  lost: ");
    assert!(
        lost > 0,
        "an outage of 1.5 s with 256 KiB rings lost nothing: {said}"
    );
    // Both sessions' traces: the events, once each (one sent again after
    // the outage may be in both).
    let traces: Vec<PathBuf> = walk(&relayd.out.join("h"))
        .into_iter()
        .filter(|p| p.join("metadata").is_file())
        .collect();
    assert_eq!(
        traces.len(),
        2,
        "a trace before the outage, one after: {traces:?}"
    );
    let distinct: BTreeSet<(u64, u64)> = traces.iter().flat_map(|t| flight_events(t)).collect();
    assert_eq!(
        total - distinct.len() as u64,
        lost,
        "missing against counted ({total} emitted, {} on the relay): {said}",
        distinct.len()
    );
    // The traces say so too: babeltrace2 reports discarded events that
    // sum to the count, and nothing else.
    let b = Command::new("babeltrace2")
        .arg(relayd.out.join("h"))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", text(&b.stderr));
    let mut reported = 0;
    for l in text(&b.stderr).lines().filter(|l| !l.trim().is_empty()) {
        let n = l
            .strip_prefix("WARNING: Tracer discarded ")
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("babeltrace2 says: {l}"));
        reported += n;
    }
    assert_eq!(reported, lost);
    let _ = std::fs::remove_dir_all(&base);
}

/// Network namespaces made for a test, deleted when dropped.
struct Namespaces(Vec<String>);
impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// Runs `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        text(&out.stderr)
    );
}

/// A command run in network namespace `ns` with host name `host` (a UTS
/// namespace of its own): `ip netns exec NS unshare --uts sh -c
/// 'hostname HOST && exec "$@"' sh PROGRAM ARGS...`, so that the child's
/// pid is the program's.
fn on_host(ns: &str, host: &str, program: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "unshare", "--uts", "sh", "-c"])
        .arg(format!("hostname {host} && exec \"$@\""))
        .arg("sh")
        .arg(program)
        .args(args);
    c
}

/// Two hosts (network namespaces with their own host names and veth
/// addresses), each with a flight program and `tape record --all
/// --relayd` to a relay daemon in a third namespace: the relay files each
/// under its host name; babeltrace2 reads both, and `tape show` of the
/// relay's output interleaves both hosts' events in time order.
#[test]
fn two_hosts_stream_into_one_relay_and_merge_by_time() {
    let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let id = std::process::id() % 100_000;
    let names: Vec<String> = ["r", "a", "b"]
        .iter()
        .map(|n| format!("tape-{n}{id}"))
        .collect();
    let made = root
        && have("lttng-relayd")
        && have("babeltrace2")
        && Command::new("ip")
            .args(["netns", "add", &names[0]])
            .output()
            .is_ok_and(|o| o.status.success());
    if !made {
        shared::required(
            "the two-host relay test (network namespaces)",
            "run as root where `ip netns add` works, with lttng-tools and babeltrace2",
        );
        return;
    }
    let ns = Namespaces(names.clone());
    let (r, hosts) = (
        &names[0],
        [("hostA", &names[1], 1), ("hostB", &names[2], 2)],
    );
    ip(&["-n", r, "link", "set", "lo", "up"]);
    for (_, n, k) in &hosts {
        ip(&["netns", "add", n]);
        ip(&["-n", n, "link", "set", "lo", "up"]);
        let (here, there) = (format!("tpv{k}-{id}"), format!("tpr{k}-{id}"));
        ip(&["link", "add", &here, "type", "veth", "peer", "name", &there]);
        ip(&["link", "set", &here, "netns", n]);
        ip(&["link", "set", &there, "netns", r]);
        ip(&[
            "-n",
            n,
            "addr",
            "add",
            &format!("10.201.{k}.2/24"),
            "dev",
            &here,
        ]);
        ip(&[
            "-n",
            r,
            "addr",
            "add",
            &format!("10.201.{k}.1/24"),
            "dev",
            &there,
        ]);
        ip(&["-n", n, "link", "set", &here, "up"]);
        ip(&["-n", r, "link", "set", &there, "up"]);
    }
    let base = base("relay-hosts");
    let out = base.join("relay");
    let _relayd = Killed(
        Command::new("ip")
            .args(["netns", "exec", r, "lttng-relayd"])
            .args(["-C", "tcp://0.0.0.0:5342", "-D", "tcp://0.0.0.0:5343"])
            .args(["-L", "tcp://127.0.0.1:5344", "-o"])
            .arg(&out)
            .env("LTTNG_HOME", &out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut recorders = Vec::new();
    for (host, n, k) in &hosts {
        let shm = base.join(host);
        std::fs::create_dir_all(&shm).unwrap();
        let url = format!("net://10.201.{k}.1");
        // The relay listens once it has started: the recorder is retried
        // until it reaches it (bounded).
        let t = Instant::now();
        let rec = loop {
            let mut c = on_host(
                n,
                host,
                Path::new(TAPE),
                &["record", "--all", "--relayd", &url],
            );
            let mut c = c
                .env("TAPE_SHM_DIR", &shm)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(300));
            if c.try_wait().unwrap().is_none() {
                break c;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "no relay at {url}");
        };
        recorders.push(Killed(rec));
    }
    let programs: Vec<Child> = hosts
        .iter()
        .map(|(host, n, _)| {
            let shm = base.join(host);
            let mut c = on_host(
                n,
                host,
                &pipeline::example("flight"),
                &["--threads", "2", "--pace", "5", "--seconds", "3"],
            );
            for (k, v) in flight_command(&shm, "discard").get_envs() {
                if let Some(v) = v {
                    c.env(k, v);
                }
            }
            c.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let total: u64 = programs.into_iter().map(emitted).sum();
    std::thread::sleep(Duration::from_millis(500));
    for rec in &mut recorders {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(rec.0.id() as i32, libc::SIGINT) };
        let status = rec.0.wait().unwrap();
        let mut said = String::new();
        std::io::Read::read_to_string(rec.0.stdout.as_mut().unwrap(), &mut said).unwrap();
        assert!(status.success(), "{said}");
        assert!(
            said.contains("processes: 1\n") && said.contains("  lost: 0\n"),
            "{said}"
        );
    }
    // Filed by host name (the hosts' own, by default).
    for (host, _, _) in &hosts {
        assert!(out.join(host).is_dir(), "{}", out.join(host).display());
    }
    let b = Command::new("babeltrace2").arg(&out).output().unwrap();
    assert!(b.stderr.is_empty(), "babeltrace2 says: {}", text(&b.stderr));
    assert_eq!(text(&b.stdout).lines().count() as u64, total);
    let shown = Command::new(TAPE)
        .args(["show", "--clock-seconds"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let shown = text(&shown.stdout);
    let lines: Vec<(i128, &str)> = shown
        .lines()
        .map(|l| {
            let host = if l.contains(" hostA ") {
                "hostA"
            } else if l.contains(" hostB ") {
                "hostB"
            } else {
                panic!("no host in {l}")
            };
            (line_time(l).unwrap(), host)
        })
        .collect();
    assert_eq!(lines.len() as u64, total);
    assert!(lines.windows(2).all(|w| w[0].0 <= w[1].0), "out of order");
    let switches = lines.windows(2).filter(|w| w[0].1 != w[1].1).count();
    assert!(
        switches > 100,
        "the hosts' events are not interleaved: {switches} switches"
    );
    drop(ns);
    let _ = std::fs::remove_dir_all(&base);
}

/// babeltrace2's lines of `trace` without their time and delta (the
/// relay's copy states its clock from another calibration), sorted.
fn lines_without_times(trace: &Path) -> Vec<String> {
    let b = Command::new("babeltrace2").arg(trace).output().unwrap();
    assert!(
        b.status.success() && b.stderr.is_empty(),
        "{}",
        text(&b.stderr)
    );
    let mut lines: Vec<String> = text(&b.stdout)
        .lines()
        .map(|l| l.splitn(3, ' ').nth(2).unwrap_or(l).to_owned())
        .collect();
    lines.sort();
    lines
}

/// A `tracing` program (tape-tracing: callsites registered as they are
/// first hit, their fields typed by their first event) followed from its
/// start: each event class reaches the relay once final (not while its
/// first event is yet to describe it), so the relay's trace reads in
/// babeltrace2 line for line as the program's own save.
///
/// The last class (the `polled` event) is registered and first hit just
/// before the program exits: its exit must leave the description for the
/// recorder, which then removes it (the process's directory is gone).
#[test]
fn tracepoints_registered_and_described_at_run_time_reach_the_relay() {
    let Some((base, relayd, shm)) = set_up("relay-tracing") else {
        return;
    };
    let mut recorder = Killed(
        Command::new(TAPE)
            .args(["record", "--all", "--relayd", &relayd.url()])
            .args(["--hostname", "h", "--live-timer", "50ms"])
            .env("TAPE_SHM_DIR", &shm)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let saved = base.join("saved");
    let out = Command::new(pipeline::example("tracing_spans"))
        .args(["--seconds", "2"])
        .env("TAPE_SHM", "on")
        .env("TAPE_SHM_DIR", &shm)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_TRACE", "tracing.*")
        .env("TAPE_TRACE_BUFSZ", "8M")
        .env("TAPE_TRACE_DIR", &saved)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::thread::sleep(Duration::from_millis(500));
    let (status, said, err) = recorder.interrupt();
    assert!(status.success(), "{said}{err}");
    assert!(!err.contains("described again"), "{err}");
    let left: Vec<PathBuf> = std::fs::read_dir(&shm)
        .unwrap()
        .flatten()
        .flat_map(|user| {
            std::fs::read_dir(user.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|d| d.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let relayed = lines_without_times(&relayd.out.join("h"));
    let own = lines_without_times(&pipeline::only_trace(&saved));
    assert!(own.len() > 100, "{}", own.len());
    assert_eq!(relayed.len(), own.len(), "{said}{err}");
    for (r, o) in relayed.iter().zip(&own) {
        assert_eq!(r, o);
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// `tape record --relayd URL -- PROGRAM`: the program started by the
/// recorder, streamed from its first ring until it exits, every event
/// on the relay; one that exits before making a ring, or cannot start, is
/// an error naming it.
#[test]
fn a_program_started_by_the_recorder_is_streamed_whole() {
    let Some((base, relayd, shm)) = set_up("relay-command") else {
        return;
    };
    let flight = pipeline::example("flight");
    // The flight tests' environment (rings under `shm`, discard mode).
    let c = flight_command(&shm, "discard");
    let out = Command::new(TAPE)
        .args(["record", "--relayd", &relayd.url(), "--hostname", "h", "--"])
        .arg(&flight)
        .args(["--threads", "2", "--pace", "5", "--seconds", "1"])
        .envs(
            c.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("TAPE_TRACE_BUFSZ", "1M")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let (said, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{said}{err}");
    let total = pipeline::number_after(
        err.lines()
            .find(|l| l.starts_with("flight: "))
            .unwrap_or_else(|| panic!("{err}")),
        "flight: ",
    );
    assert_eq!(pipeline::number_after(&said, "  events: "), total, "{said}");
    let b = Command::new("babeltrace2")
        .arg(relayd.out.join("h"))
        .output()
        .unwrap();
    assert!(b.stderr.is_empty(), "{}", text(&b.stderr));
    assert_eq!(text(&b.stdout).lines().count() as u64, total);
    for (program, want) in [
        ("/bin/true", "before making a shared ring"),
        ("/nonexistent/program", "cannot start it"),
    ] {
        let out = Command::new(TAPE)
            .args(["record", "--relayd", &relayd.url(), "--", program])
            .env("TAPE_SHM_DIR", &shm)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(err.contains(program) && err.contains(want), "{err}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// A tmpfs mounted for a test, unmounted when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// The relay's disk fills (its output on a 4 MiB tmpfs; `lttng-relayd`
/// says "No space left on device" and resets the connection, session
/// after session): `tape record PID --relayd` retries with its backoff,
/// gives the relay up after 5 sessions that failed at once, and ends with
/// exit status 1 within seconds, its summary naming the process as cut
/// off with what reached the relay: never a success, never a hang.
#[test]
fn a_relay_whose_disk_fills_is_given_up_with_an_error_not_a_success() {
    let base = base("relay-full");
    let out = base.join("relay");
    std::fs::create_dir_all(&out).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mounted = root
        && Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(&out)
            .output()
            .is_ok_and(|o| o.status.success());
    if !mounted {
        shared::required(
            "the full relay disk test (a 4 MiB tmpfs under the relay daemon)",
            "run as root where `mount -t tmpfs` works",
        );
        return;
    }
    let _unmount = Mounted(out.clone());
    let Some(relayd) = Relayd::start(&out) else {
        return;
    };
    let shm = base.join("shm");
    std::fs::create_dir_all(&shm).unwrap();
    // 1 M events/s of about 54 bytes: the 4 MiB are full within 0.1 s.
    let mut program = flight_command(&shm, "discard")
        .args(["--threads", "2", "--rate", "1000000", "--seconds", "30"])
        .spawn()
        .unwrap();
    flight::wait_for_rings(&flight::user_dir(&shm).join(program.id().to_string()), 2);
    let start = Instant::now();
    let mut recorder = Killed(
        Command::new(TAPE)
            .args([
                "record",
                &program.id().to_string(),
                "--relayd",
                &relayd.url(),
            ])
            .args(["--hostname", "h"])
            .env("TAPE_SHM_DIR", &shm)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let status = loop {
        if let Some(status) = recorder.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "tape record still runs against a relay whose disk is full"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = start.elapsed();
    let _ = program.kill();
    let _ = program.wait();
    let (mut said, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(recorder.0.stdout.as_mut().unwrap(), &mut said).unwrap();
    std::io::Read::read_to_string(recorder.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{said}{err}");
    assert!(err.contains("failed 5 sessions in a row"), "{err}");
    assert!(
        said.contains(&format!(
            "(pid {}, cut off by the relay's failure)",
            program.id()
        )),
        "{said}"
    );
    assert!(said.contains("processes: 1"), "{said}");
    // Backoff across the failed sessions: 0.2 + 0.4 + 0.8 + 1.6 s at least.
    assert!(took >= Duration::from_secs(3), "{took:?}: {err}");
    let _ = std::fs::remove_dir_all(&base);
}
