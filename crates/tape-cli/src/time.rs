//! Times as people read and type them: the `HH:MM:SS` of `tape show`'s
//! lines (the local time zone, babeltrace2's default) and the bounds of
//! `--begin` / `--end`, in babeltrace2's forms (its trimmer's `begin` and
//! `end`):
//!
//! ```text
//! YYYY-MM-DD HH:MM[:SS[.NNNNNNNNN]]   a local date and time
//! HH:MM[:SS[.NNNNNNNNN]]              a local time on the date of the trace's first time
//! [-]SECONDS[.NNNNNNNNN]              seconds since the epoch (what --clock-seconds prints)
//! ```
//!
//! The local time zone is the C library's (`TZ`), through `localtime_r` and
//! `mktime`: no time zone crate reads it better than the one babeltrace2
//! uses.

/// A time bound as typed, not yet placed on the trace's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Nanoseconds since the epoch.
    At(i128),
    /// A local time of day (ns since midnight) on the date of the trace's
    /// first time.
    TimeOfDay(i128),
}

impl Bound {
    /// Parses `text`, the value of `option`.
    pub fn parse(option: &str, text: &str) -> Result<Bound, String> {
        parse(text).map_err(|(at, why)| {
            format!(
                "{option} {text:?}: {why} at character {} (accepted: YYYY-MM-DD HH:MM[:SS[.NNNNNNNNN]] \
                 or HH:MM[:SS[.NNNNNNNNN]] in local time, as `tape show` prints it, or seconds since \
                 the epoch such as 1700000000.250)",
                at + 1
            )
        })
    }

    /// Nanoseconds since the epoch; a time of day is taken on the local
    /// date of `first` (the trace's first time; none: the epoch's date).
    pub fn resolve(self, first: Option<i128>) -> i128 {
        match self {
            Bound::At(ns) => ns,
            Bound::TimeOfDay(ns) => {
                let day = local_tm(first.unwrap_or(0).div_euclid(NS));
                let (y, m, d) = day.map_or((1970, 1, 1), |t| {
                    (i64::from(t.tm_year) + 1900, t.tm_mon + 1, t.tm_mday)
                });
                local_ns(y, m, d, ns)
            }
        }
    }
}

const NS: i128 = 1_000_000_000;

/// A parse error: the byte position and what was wrong there.
type ParseError = (usize, &'static str);

fn parse(text: &str) -> Result<Bound, ParseError> {
    let b = text.as_bytes();
    if b.is_empty() {
        return Err((0, "empty time"));
    }
    if b.get(4) == Some(&b'-') {
        let (y, m, d) = date(&b[..b.len().min(10)])?;
        if b.len() <= 10 {
            return Err((b.len(), "expected a space and a time after the date"));
        }
        expect(b, 10, b' ', "expected a space after the date")?;
        let tod = time_of_day(&b[11..]).map_err(|(at, why)| (11 + at, why))?;
        return Ok(Bound::At(local_ns(y, m, d, tod)));
    }
    if b.contains(&b':') {
        return time_of_day(b).map(Bound::TimeOfDay);
    }
    seconds(b).map(Bound::At)
}

/// Digits at `b[at..at + n]`, exactly `n` of them.
fn digits(b: &[u8], at: usize, n: usize, what: &'static str) -> Result<i64, ParseError> {
    let mut v = 0i64;
    for i in at..at + n {
        match b.get(i) {
            Some(c) if c.is_ascii_digit() => v = v * 10 + i64::from(c - b'0'),
            _ => return Err((i.min(b.len()), what)),
        }
    }
    Ok(v)
}

/// `YYYY-MM-DD`.
fn date(b: &[u8]) -> Result<(i64, i32, i32), ParseError> {
    let y = digits(b, 0, 4, "expected a 4-digit year")?;
    expect(b, 4, b'-', "expected '-' after the year")?;
    let m = digits(b, 5, 2, "expected a 2-digit month")?;
    expect(b, 7, b'-', "expected '-' after the month")?;
    let d = digits(b, 8, 2, "expected a 2-digit day")?;
    if !(1..=12).contains(&m) {
        return Err((5, "month out of range 01-12"));
    }
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=days).contains(&d) {
        return Err((
            8,
            match days {
                28 => "day out of range 01-28 (February of a common year)",
                29 => "day out of range 01-29 (February of a leap year)",
                30 => "day out of range 01-30 for this month",
                _ => "day out of range 01-31",
            },
        ));
    }
    Ok((y, m as i32, d as i32))
}

