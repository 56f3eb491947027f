//! An event's text by its read-time format ([`crate::metadata::formats`]):
//! the format applied to its values, or `name=value` pairs; from a value
//! tree ([`write_text`]) or, for the events of a `flat_class`, from a
//! `FlatSink` filled as it decodes (no tree, no allocation an event).
//! Shared by the outputs that print events as text: ftrace's `trace` and
//! `tape graph`'s comments.

use std::collections::HashMap;
use std::fmt::Write;

use crate::decode::Value;
use crate::metadata::formats::{Align, EventFormat, Hint, Kind, Piece, Spec};

pub(crate) fn member<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        Value::Variant(_, inner) => member(inner, name),
        _ => None,
    }
}

/// The value at `path` in the payload (the last scope), else in the
/// other scopes.
fn find<'a>(scopes: &'a [Value], path: &[String]) -> Option<&'a Value> {
    scopes
        .iter()
        .rev()
        .find_map(|scope| path.iter().try_fold(scope, |v, name| member(v, name)))
}

/// The thread of an event: its name and id, from the packet context and
/// the event's context scopes (`<...>` and 0 when unknown).
pub fn task<'a>(packet: Option<&'a Value>, scopes: &'a [Value]) -> (&'a str, i64) {
    let all: Vec<&Value> = packet
        .into_iter()
        .chain(scopes.iter().rev().skip(1))
        .collect();
    let lookup = |names: &[&str]| {
        all.iter()
            .find_map(|s| names.iter().find_map(|n| member(s, n)))
    };
    let name = match lookup(&["thread_name", "procname", "comm"]) {
        Some(Value::Str(s)) => s.as_str(),
        _ => "<...>",
    };
    let tid = match lookup(&["tid", "vtid", "pid", "vpid"]) {
        Some(Value::UInt(v, _)) => i64::try_from(*v).unwrap_or(i64::MAX),
        Some(Value::SInt(v, _)) => *v,
        _ => 0,
    };
    (name, tid)
}

/// The first of the integer fields `names` in a payload (`prev_tid`, or
/// ftrace's `prev_pid`).
pub(crate) fn int_field(payload: &Value, names: &[&str]) -> Option<i64> {
    names.iter().find_map(|n| match member(payload, n)? {
        Value::SInt(v, _) => Some(*v),
        Value::UInt(v, _) => i64::try_from(*v).ok(),
        _ => None,
    })
}

/// The text field `name` of a payload (a kernel event's `char[16]` comm
/// is decoded as text).
pub(crate) fn text_field(payload: &Value, name: &str) -> Option<String> {
    match member(payload, name)? {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    }
}

/// A `sched_switch`'s two threads, (name, id) switched out and in, from
/// its payload (LTTng's names, `prev_tid`, or ftrace's, `prev_pid`).
pub(crate) fn switch_of(scopes: &[Value]) -> Option<((String, i64), (String, i64))> {
    let payload = scopes.last()?;
    let name = |n: &str| text_field(payload, n).unwrap_or_else(|| "<...>".to_owned());
    Some((
        (
            name("prev_comm"),
            int_field(payload, &["prev_tid", "prev_pid"])?,
        ),
        (
            name("next_comm"),
            int_field(payload, &["next_tid", "next_pid"])?,
        ),
    ))
}

/// The values an event's text is written from: a value tree, or a
/// [`FlatSink`]. [`write_with`] applies the format to either.
trait Fields {
    /// Writes the field at `path` by `spec`, padded; `false` if there is
    /// none.
    fn put_field(
        &self,
        out: &mut String,
        path: &[String],
        hints: &HashMap<String, Hint>,
        spec: &Spec,
    ) -> bool;
    /// Writes the payload's `name=value` pairs.
    fn put_pairs(&self, out: &mut String, hints: &HashMap<String, Hint>);
}

/// The scopes of a value tree, payload last.
struct Tree<'a>(&'a [Value]);

impl Fields for Tree<'_> {
    fn put_field(
        &self,
        out: &mut String,
        path: &[String],
        hints: &HashMap<String, Hint>,
        spec: &Spec,
    ) -> bool {
        let Some(v) = find(self.0, path) else {
            return false;
        };
        let key = path.join(".");
        let text = value_text(v, &key, hints, spec);
        pad(out, &text, spec, is_number(v, hints.get(&key), spec));
        true
    }
    fn put_pairs(&self, out: &mut String, hints: &HashMap<String, Hint>) {
        if let Some(Value::Struct(fields)) = self.0.last() {
            write_pairs(out, fields, "", hints, " ");
        }
    }
}

