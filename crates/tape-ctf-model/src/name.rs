//! Names into CTF identifiers and back: any Unicode string a user gives a
//! field (`http.method`, `größe`, `a b`, `}; event {`, the empty string)
//! becomes one TSDL identifier, and the identifier gives the name back.
//!
//! A TSDL identifier is `[A-Za-z_][A-Za-z0-9_]*` and not a keyword, and
//! readers show a field with one leading `_` removed (CTF 1.8 §4.2.1;
//! babeltrace2 prints `_align` as `align`). Names go into the metadata
//! only through [`escape_name`]; the writer refuses any other identifier
//! that is not valid ([`check_identifier`]), so a name can never write
//! TSDL of its own.
//!
//! The escape sorts a name into one of four shapes, which give disjoint
//! identifiers (two names never give one identifier):
//!
//! ```text
//! name                                   identifier            babeltrace2 shows
//! 1 plain: [A-Za-z][A-Za-z0-9_]*, no kw  len                   len
//! 2 a keyword                            _align                align
//! 3 _[A-Za-z0-9_]*                        __x                   _x
//! 4 anything else                        _ + E(name)           E(name)
//!     http.method                        _http_2e_method       http_2e_method
//!     größe                              _gr_f6__df_e          gr_f6__df_e
//!     2xx                                _032_xx               032_xx
//!     (empty)                            _0_                   0_
//! ```
//!
//! `E` keeps ASCII letters and digits, writes `_` as `__` and any other
//! character as `_` + its code point in lowercase hex + `_`; a first
//! character that is not a letter is written `0` + hex + `_` (and the
//! empty name `0_`), so `E` never starts with `_` (shape 3's identifiers
//! do) and, holding an escape, is never a keyword (shape 2's). Shapes 1
//! to 3 are what earlier versions of tape wrote: their traces read the
//! same.
//!
//! [`unescape_name`] reverses it: what `tape show --format json`, the
//! ftrace text, the exports and filters show and take. The text that
//! babeltrace2 prints (and `tape show` by default) is the identifier
//! with one `_` removed, as ever.
//!
//! Written by hand: the escape must be exactly this one, which the
//! trace's readers reverse, and no crate makes TSDL identifiers.

use std::fmt::Write;

/// TSDL keywords, which cannot be field names (§C.1.2), and the two
/// boolean constants babeltrace2's lexer also reserves.
pub const KEYWORDS: &[&str] = &[
    "align",
    "callsite",
    "const",
    "char",
    "clock",
    "double",
    "enum",
    "env",
    "event",
    "floating_point",
    "float",
    "integer",
    "int",
    "long",
    "short",
    "signed",
    "stream",
    "string",
    "struct",
    "trace",
    "typealias",
    "typedef",
    "unsigned",
    "variant",
    "void",
    "_Bool",
    "_Complex",
    "_Imaginary",
    "TRUE",
    "FALSE",
];

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `s` is a TSDL identifier every reader takes:
/// `[A-Za-z_][A-Za-z0-9_]*`, not a keyword.
///
/// ```
/// use tape_ctf_model::is_identifier;
/// assert!(is_identifier("_http_2e_method"));
/// assert!(!is_identifier("http.method") && !is_identifier("event") && !is_identifier(""));
/// ```
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(is_ident_char) && !KEYWORDS.contains(&s)
}

/// Why an identifier is refused: the identifier and the first byte that
/// makes it so.
///
/// ```
/// use tape_ctf_model::check_identifier;
/// assert_eq!(check_identifier("a.b").unwrap_err(), "\"a.b\" is not a TSDL identifier (byte 1: '.')");
/// ```
pub fn check_identifier(s: &str) -> Result<(), String> {
    if is_identifier(s) {
        return Ok(());
    }
    if s.is_empty() {
        return Err("an empty name is not a TSDL identifier".into());
    }
    if KEYWORDS.contains(&s) {
        return Err(format!("{s:?} is a TSDL keyword, not an identifier"));
    }
    let (at, c) = s
        .char_indices()
        .find(|&(i, c)| !is_ident_char(c) || (i == 0 && c.is_ascii_digit()))
        .unwrap_or((0, '?'));
    Err(format!("{s:?} is not a TSDL identifier (byte {at}: {c:?})"))
}

