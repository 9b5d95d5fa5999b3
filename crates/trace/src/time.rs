//! Calendar names for timestamps (UTC), without a date library.

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
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

/// Hours since the epoch → `YYYY-MM-DDTHH` (the Hive partition value).
pub fn hour_name(hours: u64) -> String {
    let (y, m, d) = civil_from_days((hours / 24) as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}", hours % 24)
}

/// Nanoseconds since the epoch → `YYYY-MM-DD HH:MM:SS` UTC.
pub fn ns_to_utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(hour_name(20_414 * 24 + 13), "2025-11-22T13");
        assert_eq!(ns_to_utc(1_700_000_000_000_000_000), "2023-11-14 22:13:20");
    }
}
