//! A trace's read-time formats, parsed from its `env` block: how its
//! events print (`tape show --format ftrace`, `tape graph`'s comments).
//!
//! A tape trace carries, per event id, what a reader needs to print an
//! event the way its author wanted, in the metadata's `env` block, where
//! any CTF reader can see it; `tape show --format ftrace` applies it:
//!
//! ```text
//! env {
//!     tape_format_7 = "comm={comm} pid={pid} prio={prio} target_cpu={target_cpu:03}";
//!     tape_class_7 = "sched_wakeup_template";
//!     tape_hints_7 = "state:flags(RDWR=0x3,READ=0x1,WRITE=0x2);peer:ipv4";
//! };
//! ```
//!
//! **Formats** are text with `{path}` or `{path:spec}` placeholders (`{{`
//! and `}}` are braces). A path names a payload field (`hdr.len` inside a
//! struct); context fields are found when no payload field has the name.
//! The spec is Rust's: `[[fill]<|^|>][#][0][width][.precision][x|X|o|b|d]`,
//! so `{cpu:03}` gives `001` and `{addr:#x}` gives `0x7f`.
//!
//! **Values** read as the kernel's `trace` file shows them: integers in
//! their metadata base (`0x1f` for `base = 16`; a negative one in hex as
//! its 64-bit two's complement), enumerations by label
//! (`__print_symbolic`; an unknown value in hex, `0x7`), booleans as `0` /
//! `1`, strings raw, arrays as `{1,2,3}`, structs as `{a=1 b=2}`, a variant
//! as its option's value (an empty option by its name: `none`).
//!
//! **Hints** (`path:hint`, `;`-separated) name what CTF has no type for:
//! `flags(NAME=MASK,...)` prints `__print_flags` style (`READ|WRITE|0x40`:
//! each mask wholly set is named and cleared, in the order given, then the
//! leftover bits in hex; `0` prints nothing), `ipv4` and `ipv6` print
//! addresses, `duration` prints nanoseconds as `1.5ms`.
//!
//! An event without a format prints `name=value` for each payload field,
//! leaving out the fields whose name (as shown, after CTF's escape `_` is
//! dropped) starts with `_`: tape's sequence lengths and variant tags.

use std::collections::HashMap;

use crate::{EnvValue, Trace};

/// The read-time formats and hints of a trace, by event id.
#[derive(Clone, Debug, Default)]
pub struct Formats {
    events: HashMap<u64, EventFormat>,
    /// `printk!` formats by format id (`tape_printk_<id>`).
    pub(crate) printk: HashMap<u64, Vec<Piece>>,
    /// Env entries that did not parse: `tape_format_3: at byte 5: ...`.
    pub errors: Vec<String>,
    /// The program that recorded the trace (`tape_exe*`), to symbolise
    /// `tape.stacktrace` addresses.
    pub exe: Option<Executable>,
}

/// The executable a trace's program ran, as its `env` names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Executable {
    /// Its path (`tape_exe`).
    pub path: String,
    /// Its load bias (`tape_exe_base`): runtime address = ELF address + base.
    pub base: u64,
    /// Its GNU build id in hex (`tape_exe_build_id`; empty: none).
    pub build_id: String,
}

/// How one event prints.
#[derive(Clone, Debug, Default)]
pub struct EventFormat {
    /// The format; `None`: `name=value` pairs.
    pub pieces: Option<Vec<Piece>>,
    /// Hints by field path.
    pub hints: HashMap<String, Hint>,
}

/// A piece of a format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A field: its path and spec.
    Field(Vec<String>, Spec),
}

/// Where padding goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// `<`.
    Left,
    /// `^`.
    Center,
    /// `>`.
    Right,
}

/// How a number is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// As the value's type says.
    #[default]
    Natural,
    /// `d`: decimal.
    Decimal,
    /// `x`.
    Hex,
    /// `X`.
    HexUpper,
    /// `o`.
    Octal,
    /// `b`.
    Binary,
}

