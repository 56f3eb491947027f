//! A producer's connection to a relay daemon: the control socket, on
//! which commands go and replies come back in order, and the data socket,
//! on which packets go with no reply (`wire.rs` has the bytes). Every
//! exchange has one deadline for the whole of it ([`IO_TIMEOUT`], and no
//! later than the run's end: `crate::reader::deadline`), not one per read:
//! a relay that stops answering, or answers a byte at a time, is an error
//! naming the command, never a hang; a stop (SIGINT, SIGTERM) interrupts
//! a blocked read or write, which then ends within its grace.
//!
//! `SEND_INDEX`, sent after every packet, is the one command whose reply
//! is not waited for: its reply (a code) is read before the next command
//! that waits ([`Relay::settle`], which every call does first) or once
//! [`MAX_OWED`] are owed, so that a turn's packets go one after the other
//! instead of each waiting for a relay busy writing the one before (a
//! round trip of 0.2-0.6 ms each, most of a relay turn's time at 10 M
//! events/s: issue 48). A refusal is as much an error as before, naming
//! `SEND_INDEX` and its code, only seen a few packets later: the packets
//! it covers are among those kept unconfirmed, sent again in the next
//! session.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::wire::{self, Get, LTTNG_OK};

/// How long a connection, a command's write or its reply may take.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The most `SEND_INDEX` replies left unread: far below what a socket
/// buffer holds (4 bytes each), so a relay never blocks writing them
/// while the recorder blocks writing commands.
pub(crate) const MAX_OWED: usize = 256;

/// Asks the kernel to acknowledge what comes on `s` at once, not up to
/// 40 ms later (`TCP_QUICKACK`, which the kernel turns off again by
/// itself: set before each wait). Before waiting for several
/// `SEND_INDEX` replies: without it a relay turn at 10 M events/s took
/// 70-80 ms instead of 5-15, in steps of about 5 ms, and lost a fifth of
/// the events (issue 48, measured against lttng-relayd); what that looks
/// like is the daemon's later replies held (Nagle's algorithm) until our
/// delayed acknowledgement of the first, not checked in its source. Best
/// effort: failing, it costs only that delay. By hand (one `setsockopt`,
/// `libc` already here) rather than a socket crate.
fn quick_ack(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: `s` owns a valid socket descriptor for the call; the option
    // value is a live `c_int`, its size passed with it.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Where a relay daemon listens: `net://HOST[:CTRL[:DATA]]`, LTTng's URL
/// form (control port 5342 and data port 5343 by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RelayUrl {
    pub(crate) host: String,
    pub(crate) control: u16,
    pub(crate) data: u16,
}

impl RelayUrl {
    /// Parses `net://HOST[:CTRL[:DATA]]` (also `net6://[HOST]...`); the
    /// error names the part that is wrong.
    pub(crate) fn parse(url: &str) -> Result<RelayUrl, String> {
        let bad = |why: &str| format!("--relayd {url:?}: {why} (net://HOST[:CTRL[:DATA]])");
        let rest = url
            .strip_prefix("net://")
            .or_else(|| url.strip_prefix("net6://"))
            .ok_or_else(|| bad("not a net:// URL"))?;
        let (host, ports) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r.split_once(']').ok_or_else(|| bad("an unclosed `[`"))?;
            (h, p.strip_prefix(':').unwrap_or(p))
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h, p),
                None => (rest, ""),
            }
        };
        if host.is_empty() || host.contains('/') {
            return Err(bad("no host"));
        }
        let mut ports = ports.split(':').filter(|p| !p.is_empty());
        let mut port = |default: u16, which: &str| -> Result<u16, String> {
            match ports.next() {
                None => Ok(default),
                Some(p) => p
                    .parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| bad(&format!("{which} port {p:?} is not a port number"))),
            }
        };
        let control = port(5342, "the control")?;
        let data = port(5343, "the data")?;
        if ports.next().is_some() {
            return Err(bad("more than two ports"));
        }
        Ok(RelayUrl {
            host: host.to_owned(),
            control,
            data,
        })
    }
}

