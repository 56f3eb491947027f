//! Replays the cargo-fuzz corpus (`fuzz/corpus/`, inputs that reached new
//! code while fuzzing) through the same code as the fuzz targets, so every
//! input the fuzzers kept stays a regression test: an error or values,
//! never a panic.

use std::path::{Path, PathBuf};

fn corpus(name: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn metadata_corpus() {
    let files = corpus("metadata");
    assert!(!files.is_empty());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if let Ok((text, _)) = tape_ctf::metadata::metadata_text(&data) {
            if let Ok(parsed) = tape_ctf::parse_metadata(&text) {
                let _ = tape_ctf::validate(&parsed.trace);
                let _ = tape_ctf::decode::TracePlan::new(&parsed.trace);
            }
        }
    }
    eprintln!("{} metadata inputs replayed", files.len());
}

#[test]
fn stream_corpus() {
    let files = corpus("stream");
    assert!(!files.is_empty());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fuzz-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let meta = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/stream-metadata.tsdl");
    std::fs::copy(meta, dir.join("metadata")).unwrap();
    let mut decoded = 0;
    for f in &files {
        std::fs::copy(f, dir.join("stream")).unwrap();
        let traces = tape_ctf::metadata::find_traces(&dir).expect("the fuzz metadata is valid");
        for r in tape_ctf::merge::events(&traces).unwrap().take(100_000) {
            match r {
                Ok(_) => decoded += 1,
                Err(_) => break,
            }
        }
    }
    eprintln!(
        "{} stream inputs replayed, {decoded} records decoded",
        files.len()
    );
}
