//! Pieces of babeltrace2's default text format (`sink.text.pretty`), so
//! that the output of `tape show` can be grepped like babeltrace2's (the
//! line itself is written by [`write_line_prefix`] and [`write_event_rest`]):
//!
//! ```text
//! [10:00:00.475336892] (+0.000980368) host app.net.rx: { cpu_id = 0 }, { port = 3, ifname = "eth0" }
//! ```
//!
//! The time is the event's clock value in the local time zone; the delta is
//! from the previous event (`+?.?????????` for the first); `host` is the
//! trace's `env.hostname` when it has one. Then, each in braces: the packet
//! context without the fields babeltrace2 hides (timestamps, sizes, sequence
//! number, discarded count), the stream event context, the event context and
//! the payload.

pub(crate) mod parallel;

use crate::decode::plan::{Bits, Discard};
use crate::decode::stream::StreamReader;
use crate::decode::text::line::TextBuf;
use crate::decode::text::sink::TextSink;
use crate::decode::DecodeError;

/// Writes one event line in babeltrace2's format: `[time] (+delta) host
/// name: { packet context }, { stream event context }, { event context },
/// { payload }` and a newline. `time` is the formatted time, `delta_ns` the
/// time since the previous event.
pub fn write_event_line(
    out: &mut TextBuf,
    time: &[u8],
    delta_ns: Option<i128>,
    stream: &mut StreamReader,
) -> Result<(), DecodeError> {
    write_line_prefix(out, time, delta_ns);
    write_event_rest(out, stream)
}

/// The start of an event line: `[time] (+delta) `.
pub fn write_line_prefix(out: &mut TextBuf, time: &[u8], delta_ns: Option<i128>) {
    out.push(b'[');
    out.put(time);
    out.put(b"] ");
    match delta_ns {
        Some(d) => {
            // u64 arithmetic (an i128 division is a slow library call).
            let d = u64::try_from(d.max(0)).unwrap_or(u64::MAX);
            out.put(b"(+");
            out.seconds(d);
            out.put(b") ");
        }
        None => out.put(b"(+?.?????????) "),
    }
}

/// The rest of an event line after [`write_line_prefix`]: `host name:`,
/// the packet context and the event's scopes, and a newline.
pub fn write_event_rest(out: &mut TextBuf, stream: &mut StreamReader) -> Result<(), DecodeError> {
    let Some((idx, _)) = stream.current else {
        return stream.emit(&mut Discard); // the error of an emit without peek
    };
    let sp = &stream.plan.streams[stream.stream];
    let ev = sp.events[idx].as_ref().expect("checked in header");
    let mark = ev.line_head(&stream.packet_text, out);
    let written = !stream.packet_text.is_empty();
    if let Some(text) = &ev.text {
        let mut b = Bits {
            buf: stream.buf.bytes(),
            pos: stream.pos,
            end: stream.content_end,
        };
        // An event of length 0 is an error the general path reports.
        if text.run(&mut b, &mut stream.state, out)
            && (b.pos > stream.pos || sp.event_header.is_some())
        {
            stream.pos = b.pos;
            stream.current = None;
            return Ok(());
        }
        out.truncate(mark);
    }
    let mut sink = TextSink::new(out, &[]).after_scope(written);
    stream.emit(&mut sink)?;
    out.push(b'\n');
    Ok(())
}