/// A connection to a relay daemon, its version agreed.
pub(crate) struct Relay {
    url: RelayUrl,
    control: TcpStream,
    data: TcpStream,
    /// The protocol minor both sides use (the lower of the two).
    pub(crate) minor: u32,
    /// The deadline of the reply being read (set by `call`, kept by
    /// `more` for the rest of it).
    reply_by: Instant,
    /// `SEND_INDEX` commands sent whose replies are not read yet.
    owed: usize,
}

/// What went wrong with the relay daemon, by what the recorder does
/// about it.
#[derive(Debug)]
pub(crate) enum RelayError {
    /// Its sockets do not connect: the recorder waits for it (retries with
    /// backoff, for as long as the run lasts).
    Unreachable(String),
    /// It connected, then an exchange failed: the connection broke, a
    /// reply did not come whole within its deadline, a command was refused
    /// (its code said) or a reply garbled. Retried too, but a relay whose
    /// new sessions fail so at once is given up after a few.
    Failed(String),
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayError::Unreachable(e) | RelayError::Failed(e) => f.write_str(e),
        }
    }
}

impl From<String> for RelayError {
    /// A failed exchange's error (a refusal, a garbled reply).
    fn from(e: String) -> RelayError {
        RelayError::Failed(e)
    }
}

impl From<RelayError> for String {
    fn from(e: RelayError) -> String {
        e.to_string()
    }
}

fn connect(url: &RelayUrl, port: u16, which: &str) -> Result<TcpStream, RelayError> {
    let fail = |e: &dyn std::fmt::Display| {
        RelayError::Unreachable(format!(
            "cannot reach the relay daemon's {which} port at {}:{port}: {e} (is lttng-relayd \
             running there?)",
            url.host
        ))
    };
    let addrs = (url.host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| fail(&e))?;
    let mut last = None;
    for a in addrs {
        let left = crate::reader::deadline(IO_TIMEOUT).saturating_duration_since(Instant::now());
        if left.is_zero() {
            last = Some(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the run's end came first",
            ));
            break;
        }
        match TcpStream::connect_timeout(&a, left) {
            Ok(s) => {
                s.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| fail(&e))?;
                s.set_write_timeout(Some(IO_TIMEOUT))
                    .map_err(|e| fail(&e))?;
                s.set_nodelay(true).map_err(|e| fail(&e))?;
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(fail(
        &last.map_or_else(|| "no address".to_owned(), |e| e.to_string()),
    ))
}

/// Reads all of `buf` from `s` by `by`: each read waits at most what is
/// left; an interrupted read (a stop's signal) goes on until then, so a
/// stop ends it within its grace. Past `by`: `TimedOut`.
fn read_all_by(s: &mut TcpStream, buf: &mut [u8], by: Instant) -> std::io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        s.set_read_timeout(Some(left(by)?))?;
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) => retry_or(e)?,
        }
    }
    Ok(())
}

/// Writes all of `buf` to `s` by `by` (as [`read_all_by`]).
fn write_all_by(s: &mut TcpStream, mut buf: &[u8], by: Instant) -> std::io::Result<()> {
    while !buf.is_empty() {
        s.set_write_timeout(Some(left(by)?))?;
        match s.write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) => retry_or(e)?,
        }
    }
    Ok(())
}

/// The time left before `by`, or before the run's end if that came
/// nearer since (a stop seen, between two reads: `crate::reader::deadline`),
/// at least a millisecond (a zero timeout would mean none); `TimedOut`
/// past it.
fn left(by: Instant) -> std::io::Result<Duration> {
    let by = by.min(crate::reader::deadline(IO_TIMEOUT));
    let left = by.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out());
    }
    Ok(left.max(Duration::from_millis(1)))
}

