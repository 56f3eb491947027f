//! Static checks of a parsed trace that the grammar cannot make (§7.3):
//! every sequence length names an unsigned integer (or an enum with an
//! unsigned container) and every variant tag an enum, declared before it in
//! the same or an enclosing structure, or reachable by an absolute path;
//! stream classes are told apart by ids; events name existing streams.
//!
//! The fields a reader interprets (§5: the packet header's `magic`, `uuid`,
//! `stream_id`, `stream_instance_id`; the packet context's timestamps, sizes,
//! counters; the event header's `id`) must have the type that role needs,
//! as babeltrace2 also requires: `magic` the first member, an unsigned
//! 32-bit integer; `uuid` 16 unsigned 8-bit, byte-aligned integers; the
//! others unsigned integers (or enumerations); `stream_id` (`id`) present
//! when there are several stream (event) classes to tell apart. Clocks named
//! by `map = clock.X.value` must exist.

use crate::{Field, Struct, Trace, Type};

/// Checks `trace`; the error says which event or stream and which field.
pub fn validate(trace: &Trace) -> Result<(), String> {
    special_fields(trace)?;
    clock_maps(trace)?;
    if trace.streams.len() > 1 && trace.streams.iter().any(|s| s.id.is_none()) {
        return Err("several stream classes, and one of them has no `id`".into());
    }
    for e in &trace.events {
        if e.stream_id.is_none() && trace.streams.len() > 1 {
            return Err(format!(
                "event `{}` has no `stream_id` but there are several stream classes",
                e.name
            ));
        }
        if let Some(sid) = e.stream_id {
            if !trace.streams.is_empty() && !trace.streams.iter().any(|s| s.id.unwrap_or(0) == sid)
            {
                return Err(format!(
                    "event `{}` names stream {sid}, which does not exist",
                    e.name
                ));
            }
        }
    }
    let empty = Struct::default();
    let header = trace.packet_header.as_ref().unwrap_or(&empty);
    check_scope(
        header,
        &[("trace.packet.header", header)],
        "trace.packet.header",
    )?;
    for s in &trace.streams {
        let mut scopes: Vec<(&str, &Struct)> = vec![("trace.packet.header", header)];
        for (name, st) in [
            ("stream.packet.context", &s.packet_context),
            ("stream.event.header", &s.event_header),
            ("stream.event.context", &s.event_context),
        ] {
            if let Some(st) = st {
                scopes.push((name, st));
                check_scope(st, &scopes, name)?;
            }
        }
        let sid = s.id.unwrap_or(0);
        let single = trace.streams.len() == 1;
        for e in trace
            .events
            .iter()
            .filter(|e| e.stream_id.map_or(single || sid == 0, |x| x == sid))
        {
            let mut scopes = scopes.clone();
            for (name, st) in [
                ("event.context", e.context.as_ref()),
                ("event.fields", e.fields.as_ref()),
            ] {
                if let Some(st) = st {
                    scopes.push((name, st));
                    check_scope(st, &scopes, name)
                        .map_err(|m| format!("event `{}`: {m}", e.name))?;
                }
            }
        }
    }
    Ok(())
}

