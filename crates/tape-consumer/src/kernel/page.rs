//! One page of ftrace's ring buffer as `trace_pipe_raw` hands it: its
//! records, each with its time, and what the kernel lost before it.
//!
//! ```text
//!  page (layout from events/header_page; 4096 bytes here)
//!  +-----------+----------------------+---------------------------------+------------+
//!  | timestamp | commit               | records ...                     | [missed]   |
//!  | u64 base  | bytes of data,       |                                 | u64, when  |
//!  |           | bit 31: events lost, |                                 | bit 30 set |
//!  |           | bit 30: count stored |                                 |            |
//!  +-----------+----------------------+---------------------------------+------------+
//!
//!  record: u32 word, little-endian: type_len (5 bits) | time_delta (27 bits) << 5
//!   type_len 1..=28  data of type_len * 4 bytes follows        time += delta
//!   type_len 0       u32 length + 4, then the data              time += delta
//!   29  padding      u32 length + 4 (delta 0: the page ends)    time += delta
//!   30  time extend  u32 high bits: time += delta | hi << 27
//!   31  time stamp   u32 high bits: time = delta | hi << 27 (top bits from the page)
//! ```
//!
//! (`kernel/trace/ring_buffer.c`; libtraceevent's `kbuffer-parse.c` reads
//! it the same way.) Written by hand: no crate reads ftrace's raw pages,
//! and the format is these few lines.

use super::format::PageLayout;

const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
/// The bits an absolute time stamp record does not hold (`TS_MSB`).
const TS_MSB: u64 = 0xf8 << 56;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 30) - 1;

/// What the kernel lost before a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// Nothing.
    None,
    /// This many events.
    Count(u64),
    /// Some, not counted (no room on the page for the count).
    Unknown,
}

/// A page that does not read as the layout says: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset in the page.
    pub at: usize,
    /// What is wrong there.
    pub why: String,
}

