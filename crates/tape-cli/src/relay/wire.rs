//! The relay daemon's producer protocol on the wire (`lttng-relayd`,
//! lttng-tools 2.11 and later; `../shared/reference/relayd-protocol.md`
//! gathers it from lttng-tools' `relayd.h` and `sessiond-comm.h`, checked
//! against the real daemon): every command a producer sends, as bytes,
//! and every reply it reads, from bytes, bounded and checked.
//!
//! Every integer is big-endian and every struct packed; strings end with
//! a NUL. A control command is a 24-byte header and its payload:
//!
//! ```text
//! header   u64 circuit_id = 0 | u64 data_size | u32 cmd | u32 cmd_version = 0
//! VERSION            5   u32 major | u32 minor                        -> u32 major | u32 minor
//! CREATE_SESSION     2   u32 name_len | u32 host_len | u32 base_len | u32 live_timer_us
//!                        | u8 snapshot | u8 name_has_time | u8 sessiond_uuid[16]
//!                        | u64 session_id | u64 creation_time | u8 chunk_is_set | u64 chunk
//!                        | name\0 host\0 base\0                       -> u64 id | u32 ret | u32 path_len | path
//! CREATE_TRACE_CHUNK 19  u64 chunk_id | u64 creation_ts_s | u32 name_len = 0   -> u32 ret
//! ADD_STREAM         1   u32 channel_len | u32 path_len | u64 tracefile_size | u64 tracefile_count
//!                        | u64 chunk_id | channel\0 path\0            -> u64 handle | u32 ret
//! STREAMS_SENT       16  (none)                                       -> u32 ret
//! SEND_METADATA      6   u64 handle | u32 padding | bytes             (no reply)
//! SEND_INDEX         13  u64 handle | u64 net_seq_num | u64 packet_size | u64 content_size (bits)
//!                        | u64 ts_begin | u64 ts_end | u64 discarded | u64 stream_class
//!                        | u64 stream_instance_id | u64 packet_seq_num (minor >= 8)  -> u32 ret
//! CLOSE_STREAM       7   u64 handle | u64 last_net_seq_num            -> u32 ret
//! CLOSE_TRACE_CHUNK  20  u64 chunk_id | u64 close_ts_s | u8 command_is_set = 0 | u32 command
//!                                                                     -> u32 ret | u32 path_len | path
//!
//! data socket: u64 circuit_id = 0 | u64 handle | u64 net_seq_num | u32 data_size | u32 padding
//!              then data_size bytes (no reply)
//! ```
//!
//! Written by hand: no crate speaks this protocol (it is lttng-tools'
//! internal one, with no prose specification).

/// `LTTNG_OK`: a reply's success code.
pub(crate) const LTTNG_OK: u32 = 10;

/// The protocol version tape speaks (2.13, what Debian's relayd speaks;
/// the relayd answers with its own and both use the lower minor).
pub(crate) const MAJOR: u32 = 2;
pub(crate) const MINOR: u32 = 13;

/// The most a relayd accepts as one command's payload (lttng-tools'
/// `DEFAULT_NETWORK_RELAYD_CTRL_MAX_PAYLOAD_SIZE`).
pub(crate) const MAX_PAYLOAD: u64 = 128 << 20;

/// The longest path a reply may carry (the relayd's own `LTTNG_PATH_MAX`).
pub(crate) const MAX_REPLY_PATH: u32 = 4096;

/// Command codes (`enum lttcomm_relayd_command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Cmd {
    AddStream = 1,
    CreateSession = 2,
    Version = 5,
    SendMetadata = 6,
    CloseStream = 7,
    DataPending = 8,
    SendIndex = 13,
    StreamsSent = 16,
    CreateTraceChunk = 19,
    CloseTraceChunk = 20,
}

/// Bytes of a command's header.
pub(crate) const HEADER: usize = 24;

/// Appends big-endian integers and strings to a buffer.
struct Put<'a>(&'a mut Vec<u8>);

impl Put<'_> {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A string and its NUL.
    fn text(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes()).u8(0)
    }
}

/// A command: its header (with the payload's length) and its payload.
pub(crate) fn command(cmd: Cmd, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    Put(&mut out)
        .u64(0)
        .u64(payload.len() as u64)
        .u32(cmd as u32)
        .u32(0)
        .bytes(payload);
    out
}

