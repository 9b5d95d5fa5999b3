//! Time series of burst runs (seed 002 §5.2, driverdump's Figure 4): the offered rate from the receiving
//! interface's counters sampled every [`BIN_NS`], and the captured rate from the capture file's time stamps
//! in the same wall-clock bins. Written to DIR/timeline/RUN.csv; the report folds them over the cycle.

use std::fs;
use std::io;
use std::path::Path;

/// Width of one time bin (driverdump's figure has 0.1 s granularity).
pub const BIN_NS: u64 = 100_000_000;

/// The header of DIR/timeline/RUN.csv.
pub const HEADER: &str = "t_ns,phase_s,offered_pps,offered_mbps,captured_pps,captured_mbps";

/// One counter reading: wall-clock ns, rx_packets, rx_bytes.
pub type Sample = (u64, u64, u64);

/// (time stamp ns, frame length) of every packet of a capture file (pcap or pcapng, any byte
/// order, plain or compressed: store's reader).
pub fn pcap_stamps(path: &Path) -> io::Result<Vec<(u64, u32)>> {
    Ok(PcapStamps::open(path)?.collect())
}

/// The (time stamp ns, frame length) of each packet of a capture file, read as a stream: a
/// sampled run's file can hold minutes of top-speed traffic, more than memory should.
pub struct PcapStamps {
    reader: store::CaptureReader,
}

impl PcapStamps {
    pub fn open(path: &Path) -> io::Result<PcapStamps> {
        let reader = store::CaptureReader::open(path).map_err(io::Error::other)?;
        Ok(PcapStamps { reader })
    }
}

impl Iterator for PcapStamps {
    type Item = (u64, u32);

    /// The next packet's stamp and length; damage or a cut last record ends the stream.
    fn next(&mut self) -> Option<(u64, u32)> {
        let p = self.reader.next_packet()?.ok()?;
        Some((p.ts_ns, p.wire_len))
    }
}

/// One bin of the time line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bin {
    pub t_ns: u64,
    pub phase_s: f64,
    pub offered_pps: f64,
    pub offered_mbps: f64,
    pub captured_pps: f64,
    pub captured_mbps: f64,
}

/// Bins of BIN_NS from the counter samples and the captured packets. A counter interval is assigned to the
/// bin its middle falls in (its rate over its own length); captured packets are counted per bin.
pub fn bins(samples: &[Sample], stamps: &[(u64, u32)], period_ns: u64) -> Vec<Bin> {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Vec::new();
    };
    let start = first.0 / BIN_NS * BIN_NS;
    let n = ((last.0 - start) / BIN_NS + 1) as usize;
    let mut out: Vec<Bin> = (0..n)
        .map(|i| {
            let t = start + i as u64 * BIN_NS;
            Bin {
                t_ns: t,
                phase_s: (t % period_ns.max(1)) as f64 / 1e9,
                offered_pps: f64::NAN,
                offered_mbps: f64::NAN,
                captured_pps: 0.0,
                captured_mbps: 0.0,
            }
        })
        .collect();
    for w in samples.windows(2) {
        let (a, b) = (w[0], w[1]);
        let dt = (b.0 - a.0) as f64 / 1e9;
        if dt <= 0.0 {
            continue;
        }
        let i = (((a.0 + b.0) / 2 - start) / BIN_NS) as usize;
        if let Some(bin) = out.get_mut(i) {
            bin.offered_pps = b.1.saturating_sub(a.1) as f64 / dt;
            bin.offered_mbps = b.2.saturating_sub(a.2) as f64 * 8.0 / dt / 1e6;
        }
    }
    let secs = BIN_NS as f64 / 1e9;
    for &(t, len) in stamps {
        if t < start {
            continue;
        }
        if let Some(bin) = out.get_mut(((t - start) / BIN_NS) as usize) {
            bin.captured_pps += 1.0 / secs;
            bin.captured_mbps += len as f64 * 8.0 / secs / 1e6;
        }
    }
    // Bins no counter interval fell in have no offered rate: left out rather than shown as 0.
    out.retain(|b| b.offered_pps.is_finite());
    out
}

