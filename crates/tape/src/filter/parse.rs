//! The filter language's syntax: tokens and the expression tree, each
//! node with its byte position in the text for error messages.
//!
//! ```text
//! expr   := or
//! or     := and ( "||" and )*
//! and    := unary ( "&&" unary )*
//! unary  := "!" unary | "(" expr ")" | cmp
//! cmp    := field OP value
//! field  := name ( "." name | "[" digits "]" )*
//! name   := [A-Za-z_][A-Za-z0-9_]* | "`" any text but "`" "`"
//! OP     := "==" | "!=" | "<" | "<=" | ">" | ">=" | "&" | "~"
//! value  := integer (decimal, 0x.., negative) | float | "string" | word
//! ```
//!
//! Hand-written (a recursive descent of 100 lines): the grammar is the
//! kernel's event filter grammar, small and fixed, and errors must point
//! at a byte of the user's text, which a generated parser would make
//! harder, not easier.

/// Deepest nesting of an expression (parentheses and `!`).
pub const MAX_DEPTH: usize = 64;

/// Most comparisons in one expression (the kernel refuses "too many terms"
/// past its own limit).
pub const MAX_TERMS: usize = 4096;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&`: the bits are not all clear.
    And,
    /// `~`: a string matches a glob.
    Glob,
}

impl Op {
    pub(crate) fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::And => "&",
            Op::Glob => "~",
        }
    }
}

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A field or struct member by name.
    Name(String),
    /// An array or sequence element.
    Index(u64),
}

/// A literal on the right of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// An integer.
    Int(i128),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A quoted string.
    Str(String),
    /// A bare word: an enum label, or a string.
    Word(String),
    /// A duration with its unit, as tape prints one (`30us`, `6.643µs`,
    /// `1.5ms`, `2s`, `100ns`): its nanoseconds, for a `Duration` field.
    Duration(i128),
}

/// The units of a duration literal and their nanoseconds, longest suffix
/// first (`ms` before `s`).
const DURATION_UNITS: [(&str, f64); 5] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
];

/// The expression tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `a || b`
    Or(Box<Expr>, Box<Expr>),
    /// `a && b`
    And(Box<Expr>, Box<Expr>),
    /// `!a`
    Not(Box<Expr>),
    /// `field OP value`, with the positions of the field and the value.
    Cmp {
        /// The field's path.
        field: Vec<Step>,
        /// Byte position of the field.
        field_at: usize,
        /// The operator.
        op: Op,
        /// Byte position of the operator.
        op_at: usize,
        /// The value.
        value: Literal,
        /// Byte position of the value.
        value_at: usize,
    },
}

/// A syntax error: the byte position and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Byte position in the expression.
    pub at: usize,
    /// What is wrong.
    pub message: String,
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
    /// Comparisons read so far.
    terms: usize,
}

/// Parses a filter expression.
pub fn parse(text: &str) -> Result<Expr, SyntaxError> {
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
        terms: 0,
    };
    p.skip_ws();
    if p.i == p.b.len() {
        return Err(p.err("an empty filter: expected a comparison such as `len > 1400`"));
    }
    let e = p.or()?;
    p.skip_ws();
    if p.i < p.b.len() {
        return Err(p.err("expected `&&`, `||` or the end of the filter"));
    }
    Ok(e)
}

impl Parser<'_> {
    fn err(&self, m: impl Into<String>) -> SyntaxError {
        SyntaxError {
            at: self.i,
            message: m.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.skip_ws();
        if self.s[self.i..].starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.and()?;
        while self.eat("||") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.unary()?;
        while self.eat("&&") {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, SyntaxError> {
        self.skip_ws();
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!(
                "the expression nests deeper than {} (parentheses and `!`)",
                MAX_DEPTH
            )));
        }
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, SyntaxError> {
        if self.s[self.i..].starts_with('!') && !self.s[self.i..].starts_with("!=") {
            self.i += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("(") {
            let e = self.or()?;
            if !self.eat(")") {
                return Err(self.err("expected `)`"));
            }
            return Ok(e);
        }
        self.cmp()
    }

    /// A name, bare or in backquotes (`` `http method` ``: any name a
    /// `tracing` field can have, but for one with a backquote, which its
    /// identifier names instead). A bare name's dots are the path's, but
    /// where one field's own name holds them (`http.method`).
    fn name(&mut self) -> Option<String> {
        if self.b.get(self.i) == Some(&b'`') {
            let len = self.s[self.i + 1..].find('`')?;
            let name = self.s[self.i + 1..self.i + 1 + len].to_owned();
            self.i += len + 2;
            return Some(name);
        }
        let start = self.i;
        while self.i < self.b.len()
            && (self.b[self.i].is_ascii_alphanumeric() || self.b[self.i] == b'_')
        {
            self.i += 1;
        }
        (self.i > start && !self.b[start].is_ascii_digit())
            .then(|| self.s[start..self.i].to_owned())
    }

    fn cmp(&mut self) -> Result<Expr, SyntaxError> {
        self.skip_ws();
        self.terms += 1;
        if self.terms > MAX_TERMS {
            return Err(self.err(format!(
                "too many comparisons: at most {} in one filter",
                MAX_TERMS
            )));
        }
        let field_at = self.i;
        let Some(first) = self.name() else {
            self.i = field_at;
            return Err(self.err("expected a field name, `!` or `(`"));
        };
        let mut field = vec![Step::Name(first)];
        loop {
            if self.i < self.b.len() && self.b[self.i] == b'.' {
                self.i += 1;
                let at = self.i;
                match self.name() {
                    Some(n) => field.push(Step::Name(n)),
                    None => {
                        self.i = at;
                        return Err(self.err("expected a member name after `.`"));
                    }
                }
            } else if self.i < self.b.len() && self.b[self.i] == b'[' {
                self.i += 1;
                let at = self.i;
                while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                let n = self.s[at..self.i].parse::<u64>().map_err(|_| SyntaxError {
                    at,
                    message: "expected an element index (digits) after `[`".into(),
                })?;
                if self.i >= self.b.len() || self.b[self.i] != b']' {
                    return Err(self.err("expected `]`"));
                }
                self.i += 1;
                field.push(Step::Index(n));
            } else {
                break;
            }
        }
        self.skip_ws();
        let op_at = self.i;
        let op = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
            ("~", Op::Glob),
        ]
        .into_iter()
        .find(|(t, _)| self.s[self.i..].starts_with(t))
        .map(|(t, op)| {
            self.i += t.len();
            op
        })
        .or_else(|| {
            // `&` alone (not `&&`).
            (self.s[self.i..].starts_with('&') && !self.s[self.i..].starts_with("&&")).then(|| {
                self.i += 1;
                Op::And
            })
        })
        .ok_or_else(|| self.err("expected an operator: == != < <= > >= & ~"))?;
        self.skip_ws();
        let value_at = self.i;
        let value = self.literal()?;
        Ok(Expr::Cmp {
            field,
            field_at,
            op,
            op_at,
            value,
            value_at,
        })
    }

    fn literal(&mut self) -> Result<Literal, SyntaxError> {
        let start = self.i;
        match self.b.get(self.i) {
            None => Err(self.err("expected a value")),
            Some(b'"') => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    match self.s[self.i..].chars().next() {
                        None => {
                            return Err(SyntaxError {
                                at: start,
                                message: "a string with no closing `\"`".into(),
                            })
                        }
                        Some('"') => {
                            self.i += 1;
                            return Ok(Literal::Str(out));
                        }
                        Some('\\') => {
                            let c =
                                self.s[self.i + 1..]
                                    .chars()
                                    .next()
                                    .ok_or_else(|| SyntaxError {
                                        at: start,
                                        message: "a string with no closing `\"`".into(),
                                    })?;
                            out.push(match c {
                                'n' => '\n',
                                't' => '\t',
                                c => c,
                            });
                            self.i += 1 + c.len_utf8();
                        }
                        Some(c) => {
                            out.push(c);
                            self.i += c.len_utf8();
                        }
                    }
                }
            }
            Some(c) if c.is_ascii_digit() || *c == b'-' || *c == b'+' => {
                let mut end = self.i + 1;
                while end < self.b.len()
                    && (self.b[end].is_ascii_alphanumeric() || matches!(self.b[end], b'.' | b'_'))
                {
                    end += 1;
                }
                // `µs`: the one unit whose letter is not ASCII.
                if self.s[end..].starts_with("µs")
                    && self.s[..end].ends_with(|c: char| c.is_ascii_digit() || c == '.')
                {
                    end += "µs".len();
                }
                let t = &self.s[self.i..end];
                if let Some(ns) = duration(t) {
                    let ns = ns.map_err(|why| self.err(format!("{t:?}: {why}")))?;
                    self.i = end;
                    return Ok(Literal::Duration(ns));
                }
                let (neg, digits) = match t.as_bytes()[0] {
                    b'-' => (true, &t[1..]),
                    b'+' => (false, &t[1..]),
                    _ => (false, t),
                };
                let int = if let Some(h) = digits
                    .strip_prefix("0x")
                    .or_else(|| digits.strip_prefix("0X"))
                {
                    i128::from_str_radix(h, 16).ok()
                } else {
                    digits.parse::<i128>().ok()
                };
                let lit = match int {
                    Some(v) => Literal::Int(if neg { -v } else { v }),
                    None => match t.parse::<f64>() {
                        Ok(f) => Literal::Float(f),
                        Err(_) => return Err(self.err(format!("{t:?} is not a number"))),
                    },
                };
                self.i = end;
                Ok(lit)
            }
            Some(_) => {
                // A bare word: up to white space or an operator of the
                // grammar (`)`, `&&`, `||`).
                let mut end = self.i;
                while end < self.b.len()
                    && !self.b[end].is_ascii_whitespace()
                    && !matches!(self.b[end], b')' | b'(')
                    && !self.s[end..].starts_with("&&")
                    && !self.s[end..].starts_with("||")
                {
                    end += 1;
                }
                if end == self.i {
                    return Err(self.err("expected a value"));
                }
                let w = self.s[self.i..end].to_owned();
                self.i = end;
                Ok(Literal::Word(w))
            }
        }
    }
}