/// The event's text: its format applied, or `name=value` pairs.
pub fn write_text(out: &mut String, format: Option<&EventFormat>, scopes: &[Value]) {
    write_with(out, format, &Tree(scopes));
}

/// The text of the event whose values `fields` has, by `format`.
fn write_with(out: &mut String, format: Option<&EventFormat>, fields: &impl Fields) {
    let none = HashMap::new();
    let hints = format.map_or(&none, |f| &f.hints);
    let Some(pieces) = format.and_then(|f| f.pieces.as_ref()) else {
        fields.put_pairs(out, hints);
        return;
    };
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Field(path, spec) => {
                if !fields.put_field(out, path, hints, spec) {
                    let _ = write!(out, "<no field {}>", path.join("."));
                }
            }
        }
    }
}

/// Whether the events of `class` can be decoded by a [`FlatSink`] and
/// written by [`write_flat`]: no scope but the payload (`context`: the
/// stream's or its own), and only integers of 64 bits or less and strings
/// in the payload, at its top.
pub(crate) fn flat_class(class: &crate::EventClass, context: bool) -> bool {
    let flat = class.fields.as_ref().is_none_or(|s| {
        s.fields.iter().all(|f| match &f.ty {
            crate::Type::Integer(i) => i.size <= 64,
            crate::Type::String(_) => true,
            _ => false,
        })
    });
    !context && class.context.is_none() && flat
}

/// A top-level payload value kept by a [`FlatSink`].
#[derive(Clone, Copy)]
enum Flat {
    UInt(u64, crate::Base),
    SInt(i64, crate::Base),
    /// The bytes of a string, in [`FlatSink::bytes`].
    Str(usize, usize),
}

/// The payload of an event of a `flat_class`, kept flat in buffers
/// reused from event to event (no value tree, no allocation an event):
/// what [`write_flat`] writes as [`write_text`] writes the tree.
#[derive(Default)]
pub(crate) struct FlatSink {
    /// The fields' names, one after the other.
    names: String,
    /// Each field: where its name ends in `names`, its value.
    fields: Vec<(usize, Flat)>,
    bytes: Vec<u8>,
    /// A field's name was given, its value not yet.
    named: bool,
}

impl FlatSink {
    /// Empties it for the next event.
    pub(crate) fn clear(&mut self) {
        self.names.clear();
        self.fields.clear();
        self.bytes.clear();
        self.named = false;
    }

    /// Each field's name and value, in order.
    fn iter(&self) -> impl Iterator<Item = (&str, Flat)> {
        let mut from = 0;
        self.fields.iter().map(move |&(end, v)| {
            let name = &self.names[from..end];
            from = end;
            (name, v)
        })
    }

    /// The first field named `name` (as [`member`] finds it).
    fn get(&self, name: &str) -> Option<Flat> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The value as the tree has it.
    fn value(&self, v: Flat) -> Value {
        match v {
            Flat::UInt(x, base) => Value::UInt(x, base),
            Flat::SInt(x, base) => Value::SInt(x, base),
            Flat::Str(a, b) => Value::Str(String::from_utf8_lossy(&self.bytes[a..b]).into_owned()),
        }
    }

    /// `value_text` with no hint and the default spec, without its
    /// allocations for the common cases.
    fn natural(&self, out: &mut String, v: Flat) {
        let decimal = |out: &mut String, x: u64| {
            let mut buf = [0u8; 66];
            let digits = crate::decode::text::uint_text(&mut buf, x, crate::Base::Decimal);
            out.push_str(std::str::from_utf8(digits).unwrap_or_default());
        };
        match v {
            Flat::UInt(x, crate::Base::Decimal) => decimal(out, x),
            Flat::SInt(x, crate::Base::Decimal) => {
                if x < 0 {
                    out.push('-');
                }
                decimal(out, x.unsigned_abs());
            }
            Flat::UInt(x, base) => out.push_str(&int_text(i128::from(x), base, &Spec::default())),
            Flat::SInt(x, base) => out.push_str(&int_text(i128::from(x), base, &Spec::default())),
            Flat::Str(a, b) => out.push_str(&String::from_utf8_lossy(&self.bytes[a..b])),
        }
    }

