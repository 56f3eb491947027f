//! Static checks of a parsed trace that the grammar cannot make (§7.3):
//! every sequence length names an unsigned integer (or an enum with an
//! unsigned container) and every variant tag an enum, declared before it in
//! the same or an enclosing structure, or reachable by an absolute path;
//! stream classes are told apart by ids; events name existing streams.

use crate::{Field, Struct, Trace, Type};

/// Checks `trace`; the error says which event or stream and which field.
pub fn validate(trace: &Trace) -> Result<(), String> {
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
                ("event.fields", Some(&e.fields)),
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
