//! Named distributions and the spec parser (`imix`, `fixed:46`, `file:PATH`, …).
//!
//! All sizes are **IP packet lengths** (IP header + payload), as everywhere in this module;
//! an untagged Ethernet frame is 14 bytes longer on the wire plus the 4-byte FCS, and frames
//! below 64 bytes (with FCS) are padded. Definitions and sources: `docs/distributions.md`.

use std::path::Path;

use super::error::{DistError, Result};
use super::histogram::Histogram;
use super::input::{read_files, InputKind, ReadOptions};

/// Spec of the distribution used when none is given.
pub const DEFAULT_SPEC: &str = "internet";

/// Ethernet header (14) + FCS (4): what an untagged frame adds to the IP packet.
pub const ETHERNET_OVERHEAD: u16 = 18;

/// The accepted specs, for help texts: (syntax, meaning).
pub const SPECS: &[(&str, &str)] = &[
    (
        "internet",
        "bimodal Internet mix after Sinha et al. 2005/2007 and CAIDA (default)",
    ),
    ("imix", "simple IMIX: 7 × 40, 4 × 576, 1 × 1500 IP bytes"),
    (
        "rfc6985:GENOME[,h=N][,z=N]",
        "RFC 6985 IMIX genome, letters a–g (frame sizes incl. FCS), replayed in order",
    ),
    ("fixed:N", "every packet N IP bytes"),
    (
        "mix:A,B,...",
        "the listed IP sizes in turn: equal shares (seed 002's mixed burst phase)",
    ),
    ("uniform:A-B", "IP sizes A..=B, equally likely"),
    ("file:PATH | dist:PATH", "a `<size> <count>` file"),
    ("sizes:PATH", "a file of one size per line"),
    ("trace:PATH", "IP sizes counted from a pcap/pcapng trace"),
];

/// A packet-size distribution: a histogram, a name, and for RFC 6985 genomes the order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Distribution {
    /// The spec or file it came from.
    pub name: String,
    /// Size → count.
    pub histogram: Histogram,
    /// A fixed repeating order of sizes (RFC 6985 genomes); exact mode replays it.
    pub sequence: Option<Vec<u16>>,
}

impl Distribution {
    /// Wraps a histogram (from inputs or a live count).
    pub fn from_histogram(name: impl Into<String>, histogram: Histogram) -> Distribution {
        Distribution {
            name: name.into(),
            histogram,
            sequence: None,
        }
    }

    /// Parses a spec (see [`SPECS`]) with default read options for files.
    pub fn from_spec(spec: &str) -> Result<Distribution> {
        Distribution::from_spec_with(spec, &ReadOptions::default())
    }

