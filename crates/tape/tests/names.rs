//! Field names a `tracepoint!` may have (issue 47): Rust's Unicode
//! identifiers (`größe`), raw identifiers (`r#type`), CTF keywords
//! (`event`, `r#struct`), a leading `_`, next to a slice and an `Option`
//! (whose lengths and tags tape names itself). babeltrace2 and babeltrace
//! 1.5 read the trace and print what tape's reader prints; the decoded
//! values carry the names as declared.

mod common;

use common::{read_clean, Reader};

tape::tracepoint! {
    pub fn named(
        größe: u32, r#type: u8, event: u16, r#struct: u8, _x: u8, ids: &[u8], opt: Option<u8>,
        中文: &str
    ) = "test.names.unicode";
}

#[test]
fn declared_names_reach_every_reader() {
    let dir = std::env::temp_dir().join(format!("tape-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    tape::Config::new()
        .dir(&dir)
        .control(false)
        .shared_rings(false)
        .enable("test.names.*")
        .init()
        .expect("init")
        .disarm();
    named(7, 1, 2, 3, 4, &[5, 6], Some(8), "zh");
    let trace = tape::save().expect("save");
    let tape_text = read_clean(Reader::Tape, &trace).expect("tape reads it");
    assert!(
        tape_text.contains("gr_f6__df_e = 7, type = 1, event = 2, struct = 3, _x = 4"),
        "{tape_text}"
    );
    for reader in [Reader::Bt2, Reader::Bt1] {
        if let Some(text) = read_clean(reader, &trace) {
            assert_eq!(
                common::events(&text).len(),
                1,
                "{} read {text}",
                reader.command()
            );
            if reader == Reader::Bt2 {
                let payload = |t: &str| t.split("}, {").last().unwrap_or_default().to_owned();
                assert_eq!(payload(&text), payload(&tape_text));
            }
        }
    }
    // The values, named as declared.
    let traces = tape_ctf::metadata::find_traces(&trace).unwrap();
    let mut names = Vec::new();
    for r in tape_ctf::merge::events(&traces).unwrap() {
        if let tape_ctf::merge::Record::Event(e) = r.unwrap() {
            if let tape_ctf::Value::Struct(fields) = e.payload() {
                names = fields.iter().map(|(n, _)| n.clone()).collect();
            }
        }
    }
    assert_eq!(
        names,
        [
            "größe", "type", "event", "struct", "_x", "_ids_len", "ids", "_opt_tag", "opt", "中文"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
