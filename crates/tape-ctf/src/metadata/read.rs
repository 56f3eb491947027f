//! Opening traces: finding them in a directory tree and reading their
//! metadata (text or packetized, §7.1). [`crate::decode::stream`] reads the streams.

use std::path::{Path, PathBuf};

use crate::metadata::parse::{parse_metadata, ParseError};
use crate::Trace;

/// An error opening a trace.
#[derive(Debug)]
pub enum OpenError {
    /// The path could not be read.
    Io(PathBuf, std::io::Error),
    /// The metadata is malformed.
    Metadata(PathBuf, ParseError),
    /// The metadata packets are malformed.
    Packetized(PathBuf, String),
    /// The metadata parses but describes something impossible.
    Invalid(PathBuf, String),
    /// No trace (no `metadata` file) under the path.
    NoTrace(PathBuf),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::Metadata(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::Packetized(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::Invalid(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::NoTrace(p) => {
                write!(f, "{}: no CTF trace (no `metadata` file) here", p.display())
            }
        }
    }
}

impl std::error::Error for OpenError {}

/// One trace: a directory with `metadata` and its stream files.
pub struct TraceDir {
    /// The directory.
    pub dir: PathBuf,
    /// The parsed metadata.
    pub trace: Trace,
    /// Warnings from the metadata (unknown attributes...).
    pub warnings: Vec<ParseError>,
    /// Stream files, sorted by name (a tape trace's losses stream apart).
    pub streams: Vec<PathBuf>,
    /// A tape trace's losses stream (`LOSSES_STREAM`: losses by cause of
    /// each stream, no events), when its `env` declares one and the file
    /// exists (it does only when some stream lost events).
    pub losses: Option<PathBuf>,
}

impl TraceDir {
    /// Whether it is a kernel trace (`env.domain = "kernel"`: `tape record
    /// --kernel`'s, or LTTng's kernel tracer's).
    pub fn is_kernel(&self) -> bool {
        self.trace
            .env
            .iter()
            .any(|(k, v)| k == "domain" && matches!(v, crate::EnvValue::Str(s) if s == "kernel"))
    }

    /// Whether the trace declares a losses stream (tape's traces since
    /// the losses left the printed packet context): its streams' losses
    /// by cause are there, and a stream it does not name lost nothing.
    pub fn declares_losses(&self) -> bool {
        self.trace
            .env
            .iter()
            .any(|(k, _)| k == crate::LOSSES_STREAM_ENV)
    }
}

/// Finds every trace under `path` (a trace directory, or a tree of them as
/// LTTng writes), sorted by directory.
///
/// Symbolic links are followed, but no directory is entered twice (it is
/// known by its device and inode): a link back up the tree is not a loop,
/// and a trace reached by two paths is read once.
pub fn find_traces(path: &Path) -> Result<Vec<TraceDir>, OpenError> {
    use std::os::unix::fs::MetadataExt;
    let mut dirs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = std::fs::metadata(&d).map_err(|e| OpenError::Io(d.clone(), e))?;
        if !seen.insert((m.dev(), m.ino())) {
            continue;
        }
        if d.join("metadata").is_file() {
            dirs.push(d.clone());
        }
        let rd = std::fs::read_dir(&d).map_err(|e| OpenError::Io(d.clone(), e))?;
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.is_dir()
                    && p.file_name()
                        .is_some_and(|n| n != "index" && !n.to_string_lossy().starts_with('.'))
            })
            .collect();
        subs.sort();
        stack.extend(subs.into_iter().rev());
    }
    if dirs.is_empty() {
        return Err(OpenError::NoTrace(path.to_path_buf()));
    }
    dirs.sort();
    dirs.into_iter().map(|d| open_trace(&d)).collect()
}