/// Write the bins as CSV.
pub fn write(path: &Path, bins: &[Bin]) -> io::Result<()> {
    let mut text = format!("{HEADER}\n");
    for b in bins {
        text.push_str(&format!(
            "{},{:.3},{:.1},{:.3},{:.1},{:.3}\n",
            b.t_ns, b.phase_s, b.offered_pps, b.offered_mbps, b.captured_pps, b.captured_mbps
        ));
    }
    if let Some(d) = path.parent() {
        fs::create_dir_all(d)?;
    }
    fs::write(path, text)
}

/// Read a time line written by [`write`] (lines that do not parse are skipped).
pub fn read(path: &Path) -> io::Result<Vec<Bin>> {
    let text = fs::read_to_string(path)?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<f64> = l
                .split(',')
                .map(|v| v.parse().ok())
                .collect::<Option<_>>()?;
            (f.len() == 6).then(|| Bin {
                t_ns: f[0] as u64,
                phase_s: f[1],
                offered_pps: f[2],
                offered_mbps: f[3],
                captured_pps: f[4],
                captured_mbps: f[5],
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_fold_counters_and_stamps_by_wall_clock() {
        // Counters every 100 ms from t = 10 s: 1000 packets of 100 bytes per interval while on (first
        // 200 ms of a 400 ms period), none while off.
        let t0 = 10_000_000_000u64;
        let mut samples = Vec::new();
        let (mut p, mut b) = (0u64, 0u64);
        for i in 0..=8u64 {
            samples.push((t0 + i * BIN_NS, p, b));
            if (i % 4) < 2 {
                p += 1000;
                b += 100_000;
            }
        }
        // 500 captured packets of 100 bytes in the first bin only.
        let stamps: Vec<(u64, u32)> = (0..500).map(|k| (t0 + k * 1000, 100)).collect();
        let got = bins(&samples, &stamps, 400_000_000);
        assert_eq!(got.len(), 8);
        // 1000 packets per 0.1 s = 10 kpps, 100 kB per 0.1 s = 8 Mb/s.
        assert!((got[0].offered_pps - 10_000.0).abs() < 1e-6, "{:?}", got[0]);
        assert!((got[0].offered_mbps - 8.0).abs() < 1e-9);
        assert_eq!(got[2].offered_pps, 0.0);
        assert!((got[0].captured_pps - 5000.0).abs() < 1e-6);
        assert!((got[0].captured_mbps - 4.0).abs() < 1e-9);
        assert_eq!(got[1].captured_pps, 0.0);
        // 10 s is a multiple of 0.4 s: phases 0, 0.1, 0.2, 0.3, 0, ...
        let phases: Vec<f64> = got.iter().map(|b| b.phase_s).collect();
        assert_eq!(phases, [0.0, 0.1, 0.2, 0.3, 0.0, 0.1, 0.2, 0.3]);
    }

    #[test]
    fn pcap_stamps_read_what_tcpdump_format_says() {
        // A two-packet µs pcap written by hand (little-endian): 1.000002 s 60 bytes, 2.5 s 1514 bytes
        // of which 96 captured.
        let mut f = Vec::new();
        for v in [0xa1b2c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        for (s, us, incl, orig) in [(1u32, 2u32, 60u32, 60u32), (2, 500_000, 96, 1514)] {
            for v in [s, us, incl, orig] {
                f.extend_from_slice(&v.to_le_bytes());
            }
            f.extend(std::iter::repeat_n(0u8, incl as usize));
        }
        let path = std::env::temp_dir().join(format!("lab-timeline-{}.pcap", std::process::id()));
        fs::write(&path, &f).unwrap();
        let got = pcap_stamps(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert_eq!(got, [(1_000_002_000, 60), (2_500_000_000, 1514)]);
    }
}
