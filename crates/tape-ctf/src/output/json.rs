//! One JSON object a line (`tape show --format json`): an event's time,
//! name, stream, packet context and scopes.

use crate::decode::json::JsonSink;
use crate::decode::plan::Sink as _;
use crate::decode::stream::StreamReader;
use crate::decode::DecodeError;

/// One event as a JSON object on its own line: time, name, stream, packet
/// context and the event's scopes (`stream_context`, `context`, `fields`).
pub fn write_json_line(
    out: &mut Vec<u8>,
    t: Option<i128>,
    stream: &mut StreamReader,
) -> Result<(), DecodeError> {
    out.extend_from_slice(b"{\"time_ns\":");
    match t {
        Some(t) => out.extend_from_slice(t.to_string().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"name\":");
    let name = stream.class().map(|c| c.name.clone()).unwrap_or_default();
    JsonSink::new(out).string(name.as_bytes());
    out.extend_from_slice(b",\"stream\":");
    JsonSink::new(out).string(stream.path().display().to_string().as_bytes());
    out.extend_from_slice(b",\"packet_context\":");
    if stream.packet_text.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        out.extend_from_slice(stream.packet_text.as_slice());
    }
    let mut sink = JsonSink::in_object(out, 4);
    stream.emit(&mut sink)?;
    out.extend_from_slice(b"}\n");
    Ok(())
}
