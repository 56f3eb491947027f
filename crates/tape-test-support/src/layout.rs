//! A crate's layout read from its source, as the layout tests of tape,
//! tape-consumer and tape-cli check it (`../shared/STYLE.md`: files on
//! floors, no import circle): each file of `src/` stands on a floor named
//! by its module's first segment (the crate root, `lib.rs` or `main.rs`,
//! is the module `""`), uses only its own floor and the floors below it,
//! and no two files use each other, even through others.
//!
//! Read from the source, comments and strings left out: every path that
//! starts with `crate::`, `super::` or `self::`, in a `use` or in the code,
//! and every path through a child module the file declares (`mod shm;` then
//! `shm::open`), is an edge from the file to the file that defines the
//! module the path names (the longest prefix that is a file). `$crate::`
//! paths are the macros' expansions in the user's crate, not uses of this
//! crate's files, and are left out. An item the crate root defines or
//! re-exports (`crate::say!` through `use output::*` in `main.rs`) lands
//! in the root: a use of the top floor.
//!
//! `TAPE_LAYOUT_PRINT=1` prints every edge with its floors.
//!
//! Hand-written: no crate reads a crate's module graph without compiling
//! it; this scanner needs no build and reads what rustc would resolve for
//! the paths it follows (its test below).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's floors, bottom first: a module's first path segment names its
/// floor.
pub type Floors = &'static [(&'static str, &'static [&'static str])];

/// A file's floor (its index in `floors`) by its module path.
fn floor(floors: Floors, module: &[String]) -> Option<usize> {
    let first = module.first().map(String::as_str).unwrap_or("");
    floors.iter().position(|(_, names)| names.contains(&first))
}

/// One token of Rust source: an identifier, `::`, or one other character.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Path,
    Punct(char),
}

/// The tokens of `src` with their lines, comments, strings and character
/// literals left out.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(b[i] == '\n');
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && raw_string(&b, i).is_some()
        {
            let end = raw_string(&b, i).unwrap();
            line += b[i..end].iter().filter(|&&c| c == '\n').count();
            i = end;
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            i += if c == 'b' { 2 } else { 1 };
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                line += usize::from(b.get(i) == Some(&'\n'));
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(b[start..i].iter().collect()), line));
        } else if c == ':' && next == Some(':') {
            out.push((Tok::Path, line));
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '.') {
                i += 1;
            }
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// The end of a raw string literal starting at `i` (`r"..."`, `r#"..."#`).
fn raw_string(b: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    let mut hashes = 0;
    while b.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if b.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

/// The paths of a `use` tree starting at `toks[i]`, each with `prefix`
/// before it; returns the index after the tree.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(s)) if s == "as" => {
                i += 2;
                out.push(path);
                return i;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
            }
            Some(Tok::Path) => i += 1,
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &path, out),
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                out.push(path);
                return i + 1;
            }
            _ => {
                out.push(path);
                return i;
            }
        }
    }
}

/// The file of module `m` under `src`.
fn file_of(src: &Path, m: &[String]) -> Option<PathBuf> {
    if m.is_empty() {
        return Some(root_file(src));
    }
    let rel: PathBuf = m.iter().collect();
    let flat = src.join(&rel).with_extension("rs");
    let nested = src.join(&rel).join("mod.rs");
    [flat, nested].into_iter().find(|p| p.is_file())
}

/// The module of a file (`ring/shm.rs` -> `["ring", "shm"]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Vec<String> = rel.iter().map(|c| c.to_str().unwrap().to_owned()).collect();
    if m.last().is_some_and(|l| l == "mod" || l == "lib") || file == root_file(src) {
        m.pop();
    }
    m
}

/// The crate root: `lib.rs`, or a binary's `main.rs`.
fn root_file(src: &Path) -> PathBuf {
    let lib = src.join("lib.rs");
    if lib.is_file() {
        lib
    } else {
        src.join("main.rs")
    }
}

/// The file module an absolute path lands in: its longest prefix that is
/// a file.
fn landing(src: &Path, path: &[String]) -> Vec<String> {
    for n in (0..=path.len()).rev() {
        if file_of(src, &path[..n]).is_some() {
            return path[..n].to_vec();
        }
    }
    Vec::new()
}

/// One use: from a file, at a line, of a module.
#[derive(Debug)]
struct Use {
    from: Vec<String>,
    line: usize,
    to: Vec<String>,
}

