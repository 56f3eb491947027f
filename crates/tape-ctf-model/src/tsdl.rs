//! TSDL writer: turns the model into metadata text.
//!
//! The output follows the shape of the metadata that LTTng and DPDK write
//! (one block per line group, types inline, four-space indentation), which
//! every CTF reader in use accepts. Field names are escaped with
//! [`escape_name`](crate::escape_name); labels and strings are quoted and
//! escaped. Every other identifier the model holds (an `env` key, a
//! clock a timestamp maps to, a sequence's length, a variant's tag, a
//! named type) is checked, and a model with one that is not an
//! identifier, or with two fields of one structure that give one
//! identifier, is refused ([`TsdlError`]): no name can write TSDL of its
//! own, and no trace is written that a reader refuses.

use std::fmt::Write;

use crate::{
    check_identifier, escape_name, uuid_string, Base, ByteOrder, Encoding, EnvValue, Field, Float,
    Integer, Struct, Trace, Type,
};

/// A model the writer refuses: where (`event "x"`, `env`, `stream 0`) and
/// why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsdlError {
    /// The block of the metadata: `event "app.rx"`, `env`, `stream 0`, ...
    pub place: String,
    /// What is wrong, naming the identifier.
    pub reason: String,
}

impl std::fmt::Display for TsdlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "metadata not written: {}: {}", self.place, self.reason)
    }
}

impl std::error::Error for TsdlError {}

/// A reference to a field (`len`, `event.fields.len`) or a type name
/// (`unsigned long`): words of identifier characters, keywords allowed.
fn check_words(s: &str, sep: char) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.split(sep).all(|w| {
            let mut c = w.chars();
            c.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?} is not a TSDL reference"))
    }
}

/// Checks what `write_type` writes of a struct's fields unescaped, and
/// that they give distinct identifiers.
fn check_fields(fields: &[Field]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for f in fields {
        let id = escape_name(&f.name);
        if !seen.insert(id.clone()) {
            return Err(format!("two fields are named {id:?}"));
        }
        check_type(&f.ty).map_err(|e| format!("field {id}: {e}"))?;
    }
    Ok(())
}

fn check_type(ty: &Type) -> Result<(), String> {
    match ty {
        Type::Integer(i) => check_integer(i),
        Type::Enum(e) => check_integer(&e.container),
        Type::Float(_) | Type::String(_) => Ok(()),
        Type::Struct(s) => check_fields(&s.fields),
        Type::Array { element, .. } => check_type(element),
        Type::Sequence { element, length } => {
            check_words(length, '.')?;
            check_type(element)
        }
        Type::Variant { tag, options } => {
            check_words(tag, '.')?;
            check_fields(options)
        }
        Type::Named(n) => check_words(n, ' '),
    }
}

fn check_integer(i: &Integer) -> Result<(), String> {
    match &i.map {
        Some(c) => check_identifier(c).map_err(|e| format!("its clock: {e}")),
        None => Ok(()),
    }
}

fn check_trace(t: &Trace) -> Result<(), TsdlError> {
    fn at(place: &str) -> impl FnOnce(String) -> TsdlError + '_ {
        move |reason| TsdlError {
            place: place.to_owned(),
            reason,
        }
    }
    for (name, ty) in &t.aliases {
        check_words(name, ' ').map_err(at("typealias"))?;
        check_type(ty).map_err(at(&format!("typealias {name}")))?;
    }
    if let Some(h) = &t.packet_header {
        check_fields(&h.fields).map_err(at("trace.packet.header"))?;
    }
    for (k, _) in &t.env {
        check_identifier(k).map_err(at("env"))?;
    }
    let named = t
        .packet_header
        .as_ref()
        .is_some_and(|h| h.fields.iter().any(|f| f.name == "stream_id"));
    for s in &t.streams {
        let place = format!("stream {}", s.id.unwrap_or(0));
        if s.id.is_some() && !named {
            // Nothing in a packet would name the class: babeltrace2 refuses it.
            return Err(at(&place)(
                "a stream id, yet no `stream_id` in the trace's packet header".into(),
            ));
        }
        for st in [&s.packet_context, &s.event_header, &s.event_context]
            .into_iter()
            .flatten()
        {
            check_fields(&st.fields).map_err(at(&place))?;
        }
    }
    for e in &t.events {
        let place = format!("event {}", quote(&e.name));
        for text in std::iter::once(&e.name).chain(&e.emf_uri) {
            no_nul(text).map_err(at(&place))?;
        }
        for st in [&e.context, &e.fields].into_iter().flatten() {
            check_fields(&st.fields).map_err(at(&place))?;
        }
    }
    for (_, v) in &t.env {
        if let EnvValue::Str(text) = v {
            no_nul(text).map_err(at("env"))?;
        }
    }
    for c in &t.clocks {
        no_nul(&c.name).map_err(at("clock"))?;
        check_identifier(&c.name).map_err(at("clock"))?;
    }
    Ok(())
}