fn expect(b: &[u8], at: usize, c: u8, what: &'static str) -> Result<(), ParseError> {
    match b.get(at) {
        Some(&x) if x == c => Ok(()),
        _ => Err((at.min(b.len()), what)),
    }
}

/// `HH:MM[:SS[.NNNNNNNNN]]` -> ns since midnight.
fn time_of_day(b: &[u8]) -> Result<i128, ParseError> {
    let h = digits(b, 0, 2, "expected a 2-digit hour")?;
    expect(b, 2, b':', "expected ':' after the hour")?;
    let m = digits(b, 3, 2, "expected 2-digit minutes")?;
    if h > 23 {
        return Err((0, "hour out of range 00-23"));
    }
    if m > 59 {
        return Err((3, "minutes out of range 00-59"));
    }
    let mut ns = (i128::from(h) * 3600 + i128::from(m) * 60) * NS;
    if b.len() == 5 {
        return Ok(ns);
    }
    expect(b, 5, b':', "expected ':' after the minutes")?;
    let s = digits(b, 6, 2, "expected 2-digit seconds")?;
    if s > 60 {
        return Err((6, "seconds out of range 00-60"));
    }
    ns += i128::from(s) * NS;
    if b.len() == 8 {
        return Ok(ns);
    }
    expect(b, 8, b'.', "expected '.' after the seconds")?;
    Ok(ns + fraction(b, 9)?)
}

/// Up to nine digits after a '.' at `at - 1`, to the end -> ns.
fn fraction(b: &[u8], at: usize) -> Result<i128, ParseError> {
    let frac = &b[at..];
    if frac.is_empty() {
        return Err((at, "expected digits after '.'"));
    }
    if frac.len() > 9 {
        return Err((at + 9, "more than nine digits after '.'"));
    }
    let v = digits(b, at, frac.len(), "expected a digit")?;
    Ok(i128::from(v) * 10i128.pow(9 - frac.len() as u32))
}

/// `[-]SECONDS[.NNNNNNNNN]` -> ns since the epoch.
fn seconds(b: &[u8]) -> Result<i128, ParseError> {
    let neg = b[0] == b'-';
    let start = usize::from(neg);
    let end = b.iter().position(|&c| c == b'.').unwrap_or(b.len());
    if end == start {
        return Err((start, "expected seconds"));
    }
    if end - start > 12 {
        return Err((start + 12, "seconds out of range"));
    }
    let s = i128::from(digits(b, start, end - start, "expected a digit")?);
    let f = if end < b.len() {
        fraction(b, end + 1)?
    } else {
        0
    };
    let ns = s * NS + f;
    Ok(if neg { -ns } else { ns })
}

/// The broken-down local time of `secs` since the epoch.
fn local_tm(secs: i128) -> Option<libc::tm> {
    let t = libc::time_t::try_from(secs).ok()?;
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid; localtime_r is the thread-safe form.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    ok.then_some(tm)
}

/// ns since the epoch of local date `y-m-d` at `tod` ns after midnight (the
/// time zone's offset that day, daylight saving time as the C library says).
fn local_ns(y: i64, m: i32, d: i32, tod: i128) -> i128 {
    let secs = tod.div_euclid(NS);
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = (y - 1900) as i32;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
    tm.tm_hour = (secs / 3600) as i32;
    tm.tm_min = (secs / 60 % 60) as i32;
    tm.tm_sec = (secs % 60) as i32;
    tm.tm_isdst = -1;
    // SAFETY: `tm` is a valid, initialised struct; mktime only normalises it.
    let t = unsafe { libc::mktime(&mut tm) };
    i128::from(t) * NS + tod.rem_euclid(NS)
}