/// Every `.rs` file under `dir`, into `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every use of another file in the files under `src`, of the crate named
/// `own` in paths (`tape`: the macros' doc examples name it).
fn uses(src: &Path, own: &str) -> Vec<Use> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    // The macros exported at the crate's root, by the file that defines them.
    let mut macros: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let toks = tokens(&std::fs::read_to_string(f).unwrap());
        for (i, w) in toks.windows(3).enumerate() {
            if let (Tok::Ident(e), true) = (&w[0].0, i > 0) {
                if e == "macro_export" {
                    if let Some(name) =
                        toks[i..]
                            .windows(3)
                            .find_map(|w| match (&w[0].0, &w[1].0, &w[2].0) {
                                (Tok::Ident(m), Tok::Punct('!'), Tok::Ident(name))
                                    if m == "macro_rules" =>
                                {
                                    Some(name.clone())
                                }
                                _ => None,
                            })
                    {
                        macros.insert(name, module_of(src, f));
                    }
                }
            }
        }
    }
    let mut all = Vec::new();
    for f in files {
        let module = module_of(src, &f);
        let text = std::fs::read_to_string(&f).unwrap();
        let toks = tokens(&text);
        // Child modules declared by the file (`mod shm;`).
        let children: BTreeSet<String> = toks
            .windows(3)
            .filter_map(|w| match (&w[0].0, &w[1].0, &w[2].0) {
                (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) if m == "mod" => {
                    Some(name.clone())
                }
                _ => None,
            })
            .collect();
        // The inline modules (`mod tests { .. }`) open at each brace depth.
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < toks.len() {
            let (tok, line) = (&toks[i].0, toks[i].1);
            let here: Vec<String> = module
                .iter()
                .cloned()
                .chain(inline.iter().map(|(m, _)| m.clone()))
                .collect();
            let prev_is_path = i > 0 && toks[i - 1].0 == Tok::Path;
            let prev_is_dollar = i > 0 && toks[i - 1].0 == Tok::Punct('$');
            let mut paths = Vec::new();
            match tok {
                Tok::Punct('{') => {
                    depth += 1;
                    i += 1;
                    continue;
                }
                Tok::Punct('}') => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                    i += 1;
                    continue;
                }
                Tok::Ident(k) if k == "mod" => {
                    if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                        (toks.get(i + 1), toks.get(i + 2))
                    {
                        inline.push((name.clone(), depth + 1));
                    }
                    i += 1;
                    continue;
                }
                Tok::Ident(k) if k == "use" && !prev_is_path => {
                    let end = use_tree(&toks, i + 1, &[], &mut paths);
                    i = end;
                }
                Tok::Ident(k)
                    if !prev_is_path
                        && !prev_is_dollar
                        && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Path)
                        && (k == "crate"
                            || k == own
                            || k == "super"
                            || k == "self"
                            || children.contains(k)) =>
                {
                    let mut p = Vec::new();
                    let mut j = i;
                    while let Some((Tok::Ident(s), _)) = toks.get(j) {
                        p.push(s.clone());
                        if toks.get(j + 1).is_some_and(|t| t.0 == Tok::Path) {
                            j += 2;
                        } else {
                            break;
                        }
                    }
                    paths.push(p);
                    i = j + 1;
                }
                _ => {
                    i += 1;
                    continue;
                }
            }
            for p in paths {
                let Some(abs) = absolute(&p, &here, &module, &children, own) else {
                    continue;
                };
                let to = match abs.as_slice() {
                    [m] if macros.contains_key(m) => macros[m].clone(),
                    _ => landing(src, &abs),
                };
                if to != module {
                    all.push(Use {
                        from: module.clone(),
                        line,
                        to,
                    });
                }
            }
        }
    }
    all
}

