//! Seeded random mutations of trace files: bit flips, byte overwrites,
//! truncations, insertions, 8-byte values, swaps.

/// A seeded xorshift64* generator.
pub struct Rng(pub u64);

impl Rng {
    /// The next number (an endless generator, not an iterator: the
    /// name is the generator's word).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four random mutations of `data`.
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        data.push(rng.next() as u8);
        return;
    }
    for _ in 0..1 + rng.below(4) {
        let i = rng.below(data.len());
        match rng.below(6) {
            0 => data[i] ^= 1 << rng.below(8),
            1 => data[i] = rng.next() as u8,
            2 => data.truncate(i),
            3 => data.insert(i, rng.next() as u8),
            4 => {
                // An 8-byte little-endian value: sizes, lengths, ids.
                let v = match rng.below(3) {
                    0 => u64::MAX,
                    1 => rng.next(),
                    _ => rng.next() % 4096,
                };
                for (k, b) in v.to_le_bytes().iter().enumerate() {
                    if let Some(x) = data.get_mut(i + k) {
                        *x = *b;
                    }
                }
            }
            _ => {
                let j = rng.below(data.len());
                data.swap(i, j);
            }
        }
        if data.is_empty() {
            return;
        }
    }
}
