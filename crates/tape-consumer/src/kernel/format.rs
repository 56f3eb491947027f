//! What the kernel says of its own records: an event's `format` file
//! (`events/SYSTEM/EVENT/format`) and the page header (`events/header_page`),
//! parsed, never assumed: field offsets and sizes move between kernels.
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//!     field:unsigned short common_type;  offset:0;  size:2;  signed:0;   } common fields,
//!     field:int common_pid;              offset:4;  size:4;  signed:1;   } every record
//!
//!     field:char prev_comm[16];          offset:8;  size:16; signed:0;   } the event's own
//!     field:pid_t prev_pid;              offset:24; size:4;  signed:1;
//!     field:__data_loc char[] filename;  offset:8;  size:4;  signed:0;   (u32: len << 16 | offset)
//!
//! print fmt: "prev_comm=%s ...", REC->prev_comm, ...
//! ```
//!
//! A field's declared C type is a hint only (`int dfd` of a syscall has
//! `size:8`); its size, offset and sign are what the record holds.

/// How a field's bytes are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer of the field's size (1, 2, 4 or 8 bytes), shown in
    /// hexadecimal when `hex` (a pointer).
    Int {
        /// A pointer: shown in hexadecimal.
        hex: bool,
    },
    /// `char name[N]`: text of at most N bytes, NUL-padded.
    Text,
    /// `TYPE name[N]` of another element: N integers of `size / N` bytes.
    Array {
        /// How many elements.
        count: usize,
    },
    /// `__data_loc char[]` (`__rel_loc` when `relative`: its offset counts
    /// from the end of the field): a string kept after the fixed fields.
    DynText {
        /// `__rel_loc`.
        relative: bool,
    },
    /// `__data_loc TYPE[]` of another element: bytes kept after the fixed
    /// fields.
    DynBytes {
        /// `__rel_loc`.
        relative: bool,
    },
}

/// One field of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldFormat {
    /// The field's name.
    pub name: String,
    /// The C type as the format file declares it.
    pub ctype: String,
    /// Its offset in the record (from `common_type`).
    pub offset: usize,
    /// Its bytes in the record.
    pub size: usize,
    /// Whether the kernel says it is signed.
    pub signed: bool,
    /// How its bytes are read.
    pub kind: Kind,
}

/// An event's format: its id (the record's `common_type`), its own fields
/// (the common ones apart) and where the writing task's pid is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// Its subsystem (`sched`).
    pub system: String,
    /// Its name (`sched_switch`).
    pub name: String,
    /// Its ID.
    pub id: u16,
    /// Its own fields, in order.
    pub fields: Vec<FieldFormat>,
    /// `common_pid`'s offset (the task, a thread id, that wrote it).
    pub pid_offset: usize,
}

/// Parses one `format` file's `text` (`path` names it in errors).
pub fn parse_format(system: &str, path: &str, text: &str) -> Result<Format, String> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    let mut pid_offset = None;
    for (n, line) in text.lines().enumerate() {
        let at = |why: String| format!("{path}:{}: {why}", n + 1);
        let line = line.trim();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("ID:") {
            id = Some(
                v.trim()
                    .parse::<u16>()
                    .map_err(|e| at(format!("ID {:?}: {e}", v.trim())))?,
            );
        } else if line.starts_with("field:") {
            let f = parse_field(line).map_err(at)?;
            if f.name.starts_with("common_") {
                if f.name == "common_pid" {
                    if f.size != 4 {
                        return Err(at(format!("common_pid of {} bytes, not 4", f.size)));
                    }
                    pid_offset = Some(f.offset);
                }
            } else {
                fields.push(f);
            }
        } else if line.starts_with("print fmt:") {
            break;
        }
    }
    Ok(Format {
        system: system.to_owned(),
        name: name.ok_or_else(|| format!("{path}: no `name:` line"))?,
        id: id.ok_or_else(|| format!("{path}: no `ID:` line"))?,
        fields,
        pid_offset: pid_offset.ok_or_else(|| format!("{path}: no common_pid field"))?,
    })
}