/// A placeholder's spec: `[[fill]align][#][0][width][.precision][type]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Padding character.
    pub fill: char,
    /// Padding side (`None`: numbers right, text left).
    pub align: Option<Align>,
    /// `#`: `0x`, `0o`, `0b` prefixes.
    pub alt: bool,
    /// `0`: pad numbers with zeros after the sign and prefix.
    pub zero: bool,
    /// Minimum width in characters.
    pub width: usize,
    /// Digits after the point of a float.
    pub precision: Option<usize>,
    /// Number base.
    pub kind: Kind,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec {
            fill: ' ',
            align: None,
            alt: false,
            zero: false,
            width: 0,
            precision: None,
            kind: Kind::Natural,
        }
    }
}

/// A display hint (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// Names of bit masks, in the order they are tried.
    Flags(Vec<(String, u128)>),
    /// Four bytes: `10.0.0.1`.
    Ipv4,
    /// Sixteen bytes: `::1`.
    Ipv6,
    /// Nanoseconds: `1.5ms`.
    Duration,
}

impl Formats {
    /// The formats and hints found in `trace`'s env block; entries that do
    /// not parse are listed in `errors` (their events print `name=value`).
    pub fn new(trace: &Trace) -> Formats {
        let mut f = Formats::default();
        let mut exe = Executable::default();
        for (key, value) in &trace.env {
            match (key.as_str(), value) {
                ("tape_exe", EnvValue::Str(p)) => exe.path.clone_from(p),
                ("tape_exe_base", EnvValue::Int(b)) => exe.base = *b as u64,
                ("tape_exe_build_id", EnvValue::Str(id)) => exe.build_id.clone_from(id),
                _ => {}
            }
        }
        if !exe.path.is_empty() {
            f.exe = Some(exe);
        }
        for (key, value) in &trace.env {
            let EnvValue::Str(text) = value else { continue };
            if key.starts_with("tape_printk_at_") {
                continue;
            }
            if let Some(id) = key.strip_prefix("tape_printk_") {
                match (id.parse::<u64>(), parse_format(text)) {
                    (Ok(id), Ok(p)) => {
                        f.printk.insert(id, p);
                    }
                    (Err(_), _) => f.errors.push(format!("env {key}: not a format id")),
                    (_, Err(why)) => f.errors.push(format!("env {key} = {text:?}: {why}")),
                }
                continue;
            }
            let (kind, id) = if let Some(id) = key.strip_prefix("tape_format_") {
                (0, id)
            } else if let Some(id) = key.strip_prefix("tape_hints_") {
                (1, id)
            } else {
                continue;
            };
            let Ok(id) = id.parse::<u64>() else {
                f.errors.push(format!("env {key}: not an event id"));
                continue;
            };
            let e = f.events.entry(id).or_default();
            let r = if kind == 0 {
                parse_format(text).map(|p| e.pieces = Some(p))
            } else {
                parse_hints(text).map(|h| e.hints = h)
            };
            if let Err(why) = r {
                f.errors.push(format!("env {key} = {text:?}: {why}"));
            }
        }
        f
    }

    /// How event `id` prints (`None`: no format and no hints).
    pub fn get(&self, id: u64) -> Option<&EventFormat> {
        self.events.get(&id)
    }
}

