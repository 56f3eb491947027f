//! An event read by its tracepoint's own description: the untyped probe
//! view ([`crate::probe::Event::fields`]) and the types the event filter
//! checks its expressions against.
//!
//! A tracepoint's fields are described once, as the trace's metadata
//! describes them ([`described`]: the CTF model its field types give, each
//! name spelled as the TSDL writer spells it, `_` before a name that starts
//! with `_` or is a keyword), and an event's bytes are walked by that
//! description into any [`Sink`] of the model crate ([`decode`]). The
//! layout is tape's own (`field.rs`): packed, byte aligned, in the
//! machine's byte order; a sequence's length and a variant's tag are
//! earlier fields of the same struct. So this walk is short and needs
//! neither the TSDL parser nor the reader's compiled plans, which the
//! recorder does not carry (issue 37).
//!
//! ```text
//!   described:  struct { u16 port; u32 __ifname_len; u8 _ifname[__ifname_len]; }
//!   bytes:      03 00 | 02 00 00 00 | 65 30
//!   sink:       begin_struct  field("port") uint(3)  field("_ifname_len") uint(2)
//!               field("ifname") begin_array(2) item(0) uint(101) item(1) uint(48) end_array
//!               end_struct
//! ```

use tape_ctf_model::sink::Sink;
use tape_ctf_model::{escape_name, Encoding, Field, Integer, Struct, Type};

use crate::point::Tracepoint;

/// Structs nested deeper than this are refused (tape's own types never
/// come near it).
const MAX_DEPTH: usize = 64;

/// The fields of `tp` as the trace's metadata describes them: the model
/// its field types give, every name escaped as the TSDL writer escapes it
/// (so the names, sequence lengths and variant tags read as a reader of
/// the trace reads them).
pub(crate) fn described(tp: &Tracepoint) -> Struct {
    let mut layout = crate::field::Layout::default();
    for f in tp.desc().fields {
        (f.describe)(f.name, &mut layout);
    }
    described_layout(layout)
}

/// [`described`] of the fields `layout` holds.
pub(crate) fn described_layout(layout: crate::field::Layout) -> Struct {
    Struct::new(layout.fields.into_iter().map(escaped).collect())
}

fn escaped(f: Field) -> Field {
    Field::new(escape_name(&f.name), escaped_type(f.ty))
}

fn escaped_type(t: Type) -> Type {
    match t {
        Type::Struct(s) => Type::Struct(Struct::new(s.fields.into_iter().map(escaped).collect())),
        Type::Array { element, len } => Type::Array {
            element: Box::new(escaped_type(*element)),
            len,
        },
        Type::Sequence { element, length } => Type::Sequence {
            element: Box::new(escaped_type(*element)),
            length,
        },
        Type::Variant { tag, options } => Type::Variant {
            tag,
            options: options.into_iter().map(escaped).collect(),
        },
        other => other,
    }
}

/// A field's name as its user wrote it (`http.method`), from the
/// identifier the metadata holds (`_http_2e_method`; [`name_of`]).
fn shown(name: &str) -> std::borrow::Cow<'_, str> {
    tape_ctf_model::name_of(name)
}