/// A path made absolute from the module `here` (the file `module`, inside
/// its inline modules), or `None` for a path outside the crate.
fn absolute(
    p: &[String],
    here: &[String],
    module: &[String],
    children: &BTreeSet<String>,
    own: &str,
) -> Option<Vec<String>> {
    let first = p.first()?;
    let mut base: Vec<String>;
    let mut rest = p;
    match first.as_str() {
        k if k == "crate" || k == own => {
            base = Vec::new();
            rest = &p[1..];
        }
        "self" => {
            base = here.to_vec();
            rest = &p[1..];
        }
        "super" => {
            base = here.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        name if here.len() == module.len() && children.contains(name) => base = module.to_vec(),
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "lib".to_owned()
    } else {
        m.join("::")
    }
}

/// Checks the layout of the crate at `src` (named `own` in its paths)
/// against `floors`, bottom first; `must` are uses the scan has to see (an
/// empty graph would pass everything). Panics with every use against the
/// layout, and every circle.
pub fn check(src: &Path, own: &str, floors: Floors, must: &[(&str, &str)]) {
    let uses = uses(src, own);
    let print = std::env::var_os("TAPE_LAYOUT_PRINT").is_some();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut problems = Vec::new();
    for f in &files {
        let m = module_of(src, f);
        if floor(floors, &m).is_none() {
            problems.push(format!(
                "{}: on no floor: add its module to the floors",
                f.display()
            ));
        }
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for u in &uses {
        let (a, b) = (floor(floors, &u.from), floor(floors, &u.to));
        let file = file_of(src, &u.from).unwrap();
        let rel = file
            .strip_prefix(src.ancestors().nth(3).unwrap())
            .unwrap_or(&file)
            .display()
            .to_string();
        let floor_name = |f: Option<usize>| f.map_or("none", |f| floors[f].0);
        if print {
            println!(
                "{rel}:{} {} ({}) -> {} ({})",
                u.line,
                name(&u.from),
                floor_name(a),
                name(&u.to),
                floor_name(b)
            );
        }
        if let (Some(a), Some(b)) = (a, b) {
            if b > a {
                problems.push(format!(
                    "{rel}:{}: {} (floor {}) uses {} (floor {}), a floor above it",
                    u.line,
                    name(&u.from),
                    floors[a].0,
                    name(&u.to),
                    floors[b].0
                ));
            }
        }
        edges.entry(name(&u.from)).or_default().insert(name(&u.to));
    }
    for (from, to) in must {
        assert!(
            edges.get(*from).is_some_and(|t| t.contains(*to)),
            "{from} -> {to} not seen: {edges:?}"
        );
    }
    // No circle: a use `from -> to` where `to` reaches back to `from`.
    for (from, tos) in &edges {
        for to in tos {
            if let Some(back) = path_between(&edges, to, from) {
                problems.push(format!("a circle: {from} -> {}", back.join(" -> ")));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} against the layout:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A path of uses from `a` to `b`, if there is one.
fn path_between(
    edges: &BTreeMap<String, BTreeSet<String>>,
    a: &str,
    b: &str,
) -> Option<Vec<String>> {
    let mut came: BTreeMap<String, String> = BTreeMap::new();
    let mut todo = std::collections::VecDeque::from([a.to_owned()]);
    let mut seen = BTreeSet::from([a.to_owned()]);
    while let Some(u) = todo.pop_front() {
        if u == b {
            let mut path = vec![u.clone()];
            let mut at = u;
            while let Some(p) = came.get(&at) {
                path.push(p.clone());
                at = p.clone();
            }
            path.reverse();
            return Some(path);
        }
        for v in edges.get(&u).into_iter().flatten() {
            if seen.insert(v.clone()) {
                came.insert(v.clone(), u.clone());
                todo.push_back(v.clone());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scanner_reads_uses_as_rustc_does() {
        let toks = tokens("use crate::{a::{self, B}, c::d as e}; // crate::x\n let s = \"crate::y\"; r#\"crate::z\"#; 'a'; x::<'b>(); crate::f::g();");
        let mut paths = Vec::new();
        let end = use_tree(&toks, 1, &[], &mut paths);
        assert_eq!(
            paths,
            vec![
                vec!["crate", "a", "self"]
                    .into_iter()
                    .map(String::from)
                    .collect::<Vec<_>>(),
                vec!["crate", "a", "B"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
                vec!["crate", "c", "d"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
            ]
        );
        assert_eq!(toks[end].0, Tok::Punct(';'));
        let idents: Vec<&str> = toks
            .iter()
            .filter_map(|(t, _)| match t {
                Tok::Ident(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        assert!(!idents.contains(&"x") || idents.contains(&"f"));
        assert!(
            !idents.contains(&"y") && !idents.contains(&"z"),
            "{idents:?}"
        );
        assert_eq!(
            idents.iter().filter(|s| **s == "crate").count(),
            2,
            "{idents:?}"
        );
    }
}
