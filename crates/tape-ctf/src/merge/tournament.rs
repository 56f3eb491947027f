//! A tournament of loser trees: picks, among `n` streams, the one whose
//! next record has the least key, in `log2 n` comparisons per record.
//!
//! The streams play a knock-out tournament. Each inner node keeps the
//! stream that lost the match played there; node 0 keeps the overall
//! winner. When the winner's key changes (its stream moved on to its next
//! record), only the matches on its path to the root are played again,
//! against the losers stored there: two for four streams, where a scan
//! compares four keys and a binary heap pops and pushes.
//!
//! ```text
//!   keys:    s0=40  s1=10  s2=30  s3=20        (leaves, n padded to a power of two)
//!
//!   node 0:  s1                 winner
//!   node 1:  s3                 lost the final (s1 vs s3)
//!   node 2:  s0   node 3:  s2   lost the first round (s0 vs s1, s2 vs s3)
//!
//!   s1 moves on to key 50: replay s1's path, node 2 (vs s0: s0 wins,
//!   s1 stays), node 1 (s0 vs s3: s3 wins, s0 stays): winner s3.
//! ```
//!
//! Ties go to the lower stream index, so equal keys come out in stream
//! order. A stream with no record left has the key `i128::MAX` (a key
//! never equals it: record times are at most `u64::MAX` cycles past an
//! offset), and loses every match.

/// The key of a stream with no record left.
pub(crate) const DONE: i128 = i128::MAX;

/// A stream's key and index: entries compare by key, then index.
type Entry = (i128, usize);

/// A loser tree over the keys of `n` streams (see the module docs).
pub(crate) struct LoserTree {
    /// `tree[0]`: the winner; `tree[k]`, `k >= 1`: the loser at node `k`,
    /// whose children are nodes `2k` and `2k + 1` (leaf `i` is node
    /// `leaves + i`; leaves past `n` are padding, always [`DONE`]). Each
    /// entry carries its key, so that a match reads one node.
    tree: Vec<Entry>,
}

impl LoserTree {
    /// A tree over `n` streams, every one [`DONE`] until keys are set.
    pub(crate) fn new(n: usize) -> LoserTree {
        let mut t = LoserTree {
            tree: vec![(DONE, 0); n.max(1).next_power_of_two()],
        };
        t.set_all([]);
        t
    }

    /// The stream with the least key, `None` when every stream is done.
    #[inline]
    pub(crate) fn winner(&self) -> Option<usize> {
        let (key, w) = self.tree[0];
        (key != DONE).then_some(w)
    }

    /// Sets the key of stream `i`, the winner ([`DONE`] when it has no
    /// record left), and replays its matches. (Keys set at the start go
    /// through [`LoserTree::set_all`].)
    #[inline]
    pub(crate) fn set(&mut self, i: usize, key: i128) {
        let mut w = (key, i);
        let mut k = (self.tree.len() + i) / 2;
        while k >= 1 {
            if let Some(node) = self.tree.get_mut(k) {
                if *node < w {
                    std::mem::swap(node, &mut w);
                }
            }
            k /= 2;
        }
        self.tree[0] = w;
    }

    /// Sets the keys of the streams given (the others are [`DONE`]), then
    /// plays every match.
    pub(crate) fn set_all(&mut self, keys: impl IntoIterator<Item = (usize, i128)>) {
        let leaves = self.tree.len();
        // The winner of each node, bottom up; leaf `i` is node `leaves + i`.
        let mut wins: Vec<Entry> = (0..2 * leaves).map(|j| (DONE, j % leaves)).collect();
        for (i, key) in keys {
            wins[leaves + i].0 = key;
        }
        for k in (1..leaves).rev() {
            let (a, b) = (wins[2 * k], wins[2 * k + 1]);
            wins[k] = a.min(b);
            self.tree[k] = a.max(b);
        }
        self.tree[0] = wins[1];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merges `streams` (each sorted) through the tree: (key, stream)
    /// pairs in the order picked.
    fn merged(streams: &[Vec<i128>]) -> Vec<(i128, usize)> {
        let mut t = LoserTree::new(streams.len());
        let mut at = vec![0; streams.len()];
        t.set_all(
            streams
                .iter()
                .enumerate()
                .map(|(i, s)| (i, s.first().copied().unwrap_or(DONE))),
        );
        let mut out = Vec::new();
        while let Some(i) = t.winner() {
            out.push((streams[i][at[i]], i));
            at[i] += 1;
            t.set(i, streams[i].get(at[i]).copied().unwrap_or(DONE));
        }
        out
    }

    #[test]
    fn picks_as_a_stable_sort_does() {
        // Streams of every count up to 9 (powers of two and not), with
        // ties within and across streams, and empty streams.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m) as i128
        };
        for n in 0..=9 {
            for round in 0..50 {
                let streams: Vec<Vec<i128>> = (0..n)
                    .map(|_| {
                        let len = rand(if round % 5 == 0 { 2 } else { 40 }) as usize;
                        let mut s: Vec<i128> = (0..len).map(|_| rand(30) - 10).collect();
                        s.sort();
                        s
                    })
                    .collect();
                let mut want: Vec<(i128, usize)> = streams
                    .iter()
                    .enumerate()
                    .flat_map(|(i, s)| s.iter().map(move |&k| (k, i)))
                    .collect();
                want.sort(); // by key, then stream: each stream's own order kept
                assert_eq!(merged(&streams), want, "{streams:?}");
            }
        }
    }

    #[test]
    fn extreme_keys() {
        let streams = vec![vec![i128::MIN, 0, DONE - 1], vec![i128::MIN, DONE - 1]];
        assert_eq!(
            merged(&streams),
            [
                (i128::MIN, 0),
                (i128::MIN, 1),
                (0, 0),
                (DONE - 1, 0),
                (DONE - 1, 1)
            ]
        );
    }
}