    /// The text of value `v` of the field `name` by `spec`, padded, as
    /// [`write_text`] writes it.
    fn field_text(
        &self,
        out: &mut String,
        name: &str,
        v: Flat,
        hints: &HashMap<String, Hint>,
        spec: &Spec,
    ) {
        let plain = *spec == Spec::default() && (hints.is_empty() || !hints.contains_key(name));
        if plain {
            self.natural(out, v);
            return;
        }
        let v = self.value(v);
        let text = value_text(&v, name, hints, spec);
        pad(out, &text, spec, is_number(&v, hints.get(name), spec));
    }

    /// The value of the field named last (a value without a name before
    /// it is not a top-level field's: a `flat_class` has none).
    fn push(&mut self, v: Flat) {
        if std::mem::take(&mut self.named) {
            if let Some(last) = self.fields.last_mut() {
                last.1 = v;
            }
        }
    }
}

impl crate::decode::plan::Sink for FlatSink {
    fn field(&mut self, name: &str) {
        self.names.push_str(name);
        // Its value follows.
        self.fields
            .push((self.names.len(), Flat::UInt(0, crate::Base::Decimal)));
        self.named = true;
    }
    fn uint(&mut self, v: u64, base: crate::Base, _: u32) {
        self.push(Flat::UInt(v, base));
    }
    fn sint(&mut self, v: i64, base: crate::Base, _: u32) {
        self.push(Flat::SInt(v, base));
    }
    fn string(&mut self, s: &[u8]) {
        let from = self.bytes.len();
        self.bytes.extend_from_slice(s);
        self.push(Flat::Str(from, self.bytes.len()));
    }
    // Not in a `flat_class`'s payload.
    fn enumeration(&mut self, _: i128, _: &crate::Enum) {}
    fn float(&mut self, _: f64) {}
    fn wide(&mut self, _: &[u8], _: bool, _: u32, _: crate::Base) {}
    fn begin_struct(&mut self) {}
    fn end_struct(&mut self) {}
    fn begin_array(&mut self, _: u64) {}
    fn item(&mut self, _: u64) {}
    fn end_array(&mut self) {}
    fn variant(&mut self, _: &str) {}
    fn end_variant(&mut self) {}
}

/// [`write_text`] for an event of a `flat_class` kept by `flat`: the
/// same text.
pub(crate) fn write_flat(out: &mut String, format: Option<&EventFormat>, flat: &FlatSink) {
    write_with(out, format, flat);
}

impl Fields for FlatSink {
    fn put_field(
        &self,
        out: &mut String,
        path: &[String],
        hints: &HashMap<String, Hint>,
        spec: &Spec,
    ) -> bool {
        // A path below the top names nothing in a flat payload.
        let [name] = path else {
            return false;
        };
        let Some(v) = self.get(name) else {
            return false;
        };
        self.field_text(out, name, v, hints, spec);
        true
    }
    fn put_pairs(&self, out: &mut String, hints: &HashMap<String, Hint>) {
        let mut first = true;
        for (name, v) in self
            .iter()
            .filter(|(n, _)| shown_pair(n, |o| self.get(o).is_some()))
        {
            if !first {
                out.push(' ');
            }
            first = false;
            out.push_str(name);
            out.push('=');
            self.field_text(out, name, v, hints, &Spec::default());
        }
    }
}

/// Whether field `name` is printed among the `name=value` pairs: all but
/// those a tracer adds beside a field of the same struct for its length or
/// its variant's tag (tape's `_ids_len` and `_opt_tag`, LTTng's
/// `_msg_length`), which begin with `_` and name a sibling (`has`). A
/// user's own field that begins with `_` is printed.
fn shown_pair(name: &str, has: impl Fn(&str) -> bool) -> bool {
    let Some(rest) = name.strip_prefix('_') else {
        return true;
    };
    let of = ["_len", "_tag", "_length"]
        .iter()
        .find_map(|suffix| rest.strip_suffix(suffix));
    !of.is_some_and(has)
}

