//! Time in and out, for every crate: instants as a person writes them (RFC 3339, a date, `10m ago`,
//! `@1700000000.5`, `now`), durations (`1h 30m`, `1.5s`, `100us`, and plain seconds where a schedule
//! allows them), and UTC calendar names (file stamps, Hive hours, report times). Exact to the
//! nanosecond, UTC only. Reading the clocks is `sys`'s (`sys::now_ns`, `sys::monotonic_ns`).
//!
//! Written out rather than taken from a date crate (jiff, humantime): `units` has no dependencies so
//! that `store` stays light, and the forms ringcap accepts are its own (second 60, a bare date at
//! midnight UTC, a date and time without an offset as UTC, `10m ago`, `@unix`); a crate would need the
//! same code around it, and its formats (jiff's spans, humantime's errors on `1.001h`) are not these.

use std::time::Duration;

const NS_PER_S: u128 = 1_000_000_000;

/// Every duration unit ringcap reads, with its length in nanoseconds: the spellings humantime accepted
/// for the command line's flags (months of 30.44 days, years of 365.25), which include the short ones
/// of `10m ago` and of burst schedules.
const UNITS: &[(&[&str], u128)] = &[
    (&["nanos", "nsec", "ns"], 1),
    (&["usec", "us", "µs"], 1_000),
    (&["millis", "msec", "ms"], 1_000_000),
    (&["seconds", "second", "secs", "sec", "s"], NS_PER_S),
    (&["minutes", "minute", "min", "mins", "m"], 60 * NS_PER_S),
    (&["hours", "hour", "hr", "hrs", "h"], 3_600 * NS_PER_S),
    (&["days", "day", "d"], 86_400 * NS_PER_S),
    (&["weeks", "week", "wk", "wks", "w"], 7 * 86_400 * NS_PER_S),
    (&["months", "month", "M"], 2_630_016 * NS_PER_S),
    (&["years", "year", "yr", "yrs", "y"], 31_557_600 * NS_PER_S),
];

fn unit_ns(name: &str) -> Option<u128> {
    UNITS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|&(_, ns)| ns)
}

const DURATION_FORMS: &str = "write e.g. 10s, 250ms, 100us, 1.5h or 1h 30m";

/// Parses a duration: one or more `<number><unit>` parts, spaces between them optional (`2h 37min`,
/// `1h30m`, `4.2s`, `100us`), units as in humantime (ns, us/µs, ms, s/sec, m/min, h/hr, d, w, M for
/// months of 30.44 days, y for years of 365.25), a fraction on any part truncated to whole
/// nanoseconds; and `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("empty duration; {DURATION_FORMS}"));
    }
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(n);
        let tail = tail.trim_start();
        let u = tail
            .find(|c: char| !(c.is_alphabetic()))
            .unwrap_or(tail.len());
        let (name, tail) = tail.split_at(u);
        if name.is_empty() {
            return Err(format!(
                "`{s}` needs a unit after {num:?}; {DURATION_FORMS}"
            ));
        }
        let unit = unit_ns(name).ok_or_else(|| {
            format!("unknown unit `{name}` in `{s}`; use ns, us, ms, s, m, h, d, w, M or y")
        })?;
        let part =
            decimal(num, unit).ok_or_else(|| format!("bad number in `{s}`; {DURATION_FORMS}"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("`{s}` is too long"))?;
        rest = tail.trim_start();
    }
    let secs = u64::try_from(total / NS_PER_S).map_err(|_| format!("`{s}` is too long"))?;
    Ok(Duration::new(secs, (total % NS_PER_S) as u32))
}

/// Parses seconds as a floating-point number: `10s`, `250ms`, `100us`, `5000ns` (any one unit of
/// [`parse_duration`]), or a plain number of seconds (`2.5`, `1e-3`).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let bad = || format!("bad duration {s:?}: write e.g. 10s, 250ms or 100us");
    // The longest unit the text ends with whose number reads (`ms`, not `s`, in `250ms`).
    let (num, scale) = UNITS
        .iter()
        .flat_map(|(names, ns)| names.iter().map(move |n| (*n, *ns)))
        .filter_map(|(n, ns)| Some((s.strip_suffix(n)?, n.len(), ns)))
        .filter(|(num, _, _)| num.trim().parse::<f64>().is_ok())
        .max_by_key(|&(_, len, _)| len)
        .map_or((s, 1.0), |(num, _, ns)| (num, ns as f64 / 1e9));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(bad()),
    }
}