/// Opens one trace directory.
pub fn open_trace(dir: &Path) -> Result<TraceDir, OpenError> {
    let mpath = dir.join("metadata");
    let bytes = std::fs::read(&mpath).map_err(|e| OpenError::Io(mpath.clone(), e))?;
    let m = unwrap_metadata(&bytes).map_err(|m| OpenError::Packetized(mpath.clone(), m))?;
    let (text, packet_order) = (&m.text, m.order);
    let mut parsed = parse_metadata(text).map_err(|e| OpenError::Metadata(mpath.clone(), e))?;
    if packet_order.is_none() {
        parsed.beyond_babeltrace2.extend(plain_text_signature(text));
    }
    // What babeltrace2 would refuse: in a trace of tape's, a bug of the
    // writer's that no other tool could read past (refused, so that no
    // trace of tape's is readable by tape alone); in another tool's, a
    // warning.
    if let Some(e) = parsed.beyond_babeltrace2.first() {
        if parsed.trace.written_by_tape() {
            let message = format!(
                "{} (tape wrote this metadata: a bug of tape's, please report it)",
                e.message
            );
            return Err(OpenError::Metadata(
                mpath,
                ParseError {
                    message,
                    ..e.clone()
                },
            ));
        }
    }
    let beyond = std::mem::take(&mut parsed.beyond_babeltrace2);
    parsed.warnings.extend(beyond);
    parsed.warnings.sort_by_key(|w| (w.line, w.col));
    parsed.warnings.splice(0..0, m.warnings());
    if packet_order.is_some_and(|o| o != parsed.trace.byte_order) {
        return Err(OpenError::Packetized(
            mpath,
            "the metadata packets' byte order differs from the trace's `byte_order`".into(),
        ));
    }
    crate::validate(&parsed.trace).map_err(|m| OpenError::Invalid(mpath.clone(), m))?;
    let mut streams: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| OpenError::Io(dir.to_path_buf(), e))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n != "metadata" && !n.starts_with('.')
                })
        })
        .collect();
    streams.sort();
    // A tape trace's losses stream is read apart (`env` names its file).
    let losses_name = parsed.trace.env.iter().find_map(|(k, v)| match v {
        crate::EnvValue::Str(name) if k == crate::LOSSES_STREAM_ENV => Some(name.clone()),
        _ => None,
    });
    let mut losses = None;
    if let Some(name) = losses_name {
        if let Some(at) = streams
            .iter()
            .position(|p| p.file_name().is_some_and(|n| n == name.as_str()))
        {
            losses = Some(streams.remove(at));
        }
    }
    Ok(TraceDir {
        dir: dir.to_path_buf(),
        trace: parsed.trace,
        warnings: parsed.warnings,
        streams,
        losses,
    })
}

/// Metadata in plain text must begin with its signature, `/* CTF 1.8`
/// (spaces optional inside), for babeltrace2 2.0, which reads the version
/// there: the error that it does not, if it does not. Packetized metadata
/// needs none (the packets say what it is).
pub fn plain_text_signature(text: &str) -> Option<ParseError> {
    let ok = text
        .strip_prefix("/*")
        .map(str::trim_start)
        .and_then(|t| t.strip_prefix("CTF"))
        .map(str::trim_start)
        .and_then(|t| t.strip_prefix("1.8"))
        .is_some_and(|t| !t.starts_with(|c: char| c.is_ascii_digit()));
    (!ok).then(|| ParseError {
        line: 1,
        col: 1,
        message: "plain-text metadata that does not begin with `/* CTF 1.8`: babeltrace2 2.0 \
                  refuses it"
            .into(),
    })
}

/// The metadata text, and what reading it passed over.
struct Metadata {
    text: String,
    /// The metadata packets' byte order, if packetized.
    order: Option<crate::ByteOrder>,
    /// Where in `text` the first byte that is not UTF-8 was (read as U+FFFD).
    not_utf8: Option<usize>,
    /// Bytes after the last metadata packet, too few for a packet header.
    tail: usize,
}

impl Metadata {
    /// Warnings about the bytes: not UTF-8 (read as U+FFFD, as babeltrace2
    /// reads such bytes in comments and strings without a word), or a
    /// fragment after the last packet (ignored, as babeltrace2 ignores it).
    fn warnings(&self) -> Vec<ParseError> {
        let mut out = Vec::new();
        if let Some(at) = self.not_utf8.filter(|&at| at < self.text.len()) {
            let before = &self.text[..at];
            out.push(ParseError {
                line: before.matches('\n').count() as u32 + 1,
                col: (at - before.rfind('\n').map_or(0, |n| n + 1)) as u32 + 1,
                message: "the metadata is not UTF-8 here: read as U+FFFD".into(),
            });
        }
        if self.tail > 0 {
            out.push(ParseError {
                line: 1,
                col: 1,
                message: format!(
                    "{} bytes after the last metadata packet, too few for a packet header, ignored",
                    self.tail
                ),
            });
        }
        out
    }
}