/// The error of an exchange past its deadline: which deadline it was.
fn timed_out() -> std::io::Error {
    let why = if crate::reader::stopped() {
        format!(
            "stopped (SIGINT or SIGTERM), and the relay did not answer within {} ms",
            crate::reader::STOP_GRACE.as_millis()
        )
    } else {
        format!(
            "no whole exchange within {} s (or {} ms past the end of --duration)",
            IO_TIMEOUT.as_secs(),
            crate::reader::STOP_GRACE.as_millis()
        )
    };
    std::io::Error::new(std::io::ErrorKind::TimedOut, why)
}

/// An I/O error that is retried (an interrupted call, whose deadline is
/// checked next) or returned (a timeout reads as one).
fn retry_or(e: std::io::Error) -> std::io::Result<()> {
    match e.kind() {
        std::io::ErrorKind::Interrupted => Ok(()),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Err(timed_out()),
        _ => Err(e),
    }
}

/// A read or write on one of the relay's sockets that failed (a dead relay,
/// or one silent past [`IO_TIMEOUT`]): names the relay, the port and what
/// was being sent.
fn io_error(url: &RelayUrl, port: u16, what: &str, e: std::io::Error) -> RelayError {
    RelayError::Failed(format!(
        "the relay daemon at {}:{port}, {what}: {e}",
        url.host
    ))
}

impl Relay {
    /// Connects both sockets and agrees on the version (the relayd's major
    /// must be 2; the minor both use is the lower, at least 11: trace
    /// chunks, which tape needs).
    pub(crate) fn connect(url: &RelayUrl) -> Result<Relay, RelayError> {
        let control = connect(url, url.control, "control")?;
        let data = connect(url, url.data, "data")?;
        let mut r = Relay {
            url: url.clone(),
            control,
            data,
            minor: wire::MINOR,
            reply_by: Instant::now(),
            owed: 0,
        };
        let reply = r.call("VERSION", &wire::version(wire::MAJOR, wire::MINOR), 8)?;
        let mut g = Get::new("VERSION", &reply);
        let (major, minor) = (g.u32()?, g.u32()?);
        if major != wire::MAJOR || minor < 11 {
            return Err(RelayError::Failed(format!(
                "the relay daemon at {}:{} speaks protocol {major}.{minor}; tape speaks 2.11 to \
                 2.{} (lttng-tools 2.11 or later)",
                url.host,
                url.control,
                wire::MINOR
            )));
        }
        r.minor = minor.min(wire::MINOR);
        Ok(r)
    }

    /// Sends `cmd` on the control socket and reads a reply of `len` bytes.
    fn call(&mut self, what: &str, cmd: &[u8], len: usize) -> Result<Vec<u8>, RelayError> {
        // The replies owed come first on the socket.
        self.settle()?;
        let fail = |e| io_error(&self.url, self.url.control, what, e);
        // One deadline for the command and its whole reply.
        let by = crate::reader::deadline(IO_TIMEOUT);
        self.reply_by = by;
        write_all_by(&mut self.control, cmd, by).map_err(fail)?;
        let mut reply = vec![0; len];
        read_all_by(&mut self.control, &mut reply, by).map_err(fail)?;
        Ok(reply)
    }

    /// Reads `len` more bytes of a reply (a path after its length).
    fn more(&mut self, what: &str, len: usize) -> Result<Vec<u8>, RelayError> {
        let mut b = vec![0; len];
        read_all_by(&mut self.control, &mut b, self.reply_by)
            .map_err(|e| io_error(&self.url, self.url.control, what, e))?;
        Ok(b)
    }

    /// A reply's return code: `LTTNG_OK`, or an error naming `what`.
    fn ok(&self, what: &str, code: u32) -> Result<(), RelayError> {
        if code == LTTNG_OK {
            return Ok(());
        }
        Err(RelayError::Failed(format!(
            "the relay daemon at {}:{} refused {what} (code {code})",
            self.url.host, self.url.control
        )))
    }