/// A string readers in C (babeltrace2) would cut at its NUL is refused.
fn no_nul(text: &str) -> Result<(), String> {
    match text.find('\0') {
        Some(at) => Err(format!(
            "{} holds a NUL at byte {at}, where a reader in C would end it",
            quote(text)
        )),
        None => Ok(()),
    }
}

pub(crate) fn write_trace(t: &Trace) -> Result<String, TsdlError> {
    check_trace(t)?;
    let mut out = String::with_capacity(4096);
    out.push_str("/* CTF 1.8 */\n\n");
    for (name, ty) in &t.aliases {
        out.push_str("typealias ");
        write_type(&mut out, ty, 0);
        let _ = writeln!(out, " := {name};");
    }
    if !t.aliases.is_empty() {
        out.push('\n');
    }

    out.push_str("trace {\n    major = 1;\n    minor = 8;\n");
    let _ = writeln!(out, "    uuid = \"{}\";", uuid_string(&t.uuid));
    let _ = writeln!(out, "    byte_order = {};", order(t.byte_order));
    if let Some(h) = &t.packet_header {
        out.push_str("    packet.header := ");
        write_struct(&mut out, h, 1);
        out.push_str(";\n");
    }
    out.push_str("};\n\n");

    if !t.env.is_empty() {
        out.push_str("env {\n");
        for (k, v) in &t.env {
            match v {
                EnvValue::Int(i) => {
                    let _ = writeln!(out, "    {k} = {i};");
                }
                EnvValue::Str(s) => {
                    let _ = writeln!(out, "    {k} = {};", quote(s));
                }
            }
        }
        out.push_str("};\n\n");
    }

    for c in &t.clocks {
        out.push_str("clock {\n");
        let _ = writeln!(out, "    name = {};", quote(&c.name));
        if let Some(d) = &c.description {
            let _ = writeln!(out, "    description = {};", quote(d));
        }
        let _ = writeln!(out, "    freq = {};", c.freq);
        let _ = writeln!(out, "    precision = {};", c.precision);
        let _ = writeln!(out, "    offset_s = {};", c.offset_s);
        let _ = writeln!(out, "    offset = {};", c.offset);
        let _ = writeln!(
            out,
            "    absolute = {};",
            if c.absolute { "TRUE" } else { "FALSE" }
        );
        out.push_str("};\n\n");
    }

    for s in &t.streams {
        out.push_str("stream {\n");
        if let Some(id) = s.id {
            let _ = writeln!(out, "    id = {id};");
        }
        for (key, st) in [
            ("packet.context", &s.packet_context),
            ("event.header", &s.event_header),
            ("event.context", &s.event_context),
        ] {
            if let Some(st) = st {
                let _ = write!(out, "    {key} := ");
                write_struct(&mut out, st, 1);
                out.push_str(";\n");
            }
        }
        out.push_str("};\n\n");
    }

    for e in &t.events {
        out.push_str("event {\n");
        let _ = writeln!(out, "    name = {};", quote(&e.name));
        let _ = writeln!(out, "    id = {};", e.id);
        if let Some(s) = e.stream_id {
            let _ = writeln!(out, "    stream_id = {s};");
        }
        if let Some(l) = e.loglevel {
            let _ = writeln!(out, "    loglevel = {l};");
        }
        if let Some(u) = &e.emf_uri {
            let _ = writeln!(out, "    model.emf.uri = {};", quote(u));
        }
        if let Some(c) = &e.context {
            out.push_str("    context := ");
            write_struct(&mut out, c, 1);
            out.push_str(";\n");
        }
        if let Some(f) = &e.fields {
            out.push_str("    fields := ");
            write_struct(&mut out, f, 1);
            out.push_str(";\n");
        }
        out.push_str("};\n\n");
    }
    Ok(out)
}

fn order(o: ByteOrder) -> &'static str {
    match o {
        ByteOrder::Little => "le",
        ByteOrder::Big => "be",
    }
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("    ");
    }
}

