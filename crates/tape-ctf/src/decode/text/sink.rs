//! babeltrace2's text of decoded values: the [`TextSink`] that writes an
//! event's scopes as `{ a = 1, b = "x" }`, and the numbers, strings and
//! enumerations as babeltrace2 2.0 prints them.

use crate::decode::plan::Sink;
use crate::decode::text::buf::TextBuf;
use crate::decode::text::value::{text_bits, text_enum, text_float, text_string};
use crate::{Base, Enum};

/// Packet context fields babeltrace2 does not print.
pub(crate) const HIDDEN: [&str; 6] = [
    "timestamp_begin",
    "timestamp_end",
    "content_size",
    "packet_size",
    "packet_seq_num",
    "events_discarded",
];

/// Writes decoded scopes in babeltrace2's text format: each scope struct
/// as ` { a = 1, b = "x" }` (`, { ... }` after the first of the line);
/// a scope with nothing to show writes nothing.
pub struct TextSink<'a> {
    out: &'a mut TextBuf,
    hide: &'a [&'a str],
    /// Per open struct/array (up to 64 deep; deeper ones share the last
    /// entry): elements written so far.
    stack: [u32; 64],
    depth: usize,
    scope_start: usize,
    skipping: bool,
    /// Whether the scope being written had a hidden field.
    hid: bool,
    /// Whether a scope was written on this line already.
    pub scopes_written: bool,
}

impl<'a> TextSink<'a> {
    /// A struct member starts: `None` when it is not shown (a hidden
    /// top-level field, or inside one), else whether it is the first.
    #[inline]
    fn member(&mut self, name: &str) -> Option<bool> {
        if self.depth == 1 {
            self.skipping = !self.hide.is_empty() && self.hide.contains(&name);
            self.hid |= self.skipping;
        }
        if self.skipping {
            return None;
        }
        let n = self.top();
        let first = *n == 0;
        *n += 1;
        Some(first)
    }

    #[inline]
    fn top(&mut self) -> &mut u32 {
        &mut self.stack[self.depth.clamp(1, 64) - 1]
    }

    #[inline]
    fn open(&mut self) {
        self.depth += 1;
        *self.top() = 0;
    }

    #[inline]
    fn close(&mut self) -> u32 {
        let n = *self.top();
        self.depth = self.depth.saturating_sub(1);
        n
    }

    /// A sink appending to `out`, leaving out top-level fields in `hide`.
    pub fn new(out: &'a mut TextBuf, hide: &'a [&'a str]) -> TextSink<'a> {
        TextSink {
            out,
            hide,
            stack: [0; 64],
            depth: 0,
            scope_start: 0,
            skipping: false,
            hid: false,
            scopes_written: false,
        }
    }

    /// Marks that the line already has a scope (so the next one starts with `,`).
    pub fn after_scope(mut self, written: bool) -> Self {
        self.scopes_written = written;
        self
    }
}

impl Sink for TextSink<'_> {
    #[inline]
    fn field_with_text(&mut self, name: &str, sep: &[u8]) {
        if let Some(first) = self.member(name) {
            self.out.put(if first { &sep[1..] } else { sep });
        }
    }

    #[inline]
    fn field(&mut self, name: &str) {
        if let Some(first) = self.member(name) {
            self.out.put(if first { b" " } else { b", " });
            self.out.put(name.as_bytes());
            self.out.put(b" = ");
        }
    }

    #[inline]
    fn uint(&mut self, v: u64, base: Base, bits: u32) {
        if self.skipping {
            return;
        }
        text_bits(self.out, v, false, bits, base);
    }

    #[inline]
    fn sint(&mut self, v: i64, base: Base, bits: u32) {
        if !self.skipping {
            text_bits(self.out, v as u64, true, bits, base);
        }
    }

    fn enumeration(&mut self, v: i128, e: &Enum) {
        if !self.skipping {
            text_enum(self.out, v, e);
        }
    }

    fn float(&mut self, v: f64) {
        if !self.skipping {
            text_float(self.out, v);
        }
    }

    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, base: Base) {
        if !self.skipping {
            self.out
                .put(crate::decode::wide_int(v, signed, bits, base).as_bytes());
        }
    }

    #[inline]
    fn string(&mut self, s: &[u8]) {
        if !self.skipping {
            text_string(self.out, s);
        }
    }

    #[inline]
    fn begin_struct(&mut self) {
        if self.depth == 0 {
            self.scope_start = self.out.len();
            self.skipping = false;
            self.hid = false;
            self.out
                .put(if self.scopes_written { b", {" } else { b" {" });
        } else if !self.skipping {
            self.out.push(b'{');
        }
        self.open();
    }

    #[inline]
    fn end_struct(&mut self) {
        let n = self.close();
        if self.depth == 0 {
            if n == 0 && self.hid {
                // Only fields the reader interprets (a packet context of
                // sizes and times): babeltrace2 shows no scope at all. A
                // scope declared empty shows as `{ }`.
                self.out.truncate(self.scope_start);
            } else {
                self.out.put(b" }");
                self.scopes_written = true;
            }
            self.skipping = false;
            return;
        }
        if self.skipping {
            return;
        }
        let _ = n;
        self.out.put(b" }");
    }

    fn begin_array(&mut self, _len: u64) {
        self.open();
        if self.skipping {
            return;
        }
        self.out.push(b'[');
    }

    fn item(&mut self, i: u64) {
        if self.skipping {
            return;
        }
        let n = self.top();
        let first = *n == 0;
        *n += 1;
        self.out.put(if first { b" [" } else { b", [" });
        self.out.decimal(i);
        self.out.put(b"] = ");
    }

    fn end_array(&mut self) {
        self.close();
        if self.skipping {
            return;
        }
        self.out.put(b" ]");
    }

    fn variant(&mut self, option: &str) {
        if self.skipping {
            return;
        }
        // babeltrace2 2.0 prints the option's value, not its name.
        let _ = option;
        self.out.put(b"{ ");
    }

    fn end_variant(&mut self) {
        if self.skipping {
            return;
        }
        self.out.put(b" }");
    }
}
