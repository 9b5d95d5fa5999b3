//! Time-sampled runs (seed 004, Schultz: throughput sampled after a warm-up, 12 samples of 10 s): the
//! generator sends for `warmup_s + samples × sample_s`; the receiving interface's counters are read at
//! every sample's boundary (offered) and the capture file's time stamps are counted per sample (captured),
//! so each sample has its own capture rate. Written to DIR/samples/RUN.csv; the report takes each sample
//! of a run as one replication of its point (summaries, plots and the ANOVA).

use std::fs;
use std::io;
use std::path::Path;

use super::timeline::Sample;

/// The header of DIR/samples/RUN.csv.
pub const HEADER: &str =
    "sample,start_ns,seconds,offered,offered_bytes,captured,capture_rate,pps,mbps";

/// One sample of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleRow {
    pub sample: u32,
    /// Wall-clock start (CLOCK_REALTIME ns, as the capture file's time stamps).
    pub start_ns: u64,
    pub seconds: f64,
    /// Packets and bytes the receiving interface counted in the sample.
    pub offered: u64,
    pub offered_bytes: u64,
    /// Packets of the capture file time-stamped in the sample.
    pub captured: u64,
}

impl SampleRow {
    pub fn capture_rate(&self) -> Option<f64> {
        (self.offered > 0).then(|| self.captured as f64 / self.offered as f64)
    }
    pub fn pps(&self) -> f64 {
        self.offered as f64 / self.seconds
    }
    /// Offered frame data rate.
    pub fn mbps(&self) -> f64 {
        self.offered_bytes as f64 * 8.0 / self.seconds / 1e6
    }
}

/// Samples from the counter readings at the boundaries (`bounds[k]` starts sample k, the last ends the
/// last sample) and the capture file's (time stamp ns, length) records, taken as a stream.
pub fn per_sample(
    bounds: &[Sample],
    stamps: impl IntoIterator<Item = (u64, u32)>,
) -> Vec<SampleRow> {
    let mut captured = vec![0u64; bounds.len().saturating_sub(1)];
    for (t, _) in stamps {
        // The sample whose [start, end) holds t, if any.
        let k = bounds.partition_point(|b| b.0 <= t);
        if k >= 1 && k < bounds.len() {
            captured[k - 1] += 1;
        }
    }
    bounds
        .windows(2)
        .enumerate()
        .map(|(k, w)| SampleRow {
            sample: k as u32,
            start_ns: w[0].0,
            seconds: w[1].0.saturating_sub(w[0].0) as f64 / 1e9,
            offered: w[1].1.saturating_sub(w[0].1),
            offered_bytes: w[1].2.saturating_sub(w[0].2),
            captured: captured[k],
        })
        .filter(|r| r.seconds > 0.0)
        .collect()
}

pub fn write(path: &Path, rows: &[SampleRow]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut text = format!("{HEADER}\n");
    for r in rows {
        text.push_str(&format!(
            "{},{},{:.6},{},{},{},{},{:.3},{:.6}\n",
            r.sample,
            r.start_ns,
            r.seconds,
            r.offered,
            r.offered_bytes,
            r.captured,
            r.capture_rate()
                .map_or(String::new(), |c| format!("{c:.6}")),
            r.pps(),
            r.mbps()
        ));
    }
    fs::write(path, text)
}

/// Read DIR/samples/RUN.csv (lines that do not parse are left out).
pub fn read(path: &Path) -> io::Result<Vec<SampleRow>> {
    let text = fs::read_to_string(path)?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some(SampleRow {
                sample: f.first()?.parse().ok()?,
                start_ns: f.get(1)?.parse().ok()?,
                seconds: f.get(2)?.parse().ok()?,
                offered: f.get(3)?.parse().ok()?,
                offered_bytes: f.get(4)?.parse().ok()?,
                captured: f.get(5)?.parse().ok()?,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_split_counters_and_stamps_at_the_boundaries() {
        // Boundaries at 10 s, 11 s, 12 s; 100 then 300 packets offered; stamps: 2 before, 3 + 1 inside.
        let s = 1_000_000_000u64;
        let bounds = [
            (10 * s, 1000, 60_000),
            (11 * s, 1100, 66_000),
            (12 * s, 1400, 84_000),
        ];
        let stamps = [
            (9 * s, 60),
            (10 * s - 1, 60),
            (10 * s, 60),
            (10 * s + 5, 60),
            (11 * s - 1, 60),
            (11 * s, 60),
            (12 * s, 60),
        ];
        let rows = per_sample(&bounds, stamps);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].offered, rows[0].captured), (100, 3));
        assert_eq!((rows[1].offered, rows[1].captured), (300, 1));
        assert_eq!(rows[1].pps(), 300.0);
        assert_eq!(rows[1].mbps(), 18_000.0 * 8.0 / 1e6);
        let path = std::env::temp_dir().join(format!("lab-samples-{}.csv", std::process::id()));
        write(&path, &rows).unwrap();
        assert_eq!(read(&path).unwrap(), rows);
        let _ = fs::remove_file(&path);
    }
}
