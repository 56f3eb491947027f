//! Symbolising the return addresses of `tape.stacktrace` events: the
//! function that contains each address, from the symbol table of the
//! executable the trace names (`tape_exe`), demangled.
//!
//! Only the executable is read (addresses in shared libraries stay
//! numbers), and only if its GNU build id is the one recorded: a binary
//! rebuilt since the trace was taken would name the wrong functions, so it
//! names none and `tape` says why, once. The table is read with the
//! `object` crate (ELF `.symtab`, else `.dynsym`); no DWARF is needed for
//! function names.

use std::collections::HashMap;
use std::path::Path;

use object::{Object, ObjectSymbol, SymbolKind};
use tape_ctf::metadata::Executable;

/// Functions of one executable, by address.
struct Table {
    /// (start, end, demangled name), sorted by start.
    functions: Vec<(u64, u64, String)>,
}

/// Loaded tables, and the reasons some could not be used.
#[derive(Default)]
pub struct Symbols {
    tables: HashMap<Executable, Option<Table>>,
    /// Why an executable was not used, said once each.
    pub warnings: Vec<String>,
}

impl Symbols {
    /// The function containing return address `addr` of `exe`'s process.
    pub fn name(&mut self, exe: &Executable, addr: u64) -> Option<String> {
        if !self.tables.contains_key(exe) {
            let t = match load(exe) {
                Ok(t) => Some(t),
                Err(why) => {
                    self.warnings.push(format!(
                        "stack traces of {} are not symbolised: {why}",
                        exe.path
                    ));
                    None
                }
            };
            self.tables.insert(exe.clone(), t);
        }
        let table = self.tables.get(exe)?.as_ref()?;
        // A return address is just past its call: look up the byte before
        // (a call at a function's very end returns into the next one).
        let at = addr.checked_sub(exe.base)?.checked_sub(1)?;
        let i = table.functions.partition_point(|f| f.0 <= at);
        let (start, end, name) = table.functions.get(i.checked_sub(1)?)?;
        (*start <= at && at < *end).then(|| name.clone())
    }
}

fn load(exe: &Executable) -> Result<Table, String> {
    let data = std::fs::read(Path::new(&exe.path)).map_err(|e| format!("cannot read it: {e}"))?;
    let file = object::File::parse(&*data).map_err(|e| format!("not an object file: {e}"))?;
    let id = file
        .build_id()
        .ok()
        .flatten()
        .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
        .unwrap_or_default();
    if id != exe.build_id {
        return Err(format!(
            "its build id is {} where the trace recorded {} (rebuilt since?)",
            if id.is_empty() { "none" } else { &id },
            if exe.build_id.is_empty() {
                "none"
            } else {
                &exe.build_id
            }
        ));
    }
    let mut functions: Vec<(u64, u64, String)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        // Sized functions only: `_fini` and other markers would claim every
        // address past the executable's code (shared libraries').
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0 && s.size() > 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            Some((
                s.address(),
                s.address() + s.size(),
                format!("{:#}", rustc_demangle::demangle(name)),
            ))
        })
        .collect();
    if functions.is_empty() {
        return Err("it has no symbol table (stripped?)".into());
    }
    functions.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    functions.dedup_by_key(|f| f.0);
    Ok(Table { functions })
}