/// The metadata text: as is when it starts with `/* CTF`, else unwrapped
/// from metadata packets (magic 0x75D11D57, 37-byte header, §7.1), with the
/// packets' byte order. Bytes that are not UTF-8 are read as U+FFFD (see
/// the warnings of [`open_trace`]).
pub fn metadata_text(bytes: &[u8]) -> Result<(String, Option<crate::ByteOrder>), String> {
    unwrap_metadata(bytes).map(|m| (m.text, m.order))
}

/// [`metadata_text`], with what it passed over.
fn unwrap_metadata(bytes: &[u8]) -> Result<Metadata, String> {
    const MAGIC: u32 = 0x75D1_1D57;
    if bytes.len() >= 4 {
        let le = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let be = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if le == MAGIC || be == MAGIC {
            let little = le == MAGIC;
            let u32_at = |b: &[u8], o: usize| {
                let x = [b[o], b[o + 1], b[o + 2], b[o + 3]];
                if little {
                    u32::from_le_bytes(x)
                } else {
                    u32::from_be_bytes(x)
                }
            };
            let mut out = Vec::new();
            let (mut off, mut tail) = (0usize, 0);
            while off < bytes.len() {
                let b = &bytes[off..];
                if b.len() < 37 && off > 0 {
                    // A fragment too short for a header: ignored (warned).
                    tail = b.len();
                    break;
                }
                if b.len() < 37 {
                    return Err(format!("truncated metadata packet header at byte {off}"));
                }
                if u32_at(b, 0) != MAGIC {
                    return Err(format!("bad metadata packet magic at byte {off}"));
                }
                let content = u32_at(b, 24) as usize / 8;
                let packet = u32_at(b, 28) as usize / 8;
                let (major, minor) = (b[35], b[36]);
                if (major, minor) != (1, 8) {
                    return Err(format!(
                        "metadata packet at byte {off} has version {major}.{minor}, not 1.8"
                    ));
                }
                // The last packet may end before its `packet_size` (its
                // padding cut): its content is all that is read.
                let packet = if packet > b.len() && content <= b.len() {
                    b.len()
                } else {
                    packet
                };
                if content < 37 || content > packet || packet > b.len() {
                    return Err(format!(
                        "metadata packet at byte {off}: content size {content} / packet size {packet} bytes do not fit ({} left)",
                        b.len()
                    ));
                }
                out.extend_from_slice(&b[37..content]);
                off += packet;
            }
            let order = if little {
                crate::ByteOrder::Little
            } else {
                crate::ByteOrder::Big
            };
            return Ok(Metadata {
                not_utf8: std::str::from_utf8(&out).err().map(|e| e.valid_up_to()),
                text: until_nul(String::from_utf8_lossy(&out).into_owned()),
                order: Some(order),
                tail,
            });
        }
    }
    let not_utf8 = std::str::from_utf8(bytes).err().map(|e| e.valid_up_to());
    let text = String::from_utf8_lossy(bytes);
    let rest = text.strip_prefix("/* CTF").ok_or_else(|| {
        "metadata does not start with `/* CTF 1.8` (nor a metadata packet)".to_owned()
    })?;
    let version = rest.trim_start();
    if !version.starts_with("1.8") {
        return Err("metadata signature is not `/* CTF 1.8`".into());
    }
    Ok(Metadata {
        text: until_nul(text.into_owned()),
        order: None,
        not_utf8,
        tail: 0,
    })
}

/// The metadata text ends at its first NUL byte, as babeltrace2 reads it
/// (a C string): what follows is not part of it.
fn until_nul(mut text: String) -> String {
    if let Some(i) = text.find('\0') {
        text.truncate(i);
    }
    text
}