/// `HH:MM:SS` of a second since the epoch, in the local time zone
/// (babeltrace2's default).
pub fn local_hms(secs: i128) -> String {
    match local_tm(secs) {
        Some(tm) => format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec),
        None => format!("{secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forms and what they give (UTC-independent: offsets between forms
    /// are checked, not absolute local times).
    #[test]
    fn forms_parse_or_name_the_position() {
        let ok: &[(&str, Bound)] = &[
            ("1700000000", Bound::At(1_700_000_000 * NS)),
            ("1700000000.25", Bound::At(1_700_000_000 * NS + 250_000_000)),
            ("-1.000000001", Bound::At(-NS - 1)),
            ("0.123456789", Bound::At(123_456_789)),
            ("10:00", Bound::TimeOfDay(36_000 * NS)),
            ("10:00:05", Bound::TimeOfDay(36_005 * NS)),
            ("23:59:59.5", Bound::TimeOfDay(86_399 * NS + 500_000_000)),
            ("00:00:00.000000001", Bound::TimeOfDay(1)),
        ];
        for (text, want) in ok {
            assert_eq!(parse(text), Ok(*want), "{text}");
        }
        // The last days of months, leap years included, are dates.
        for text in [
            "2028-02-29 00:00",
            "2000-02-29 00:00",
            "2026-04-30 00:00",
            "2026-12-31 23:59",
        ] {
            assert!(parse(text).is_ok(), "{text}");
        }
        let bad: &[(&str, usize)] = &[
            ("", 0),
            ("1.2.3", 3),
            ("1700000000.1234567890", 20),
            ("12:3", 4),
            ("24:00", 0),
            ("10:60", 3),
            ("10:00:", 6),
            ("10:00:61", 6),
            ("10:00:00.", 9),
            ("10:00:00,5", 8),
            ("2026-13-01 10:00", 5),
            ("2026-02-30 00:00", 8),
            ("2026-02-29 00:00", 8),
            ("2026-04-31 00:00", 8),
            ("2026-11-00 00:00", 8),
            ("2100-02-29 00:00", 8),
            ("2026-1-01 10:00", 6),
            ("2026-11-24T10:00", 10),
            ("2026-11-24 10", 13),
            ("2026-11-24", 10),
            ("2026-11-24 ", 11),
            ("abc", 0),
            ("-", 1),
            ("9999999999999", 12),
        ];
        for (text, at) in bad {
            assert_eq!(parse(text).map_err(|e| e.0), Err(*at), "{text}");
            let e = Bound::parse("--begin", text).unwrap_err();
            assert!(e.contains("accepted: YYYY-MM-DD HH:MM"), "{e}");
        }
    }

    #[test]
    fn a_date_and_time_is_local_and_a_time_of_day_takes_the_first_date() {
        let Ok(Bound::At(t)) = parse("2026-11-24 10:00:05.5") else {
            panic!("date and time")
        };
        assert_eq!(local_hms(t.div_euclid(NS)), "10:00:05");
        assert_eq!(t.rem_euclid(NS), 500_000_000);
        let Ok(Bound::At(next_day)) = parse("2026-11-25 10:00:05.5") else {
            panic!("date and time")
        };
        assert_eq!(next_day - t, 86_400 * NS);
        let tod = parse("10:00:05.5").unwrap();
        // On the date of a first time late that day, and early that day.
        let Ok(Bound::At(evening)) = parse("2026-11-24 23:59:59") else {
            panic!()
        };
        let Ok(Bound::At(morning)) = parse("2026-11-24 00:00:00") else {
            panic!()
        };
        assert_eq!(tod.resolve(Some(evening)), t);
        assert_eq!(tod.resolve(Some(morning)), t);
    }
}