/// A name the relayd takes: not empty, no `/`, no leading `.`, no NUL
/// (`is_name_path_safe`), and shorter than `max` bytes; `what` names it
/// in the error.
pub(crate) fn check_name(what: &str, name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') || name.contains('\0') {
        return Err(format!(
            "{what} {name:?}: the relay daemon takes a name that is not empty, has no `/` nor \
             NUL, and does not start with `.`"
        ));
    }
    if name.len() >= max {
        return Err(format!(
            "{what} {name:?}: {} bytes; the relay daemon takes fewer than {max}",
            name.len()
        ));
    }
    Ok(())
}

/// `VERSION`'s payload.
pub(crate) fn version(major: u32, minor: u32) -> Vec<u8> {
    let mut p = Vec::new();
    Put(&mut p).u32(major).u32(minor);
    command(Cmd::Version, &p)
}

/// `CREATE_SESSION` (2.11 form): a live session when `live_timer_us` is
/// not 0.
pub(crate) struct CreateSession<'a> {
    pub(crate) name: &'a str,
    pub(crate) hostname: &'a str,
    pub(crate) live_timer_us: u32,
    pub(crate) sessiond_uuid: [u8; 16],
    pub(crate) session_id: u64,
    pub(crate) creation_time: u64,
}

impl CreateSession<'_> {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        Put(&mut p)
            .u32(self.name.len() as u32 + 1)
            .u32(self.hostname.len() as u32 + 1)
            .u32(1) // base path: "" (the relayd names the directory)
            .u32(self.live_timer_us)
            .u8(0) // not a snapshot
            .u8(0) // the name has no creation time in it
            .bytes(&self.sessiond_uuid)
            .u64(self.session_id)
            .u64(self.creation_time)
            .u8(0) // no current chunk id
            .u64(0)
            .text(self.name)
            .text(self.hostname)
            .text("");
        command(Cmd::CreateSession, &p)
    }
}

/// `CREATE_TRACE_CHUNK`: the chunk the session's streams go to (unnamed:
/// straight into the session's directory).
pub(crate) fn create_trace_chunk(chunk_id: u64, creation_ts_s: u64) -> Vec<u8> {
    let mut p = Vec::new();
    Put(&mut p).u64(chunk_id).u64(creation_ts_s).u32(0);
    command(Cmd::CreateTraceChunk, &p)
}

/// `ADD_STREAM` (2.11 form): a stream of `channel` in the trace at `path`
/// (relative to the session's directory; all streams of one path are one
/// CTF trace; the channel `metadata` is its metadata), unbounded files.
pub(crate) fn add_stream(channel: &str, path: &str, chunk_id: u64) -> Vec<u8> {
    let mut p = Vec::new();
    Put(&mut p)
        .u32(channel.len() as u32 + 1)
        .u32(path.len() as u32 + 1)
        .u64(0)
        .u64(0)
        .u64(chunk_id)
        .text(channel)
        .text(path);
    command(Cmd::AddStream, &p)
}

/// `STREAMS_SENT`: publishes the streams added so far to viewers.
pub(crate) fn streams_sent() -> Vec<u8> {
    command(Cmd::StreamsSent, &[])
}

/// `SEND_METADATA`: `bytes` appended to the metadata stream `handle`.
pub(crate) fn send_metadata(handle: u64, bytes: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 + bytes.len());
    Put(&mut p).u64(handle).u32(0).bytes(bytes);
    command(Cmd::SendMetadata, &p)
}

/// One packet's index entry (`SEND_INDEX`): its sizes in bits, times in
/// clock values, the stream's losses so far, its stream class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Index {
    pub(crate) handle: u64,
    pub(crate) net_seq_num: u64,
    pub(crate) packet_size_bits: u64,
    pub(crate) content_size_bits: u64,
    pub(crate) ts_begin: u64,
    pub(crate) ts_end: u64,
    pub(crate) events_discarded: u64,
    pub(crate) stream_class: u64,
    pub(crate) stream_instance_id: u64,
    pub(crate) packet_seq_num: u64,
}

impl Index {
    /// The command, for a negotiated `minor` (the last two fields from 8 on).
    pub(crate) fn encode(&self, minor: u32) -> Vec<u8> {
        let mut p = Vec::with_capacity(80);
        Put(&mut p)
            .u64(self.handle)
            .u64(self.net_seq_num)
            .u64(self.packet_size_bits)
            .u64(self.content_size_bits)
            .u64(self.ts_begin)
            .u64(self.ts_end)
            .u64(self.events_discarded)
            .u64(self.stream_class);
        if minor >= 8 {
            Put(&mut p)
                .u64(self.stream_instance_id)
                .u64(self.packet_seq_num);
        }
        command(Cmd::SendIndex, &p)
    }
}

