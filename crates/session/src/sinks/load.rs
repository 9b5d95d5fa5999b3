//! `capture --load`: extra work per captured packet, to play a traffic-analysis tool, as the thesis loaded
//! its capturer (seed 000 §6.3.4): `memcpy:N` copies each packet N times (the thesis ran 25 and 50 copies),
//! `gzip:N` compresses every packet into one gzip stream at zlib level N that goes nowhere, as the thesis
//! gzwrite()s each packet to a gzopen()ed /dev/null at level 3 or 9; `zstd:N` does the same with zstd.

use std::hint::black_box;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use capture::Batch;

use crate::sink::{Lane, Sink, SinkReport, Totals};

/// Most copies `memcpy:N` takes (50 already saturates a CPU at moderate rates in the thesis).
const MAX_COPIES: u32 = 100_000;
/// zstd's levels, with the fast (negative) ones as `--compress` takes them.
const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = -7..=22;

/// zlib's levels (gzopen's "wb1".."wb9").
const GZIP_LEVELS: std::ops::RangeInclusive<u32> = 1..=9;

/// What `--load` asks for, parsed from the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadSpec {
    /// Copy each packet's captured bytes this many times into a scratch buffer.
    Memcpy(u32),
    /// Compress each packet into a running zstd stream at this level (discarded).
    Zstd(i32),
    /// Compress each packet into a running gzip (deflate) stream at this zlib level (discarded).
    Gzip(u32),
}

impl FromStr for LoadSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<LoadSpec, String> {
        let usage =
            "use memcpy:N (copy every packet N times, e.g. memcpy:50), gzip:N (compress every packet \
             at zlib level N, e.g. gzip:9) or zstd:N (compress every packet at zstd level N, e.g. zstd:3)";
        let (kind, n) = s.split_once(':').ok_or_else(|| format!("`{s}`: {usage}"))?;
        match kind {
            "memcpy" => match n.parse::<u32>() {
                Ok(c) if (1..=MAX_COPIES).contains(&c) => Ok(LoadSpec::Memcpy(c)),
                _ => Err(format!(
                    "`{s}`: the number of copies must be 1..={MAX_COPIES}; {usage}"
                )),
            },
            "zstd" => match n.parse::<i32>() {
                Ok(l) if ZSTD_LEVELS.contains(&l) && l != 0 => Ok(LoadSpec::Zstd(l)),
                _ => Err(format!(
                    "`{s}`: the zstd level must be 1..=22 (or -7..=-1, fast); {usage}"
                )),
            },
            "gzip" => match n.parse::<u32>() {
                Ok(l) if GZIP_LEVELS.contains(&l) => Ok(LoadSpec::Gzip(l)),
                _ => Err(format!("`{s}`: the zlib level must be 1..=9; {usage}")),
            },
            _ => Err(format!("`{s}`: unknown load `{kind}`; {usage}")),
        }
    }
}

impl std::fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadSpec::Memcpy(n) => write!(f, "memcpy:{n}"),
            LoadSpec::Zstd(l) => write!(f, "zstd:{l}"),
            LoadSpec::Gzip(l) => write!(f, "gzip:{l}"),
        }
    }
}

/// One capture thread's load: its buffers are made once here, never per packet.
enum Load {
    Memcpy {
        copies: u32,
        /// As large as the largest packet a source hands out.
        scratch: Box<[u8]>,
    },
    /// A streaming encoder into io::sink(): like gzwrite() to /dev/null, input is gathered and compressed
    /// block by block in buffers the encoder allocated once.
    Zstd(zstd::stream::write::Encoder<'static, io::Sink>),
    /// gzwrite() to a gzopen()ed /dev/null: deflate with gzip framing, CRC-32 over every byte.
    Gzip(flate2::write::GzEncoder<io::Sink>),
}

impl Load {
    /// Allocate the buffers for `spec`; `max_packet` is the largest packet the source can hand out.
    fn new(spec: LoadSpec, max_packet: usize) -> io::Result<Load> {
        Ok(match spec {
            LoadSpec::Memcpy(copies) => Load::Memcpy {
                copies,
                scratch: vec![0u8; max_packet].into_boxed_slice(),
            },
            LoadSpec::Zstd(level) => {
                Load::Zstd(zstd::stream::write::Encoder::new(io::sink(), level)?)
            }
            LoadSpec::Gzip(level) => Load::Gzip(flate2::write::GzEncoder::new(
                io::sink(),
                flate2::Compression::new(level),
            )),
        })
    }

    /// Do the work for one packet's captured bytes.
    #[inline]
    fn packet(&mut self, data: &[u8]) {
        match self {
            Load::Memcpy { copies, scratch } => {
                let n = data.len().min(scratch.len());
                for _ in 0..*copies {
                    let dst = &mut scratch[..n];
                    dst.copy_from_slice(black_box(&data[..n]));
                    // The optimiser must assume the copy is read, so it can neither drop it nor merge
                    // the N identical copies into one.
                    black_box(dst);
                }
            }
            Load::Zstd(enc) => {
                // Writing to a sink cannot fail.
                let _ = black_box(enc.write_all(black_box(data)));
            }
            Load::Gzip(enc) => {
                let _ = black_box(enc.write_all(black_box(data)));
            }
        }
    }

