//! TSDL parser: metadata text to the [`Trace`] model (CTF 1.8 §7, grammar
//! §C.2).
//!
//! Types are resolved while parsing, through a stack of lexical scopes
//! (root, `trace`, `stream`, `event`, `struct`, `variant`): a `typealias`,
//! `typedef` or named `struct`/`variant`/`enum` declared in a scope is
//! visible in the scopes it contains, and redefining a name in the same
//! scope is an error (§7.3.1). Sequence lengths and variant tags stay paths
//! (strings): the decoder resolves them against the fields decoded before.
//! Unknown attributes are warnings, not errors, as babeltrace2 does.
//!
//! Adversarial metadata is bounded: types nest at most [`MAX_TYPE_DEPTH`]
//! levels (structs, variants, arrays and sequences, whether written nested
//! or built from aliases), checked before anything recurses into them, and
//! the types that aliases and declarators copy add up to at most
//! [`MAX_TYPE_NODES`] nodes (an alias used twice in each of 40 nested
//! aliases would otherwise describe 2^40 fields from a few lines of text).
//! Both are errors with the position, never a stack overflow or a hang.

use std::collections::HashMap;

use crate::metadata::lexer::{lex, Tok, Token};
use crate::{
    Base, ByteOrder, Clock, Encoding, Enum, EnumEntry, EnvValue, EventClass, Field, Float, Integer,
    StreamClass, Struct, Trace, Type, KEYWORDS,
};

/// How deep types may nest: far beyond any real trace (LTTng's and DPDK's
/// nest a few levels), and within what every later stage (validation,
/// decode plans, decoders on worker threads) walks recursively.
pub const MAX_TYPE_DEPTH: usize = 256;

/// How many type nodes the metadata may expand to, counting every copy an
/// alias, a named struct or a declarator list makes.
pub const MAX_TYPE_NODES: usize = 1 << 20;

/// The nesting depth and node count of `t`, walking at most `budget + 1`
/// nodes and never recursing (`t` may be anything the parser built).
pub(crate) fn shape(t: &Type, budget: usize) -> (usize, usize) {
    let mut stack = vec![(t, 1usize)];
    let (mut depth, mut nodes) = (0, 0);
    while let Some((t, d)) = stack.pop() {
        depth = depth.max(d);
        // An enum's labels are copied with it.
        nodes += 1 + if let Type::Enum(e) = t {
            e.entries.len()
        } else {
            0
        };
        if nodes > budget {
            break;
        }
        match t {
            Type::Struct(s) => stack.extend(s.fields.iter().map(|f| (&f.ty, d + 1))),
            Type::Variant { options, .. } => stack.extend(options.iter().map(|f| (&f.ty, d + 1))),
            Type::Array { element, .. } | Type::Sequence { element, .. } => {
                stack.push((element, d + 1))
            }
            _ => {}
        }
    }
    (depth, nodes)
}

/// A metadata error, with the line and column (1-based) where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Line of the offending token.
    pub line: u32,
    /// Column of the offending token.
    pub col: u32,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.col, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// What a parse gives: the model and the warnings (unknown attributes...).
#[derive(Clone, Debug)]
pub struct Parsed {
    /// The trace description.
    pub trace: Trace,
    /// Warnings, with their positions.
    pub warnings: Vec<ParseError>,
    /// What this parser took that babeltrace2 2.0 refuses (or reads
    /// otherwise), with positions: empty for metadata both read alike.
    /// [`parse_metadata_strict`] makes the first an error.
    pub beyond_babeltrace2: Vec<ParseError>,
}

/// Parses metadata text (after the packetized form, if any, was unwrapped).
///
/// Lenient where babeltrace2 2.0 is strict and the meaning is clear (other
/// tools' traces are read as far as they can be); what it took so is listed
/// in [`Parsed::beyond_babeltrace2`].
pub fn parse_metadata(text: &str) -> Result<Parsed, ParseError> {
    let (toks, beyond) = lex(text)?;
    let mut p = Parser {
        toks,
        pos: 0,
        scopes: vec![HashMap::new()],
        warnings: Vec::new(),
        beyond,
        trace: Trace::new([0; 16]),
        seen_trace: false,
        byte_order_set: false,
        uuid_set: false,
        nesting: 0,
        copied: 0,
    };
    p.top()?;
    if !p.seen_trace {
        return Err(p.error_at(0, "metadata has no `trace` block"));
    }
    if !p.byte_order_set {
        return Err(p.error_at(0, "the `trace` block has no `byte_order`"));
    }
    let _ = p.uuid_set;
    p.beyond.sort_by_key(|e| (e.line, e.col));
    Ok(Parsed {
        trace: p.trace,
        warnings: p.warnings,
        beyond_babeltrace2: p.beyond,
    })
}

/// Parses metadata text accepting no more than babeltrace2 2.0 does: what
/// [`parse_metadata`] would take beyond it (see
/// [`Parsed::beyond_babeltrace2`]) is an error, at its position. What
/// tape writes or forwards passes it, so that no trace of tape's is
/// readable by tape alone.
pub fn parse_metadata_strict(text: &str) -> Result<Parsed, ParseError> {
    let parsed = parse_metadata(text)?;
    match parsed.beyond_babeltrace2.first() {
        Some(e) => Err(e.clone()),
        None => Ok(parsed),
    }
}

