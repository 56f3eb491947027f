//! The filter on a reader's events (`tape show --filter`): the values a
//! filter compares, caught as a decoder walks an event (the model's value
//! sink), then compared as [`Filter::matches`] compares them on a payload.

use tape_ctf_model::sink::Sink;

use super::compile::{common_named, Common, Filter, Part};
use super::eval::{float, float_rhs, num, text, Found};

/// A step of the path being decoded, borrowed from the decoder.
pub(super) enum Step2<'a> {
    Member(&'a str),
    Element(u64),
    Option(&'a str),
}

/// A decoder's sink (`tape_ctf::decode::Sink`) that catches the values one
/// [`Filter`] compares, as an event is decoded: for `tape show --filter`
/// on any CTF trace. Reused from event to event (its buffers keep their
/// capacity); the common fields come from the packet context, set by the
/// reader with [`Capture::set_packet`], or from the event's context.
#[derive(Default)]
pub struct Capture {
    /// The path being decoded, one part per depth (payload scope only):
    /// the first `len` parts (the others keep their buffers for reuse).
    pub(super) path: Vec<Part>,
    pub(super) len: usize,
    pub(super) depth: usize,
    pub(super) in_payload: bool,
    /// Per comparison: the path it reads (`None`: a common field).
    pub(super) wanted: Vec<Option<Box<[Part]>>>,
    pub(super) slots: Vec<Slot>,
    /// Which slots this event filled.
    pub(super) caught: Vec<bool>,
    /// A common field named at the top of a context scope.
    pub(super) context_field: Option<Common>,
    pub(super) tid: Option<u32>,
    pub(super) thread: Option<Vec<u8>>,
    pub(super) cpu: Option<u32>,
}

#[derive(Clone, Debug, Default)]
pub(super) enum Slot {
    #[default]
    Empty,
    UInt(u64),
    SInt(i64),
    Int(i128),
    Float(f64),
    /// Bytes in the capture's buffer.
    Text(Vec<u8>),
}

impl Capture {
    /// A capture for `filter`'s comparisons.
    pub fn new(filter: &Filter) -> Capture {
        let wanted: Vec<Option<Box<[Part]>>> = filter
            .comparisons()
            .map(|c| c.common.is_none().then(|| c.parts.clone()))
            .collect();
        Capture {
            slots: vec![Slot::Empty; wanted.len()],
            caught: vec![false; wanted.len()],
            wanted,
            ..Capture::default()
        }
    }

    /// Forgets the last event's values (call before decoding the next).
    pub fn clear(&mut self) {
        self.caught.iter_mut().for_each(|c| *c = false);
        self.len = 0;
        self.depth = 0;
        self.in_payload = false;
        self.context_field = None;
    }

    /// The common fields of the events that follow (their packet's).
    /// The common fields of the events that follow, from their packet's
    /// context (`tape_ctf`'s decoded value; none: not known).
    pub fn set_packet(&mut self, packet: Option<&tape_ctf_model::Value>) {
        use tape_ctf_model::Value;
        let (mut tid, mut thread, mut cpu) = (None, None, None);
        if let Some(Value::Struct(fields)) = packet {
            for (name, v) in fields {
                match (common_named(name, true), v) {
                    (Some(Common::Tid), Value::UInt(t, _)) => tid = u32::try_from(*t).ok(),
                    (Some(Common::Tid), Value::SInt(t, _)) => tid = u32::try_from(*t).ok(),
                    (Some(Common::Thread), Value::Str(s)) => thread = Some(s.as_bytes()),
                    (Some(Common::Cpu), Value::UInt(c, _)) => cpu = u32::try_from(*c).ok(),
                    _ => {}
                }
            }
        }
        self.set_common(tid, thread, cpu);
    }

    pub(super) fn set_common(&mut self, tid: Option<u32>, thread: Option<&[u8]>, cpu: Option<u32>) {
        self.tid = tid;
        self.cpu = cpu;
        match (thread, &mut self.thread) {
            (Some(t), Some(b)) => {
                b.clear();
                b.extend_from_slice(t);
            }
            (Some(t), none) => *none = Some(t.to_vec()),
            (None, b) => *b = None,
        }
    }

    pub(super) fn found(&self, slot: usize) -> Option<Found<'_>> {
        if !self.caught.get(slot).copied().unwrap_or(false) {
            return None;
        }
        Some(match self.slots.get(slot)? {
            Slot::Empty => return None,
            Slot::UInt(v) => Found::UInt(*v),
            Slot::SInt(v) => Found::SInt(*v),
            Slot::Int(v) => Found::Int(*v),
            Slot::Float(v) => Found::Float(*v),
            Slot::Text(b) => Found::Text(b),
        })
    }

    /// Sets the part at the current depth (reusing its buffer).
    pub(super) fn set(&mut self, step: Step2<'_>) {
        let at = self.depth.saturating_sub(1);
        while self.path.len() <= at {
            self.path.push(Part::Element(0));
        }
        match (&mut self.path[at], step) {
            (Part::Member(b), Step2::Member(n)) | (Part::Option(b), Step2::Option(n)) => {
                b.clear();
                b.push_str(n);
            }
            (slot, Step2::Member(n)) => *slot = Part::Member(n.to_owned()),
            (slot, Step2::Option(n)) => *slot = Part::Option(n.to_owned()),
            (slot, Step2::Element(i)) => *slot = Part::Element(i),
        }
        self.len = at + 1;
    }

    /// Stores a value at the current path into the slots that want it.
    pub(super) fn catch(&mut self, v: Slot, text: Option<&[u8]>) {
        if !self.in_payload {
            let Some(c) = self.context_field.take() else {
                return;
            };
            match (c, &v, text) {
                (Common::Tid, Slot::UInt(t), _) => self.tid = u32::try_from(*t).ok(),
                (Common::Tid, Slot::SInt(t), _) => self.tid = u32::try_from(*t).ok(),
                (Common::Cpu, Slot::UInt(t), _) => self.cpu = u32::try_from(*t).ok(),
                (Common::Thread, _, Some(t)) => self.set_common(self.tid, Some(t), self.cpu),
                _ => {}
            }
            return;
        }
        for k in 0..self.wanted.len() {
            let Some(w) = &self.wanted[k] else { continue };
            if **w != self.path[..self.len] {
                continue;
            }
            self.caught[k] = true;
            match (text, &mut self.slots[k]) {
                (Some(t), Slot::Text(b)) => {
                    b.clear();
                    b.extend_from_slice(t);
                }
                (Some(t), slot) => *slot = Slot::Text(t.to_vec()),
                (None, slot) => *slot = v.clone(),
            }
        }
    }
}

