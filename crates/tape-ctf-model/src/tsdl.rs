//! TSDL writer: turns the model into metadata text.
//!
//! The output follows the shape of the metadata that LTTng and DPDK write
//! (one block per line group, types inline, four-space indentation), which
//! every CTF reader in use accepts. Field names are escaped with
//! [`escape_name`](crate::escape_name); labels and strings are quoted and
//! escaped.

use std::fmt::Write;

use crate::{
    escape_name, uuid_string, Base, ByteOrder, Encoding, EnvValue, Field, Float, Integer, Struct,
    Trace, Type,
};

pub(crate) fn write_trace(t: &Trace) -> String {
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
    out
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

/// A TSDL string literal: quoted, with `"`, `\` and control characters escaped.
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
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\x{:02x}", c as u32);
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
    }

    #[test]
    fn every_type_is_written() {
        let mut t = Trace::new([0xab; 16]);
        t.clocks.push(Clock::new("c", 1000));
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
        let s = t.to_tsdl();
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
}