/// A right-hand side of `name = value;`.
#[derive(Clone, Debug)]
enum Value {
    Int(i128),
    Str(String),
    /// An identifier or dotted path (`le`, `clock.x.value`, `TRUE`).
    Path(String),
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    scopes: Vec<HashMap<String, Type>>,
    warnings: Vec<ParseError>,
    /// See [`Parsed::beyond_babeltrace2`].
    beyond: Vec<ParseError>,
    trace: Trace,
    seen_trace: bool,
    byte_order_set: bool,
    uuid_set: bool,
    /// Struct and variant bodies being parsed, one inside the other.
    nesting: usize,
    /// Type nodes copied so far (see [`MAX_TYPE_NODES`]).
    copied: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].tok
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn error_at(&self, pos: usize, msg: impl Into<String>) -> ParseError {
        let t = &self.toks[pos.min(self.toks.len() - 1)];
        ParseError {
            line: t.line,
            col: t.col,
            message: msg.into(),
        }
    }

    /// Attribute `key` given twice in a `kind` block (babeltrace2 rejects it
    /// too: which value would count?).
    fn duplicate(&self, key: &str, kind: &str, first: usize, at: usize) -> ParseError {
        let f = &self.toks[first.min(self.toks.len() - 1)];
        self.error_at(
            at,
            format!(
                "attribute `{key}` is given twice in this `{kind}` block (first at line {}, column {})",
                f.line, f.col
            ),
        )
    }

    fn error(&self, msg: impl Into<String>) -> ParseError {
        self.error_at(self.pos, msg)
    }

    fn warn(&mut self, pos: usize, msg: impl Into<String>) {
        let e = self.error_at(pos, msg);
        self.warnings.push(e);
    }

    /// Notes what babeltrace2 2.0 refuses and this parser takes.
    fn beyond(&mut self, pos: usize, msg: impl Into<String>) {
        let e = self.error_at(pos, format!("{}: babeltrace2 2.0 refuses it", msg.into()));
        self.beyond.push(e);
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Ident(i) if i == s)
    }

    fn expect(&mut self, p: &str) -> Result<(), ParseError> {
        if self.is_punct(p) {
            self.next();
            Ok(())
        } else {
            Err(self.error(format!("expected `{p}`, found {}", describe(self.peek()))))
        }
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.next();
                Ok(s)
            }
            t => Err(self.error(format!("expected a name, found {}", describe(&t)))),
        }
    }

    /// A type declared at the root (outside any block or struct) must make
    /// sense on its own: its relative paths resolve inside it.
    fn check_at_root(&self, ty: &Type, at: usize) -> Result<(), ParseError> {
        if self.scopes.len() == 1 {
            crate::metadata::validate::check_detached(ty).map_err(|m| self.error_at(at, m))?;
        }
        Ok(())
    }

    fn lookup(&self, name: &str) -> Option<&Type> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// The nodes of `t`, if copying it keeps the metadata within
    /// [`MAX_TYPE_NODES`] (measured before anything is copied).
    fn copy_budget(&self, t: &Type, at: usize) -> Result<usize, ParseError> {
        let budget = MAX_TYPE_NODES - self.copied;
        let (_, nodes) = shape(t, budget);
        if nodes > budget {
            return Err(self.error_at(
                at,
                format!(
                    "the types of this metadata expand to more than {MAX_TYPE_NODES} nodes \
                     (every use of an alias or a named struct copies its type)"
                ),
            ));
        }
        Ok(nodes)
    }

    /// A copy of `t`, counted against [`MAX_TYPE_NODES`].
    fn copy(&mut self, t: &Type, at: usize) -> Result<Type, ParseError> {
        self.copied += self.copy_budget(t, at)?;
        Ok(t.clone())
    }

    /// A copy of the type named `name` in scope, counted.
    fn copy_named(&mut self, name: &str, at: usize) -> Result<Option<Type>, ParseError> {
        let Some(t) = self.lookup(name) else {
            return Ok(None);
        };
        let nodes = self.copy_budget(t, at)?;
        let t = t.clone();
        self.copied += nodes;
        Ok(Some(t))
    }

    /// `t` nests at most [`MAX_TYPE_DEPTH`] levels.
    fn check_depth(&self, t: &Type, extra: usize, at: usize) -> Result<(), ParseError> {
        let (depth, _) = shape(t, usize::MAX);
        if depth + extra > MAX_TYPE_DEPTH {
            return Err(self.error_at(
                at,
                format!("types nest more than {MAX_TYPE_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    /// Runs `f` one level deeper (a struct or variant body, an enum's
    /// container), within [`MAX_TYPE_DEPTH`].
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Parser) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        if self.nesting >= MAX_TYPE_DEPTH {
            return Err(self.error(format!(
                "structs and variants nest more than {MAX_TYPE_DEPTH} levels deep"
            )));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

    /// A struct or variant body after its `{`: the fields, in a scope of
    /// their own, one level deeper.
    fn body(&mut self) -> Result<Vec<Field>, ParseError> {
        self.nested(|p| {
            p.scopes.push(HashMap::new());
            let fields = p.fields("}");
            p.scopes.pop();
            fields
        })
    }

    fn define(&mut self, name: String, ty: Type, at: usize) -> Result<(), ParseError> {
        let scope = self.scopes.last_mut().expect("root scope");
        if scope.contains_key(&name) {
            return Err(self.error_at(
                at,
                format!("type `{name}` is already defined in this scope"),
            ));
        }
        scope.insert(name, ty);
        Ok(())
    }

    // ---------------------------------------------------------------- top

    fn top(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek().clone() {
                Tok::Eof => return Ok(()),
                Tok::Ident(k)
                    if matches!(
                        k.as_str(),
                        "trace" | "env" | "clock" | "stream" | "event" | "callsite"
                    ) && matches!(self.peek_at(1), Tok::Punct("{")) =>
                {
                    self.next();
                    self.block(&k)?;
                }
                _ => self.declaration()?,
            }
        }
    }

    /// `typealias`, `typedef`, or a named type declaration ending with `;`.
    fn declaration(&mut self) -> Result<(), ParseError> {
        if self.is_ident("typealias") {
            return self.typealias();
        }
        if self.is_ident("typedef") {
            return self.typedef();
        }
        let at = self.pos;
        let named_body =
            matches!(self.peek_at(1), Tok::Ident(_)) && matches!(self.peek_at(2), Tok::Punct("{"));
        let ty = self.type_spec()?;
        self.check_at_root(&ty, at)?;
        if self.is_punct(";") {
            self.next();
            return Ok(());
        }
        // `struct name { ... }` without its `;` (accepted, as babeltrace
        // 1.5 does).
        if named_body
            && matches!(
                self.toks[self.pos - 1].tok,
                Tok::Punct("}") | Tok::Punct(")")
            )
        {
            self.beyond(self.pos - 1, "a type declared with no `;` after it");
            return Ok(());
        }
        Err(self.error_at(
            at,
            "expected a declaration (typealias, typedef, struct, variant, enum or a block)",
        ))
    }

    fn typealias(&mut self) -> Result<(), ParseError> {
        self.next();
        let ty = self.type_spec()?;
        let ty = self.abstract_declarator(ty)?;
        self.expect(":=")?;
        let at = self.pos;
        let mut words = Vec::new();
        while let Tok::Ident(w) = self.peek().clone() {
            words.push(w);
            self.next();
        }
        while self.is_punct("*") {
            self.next();
            words.push("*".into());
        }
        if words.is_empty() {
            return Err(self.error("expected the alias name after `:=`"));
        }
        let name = words.join(" ");
        if words.len() == 1 && KEYWORDS.contains(&name.as_str()) && !is_c_type_keyword(&name) {
            return Err(self.error_at(at, format!("`{name}` is a reserved keyword")));
        }
        if let Some(w) = words
            .iter()
            .find(|w| KEYWORDS.contains(&w.as_str()) && !is_c_type_keyword(w))
        {
            self.beyond(at, format!("a keyword (`{w}`) in an alias's name"));
        }
        if matches!(ty, Type::Variant { .. }) {
            self.beyond(at, "a variant named by `typealias`");
        }
        self.expect(";")?;
        self.check_depth(&ty, 0, at)?;
        self.check_at_root(&ty, at)?;
        self.define(name, ty, at)
    }

    fn typedef(&mut self) -> Result<(), ParseError> {
        self.next();
        let base = self.type_spec()?;
        loop {
            let at = self.pos;
            let base = self.copy(&base, at)?;
            let (name, ty) = self.declarator(base)?;
            if KEYWORDS.contains(&name.as_str()) {
                return Err(self.error_at(at, format!("`{name}` is a reserved keyword")));
            }
            if matches!(ty, Type::Variant { .. }) {
                self.beyond(at, "a variant named by `typedef`");
            }
            self.check_at_root(&ty, at)?;
            self.define(name, ty, at)?;
            if self.is_punct(",") {
                self.next();
                continue;
            }
            break;
        }
        self.expect(";")
    }

    /// `*`s and `[N]` after a type in a typealias (no name).
    fn abstract_declarator(&mut self, mut ty: Type) -> Result<Type, ParseError> {
        self.pointers();
        let at = self.pos;
        let mut dims = Vec::new();
        while self.is_punct("[") {
            dims.push(self.dimension()?);
        }
        self.check_depth(&ty, dims.len(), at)?;
        for d in dims.into_iter().rev() {
            ty = d.wrap(ty);
        }
        Ok(ty)
    }

    /// `*`s, a name, `[N]` or `[path]` suffixes.
    fn declarator(&mut self, mut ty: Type) -> Result<(String, Type), ParseError> {
        self.pointers();
        let at = self.pos;
        let name = self.ident()?;
        if KEYWORDS.contains(&name.as_str()) {
            return Err(self.error_at(
                at,
                format!("`{name}` is a keyword and cannot be a field name"),
            ));
        }
        let mut dims = Vec::new();
        while self.is_punct("[") {
            dims.push(self.dimension()?);
        }
        self.check_depth(&ty, dims.len(), at)?;
        for d in dims.into_iter().rev() {
            ty = d.wrap(ty);
        }
        Ok((name, ty))
    }

    /// `*`s before a declarator: C's pointers, which mean nothing in CTF
    /// (skipped; babeltrace2 2.0 aborts on them).
    fn pointers(&mut self) {
        if self.is_punct("*") {
            self.beyond(self.pos, "a pointer declarator (`*`)");
        }
        while self.is_punct("*") {
            self.next();
        }
    }

    fn dimension(&mut self) -> Result<Dim, ParseError> {
        self.expect("[")?;
        let at = self.pos;
        let d = match self.peek().clone() {
            Tok::Int(n) => {
                self.next();
                Dim::Fixed(n)
            }
            Tok::Ident(_) => {
                let path = self.dotted_path()?;
                if KEYWORDS.contains(&path.as_str()) {
                    return Err(self.error_at(at, format!("`{path}` cannot be a length")));
                }
                Dim::Path(path)
            }
            t => {
                return Err(self.error(format!("expected an array length, found {}", describe(&t))))
            }
        };
        self.expect("]")?;
        Ok(d)
    }

    fn dotted_path(&mut self) -> Result<String, ParseError> {
        let mut s = self.ident()?;
        while self.is_punct(".") || self.is_punct("->") {
            self.next();
            s.push('.');
            s.push_str(&self.ident()?);
        }
        Ok(s)
    }

    // ---------------------------------------------------------------- types

    fn type_spec(&mut self) -> Result<Type, ParseError> {
        let at = self.pos;
        let word = match self.peek().clone() {
            Tok::Ident(w) => w,
            t => return Err(self.error(format!("expected a type, found {}", describe(&t)))),
        };
        match word.as_str() {
            "integer" => {
                self.next();
                let attrs = self.attr_block()?;
                self.integer(attrs, at).map(Type::Integer)
            }
            "floating_point" => {
                self.next();
                let attrs = self.attr_block()?;
                self.float(attrs)
            }
            "string" => {
                self.next();
                let mut enc = Encoding::Utf8;
                if self.is_punct("{") {
                    for (k, v, pos) in self.attr_block()? {
                        match (k.as_str(), v) {
                            ("encoding", Value::Path(e)) => {
                                enc = encoding(&e).ok_or_else(|| {
                                    self.error_at(pos, format!("unknown encoding `{e}`"))
                                })?
                            }
                            (k, _) => self.warn(pos, format!("unknown string attribute `{k}`")),
                        }
                    }
                }
                Ok(Type::String(enc))
            }
            "struct" => {
                self.next();
                self.struct_spec()
            }
            "variant" => {
                self.next();
                self.variant_spec()
            }
            "enum" => {
                self.next();
                self.enum_spec()
            }
            _ => self.named_type(),
        }
    }

    /// A type given by name: the longest run of identifiers that names a
    /// known type (`uint32_t`, `unsigned long`), leaving the declarator.
    fn named_type(&mut self) -> Result<Type, ParseError> {
        let at = self.pos;
        let mut words: Vec<String> = Vec::new();
        let mut best: Option<(usize, String)> = None;
        let mut n = 0;
        while let Tok::Ident(w) = self.peek_at(n).clone() {
            words.push(w);
            n += 1;
            let mut name = words.join(" ");
            let mut stars = 0;
            while matches!(self.peek_at(n + stars), Tok::Punct("*")) {
                stars += 1;
                name.push_str(" *");
                if self.lookup(&name).is_some() {
                    best = Some((n + stars, name.clone()));
                }
            }
            let plain = words.join(" ");
            if self.lookup(&plain).is_some() && best.as_ref().is_none_or(|(m, _)| *m < n) {
                best = Some((n, plain));
            }
        }
        match best {
            Some((used, name)) => {
                let t = self.copy_named(&name, at)?.expect("looked up above");
                self.pos += used;
                Ok(t)
            }
            None => Err(self.error_at(
                at,
                format!(
                    "unknown type `{}`",
                    words
                        .first()
                        .cloned()
                        .unwrap_or_else(|| describe(self.peek()))
                ),
            )),
        }
    }

    /// `{ name = value; ... }` of integer, floating_point and string.
    fn attr_block(&mut self) -> Result<Vec<(String, Value, usize)>, ParseError> {
        self.expect("{")?;
        let mut out = Vec::new();
        while !self.is_punct("}") {
            let at = self.pos;
            let key = self.dotted_path()?;
            if let Some((_, _, first)) = out.iter().find(|(k, _, _)| *k == key) {
                return Err(self.duplicate(&key, "type", *first, at));
            }
            self.expect("=")?;
            let v = self.value()?;
            self.expect(";")?;
            out.push((key, v, at));
        }
        self.next();
        Ok(out)
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        let mut neg = false;
        loop {
            if self.is_punct("-") {
                self.next();
                neg = !neg;
            } else if self.is_punct("+") {
                self.next();
            } else {
                break;
            }
        }
        match self.peek().clone() {
            Tok::Int(v) => {
                self.next();
                let v = i128::from(v);
                Ok(Value::Int(if neg { -v } else { v }))
            }
            Tok::Char(c) if !neg => {
                self.next();
                Ok(Value::Int(i128::from(c)))
            }
            Tok::Str(s) if !neg => {
                self.next();
                if matches!(self.peek(), Tok::Str(_)) {
                    return Err(self.error("adjacent string literals are not concatenated in TSDL"));
                }
                Ok(Value::Str(s))
            }
            Tok::Ident(_) if !neg => Ok(Value::Path(self.dotted_path()?)),
            t => Err(self.error(format!("expected a value, found {}", describe(&t)))),
        }
    }

    fn integer(
        &mut self,
        attrs: Vec<(String, Value, usize)>,
        at: usize,
    ) -> Result<Integer, ParseError> {
        let mut i = Integer::unsigned(0);
        let mut size = None;
        let mut align = None;
        for (k, v, pos) in attrs {
            let bad = |p: &Parser, what: &str| {
                p.error_at(pos, format!("invalid `{k}` value for an integer: {what}"))
            };
            match (k.as_str(), v) {
                ("size", Value::Int(n)) if n > 0 && n <= u32::MAX as i128 => size = Some(n as u32),
                ("size", _) => return Err(bad(self, "expected a positive integer")),
                // Any power of two that fits 64 bits, as babeltrace2 takes.
                ("align", Value::Int(n))
                    if n > 0 && (n as u128).is_power_of_two() && n <= u64::MAX as i128 =>
                {
                    align = Some(n as u64)
                }
                ("align", _) => return Err(bad(self, "expected a power of two")),
                ("signed", v) => {
                    i.signed = boolean(&v).ok_or_else(|| bad(self, "expected true or false"))?
                }
                ("byte_order", Value::Path(o)) => {
                    i.byte_order = byte_order(&o)
                        .ok_or_else(|| bad(self, "expected native, network, be or le"))?
                }
                ("byte_order", _) => return Err(bad(self, "expected native, network, be or le")),
                ("base", v) => {
                    i.base = base(&v).ok_or_else(|| {
                        bad(self, "expected decimal, hexadecimal, octal or binary")
                    })?
                }
                ("encoding", Value::Path(e)) => {
                    i.encoding =
                        encoding(&e).ok_or_else(|| bad(self, "expected none, UTF8 or ASCII"))?
                }
                ("encoding", _) => return Err(bad(self, "expected none, UTF8 or ASCII")),
                ("map", Value::Path(p)) => {
                    let parts: Vec<&str> = p.split('.').collect();
                    match parts.as_slice() {
                        ["clock", name, "value"] => i.map = Some((*name).to_owned()),
                        ["clock", ..] => {
                            self.beyond(
                                pos,
                                format!("a clock map other than `clock.NAME.value`: `{p}`"),
                            );
                            self.warn(pos, format!("unknown map `{p}`"))
                        }
                        _ => self.warn(pos, format!("unknown map `{p}`")),
                    }
                }
                (k, _) => self.warn(pos, format!("unknown integer attribute `{k}`")),
            }
        }
        i.size = size.ok_or_else(|| self.error_at(at, "integer without `size`"))?;
        if i.size > 64 {
            self.beyond(at, format!("an integer of {} bits (more than 64)", i.size));
        }
        i.align = align.unwrap_or(if i.size % 8 == 0 { 8 } else { 1 });
        Ok(i)
    }

    fn float(&mut self, attrs: Vec<(String, Value, usize)>) -> Result<Type, ParseError> {
        let at = self.pos;
        let (mut exp, mut mant, mut align, mut order) = (None, None, None, None);
        for (k, v, pos) in attrs {
            match (k.as_str(), v) {
                ("exp_dig", Value::Int(n)) if n > 0 && n < 64 => exp = Some(n as u32),
                ("mant_dig", Value::Int(n)) if n > 0 && n < 128 => mant = Some(n as u32),
                // Any power of two that fits 64 bits, as babeltrace2 takes.
                ("align", Value::Int(n))
                    if n > 0 && (n as u128).is_power_of_two() && n <= u64::MAX as i128 =>
                {
                    align = Some(n as u64)
                }
                ("byte_order", Value::Path(o)) => {
                    order =
                        byte_order(&o).ok_or_else(|| self.error_at(pos, "invalid byte_order"))?
                }
                ("exp_dig" | "mant_dig" | "align", _) => {
                    return Err(self.error_at(pos, format!("invalid `{k}` value")))
                }
                (k, _) => self.warn(pos, format!("unknown floating_point attribute `{k}`")),
            }
        }
        let (exp, mant) = match (exp, mant) {
            (Some(e), Some(m)) => (e, m),
            _ => return Err(self.error_at(at, "floating_point needs exp_dig and mant_dig")),
        };
        if !matches!((exp, mant), (8, 24) | (11, 53)) {
            return Err(self.error_at(
                at,
                format!(
                    "floating_point of {exp}/{mant} digits is not supported (only 8/24 and 11/53)"
                ),
            ));
        }
        Ok(Type::Float(Float {
            exp_dig: exp,
            mant_dig: mant,
            align: align.unwrap_or(if (exp + mant) % 8 == 0 { 8 } else { 1 }),
            byte_order: order,
        }))
    }

    /// The name after `struct`, `variant` or `enum`, if one is there.
    fn type_name(&mut self) -> Option<String> {
        let Tok::Ident(n) = self.peek().clone() else {
            return None;
        };
        if KEYWORDS.contains(&n.as_str()) {
            self.beyond(self.pos, format!("a keyword (`{n}`) as a type's name"));
        }
        self.next();
        Some(n)
    }

    fn struct_spec(&mut self) -> Result<Type, ParseError> {
        let at = self.pos;
        let name = self.type_name();
        if !self.is_punct("{") {
            let name = name.ok_or_else(|| self.error("expected a struct name or body"))?;
            let mut t = self
                .copy_named(&format!("struct {name}"), at)?
                .ok_or_else(|| self.error_at(at, format!("unknown struct `{name}`")))?;
            self.struct_align(&mut t)?;
            return Ok(t);
        }
        self.next();
        let fields = self.body()?;
        let mut t = Type::Struct(Struct::new(fields));
        self.struct_align(&mut t)?;
        if let Some(n) = name {
            let copy = self.copy(&t, at)?;
            self.define(format!("struct {n}"), copy, at)?;
        }
        Ok(t)
    }

    fn struct_align(&mut self, t: &mut Type) -> Result<(), ParseError> {
        if self.is_ident("align") && matches!(self.peek_at(1), Tok::Punct("(")) {
            self.next();
            self.next();
            let at = self.pos;
            let n = match self.value()? {
                // Any power of two that fits 64 bits, as babeltrace2 takes.
                Value::Int(n)
                    if n > 0 && (n as u128).is_power_of_two() && n <= u64::MAX as i128 =>
                {
                    n as u64
                }
                _ => return Err(self.error_at(at, "struct align(N) needs a power of two")),
            };
            self.expect(")")?;
            if let Type::Struct(s) = t {
                s.min_align = Some(n);
            }
        }
        Ok(())
    }

    /// Field declarations until `end` (consumed).
    fn fields(&mut self, end: &str) -> Result<Vec<Field>, ParseError> {
        let mut out: Vec<Field> = Vec::new();
        loop {
            if self.is_punct(end) {
                self.next();
                return Ok(out);
            }
            if matches!(self.peek(), Tok::Eof) {
                return Err(self.error(format!("expected `{end}` before the end of the metadata")));
            }
            if self.is_ident("typealias") {
                self.typealias()?;
                continue;
            }
            if self.is_ident("typedef") {
                self.typedef()?;
                continue;
            }
            let at = self.pos;
            let base = self.type_spec()?;
            if self.is_punct(";") {
                self.beyond(at, "a type with no field name in a struct or variant");
                self.next();
                continue;
            }
            loop {
                let at = self.pos;
                let base = self.copy(&base, at)?;
                let (name, ty) = self.declarator(base)?;
                if out.iter().any(|f| f.name == name) {
                    return Err(self.error_at(at, format!("duplicate field name `{name}`")));
                }
                out.push(Field::new(name, ty));
                if self.is_punct(",") {
                    self.next();
                    continue;
                }
                break;
            }
            self.expect(";")?;
        }
    }

    fn variant_spec(&mut self) -> Result<Type, ParseError> {
        let at = self.pos;
        let name = self.type_name();
        let mut tag = None;
        if self.is_punct("<") {
            self.next();
            let tpos = self.pos;
            let path = self.dotted_path()?;
            if path.split('.').any(|p| KEYWORDS.contains(&p))
                && !path.starts_with("stream.")
                && !path.starts_with("event.")
                && !path.starts_with("trace.")
            {
                return Err(self.error_at(tpos, format!("variant tag `{path}` is a keyword")));
            }
            tag = Some(path);
            self.expect(">")?;
        }
        if !self.is_punct("{") {
            let name = name.ok_or_else(|| self.error("expected a variant name or body"))?;
            let t = self
                .copy_named(&format!("variant {name}"), at)?
                .ok_or_else(|| self.error_at(at, format!("unknown variant `{name}`")))?;
            return Ok(match (t, tag) {
                (Type::Variant { options, .. }, Some(tag)) => Type::Variant { tag, options },
                (t, _) => t,
            });
        }
        self.next();
        let options = self.body()?;
        let t = Type::Variant {
            tag: tag.unwrap_or_default(),
            options,
        };
        if let Some(n) = name {
            let copy = self.copy(&t, at)?;
            self.define(format!("variant {n}"), copy, at)?;
        }
        Ok(t)
    }

    /// An enumerator's value written as a character (`'a'`).
    fn enumerator_literal(&mut self, at: usize) {
        if matches!(self.peek(), Tok::Char(_)) {
            self.beyond(at, "a character as an enumerator's value");
        }
    }

    fn enum_spec(&mut self) -> Result<Type, ParseError> {
        let at = self.pos;
        let name = self.type_name();
        let container = if self.is_punct(":") {
            self.next();
            // `enum : enum : ...` recurses like a struct body.
            Some(self.nested(Parser::type_spec)?)
        } else {
            None
        };
        if !self.is_punct("{") {
            let name = name.ok_or_else(|| self.error("expected an enum name or body"))?;
            return self
                .copy_named(&format!("enum {name}"), at)?
                .ok_or_else(|| self.error_at(at, format!("unknown enum `{name}`")));
        }
        let container = match container {
            Some(Type::Integer(i)) => i,
            Some(_) => return Err(self.error_at(at, "an enum container must be an integer")),
            None => match self.lookup("int") {
                Some(Type::Integer(i)) => i.clone(),
                _ => {
                    return Err(self.error_at(
                        at,
                        "enum without a container type needs an integer type named `int`",
                    ))
                }
            },
        };
        self.next();
        let mut entries: Vec<EnumEntry> = Vec::new();
        let mut next_value: i128 = 0;
        let (min, max) = int_range(&container);
        while !self.is_punct("}") {
            let epos = self.pos;
            let label = match self.next() {
                Tok::Ident(s) | Tok::Str(s) => s,
                t => {
                    return Err(self.error_at(
                        epos,
                        format!("expected an enumerator, found {}", describe(&t)),
                    ))
                }
            };
            let (mut start, mut end) = (next_value, next_value);
            if self.is_punct("=") {
                self.next();
                let vpos = self.pos;
                self.enumerator_literal(vpos);
                start = match self.value()? {
                    Value::Int(v) => v,
                    _ => return Err(self.error_at(vpos, "an enumerator value must be an integer")),
                };
                end = start;
                if self.is_punct("...") {
                    self.next();
                    let vpos = self.pos;
                    self.enumerator_literal(vpos);
                    end = match self.value()? {
                        Value::Int(v) => v,
                        _ => {
                            return Err(
                                self.error_at(vpos, "an enumerator value must be an integer")
                            )
                        }
                    };
                }
            }
            if start > end {
                self.beyond(epos, format!("enumerator `{label}`'s range going down"));
                (start, end) = (end, start);
            }
            if start < min || end > max {
                return Err(self.error_at(
                    epos,
                    format!("enumerator `{label}` is out of the container's range"),
                ));
            }
            entries.push(EnumEntry { label, start, end });
            next_value = end + 1;
            if self.is_punct(",") {
                self.next();
            } else if !self.is_punct("}") {
                return Err(self.error(format!(
                    "expected `,` or `}}`, found {}",
                    describe(self.peek())
                )));
            }
        }
        self.next();
        if entries.is_empty() {
            return Err(self.error_at(at, "an enum needs at least one enumerator"));
        }
        let t = Type::Enum(Enum { container, entries });
        if let Some(n) = name {
            let copy = self.copy(&t, at)?;
            self.define(format!("enum {n}"), copy, at)?;
        }
        Ok(t)
    }

    // ---------------------------------------------------------------- blocks

    fn block(&mut self, kind: &str) -> Result<(), ParseError> {
        let start = self.pos - 1;
        self.expect("{")?;
        self.scopes.push(HashMap::new());
        let mut assigns: Vec<(String, Value, usize)> = Vec::new();
        let mut types: Vec<(String, Type, usize)> = Vec::new();
        let r = (|| {
            while !self.is_punct("}") {
                if matches!(self.peek(), Tok::Eof) {
                    return Err(self.error(format!("`{kind}` block is not closed")));
                }
                if self.is_ident("typealias") {
                    self.typealias()?;
                    continue;
                }
                if self.is_ident("typedef") {
                    self.typedef()?;
                    continue;
                }
                // `key = value;` or `key.path := type;` or a type declaration.
                let is_assign = matches!(self.peek(), Tok::Ident(_)) && {
                    let mut n = 1;
                    while matches!(self.peek_at(n), Tok::Punct("."))
                        && matches!(self.peek_at(n + 1), Tok::Ident(_))
                    {
                        n += 2;
                    }
                    matches!(self.peek_at(n), Tok::Punct("=") | Tok::Punct(":="))
                };
                if !is_assign {
                    self.declaration()?;
                    continue;
                }
                let at = self.pos;
                let key = self.dotted_path()?;
                let first = assigns
                    .iter()
                    .map(|(k, _, p)| (k, p))
                    .chain(types.iter().map(|(k, _, p)| (k, p)))
                    .find(|(k, _)| **k == key)
                    .map(|(_, p)| *p);
                if let Some(first) = first {
                    return Err(self.duplicate(&key, kind, first, at));
                }
                if self.is_punct(":=") {
                    self.next();
                    let t = self.type_spec()?;
                    types.push((key, t, at));
                } else {
                    self.expect("=")?;
                    let v = self.value()?;
                    assigns.push((key, v, at));
                }
                self.expect(";")?;
            }
            self.next();
            Ok(())
        })();
        self.scopes.pop();
        r?;
        self.expect(";")?;
        match kind {
            "trace" => self.trace_block(assigns, types, start),
            "env" => {
                for (k, v, pos) in assigns {
                    let v = match v {
                        Value::Int(i) => EnvValue::Int(
                            i64::try_from(i)
                                .map_err(|_| self.error_at(pos, "env value out of range"))?,
                        ),
                        Value::Str(s) => EnvValue::Str(s),
                        Value::Path(p) => EnvValue::Str(p),
                    };
                    self.trace.env.push((k, v));
                }
                Ok(())
            }
            "clock" => self.clock_block(assigns, start),
            "stream" => self.stream_block(assigns, types, start),
            "event" => self.event_block(assigns, types, start),
            _ => Ok(()), // callsite: kept out of the model (not needed to decode)
        }
    }

    fn trace_block(
        &mut self,
        assigns: Vec<(String, Value, usize)>,
        types: Vec<(String, Type, usize)>,
        start: usize,
    ) -> Result<(), ParseError> {
        if self.seen_trace {
            return Err(self.error_at(start, "more than one `trace` block"));
        }
        self.seen_trace = true;
        let (mut major, mut minor) = (None, None);
        for (k, v, pos) in assigns {
            match (k.as_str(), v) {
                ("major", Value::Int(n)) => major = Some(n),
                ("minor", Value::Int(n)) => minor = Some(n),
                ("uuid", Value::Str(s)) => {
                    self.trace.uuid = parse_uuid(&s)
                        .ok_or_else(|| self.error_at(pos, format!("invalid uuid {s:?}")))?;
                    self.uuid_set = true;
                }
                ("byte_order", Value::Path(o)) => {
                    self.trace.byte_order = match o.as_str() {
                        "le" => ByteOrder::Little,
                        "be" | "network" => ByteOrder::Big,
                        _ => {
                            return Err(self.error_at(
                                pos,
                                format!("invalid trace byte_order `{o}` (le or be)"),
                            ))
                        }
                    };
                    self.byte_order_set = true;
                }
                ("major" | "minor" | "uuid" | "byte_order", _) => {
                    return Err(self.error_at(pos, format!("invalid `{k}` value")))
                }
                (k, _) => self.warn(pos, format!("unknown trace attribute `{k}`")),
            }
        }
        if (major, minor) != (Some(1), Some(8)) {
            return Err(self.error_at(
                start,
                format!(
                    "trace version {}.{} is not 1.8",
                    major.unwrap_or(-1),
                    minor.unwrap_or(-1)
                ),
            ));
        }
        for (k, t, pos) in types {
            match (k.as_str(), t) {
                ("packet.header", Type::Struct(s)) => self.trace.packet_header = Some(s),
                (k, _) => self.warn(pos, format!("unknown trace type `{k}`")),
            }
        }
        Ok(())
    }

    fn clock_block(
        &mut self,
        assigns: Vec<(String, Value, usize)>,
        start: usize,
    ) -> Result<(), ParseError> {
        let mut c = Clock::new("", 1_000_000_000);
        let mut named = false;
        for (k, v, pos) in assigns {
            let int = |p: &Parser, v: &Value| match v {
                Value::Int(n) => {
                    i64::try_from(*n).map_err(|_| p.error_at(pos, format!("`{k}` out of range")))
                }
                _ => Err(p.error_at(pos, format!("`{k}` must be an integer"))),
            };
            match k.as_str() {
                "name" => {
                    c.name = match v {
                        Value::Str(s) | Value::Path(s) => s,
                        Value::Int(_) => {
                            return Err(self.error_at(pos, "clock name must be a name or string"))
                        }
                    };
                    named = true;
                }
                "description" => {
                    if let Value::Str(s) = v {
                        c.description = Some(s);
                    }
                }
                "uuid" => {}
                "freq" => {
                    let f = int(self, &v)?;
                    if f <= 0 {
                        return Err(self.error_at(pos, "clock freq must be positive"));
                    }
                    c.freq = f as u64;
                }
                "precision" => c.precision = int(self, &v)?.max(0) as u64,
                "offset_s" => c.offset_s = int(self, &v)?,
                "offset" => c.offset = int(self, &v)?,
                "absolute" => {
                    c.absolute = boolean(&v)
                        .ok_or_else(|| self.error_at(pos, "absolute must be true or false"))?
                }
                _ => self.warn(pos, format!("unknown clock attribute `{k}`")),
            }
        }
        if !named {
            return Err(self.error_at(start, "clock without a name"));
        }
        self.trace.clocks.push(c);
        Ok(())
    }

    fn stream_block(
        &mut self,
        assigns: Vec<(String, Value, usize)>,
        types: Vec<(String, Type, usize)>,
        start: usize,
    ) -> Result<(), ParseError> {
        let mut s = StreamClass::default();
        for (k, v, pos) in assigns {
            match (k.as_str(), v) {
                ("id", Value::Int(n)) if n >= 0 => {
                    let named = self
                        .trace
                        .packet_header
                        .as_ref()
                        .is_some_and(|h| h.fields.iter().any(|f| f.name == "stream_id"));
                    if !named {
                        // Nothing in a packet would name the stream class.
                        self.beyond(
                            pos,
                            "a stream id with no `stream_id` in a trace `packet.header` before it",
                        );
                    }
                    s.id = Some(n as u64)
                }
                ("id", _) => {
                    return Err(self.error_at(pos, "stream id must be a non-negative integer"))
                }
                (k, _) => self.warn(pos, format!("unknown stream attribute `{k}`")),
            }
        }
        for (k, t, pos) in types {
            let st = match t {
                Type::Struct(st) => st,
                _ => return Err(self.error_at(pos, format!("`{k}` must be a struct"))),
            };
            match k.as_str() {
                "packet.context" => s.packet_context = Some(st),
                "event.header" => s.event_header = Some(st),
                "event.context" => s.event_context = Some(st),
                _ => self.warn(pos, format!("unknown stream type `{k}`")),
            }
        }
        if self.trace.streams.iter().any(|o| o.id == s.id) {
            return Err(self.error_at(start, "two stream classes with the same id"));
        }
        self.trace.streams.push(s);
        Ok(())
    }

    fn event_block(
        &mut self,
        assigns: Vec<(String, Value, usize)>,
        types: Vec<(String, Type, usize)>,
        start: usize,
    ) -> Result<(), ParseError> {
        let mut e = EventClass::new("", 0, Struct::default());
        e.fields = None;
        let mut id = None;
        for (k, v, pos) in assigns {
            match (k.as_str(), v) {
                ("name", Value::Str(s) | Value::Path(s)) => e.name = s,
                ("id", Value::Int(n)) if n >= 0 => id = Some(n as u64),
                ("id", _) => {
                    return Err(self.error_at(pos, "event id must be a non-negative integer"))
                }
                ("stream_id", Value::Int(n)) if n >= 0 => e.stream_id = Some(n as u64),
                ("stream_id", _) => {
                    return Err(self.error_at(pos, "stream_id must be a non-negative integer"))
                }
                ("loglevel", Value::Int(n)) => e.loglevel = i64::try_from(n).ok(),
                ("model.emf.uri", Value::Str(s)) => e.emf_uri = Some(s),
                (k, _) => self.warn(pos, format!("unknown event attribute `{k}`")),
            }
        }
        for (k, t, pos) in types {
            let st = match t {
                Type::Struct(st) => st,
                _ => return Err(self.error_at(pos, format!("`{k}` must be a struct"))),
            };
            match k.as_str() {
                "fields" => e.fields = Some(st),
                "context" => e.context = Some(st),
                _ => self.warn(pos, format!("unknown event type `{k}`")),
            }
        }
        e.id = id.unwrap_or(0);
        if self
            .trace
            .events
            .iter()
            .any(|o| o.id == e.id && o.stream_id == e.stream_id)
        {
            return Err(self.error_at(
                start,
                format!("event id {} is used twice in the same stream", e.id),
            ));
        }
        e.id_given = id.is_some();
        self.trace.events.push(e);
        Ok(())
    }
}

enum Dim {
    Fixed(u64),
    Path(String),
}

impl Dim {
    fn wrap(self, element: Type) -> Type {
        match self {
            Dim::Fixed(len) => Type::Array {
                element: Box::new(element),
                len,
            },
            Dim::Path(length) => Type::Sequence {
                element: Box::new(element),
                length,
            },
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(v) => format!("`{v}`"),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Char(c) => format!("character {c}"),
        Tok::Punct(p) => format!("`{p}`"),
        Tok::Eof => "the end of the metadata".into(),
    }
}

fn is_c_type_keyword(s: &str) -> bool {
    matches!(
        s,
        "char"
            | "double"
            | "float"
            | "int"
            | "long"
            | "short"
            | "signed"
            | "unsigned"
            | "void"
            | "_Bool"
            | "_Complex"
            | "_Imaginary"
            | "const"
    )
}

fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Int(0) => Some(false),
        Value::Int(1) => Some(true),
        Value::Path(p) if matches!(p.as_str(), "true" | "TRUE") => Some(true),
        Value::Path(p) if matches!(p.as_str(), "false" | "FALSE") => Some(false),
        _ => None,
    }
}

fn byte_order(s: &str) -> Option<Option<ByteOrder>> {
    match s {
        "native" => Some(None),
        "le" => Some(Some(ByteOrder::Little)),
        "be" | "network" => Some(Some(ByteOrder::Big)),
        _ => None,
    }
}

fn base(v: &Value) -> Option<Base> {
    match v {
        Value::Int(10) => Some(Base::Decimal),
        Value::Int(16) => Some(Base::Hexadecimal),
        Value::Int(8) => Some(Base::Octal),
        Value::Int(2) => Some(Base::Binary),
        Value::Path(p) => match p.as_str() {
            "decimal" | "dec" | "d" | "i" | "u" => Some(Base::Decimal),
            "hexadecimal" | "hex" | "x" | "X" | "p" => Some(Base::Hexadecimal),
            "octal" | "oct" | "o" => Some(Base::Octal),
            "binary" | "b" => Some(Base::Binary),
            _ => None,
        },
        _ => None,
    }
}

fn encoding(s: &str) -> Option<Encoding> {
    match s {
        "none" => Some(Encoding::None),
        "UTF8" | "utf8" => Some(Encoding::Utf8),
        "ASCII" | "ascii" => Some(Encoding::Ascii),
        _ => None,
    }
}

/// The value range of an integer type.
pub(crate) fn int_range(i: &Integer) -> (i128, i128) {
    let bits = i.size.min(127);
    if i.signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let hex: String = s.chars().filter(|&c| c != '-').collect();
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "/* CTF 1.8 */ typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n\
        trace { major = 1; minor = 8; byte_order = le; uuid = \"2a6422d0-6cee-11e0-8c08-cb07d7b3a564\"; };\n";

    #[test]
    fn what_the_writer_writes_parses_back() {
        let mut t = Trace::new([3; 16]);
        t.clocks.push(Clock::new("c", 1000));
        t.packet_header = Some(Struct::new(vec![
            Field::new("magic", Type::Integer(Integer::unsigned(32))),
            Field::new("stream_id", Type::Integer(Integer::unsigned(32))),
        ]));
        t.streams.push(StreamClass {
            id: Some(0),
            event_header: Some(Struct::new(vec![
                Field::new("id", Type::Integer(Integer::unsigned(16))),
                Field::new(
                    "timestamp",
                    Type::Integer(Integer::unsigned(64).mapped("c")),
                ),
            ])),
            ..StreamClass::default()
        });
        let fields = Struct::new(vec![
            Field::new("_n_len", Type::Integer(Integer::unsigned(32))),
            Field::new(
                "n",
                Type::Sequence {
                    element: Box::new(Type::Integer(Integer::unsigned(8).hex())),
                    length: "__n_len".into(),
                },
            ),
            Field::new("s", Type::String(Encoding::Utf8)),
            Field::new("f", Type::Float(Float::binary64())),
        ]);
        let mut e = EventClass::new("a.b", 7, fields);
        e.stream_id = Some(0);
        t.events.push(e);
        let back = parse_metadata_strict(&t.to_tsdl().unwrap())
            .expect("parse")
            .trace;
        assert_eq!(back.uuid, [3; 16]);
        assert_eq!(back.clocks, t.clocks);
        assert_eq!(back.streams, t.streams);
        assert_eq!(back.events[0].name, "a.b");
        assert_eq!(back.events[0].id, 7);
        // Names come back as written in TSDL (escaped).
        let names: Vec<&str> = back.events[0]
            .fields
            .as_ref()
            .expect("declared")
            .fields
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, ["__n_len", "n", "s", "f"]);
        assert_eq!(
            back.events[0].fields.as_ref().unwrap().fields[1].ty,
            t.events[0].fields.as_ref().unwrap().fields[1].ty
        );
    }

    #[test]
    fn errors_point_at_the_problem() {
        // (body after HEAD, line, column, message part)
        let cases = [
            (
                "event { name = x; fields := struct { uint32_t a; uint32_t a; }; };",
                3,
                59,
                "duplicate field",
            ),
            (
                "event { name = x; fields := struct { mystery_t a; }; };",
                3,
                38,
                "unknown type",
            ),
            ("typealias integer { size = 0; } := z;", 3, 21, "size"),
            (
                "typealias integer { align = 3; size = 8; } := z;",
                3,
                21,
                "power of two",
            ),
            ("enum e : uint32_t { };", 3, 6, "at least one"),
            (
                "enum e : integer { size = 2; } { A = 4 };",
                3,
                34,
                "out of the container",
            ),
            ("typealias uint32_t := uint32_t;", 3, 23, "already defined"),
            ("stream { id = 0; }; stream { id = 0; };", 3, 21, "same id"),
            ("event { name = \"a\" \"b\"; };", 3, 20, "adjacent"),
            (
                "typealias integer { size = 8; } := trace;",
                3,
                36,
                "reserved",
            ),
        ];
        for (body, line, col, msg) in cases {
            let e = parse_metadata(&format!("{HEAD}{body}")).unwrap_err();
            assert!(e.message.contains(msg), "{body}: {e}");
            assert_eq!((e.line, e.col), (line, col), "{body}: {e}");
        }
    }

    #[test]
    fn trace_block_is_checked() {
        for (text, msg) in [
            ("trace { major = 1; minor = 7; byte_order = le; };", "1.8"),
            ("trace { major = 1; minor = 8; };", "byte_order"),
            ("typealias integer { size = 8; } := u8;", "no `trace`"),
            (
                "trace { major = 1; minor = 8; byte_order = le; uuid = \"xyz\"; };",
                "uuid",
            ),
        ] {
            let e = parse_metadata(text).unwrap_err();
            assert!(e.message.contains(msg), "{text}: {e}");
        }
    }
}