/// A duration as humantime printed it: `2h 37m`, `32ms`, `1day 4h`, `0s` (years of 365.25 days and
/// months of 30.44, as [`parse_duration`] reads them back).
pub fn format_duration(d: Duration) -> String {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    if secs == 0 && nanos == 0 {
        return "0s".to_string();
    }
    let (years, ydays) = (secs / 31_557_600, secs % 31_557_600);
    let (months, mdays) = (ydays / 2_630_016, ydays % 2_630_016);
    let (days, day_secs) = (mdays / 86_400, mdays % 86_400);
    let plural = |v: u64, name: &str| match v {
        0 => String::new(),
        1 => format!("{v}{name}"),
        _ => format!("{v}{name}s"),
    };
    let plain = |v: u64, name: &str| match v {
        0 => String::new(),
        _ => format!("{v}{name}"),
    };
    let parts = [
        plural(years, "year"),
        plural(months, "month"),
        plural(days, "day"),
        plain(day_secs / 3600, "h"),
        plain(day_secs % 3600 / 60, "m"),
        plain(day_secs % 60, "s"),
        plain(u64::from(nanos / 1_000_000), "ms"),
        plain(u64::from(nanos / 1000 % 1000), "us"),
        plain(u64::from(nanos % 1000), "ns"),
    ];
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

const TIME_FORMS: &str = "write RFC 3339 (`2026-11-23T14:02:00Z`), a date (`2026-11-23`), \
    a relative time (`10m ago`), Unix seconds (`@1700000000.5`) or `now`";

/// Parses a time to nanoseconds since the Unix epoch (UTC).
///
/// Accepted forms:
/// * RFC 3339: `2026-11-23T14:02:00Z`, `2026-11-23T14:02:00.123456789+01:00`
///   (`t`/`z` may be lower case, fraction 1-9 digits; second 60 is accepted).
///   Without an offset (`2026-11-23T14:02`, `2026-11-23T14:02:05`) the time
///   is UTC; a bare date `2026-11-23` is midnight UTC.
/// * Relative: `<duration> ago`, the duration one word of [`parse_duration`]
///   (`10m ago`, `1.5h ago`, `500ms ago`).
/// * Unix seconds `@1700000000` or `@1700000000.5`, and `now`.
pub fn parse_time(s: &str, now_ns: u64) -> Result<u64, String> {
    let s = s.trim();
    let words: Vec<&str> = s.split_whitespace().collect();
    let ns: u128 = match words[..] {
        ["now"] => now_ns.into(),
        [d, "ago"] => {
            let ago = parse_duration(d)
                .map_err(|e| format!("{e} (e.g. `90s ago` or `1.5h ago`)"))?
                .as_nanos();
            u128::from(now_ns)
                .checked_sub(ago)
                .ok_or(format!("`{s}` is before 1970"))?
        }
        _ if s.starts_with('@') => decimal(&s[1..], NS_PER_S).ok_or(format!(
            "bad Unix time `{s}`; write seconds like `@1700000000` or `@1700000000.5`"
        ))?,
        _ if s.len() >= 10 && s.as_bytes()[4] == b'-' => parse_rfc3339(s)?,
        [d] if parse_duration(d).is_ok() => {
            return Err(format!("`{s}` is a duration; write `{s} ago`"));
        }
        _ => return Err(format!("unrecognised time `{s}`; {TIME_FORMS}")),
    };
    u64::try_from(ns).map_err(|_| format!("time `{s}` is too far in the future"))
}

/// `int[.frac]` times `unit`, truncated to whole nanoseconds.
fn decimal(s: &str, unit: u128) -> Option<u128> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |x: &str| x.len() <= 20 && x.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || s.ends_with('.') {
        return None;
    }
    let f: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    Some(int.parse::<u128>().ok()? * unit + f * unit / 10u128.pow(frac.len() as u32))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400; // [0, 399]
    let doy = (153 * ((i64::from(m) + 9) % 12) + 2) / 5 + i64::from(d) - 1; // day of year from March 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's civil-from-days; no time
/// zone database): every UTC date ringcap prints or puts in a file name.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn parse_rfc3339(s: &str) -> Result<u128, String> {
    let bad = |what: &str| format!("bad {what} in `{s}`; {TIME_FORMS}");
    let field = |r: std::ops::Range<usize>, max: u32, what: &str| -> Result<u32, String> {
        let t = s
            .get(r)
            .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad(what))?;
        t.parse()
            .ok()
            .filter(|&v| v <= max)
            .ok_or_else(|| bad(what))
    };
    let b = s.as_bytes();
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !sep(4, b'-') || !sep(7, b'-') {
        return Err(bad("date"));
    }
    let y = i64::from(field(0..4, 9999, "year")?);
    let mo = field(5..7, 12, "month")?;
    let d = field(8..10, 31, "day")?;
    if mo == 0 || d == 0 || d > days_in_month(y, mo) {
        return Err(bad("date (no such day)"));
    }
    let (mut secs, mut frac_ns, mut offset) = (0i128, 0i128, 0i128);
    if b.len() > 10 {
        if !matches!(b[10], b'T' | b't' | b' ') || !sep(13, b':') {
            return Err(bad("time (expected `T` and `HH:MM`)"));
        }
        let (h, mi) = (field(11..13, 23, "hour")?, field(14..16, 59, "minute")?);
        let mut sec = 0;
        let mut i = 16;
        if sep(i, b':') {
            sec = field(17..19, 60, "second")?;
            i = 19;
            if sep(i, b'.') {
                let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if !(1..=9).contains(&n) {
                    return Err(bad("fraction (1 to 9 digits)"));
                }
                frac_ns = i128::from(field(i + 1..i + 1 + n, u32::MAX, "fraction")?)
                    * 10i128.pow(9 - n as u32);
                i += 1 + n;
            }
        }
        secs = i128::from(h * 3600 + mi * 60 + sec);
        match &s[i..] {
            "" | "Z" | "z" => {}
            o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && sep(i + 3, b':') => {
                let (oh, om) = (
                    field(i + 1..i + 3, 23, "offset hour")?,
                    field(i + 4..i + 6, 59, "offset minute")?,
                );
                offset = i128::from(oh * 3600 + om * 60) * if o.starts_with('-') { -1 } else { 1 };
            }
            _ => return Err(bad("offset (use `Z` or `+HH:MM`)")),
        }
    }
    let total =
        (i128::from(days_from_civil(y, mo, d)) * 86_400 + secs - offset) * 1_000_000_000 + frac_ns;
    u128::try_from(total).map_err(|_| format!("`{s}` is before 1970"))
}

