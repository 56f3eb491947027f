//! The reader's value sink feeding a filter's capture: `tape show
//! --filter` decodes an event with the reader (`tape_ctf`) into the
//! filter's [`Capture`] (`tape::filter`), which keeps only the values the
//! filter compares. The recorder does not depend on the reader, so the
//! adapter lives here (the recorder's own filter tests include this file).

use tape::filter::Capture;
use tape_ctf::decode::plan::Sink;
use tape_ctf::{Base, Enum};

/// The reader's value sink feeding a filter's [`Capture`] (the capture is
/// the filter's, in `tape`, which does not depend on the reader).
pub struct Catching<'a>(pub &'a mut Capture);

impl Sink for Catching<'_> {
    fn scope(&mut self, name: &'static str) {
        self.0.scope(name);
    }
    fn field(&mut self, name: &str) {
        self.0.field(name);
    }
    fn uint(&mut self, v: u64, base: Base, bits: u32) {
        self.0.uint(v, base, bits);
    }
    fn sint(&mut self, v: i64, base: Base, bits: u32) {
        self.0.sint(v, base, bits);
    }
    fn enumeration(&mut self, v: i128, e: &Enum) {
        self.0.enumeration(v, e);
    }
    fn float(&mut self, v: f64) {
        self.0.float(v);
    }
    fn string(&mut self, s: &[u8]) {
        self.0.string(s);
    }
    fn wide(&mut self, v: &[u8], signed: bool, bits: u32, base: Base) {
        self.0.wide(v, signed, bits, base);
    }
    fn begin_struct(&mut self) {
        self.0.begin_struct();
    }
    fn end_struct(&mut self) {
        self.0.end_struct();
    }
    fn begin_array(&mut self, len: u64) {
        self.0.begin_array(len);
    }
    fn item(&mut self, i: u64) {
        self.0.item(i);
    }
    fn end_array(&mut self) {
        self.0.end_array();
    }
    fn variant(&mut self, option: &str) {
        self.0.variant(option);
    }
    fn end_variant(&mut self) {
        self.0.end_variant();
    }
}
