//! The text buffer written with wide stores, and the digit tables it
//! writes numbers with (see [`super::line`]'s module docs: "Wide stores",
//! "Digits").

/// Bytes zeroed at least when a [`TextBuf`] first grows (then it doubles):
/// a line head or a packet context made per packet stays small.
const GROW: usize = 256;

/// A text buffer written with wide stores (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct TextBuf {
    /// Initialized storage: `buf[..len]` is the text, the rest is room.
    buf: Vec<u8>,
    len: usize,
}

impl TextBuf {
    /// An empty buffer.
    pub fn new() -> TextBuf {
        TextBuf::default()
    }

    /// An empty buffer with room for `n` bytes (zeroed once, here).
    pub fn with_room(n: usize) -> TextBuf {
        TextBuf {
            buf: vec![0; n],
            len: 0,
        }
    }

    /// The length of the text.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the text is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the text (the room stays).
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Cuts the text to `n` bytes.
    #[inline]
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// The text.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The text, to patch in place.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let want = (self.len + n).max(self.buf.len() * 2).max(GROW);
        self.buf.resize(want, 0);
    }

    /// Stores the `N` bytes of `w` and counts the first `n <= N` of them
    /// (every caller's `n` is bounded so: a literal's length, a digit count).
    #[inline(always)]
    pub fn wide<const N: usize>(&mut self, w: &[u8; N], n: usize) {
        let at = self.len;
        // One comparison: `at + N` cannot wrap (`at` is within the buffer).
        loop {
            if let Some(dst) = self.buf.get_mut(at..at + N) {
                dst.copy_from_slice(w);
                break;
            }
            self.grow(N);
        }
        debug_assert!(n <= N, "{n} bytes counted of {N} stored");
        self.len = at + n;
    }

    /// Appends one byte.
    #[inline(always)]
    pub fn push(&mut self, c: u8) {
        self.wide(&[c], 1);
    }

    /// Appends `s`. Up to 16 bytes with two stores that overlap, longer
    /// ones with one copy.
    #[inline(always)]
    pub fn put(&mut self, s: &[u8]) {
        let n = s.len();
        if (8..=16).contains(&n) {
            let head: &[u8; 8] = s[..8].try_into().expect("8 bytes");
            let tail: &[u8; 8] = s[n - 8..].try_into().expect("8 bytes");
            self.wide(head, n - 8);
            self.wide(tail, 8);
        } else if (4..8).contains(&n) {
            let head: &[u8; 4] = s[..4].try_into().expect("4 bytes");
            let tail: &[u8; 4] = s[n - 4..].try_into().expect("4 bytes");
            self.wide(head, n - 4);
            self.wide(tail, 4);
        } else if n < 4 {
            for &c in s {
                self.push(c);
            }
        } else {
            self.put_long(s);
        }
    }

    fn put_long(&mut self, s: &[u8]) {
        let at = self.len;
        if at + s.len() > self.buf.len() {
            self.grow(s.len());
        }
        self.buf[at..at + s.len()].copy_from_slice(s);
        self.len = at + s.len();
    }

    /// Appends a literal piece.
    #[inline(always)]
    pub fn lit(&mut self, l: &Lit) {
        self.wide(&l.bytes, usize::from(l.len));
    }

    /// Appends `v < 10^8` in decimal: its eight digits (see [`eight`])
    /// less the leading zeros, counted as the zero bytes at the low end
    /// of the digits minus `'0'` (the last digit always kept).
    #[inline(always)]
    fn short_decimal(&mut self, v: u64) {
        let w = eight(v);
        let lead = ((w ^ 0x3030_3030_3030_3030) | 1 << 56).trailing_zeros() / 8;
        self.wide(&(w >> (8 * lead)).to_le_bytes(), 8 - lead as usize);
    }

    /// Appends `v` in decimal.
    #[inline(always)]
    pub fn decimal(&mut self, v: u64) {
        const E8: u64 = 100_000_000;
        if v < E8 {
            self.short_decimal(v);
        } else {
            self.long_decimal(v);
        }
    }

    #[inline(never)]
    fn long_decimal(&mut self, v: u64) {
        const E8: u64 = 100_000_000;
        if v < E8 * E8 {
            self.short_decimal(v / E8);
        } else {
            self.short_decimal(v / (E8 * E8));
            self.wide(&eight(v / E8).to_le_bytes(), 8);
        }
        self.wide(&eight(v).to_le_bytes(), 8);
    }

    /// Appends nine digits, zero padded (the nanoseconds of a time).
    #[inline]
    pub fn nine(&mut self, v: u64) {
        self.wide(&nine_word(v).to_le_bytes(), 9);
    }

    /// Appends `ns` as seconds, `S.nnnnnnnnn` (a delta between lines).
    #[inline]
    pub fn seconds(&mut self, ns: u64) {
        self.decimal(ns / 1_000_000_000);
        self.push(b'.');
        self.nine(ns);
    }
}