/// A TSDL string literal: quoted, with `"`, `\` and control characters
/// escaped (`\n`, `\t`, `\r`, the others in octal: `\001`).
///
/// ```
/// assert_eq!(tape_ctf_model::quote("a \"b\""), r#""a \"b\"""#);
/// ```
pub fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            // Three octal digits, which every reader ends at: a `\x`
            // escape runs on through the hex digits after it in
            // babeltrace2 (`\x01c` is 0x1c), and in others at two.
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(q, "\\{:03o}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn write_struct(out: &mut String, s: &Struct, level: usize) {
    out.push_str("struct {\n");
    for f in &s.fields {
        write_field(out, f, level + 1);
    }
    indent(out, level);
    out.push('}');
    if let Some(a) = s.min_align {
        let _ = write!(out, " align({a})");
    }
}

fn write_field(out: &mut String, f: &Field, level: usize) {
    indent(out, level);
    // Arrays and sequences put their length after the name, innermost last:
    // `T name[2][3]` is an array of 2 arrays of 3 (C order).
    let mut suffix = String::new();
    let mut ty = &f.ty;
    loop {
        match ty {
            Type::Array { element, len } => {
                let _ = write!(suffix, "[{len}]");
                ty = element;
            }
            Type::Sequence { element, length } => {
                let _ = write!(suffix, "[{length}]");
                ty = element;
            }
            _ => break,
        }
    }
    write_type(out, ty, level);
    let _ = writeln!(out, " {}{suffix};", escape_name(&f.name));
}

fn write_type(out: &mut String, ty: &Type, level: usize) {
    match ty {
        Type::Integer(i) => write_integer(out, i),
        Type::Float(f) => write_float(out, f),
        Type::String(enc) => match enc {
            Encoding::None | Encoding::Utf8 => out.push_str("string"),
            Encoding::Ascii => out.push_str("string { encoding = ASCII; }"),
        },
        Type::Enum(e) => {
            out.push_str("enum : ");
            write_integer(out, &e.container);
            out.push_str(" { ");
            for (n, entry) in e.entries.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(&entry.label));
                if entry.start == entry.end {
                    let _ = write!(out, " = {}", entry.start);
                } else {
                    let _ = write!(out, " = {} ... {}", entry.start, entry.end);
                }
            }
            out.push_str(" }");
        }
        Type::Struct(s) => write_struct(out, s, level),
        Type::Variant { tag, options } => {
            let _ = writeln!(out, "variant <{tag}> {{");
            for f in options {
                write_field(out, f, level + 1);
            }
            indent(out, level);
            out.push('}');
        }
        Type::Array { .. } | Type::Sequence { .. } => {
            // Only reachable for an array nested in a type alias; TSDL has no
            // anonymous array type, so describe it through a one-field struct.
            out.push_str("struct {\n");
            write_field(out, &Field::new("items", ty.clone()), level + 1);
            indent(out, level);
            out.push('}');
        }
        Type::Named(n) => out.push_str(n),
    }
}

fn write_integer(out: &mut String, i: &Integer) {
    let _ = write!(
        out,
        "integer {{ size = {}; align = {}; signed = {};",
        i.size,
        i.align,
        u8::from(i.signed)
    );
    if let Some(o) = i.byte_order {
        let _ = write!(out, " byte_order = {};", order(o));
    }
    let base = match i.base {
        Base::Decimal => 10,
        Base::Hexadecimal => 16,
        Base::Octal => 8,
        Base::Binary => 2,
    };
    let _ = write!(out, " base = {base};");
    match i.encoding {
        Encoding::None => {}
        Encoding::Utf8 => out.push_str(" encoding = UTF8;"),
        Encoding::Ascii => out.push_str(" encoding = ASCII;"),
    }
    if let Some(c) = &i.map {
        let _ = write!(out, " map = clock.{c}.value;");
    }
    out.push_str(" }");
}

