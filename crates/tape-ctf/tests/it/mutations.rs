//! Bad input never crashes: real traces (the DPDK and LTTng samples, and
//! the ctf-testsuite's passing traces) mutated at random — bit flips, byte
//! overwrites, truncations, insertions — then parsed and decoded to the end.
//! Every run must end in values or an error, never a panic or a hang. The
//! generator is seeded, and a failure prints the seed and the case.
//!
//! This is the always-on, deterministic companion of the cargo-fuzz targets
//! in `fuzz/`.

use crate::shared;

use crate::mutate;
use mutate::{mutate, Rng};

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn suites() -> Option<PathBuf> {
    shared::suite("")
}

/// Trace directories to mutate.
fn corpus(root: &Path) -> Vec<PathBuf> {
    let mut v = vec![
        root.join("samples/dpdk/overwrite/ctf"),
        root.join("samples/lttng/snapshot/trace/snapshot-1-20261121-200353-0/ust/uid/0/64-bit"),
        root.join("samples/lttng/discard/trace/ust/uid/0/64-bit"),
    ];
    let pass = root.join("ctf-testsuite/tests/1.8/regression/stream/pass");
    if let Ok(rd) = std::fs::read_dir(&pass) {
        let mut dirs: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        dirs.sort();
        v.extend(dirs);
    }
    v.retain(|d| d.join("metadata").is_file());
    v
}

/// Decodes a trace to the end (at most `limit` records).
fn decode_all(dir: &Path, limit: usize) {
    let Ok(traces) = tape_ctf::metadata::find_traces(dir) else {
        return;
    };
    let Ok(iter) = tape_ctf::merge::events(&traces) else {
        return;
    };
    for r in iter.take(limit) {
        if r.is_err() {
            break;
        }
    }
}

#[test]
fn mutated_traces_never_crash() {
    let Some(root) = suites() else {
        return;
    };
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mutations-{}", std::process::id()));
    let mut rng = Rng(0x7a9e_5eed_1234_5678);
    let mut runs = 0;
    for dir in corpus(&root) {
        let meta = std::fs::read(dir.join("metadata")).unwrap();
        let streams: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file() && e.file_name() != "metadata")
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        let rounds: usize = std::env::var("TAPE_MUTATION_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(24);
        for round in 0..rounds {
            let seed = rng.0;
            let mut m = meta.clone();
            let mut s = streams.clone();
            // Mutate the metadata a third of the time, the streams always.
            if round % 3 == 0 {
                mutate(&mut rng, &mut m);
            }
            for (_, bytes) in s.iter_mut() {
                mutate(&mut rng, bytes);
            }
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).unwrap();
            std::fs::write(work.join("metadata"), &m).unwrap();
            for (name, bytes) in &s {
                std::fs::write(work.join(name), bytes).unwrap();
            }
            // The metadata parser alone, then the whole reader.
            let text = String::from_utf8_lossy(&m).into_owned();
            let r = catch_unwind(AssertUnwindSafe(|| {
                let _ = tape_ctf::parse_metadata(&text);
                decode_all(&work, 200_000);
            }));
            assert!(
                r.is_ok(),
                "panic on a mutation of {} (seed {seed:#x}, round {round})",
                dir.display()
            );
            runs += 1;
        }
    }
    eprintln!("{runs} mutated traces decoded without a panic");
    assert!(runs > 100, "only {runs} runs");
}