/// No literal text.
pub(super) const NO_TEXT: Lit = Lit {
    bytes: [0; 32],
    len: 0,
};

/// A literal piece of text of at most 32 bytes, stored whole.
#[derive(Clone, Copy, Debug)]
pub struct Lit {
    bytes: [u8; 32],
    pub(super) len: u8,
}

impl Lit {
    /// The literal `s` (at most 32 bytes).
    pub fn new(s: &[u8]) -> Lit {
        let mut bytes = [0u8; 32];
        bytes[..s.len()].copy_from_slice(s);
        Lit {
            bytes,
            len: s.len() as u8,
        }
    }

    /// `s` cut into literals.
    pub fn pieces(s: &[u8]) -> Vec<Lit> {
        s.chunks(32).map(Lit::new).collect()
    }
}

/// The eight ASCII digits of `v % 10^8`, zero padded, the first in the
/// low byte: three lookups in [`THREE`] (the divisions by 10^6 and 10^3
/// run side by side), put together in a register and stored at once.
///
/// ```text
///   v = 12345678 → 12 | 345 | 678 → "012" >> 8 | "345" << 16 | "678" << 40
/// ```
#[inline(always)]
pub(crate) fn eight(v: u64) -> u64 {
    let v = v % 100_000_000;
    let (hi, mid, lo) = (v / 1_000_000, v / 1000 % 1000, v % 1000);
    let t = |i: u64| u64::from(THREE[i as usize]);
    t(hi) >> 8 | t(mid) << 16 | t(lo) << 40
}

/// The nine digits of `v % 10^9`, zero padded, in the low 9 bytes of a
/// word, the first lowest: three lookups in [`THREE`], not a chain of
/// nine digits.
#[inline(always)]
pub(crate) fn nine_word(v: u64) -> u128 {
    let v = v % 1_000_000_000;
    let (hi, mid, lo) = (v / 1_000_000, v / 1000 % 1000, v % 1000);
    let t = |i: u64| u128::from(THREE[i as usize]);
    t(hi) | t(mid) << 24 | t(lo) << 48
}

/// The three digits of each number below 1,000 in the low bytes of a
/// word, the first lowest (`"007"`, `"123"`).
const THREE: [u32; 1000] = {
    let mut t = [0u32; 1000];
    let mut i = 0;
    while i < 1000 {
        let (a, b, c) = (i / 100, i / 10 % 10, i % 10);
        t[i] = (b'0' as u32 * 0x01_01_01) + (a | b << 8 | c << 16) as u32;
        i += 1;
    }
    t
};

/// Writes `d` ns, below 10 s, as `S.nnnnnnnnn` over `place[..11]` (the
/// delta between two lines). The deltas of a trace are mostly below a
/// microsecond: those take one lookup in `THREE`.
#[inline]
pub fn delta_into(place: &mut [u8], d: u64) {
    let Some(place) = place.first_chunk_mut::<11>() else {
        return;
    };
    if let Some(&three) = THREE.get(d as usize) {
        place[..8].copy_from_slice(b"0.000000");
        place[8..].copy_from_slice(&three.to_le_bytes()[..3]);
    } else {
        place[0] = b'0' + (d / 1_000_000_000 % 10) as u8;
        place[1] = b'.';
        place[2..].copy_from_slice(&nine_word(d).to_le_bytes()[..9]);
    }
}
