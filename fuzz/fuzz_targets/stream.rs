//! The stream decoder on arbitrary stream bytes, for an LTTng-like
//! metadata (compact headers, variants, sequences, strings, several
//! streams): every input decodes to values or an error, never a panic or
//! a hang.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

/// Shared with the corpus replay test in `crates/tape-ctf/tests/it/fuzz_corpus.rs`.
const METADATA: &str = include_str!("../stream-metadata.tsdl");

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("tape-fuzz-stream-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("metadata"), METADATA).unwrap();
        d
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let d = dir();
    std::fs::write(d.join("stream"), data).unwrap();
    let traces = tape_ctf::metadata::read::find_traces(d).unwrap();
    for r in tape_ctf::merge::events(&traces).unwrap().take(100_000) {
        if r.is_err() {
            break;
        }
    }
});