/// The TSDL identifier of a field name (module docs): a name that is one
/// already stays, a keyword or a name starting with `_` gets one `_` in
/// front, anything else is `_` + its escape.
///
/// ```
/// use tape_ctf_model::escape_name;
/// assert_eq!(escape_name("len"), "len");
/// assert_eq!(escape_name("align"), "_align");
/// assert_eq!(escape_name("_x"), "__x");
/// assert_eq!(escape_name("http.method"), "_http_2e_method");
/// assert_eq!(escape_name("}; event {"), "_07d__3b__20_event_20__7b_");
/// ```
pub fn escape_name(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        return format!("_{name}");
    }
    let mut chars = name.chars();
    let first = chars.next();
    let rest_ok = chars.all(is_ident_char);
    match first {
        Some(c) if c.is_ascii_alphabetic() && rest_ok => name.to_owned(),
        Some('_') if rest_ok => format!("_{name}"),
        _ => {
            let mut out = String::with_capacity(name.len() * 2 + 4);
            out.push('_');
            let mut chars = name.chars();
            match chars.next() {
                None => out.push_str("0_"),
                Some(c) if c.is_ascii_alphabetic() => out.push(c),
                Some(c) => {
                    let _ = write!(out, "0{:x}_", c as u32);
                }
            }
            for c in chars {
                if c.is_ascii_alphanumeric() {
                    out.push(c);
                } else if c == '_' {
                    out.push_str("__");
                } else {
                    let _ = write!(out, "_{:x}_", c as u32);
                }
            }
            out
        }
    }
}

/// The name an identifier written by [`escape_name`] stands for; any
/// other identifier is shown as readers show it (one leading `_`
/// removed). `None` when `ident` is not an identifier.
///
/// ```
/// use tape_ctf_model::unescape_name;
/// assert_eq!(unescape_name("_http_2e_method").as_deref(), Some("http.method"));
/// assert_eq!(unescape_name("__x").as_deref(), Some("_x"));
/// assert_eq!(unescape_name("_align").as_deref(), Some("align"));
/// assert_eq!(unescape_name("_msg_length").as_deref(), Some("msg_length"));
/// ```
pub fn unescape_name(ident: &str) -> Option<String> {
    if !is_identifier(ident) {
        return None;
    }
    let Some(rest) = ident.strip_prefix('_') else {
        return Some(ident.to_owned());
    };
    Some(match decode_escaped(rest) {
        // Only the canonical spelling of a name of shape 4 stands for it:
        // `_abc` is shape 1's `abc` shown, not an escape of it.
        Some(name) if escape_name(&name) == ident => name,
        _ => rest.to_owned(),
    })
}

/// [`unescape_name`] without allocating where the name is a slice of the
/// identifier (all but shape 4's); `ident` itself when it is not an
/// identifier.
///
/// ```
/// use tape_ctf_model::name_of;
/// assert_eq!(name_of("__x"), "_x");
/// assert_eq!(name_of("_a_20_b"), "a b");
/// ```
pub fn name_of(ident: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match ident.strip_prefix('_') {
        None => Cow::Borrowed(ident),
        Some(rest) if rest.starts_with('_') || KEYWORDS.contains(&rest) => Cow::Borrowed(rest),
        Some(rest) => match unescape_name(ident) {
            Some(n) if n != rest => Cow::Owned(n),
            _ => Cow::Borrowed(rest),
        },
    }
}

/// `E` read back (module docs), if `e` is one.
fn decode_escaped(e: &str) -> Option<String> {
    let b = e.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    // A first character that is not a letter: `0` + hex + `_`.
    if b.first() == Some(&b'0') {
        let end = i + 1 + e[1..].find('_')?;
        let hex = &e[1..end];
        if !hex.is_empty() {
            out.push(char_of(hex)?);
        } else if end + 1 != e.len() {
            return None;
        }
        i = end + 1;
    }
    while i < b.len() {
        match b[i] {
            b'_' if b.get(i + 1) == Some(&b'_') => {
                out.push('_');
                i += 2;
            }
            b'_' => {
                let end = i + 1 + e[i + 1..].find('_')?;
                out.push(char_of(&e[i + 1..end])?);
                i = end + 1;
            }
            c => {
                out.push(char::from(c));
                i += 1;
            }
        }
    }
    Some(out)
}

