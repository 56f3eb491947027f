//! The kernel's recent records of one CPU, kept in memory for a while
//! after they are written to the kernel trace: a latency snapshot of the
//! program, saved a few milliseconds after its window ends, gets the
//! kernel's events of that window from here
//! ([`super::KernelRecorder::write_window`]), as ftrace's latency tracers
//! keep the trace that led to the worst case.
//!
//! ```text
//!  blocks, oldest first, each up to BLOCK bytes (at most `max` blocks):
//!  [ time u64 | len u16 | len bytes of the record ] [ time | len | ... ] ...
//!  len = LOST: a loss of the kernel's, its count (u64) in place of a record
//! ```
//!
//! A block past the bound is forgotten whole, oldest first, and the time
//! up to which records were forgotten is kept: a window that reaches back
//! before it is said to be incomplete.

use std::collections::VecDeque;

/// Bytes of a block (a record of a 4 KiB page, at most, always fits).
const BLOCK: usize = 64 << 10;
/// The length that marks a loss rather than a record.
const LOST: u16 = u16::MAX;
/// A record's bytes before its data.
const HEAD: usize = 10;

/// One CPU's recent records.
pub struct Recent {
    blocks: VecDeque<Vec<u8>>,
    max_blocks: usize,
    /// The last time of the records forgotten (none yet: `None`).
    forgotten: Option<u64>,
    /// The time of the last record pushed (a loss is placed there).
    last: u64,
}

/// What a replay of a window finds: a record, or a loss of the kernel's.
pub enum Item<'a> {
    /// A record: its time and bytes.
    Record(u64, &'a [u8]),
    /// Events the kernel lost there.
    Lost(u64),
}

impl Recent {
    /// Keeps at most about `max_bytes` (one block at least).
    pub fn new(max_bytes: usize) -> Recent {
        Recent {
            blocks: VecDeque::new(),
            max_blocks: (max_bytes / BLOCK).max(1),
            forgotten: None,
            last: 0,
        }
    }

    fn room(&mut self, len: usize) -> &mut Vec<u8> {
        let fits = self
            .blocks
            .back()
            .is_some_and(|b| b.len() + HEAD + len <= BLOCK);
        if !fits {
            let block = if self.blocks.len() >= self.max_blocks {
                let mut old = self.blocks.pop_front().expect("max_blocks >= 1");
                self.forgotten = Some(self.forgotten.unwrap_or(0).max(last_time(&old)));
                old.clear();
                old
            } else {
                Vec::with_capacity(BLOCK)
            };
            self.blocks.push_back(block);
        }
        self.blocks.back_mut().expect("a block was pushed")
    }

    /// A record of the kernel's at `time` (at most a page's bytes: a longer
    /// one is not kept, as no page holds one).
    pub fn push(&mut self, time: u64, data: &[u8]) {
        let Ok(len) = u16::try_from(data.len()) else {
            return;
        };
        if len == LOST {
            return;
        }
        let b = self.room(data.len());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(data);
        self.last = time;
    }

    /// `n` events the kernel lost, after the last record pushed.
    pub fn push_lost(&mut self, n: u64) {
        let time = self.last;
        let b = self.room(8);
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&LOST.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
    }

    /// Whether records at or after `begin` may have been forgotten.
    pub fn forgot_since(&self, begin: u64) -> bool {
        self.forgotten.is_some_and(|f| f >= begin)
    }

    /// Each record and loss from `begin` to `end` (inclusive), in order.
    pub fn each_in(&self, begin: u64, end: u64, mut each: impl FnMut(Item<'_>)) {
        for b in &self.blocks {
            if b.is_empty() || last_time(b) < begin {
                continue;
            }
            for (time, len, data) in records(b) {
                if time > end {
                    return;
                }
                if time < begin {
                    continue;
                }
                each(match len {
                    LOST => Item::Lost(u64::from_le_bytes(data.try_into().expect("8"))),
                    _ => Item::Record(time, data),
                });
            }
        }
    }
}

/// A block's entries: (time, len, data).
fn records(b: &[u8]) -> impl Iterator<Item = (u64, u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = b.get(at..at + HEAD)?;
        let time = u64::from_le_bytes(head[..8].try_into().expect("8"));
        let len = u16::from_le_bytes(head[8..].try_into().expect("2"));
        let n = if len == LOST { 8 } else { usize::from(len) };
        let data = b.get(at + HEAD..at + HEAD + n)?;
        at += HEAD + n;
        Some((time, len, data))
    })
}

/// A block's last time (0 when empty).
fn last_time(b: &[u8]) -> u64 {
    records(b).last().map_or(0, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(r: &Recent, begin: u64, end: u64) -> Vec<String> {
        let mut out = Vec::new();
        r.each_in(begin, end, |item| {
            out.push(match item {
                Item::Record(t, d) => format!("{t}:{}", d.len()),
                Item::Lost(n) => format!("lost {n}"),
            })
        });
        out
    }

    #[test]
    fn a_window_gives_its_records_and_losses_in_order() {
        let mut r = Recent::new(1 << 20);
        for t in 1..=5u64 {
            r.push(t * 10, &vec![7u8; t as usize]);
            if t == 3 {
                r.push_lost(42);
            }
        }
        // (begin, end, what the window holds)
        let cases: &[(u64, u64, &[&str])] = &[
            (0, 100, &["10:1", "20:2", "30:3", "lost 42", "40:4", "50:5"]),
            (20, 30, &["20:2", "30:3", "lost 42"]),
            (31, 39, &[]),
            (50, 50, &["50:5"]),
            (60, 90, &[]),
        ];
        for (begin, end, want) in cases {
            assert_eq!(window(&r, *begin, *end), *want, "{begin}..={end}");
        }
        assert!(!r.forgot_since(0));
    }

    #[test]
    fn past_its_bound_the_oldest_block_is_forgotten_and_said() {
        let mut r = Recent::new(BLOCK * 2);
        let page = vec![1u8; 4000];
        // 16 records a block: 100 records make 7 blocks, 5 forgotten.
        for t in 0..100u64 {
            r.push(t, &page);
        }
        assert!(r.blocks.len() <= 2);
        let held = window(&r, 0, u64::MAX);
        assert!(held.len() <= 32 && held.len() >= 16, "{}", held.len());
        assert_eq!(held.last().unwrap(), "99:4000");
        let first: u64 = held[0].split(':').next().unwrap().parse().unwrap();
        assert!(r.forgot_since(first - 1) && !r.forgot_since(first));
        // a record longer than a page holds is not kept, never a panic
        r.push(100, &vec![0u8; 70_000]);
        assert_eq!(window(&r, 100, 100), Vec::<String>::new());
    }
}
