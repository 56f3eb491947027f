//! Compiling plans: a stream class's metadata resolved to slots, then
//! emitted as operations.

use super::*;

/// A field's identity: its scope and the names leading to it.
type FieldId = (&'static str, Vec<String>);

/// Compiles plans for one stream class (and its event classes): resolves
/// paths to slots first, then emits operations.
pub(crate) struct Compiler<'t> {
    trace_order: ByteOrder,
    /// Fields whose value some length or tag needs, and their slot.
    wanted: Vec<(FieldId, usize)>,
    next_slot: usize,
    scopes: Vec<(&'static str, &'t Struct)>,
}

const WELL_KNOWN: [(&str, &str, usize); 8] = [
    ("trace.packet.header", "magic", SLOT_MAGIC),
    ("trace.packet.header", "stream_id", SLOT_STREAM_ID),
    ("stream.packet.context", "content_size", SLOT_CONTENT_SIZE),
    ("stream.packet.context", "packet_size", SLOT_PACKET_SIZE),
    ("stream.packet.context", "timestamp_begin", SLOT_TS_BEGIN),
    ("stream.packet.context", "timestamp_end", SLOT_TS_END),
    ("stream.packet.context", "events_discarded", SLOT_DISCARDED),
    ("stream.packet.context", "packet_seq_num", SLOT_SEQ_NUM),
];