/// A page's records: each record's time and data handed to `each`, in
/// order; returns what was lost before the page. A damaged page's records
/// before the damage are handed, then the damage is returned.
pub fn read_page<'p>(
    layout: &PageLayout,
    page: &'p [u8],
    mut each: impl FnMut(u64, &'p [u8]),
) -> Result<Missed, Damage> {
    let damage = |at: usize, why: String| Damage { at, why };
    if page.len() < layout.data {
        return Err(damage(
            0,
            format!("{} bytes: shorter than a page header", page.len()),
        ));
    }
    let mut time = u64::from_le_bytes(page[layout.timestamp..][..8].try_into().expect("8"));
    let commit_word = match layout.commit_size {
        8 => u64::from_le_bytes(page[layout.commit..][..8].try_into().expect("8")),
        _ => u64::from(u32::from_le_bytes(
            page[layout.commit..][..4].try_into().expect("4"),
        )),
    };
    let len = (commit_word & COMMIT_MASK) as usize;
    let data = page.get(layout.data..layout.data + len).ok_or_else(|| {
        damage(
            layout.commit,
            format!(
                "commit says {len} bytes of data, the page holds {}",
                page.len().saturating_sub(layout.data)
            ),
        )
    })?;
    let missed = if commit_word & MISSED_EVENTS == 0 {
        Missed::None
    } else if commit_word & MISSED_STORED != 0 {
        let at = layout.data + len;
        match page.get(at..at + 8) {
            Some(b) => Missed::Count(u64::from_le_bytes(b.try_into().expect("8"))),
            None => {
                return Err(damage(
                    at,
                    "the missed-events count is past the page".into(),
                ))
            }
        }
    } else {
        Missed::Unknown
    };
    let word = |at: usize| -> Result<u32, Damage> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
            .ok_or_else(|| {
                damage(
                    layout.data + at,
                    "a record cut by the end of the data".into(),
                )
            })
    };
    let mut at = 0;
    while at < data.len() {
        let head = word(at)?;
        let (type_len, delta) = (head & 0x1f, u64::from(head >> 5));
        match type_len {
            PADDING => {
                if delta == 0 {
                    // The rest of the page is unused.
                    break;
                }
                // A discarded record (its delta kept, as libtraceevent
                // reads it: the next record's delta counts from it).
                let n = word(at + 4)? as usize;
                if n < 4 {
                    return Err(damage(layout.data + at, format!("a padding of length {n}")));
                }
                time = time.wrapping_add(delta);
                at += 4 + n;
            }
            TIME_EXTEND => {
                time = time.wrapping_add(delta | u64::from(word(at + 4)?) << TS_SHIFT);
                at += 8;
            }
            TIME_STAMP => {
                let mut abs = delta | u64::from(word(at + 4)?) << TS_SHIFT;
                if time & TS_MSB != 0 {
                    abs |= time & TS_MSB;
                    if abs < time {
                        abs = abs.wrapping_add(1 << 59);
                    }
                }
                time = abs;
                at += 8;
            }
            // Data: type 0 gives its length (+ 4) in the next word, 1..=28
            // its length in words.
            _ => {
                let (from, n) = if type_len == 0 {
                    let n = word(at + 4)? as usize;
                    if n < 4 {
                        return Err(damage(layout.data + at, format!("a record of length {n}")));
                    }
                    (at + 8, n)
                } else {
                    (at + 4, type_len as usize * 4)
                };
                time = time.wrapping_add(delta);
                let body = data.get(from..at + 4 + n).ok_or_else(|| {
                    damage(
                        layout.data + at,
                        format!("a record of {n} bytes past the data"),
                    )
                })?;
                each(time, body);
                at += 4 + n;
            }
        }
    }
    Ok(missed)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const LAYOUT: PageLayout = PageLayout {
        timestamp: 0,
        commit: 8,
        commit_size: 8,
        data: 16,
        size: 4096,
    };

    /// One record as the kernel writes it.
    #[derive(Clone, Debug)]
    pub(crate) enum Rec {
        /// Data with this delta (small: type_len; large: type 0).
        Data(u32, Vec<u8>, bool),
        Extend(u64),
        Stamp(u64),
        Pad(u32, u32),
        End,
    }

    /// A page of `recs` from `base`, with `missed` flags.
    pub(crate) fn page(base: u64, recs: &[Rec], missed: Option<Option<u64>>) -> Vec<u8> {
        let mut d = Vec::new();
        let w = |d: &mut Vec<u8>, v: u32| d.extend_from_slice(&v.to_le_bytes());
        for r in recs {
            match r {
                Rec::Data(delta, body, long) => {
                    assert_eq!(body.len() % 4, 0);
                    if *long || body.len() > 28 * 4 {
                        w(&mut d, delta << 5);
                        w(&mut d, body.len() as u32 + 4);
                    } else {
                        w(&mut d, delta << 5 | (body.len() / 4) as u32);
                    }
                    d.extend_from_slice(body);
                }
                Rec::Extend(delta) => {
                    w(
                        &mut d,
                        ((delta & ((1 << 27) - 1)) as u32) << 5 | TIME_EXTEND,
                    );
                    w(&mut d, (delta >> 27) as u32);
                }
                Rec::Stamp(t) => {
                    w(&mut d, ((t & ((1 << 27) - 1)) as u32) << 5 | TIME_STAMP);
                    w(&mut d, (t >> 27) as u32);
                }
                Rec::Pad(delta, n) => {
                    w(&mut d, delta << 5 | PADDING);
                    w(&mut d, *n);
                    d.extend(std::iter::repeat_n(0xee, *n as usize - 4));
                }
                Rec::End => w(&mut d, PADDING),
            }
        }
        let mut commit = d.len() as u64;
        let mut p = vec![0u8; 4096];
        match missed {
            None => {}
            Some(None) => commit |= MISSED_EVENTS,
            Some(Some(n)) => {
                p[16 + d.len()..][..8].copy_from_slice(&n.to_le_bytes());
                commit |= MISSED_EVENTS | MISSED_STORED;
            }
        }
        p[..8].copy_from_slice(&base.to_le_bytes());
        p[8..16].copy_from_slice(&commit.to_le_bytes());
        p[16..16 + d.len()].copy_from_slice(&d);
        p
    }

    /// A page's records (time, bytes), and what it says was lost.
    type Read = (Vec<(u64, Vec<u8>)>, Result<Missed, Damage>);

    fn read(p: &[u8]) -> Read {
        let mut got = Vec::new();
        let r = read_page(&LAYOUT, p, |t, b| got.push((t, b.to_vec())));
        (got, r)
    }

    #[test]
    fn records_and_times_by_each_kind_of_record() {
        let body = |b: u8, n: usize| vec![b; n];
        // (records, expected (time, first byte, length) of each record)
        type Case = (Vec<Rec>, Vec<(u64, u8, usize)>);
        let cases: Vec<Case> = vec![
            (
                vec![
                    Rec::Data(5, body(1, 8), false),
                    Rec::Data(7, body(2, 112), false),
                ],
                vec![(1005, 1, 8), (1012, 2, 112)],
            ),
            (
                vec![
                    Rec::Data(3, body(3, 116), false),
                    Rec::Data(0, body(4, 12), true),
                ],
                vec![(1003, 3, 116), (1003, 4, 12)],
            ),
            (
                vec![Rec::Extend(1 << 40 | 9), Rec::Data(1, body(5, 4), false)],
                vec![(1000 + (1 << 40) + 10, 5, 4)],
            ),
            (
                vec![
                    Rec::Data(1, body(6, 4), false),
                    Rec::Pad(99, 8),
                    Rec::Data(2, body(7, 4), false),
                ],
                vec![(1001, 6, 4), (1102, 7, 4)],
            ),
            (
                vec![Rec::Stamp(123_456_789_012), Rec::Data(4, body(8, 4), false)],
                vec![(123_456_789_016, 8, 4)],
            ),
            (
                vec![
                    Rec::Data(1, body(9, 4), false),
                    Rec::End,
                    Rec::Data(1, body(10, 4), false),
                ],
                vec![(1001, 9, 4)],
            ),
        ];
        for (recs, want) in cases {
            let (got, r) = read(&page(1000, &recs, None));
            assert_eq!(r, Ok(Missed::None), "{recs:?}");
            let got: Vec<_> = got.iter().map(|(t, b)| (*t, b[0], b.len())).collect();
            assert_eq!(got, want, "{recs:?}");
        }
    }

    #[test]
    fn an_absolute_stamp_takes_its_top_bits_from_the_page() {
        let base = 0xf800_0000_0000_1000;
        let (got, _) = read(&page(
            base,
            &[Rec::Stamp(0x2000), Rec::Data(0, vec![1; 4], false)],
            None,
        ));
        assert_eq!(got[0].0, 0xf800_0000_0000_2000);
    }

    #[test]
    fn what_the_kernel_lost_before_a_page() {
        let one = [Rec::Data(1, vec![1; 4], false)];
        for (missed, want) in [
            (None, Missed::None),
            (Some(None), Missed::Unknown),
            (Some(Some(4242)), Missed::Count(4242)),
        ] {
            let (got, r) = read(&page(0, &one, missed));
            assert_eq!((got.len(), r), (1, Ok(want)));
        }
    }

    #[test]
    fn a_damaged_page_hands_what_came_before_and_says_where() {
        let good = page(
            0,
            &[
                Rec::Data(1, vec![1; 8], false),
                Rec::Data(1, vec![2; 8], false),
            ],
            None,
        );
        // commit past the page
        let mut p = good.clone();
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(read(&p).1.unwrap_err().why.contains("commit says 5000"));
        // the second record's type-0 length runs past the data
        let mut p = good.clone();
        p[16 + 12..16 + 16].copy_from_slice(&(0u32).to_le_bytes());
        let (got, r) = read(&p);
        assert_eq!(got.len(), 1);
        let d = r.unwrap_err();
        assert_eq!(d.at, 16 + 12);
        // a page cut short
        assert!(read(&good[..10]).1.unwrap_err().why.contains("shorter"));
        // every single-byte mutation of a page: an answer, never a panic
        for i in 0..64 {
            for v in [0u8, 0x1d, 0x1e, 0x1f, 0xff, 0x80] {
                let mut p = good.clone();
                p[i] = v;
                let _ = read(&p);
            }
        }
    }
}