impl Sink for Capture {
    fn scope(&mut self, name: &'static str) {
        self.in_payload = name == "fields";
        self.depth = 0;
        self.len = 0;
    }

    fn field(&mut self, name: &str) {
        if self.in_payload {
            self.set(Step2::Member(name));
        } else if self.depth == 1 {
            self.context_field = common_named(name, false);
        }
    }

    fn uint(&mut self, v: u64, _: tape_ctf_model::Base, _: u32) {
        self.catch(Slot::UInt(v), None);
    }

    fn sint(&mut self, v: i64, _: tape_ctf_model::Base, _: u32) {
        self.catch(Slot::SInt(v), None);
    }

    fn enumeration(&mut self, v: i128, _: &tape_ctf_model::Enum) {
        self.catch(Slot::Int(v), None);
    }

    fn float(&mut self, v: f64) {
        self.catch(Slot::Float(v), None);
    }

    fn string(&mut self, s: &[u8]) {
        self.catch(Slot::Empty, Some(s));
    }

    fn wide(&mut self, _: &[u8], _: bool, _: u32, _: tape_ctf_model::Base) {
        // Wider than 64 bits: not comparable (the field is refused when
        // the filter is compiled).
        self.context_field = None;
    }

    fn begin_struct(&mut self) {
        self.depth += 1;
    }

    fn end_struct(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.len = self.len.min(self.depth);
    }

    fn begin_array(&mut self, _: u64) {
        self.depth += 1;
    }

    fn item(&mut self, i: u64) {
        if self.in_payload {
            self.set(Step2::Element(i));
        }
    }

    fn end_array(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.len = self.len.min(self.depth);
    }

    fn variant(&mut self, option: &str) {
        self.depth += 1;
        if self.in_payload {
            self.set(Step2::Option(option));
        }
    }

    fn end_variant(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.len = self.len.min(self.depth);
    }
}

// ---------------------------------------------------------------------------
// Filters on tracepoints: set, cleared, applied when an event is recorded.

impl Filter {
    /// Whether the event whose values `capture` caught passes (a reader's
    /// test; see [`Capture`]).
    pub fn matches_captured(&self, capture: &Capture) -> bool {
        self.run(|c| {
            let v = match c.common {
                Some(Common::Tid) => capture.tid.map(|t| Found::UInt(u64::from(t))),
                Some(Common::Cpu) => capture.cpu.map(|t| Found::UInt(u64::from(t))),
                Some(Common::Thread) => capture.thread.as_deref().map(Found::Text),
                None => capture.found(c.slot),
            };
            match v {
                None => false,
                Some(Found::UInt(v)) => num(c.op, i128::from(v), &c.rhs) || float_rhs(c, v as f64),
                Some(Found::SInt(v)) => num(c.op, i128::from(v), &c.rhs) || float_rhs(c, v as f64),
                Some(Found::Int(v)) => num(c.op, v, &c.rhs),
                Some(Found::Float(v)) => float(c.op, v, &c.rhs),
                Some(Found::Text(b)) => text(c.op, b, &c.rhs),
            }
        })
    }
}