/// A UTC instant broken into calendar fields (whole seconds).
struct Utc {
    y: i64,
    mo: u32,
    d: u32,
    h: u64,
    mi: u64,
    s: u64,
}

fn utc(ns: u64) -> Utc {
    let secs = ns / 1_000_000_000;
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let day = secs % 86_400;
    Utc {
        y,
        mo,
        d,
        h: day / 3600,
        mi: day / 60 % 60,
        s: day % 60,
    }
}

/// `YYYYmmddTHHMMSS` in UTC: the start stamp in a store's file names.
pub fn utc_stamp(ns: u64) -> String {
    let Utc { y, mo, d, h, mi, s } = utc(ns);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}")
}

/// `YYYY-MM-DD HH:MM:SS` in UTC: times in reports.
pub fn utc_seconds(ns: u64) -> String {
    let Utc { y, mo, d, h, mi, s } = utc(ns);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
}

/// Hours since the epoch → `YYYY-MM-DDTHH` (UTC; the Hive partition value of a converted trace).
pub fn utc_hour(hours: u64) -> String {
    let Utc { y, mo, d, h, .. } = utc(hours.saturating_mul(3_600_000_000_000));
    format!("{y:04}-{mo:02}-{d:02}T{h:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_795_392_000_000_000_000; // 2026-11-23T00:00:00Z
    const H: u64 = 3_600_000_000_000; // one hour in ns

    #[test]
    fn civil_dates_match_the_calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_415), (2025, 11, 23));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn civil_days() {
        // Checked with `date -u -d DATE +%s` / 86400.
        for ((y, m, d), days) in [
            ((1970, 1, 1), 0),
            ((2000, 3, 1), 11017),
            ((2026, 11, 23), 20780),
            ((2025, 11, 23), 20415),
            ((1969, 12, 31), -1),
            ((2024, 3, 1), 19783),
        ] {
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            assert_eq!(civil_from_days(days), (y, m, d));
        }
    }

    #[test]
    fn times() {
        let t = |s: &str| parse_time(s, NOW);
        let cases = [
            ("2026-11-23", NOW),
            (
                "2026-11-23T14:02:00.123456789+01:00",
                NOW + 13 * H + H / 30 + 123_456_789,
            ),
            (
                "2026-11-23t14:02:00.5z",
                NOW + 14 * H + H / 30 + 500_000_000,
            ),
            ("2026-11-23T14:02", NOW + 14 * H + H / 30),
            ("2026-11-23T14:02:05", NOW + 14 * H + H / 30 + 5_000_000_000),
            ("2026-11-22T23:30:00-00:30", NOW),
            ("2024-02-29T00:00:00Z", 19782 * 24 * H),
            ("@1700000000.5", 1_700_000_000_500_000_000),
            ("@1700000000", 1_700_000_000_000_000_000),
            ("now", NOW),
            ("1.5h ago", NOW - 3 * H / 2),
            ("500ms ago", NOW - 500_000_000),
            ("90s ago", NOW - 90_000_000_000),
            ("7us ago", NOW - 7_000),
            ("1d ago", NOW - 24 * H),
            ("2.0000000001s ago", NOW - 2_000_000_000),
        ];
        for (s, want) in cases {
            assert_eq!(t(s), Ok(want), "{s}");
        }
        let bad = "2026-13-01 2025-02-29 2026-04-31 2026-11-23T24:00 2026-11-23T14:60 \
            2026-11-23T14:02:61 2026-11-23T14:02:00. 2026-11-23T14:02:00.1234567890Z \
            2026-11-23T14:02:00+1:00 10x_ago 1.h_ago yesterday @ @1e9 1969-12-31 99999d_ago";
        for s in bad.split(' ') {
            assert!(t(&s.replace('_', " ")).is_err(), "{s}");
        }
        assert!(t("10m").unwrap_err().contains("write `10m ago`"));
    }

    #[test]
    fn durations_read_as_humantime_did() {
        let ok = |s: &str, secs: u64, nanos: u32| {
            assert_eq!(parse_duration(s), Ok(Duration::new(secs, nanos)), "{s}")
        };
        ok("2h 37min", 9420, 0);
        ok("1h30m", 5400, 0);
        ok("32ms", 0, 32_000_000);
        ok("4.2s", 4, 200_000_000);
        ok("100us", 0, 100_000);
        ok("1µs", 0, 1_000);
        ok("5000ns", 0, 5_000);
        ok("0", 0, 0);
        ok("10 s", 10, 0);
        ok("2days", 172_800, 0);
        ok("1w", 604_800, 0);
        ok("1M", 2_630_016, 0);
        ok("1y", 31_557_600, 0);
        ok("1.001h", 3603, 600_000_000);
        for bad in [
            "",
            "10",
            "1.s",
            ".5s",
            "1x",
            "s",
            "-1s",
            "1e3ms",
            "99999999999999999999y",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds_keep_their_float_value() {
        assert!((parse_seconds("100us").unwrap() - 100e-6).abs() < 1e-15);
        assert_eq!(parse_seconds("10s"), Ok(10.0));
        assert_eq!(parse_seconds("250ms"), Ok(250.0 * 1e-3));
        assert_eq!(parse_seconds("5000ns"), Ok(5000.0 * 1e-9));
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert_eq!(parse_seconds(" 1e3ms "), Ok(1.0));
        assert_eq!(parse_seconds("0.5s"), Ok(0.5));
        for bad in ["", "-1s", "inf", "nan", "1x", "s"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_print_as_humantime_did() {
        let f = |secs, nanos| format_duration(Duration::new(secs, nanos));
        assert_eq!(f(9420, 0), "2h 37m");
        assert_eq!(f(0, 32_000_000), "32ms");
        assert_eq!(f(0, 0), "0s");
        assert_eq!(f(86_400 + 4 * 3600, 0), "1day 4h");
        assert_eq!(f(2 * 86_400, 1_001_001), "2days 1ms 1us 1ns");
        assert_eq!(f(31_557_600 + 2 * 2_630_016, 0), "1year 2months");
        for (s, n) in [(9420, 0), (93_784, 5_006_007), (40_000_000, 0)] {
            assert_eq!(parse_duration(&f(s, n)), Ok(Duration::new(s, n)));
        }
    }

    #[test]
    fn utc_names() {
        assert_eq!(utc_stamp(0), "19700101T000000");
        // 2026-11-22 01:02:03 UTC
        assert_eq!(utc_stamp(1_795_309_323_000_000_000), "20261122T010203");
        assert_eq!(utc_stamp(951_782_400_000_000_000), "20000229T000000");
        assert_eq!(utc_hour(20_414 * 24 + 13), "2025-11-22T13");
        assert_eq!(
            utc_seconds(1_700_000_000_000_000_000),
            "2023-11-14 22:13:20"
        );
    }
}