fn write_pairs(
    out: &mut String,
    fields: &[(String, Value)],
    prefix: &str,
    hints: &HashMap<String, Hint>,
    sep: &str,
) {
    let mut first = true;
    for (n, v) in fields {
        if !shown_pair(n, |o| fields.iter().any(|(f, _)| f == o)) {
            continue;
        }
        if !first {
            out.push_str(sep);
        }
        first = false;
        let key = if prefix.is_empty() {
            n.to_owned()
        } else {
            format!("{prefix}.{n}")
        };
        out.push_str(n);
        out.push('=');
        out.push_str(&value_text(v, &key, hints, &Spec::default()));
    }
}

pub(crate) fn is_number(v: &Value, hint: Option<&Hint>, spec: &Spec) -> bool {
    match v {
        Value::UInt(..) | Value::SInt(..) | Value::Float(_) => hint.is_none(),
        Value::Enum { labels, .. } => labels.is_empty() || spec.kind != Kind::Natural,
        _ => false,
    }
}

/// Pads `text` to the spec's width.
pub(crate) fn pad(out: &mut String, text: &str, spec: &Spec, number: bool) {
    let len = text.chars().count();
    if len >= spec.width {
        out.push_str(text);
        return;
    }
    let n = spec.width - len;
    if spec.zero && number && spec.align.is_none() {
        // Zeros after the sign and the base prefix.
        let sign = usize::from(text.starts_with(['-', '+']));
        let prefix = if ["0x", "0X", "0o", "0b"]
            .iter()
            .any(|p| text[sign..].starts_with(p))
        {
            2
        } else {
            0
        };
        out.push_str(&text[..sign + prefix]);
        out.extend(std::iter::repeat_n('0', n));
        out.push_str(&text[sign + prefix..]);
        return;
    }
    let fill = |out: &mut String, k: usize| out.extend(std::iter::repeat_n(spec.fill, k));
    match spec
        .align
        .unwrap_or(if number { Align::Right } else { Align::Left })
    {
        Align::Left => {
            out.push_str(text);
            fill(out, n);
        }
        Align::Right => {
            fill(out, n);
            out.push_str(text);
        }
        Align::Center => {
            fill(out, n / 2);
            out.push_str(text);
            fill(out, n - n / 2);
        }
    }
}

fn int_text(v: i128, natural: crate::Base, spec: &Spec) -> String {
    let kind = match (spec.kind, natural) {
        (Kind::Natural, crate::Base::Hexadecimal) => return hex_text(v, true, false),
        (Kind::Natural, crate::Base::Octal) => return format!("0{:o}", v),
        (Kind::Natural, crate::Base::Binary) => return format!("0b{:b}", v),
        (Kind::Natural, crate::Base::Decimal) => Kind::Decimal,
        (k, _) => k,
    };
    match kind {
        Kind::Hex => hex_text(v, spec.alt, false),
        Kind::HexUpper => hex_text(v, spec.alt, true),
        Kind::Octal if spec.alt => format!("0o{v:o}"),
        Kind::Octal => format!("{v:o}"),
        Kind::Binary if spec.alt => format!("0b{v:b}"),
        Kind::Binary => format!("{v:b}"),
        _ => v.to_string(),
    }
}

/// Hex of a value: negative values as their two's complement in 64 bits.
fn hex_text(v: i128, prefix: bool, upper: bool) -> String {
    let u = if v < 0 {
        v as i64 as u64 as u128
    } else {
        v as u128
    };
    match (prefix, upper) {
        (true, false) => format!("0x{u:x}"),
        (true, true) => format!("0x{u:X}"),
        (false, false) => format!("{u:x}"),
        (false, true) => format!("{u:X}"),
    }
}

/// `__print_flags`: each mask wholly set is named and cleared, in order,
/// until no bit is left; leftover bits in hex; nothing for 0.
pub fn print_flags(v: u128, names: &[(String, u128)]) -> String {
    let mut out = String::new();
    let mut left = v;
    for (name, mask) in names {
        if left == 0 {
            break;
        }
        if left & mask != *mask {
            continue;
        }
        left &= !mask;
        if !out.is_empty() {
            out.push('|');
        }
        out.push_str(name);
    }
    if left != 0 {
        if !out.is_empty() {
            out.push('|');
        }
        let _ = write!(out, "0x{left:x}");
    }
    out
}