/// `field:TYPE NAME[LEN];\toffset:N;\tsize:N;\tsigned:B;`
fn parse_field(line: &str) -> Result<FieldFormat, String> {
    let mut parts = line.split(';').map(str::trim);
    let decl = parts
        .next()
        .and_then(|d| d.strip_prefix("field:"))
        .ok_or_else(|| format!("{line:?}: not a field line"))?
        .trim();
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for p in parts {
        let Some((k, v)) = p.split_once(':') else {
            continue;
        };
        let num = || {
            v.trim()
                .parse::<usize>()
                .map_err(|e| format!("{line:?}: {k} {v:?}: {e}"))
        };
        match k.trim() {
            "offset" => offset = Some(num()?),
            "size" => size = Some(num()?),
            "signed" => signed = num()? != 0,
            _ => {}
        }
    }
    let offset = offset.ok_or_else(|| format!("{line:?}: no offset"))?;
    let size = size.ok_or_else(|| format!("{line:?}: no size"))?;
    // The name is the last word of the declaration, with its `[LEN]`.
    let (ctype, word) = decl
        .rsplit_once(|c: char| c.is_whitespace() || c == '*')
        .map(|(t, w)| (&decl[..t.len() + 1], w))
        .ok_or_else(|| format!("{line:?}: no type before the field's name"))?;
    let ctype = ctype.trim().to_owned();
    let (name, len) = match word.split_once('[') {
        Some((n, rest)) => (n, Some(rest.trim_end_matches(']'))),
        None => (word, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "{line:?}: field name {name:?} is not a C identifier"
        ));
    }
    let dynamic = ctype.starts_with("__data_loc") || ctype.starts_with("__rel_loc");
    let relative = ctype.starts_with("__rel_loc");
    let kind = if dynamic {
        if size != 4 {
            return Err(format!("{line:?}: a dynamic field of {size} bytes, not 4"));
        }
        if ctype.contains("char") {
            Kind::DynText { relative }
        } else {
            Kind::DynBytes { relative }
        }
    } else if let Some(len) = len {
        let count: usize = len
            .parse()
            .map_err(|e| format!("{line:?}: array length {len:?}: {e}"))?;
        if count == 0 || size % count != 0 {
            return Err(format!(
                "{line:?}: {size} bytes are not {count} equal elements"
            ));
        }
        let element = size / count;
        if element == 1 && ctype.contains("char") {
            Kind::Text
        } else if matches!(element, 1 | 2 | 4 | 8) {
            Kind::Array { count }
        } else {
            Kind::Array { count: size }
        }
    } else if matches!(size, 1 | 2 | 4 | 8) {
        Kind::Int {
            hex: ctype.contains('*'),
        }
    } else {
        // A struct or other blob: its bytes, as an array of bytes.
        Kind::Array { count: size }
    };
    Ok(FieldFormat {
        name: name.to_owned(),
        ctype,
        offset,
        size,
        signed,
        kind,
    })
}

/// Where a page's parts are (`events/header_page`): its base time, its
/// commit word (bytes of data, with the missed-events flags in its high
/// bits) and its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLayout {
    /// The base time's offset.
    pub timestamp: usize,
    /// The commit word's offset.
    pub commit: usize,
    /// Its size (8 on a 64-bit kernel).
    pub commit_size: usize,
    /// The records' offset.
    pub data: usize,
    /// The page's whole size (the data's offset and size).
    pub size: usize,
}

