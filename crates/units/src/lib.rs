//! Human units in and out: sizes like `4MiB` or `1.5G`, rates as pps and b/s, for every crate of the workspace
//! (terminal lines, error messages, reports), and [`time`]: every time and duration ringcap reads or prints.
//! It depends on nothing, so even `store` can use it.
//!
//! Two renderings share one prefix rule: terminal lines keep two decimals (`1.50 Mpps`) so that a changing figure
//! does not change width, reports use three significant digits without trailing zeros (`1.5 Mpps`).

pub mod time;

/// Parse a byte size: plain bytes, or with a suffix k/K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB.
/// Decimal suffixes (KB, MB) are powers of 1000, binary ones (KiB, k, M, G) powers of 1024, as tcpdump's -C is
/// in millions of bytes but dd and most users mean binary; we follow the suffix literally.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size: write e.g. 4096, 64KiB, 100MB, 2GiB"))?;
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "k" | "K" | "KiB" | "Ki" => 1024.0,
        "KB" | "kB" => 1e3,
        "M" | "MiB" | "Mi" => 1024.0 * 1024.0,
        "MB" => 1e6,
        "G" | "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        "GB" => 1e9,
        "T" | "TiB" | "Ti" => 1024f64.powi(4),
        "TB" => 1e12,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{s}`: use B, KiB, MiB, GiB, TiB or KB, MB, GB, TB"
            ))
        }
    };
    Ok((n * mult).round() as u64)
}

/// `1.50 Mpps`, `812 kpps`, `12 pps`.
pub fn pps(rate: f64) -> String {
    scaled(rate, "pps")
}

/// Bits per second from bytes per second: `1.23 Gb/s`, `720 Mb/s`.
pub fn bits_per_sec(bytes_per_sec: f64) -> String {
    scaled(bytes_per_sec * 8.0, "b/s")
}

/// The SI prefix for `v`: its divisor and letter (none below 1000).
fn prefix(v: f64) -> (f64, &'static str) {
    match v.abs() {
        x if x >= 1e9 => (1e9, "G"),
        x if x >= 1e6 => (1e6, "M"),
        x if x >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    }
}

/// Terminal rendering: two decimals below 100, none above or without a prefix.
fn scaled(v: f64, unit: &str) -> String {
    let (d, p) = prefix(v);
    let x = v / d;
    if x >= 100.0 || p.is_empty() {
        format!("{x:.0} {p}{unit}")
    } else {
        format!("{x:.2} {p}{unit}")
    }
}

/// Report rendering, three significant digits: 858000 → "858 k" + unit, 12 with no unit → "12".
pub fn si(v: f64, unit: &str) -> String {
    let (d, p) = prefix(v);
    let space = if unit.is_empty() && p.is_empty() {
        ""
    } else {
        " "
    };
    format!("{}{space}{p}{unit}", sig(v / d))
}

/// Three significant digits, without trailing zeros: 412.3 → "412", 1.234 → "1.23", 0 → "0".
pub fn sig(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - 1 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A time span for labels and tables: `100 µs`, `1.6 ms`, `409.6 ms`, `2.5 s` (up to four decimals in the largest
/// unit below the value, trailing zeros dropped).
pub fn seconds(s: f64) -> String {
    let (v, unit) = match s.abs() {
        x if x >= 1.0 || x == 0.0 => (s, "s"),
        x if x >= 1e-3 => (s * 1e3, "ms"),
        x if x >= 1e-6 => (s * 1e6, "µs"),
        _ => (s * 1e9, "ns"),
    };
    let t = format!("{v:.4}");
    format!("{} {unit}", t.trim_end_matches('0').trim_end_matches('.'))
}

/// Digits in groups of three from the right, joined by `sep`: ("1234567", ' ') → "1 234 567".
pub fn group_digits(digits: &str, sep: char) -> String {
    let n = digits.len();
    let mut s = String::with_capacity(n + n / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(3) {
            s.push(sep);
        }
        s.push(ch);
    }
    s
}

/// Binary-prefixed bytes: `512 B`, `3.0 KiB`, `12.4 MiB`, `1.50 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_keep_their_digits() {
        assert_eq!(seconds(0.0001), "100 µs");
        assert_eq!(seconds(0.0016), "1.6 ms");
        assert_eq!(seconds(0.4096), "409.6 ms");
        assert_eq!(seconds(1.0), "1 s");
        assert_eq!(seconds(2.5), "2.5 s");
        assert_eq!(seconds(0.0), "0 s");
    }

    #[test]
    fn sizes_follow_their_suffix() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("4M").unwrap(), 4 << 20);
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn rates_pick_one_unit() {
        assert_eq!(pps(1_500_000.0), "1.50 Mpps");
        assert_eq!(pps(812_000.0), "812 kpps");
        assert_eq!(pps(12.0), "12 pps");
        assert_eq!(bits_per_sec(90_000_000.0), "720 Mb/s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024), "3.0 KiB");
        assert_eq!(bytes(1536 << 20), "1.5 GiB");
        assert_eq!(bytes(12 * 1024 * 1024 + 300 * 1024), "12.3 MiB");
    }

    #[test]
    fn digits_group_by_three() {
        assert_eq!(group_digits("1234567", ' '), "1 234 567");
        assert_eq!(group_digits("123456", ','), "123,456");
        assert_eq!(group_digits("12", ','), "12");
        assert_eq!(group_digits("", ','), "");
    }

    #[test]
    fn reports_use_three_significant_digits() {
        assert_eq!(sig(412.34), "412");
        assert_eq!(sig(1.2345), "1.23");
        assert_eq!(sig(0.5), "0.5");
        assert_eq!(si(858_000.0, "pps"), "858 kpps");
        assert_eq!(si(1_250_000.0, "pps"), "1.25 Mpps");
        assert_eq!(si(12.0, ""), "12");
        assert_eq!(si(1_500_000.0, ""), "1.5 M");
    }
}