fn write_float(out: &mut String, f: &Float) {
    let _ = write!(
        out,
        "floating_point {{ exp_dig = {}; mant_dig = {}; align = {};",
        f.exp_dig, f.mant_dig, f.align
    );
    if let Some(o) = f.byte_order {
        let _ = write!(out, " byte_order = {};", order(o));
    }
    out.push_str(" }");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, EnumEntry, EventClass, StreamClass};

    #[test]
    fn quotes_are_escaped() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("\u{1}c\u{7f}"), "\"\\001c\\177\"");
    }

    #[test]
    fn every_type_is_written() {
        let mut t = Trace::new([0xab; 16]);
        t.clocks.push(Clock::new("c", 1000));
        t.packet_header = Some(Struct::new(vec![Field::new(
            "stream_id",
            Type::Integer(Integer::unsigned(32)),
        )]));
        t.streams.push(StreamClass {
            id: Some(0),
            ..StreamClass::default()
        });
        let fields = Struct::new(vec![
            Field::new("a", Type::Integer(Integer::signed(32))),
            Field::new("f", Type::Float(Float::binary64())),
            Field::new("s", Type::String(Encoding::Utf8)),
            Field::new(
                "b",
                Type::Enum(crate::Enum {
                    container: Integer::unsigned(8),
                    entries: vec![
                        EnumEntry {
                            label: "false".into(),
                            start: 0,
                            end: 0,
                        },
                        EnumEntry {
                            label: "many".into(),
                            start: 1,
                            end: 9,
                        },
                    ],
                }),
            ),
            Field::new("_n", Type::Integer(Integer::unsigned(32))),
            Field::new(
                "seq",
                Type::Sequence {
                    element: Box::new(Type::Integer(Integer::unsigned(8).hex())),
                    length: "__n".into(),
                },
            ),
            Field::new(
                "arr",
                Type::Array {
                    element: Box::new(Type::Integer(Integer::unsigned(8).utf8())),
                    len: 4,
                },
            ),
        ]);
        t.events.push(EventClass::new("x.y", 3, fields));
        let s = t.to_tsdl().unwrap();
        for needle in [
            "uuid = \"abababab-abab-abab-abab-abababababab\";",
            "integer { size = 32; align = 8; signed = 1; base = 10; } a;",
            "floating_point { exp_dig = 11; mant_dig = 53; align = 8; } f;",
            "string s;",
            "enum : integer { size = 8; align = 8; signed = 0; base = 10; } { \"false\" = 0, \"many\" = 1 ... 9 } b;",
            "base = 16; } seq[__n];",
            "encoding = UTF8; } arr[4];",
            "integer { size = 32; align = 8; signed = 0; base = 10; } __n;",
        ] {
            assert!(s.contains(needle), "missing {needle:?} in\n{s}");
        }
    }

    fn one_event(fields: Vec<Field>) -> Trace {
        let mut t = Trace::new([1; 16]);
        t.events.push(EventClass::new("e", 0, Struct::new(fields)));
        t
    }

    #[test]
    fn any_field_name_is_written_as_an_identifier() {
        let u8_ = || Type::Integer(Integer::unsigned(8));
        let t = one_event(vec![
            Field::new("http.method", u8_()),
            Field::new("}; event { integer x; /* c */", u8_()),
            Field::new("", u8_()),
        ]);
        let s = t.to_tsdl().unwrap();
        assert!(s.contains("} _http_2e_method;"), "{s}");
        assert!(!s.contains("/* c"), "{s}");
        assert!(s.contains("} _0_;"), "{s}");
    }

    #[test]
    fn what_is_not_an_identifier_is_refused() {
        let u8_ = || Type::Integer(Integer::unsigned(8));
        let seq = |length: &str| Type::Sequence {
            element: Box::new(u8_()),
            length: length.into(),
        };
        let mut env = one_event(vec![]);
        env.env.push(("a key".into(), EnvValue::Int(1)));
        let mut nul = one_event(vec![]);
        nul.events[0].name = "a\0b".into();
        let mut clock = one_event(vec![Field::new(
            "t",
            Type::Integer(Integer::unsigned(64).mapped("c c")),
        )]);
        clock.env.clear();
        for (t, want) in [
            (
                one_event(vec![Field::new("n", u8_()), Field::new("s", seq("n; } x"))]),
                "metadata not written: event \"e\": field s: \"n; } x\" is not a TSDL reference",
            ),
            (
                one_event(vec![Field::new("n", u8_()), Field::new("n", u8_())]),
                "metadata not written: event \"e\": two fields are named \"n\"",
            ),
            (
                one_event(vec![Field::new("_x", u8_()), Field::new("_x", u8_())]),
                "metadata not written: event \"e\": two fields are named \"__x\"",
            ),
            (
                nul,
                "metadata not written: event \"a\\000b\": \"a\\000b\" holds a NUL at byte 1, where a reader in C would end it",
            ),
            (
                env,
                "metadata not written: env: \"a key\" is not a TSDL identifier (byte 1: ' ')",
            ),
            (
                clock,
                "metadata not written: event \"e\": field t: its clock: \"c c\" is not a TSDL identifier (byte 1: ' ')",
            ),
        ] {
            assert_eq!(t.to_tsdl().unwrap_err().to_string(), want);
        }
    }
}