/// A duration literal's nanoseconds: `None` when `t` is not a decimal
/// number followed by a unit of [`DURATION_UNITS`]; an error when it is
/// one but not a whole number of nanoseconds, or too large.
fn duration(t: &str) -> Option<Result<i128, String>> {
    if t.starts_with("0x") || t.starts_with("0X") {
        return None;
    }
    let (number, scale) = DURATION_UNITS
        .iter()
        .find_map(|(unit, scale)| Some((t.strip_suffix(unit)?, *scale)))?;
    let digits = number.strip_prefix(['-', '+']).unwrap_or(number);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v: f64 = number.parse().ok()?;
    let ns = v * scale;
    Some(if ns.abs() > 1.8e19 {
        Err("is longer than a u64 of nanoseconds".to_owned())
    } else if (ns - ns.round()).abs() > 1e-3 {
        Err("is not a whole number of nanoseconds".to_owned())
    } else {
        Ok(ns.round() as i128)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(f: &str, op: Op, v: Literal) -> Expr {
        let field = f.split('.').map(|s| Step::Name(s.to_owned())).collect();
        Expr::Cmp {
            field,
            field_at: 0,
            op,
            op_at: 0,
            value: v,
            value_at: 0,
        }
    }

    /// Positions zeroed, to compare shapes.
    fn shape(e: Expr) -> Expr {
        match e {
            Expr::Or(a, b) => Expr::Or(Box::new(shape(*a)), Box::new(shape(*b))),
            Expr::And(a, b) => Expr::And(Box::new(shape(*a)), Box::new(shape(*b))),
            Expr::Not(a) => Expr::Not(Box::new(shape(*a))),
            Expr::Cmp {
                field, op, value, ..
            } => Expr::Cmp {
                field,
                field_at: 0,
                op,
                op_at: 0,
                value,
                value_at: 0,
            },
        }
    }

    #[test]
    fn precedence_and_literals() {
        let e = shape(parse("a == 1 || b > 0x10 && !(c ~ \"eth*\")").unwrap());
        let want = Expr::Or(
            Box::new(cmp("a", Op::Eq, Literal::Int(1))),
            Box::new(Expr::And(
                Box::new(cmp("b", Op::Gt, Literal::Int(16))),
                Box::new(Expr::Not(Box::new(cmp(
                    "c",
                    Op::Glob,
                    Literal::Str("eth*".into()),
                )))),
            )),
        );
        assert_eq!(e, want);
        assert_eq!(
            shape(parse("hdr.len>=-3").unwrap()),
            cmp("hdr.len", Op::Ge, Literal::Int(-3))
        );
        assert_eq!(
            shape(parse("x < 2.5").unwrap()),
            cmp("x", Op::Lt, Literal::Float(2.5))
        );
        assert_eq!(
            shape(parse("op == Read").unwrap()),
            cmp("op", Op::Eq, Literal::Word("Read".into()))
        );
        assert_eq!(
            shape(parse("flags & 4").unwrap()),
            cmp("flags", Op::And, Literal::Int(4))
        );
        // Durations as tape prints them, to nanoseconds.
        for (text, op, ns) in [
            ("took > 30us", Op::Gt, 30_000),
            ("took > 6.643µs", Op::Gt, 6_643),
            ("took<1.5ms", Op::Lt, 1_500_000),
            ("took >= 2s", Op::Ge, 2_000_000_000),
            ("took == 100ns", Op::Eq, 100),
            ("took != 0.000001s", Op::Ne, 1_000),
        ] {
            assert_eq!(
                shape(parse(text).unwrap()),
                cmp("took", op, Literal::Duration(ns)),
                "{text}"
            );
        }
        let Expr::Cmp { field, .. } = parse("data[3] == 5").unwrap() else {
            panic!()
        };
        assert_eq!(field, vec![Step::Name("data".into()), Step::Index(3)]);
    }

    #[test]
    fn errors_point_at_the_byte() {
        for (text, at, why) in [
            ("", 0, "an empty filter"),
            ("len >", 5, "expected a value"),
            ("len 5", 4, "expected an operator"),
            ("len > 5 &&", 10, "expected a field name"),
            ("(len > 5", 8, "expected `)`"),
            ("len > 5 len", 8, "expected `&&`, `||` or the end"),
            ("a == \"x", 5, "no closing"),
            ("3x == 1", 0, "expected a field name"),
            ("a. == 1", 2, "expected a member name"),
            ("a[x] == 1", 2, "expected an element index"),
            ("a == 12zz", 5, "is not a number"),
            (
                "a == 1.5ns",
                5,
                "\"1.5ns\": is not a whole number of nanoseconds",
            ),
            (
                "a == 99999999999s",
                5,
                "is longer than a u64 of nanoseconds",
            ),
            (&"(".repeat(100_000), 64, "nests deeper"),
            (&"a == 1 || ".repeat(5000), 40960, "too many comparisons"),
            (&"!".repeat(100_000), 64, "nests deeper"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(
                (e.at, e.message.contains(why)),
                (at, true),
                "{text:?}: {e:?}"
            );
        }
    }
}