/// Parses a format into pieces; the error names the byte offset.
pub fn parse_format(f: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let b = f.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c @ (b'{' | b'}') if b.get(i + 1) == Some(&c) => {
                text.push(c as char);
                i += 2;
            }
            b'}' => return Err(format!("at byte {i}: a `}}` with no `{{` (write `}}}}`)")),
            b'{' => {
                let Some(len) = f[i + 1..].find('}') else {
                    return Err(format!("at byte {i}: a `{{` with no `}}` (write `{{{{`)"));
                };
                let inside = &f[i + 1..i + 1 + len];
                let (path, spec) = match inside.split_once(':') {
                    Some((p, s)) => (p, parse_spec(s).map_err(|e| format!("at byte {i}: {e}"))?),
                    None => (inside, Spec::default()),
                };
                // `{}`: the next argument (of a `printk!`).
                let path: Vec<String> = if path.is_empty() {
                    Vec::new()
                } else {
                    path.split('.').map(str::to_owned).collect()
                };
                if path.iter().any(|p| p.is_empty()) {
                    return Err(format!(
                        "at byte {i}: `{{{inside}}}` has an empty field name"
                    ));
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Field(path, spec));
                i += len + 2;
            }
            _ => {
                let next = f[i..].find(['{', '}']).map_or(f.len(), |n| i + n);
                text.push_str(&f[i..next]);
                i = next;
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Parses a spec (the part after `:`).
pub fn parse_spec(s: &str) -> Result<Spec, String> {
    let mut spec = Spec::default();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let align_of = |c: char| match c {
        '<' => Some(Align::Left),
        '^' => Some(Align::Center),
        '>' => Some(Align::Right),
        _ => None,
    };
    if let Some(a) = chars.get(1).and_then(|&c| align_of(c)) {
        spec.fill = chars[0];
        spec.align = Some(a);
        i = 2;
    } else if let Some(a) = chars.first().and_then(|&c| align_of(c)) {
        spec.align = Some(a);
        i = 1;
    }
    if chars.get(i) == Some(&'#') {
        spec.alt = true;
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        spec.zero = true;
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    let w = digits(&mut i);
    if !w.is_empty() {
        spec.width = w.parse().map_err(|_| format!("width {w:?} is too large"))?;
        if spec.width > 4096 {
            return Err(format!("width {w} is too large (4096 at most)"));
        }
    }
    if chars.get(i) == Some(&'.') {
        i += 1;
        let p = digits(&mut i);
        let p: usize = p
            .parse()
            .map_err(|_| format!("spec {s:?}: bad precision"))?;
        if p > 64 {
            return Err(format!("precision {p} is too large (64 at most)"));
        }
        spec.precision = Some(p);
    }
    if let Some(&c) = chars.get(i) {
        spec.kind = match c {
            'd' => Kind::Decimal,
            'x' => Kind::Hex,
            'X' => Kind::HexUpper,
            'o' => Kind::Octal,
            'b' => Kind::Binary,
            c => return Err(format!("spec {s:?}: unknown type {c:?} (d, x, X, o, b)")),
        };
        i += 1;
    }
    if i != chars.len() {
        return Err(format!("spec {s:?}: unexpected {:?}", chars[i]));
    }
    Ok(spec)
}

/// Parses `path:hint;path:hint`.
pub fn parse_hints(s: &str) -> Result<HashMap<String, Hint>, String> {
    let mut hints = HashMap::new();
    for item in s.split(';').filter(|i| !i.is_empty()) {
        let Some((path, hint)) = item.split_once(':') else {
            return Err(format!("{item:?} is not `path:hint`"));
        };
        let hint = match hint {
            "ipv4" => Hint::Ipv4,
            "ipv6" => Hint::Ipv6,
            "duration" => Hint::Duration,
            h => {
                let Some(list) = h.strip_prefix("flags(").and_then(|l| l.strip_suffix(')')) else {
                    return Err(format!("{path}: unknown hint {h:?}"));
                };
                let mut names = Vec::new();
                for entry in list.split(',').filter(|e| !e.is_empty()) {
                    let (name, mask) = entry
                        .split_once('=')
                        .ok_or_else(|| format!("{path}: flag {entry:?} is not NAME=MASK"))?;
                    let mask = mask
                        .strip_prefix("0x")
                        .map_or_else(|| mask.parse::<u128>(), |hex| u128::from_str_radix(hex, 16));
                    let mask = mask.map_err(|_| format!("{path}: flag {entry:?}: bad mask"))?;
                    names.push((name.to_owned(), mask));
                }
                Hint::Flags(names)
            }
        };
        // Each name of the path as its user wrote it (`tape_ctf_model::name_of`),
        // as the decoded values name their fields.
        let path: Vec<_> = path.split('.').map(crate::name_of).collect();
        hints.insert(path.join("."), hint);
    }
    Ok(hints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_formats_name_the_place() {
        let cases = [
            ("a={a", "at byte 2: a `{` with no `}`"),
            ("a}", "at byte 1: a `}` with no `{`"),
            ("{a:q}", "unknown type 'q'"),
            ("{a:99999}", "too large"),
            ("{a.}", "empty field name"),
            ("{.a}", "empty field name"),
        ];
        for (f, want) in cases {
            let e = parse_format(f).unwrap_err();
            assert!(e.contains(want), "{f}: {e}");
        }
        assert!(parse_hints("x:flags(A=zz)")
            .unwrap_err()
            .contains("bad mask"));
        assert!(parse_hints("x:weird").unwrap_err().contains("unknown hint"));
    }
}