impl<'t> Compiler<'t> {
    pub(crate) fn new(trace_order: ByteOrder) -> Compiler<'t> {
        let wanted = WELL_KNOWN
            .iter()
            .map(|(s, n, slot)| ((*s, vec![(*n).to_owned()]), *slot))
            .chain(LOSS_CAUSES.iter().enumerate().map(|(i, c)| {
                (
                    ("stream.packet.context", vec![format!("lost_{c}")]),
                    SLOT_LOST + i,
                )
            }))
            .collect();
        Compiler {
            trace_order,
            wanted,
            next_slot: FIRST_FREE_SLOT,
            scopes: Vec::new(),
        }
    }

    /// Number of slots the plans use.
    pub(crate) fn slots(&self) -> usize {
        self.next_slot
    }

    /// Enters scope `name` (the scopes are entered in decoding order).
    pub(crate) fn push(&mut self, name: &'static str, s: &'t Struct) {
        self.scopes.push((name, s));
    }

    /// Leaves the innermost scope.
    pub(crate) fn pop(&mut self) {
        self.scopes.pop();
    }

    /// Pass 1 for the innermost scope: gives a slot to every field that a
    /// length or tag names (all scopes must be collected before any is
    /// emitted, since a later scope may name a field of an earlier one).
    pub(crate) fn collect_scope(&mut self) -> Result<(), String> {
        let (name, s) = *self.scopes.last().expect("a scope");
        self.collect(name, &Type::Struct(s.clone()), &mut Vec::new())
    }

    /// Pass 2 for the innermost scope: its operations.
    pub(crate) fn emit_scope(&mut self) -> Result<ScopePlan, String> {
        let (name, s) = *self.scopes.last().expect("a scope");
        let mut body = Vec::new();
        let mut path = Vec::new();
        for f in &s.fields {
            path.push(f.name.clone());
            let op = self.emit(name, &f.ty, &mut path, &f.name)?;
            path.pop();
            body.push(field(&f.name, op));
        }
        let a = struct_align(s);
        Ok(ScopePlan::new(vec![Op::Struct {
            align: a,
            body: fuse(body, a),
        }]))
    }

    fn slot_for(&mut self, id: FieldId) -> usize {
        if let Some((_, s)) = self.wanted.iter().find(|(w, _)| *w == id) {
            return *s;
        }
        let s = self.next_slot;
        self.next_slot += 1;
        self.wanted.push((id, s));
        s
    }

    /// Resolves a length or tag path seen at `path` (inside scope `scope`)
    /// to a field identity.
    fn resolve(&self, scope: &'static str, target: &str, path: &[String]) -> Option<FieldId> {
        for (prefix, _) in &self.scopes {
            if let Some(rest) = target
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('.'))
            {
                return Some((prefix, rest.split('.').map(str::to_owned).collect()));
            }
        }
        // Relative: the nearest enclosing struct (innermost first) holding a
        // field of that first name, declared before.
        let first = target.split('.').next()?;
        let (_, root) = self.scopes.iter().find(|(n, _)| *n == scope)?;
        let mut structs: Vec<(usize, &Struct)> = vec![(0, root)];
        // Walk down `path` to collect the enclosing structs: through arrays
        // and sequences (their element), and through variants (the option
        // the next segment names), as the decoder goes.
        let mut cur: &Struct = root;
        let mut depth = 0;
        'walk: while depth + 1 < path.len() {
            let Some(f) = cur.fields.iter().find(|f| f.name == path[depth]) else {
                break;
            };
            let mut t = &f.ty;
            depth += 1;
            loop {
                while let Type::Array { element, .. } | Type::Sequence { element, .. } = t {
                    t = element;
                }
                match t {
                    Type::Struct(s) => {
                        cur = s;
                        structs.push((depth, s));
                        continue 'walk;
                    }
                    Type::Variant { options, .. } if depth + 1 < path.len() => {
                        let Some(o) = options.iter().find(|o| o.name == path[depth]) else {
                            break 'walk;
                        };
                        t = &o.ty;
                        depth += 1;
                    }
                    _ => break 'walk,
                }
            }
        }
        for (depth, s) in structs.iter().rev() {
            let here = &path[*depth];
            let before: Vec<&crate::Field> =
                s.fields.iter().take_while(|f| &f.name != here).collect();
            if before.iter().any(|f| f.name == first) {
                let mut id: Vec<String> = path[..*depth].to_vec();
                id.extend(target.split('.').map(str::to_owned));
                return Some((scope, id));
            }
        }
        None
    }

    fn collect(
        &mut self,
        scope: &'static str,
        t: &Type,
        path: &mut Vec<String>,
    ) -> Result<(), String> {
        match t {
            Type::Struct(s) => {
                for f in &s.fields {
                    path.push(f.name.clone());
                    self.collect(scope, &f.ty, path)?;
                    path.pop();
                }
                Ok(())
            }
            Type::Array { element, .. } => self.collect(scope, element, path),
            Type::Sequence { element, length } => {
                let id = self.resolve(scope, length, path).ok_or_else(|| {
                    format!(
                        "{scope}: the length `{length}` of `{}` names no field",
                        path.join(".")
                    )
                })?;
                self.slot_for(id);
                self.collect(scope, element, path)
            }
            Type::Variant { tag, options } => {
                let id = self.resolve(scope, tag, path).ok_or_else(|| {
                    format!(
                        "{scope}: the tag `{tag}` of `{}` names no field",
                        path.join(".")
                    )
                })?;
                self.slot_for(id);
                for o in options {
                    path.push(o.name.clone());
                    self.collect(scope, &o.ty, path)?;
                    path.pop();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn store_for(&self, scope: &'static str, path: &[String]) -> Option<usize> {
        self.wanted
            .iter()
            .find(|((s, p), _)| *s == scope && p.as_slice() == path)
            .map(|(_, slot)| *slot)
    }

    fn int_op(
        &self,
        scope: &'static str,
        i: &crate::Integer,
        path: &[String],
        name: &str,
        e: Option<Arc<Enum>>,
    ) -> IntOp {
        let store = self.store_for(scope, path);
        // The event id: any integer named `id` in the event header, the
        // last one decoded wins (LTTng's variant headers).
        let event_id = scope == "stream.event.header" && name == "id";
        let clock = if (i.map.is_some() || (name == "timestamp" && scope == "stream.event.header"))
            && !(scope == "stream.packet.context" && name == "timestamp_end")
            || (name == "timestamp_begin" && scope == "stream.packet.context")
        {
            ClockUse::Update
        } else {
            ClockUse::None
        };
        IntOp {
            align: i.align.max(1),
            size: i.size,
            signed: i.signed,
            order: i.byte_order.unwrap_or(self.trace_order),
            base: i.base,
            clock,
            store,
            event_id,
            enumeration: e,
        }
    }

    fn emit(
        &mut self,
        scope: &'static str,
        t: &Type,
        path: &mut Vec<String>,
        name: &str,
    ) -> Result<Op, String> {
        Ok(match t {
            Type::Integer(i) if i.size > 64 => {
                // (A wide integer stores no value: a sequence whose length
                // names one stops there with the sequence's error.)
                if i.map.is_some() {
                    return Err(format!(
                        "{scope}: `{}`: a {}-bit integer cannot be a clock value (64 bits at most)",
                        path.join("."),
                        i.size
                    ));
                }
                Op::Wide(WideOp {
                    align: i.align.max(1),
                    size: i.size,
                    signed: i.signed,
                    order: i.byte_order.unwrap_or(self.trace_order),
                    base: i.base,
                })
            }
            Type::Integer(i) => Op::Int(self.int_op(scope, i, path, name, None)),
            Type::Enum(e) => {
                if e.container.size > 64 {
                    return Err(format!(
                        "{scope}: `{}`: enumerations over {}-bit integers are not supported (64 bits at most)",
                        path.join("."),
                        e.container.size
                    ));
                }
                Op::Int(self.int_op(scope, &e.container, path, name, Some(Arc::new(e.clone()))))
            }
            Type::Float(f) => Op::Float {
                align: f.align.max(1),
                bits: f.exp_dig + f.mant_dig,
                order: f.byte_order.unwrap_or(self.trace_order),
            },
            Type::String(_) => Op::Str,
            Type::Struct(s) => {
                let mut body = Vec::new();
                for f in &s.fields {
                    path.push(f.name.clone());
                    let op = self.emit(scope, &f.ty, path, &f.name)?;
                    path.pop();
                    body.push(field(&f.name, op));
                }
                let a = struct_align(s);
                Op::Struct {
                    align: a,
                    body: fuse(body, a),
                }
            }
            Type::Array { element, len } => self.array(scope, element, Len::Fixed(*len), path)?,
            Type::Sequence { element, length } => {
                let id = self
                    .resolve(scope, length, path)
                    .ok_or_else(|| format!("{scope}: unresolved length `{length}`"))?;
                let slot = self.slot_for(id);
                self.array(scope, element, Len::Slot(slot), path)?
            }
            Type::Variant { tag, options } => {
                let id = self
                    .resolve(scope, tag, path)
                    .ok_or_else(|| format!("{scope}: unresolved tag `{tag}`"))?;
                let slot = self.slot_for(id.clone());
                let tag_type = self.type_of(&id);
                let Some(Type::Enum(e)) = tag_type else {
                    return Err(format!("{scope}: the tag `{tag}` is not an enum"));
                };
                let mut ranges = Vec::new();
                let mut names = Vec::new();
                let mut bodies = Vec::new();
                for (i, o) in options.iter().enumerate() {
                    path.push(o.name.clone());
                    bodies.push(self.emit(scope, &o.ty, path, &o.name)?);
                    path.pop();
                    names.push(shown(&o.name));
                    for entry in e.entries.iter().filter(|x| x.label == o.name) {
                        ranges.push((entry.start, entry.end, i));
                    }
                }
                Op::Variant {
                    tag: slot,
                    options: ranges,
                    names,
                    bodies,
                }
            }
            Type::Named(n) => return Err(format!("unresolved type `{n}`")),
        })
    }

    fn array(
        &mut self,
        scope: &'static str,
        element: &Type,
        len: Len,
        path: &mut Vec<String>,
    ) -> Result<Op, String> {
        let text = matches!(element, Type::Integer(i) if i.size == 8 && i.encoding != Encoding::None && i.align <= 8);
        let elem = self.emit(scope, element, path, "")?;
        Ok(Op::Array {
            align: type_align(element),
            len,
            elem: Box::new(elem),
            text,
            min_bits: min_bits(element),
        })
    }

    /// The type of a field identity (for a variant's tag).
    fn type_of(&self, id: &FieldId) -> Option<Type> {
        let (_, root) = self.scopes.iter().find(|(n, _)| *n == id.0)?;
        let mut t = Type::Struct((*root).clone());
        for name in &id.1 {
            let mut cur = t;
            while let Type::Array { element, .. } | Type::Sequence { element, .. } = cur {
                cur = *element;
            }
            t = match cur {
                Type::Struct(s) => s.fields.into_iter().find(|f| &f.name == name)?.ty,
                Type::Variant { options, .. } => options.into_iter().find(|f| &f.name == name)?.ty,
                _ => return None,
            };
        }
        Some(t)
    }
}

/// A name as its user wrote it (`http.method` for `_http_2e_method`;
/// [`crate::name_of`]): what value sinks (JSON, the ftrace text, filters,
/// exports) are given.
pub(super) fn shown(name: &str) -> Arc<str> {
    Arc::from(crate::name_of(name))
}

/// A struct member's operation, with its name (the user's: [`shown`]) and
/// its text prefix, with the name as babeltrace2 prints it (one leading
/// `_` removed, §4.2.1).
pub(super) fn field(name: &str, op: Op) -> Op {
    let printed = crate::metadata::shown_name(name);
    let sep = format!(", {printed} = ").into_bytes();
    Op::Field(shown(name), Arc::from(sep), Box::new(op))
}

pub(crate) fn struct_align(s: &Struct) -> u64 {
    s.fields
        .iter()
        .map(|f| type_align(&f.ty))
        .chain(s.min_align)
        .max()
        .unwrap_or(1)
}

pub(crate) fn type_align(t: &Type) -> u64 {
    match t {
        Type::Integer(i) => i.align,
        Type::Enum(e) => e.container.align,
        Type::Float(f) => f.align,
        Type::String(_) => 8,
        Type::Struct(s) => struct_align(s),
        Type::Array { element, .. } | Type::Sequence { element, .. } => type_align(element),
        Type::Variant { .. } | Type::Named(_) => 1,
    }
}

pub(crate) fn min_bits(t: &Type) -> u64 {
    match t {
        Type::Integer(i) => u64::from(i.size),
        Type::Enum(e) => u64::from(e.container.size),
        Type::Float(f) => u64::from(f.exp_dig + f.mant_dig),
        Type::String(_) => 8,
        Type::Struct(s) => s.fields.iter().map(|f| min_bits(&f.ty)).sum(),
        Type::Array { element, len } => min_bits(element).saturating_mul(*len),
        Type::Sequence { .. } | Type::Variant { .. } | Type::Named(_) => 0,
    }
}

/// Groups the members of a struct body into fixed runs where it can. The
/// body starts aligned to `start_align` (the struct's alignment).
fn fuse(body: Vec<Op>, start_align: u64) -> Vec<Op> {
    let mut out = Vec::new();
    let mut run: Option<FixedRun> = None;
    // Alignment known for the current position when no run is open.
    let mut known = start_align;
    let close = |run: &mut Option<FixedRun>, out: &mut Vec<Op>| {
        if let Some(r) = run.take() {
            out.push(Op::Fixed(r));
        }
    };
    for op in body {
        let fixed = match &op {
            Op::Field(_, _, inner) => match &**inner {
                Op::Int(i) if i.size <= 64 => Some((
                    i.align,
                    u64::from(i.size),
                    i.store.is_some() || i.event_id || i.clock != ClockUse::None,
                )),
                Op::Float { align, bits, .. } => Some((*align, u64::from(*bits), false)),
                _ => None,
            },
            _ => None,
        };
        let Some((a, size, needs)) = fixed else {
            close(&mut run, &mut out);
            known = 1;
            out.push(op);
            continue;
        };
        if run.as_ref().is_some_and(|r| a > r.align) {
            close(&mut run, &mut out);
            known = 1;
        }
        let r = run.get_or_insert_with(|| FixedRun {
            align: a.max(known),
            bits: 0,
            items: Vec::new(),
            needs_read: false,
        });
        let off = (r.bits + a - 1) & !(a - 1);
        r.bits = off + size;
        r.needs_read |= needs;
        r.items.push((off, op));
    }
    close(&mut run, &mut out);
    out
}