fn char_of(hex: &str) -> Option<char> {
    if hex.is_empty()
        || hex.len() > 6
        || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    char::from_u32(u32::from_str_radix(hex, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, identifier): each shape, and the hostile names of issue 47.
    const CASES: &[(&str, &str)] = &[
        ("len", "len"),
        ("a_b", "a_b"),
        ("align", "_align"),
        ("TRUE", "_TRUE"),
        ("_Bool", "__Bool"),
        ("_x", "__x"),
        ("_", "__"),
        ("__n_len", "___n_len"),
        ("http.method", "_http_2e_method"),
        ("http.status_code", "_http_2e_status__code"),
        ("a b", "_a_20_b"),
        ("a-b", "_a_2d_b"),
        ("a:b", "_a_3a_b"),
        ("a\"b", "_a_22_b"),
        ("ü", "_0fc_"),
        ("größe", "_gr_f6__df_e"),
        ("2xx", "_032_xx"),
        ("\t", "_09_"),
        ("", "_0_"),
        ("\0", "_00_"),
        ("}; event {", "_07d__3b__20_event_20__7b_"),
        ("/* c */", "_02f__2a__20_c_20__2a__2f_"),
        ("_.x", "_05f__2e_x"),
        ("a\u{10ffff}", "_a_10ffff_"),
        ("🦀", "_01f980_"),
    ];

    #[test]
    fn names_escape_and_come_back() {
        for &(name, ident) in CASES {
            assert_eq!(escape_name(name), ident, "{name:?}");
            assert!(is_identifier(ident), "{ident:?}");
            assert_eq!(unescape_name(ident).as_deref(), Some(name), "{ident:?}");
        }
    }

    #[test]
    fn other_identifiers_show_as_readers_show_them() {
        for (ident, shown) in [
            ("_msg_length", "msg_length"),
            ("_ab_1", "ab_1"),
            ("_http_2e", "http_2e"),
            ("_0", "0"),
            ("_0x_", "0x_"),
            // A non-canonical escape (upper-case hex, a leading zero) is
            // not one.
            ("_a_2E_b", "a_2E_b"),
            ("_a_02e_b", "a_02e_b"),
        ] {
            assert_eq!(unescape_name(ident).as_deref(), Some(shown), "{ident:?}");
        }
        assert_eq!(unescape_name("a.b"), None);
    }

    #[test]
    fn distinct_names_give_distinct_identifiers() {
        // Every string of up to three characters from an alphabet that
        // holds each shape's edge cases.
        let alphabet = ['a', 'f', 'g', 'A', '0', '2', '_', '.', ' ', 'ü', '\0'];
        let mut names = vec![String::new()];
        for len in 1..=3 {
            let mut next = Vec::new();
            for n in names.iter().filter(|n| n.chars().count() == len - 1) {
                for c in alphabet {
                    next.push(format!("{n}{c}"));
                }
            }
            names.extend(next);
        }
        names.extend(KEYWORDS.iter().map(|k| k.to_string()));
        let mut seen = std::collections::HashMap::new();
        for n in &names {
            let id = escape_name(n);
            assert!(is_identifier(&id), "{n:?} -> {id:?}");
            assert_eq!(unescape_name(&id).as_deref(), Some(n.as_str()), "{id:?}");
            if let Some(other) = seen.insert(id.clone(), n.clone()) {
                panic!("{other:?} and {n:?} both give {id:?}");
            }
        }
    }

    #[test]
    fn refusals_name_the_byte() {
        for (ident, want) in [
            ("", "an empty name is not a TSDL identifier"),
            ("event", "\"event\" is a TSDL keyword, not an identifier"),
            ("2x", "\"2x\" is not a TSDL identifier (byte 0: '2')"),
            ("a b", "\"a b\" is not a TSDL identifier (byte 1: ' ')"),
            ("aü", "\"aü\" is not a TSDL identifier (byte 1: 'ü')"),
        ] {
            assert_eq!(check_identifier(ident).unwrap_err(), want);
        }
    }
}
