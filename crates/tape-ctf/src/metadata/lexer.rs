//! TSDL lexer (CTF 1.8 §C.1): comments, identifiers and keywords, integer,
//! character and string literals, punctuators. Every token carries its line
//! and column so that parse errors can point at it.
//!
//! Beside the tokens it lists what it took that babeltrace2 2.0 refuses or
//! reads otherwise (an `L` before a literal, `\u` escapes, a `\x` escape
//! followed by a third hex digit): the strict parse
//! ([`crate::parse_metadata_strict`]) makes them errors.

use crate::ParseError;

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An integer literal (value up to 2^64 - 1; the sign is a separate token).
    Int(u64),
    /// A string literal, unescaped.
    Str(String),
    /// A character literal (its code).
    Char(u32),
    /// A punctuator: `{ } ( ) [ ] ; : , . = := < > + - * ->` or `...`.
    Punct(&'static str),
    /// End of input.
    Eof,
}

/// A token and where it starts (1-based line and column).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: u32,
    pub col: u32,
}

const PUNCTS: &[&str] = &[
    "...", ":=", "->", "{", "}", "(", ")", "[", "]", ";", ":", ",", ".", "=", "<", ">", "+", "-",
    "*",
];

/// Splits TSDL text into tokens; beside them, what babeltrace2 2.0 would
/// not take as this lexer does (see the module docs), with positions.
pub(crate) fn lex(text: &str) -> Result<(Vec<Token>, Vec<ParseError>), ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut beyond = Vec::new();
    let (mut i, mut line, mut line_start) = (0usize, 1u32, 0usize);
    let err = |line: u32, col: usize, msg: String| ParseError {
        line,
        col: col as u32,
        message: msg,
    };
    while i < b.len() {
        let c = b[i];
        let col = i - line_start + 1;
        match c {
            b'\n' => {
                i += 1;
                line += 1;
                line_start = i;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => i += 1,
            0 => return Err(err(line, col, "NUL byte in metadata".into())),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .ok_or_else(|| err(line, col, "unterminated comment".into()))?;
                // Only the comment's own bytes are looked at: linear in the
                // text, however many comments it has.
                let after = i + 2 + end + 2;
                for (at, &x) in b[i..after].iter().enumerate() {
                    if x == b'\n' {
                        line += 1;
                        line_start = i + at + 1;
                    }
                }
                i = after;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                let (s, n, lines, odd) =
                    string_literal(&text[i..], b'"').map_err(|m| err(line, col, m))?;
                if let Some(odd) = odd {
                    beyond.push(err(line, col, odd.into()));
                }
                out.push(Token {
                    tok: Tok::Str(s),
                    line,
                    col: col as u32,
                });
                i += n;
                line += lines;
            }
            b'\'' => {
                let (s, n, _, odd) =
                    string_literal(&text[i..], b'\'').map_err(|m| err(line, col, m))?;
                if let Some(odd) = odd {
                    beyond.push(err(line, col, odd.into()));
                }
                let mut chars = s.chars();
                let ch = match (chars.next(), chars.next()) {
                    (Some(ch), None) => ch,
                    _ => {
                        return Err(err(
                            line,
                            col,
                            "a character constant holds one character".into(),
                        ))
                    }
                };
                out.push(Token {
                    tok: Tok::Char(ch as u32),
                    line,
                    col: col as u32,
                });
                i += n;
            }
            b'L' if matches!(b.get(i + 1), Some(b'"') | Some(b'\'')) => {
                // Wide literals: treated as their narrow form.
                beyond.push(err(
                    line,
                    col,
                    "a wide literal (`L\"...\"`): babeltrace2 2.0 crashes on it".into(),
                ));
                i += 1;
            }
            b'0'..=b'9' => {
                let (v, n) = integer_literal(&b[i..]).map_err(|m| err(line, col, m))?;
                out.push(Token {
                    tok: Tok::Int(v),
                    line,
                    col: col as u32,
                });
                i += n;
            }
            c if c == b'_' || c.is_ascii_alphabetic() => {
                let start = i;
                while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Ident(text[start..i].to_owned()),
                    line,
                    col: col as u32,
                });
            }
            _ => {
                let p = PUNCTS
                    .iter()
                    .find(|p| text[i..].starts_with(**p))
                    .ok_or_else(|| {
                        let ch = text[i..].chars().next().unwrap_or('?');
                        err(line, col, format!("unexpected character {ch:?}"))
                    })?;
                out.push(Token {
                    tok: Tok::Punct(p),
                    line,
                    col: col as u32,
                });
                i += p.len();
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        line,
        col: (i - line_start + 1) as u32,
    });
    Ok((out, beyond))
}

