//! The latency snapshots a followed process saves, as its ring directory
//! lists them (`snapshots`, a path a line, appended whole by the program:
//! `tape::__consumer::shm::note_snapshot`), read as they come, each once.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use tape::__consumer::shm;

/// The list of one process, and how much of it was read.
pub struct SnapshotList {
    path: PathBuf,
    read: usize,
}

impl SnapshotList {
    /// The list of the process whose ring directory is `dir`.
    pub fn of(dir: &Path) -> SnapshotList {
        SnapshotList {
            path: dir.join(shm::SNAPSHOTS_FILE),
            read: 0,
        }
    }

    /// The snapshots listed since the last call (none when there is no
    /// list yet); a list that cannot be read (not this user's, a link,
    /// too long) is an error naming it.
    pub fn new_ones(&mut self) -> Result<Vec<PathBuf>, String> {
        let len = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => m.len() as usize,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", self.path.display())),
        };
        if len == self.read {
            return Ok(Vec::new());
        }
        let shrank = |now: usize| {
            // Shorter than what was read: not the list it was.
            format!(
                "{}: shrank from {} to {now} bytes",
                self.path.display(),
                self.read
            )
        };
        if len < self.read {
            return Err(shrank(len));
        }
        let bytes =
            shm::read_checked(&self.path, shm::SNAPSHOTS_FILE_MAX).map_err(|e| e.to_string())?;
        let Some(new) = bytes.get(self.read..) else {
            return Err(shrank(bytes.len()));
        };
        // Whole lines only (a line is appended by one write).
        let whole = new.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
        self.read += whole;
        Ok(new[..whole]
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| PathBuf::from(std::ffi::OsStr::from_bytes(l)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn each_snapshot_is_read_once_and_only_whole_lines() {
        let dir = std::env::temp_dir().join(format!("tape-snapshots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut list = SnapshotList::of(&dir);
        assert!(list.new_ones().unwrap().is_empty(), "no list yet");
        let mut f = std::fs::File::create(dir.join(shm::SNAPSHOTS_FILE)).unwrap();
        // (bytes appended, the snapshots then read)
        let steps: &[(&str, &[&str])] = &[
            ("/t/a-1\n", &["/t/a-1"]),
            ("", &[]),
            ("/t/a-2\n/t/b-1\n/t/ha", &["/t/a-2", "/t/b-1"]),
            ("lf-written\n", &["/t/half-written"]),
        ];
        for (bytes, want) in steps {
            f.write_all(bytes.as_bytes()).unwrap();
            let got = list.new_ones().unwrap();
            let want: Vec<PathBuf> = want.iter().map(PathBuf::from).collect();
            assert_eq!(got, want, "after {bytes:?}");
        }
        // a list replaced by a shorter one is an error, never a panic
        std::fs::write(dir.join(shm::SNAPSHOTS_FILE), "/x\n").unwrap();
        let e = list.new_ones().unwrap_err();
        assert!(e.contains("shrank"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