    /// Creates a relay session; its directory on the relay's side (the
    /// relayd's `HOST/NAME-DATE`).
    pub(crate) fn create_session(
        &mut self,
        s: &wire::CreateSession<'_>,
    ) -> Result<String, RelayError> {
        wire::check_name("the session name", s.name, 255)?;
        wire::check_name("the host name", s.hostname, 64)?;
        let reply = self.call("CREATE_SESSION", &s.encode(), 16)?;
        let mut g = Get::new("CREATE_SESSION", &reply);
        let (_id, code, len) = (g.u64()?, g.u32()?, g.u32()?);
        if len > wire::MAX_REPLY_PATH {
            return Err(Get::new("CREATE_SESSION", &[])
                .path(len)
                .unwrap_err()
                .into());
        }
        let path = self.more("CREATE_SESSION", len as usize)?;
        self.ok("CREATE_SESSION", code)?;
        Ok(Get::new("CREATE_SESSION", &path).path(len)?)
    }

    /// Creates the session's trace chunk `id`.
    pub(crate) fn create_trace_chunk(&mut self, id: u64, now_s: u64) -> Result<(), RelayError> {
        let reply = self.call(
            "CREATE_TRACE_CHUNK",
            &wire::create_trace_chunk(id, now_s),
            4,
        )?;
        let code = Get::new("CREATE_TRACE_CHUNK", &reply).u32()?;
        self.ok("CREATE_TRACE_CHUNK", code)
    }

    /// Closes trace chunk `id`: the relay's path of it.
    pub(crate) fn close_trace_chunk(&mut self, id: u64, now_s: u64) -> Result<String, RelayError> {
        let reply = self.call("CLOSE_TRACE_CHUNK", &wire::close_trace_chunk(id, now_s), 8)?;
        let mut g = Get::new("CLOSE_TRACE_CHUNK", &reply);
        let (code, len) = (g.u32()?, g.u32()?);
        if len > wire::MAX_REPLY_PATH {
            return Err(Get::new("CLOSE_TRACE_CHUNK", &[])
                .path(len)
                .unwrap_err()
                .into());
        }
        let path = self.more("CLOSE_TRACE_CHUNK", len as usize)?;
        self.ok("CLOSE_TRACE_CHUNK", code)?;
        Ok(Get::new("CLOSE_TRACE_CHUNK", &path).path(len)?)
    }

    /// Adds a stream of `channel` to the trace at `path`: its handle.
    pub(crate) fn add_stream(
        &mut self,
        channel: &str,
        path: &str,
        chunk: u64,
    ) -> Result<u64, RelayError> {
        wire::check_name("the channel", channel, 264)?;
        if path.is_empty() || path.len() >= 255 || path.starts_with('/') || path.contains("..") {
            return Err(RelayError::Failed(format!(
                "the trace path {path:?}: the relay daemon takes a relative path of fewer than \
                 255 bytes, without `..`"
            )));
        }
        let reply = self.call("ADD_STREAM", &wire::add_stream(channel, path, chunk), 12)?;
        let mut g = Get::new("ADD_STREAM", &reply);
        let (handle, code) = (g.u64()?, g.u32()?);
        self.ok("ADD_STREAM", code)?;
        Ok(handle)
    }

    /// Publishes the streams added so far to viewers.
    pub(crate) fn streams_sent(&mut self) -> Result<(), RelayError> {
        let reply = self.call("STREAMS_SENT", &wire::streams_sent(), 4)?;
        let code = Get::new("STREAMS_SENT", &reply).u32()?;
        self.ok("STREAMS_SENT", code)
    }

    /// Appends metadata packets to the metadata stream `handle` (no reply).
    pub(crate) fn send_metadata(&mut self, handle: u64, bytes: &[u8]) -> Result<(), RelayError> {
        let cmd = wire::send_metadata(handle, bytes);
        if cmd.len() as u64 > wire::MAX_PAYLOAD {
            return Err(RelayError::Failed(format!(
                "{} bytes of metadata in one command: the relay daemon takes at most {}",
                bytes.len(),
                wire::MAX_PAYLOAD
            )));
        }
        write_all_by(&mut self.control, &cmd, crate::reader::deadline(IO_TIMEOUT))
            .map_err(|e| io_error(&self.url, self.url.control, "SEND_METADATA", e))
    }