    /// End the work (the stream's last block and epilogue, as gzclose()).
    fn finish(self) {
        match self {
            Load::Zstd(enc) => {
                let _ = black_box(enc.finish());
            }
            Load::Gzip(enc) => {
                let _ = black_box(enc.finish());
            }
            Load::Memcpy { .. } => {}
        }
    }
}

/// `--load` as a sink: every capture thread does the work on the packets it captured.
pub struct LoadSink {
    spec: LoadSpec,
    max_packet: usize,
    packets: Vec<Arc<AtomicU64>>,
}

impl LoadSink {
    /// `max_packet`: the largest packet a source hands out (the copy buffer's size).
    pub fn new(spec: LoadSpec, max_packet: usize) -> LoadSink {
        LoadSink {
            spec,
            max_packet,
            packets: Vec::new(),
        }
    }
}

struct LoadLane {
    load: Load,
    packets: Arc<AtomicU64>,
}

impl Sink for LoadSink {
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>> {
        let packets = Arc::new(AtomicU64::new(0));
        self.packets.push(Arc::clone(&packets));
        Ok(Box::new(LoadLane {
            load: Load::new(self.spec, self.max_packet)?,
            packets,
        }))
    }

    fn finish(self: Box<Self>, _: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        let packets = self.packets.iter().map(|n| n.load(Relaxed)).sum();
        (SinkReport::Loaded { packets }, None)
    }
}

impl Lane for LoadLane {
    fn batch(&mut self, batch: &Batch<'_>) {
        let mut n = 0;
        for p in batch.packets() {
            self.load.packet(p.data);
            n += 1;
        }
        self.packets.store(self.packets.load(Relaxed) + n, Relaxed);
    }

    fn finish(self: Box<Self>) {
        self.load.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_kinds() {
        assert_eq!("memcpy:50".parse(), Ok(LoadSpec::Memcpy(50)));
        assert_eq!("zstd:3".parse(), Ok(LoadSpec::Zstd(3)));
        assert_eq!("zstd:-5".parse(), Ok(LoadSpec::Zstd(-5)));
        assert_eq!(LoadSpec::Zstd(9).to_string(), "zstd:9");
        assert_eq!("gzip:9".parse(), Ok(LoadSpec::Gzip(9)));
        assert_eq!(LoadSpec::Gzip(3).to_string(), "gzip:3");
    }

    #[test]
    fn bad_values_say_what_is_accepted() {
        for bad in [
            "memcpy",
            "memcpy:",
            "memcpy:0",
            "memcpy:-1",
            "memcpy:x",
            "zstd:0",
            "zstd:99",
            "gzip:0",
            "gzip:10",
            "gz:3",
            "",
        ] {
            let e = bad.parse::<LoadSpec>().unwrap_err();
            assert!(
                e.contains("memcpy:N") && e.contains("gzip:N") && e.contains("zstd:N"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn packets_larger_than_the_scratch_are_copied_up_to_it() {
        let mut l = Load::new(LoadSpec::Memcpy(3), 4).unwrap();
        l.packet(&[1, 2, 3, 4, 5, 6]);
        l.packet(&[9]);
        match &l {
            Load::Memcpy { scratch, .. } => assert_eq!(&scratch[..], &[9, 2, 3, 4]),
            _ => unreachable!(),
        }
    }

    #[test]
    fn zstd_load_takes_packets_of_any_size() {
        let mut l = Load::new(LoadSpec::Zstd(3), 1500).unwrap();
        for i in 0..1000u32 {
            l.packet(&i.to_be_bytes().repeat(i as usize % 400));
        }
        l.packet(&[]);
        l.finish();
    }
}

#[cfg(test)]
mod gzip_tests {
    use super::*;
    use std::io::Read;

    /// The gzip load does zlib's work: the same encoder into a Vec gives a stream that gunzip (an independent
    /// decoder, the system's gzip) turns back into the packets, and level 9 is not cheaper than level 3.
    #[test]
    fn gzip_load_is_a_real_gzip_stream() {
        let packets: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| format!("packet {i} {}", "x".repeat(i as usize % 90)).into_bytes())
            .collect();
        let mut l = Load::new(LoadSpec::Gzip(9), 1500).unwrap();
        for p in &packets {
            l.packet(p);
        }
        l.finish();
        // The same encoder kind, into memory, checked by the system's gzip.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
        for p in &packets {
            enc.write_all(p).unwrap();
        }
        let gz = enc.finish().unwrap();
        let mut child = std::process::Command::new("gzip")
            .arg("-dc")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("gzip is installed");
        child.stdin.take().unwrap().write_all(&gz).unwrap();
        let mut out = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(out, packets.concat());
    }
}