/// The type a role needs (module docs).
fn special_fields(trace: &Trace) -> Result<(), String> {
    fn member<'a>(s: Option<&'a Struct>, name: &str) -> Option<(usize, &'a Type)> {
        s?.fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)
            .map(|(i, f)| (i, &f.ty))
    }
    let unsigned = |t: &Type| match t {
        Type::Integer(i) => Some(i.size).filter(|_| !i.signed),
        Type::Enum(e) => Some(e.container.size).filter(|_| !e.container.signed),
        _ => None,
    };
    let header = trace.packet_header.as_ref();
    let at = "trace.packet.header";
    if let Some((i, t)) = member(header, "magic") {
        if i != 0 {
            return Err(format!("{at}: `magic` is not the first member"));
        }
        if unsigned(t) != Some(32) {
            return Err(format!("{at}: `magic` is not an unsigned 32-bit integer"));
        }
    }
    for name in ["stream_id", "stream_instance_id"] {
        if let Some((_, t)) = member(header, name) {
            if unsigned(t).is_none() {
                return Err(format!("{at}: `{name}` is not an unsigned integer"));
            }
        }
    }
    if member(header, "stream_id").is_none() && trace.streams.len() > 1 {
        return Err(format!(
            "{at}: no `stream_id`, but there are {} stream classes to tell apart",
            trace.streams.len()
        ));
    }
    if let Some((_, t)) = member(header, "uuid") {
        let ok = match t {
            Type::Array { element, len: 16 } => matches!(
                &**element,
                Type::Integer(i) if !i.signed && i.size == 8 && i.align == 8
            ),
            _ => false,
        };
        if !ok {
            return Err(format!(
                "{at}: `uuid` is not an array of 16 unsigned, byte-aligned 8-bit integers"
            ));
        }
    }
    for s in &trace.streams {
        let sid = s.id.unwrap_or(0);
        let at = format!("stream {sid}: stream.packet.context");
        for name in [
            "timestamp_begin",
            "timestamp_end",
            "events_discarded",
            "packet_seq_num",
            "packet_size",
            "content_size",
        ] {
            if let Some((_, t)) = member(s.packet_context.as_ref(), name) {
                if unsigned(t).is_none() {
                    return Err(format!("{at}: `{name}` is not an unsigned integer"));
                }
            }
        }
        let at = format!("stream {sid}: stream.event.header");
        match member(s.event_header.as_ref(), "id") {
            Some((_, t)) if unsigned(t).is_none() => {
                return Err(format!("{at}: `id` is not an unsigned integer"));
            }
            Some(_) => {}
            None => {
                let single = trace.streams.len() == 1;
                let classes = trace
                    .events
                    .iter()
                    .filter(|e| e.stream_id.map_or(single || sid == 0, |x| x == sid))
                    .count();
                if classes > 1 {
                    return Err(format!(
                        "{at}: no `id`, but the stream has {classes} event classes to tell apart"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Every `map = clock.X.value` names a declared clock.
fn clock_maps(trace: &Trace) -> Result<(), String> {
    let mut scopes: Vec<(String, &Struct)> = Vec::new();
    if let Some(h) = &trace.packet_header {
        scopes.push(("trace.packet.header".into(), h));
    }
    for s in &trace.streams {
        for (name, st) in [
            ("stream.packet.context", &s.packet_context),
            ("stream.event.header", &s.event_header),
            ("stream.event.context", &s.event_context),
        ] {
            if let Some(st) = st {
                scopes.push((format!("stream {}: {name}", s.id.unwrap_or(0)), st));
            }
        }
    }
    for e in &trace.events {
        if let Some(c) = &e.context {
            scopes.push((format!("event `{}`: event.context", e.name), c));
        }
        if let Some(f) = &e.fields {
            scopes.push((format!("event `{}`: event.fields", e.name), f));
        }
    }
    for (at, s) in scopes {
        let mut stack: Vec<&Type> = s.fields.iter().map(|f| &f.ty).collect();
        while let Some(t) = stack.pop() {
            let map = match t {
                Type::Integer(i) => i.map.as_ref(),
                Type::Enum(e) => e.container.map.as_ref(),
                Type::Struct(s) => {
                    stack.extend(s.fields.iter().map(|f| &f.ty));
                    None
                }
                Type::Variant { options, .. } => {
                    stack.extend(options.iter().map(|f| &f.ty));
                    None
                }
                Type::Array { element, .. } | Type::Sequence { element, .. } => {
                    stack.push(element);
                    None
                }
                _ => None,
            };
            if let Some(clock) = map {
                if !trace.clocks.iter().any(|c| &c.name == clock) {
                    return Err(format!(
                        "{at}: `map = clock.{clock}.value` names no declared clock"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks a type declared outside any event or stream (a named struct, a
/// typedef at the root): its relative paths must resolve inside it;
/// absolute paths are checked where it is used.
pub(crate) fn check_detached(t: &Type) -> Result<(), String> {
    let mut open = Vec::new();
    check_type(t, "", &mut open, &[])
}

fn is_absolute(path: &str) -> bool {
    ["trace.", "stream.", "event.", "env."]
        .iter()
        .any(|p| path.starts_with(p))
}

fn check_scope(s: &Struct, scopes: &[(&str, &Struct)], name: &str) -> Result<(), String> {
    let mut open: Vec<&[Field]> = Vec::new();
    check_struct(s, &mut open, scopes).map_err(|m| format!("{name}: {m}"))
}

/// Walks `s`; `open` holds the fields of the enclosing structs that precede
/// the one being walked (innermost last).
fn check_struct<'a>(
    s: &'a Struct,
    open: &mut Vec<&'a [Field]>,
    scopes: &[(&str, &'a Struct)],
) -> Result<(), String> {
    for (i, f) in s.fields.iter().enumerate() {
        open.push(&s.fields[..i]);
        let r = check_type(&f.ty, &f.name, open, scopes);
        open.pop();
        r?;
    }
    Ok(())
}

fn check_type<'a>(
    t: &'a Type,
    name: &str,
    open: &mut Vec<&'a [Field]>,
    scopes: &[(&str, &'a Struct)],
) -> Result<(), String> {
    match t {
        Type::Struct(s) => check_struct(s, open, scopes),
        Type::Array { element, .. } => check_type(element, name, open, scopes),
        Type::Sequence { element, length } if scopes.is_empty() && is_absolute(length) => {
            check_type(element, name, open, scopes)
        }
        Type::Sequence { element, length } => {
            match resolve(length, open, scopes) {
                Some(Type::Integer(i)) if !i.signed => {}
                Some(Type::Enum(e)) if !e.container.signed => {}
                Some(_) => {
                    return Err(format!(
                        "the length of `{name}`, `{length}`, is not an unsigned integer"
                    ))
                }
                None => {
                    return Err(format!(
                        "the length of `{name}`, `{length}`, names no field declared before it"
                    ))
                }
            }
            check_type(element, name, open, scopes)
        }
        Type::Variant { tag, options } => {
            if tag.is_empty() {
                return Err(format!("variant `{name}` has no tag"));
            }
            match resolve(tag, open, scopes) {
                _ if scopes.is_empty() && is_absolute(tag) => {}
                Some(Type::Enum(e)) => {
                    let labelled = options
                        .iter()
                        .any(|o| e.entries.iter().any(|x| x.label == o.name));
                    if !labelled {
                        return Err(format!(
                            "no option of variant `{name}` is named like a label of its tag `{tag}`"
                        ));
                    }
                }
                Some(_) => {
                    return Err(format!(
                        "the tag of variant `{name}`, `{tag}`, is not an enum"
                    ))
                }
                None => {
                    return Err(format!(
                        "the tag of variant `{name}`, `{tag}`, names no field declared before it"
                    ))
                }
            }
            for o in options {
                check_type(&o.ty, &o.name, open, scopes)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The type a path names: absolute (`event.fields.x.y`), or relative to the
/// fields declared before, innermost structure first.
fn resolve<'a>(
    path: &str,
    open: &[&'a [Field]],
    scopes: &[(&str, &'a Struct)],
) -> Option<&'a Type> {
    for (prefix, st) in scopes {
        if let Some(rest) = path.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) {
            return descend(&st.fields, rest);
        }
    }
    let first = path.split('.').next()?;
    for fields in open.iter().rev() {
        if fields.iter().any(|f| f.name == first) {
            return descend(fields, path);
        }
    }
    None
}

fn descend<'a>(fields: &'a [Field], path: &str) -> Option<&'a Type> {
    let mut parts = path.split('.');
    let first = parts.next()?;
    let mut t = &fields.iter().rev().find(|f| f.name == first)?.ty;
    for p in parts {
        t = match t {
            Type::Struct(s) => &s.fields.iter().find(|f| f.name == p)?.ty,
            _ => return None,
        };
    }
    // Through arrays and sequences: the element (the "current" one).
    while let Type::Array { element, .. } | Type::Sequence { element, .. } = t {
        t = element;
    }
    Some(t)
}
