//! Calendar names for timestamps (UTC), without a date library.

use units::civil_from_days;

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
        assert_eq!(hour_name(20_414 * 24 + 13), "2025-11-22T13");
        assert_eq!(ns_to_utc(1_700_000_000_000_000_000), "2023-11-14 22:13:20");
    }
}