    /// Sends packet `net_seq_num` of stream `handle` on the data socket:
    /// `content`, then `padding` zeros the relay adds (a whole packet).
    pub(crate) fn send_packet(
        &mut self,
        handle: u64,
        net_seq_num: u64,
        content: &[u8],
        padding: u32,
    ) -> Result<(), RelayError> {
        let size = u32::try_from(content.len()).map_err(|_| {
            format!(
                "a packet of {} bytes: the relay takes at most 4 GiB",
                content.len()
            )
        })?;
        let header = wire::data_header(handle, net_seq_num, size, padding);
        let fail = |e| io_error(&self.url, self.url.data, "a data packet", e);
        let by = crate::reader::deadline(IO_TIMEOUT);
        write_all_by(&mut self.data, &header, by).map_err(fail)?;
        write_all_by(&mut self.data, content, by).map_err(fail)
    }

    /// Sends a packet's index entry (one per packet, keyed by its
    /// `net_seq_num`; `packet_size_bits = 0`: a beacon); its reply is read
    /// later ([`Relay::settle`], module docs).
    pub(crate) fn send_index(&mut self, index: &wire::Index) -> Result<(), RelayError> {
        if self.owed >= MAX_OWED {
            self.settle()?;
        }
        let by = crate::reader::deadline(IO_TIMEOUT);
        write_all_by(&mut self.control, &index.encode(self.minor), by)
            .map_err(|e| io_error(&self.url, self.url.control, "SEND_INDEX", e))?;
        self.owed += 1;
        Ok(())
    }

    /// Reads the replies of the `SEND_INDEX` commands sent so far, one
    /// deadline for them all: an error if one refused (naming its code).
    pub(crate) fn settle(&mut self) -> Result<(), RelayError> {
        if self.owed == 0 {
            return Ok(());
        }
        quick_ack(&self.control);
        let by = crate::reader::deadline(IO_TIMEOUT);
        while self.owed > 0 {
            let mut reply = [0u8; 4];
            read_all_by(&mut self.control, &mut reply, by)
                .map_err(|e| io_error(&self.url, self.url.control, "SEND_INDEX", e))?;
            self.owed -= 1;
            let code = Get::new("SEND_INDEX", &reply).u32()?;
            self.ok("SEND_INDEX", code)?;
        }
        Ok(())
    }

    /// Whether the relay still waits for data or an index of stream
    /// `handle` up to packet `last_net_seq_num` (one round trip).
    pub(crate) fn data_pending(
        &mut self,
        handle: u64,
        last_net_seq_num: u64,
    ) -> Result<bool, RelayError> {
        let reply = self.call(
            "DATA_PENDING",
            &wire::data_pending(handle, last_net_seq_num),
            4,
        )?;
        match Get::new("DATA_PENDING", &reply).u32()? {
            0 => Ok(false),
            1 => Ok(true),
            code => Err(RelayError::Failed(format!(
                "the relay daemon at {}:{} refused DATA_PENDING for stream {handle} (code {code})",
                self.url.host, self.url.control
            ))),
        }
    }