/// Walks the event fields `bytes` by `fields` (from [`described`]) into
/// `sink`, as one struct; returns the bytes taken. An error names the
/// field and the byte where the event ends too early or is not what its
/// description says.
pub(crate) fn decode<S: Sink>(
    fields: &Struct,
    bytes: &[u8],
    sink: &mut S,
) -> Result<usize, String> {
    let mut w = Walk { bytes, at: 0 };
    w.strukt(fields, sink, 0)?;
    Ok(w.at)
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// An integer read: its bits as unsigned, and as signed when it is.
#[derive(Clone, Copy)]
enum Int {
    U(u64),
    S(i64),
}

impl Int {
    fn as_i128(self) -> i128 {
        match self {
            Int::U(v) => i128::from(v),
            Int::S(v) => i128::from(v),
        }
    }
}

impl Walk<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "{what}: {n} byte(s) at byte {} run past the event's {} bytes",
                self.at,
                self.bytes.len()
            ));
        };
        let b = &self.bytes[self.at..end];
        self.at = end;
        Ok(b)
    }

    fn int(&mut self, i: &Integer, what: &str) -> Result<Int, String> {
        if i.size == 0 || i.size > 64 || i.size % 8 != 0 {
            return Err(format!(
                "{what}: an integer of {} bits is not tape's",
                i.size
            ));
        }
        let n = (i.size / 8) as usize;
        let b = self.take(n, what)?;
        let mut word = [0u8; 8];
        if cfg!(target_endian = "little") {
            word[..n].copy_from_slice(b);
        } else {
            word[8 - n..].copy_from_slice(b);
        }
        let raw = if cfg!(target_endian = "little") {
            u64::from_le_bytes(word)
        } else {
            u64::from_be_bytes(word)
        };
        Ok(if i.signed {
            let shift = 64 - i.size;
            Int::S(((raw << shift) as i64) >> shift)
        } else {
            Int::U(raw)
        })
    }

    fn strukt<S: Sink>(&mut self, s: &Struct, sink: &mut S, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("structs nest deeper than {MAX_DEPTH}"));
        }
        sink.begin_struct();
        // The integers read so far at this level, by escaped name: the
        // lengths and tags of the fields after them.
        let mut known: Vec<(&str, Int, Option<&tape_ctf_model::Enum>)> = Vec::new();
        for f in &s.fields {
            sink.field(&shown(&f.name));
            let got = self.value(&f.ty, &f.name, &known, sink, depth)?;
            if let Some((v, e)) = got {
                known.push((&f.name, v, e));
            }
        }
        sink.end_struct();
        Ok(())
    }

    /// One value of type `t` (named `name`, for errors); an integer or an
    /// enumeration returns what it read, for the fields after it.
    fn value<'t, S: Sink>(
        &mut self,
        t: &'t Type,
        name: &str,
        known: &[(&str, Int, Option<&tape_ctf_model::Enum>)],
        sink: &mut S,
        depth: usize,
    ) -> Result<Option<(Int, Option<&'t tape_ctf_model::Enum>)>, String> {
        let find = |path: &str| known.iter().rev().find(|(n, _, _)| *n == path);
        match t {
            Type::Integer(i) => {
                let v = self.int(i, name)?;
                match v {
                    Int::U(u) => sink.uint(u, i.base, i.size),
                    Int::S(s) => sink.sint(s, i.base, i.size),
                }
                Ok(Some((v, None)))
            }
            Type::Enum(e) => {
                let v = self.int(&e.container, name)?;
                sink.enumeration(v.as_i128(), e);
                Ok(Some((v, Some(e))))
            }
            Type::Float(f) => {
                let v = match f.exp_dig + f.mant_dig {
                    32 => {
                        let b = self.take(4, name)?;
                        f64::from(f32::from_ne_bytes(b.try_into().expect("4 bytes")))
                    }
                    64 => {
                        let b = self.take(8, name)?;
                        f64::from_ne_bytes(b.try_into().expect("8 bytes"))
                    }
                    bits => return Err(format!("{name}: a float of {bits} bits is not tape's")),
                };
                sink.float(v);
                Ok(None)
            }
            Type::String(_) => {
                let rest = &self.bytes[self.at..];
                let Some(n) = rest.iter().position(|&b| b == 0) else {
                    return Err(format!("{name}: the string at byte {} has no end", self.at));
                };
                let s = self.take(n + 1, name)?;
                sink.string(&s[..n]);
                Ok(None)
            }
            Type::Struct(s) => {
                self.strukt(s, sink, depth + 1)?;
                Ok(None)
            }
            Type::Array { element, len } => {
                self.elements(element, *len, name, sink, depth)?;
                Ok(None)
            }
            Type::Sequence { element, length } => {
                let n = match find(length) {
                    Some((_, Int::U(n), _)) => *n,
                    Some((_, Int::S(n), _)) if *n >= 0 => *n as u64,
                    _ => {
                        return Err(format!(
                            "{name}: its length {length} is not an earlier field"
                        ))
                    }
                };
                self.elements(element, n, name, sink, depth)?;
                Ok(None)
            }
            Type::Variant { tag, options } => {
                let Some((_, v, Some(e))) = find(tag) else {
                    return Err(format!(
                        "{name}: its tag {tag} is not an earlier enumeration"
                    ));
                };
                let label = e.labels(v.as_i128()).next().unwrap_or("");
                let Some(option) = options
                    .iter()
                    .find(|o| shown(&o.name) == label || o.name == label)
                else {
                    return Err(format!(
                        "{name}: no option for the tag's value {}",
                        v.as_i128()
                    ));
                };
                sink.variant(&shown(&option.name));
                self.value(&option.ty, &option.name, &[], sink, depth + 1)?;
                sink.end_variant();
                Ok(None)
            }
            Type::Named(n) => Err(format!("{name}: the named type {n} is not tape's")),
        }
    }

    /// `n` elements of `element`: a text array or sequence (8-bit
    /// integers with an encoding) as one string up to its first NUL.
    fn elements<S: Sink>(
        &mut self,
        element: &Type,
        n: u64,
        name: &str,
        sink: &mut S,
        depth: usize,
    ) -> Result<(), String> {
        if let Type::Integer(i) = element {
            if i.size == 8 && i.encoding != Encoding::None {
                let len = usize::try_from(n).map_err(|_| format!("{name}: {n} elements"))?;
                let b = self.take(len, name)?;
                let text = b.iter().position(|&c| c == 0).map_or(b, |z| &b[..z]);
                sink.string(text);
                return Ok(());
            }
        }
        if n > self.bytes.len() as u64 && !matches!(element, Type::Struct(s) if s.fields.is_empty())
        {
            return Err(format!(
                "{name}: {n} elements cannot fit in the event's {} bytes",
                self.bytes.len()
            ));
        }
        sink.begin_array(n);
        for i in 0..n {
            sink.item(i);
            self.value(element, name, &[], sink, depth + 1)?;
        }
        sink.end_array();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tape_ctf_model::sink::ValueSink;
    use tape_ctf_model::{Base, Value};

    tape_macros::tracepoint! {
        /// Every shape the walk takes.
        pub fn shapes(port: u16, delta: i32, ratio: f64, ifname: &str, ids: &[u32], tag: Option<u8>, align: u8) = "test.view.shapes";
    }

    #[test]
    fn an_event_decodes_by_its_description() {
        let fields = described(&shapes::TRACEPOINT);
        let names: Vec<&str> = fields.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "port",
                "delta",
                "ratio",
                "ifname",
                "__ids_len",
                "ids",
                "__tag_tag",
                "tag",
                "_align"
            ]
        );
        let payload = (3u16, -7i32, 0.5f64, "eth0", &[9u32, 10][..], Some(4u8), 1u8);
        let bytes = crate::field::with_encoded::<256, _, _>(&payload, |b| b.to_vec()).unwrap();
        let mut sink = ValueSink::default();
        assert_eq!(decode(&fields, &bytes, &mut sink), Ok(bytes.len()));
        let Some(Value::Struct(got)) = sink.scopes.pop() else {
            panic!("no struct");
        };
        let got: Vec<(&str, &Value)> = got.iter().map(|(n, v)| (n.as_str(), v)).collect();
        assert_eq!(got[0], ("port", &Value::UInt(3, Base::Decimal)));
        assert_eq!(got[1], ("delta", &Value::SInt(-7, Base::Decimal)));
        assert_eq!(got[2], ("ratio", &Value::Float(0.5)));
        assert_eq!(got[3], ("ifname", &Value::Str("eth0".into())));
        assert_eq!(got[4], ("_ids_len", &Value::UInt(2, Base::Decimal)));
        assert_eq!(
            got[5],
            (
                "ids",
                &Value::Array(vec![
                    Value::UInt(9, Base::Decimal),
                    Value::UInt(10, Base::Decimal)
                ])
            )
        );
        assert_eq!(got[7].0, "tag");
        assert_eq!(
            got[7].1,
            &Value::Variant("some".into(), Box::new(Value::UInt(4, Base::Decimal)))
        );
        assert_eq!(got[8], ("align", &Value::UInt(1, Base::Decimal)));
        // Cut anywhere, the event is an error naming a field, never a panic.
        for cut in 0..bytes.len() {
            let err = decode(&fields, &bytes[..cut], &mut ValueSink::default()).unwrap_err();
            assert!(err.contains("byte"), "{cut}: {err}");
        }
        // A length that cannot be: an error, not an allocation.
        let mut huge = bytes.clone();
        let at = 2 + 4 + 8 + 5;
        huge[at..at + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(decode(&fields, &huge, &mut ValueSink::default()).is_err());
    }
}