/// A CTF metadata packet (CTF 1.8 §7.1): a 37-byte header in the trace's
/// byte order (`little`), then the TSDL `text`. babeltrace2 2.0.4 reads
/// metadata sent in several pieces only as packets (plain text must come
/// whole).
pub(crate) fn metadata_packet(uuid: &[u8; 16], text: &[u8], little: bool) -> Vec<u8> {
    let u32b = |v: u32| {
        if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let bits = ((37 + text.len()) * 8) as u32;
    let mut p = Vec::with_capacity(37 + text.len());
    p.extend_from_slice(&u32b(0x75D1_1D57));
    p.extend_from_slice(uuid);
    p.extend_from_slice(&u32b(0)); // checksum
    p.extend_from_slice(&u32b(bits)); // content size
    p.extend_from_slice(&u32b(bits)); // packet size
    p.extend_from_slice(&[0, 0, 0, 1, 8]); // compression, encryption, checksum scheme, 1.8
    p.extend_from_slice(text);
    p
}

/// `CLOSE_STREAM`: no packet after `last_net_seq_num` (`u64::MAX`: the
/// stream carried none).
pub(crate) fn close_stream(handle: u64, last_net_seq_num: u64) -> Vec<u8> {
    let mut p = Vec::new();
    Put(&mut p).u64(handle).u64(last_net_seq_num);
    command(Cmd::CloseStream, &p)
}

/// `DATA_PENDING`: whether the relay still waits for data or an index of
/// stream `handle` up to packet `last_net_seq_num` (reply: 0 none, 1
/// pending).
pub(crate) fn data_pending(handle: u64, last_net_seq_num: u64) -> Vec<u8> {
    let mut p = Vec::new();
    Put(&mut p).u64(handle).u64(last_net_seq_num);
    command(Cmd::DataPending, &p)
}

/// `CLOSE_TRACE_CHUNK`, with no close command.
pub(crate) fn close_trace_chunk(chunk_id: u64, close_ts_s: u64) -> Vec<u8> {
    let mut p = Vec::new();
    Put(&mut p).u64(chunk_id).u64(close_ts_s).u8(0).u32(0);
    command(Cmd::CloseTraceChunk, &p)
}

/// A data packet's header on the data socket: `data_size` bytes follow,
/// and the relayd adds `padding` zeros after them.
pub(crate) fn data_header(handle: u64, net_seq_num: u64, data_size: u32, padding: u32) -> [u8; 32] {
    let mut p = Vec::with_capacity(32);
    Put(&mut p)
        .u64(0)
        .u64(handle)
        .u64(net_seq_num)
        .u32(data_size)
        .u32(padding);
    p.try_into().expect("32 bytes")
}

/// Reads big-endian integers from a reply, each read checked.
pub(crate) struct Get<'a> {
    b: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Get<'a> {
    pub(crate) fn new(what: &'a str, b: &'a [u8]) -> Get<'a> {
        Get { b, at: 0, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(format!(
                "the relay daemon's reply to {}: {} bytes, {n} more wanted at byte {}",
                self.what,
                self.b.len(),
                self.at
            ));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    /// A path of `len` bytes (its NUL, if any, dropped), at most
    /// [`MAX_REPLY_PATH`], UTF-8 or replaced.
    pub(crate) fn path(&mut self, len: u32) -> Result<String, String> {
        if len > MAX_REPLY_PATH {
            return Err(format!(
                "the relay daemon's reply to {}: a path of {len} bytes (at most {MAX_REPLY_PATH})",
                self.what
            ));
        }
        let b = self.take(len as usize)?;
        let b = b.strip_suffix(&[0]).unwrap_or(b);
        Ok(String::from_utf8_lossy(b).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Each command's bytes, as lttng-tools' packed big-endian structs lay
    /// them out (`relayd.h`; sizes from `../shared/reference/relayd-protocol.md`).
    #[test]
    fn commands_are_the_bytes_the_relay_daemon_reads() {
        let header = |data: u64, cmd: u32| format!("{:016x}{data:016x}{cmd:08x}{:08x}", 0, 0);
        let cases: Vec<(&str, Vec<u8>, String)> = vec![
            (
                "version",
                version(2, 13),
                header(8, 5) + "00000002" + "0000000d",
            ),
            (
                "create_trace_chunk",
                create_trace_chunk(0, 0x6500_0000),
                header(20, 19) + "0000000000000000" + "0000000065000000" + "00000000",
            ),
            ("streams_sent", streams_sent(), header(0, 16)),
            (
                "add_stream",
                add_stream("metadata", "tape/p-7", 0),
                header(32 + 9 + 9, 1)
                    + "00000009"
                    + "00000009"
                    + &"0".repeat(48)
                    + &hex(b"metadata\0")
                    + &hex(b"tape/p-7\0"),
            ),
            (
                "send_metadata",
                send_metadata(3, b"ab"),
                header(14, 6) + "0000000000000003" + "00000000" + "6162",
            ),
            (
                "close_stream",
                close_stream(3, u64::MAX),
                header(16, 7) + "0000000000000003" + "ffffffffffffffff",
            ),
            (
                "data_pending",
                data_pending(3, 9),
                header(16, 8) + "0000000000000003" + "0000000000000009",
            ),
            (
                "close_trace_chunk",
                close_trace_chunk(0, 5),
                header(21, 20) + "0000000000000000" + "0000000000000005" + "00" + "00000000",
            ),
        ];
        for (what, got, want) in cases {
            assert_eq!(hex(&got), want, "{what}");
        }
        // The 2.11 session: a 59-byte header, then the three names.
        let s = CreateSession {
            name: "tape",
            hostname: "h1",
            live_timer_us: 1_000_000,
            sessiond_uuid: [0xAB; 16],
            session_id: 7,
            creation_time: 0x6500_0000,
        }
        .encode();
        let payload = &s[HEADER..];
        assert_eq!(payload.len(), 59 + 5 + 3 + 1);
        assert_eq!(
            hex(payload),
            "00000005".to_owned()
                + "00000003"
                + "00000001"
                + "000f4240"
                + "00"
                + "00"
                + &"ab".repeat(16)
                + "0000000000000007"
                + "0000000065000000"
                + "00"
                + "0000000000000000"
                + &hex(b"tape\0h1\0\0")
        );
        // An index: 64 bytes below minor 8, 80 from it.
        let i = Index {
            handle: 1,
            net_seq_num: 2,
            packet_size_bits: 3,
            content_size_bits: 4,
            ts_begin: 5,
            ts_end: 6,
            events_discarded: 7,
            stream_class: 8,
            stream_instance_id: 9,
            packet_seq_num: 10,
        };
        let words = |n: u64| -> String { (1..=n).map(|k| format!("{k:016x}")).collect() };
        assert_eq!(hex(&i.encode(4)), header(64, 13) + &words(8));
        assert_eq!(hex(&i.encode(13)), header(80, 13) + &words(10));
        // A metadata packet: magic, uuid, sizes in bits, version 1.8.
        let m = metadata_packet(&[1; 16], b"/* CTF 1.8 */", true);
        assert_eq!(m.len(), 37 + 13);
        assert_eq!(
            hex(&m[..37]),
            "571dd175".to_owned()
                + &"01".repeat(16)
                + "00000000"
                + &hex(&400u32.to_le_bytes())
                + &hex(&400u32.to_le_bytes())
                + "0000000108"
        );
        // A data packet's header.
        assert_eq!(
            hex(&data_header(3, 4, 100, 28)),
            format!("{:016x}{:016x}{:016x}{:08x}{:08x}", 0, 3, 4, 100, 28)
        );
    }

    /// Replies are read bounded: short ones, and paths past the limit,
    /// are errors naming the command and the byte.
    #[test]
    fn replies_are_read_bounded() {
        let mut ok = Vec::new();
        Put(&mut ok).u64(9).u32(LTTNG_OK).u32(5).bytes(b"h/s-\0");
        let mut g = Get::new("CREATE_SESSION", &ok);
        assert_eq!((g.u64(), g.u32()), (Ok(9), Ok(LTTNG_OK)));
        let len = g.u32().unwrap();
        assert_eq!(g.path(len).unwrap(), "h/s-");
        let mut g = Get::new("CREATE_SESSION", &ok[..10]);
        g.u64().unwrap();
        assert_eq!(
            g.u32().unwrap_err(),
            "the relay daemon's reply to CREATE_SESSION: 10 bytes, 4 more wanted at byte 8"
        );
        let mut g = Get::new("CLOSE_TRACE_CHUNK", &ok);
        assert!(g
            .path(1 << 30)
            .unwrap_err()
            .contains("a path of 1073741824 bytes"));
        for (name, ok) in [("tape", true), ("", false), ("a/b", false), (".x", false)] {
            assert_eq!(check_name("session", name, 255).is_ok(), ok, "{name:?}");
        }
        assert!(check_name("hostname", &"h".repeat(64), 64).is_err());
    }
}