    /// Parses a spec; files are read with `opts` (field separator, maximum size).
    pub fn from_spec_with(spec: &str, opts: &ReadOptions) -> Result<Distribution> {
        let bad = |msg: String| DistError::Spec {
            spec: spec.to_string(),
            msg,
        };
        let (head, arg) = match spec.split_once(':') {
            Some((h, a)) => (h, Some(a)),
            None => (spec, None),
        };
        let file = |kind: InputKind| -> Result<Distribution> {
            let path = arg
                .filter(|a| !a.is_empty())
                .ok_or_else(|| bad("give a path after the colon".into()))?;
            let (histogram, _) = read_files(kind, &[Path::new(path)], opts)?;
            Ok(Distribution::from_histogram(spec, histogram))
        };
        match (head, arg) {
            ("internet", None) => Ok(Distribution::internet()),
            ("imix", None) => Ok(Distribution::imix()),
            ("fixed", Some(a)) => Ok(Distribution::fixed(parse_ip_size(a).map_err(bad)?)),
            ("uniform", Some(a)) => {
                let (lo, hi) = a
                    .split_once('-')
                    .ok_or_else(|| bad("write the range as A-B, e.g. uniform:46-1500".into()))?;
                let (lo, hi) = (
                    parse_ip_size(lo).map_err(bad)?,
                    parse_ip_size(hi).map_err(bad)?,
                );
                if lo > hi {
                    return Err(bad(format!(
                        "range {lo}-{hi} is empty: put the smaller size first"
                    )));
                }
                Ok(Distribution::uniform(lo, hi))
            }
            ("rfc6985", Some(a)) => rfc6985(a).map_err(bad),
            ("mix", Some(a)) => mix(a).map_err(bad),
            ("file" | "dist", Some(_)) => file(InputKind::Dist),
            ("sizes", Some(_)) => file(InputKind::Sizes),
            ("trace", Some(_)) => file(InputKind::Trace),
            _ => Err(bad(format!(
                "unknown distribution; use one of: {}",
                SPECS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// Every packet `size` IP bytes (`fixed:46` → 60-byte frames, 64 with FCS).
    pub fn fixed(size: u16) -> Distribution {
        Distribution::from_histogram(format!("fixed:{size}"), Histogram::from_pairs([(size, 1)]))
    }

    /// IP sizes `lo..=hi`, equally likely.
    pub fn uniform(lo: u16, hi: u16) -> Distribution {
        Distribution::from_histogram(
            format!("uniform:{lo}-{hi}"),
            Histogram::from_pairs((lo..=hi).map(|s| (s, 1))),
        )
    }

    /// The "simple IMIX": 7 : 4 : 1 packets of 40, 576 and 1500 **IP** bytes (mean 340.33 B).
    ///
    /// On untagged Ethernet these are 64 (40 + 18, padded from 58), 594 and 1518-byte frames
    /// counting the FCS, or 60/590/1514 without it (the sizes TRex's `imix.py` profile sends at
    /// 28 : 16 : 4 pps). The mix is the test-equipment vendors' "simple IMIX" (Agilent/Ixia/
    /// Spirent), derived from the tri-modal 40/576/1500 distributions measured around 2000
    /// (CAIDA, NASA Ames Internet Exchange, 1999–2000; Claffy, Miller, Thompson, INET '98 —
    /// seed 000's [CMT98]). RFC 6985 §1 uses "IMIX" for such mixes in general.
    pub fn imix() -> Distribution {
        Distribution::from_histogram(
            "imix",
            Histogram::from_pairs([(40, 7), (576, 4), (1500, 1)]),
        )
    }

    /// The default "internet" mix: bimodal at 40 and 1500 IP bytes (mean ≈ 637 B).
    ///
    /// A synthetic table shaped after published measurements, not a trace. Shares (counts per
    /// 1 000 384 packets):
    ///
    /// | IP size | count | share | source |
    /// |---|---|---|---|
    /// | 40 | 400 000 | 40 % | Sinha, Papadopoulos, Heidemann, "Internet Packet Size Distributions: Some Observations", USC/ISI TR ISI-TR-2007-643 (2005 data): "mostly bimodal at 40B and 1500B (at 40% and 20% of packets)" |
    /// | 1500 | 200 000 | 20 % | same |
    /// | 52 | 50 000 | 5 % | seed 000 Fig. 4.1 (Munich uplink, 2005): the most frequent sizes are 40, 52 and 1500 (52 = TCP ACK with timestamps) |
    /// | 576, 552 | 30 000, 10 000 | 3 %, 1 % | the older 576/552 modes (Claffy, Miller, Thompson, INET '98; CAIDA AIX 1999–2000), shrinking per Sinha et al. |
    /// | 1300 | 20 000 | 2 % | Sinha et al.: a mode near 1300 B (VPN MTUs) in some traces |
    /// | 41–64 except 52 (23 sizes) | 2 000 each | 4.6 % | seed 000 §4.2.1: peak at 40–64 |
    /// | 1420–1499 (80 sizes) | 1 500 each | 12 % | seed 000 §4.2.1: peak at 1420–1500 |
    /// | 65–1419 except 552, 576, 1300 (1 352 sizes) | 92 each | 12.4 % | flat floor for everything else |
    ///
    /// The shares inside the two peaks and the flat floor are our choice; only the positions
    /// of the peaks and the 40 %/20 % modes come from the sources. The floor is kept to
    /// 12.4 % so that 1 M exact draws are within total-variation distance ≈ 0.0075 of the
    /// table by sampling noise alone (a 1 M-packet check against 0.01 stays meaningful).
    pub fn internet() -> Distribution {
        let mut pairs: Vec<(u16, u64)> = vec![
            (40, 400_000),
            (1500, 200_000),
            (52, 50_000),
            (576, 30_000),
            (552, 10_000),
            (1300, 20_000),
        ];
        pairs.extend((41..=64).filter(|&s| s != 52).map(|s| (s, 2_000)));
        pairs.extend((1420..=1499).map(|s| (s, 1_500)));
        pairs.extend(
            (65..=1419)
                .filter(|s| ![552, 576, 1300].contains(s))
                .map(|s| (s, 92)),
        );
        Distribution::from_histogram("internet", Histogram::from_pairs(pairs))
    }

    /// An RFC 6985 IMIX genome, e.g. `aaafg`: one packet per letter, replayed in that order.
    ///
    /// RFC 6985 §4 letters are **Ethernet frame sizes including the FCS** (the RFC 2544 sizes):
    ///
    /// | letter | frame | IP (frame − 18) |
    /// |---|---|---|
    /// | a | 64 | 46 |
    /// | b | 128 | 110 |
    /// | c | 256 | 238 |
    /// | d | 512 | 494 |
    /// | e | 1024 | 1006 |
    /// | f | 1280 | 1262 |
    /// | g | 1518 | 1500 |
    /// | h | MTU-sized frame: give it as `h=FRAME` | FRAME − 18 |
    /// | z | custom: give it as `z=FRAME` | FRAME − 18 |
    ///
    /// Sizes are converted to IP lengths for untagged Ethernet II (14-byte header + 4-byte
    /// FCS); a VLAN tag would take 4 more bytes of the frame.
    pub fn rfc6985(
        genome: &str,
        h_frame: Option<u16>,
        z_frame: Option<u16>,
    ) -> Result<Distribution> {
        let spec = format!("rfc6985:{genome}");
        let bad = |msg: String| DistError::Spec {
            spec: spec.clone(),
            msg,
        };
        let mut seq = Vec::with_capacity(genome.len());
        for ch in genome.chars() {
            let frame = match ch {
                'a' => 64,
                'b' => 128,
                'c' => 256,
                'd' => 512,
                'e' => 1024,
                'f' => 1280,
                'g' => 1518,
                'h' => h_frame.ok_or_else(|| {
                    bad("letter h (MTU) needs its frame size: add ,h=FRAME".into())
                })?,
                'z' => z_frame.ok_or_else(|| {
                    bad("letter z (custom) needs its frame size: add ,z=FRAME".into())
                })?,
                _ => return Err(bad(format!("{ch:?} is not a genome letter (a–h, z)"))),
            };
            seq.push(frame_to_ip(frame).map_err(bad)?);
        }
        if seq.is_empty() {
            return Err(bad(
                "the genome is empty: give letters, e.g. rfc6985:aaafg".into()
            ));
        }
        let mut histogram = Histogram::new();
        for &s in &seq {
            histogram.add_one(s);
        }
        Ok(Distribution {
            name: spec,
            histogram,
            sequence: Some(seq),
        })
    }
}

/// Parses the argument of `mix:`: IP sizes separated by commas, sent in that order over and over, so every
/// listed size gets an equal share (seed 002's mixed phase: one generator per size, all at the same rate).
fn mix(arg: &str) -> std::result::Result<Distribution, String> {
    let seq = arg
        .split(',')
        .map(parse_ip_size)
        .collect::<std::result::Result<Vec<u16>, String>>()
        .map_err(|e| format!("{e}; write the IP sizes with commas, e.g. mix:50,186,1500"))?;
    let mut histogram = Histogram::new();
    for &s in &seq {
        histogram.add_one(s);
    }
    Ok(Distribution {
        name: format!("mix:{arg}"),
        histogram,
        sequence: Some(seq),
    })
}

/// IP length of an untagged Ethernet frame of `frame` bytes including FCS.
fn frame_to_ip(frame: u16) -> std::result::Result<u16, String> {
    if frame < 64 {
        return Err(format!(
            "frame size {frame} is below the Ethernet minimum of 64 bytes (with FCS)"
        ));
    }
    Ok(frame - ETHERNET_OVERHEAD)
}

/// Parses the argument of `rfc6985:`: `GENOME[,h=FRAME][,z=FRAME]`.
fn rfc6985(arg: &str) -> std::result::Result<Distribution, String> {
    let mut parts = arg.split(',');
    let genome = parts.next().unwrap_or_default().trim();
    let (mut h, mut z) = (None, None);
    for p in parts {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("{p:?}: options are h=FRAME and z=FRAME"))?;
        let v: u16 = v
            .trim()
            .parse()
            .map_err(|_| format!("{v:?} is not a frame size in bytes"))?;
        match k.trim() {
            "h" => h = Some(v),
            "z" => z = Some(v),
            _ => {
                return Err(format!(
                    "unknown option {k:?}: options are h=FRAME and z=FRAME"
                ))
            }
        }
    }
    Distribution::rfc6985(genome, h, z).map_err(|e| match e {
        DistError::Spec { msg, .. } => msg,
        other => other.to_string(),
    })
}

/// Parses an IP size for `fixed:`/`uniform:`: 1..=65535.
fn parse_ip_size(s: &str) -> std::result::Result<u16, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if (1..=65535).contains(&v) => Ok(v as u16),
        Ok(v) => Err(format!(
            "size {v} is out of range: IP sizes are 1..=65535 bytes"
        )),
        Err(_) => Err(format!("{s:?} is not a size in bytes")),
    }
}