/// Parses `events/header_page`.
pub fn parse_header_page(path: &str, text: &str) -> Result<PageLayout, String> {
    let mut ts = None;
    let mut commit = None;
    let mut data = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with("field:") {
            continue;
        }
        let f = parse_field(line).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        match f.name.as_str() {
            "timestamp" => ts = Some((f.offset, f.size)),
            "commit" => commit = Some((f.offset, f.size)),
            "data" => data = Some((f.offset, f.size)),
            _ => {}
        }
    }
    let (ts, ts_size) = ts.ok_or_else(|| format!("{path}: no timestamp field"))?;
    let (commit, commit_size) = commit.ok_or_else(|| format!("{path}: no commit field"))?;
    let (data, data_size) = data.ok_or_else(|| format!("{path}: no data field"))?;
    if ts_size != 8 || !matches!(commit_size, 4 | 8) || data < commit + commit_size {
        return Err(format!(
            "{path}: a page layout this reader does not know (timestamp {ts_size} bytes, \
             commit {commit_size} bytes at {commit}, data at {data})"
        ));
    }
    Ok(PageLayout {
        timestamp: ts,
        commit,
        commit_size,
        data,
        size: data + data_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\n\
print fmt: \"prev_comm=%s\", REC->prev_comm\n";

    #[test]
    fn a_format_file_gives_the_id_the_own_fields_and_the_pid() {
        let f = parse_format("sched", "f", SCHED_SWITCH).unwrap();
        assert_eq!(
            (f.name.as_str(), f.id, f.pid_offset),
            ("sched_switch", 372, 4)
        );
        let got: Vec<_> = f
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.offset, f.size, f.signed, f.kind.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("prev_comm", 8, 16, false, Kind::Text),
                ("prev_pid", 24, 4, true, Kind::Int { hex: false }),
                ("prev_state", 32, 8, true, Kind::Int { hex: false }),
            ]
        );
    }

    #[test]
    fn field_lines_by_their_kind() {
        let cases: &[(&str, &str, Kind, usize)] = &[
            (
                "field:int dfd;\toffset:16;\tsize:8;\tsigned:0;",
                "dfd",
                Kind::Int { hex: false },
                8,
            ),
            (
                "field:const char * filename;\toffset:24;\tsize:8;\tsigned:0;",
                "filename",
                Kind::Int { hex: true },
                8,
            ),
            (
                "field:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;",
                "filename",
                Kind::DynText { relative: false },
                4,
            ),
            (
                "field:__rel_loc char[] name;\toffset:8;\tsize:4;\tsigned:0;",
                "name",
                Kind::DynText { relative: true },
                4,
            ),
            (
                "field:__data_loc unsigned long[] ips;\toffset:8;\tsize:4;\tsigned:0;",
                "ips",
                Kind::DynBytes { relative: false },
                4,
            ),
            (
                "field:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;",
                "args",
                Kind::Array { count: 6 },
                48,
            ),
            (
                "field:u16 pair[3];\toffset:16;\tsize:6;\tsigned:0;",
                "pair",
                Kind::Array { count: 3 },
                6,
            ),
            (
                "field:u8 blob[4];\toffset:16;\tsize:12;\tsigned:0;",
                "blob",
                Kind::Array { count: 12 },
                12,
            ),
            (
                "field:struct foo thing;\toffset:16;\tsize:12;\tsigned:0;",
                "thing",
                Kind::Array { count: 12 },
                12,
            ),
        ];
        for (line, name, kind, size) in cases {
            let f = parse_field(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(
                (f.name.as_str(), &f.kind, f.size),
                (*name, kind, *size),
                "{line}"
            );
        }
    }

    #[test]
    fn bad_format_files_are_errors_naming_the_line() {
        let cases: &[(&str, &str)] = &[
            ("name: x\nID: 99999\n", "f:2: ID"),
            ("name: x\nID: 1\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:int;\toffset:x;\tsize:4;\n", "f:4:"),
            ("name: x\nID: 1\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:char a[0];\toffset:8;\tsize:4;\tsigned:0;\n", "f:4:"),
            ("name: x\nID: 1\n", "no common_pid"),
            ("ID: 1\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n", "no `name:`"),
            ("name: x\nID: 1\n\tfield:__data_loc char[] s;\toffset:8;\tsize:8;\tsigned:0;\n", "f:3: "),
        ];
        for (text, want) in cases {
            let e = parse_format("s", "f", text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_page_header_as_this_kernel_prints_it() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        let l = parse_header_page("h", text).unwrap();
        assert_eq!(
            l,
            PageLayout {
                timestamp: 0,
                commit: 8,
                commit_size: 8,
                data: 16,
                size: 4096
            }
        );
        assert!(
            parse_header_page("h", "field: u64 timestamp; offset:0; size:8; signed:0;\n")
                .unwrap_err()
                .contains("no commit")
        );
    }
}
