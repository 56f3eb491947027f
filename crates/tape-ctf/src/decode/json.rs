//! Decoded values as JSON ([`JsonSink`]): shared by `tape show --format
//! json` (`output::json`), the packet contexts the stream reader renders
//! once per packet, and the Chrome export's args (`output::chrome`).

use crate::decode::plan::Sink;
use crate::decode::text::uint_text;
use crate::{Base, Enum};

/// Writes each scope as a JSON object member: `"NAME":{...}`, comma
/// separated, for one-object-per-line output. Floats that JSON cannot hold
/// (NaN, infinities) are written as strings; enums as their label (or the
/// labels as an array) with the value; strings are escaped per RFC 8259.
pub struct JsonSink<'a> {
    out: &'a mut Vec<u8>,
    /// Per open container: elements written so far.
    stack: Vec<u32>,
}

impl<'a> JsonSink<'a> {
    /// A sink appending to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> JsonSink<'a> {
        JsonSink {
            out,
            stack: Vec::new(),
        }
    }

    /// A sink writing scopes as members of an object already open in `out`
    /// with `members` members written.
    pub fn in_object(out: &'a mut Vec<u8>, members: u32) -> JsonSink<'a> {
        JsonSink {
            out,
            stack: vec![members * 2],
        }
    }

    fn sep(&mut self) {
        // Values inside arrays need commas; members got theirs in `field`.
        if let Some(n) = self.stack.last_mut() {
            if *n & 1 == 1 {
                return; // after a member name
            }
            if *n > 0 {
                self.out.push(b',');
            }
            *n += 2;
        }
    }

    fn after_value(&mut self) {
        if let Some(n) = self.stack.last_mut() {
            *n &= !1;
        }
    }

    /// A JSON string: the text when `s` is UTF-8; else an object with the
    /// text (each byte that is not UTF-8 read as U+FFFD) and all the bytes
    /// in hexadecimal, so nothing is lost: `{"text":"cut \u{fffd}","bytes":"63757420c3"}`.
    fn str(&mut self, s: &[u8]) {
        if std::str::from_utf8(s).is_ok() {
            self.text(s);
        } else {
            self.out.extend_from_slice(b"{\"text\":");
            self.text(s);
            self.out.extend_from_slice(b",\"bytes\":\"");
            for b in s {
                let hex = b"0123456789abcdef";
                self.out.push(hex[usize::from(b >> 4)]);
                self.out.push(hex[usize::from(b & 15)]);
            }
            self.out.extend_from_slice(b"\"}");
        }
    }

    fn text(&mut self, s: &[u8]) {
        self.out.push(b'"');
        for ch in String::from_utf8_lossy(s).chars() {
            match ch {
                '"' => self.out.extend_from_slice(b"\\\""),
                '\\' => self.out.extend_from_slice(b"\\\\"),
                '\n' => self.out.extend_from_slice(b"\\n"),
                '\t' => self.out.extend_from_slice(b"\\t"),
                '\r' => self.out.extend_from_slice(b"\\r"),
                c if (c as u32) < 0x20 => self
                    .out
                    .extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
                c => {
                    let mut buf = [0u8; 4];
                    self.out
                        .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        self.out.push(b'"');
    }
}

impl Sink for JsonSink<'_> {
    fn scope(&mut self, name: &'static str) {
        self.field(name);
    }
    fn field(&mut self, name: &str) {
        if let Some(n) = self.stack.last_mut() {
            if *n > 0 {
                self.out.push(b',');
            }
            *n = (*n + 2) | 1;
        }
        self.str(name.as_bytes());
        self.out.push(b':');
    }
    fn uint(&mut self, v: u64, _: Base, _: u32) {
        self.sep();
        let mut buf = [0u8; 66];
        self.out
            .extend_from_slice(uint_text(&mut buf, v, Base::Decimal));
        self.after_value();
    }
    fn sint(&mut self, v: i64, _: Base, _: u32) {
        self.sep();
        self.out.extend_from_slice(v.to_string().as_bytes());
        self.after_value();
    }
    fn enumeration(&mut self, v: i128, e: &Enum) {
        self.sep();
        let labels: Vec<&str> = e.labels(v).collect();
        self.out.extend_from_slice(b"{\"value\":");
        self.out.extend_from_slice(v.to_string().as_bytes());
        self.out.extend_from_slice(b",\"labels\":[");
        for (i, l) in labels.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.str(l.as_bytes());
        }
        self.out.extend_from_slice(b"]}");
        self.after_value();
    }
    fn float(&mut self, v: f64) {
        self.sep();
        if v.is_finite() {
            self.out.extend_from_slice(format!("{v:?}").as_bytes());
        } else {
            self.str(format!("{v}").as_bytes());
        }
        self.after_value();
    }
    fn string(&mut self, s: &[u8]) {
        self.sep();
        self.str(s);
        self.after_value();
    }
    /// A string of decimal digits: JSON numbers that wide lose precision
    /// in most readers.
    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, _: Base) {
        self.sep();
        let digits = crate::decode::wide_int(v, signed, bits, Base::Decimal);
        self.str(digits.as_bytes());
        self.after_value();
    }
    fn begin_struct(&mut self) {
        self.sep();
        self.out.push(b'{');
        self.stack.push(0);
    }
    fn end_struct(&mut self) {
        self.stack.pop();
        self.out.push(b'}');
        self.after_value();
    }
    fn begin_array(&mut self, _: u64) {
        self.sep();
        self.out.push(b'[');
        self.stack.push(0);
    }
    fn item(&mut self, _: u64) {}
    fn end_array(&mut self) {
        self.stack.pop();
        self.out.push(b']');
        self.after_value();
    }
    fn variant(&mut self, option: &str) {
        self.sep();
        self.out.push(b'{');
        self.stack.push(0);
        self.field(option);
    }
    fn end_variant(&mut self) {
        self.stack.pop();
        self.out.push(b'}');
        self.after_value();
    }
}