    /// Waits until the relay has every packet of stream `handle` up to
    /// `last_net_seq_num` and its index (the data socket is read apart
    /// from the control one: a stream closed before its last packets
    /// arrived would end a live viewer's stream before them), at most
    /// [`IO_TIMEOUT`], and within a run's ending no later than its cap
    /// (`reader::deadline`).
    pub(crate) fn wait_for_data(
        &mut self,
        handle: u64,
        last_net_seq_num: u64,
    ) -> Result<(), RelayError> {
        let start = std::time::Instant::now();
        while self.data_pending(handle, last_net_seq_num)? {
            // Within a run's ending, no longer than its cap.
            let by = crate::reader::deadline(IO_TIMEOUT).min(start + IO_TIMEOUT);
            if std::time::Instant::now() >= by {
                return Err(RelayError::Failed(format!(
                    "the relay daemon at {}:{} did not confirm packet {last_net_seq_num} of \
                     stream {handle} (DATA_PENDING) within {:.1} s",
                    self.url.host,
                    self.url.control,
                    start.elapsed().as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Closes stream `handle` after packet `last_net_seq_num` (`u64::MAX`:
    /// it carried none).
    pub(crate) fn close_stream(
        &mut self,
        handle: u64,
        last_net_seq_num: u64,
    ) -> Result<(), RelayError> {
        let reply = self.call(
            "CLOSE_STREAM",
            &wire::close_stream(handle, last_net_seq_num),
            4,
        )?;
        let code = Get::new("CLOSE_STREAM", &reply).u32()?;
        self.ok("CLOSE_STREAM", code)
    }
}

#[cfg(test)]
use tape_test_support::skipped;

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};

    #[test]
    fn relay_urls_are_parsed_and_bad_ones_named() {
        let ok = [
            ("net://relay", ("relay", 5342, 5343)),
            ("net://10.0.0.2:6000", ("10.0.0.2", 6000, 5343)),
            ("net://h:6000:6001", ("h", 6000, 6001)),
            ("net6://[::1]:7000:7001", ("::1", 7000, 7001)),
        ];
        for (url, (host, control, data)) in ok {
            let want = RelayUrl {
                host: host.to_owned(),
                control,
                data,
            };
            assert_eq!(RelayUrl::parse(url), Ok(want), "{url}");
        }
        for (url, why) in [
            ("tcp://h", "not a net:// URL"),
            ("net://", "no host"),
            (
                "net://h:99999",
                "the control port \"99999\" is not a port number",
            ),
            ("net://h:1:x", "the data port \"x\" is not a port number"),
            ("net://h:1:2:3", "more than two ports"),
            ("net6://[::1", "an unclosed `[`"),
        ] {
            let e = RelayUrl::parse(url).unwrap_err();
            assert!(e.contains(why) && e.contains(url), "{url}: {e}");
        }
    }

    /// A small trace's description: one stream class, one event (`v`).
    const TSDL: &str = "/* CTF 1.8 */
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
trace { major = 1; minor = 8; byte_order = le;
    uuid = \"09090909-0909-0909-0909-090909090909\";
    packet.header := struct { uint32_t magic; uint32_t stream_id; }; };
clock { name = tape; freq = 1000000000; offset_s = 0; absolute = true; };
typealias integer { size = 64; align = 8; signed = false; map = clock.tape.value; } := tape_ts;
stream { id = 0;
    packet.context := struct { tape_ts timestamp_begin; tape_ts timestamp_end;
        uint64_t content_size; uint64_t packet_size; uint64_t events_discarded; };
    event.header := struct { uint32_t id; tape_ts timestamp; }; };
event { name = \"t.e\"; id = 0; stream_id = 0; fields := struct { uint32_t v; }; };
";

    /// A free TCP port on loopback (bound, then released).
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    struct Daemon(Child);
    impl Drop for Daemon {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The real relay daemon (Debian's `lttng-relayd`) on loopback: tape's
    /// version, session and trace chunk are taken, the session's directory
    /// is where the relay says; a small trace's metadata packet, data
    /// packets and indexes go through, and babeltrace2 reads its events
    /// back from the relay's disk; a refused name is an error that names
    /// it. Skipped with a notice without `lttng-relayd` (a failure under
    /// `TAPE_REQUIRE_TOOLS=1`).
    #[test]
    fn the_real_relay_daemon_takes_a_session_its_streams_and_packets() {
        if Command::new("lttng-relayd")
            .arg("--version")
            .output()
            .is_err()
        {
            skipped::required(
                "the relay client against the real relay daemon",
                "apt-get install lttng-tools",
            );
            return;
        }
        let out = std::env::temp_dir().join(format!("tape-relayd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let (c, d, l) = (free_port(), free_port(), free_port());
        let tcp = |p: u16| format!("tcp://127.0.0.1:{p}");
        let _daemon = Daemon(
            Command::new("lttng-relayd")
                .args(["-C", &tcp(c), "-D", &tcp(d), "-L", &tcp(l), "-o"])
                .arg(&out)
                .env("LTTNG_HOME", &out)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let url = RelayUrl::parse(&format!("net://127.0.0.1:{c}:{d}")).unwrap();
        // It listens once it has started (bounded wait).
        let start = std::time::Instant::now();
        let mut relay = loop {
            match Relay::connect(&url) {
                Ok(r) => break r,
                Err(e) if start.elapsed() < Duration::from_secs(10) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(relay.minor, 13);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let session = wire::CreateSession {
            name: "tape",
            hostname: "tapehost",
            live_timer_us: 1_000_000,
            sessiond_uuid: [7; 16],
            session_id: 1,
            creation_time: now,
        };
        let path = relay.create_session(&session).unwrap();
        assert!(path.starts_with("tapehost/tape-"), "{path}");
        relay.create_trace_chunk(0, now).unwrap();
        assert!(out.join(&path).is_dir(), "{}", out.join(&path).display());
        // A small CTF trace through it: its metadata as a packet, two data
        // packets of two events each, an index per packet; the relay's
        // disk then reads back in babeltrace2.
        let trace = "tape/p-1";
        let meta = relay.add_stream("metadata", trace, 0).unwrap();
        let chan = relay.add_stream("chan_0", trace, 0).unwrap();
        relay.streams_sent().unwrap();
        let uuid = [9; 16];
        relay
            .send_metadata(meta, &wire::metadata_packet(&uuid, TSDL.as_bytes(), true))
            .unwrap();
        let t0 = now * 1_000_000_000;
        for k in 0..2u64 {
            let (begin, end) = (t0 + k * 1000, t0 + k * 1000 + 10);
            let mut p = Vec::new();
            p.extend_from_slice(&0xC1FC_1FC1u32.to_le_bytes());
            p.extend_from_slice(&0u32.to_le_bytes());
            for v in [begin, end, 80 * 8, 80 * 8, 0] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            for e in 0..2u64 {
                p.extend_from_slice(&0u32.to_le_bytes());
                p.extend_from_slice(&(begin + e).to_le_bytes());
                p.extend_from_slice(&((k * 2 + e) as u32).to_le_bytes());
            }
            assert_eq!(p.len(), 80);
            relay.send_packet(chan, k, &p, 0).unwrap();
            relay
                .send_index(&wire::Index {
                    handle: chan,
                    net_seq_num: k,
                    packet_size_bits: 640,
                    content_size_bits: 640,
                    ts_begin: begin,
                    ts_end: end,
                    packet_seq_num: k,
                    ..wire::Index::default()
                })
                .unwrap();
        }
        relay.close_stream(chan, 1).unwrap();
        relay.close_stream(meta, u64::MAX).unwrap();
        relay.close_trace_chunk(0, now).unwrap();
        // The relay's disk, read by babeltrace2 (its writes may trail the
        // replies: a bounded wait).
        let disk = out.join("tapehost");
        let start = std::time::Instant::now();
        let text = loop {
            let o = Command::new("babeltrace2").arg(&disk).output();
            let text = o.map_or_else(
                |e| e.to_string(),
                |o| String::from_utf8_lossy(&o.stdout).into_owned(),
            );
            if text.matches("t.e: { v = ").count() == 4 || start.elapsed() > Duration::from_secs(10)
            {
                break text;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let values: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("t.e: { v = ").nth(1))
            .collect();
        assert_eq!(values, ["0 }", "1 }", "2 }", "3 }"], "{text}");
        // A name the relay would refuse is refused here, named.
        let bad = wire::CreateSession {
            name: "a/b",
            ..session
        };
        let e = relay.create_session(&bad).unwrap_err();
        assert!(matches!(e, RelayError::Failed(_)), "{e}");
        assert!(e.to_string().contains("the session name \"a/b\""), "{e}");
        drop(relay);
        // Nothing listens there now: a clear error, not a hang.
        drop(_daemon);
        let e = Relay::connect(&url).err().unwrap();
        assert!(matches!(e, RelayError::Unreachable(_)), "{e}");
        assert!(
            e.to_string()
                .contains("cannot reach the relay daemon's control port"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}