fn float_text(f: f64, spec: &Spec) -> String {
    if let Some(p) = spec.precision {
        return format!("{f:.p$}");
    }
    let a = f.abs();
    if a != 0.0 && a.is_finite() && !(1e-5..1e16).contains(&a) {
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

/// The text of value `v` at `path` (for hints).
pub(crate) fn value_text(
    v: &Value,
    path: &str,
    hints: &HashMap<String, Hint>,
    spec: &Spec,
) -> String {
    let hint = hints.get(path);
    let as_int = |v: &Value| match v {
        Value::UInt(x, _) => Some(i128::from(*x)),
        Value::SInt(x, _) => Some(i128::from(*x)),
        Value::Enum { value, .. } => Some(*value),
        _ => None,
    };
    match (hint, v) {
        (Some(Hint::Flags(names)), _) if spec.kind == Kind::Natural => {
            if let Some(x) = as_int(v) {
                return print_flags(x as u128, names);
            }
        }
        (Some(Hint::Duration), Value::UInt(ns, _)) if spec.kind == Kind::Natural => {
            return format!("{:?}", std::time::Duration::from_nanos(*ns));
        }
        (Some(h @ (Hint::Ipv4 | Hint::Ipv6)), Value::Array(items)) => {
            let bytes: Vec<u8> = items
                .iter()
                .filter_map(|i| as_int(i).and_then(|x| u8::try_from(x).ok()))
                .collect();
            if let (Hint::Ipv4, Ok(b)) = (h, <[u8; 4]>::try_from(bytes.as_slice())) {
                return std::net::Ipv4Addr::from(b).to_string();
            }
            if let (Hint::Ipv6, Ok(b)) = (h, <[u8; 16]>::try_from(bytes.as_slice())) {
                return std::net::Ipv6Addr::from(b).to_string();
            }
        }
        _ => {}
    }
    match v {
        Value::UInt(x, base) => int_text(i128::from(*x), *base, spec),
        Value::SInt(x, base) => int_text(i128::from(*x), *base, spec),
        Value::Enum { value, labels } => {
            let natural = spec.kind == Kind::Natural;
            match labels.first().map(String::as_str) {
                // Booleans as C prints them.
                Some(l @ ("true" | "false")) if natural && labels.len() == 1 => {
                    if l == "true" { "1" } else { "0" }.to_owned()
                }
                Some(l) if natural => l.to_owned(),
                // `__print_symbolic` prints an unknown value in hex.
                None if natural => hex_text(*value, true, false),
                _ => int_text(*value, crate::Base::Decimal, spec),
            }
        }
        Value::Float(f) => float_text(*f, spec),
        // Wider than any C type: its decimal digits.
        Value::Wide(digits) => digits.clone(),
        Value::Str(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| value_text(i, path, hints, spec))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Struct(fields) => {
            let mut out = String::from("{");
            write_pairs(&mut out, fields, path, hints, " ");
            out.push('}');
            out
        }
        Value::Variant(option, inner) => match &**inner {
            Value::Struct(f) if f.is_empty() => option.clone(),
            inner => value_text(inner, path, hints, spec),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::formats::{parse_format, parse_hints};
    use crate::Base;

    fn flags() -> Vec<(String, u128)> {
        [("RDWR", 3), ("READ", 1), ("WRITE", 2), ("CREATE", 0x40)]
            .iter()
            .map(|&(n, m)| (n.to_owned(), m))
            .collect()
    }

    /// A flat payload written by `write_flat` as it decoded, and by
    /// `write_text` from its value tree: the same text, for every format
    /// and hint below.
    #[test]
    fn flat_payloads_print_as_their_value_trees() {
        use crate::decode::plan::Sink;
        let fields: Vec<(&str, Value)> = vec![
            ("a", Value::UInt(5, Base::Decimal)),
            ("b", Value::SInt(-7, Base::Decimal)),
            ("c", Value::SInt(i64::MIN, Base::Decimal)),
            ("d", Value::UInt(255, Base::Hexadecimal)),
            ("e", Value::SInt(-2, Base::Hexadecimal)),
            ("f", Value::UInt(8, Base::Octal)),
            ("g", Value::SInt(-5, Base::Binary)),
            ("_h", Value::UInt(1, Base::Decimal)),
            ("s", Value::Str("x y\u{fffd}".into())),
            ("a", Value::UInt(6, Base::Decimal)),
            ("u", Value::UInt(u64::MAX, Base::Decimal)),
            ("n", Value::UInt(1_500, Base::Decimal)),
        ];
        let mut flat = FlatSink::default();
        flat.begin_struct();
        for (name, v) in &fields {
            flat.field(name);
            match v {
                Value::UInt(x, base) => flat.uint(*x, *base, 64),
                Value::SInt(x, base) => flat.sint(*x, *base, 64),
                Value::Str(_) => flat.string(b"x y\xff"),
                _ => unreachable!(),
            }
        }
        flat.end_struct();
        let tree = [Value::Struct(
            fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect(),
        )];
        let formats: [Option<&str>; 6] = [
            None,
            Some("{a} {b} {c} {d} {e} {f} {g} {_h} {s} {u}"),
            Some("{a:>5}|{b:05}|{d:#010x}|{e:x}|{s:^9}|{g:b}|{u:X}"),
            Some("{nope} {a.b} {a} {n}"),
            Some("[{s:<6}] {c:>24} {f:#o} {b:d}"),
            Some(""),
        ];
        let hints = ["", "a:flags(ONE=0x1,FOUR=0x4);n:duration", "s:ipv4"];
        for format in formats {
            for h in hints {
                let f = EventFormat {
                    pieces: format.map(|f| parse_format(f).unwrap()),
                    hints: parse_hints(h).unwrap(),
                };
                let (mut want, mut got) = (String::new(), String::new());
                write_text(&mut want, Some(&f), &tree);
                write_flat(&mut got, Some(&f), &flat);
                assert_eq!(got, want, "{format:?} {h:?}");
            }
        }
        let (mut want, mut got) = (String::new(), String::new());
        write_text(&mut want, None, &tree);
        write_flat(&mut got, None, &flat);
        assert_eq!(got, want);
        assert!(
            want.starts_with(
                "a=5 b=-7 c=-9223372036854775808 d=0xff e=0xfffffffffffffffe f=010 g=0b"
            ),
            "{want}"
        );
    }

    #[test]
    fn print_flags_as_the_kernel() {
        let cases: [(u128, &str); 7] = [
            (0, ""),
            (1, "READ"),
            (3, "RDWR"),
            (0x43, "RDWR|CREATE"),
            (0x42, "WRITE|CREATE"),
            (0x180, "0x180"),
            (0x1c1, "READ|CREATE|0x180"),
        ];
        for (v, want) in cases {
            assert_eq!(print_flags(v, &flags()), want, "{v:#x}");
        }
    }

    #[test]
    fn specs() {
        let cases: [(&str, Value, &str); 12] = [
            ("{v:03}", Value::UInt(1, Base::Decimal), "001"),
            ("{v:03}", Value::SInt(-1, Base::Decimal), "-01"),
            ("{v:x}", Value::UInt(255, Base::Decimal), "ff"),
            ("{v:#x}", Value::UInt(255, Base::Decimal), "0xff"),
            ("{v:#06x}", Value::UInt(255, Base::Decimal), "0x00ff"),
            ("{v}", Value::UInt(255, Base::Hexadecimal), "0xff"),
            ("{v:X}", Value::SInt(-1, Base::Decimal), "FFFFFFFFFFFFFFFF"),
            ("[{v:>5}]", Value::Str("ab".into()), "[   ab]"),
            ("[{v:*^6}]", Value::Str("ab".into()), "[**ab**]"),
            ("[{v:5}]", Value::Str("ab".into()), "[ab   ]"),
            ("{v:.2}", Value::Float(1.0 / 3.0), "0.33"),
            ("{{{v}}}", Value::Float(1.5), "{1.5}"),
        ];
        for (f, v, want) in cases {
            let e = EventFormat {
                pieces: Some(parse_format(f).unwrap()),
                hints: HashMap::new(),
            };
            let mut out = String::new();
            write_text(&mut out, Some(&e), &[Value::Struct(vec![("v".into(), v)])]);
            assert_eq!(out, want, "{f}");
        }
    }
}