/// An integer literal: decimal, octal (`0` prefix), hexadecimal (`0x`), with
/// optional `u`/`l` suffixes. Returns the value and the bytes used.
fn integer_literal(b: &[u8]) -> Result<(u64, usize), String> {
    let (radix, start) = if b.len() > 1 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        (16, 2)
    } else if b[0] == b'0' && b.len() > 1 && b[1].is_ascii_digit() {
        (8, 1)
    } else {
        (10, 0)
    };
    let mut i = start;
    while i < b.len() && (b[i] as char).is_digit(radix) {
        i += 1;
    }
    if i == start && radix == 16 {
        return Err("hexadecimal literal without digits".into());
    }
    if i < b.len() && (b[i].is_ascii_digit() || (radix == 16 && b[i].is_ascii_hexdigit())) {
        return Err("invalid digit in integer literal".into());
    }
    let digits = std::str::from_utf8(&b[start..i]).unwrap_or("0");
    let v = if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, radix).map_err(|_| "integer literal out of range".to_owned())?
    };
    // Suffixes: u, l, ll in any case and order (at most one u, one l/ll).
    let mut j = i;
    while j < b.len() && matches!(b[j], b'u' | b'U' | b'l' | b'L') && j - i < 3 {
        j += 1;
    }
    if j < b.len() && (b[j] == b'_' || b[j].is_ascii_alphanumeric()) {
        return Err("invalid suffix on integer literal".into());
    }
    Ok((v, j))
}

/// A quoted literal starting at `s[0] == quote`: returns the unescaped text,
/// the bytes used and the newlines crossed.
fn string_literal(
    s: &str,
    quote: u8,
) -> Result<(String, usize, u32, Option<&'static str>), String> {
    let b = s.as_bytes();
    let mut odd = None;
    let mut out: Vec<u8> = Vec::new();
    let mut i = 1;
    let mut lines = 0;
    loop {
        let Some(&c) = b.get(i) else {
            return Err("unterminated literal".into());
        };
        i += 1;
        match c {
            c if c == quote => break,
            b'\n' => {
                lines += 1;
                out.push(c);
            }
            b'\\' => {
                let Some(&e) = b.get(i) else {
                    return Err("unterminated literal".into());
                };
                i += 1;
                match e {
                    b'\'' | b'"' | b'?' | b'\\' => out.push(e),
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'v' => out.push(11),
                    b'0'..=b'7' => {
                        let mut v = u32::from(e - b'0');
                        let mut n = 1;
                        while n < 3 && matches!(b.get(i), Some(b'0'..=b'7')) {
                            v = v * 8 + u32::from(b[i] - b'0');
                            i += 1;
                            n += 1;
                        }
                        out.push(u8::try_from(v).map_err(|_| "octal escape out of range")?);
                    }
                    b'x' => {
                        // At most two digits: a byte (`\x0231` is 0x02, "31").
                        let start = i;
                        while i - start < 2 && matches!(b.get(i), Some(x) if x.is_ascii_hexdigit())
                        {
                            i += 1;
                        }
                        let v = u32::from_str_radix(&s[start..i], 16)
                            .map_err(|_| "invalid \\x escape".to_owned())?;
                        if matches!(b.get(i), Some(x) if x.is_ascii_hexdigit()) {
                            odd = Some(
                                "a `\\x` escape followed by a third hex digit: babeltrace2 2.0 \
                                 reads every hex digit into it",
                            );
                        }
                        out.push(u8::try_from(v).map_err(|_| "\\x escape out of range")?);
                    }
                    b'u' | b'U' => {
                        odd = Some("a `\\u` or `\\U` escape: babeltrace2 2.0 refuses it");
                        let n = if e == b'u' { 4 } else { 8 };
                        let hex = s.get(i..i + n).ok_or("invalid unicode escape")?;
                        let v =
                            u32::from_str_radix(hex, 16).map_err(|_| "invalid unicode escape")?;
                        let ch = char::from_u32(v).ok_or("invalid unicode escape")?;
                        out.extend_from_slice(ch.to_string().as_bytes());
                        i += n;
                    }
                    other => {
                        return Err(format!("invalid escape sequence \\{}", other as char));
                    }
                }
            }
            c => out.push(c),
        }
    }
    let text = String::from_utf8(out).map_err(|_| "literal is not valid UTF-8".to_owned())?;
    Ok((text, i, lines, odd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().0.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn tokens() {
        use Tok::*;
        assert_eq!(
            toks("a := 0x1F; /* c */ b = 010 // x\n \"s\\n\" 'c' 12UL ..."),
            vec![
                Ident("a".into()),
                Punct(":="),
                Int(31),
                Punct(";"),
                Ident("b".into()),
                Punct("="),
                Int(8),
                Str("s\n".into()),
                Char('c' as u32),
                Int(12),
                Punct("..."),
                Eof
            ]
        );
        assert_eq!(toks("18446744073709551615"), vec![Int(u64::MAX), Eof]);
    }

    #[test]
    fn errors_have_positions() {
        for (src, line, col) in [
            ("a\n  \"open", 2, 3),
            ("x = 18446744073709551616;", 1, 5),
            ("\n\n  $", 3, 3),
            ("s = \"\\o040\";", 1, 5),
            ("a\0", 1, 2),
            ("12abc", 1, 1),
        ] {
            let e = lex(src).unwrap_err();
            assert_eq!((e.line, e.col), (line, col), "{src:?}: {e:?}");
        }
    }
}
