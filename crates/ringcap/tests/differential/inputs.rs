//! The capture files of the matrix, made by other tools (text2pcap, tcpdump, editcap, mergecap,
//! zstd, lz4, gzip, head) from packets built in the test, and by the test's own writers for the
//! edge cases no tool writes on request. Each carries its provenance: the commands that made it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::capfile::{self, hexdump, NgWriter, PcapWriter};
use super::packets::{self, Rng};
use super::sh;

/// Which reference and which ringcap output format a comparison uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prec {
    /// tcpdump -w as it is (µs pcap); ringcap -F pcap.
    Micro,
    /// tcpdump --time-stamp-precision=nano -w (ns pcap); ringcap's default -w (pcap-ns).
    Nano,
}

pub struct Input {
    /// Short unique name (its directory under the work dir).
    pub name: String,
    /// What it exercises: failures are summarised by this and by what differed.
    pub class: String,
    /// What ringcap queries (a file, or a directory for a store of several files).
    pub store: PathBuf,
    /// What tcpdump reads: the same file, its plain original, or the store merged by mergecap.
    pub reference: PathBuf,
    /// (reference precision, ringcap output precision) pairs to compare.
    pub checks: Vec<(Prec, Prec)>,
    /// Its timestamps are ordinary (increasing, representable): time windows apply.
    pub windows: bool,
    /// The commands (or the writer) that made it, for the failure report.
    pub provenance: Vec<String>,
}

/// Everything the generators share.
pub struct Gen {
    pub dir: PathBuf,
    pub seed: u64,
    /// Packets per generated file.
    pub n: usize,
    pub long: bool,
    pub inputs: Vec<Input>,
}

/// Timestamps in ns: increasing by up to 3 ms, with some equal neighbours, from a start in
/// November 2026.
fn times(rng: &mut Rng, n: usize, micro_aligned: bool) -> Vec<u64> {
    let mut t = 1_795_000_000_000_000_000u64 + rng.below(1_000_000) * 1_000_000_000;
    (0..n)
        .map(|_| {
            if !rng.pct(8) {
                t += rng.range(1, 3_000_000);
            }
            if micro_aligned {
                t - t % 1000
            } else {
                t
            }
        })
        .collect()
}

impl Gen {
    fn sub(&self, name: &str) -> PathBuf {
        let d = self.dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Runs a shell line that must succeed (making inputs is not what is tested), recording it.
    fn make(&self, prov: &mut Vec<String>, line: &str) {
        let o = sh(line);
        assert!(
            o.ok(),
            "making an input failed: {line}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        prov.push(line.to_string());
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        name: &str,
        class: &str,
        store: PathBuf,
        reference: PathBuf,
        checks: &[(Prec, Prec)],
        windows: bool,
        provenance: Vec<String>,
    ) {
        self.inputs.push(Input {
            name: name.to_string(),
            class: class.to_string(),
            store,
            reference,
            checks: checks.to_vec(),
            windows,
            provenance,
        });
    }

    /// A hex dump of `n` packets for link type `dlt` (what text2pcap reads), and the packets.
    fn dump(
        &self,
        rng: &mut Rng,
        dlt: u32,
        n: usize,
        micro: bool,
    ) -> (String, Vec<(u64, Vec<u8>)>) {
        let ts = times(rng, n, micro);
        let mut text = String::new();
        let mut pk = Vec::new();
        for t in ts {
            let f = packets::frame(rng, dlt);
            hexdump(&mut text, t, &f);
            pk.push((t, f));
        }
        (text, pk)
    }

    /// text2pcap of freshly generated packets: `-F fmt -l dlt`.
    fn text2pcap(&self, prov: &mut Vec<String>, rng: &mut Rng, dlt: u32, fmt: &str, out: &Path) {
        let (text, _) = self.dump(rng, dlt, self.n, false);
        let txt = out.with_extension("txt");
        std::fs::write(&txt, text).unwrap();
        self.make(
            prov,
            &format!(
                "TZ=UTC text2pcap -q -t ISO -F {fmt} -l {dlt} {} {}",
                txt.display(),
                out.display()
            ),
        );
    }

    pub fn all(&mut self) {
        let both = [(Prec::Nano, Prec::Nano), (Prec::Micro, Prec::Micro)];
        let nano = [(Prec::Nano, Prec::Nano)];
        let mut rng = Rng::new(self.seed);

        // Ethernet packets with ns stamps, written by text2pcap (pcapng), then by tcpdump at µs
        // and ns, and converted by editcap.
        let d = self.sub("tools");
        let mut base_prov = Vec::new();
        let base = d.join("base.pcapng");
        self.text2pcap(&mut base_prov, &mut rng, 1, "pcapng", &base);
        self.push(
            "text2pcap-pcapng",
            "text2pcap -F pcapng (ns)",
            base.clone(),
            base.clone(),
            &both,
            true,
            base_prov.clone(),
        );
        let variants: [(&str, &str, &str, &str); 6] = [
            (
                "tcpdump-us",
                "us.pcap",
                "tcpdump -w (µs)",
                "tcpdump -r {base} -w {out}",
            ),
            (
                "tcpdump-ns",
                "ns.pcap",
                "tcpdump -w (ns)",
                "tcpdump --time-stamp-precision=nano -r {base} -w {out}",
            ),
            (
                "editcap-pcapng",
                "ng.pcapng",
                "editcap -F pcapng",
                "editcap -F pcapng {dir}/ns.pcap {out}",
            ),
            (
                "editcap-nsecpcap",
                "nsec.pcap",
                "editcap -F nsecpcap",
                "editcap -F nsecpcap {dir}/us.pcap {out}",
            ),
            (
                "editcap-pcap",
                "back.pcap",
                "editcap -F pcap",
                "editcap -F pcap {dir}/ng.pcapng {out}",
            ),
            (
                "editcap-snap96",
                "snap96.pcap",
                "editcap -s 96 (caplen < len)",
                "editcap -F pcap -s 96 {dir}/us.pcap {out}",
            ),
        ];
        for (name, file, class, cmd) in variants {
            let out = d.join(file);
            let line = cmd
                .replace("{base}", &base.display().to_string())
                .replace("{dir}", &d.display().to_string())
                .replace("{out}", &out.display().to_string());
            let mut prov = base_prov.clone();
            self.make(&mut prov, &format!("{line} 2>/dev/null"));
            self.push(name, class, out.clone(), out, &both, true, prov);
        }
        // The modified pcap of old Linux tcpdumps (magic 0xa1b2cd34, longer record headers):
        // libpcap reads it.
        let out = d.join("mod.pcap");
        let mut prov = base_prov.clone();
        self.make(
            &mut prov,
            &format!(
                "editcap -F modpcap {}/us.pcap {}",
                d.display(),
                out.display()
            ),
        );
        self.push(
            "editcap-modpcap",
            "editcap -F modpcap",
            out.clone(),
            out,
            &nano,
            true,
            prov,
        );

        // A dozen link types from text2pcap -l.
        let d = self.sub("linktypes");
        let mut lt_files = Vec::new();
        for (dlt, lname) in packets::LINKTYPES {
            let fmts: &[&str] = if self.long {
                &["pcap", "nsecpcap", "pcapng"]
            } else {
                &["pcap"]
            };
            for fmt in fmts {
                let out = d.join(format!(
                    "lt{dlt}-{fmt}.{}",
                    if *fmt == "pcapng" { "pcapng" } else { "pcap" }
                ));
                let mut prov = Vec::new();
                self.text2pcap(&mut prov, &mut rng, dlt, fmt, &out);
                if *fmt == "pcap" {
                    lt_files.push(out.clone());
                }
                self.push(
                    &format!("lt{dlt}-{fmt}"),
                    &format!("link type {dlt} {lname}"),
                    out.clone(),
                    out,
                    &nano,
                    true,
                    prov,
                );
            }
        }
        // Different link types merged into one pcapng: libpcap reads the first interface's
        // packets and fails at the first interface of another type.
        let out = d.join("mixed.pcapng");
        let mut prov = Vec::new();
        self.make(
            &mut prov,
            &format!(
                "mergecap -w {} {} {} {}",
                out.display(),
                lt_files[0].display(),
                lt_files[4].display(),
                lt_files[2].display()
            ),
        );
        self.push(
            "mergecap-mixed",
            "mergecap of link types 1, 113, 101 into pcapng",
            out.clone(),
            out,
            &nano,
            true,
            prov,
        );

        self.compressed(&mut rng, &base_prov);
        self.edges(&mut rng, &base_prov);
        self.store(&mut rng);
    }

    /// Compressed by the external tools, whole and in pieces whose frame boundaries fall
    /// anywhere in the records (some pieces smaller than one record).
    fn compressed(&mut self, rng: &mut Rng, base_prov: &[String]) {
        let d = self.sub("compressed");
        let tools = self.dir.join("tools");
        let us = tools.join("us.pcap");
        let ng = tools.join("ng.pcapng");
        let mut jobs: Vec<(&str, &Path, &str, bool)> = vec![
            ("zstd", &us, "zstd -q -c", true),
            ("lz4", &us, "lz4 -q -c", true),
            ("gzip", &us, "gzip -c", true),
            ("zstd", &ng, "zstd -q -c", true),
            ("zstd", &us, "zstd -q -19 -c", false),
        ];
        if self.long {
            jobs.extend([
                ("lz4", &ng as &Path, "lz4 -q -c", true),
                ("gzip", &ng, "gzip -c", true),
                ("lz4", &us, "lz4 -q -B4 -c", false),
                ("gzip", &us, "gzip -9 -c", false),
                ("zstd", &ng, "zstd -q -c", false),
            ]);
        }
        for (k, (ext, src, tool, pieces)) in jobs.into_iter().enumerate() {
            let stem = src.file_name().unwrap().to_string_lossy().to_string();
            let name = format!("{}-{}-{k}", ext, if pieces { "pieces" } else { "whole" });
            // Named as ringcap (and everyone) names them: .zst, .lz4, .gz.
            let suffix = match ext {
                "zstd" => "zst",
                "gzip" => "gz",
                e => e,
            };
            let out = d.join(format!("{k}-{stem}.{suffix}"));
            let mut prov = base_prov.to_vec();
            if pieces {
                let size = std::fs::metadata(src).unwrap().len() as usize;
                let mut sizes = Vec::new();
                let mut left = size;
                while left > 0 {
                    let n = if rng.pct(30) {
                        rng.range(1, 200)
                    } else {
                        rng.range(1024, 16384)
                    } as usize;
                    sizes.push(n.min(left));
                    left -= n.min(left);
                }
                let list = d.join(format!("{k}-pieces.txt"));
                let text: String = sizes.iter().map(|s| format!("{s}\n")).collect();
                std::fs::write(&list, text).unwrap();
                // Each piece compressed on its own; the frames (members) concatenated.
                self.make(
                    &mut prov,
                    &format!(
                        "exec 3<{src}; while read n; do head -c $n <&3 | {tool}; done < {list} > {out}",
                        src = src.display(),
                        list = list.display(),
                        out = out.display()
                    ),
                );
            } else {
                self.make(
                    &mut prov,
                    &format!("{tool} {} > {}", src.display(), out.display()),
                );
            }
            let class = format!(
                "{} ({})",
                if pieces {
                    format!("{ext} pieces of 1 B-16 KiB")
                } else {
                    format!("{ext} whole")
                },
                if stem.ends_with("pcapng") {
                    "pcapng"
                } else {
                    "pcap"
                }
            );
            self.push(
                &name,
                &class,
                out,
                src.to_path_buf(),
                &[(Prec::Nano, Prec::Nano)],
                true,
                prov,
            );
        }
    }

    /// Files no tool writes on request: cut files, odd record fields, odd timestamps, other byte
    /// orders, pcapng resolutions and block kinds.
    fn edges(&mut self, rng: &mut Rng, base_prov: &[String]) {
        let both = [(Prec::Nano, Prec::Nano), (Prec::Micro, Prec::Micro)];
        let nano = [(Prec::Nano, Prec::Nano)];
        let d = self.sub("edges");
        let tools = self.dir.join("tools");

        // Cut with head -c: inside a record header, inside a record's data, inside a pcapng block.
        let us = tools.join("us.pcap");
        let bytes = std::fs::read(&us).unwrap();
        let p = capfile::read_pcap(&bytes).unwrap();
        let k = p.recs.len() * 2 / 3;
        let cuts = [
            ("cut-header", p.offsets[k] + 9, "cut inside a record header"),
            (
                "cut-data",
                p.offsets[k] + 16 + (p.recs[k].caplen as usize).max(2) / 2,
                "cut inside a record's data",
            ),
        ];
        for (name, at, class) in cuts {
            let out = d.join(format!("{name}.pcap"));
            let mut prov = base_prov.to_vec();
            self.make(
                &mut prov,
                &format!("head -c {at} {} > {}", us.display(), out.display()),
            );
            self.push(name, class, out.clone(), out, &nano, true, prov);
        }
        let ng = tools.join("ng.pcapng");
        let nb = std::fs::read(&ng).unwrap();
        let epbs: Vec<_> = capfile::pcapng_blocks(&nb)
            .into_iter()
            .filter(|b| b.1 == 6)
            .collect();
        let (off, _, len) = epbs[epbs.len() * 2 / 3];
        let out = d.join("cut-block.pcapng");
        let mut prov = base_prov.to_vec();
        self.make(
            &mut prov,
            &format!(
                "head -c {} {} > {}",
                off + len / 2,
                ng.display(),
                out.display()
            ),
        );
        self.push(
            "cut-pcapng",
            "pcapng cut inside a block",
            out.clone(),
            out,
            &nano,
            true,
            prov,
        );

        let frames: Vec<Vec<u8>> = (0..self.n / 4).map(|_| packets::frame(rng, 1)).collect();
        let ts = times(rng, frames.len(), true);
        let secs = |t: u64| (t / 1_000_000_000) as u32;
        let usec = |t: u64| (t % 1_000_000_000 / 1000) as u32;

        // caplen 0 on every 5th record (the wire length kept).
        let mut w = PcapWriter::new(false, false, 65535, 1);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let data: &[u8] = if i % 5 == 2 { &[] } else { f };
            w.rec(secs(*t), usec(*t), data, f.len() as u32);
        }
        self.write(
            &d,
            "caplen0",
            "caplen 0 records",
            w.buf,
            &both,
            true,
            "PcapWriter: µs LE, snaplen 65535, every 5th record caplen 0",
        );

        // TCP, UDP and SCTP cut after the source port (caplen ends 2 bytes into the transport
        // header): libpcap's `port`/`portrange` still match the source port it has (the fuzz
        // target query_vs_libpcap found the index leaving them out).
        let ports = [53u16, 80, 443, 1000, 1005, 1010, 4000];
        let mut w = PcapWriter::new(false, false, 262144, 1);
        for (i, t) in ts.iter().enumerate() {
            let proto = [6u8, 17, 132][i % 3];
            let (sp, dp) = (ports[i % 7], ports[(i / 7) % 7]);
            let mut f = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 8, 0];
            f.extend_from_slice(&[0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, proto, 0, 0]);
            f.extend_from_slice(&[10, 0, 0, 1 + (i % 3) as u8, 10, 0, 0, 2]);
            f.extend_from_slice(&sp.to_be_bytes());
            f.extend_from_slice(&dp.to_be_bytes());
            f.extend_from_slice(&[0; 22]);
            let keep = if i % 2 == 0 { 36 } else { f.len() };
            w.rec(secs(*t), usec(*t), &f[..keep], f.len() as u32);
        }
        self.write(
            &d,
            "ports-cut",
            "transport header cut after the source port",
            w.buf,
            &both,
            false,
            "PcapWriter: µs LE, Ethernet IPv4 TCP/UDP/SCTP, every 2nd record cut 2 bytes into its transport header",
        );

        // Records longer than the header's snaplen (128), others cut to it.
        let mut w = PcapWriter::new(false, false, 128, 1);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let keep = if i % 3 == 0 {
                f.len()
            } else {
                f.len().min(128)
            };
            w.rec(secs(*t), usec(*t), &f[..keep], f.len() as u32);
        }
        self.write(
            &d,
            "caplen-over-snaplen",
            "caplen > snaplen",
            w.buf,
            &both,
            true,
            "PcapWriter: µs LE, snaplen 128, every 3rd record whole (caplen up to 1500)",
        );

        // Fractions of a second ≥ 10^6 µs that still fit a pcap-ns field when multiplied by 1000.
        let odd_us = [1_000_000u32, 1_000_001, 1_999_999, 3_000_000, 4_294_967];
        let mut w = PcapWriter::new(false, false, 262144, 1);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let frac = if i % 4 == 1 {
                odd_us[i / 4 % odd_us.len()]
            } else {
                usec(*t)
            };
            w.rec(secs(*t), frac, f, f.len() as u32);
        }
        // The reference at µs: libpcap passes µs fields through untouched (at ns it multiplies).
        let micro_both = [(Prec::Micro, Prec::Nano), (Prec::Micro, Prec::Micro)];
        self.write(&d, "usec-over-1e6", "ts_usec ≥ 1 000 000", w.buf, &micro_both, false, "PcapWriter: µs LE, every 4th ts_usec one of 1000000, 1000001, 1999999, 3000000, 4294967");

        // ts_usec 0xFFFFFFFF: only a µs result can carry it (ringcap -F pcap).
        let mut w = PcapWriter::new(false, false, 262144, 1);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let frac = match i % 6 {
                1 => u32::MAX,
                4 => u32::MAX - 1,
                _ => usec(*t),
            };
            w.rec(secs(*t), frac, f, f.len() as u32);
        }
        self.write(
            &d,
            "usec-ffffffff",
            "ts_usec 0xFFFFFFFF",
            w.buf,
            &[(Prec::Micro, Prec::Micro)],
            false,
            "PcapWriter: µs LE, ts_usec 0xFFFFFFFF and 0xFFFFFFFE on every 6th record (+1, +4)",
        );

        // Seconds around 2^31 (where a signed reader turns negative) and up to 2^32 - 1.
        let edge_secs = [
            i32::MAX as u32 - 1,
            i32::MAX as u32,
            1 << 31,
            (1 << 31) + 1,
            u32::MAX - 1,
            u32::MAX,
        ];
        let mut w = PcapWriter::new(false, false, 262144, 1);
        for (i, f) in frames.iter().take(36).enumerate() {
            w.rec(
                edge_secs[i / 6],
                (i as u32 % 6) * 123_457,
                f,
                f.len() as u32,
            );
        }
        self.write(&d, "secs-2^31-2^32", "seconds near 2^31 and 2^32-1", w.buf, &both, false, "PcapWriter: µs LE, seconds 2^31-2, 2^31-1, 2^31, 2^31+1, 2^32-2, 2^32-1 (6 records each)");

        // ns fractions ≥ 10^9, up to 0xFFFFFFFF.
        let odd_ns = [999_999_999u32, 1_000_000_000, 2_500_000_000, u32::MAX];
        let mut w = PcapWriter::new(false, true, 262144, 1);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let frac = if i % 4 == 3 {
                odd_ns[i / 4 % odd_ns.len()]
            } else {
                (*t % 1_000_000_000) as u32
            };
            w.rec(secs(*t), frac, f, f.len() as u32);
        }
        self.write(
            &d,
            "nsec-over-1e9",
            "ts_nsec ≥ 1 000 000 000",
            w.buf,
            &both,
            false,
            "PcapWriter: ns LE, every 4th ts_nsec one of 999999999, 10^9, 2.5*10^9, 0xFFFFFFFF",
        );

        // Big-endian files: Ethernet at µs; BSD loopback at ns with the families in big-endian,
        // as a big-endian machine writes them.
        let mut w = PcapWriter::new(true, false, 262144, 1);
        for (f, t) in frames.iter().zip(&ts) {
            w.rec(secs(*t), usec(*t), f, f.len() as u32);
        }
        self.write(
            &d,
            "big-endian-us",
            "big-endian pcap",
            w.buf,
            &both,
            true,
            "PcapWriter: µs big-endian, Ethernet",
        );
        let mut w = PcapWriter::new(true, true, 262144, 0);
        for t in &ts {
            let mut f = packets::frame(rng, 0);
            let af = u32::from_le_bytes(f[0..4].try_into().unwrap());
            f[0..4].copy_from_slice(&af.to_be_bytes());
            w.rec(
                secs(*t),
                (*t % 1_000_000_000) as u32 + 7,
                &f,
                f.len() as u32,
            );
        }
        self.write(
            &d,
            "big-endian-null-ns",
            "big-endian pcap, DLT_NULL",
            w.buf,
            &nano,
            true,
            "PcapWriter: ns big-endian, link type 0 (AF 2, 7, 24, 28, 30 big-endian)",
        );

        // Link type 12 in the header (raw IP as some systems number it).
        let mut w = PcapWriter::new(false, false, 262144, 12);
        for t in &ts {
            let f = packets::frame(rng, 12);
            w.rec(secs(*t), usec(*t), &f, f.len() as u32);
        }
        self.write(
            &d,
            "linktype-12",
            "link type 12 in the header",
            w.buf,
            &both,
            true,
            "PcapWriter: µs LE, link type 12, raw IPv4/IPv6",
        );

        // pcapng: interfaces at 10^-9, 2^-20 with if_tsoffset, and 10^-3, packets interleaved.
        let mut w = NgWriter::new(false);
        w.interface(1, 262144, Some(9), None);
        w.interface(1, 262144, Some(0x80 | 20), Some(3600));
        w.interface(1, 262144, Some(3), Some(-86_400));
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let ifid = (i % 3) as u32;
            let v = match ifid {
                0 => *t,
                // units of 2^-20 s, 3600 s before the time meant
                1 => ((*t - 3_600_000_000_000) as u128 * (1 << 20) / 1_000_000_000) as u64,
                _ => (*t + 86_400_000_000_000) / 1_000_000,
            };
            w.epb(ifid, v, f, f.len() as u32);
        }
        self.write(&d, "pcapng-tsresol", "pcapng if_tsresol 10^-9, 2^-20, 10^-3 and if_tsoffset", w.buf, &both, true, "NgWriter: LE, interfaces tsresol 9, 2^-20 (+3600 s offset), 3 (-86400 s offset), packets round robin");

        // pcapng times beyond 2^64 ns: µs and 1 s units with values whose ns do not fit in 64 bits.
        let mut w = NgWriter::new(false);
        w.interface(1, 262144, None, None);
        w.interface(1, 262144, Some(0), None);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let (ifid, v) = match i % 5 {
                1 => (0, 20_000_000_000_000_000u64 + i as u64),
                3 => (1, (1u64 << 40) + i as u64),
                _ => (0, *t / 1000),
            };
            w.epb(ifid, v, f, f.len() as u32);
        }
        self.write(&d, "pcapng-over-2^64ns", "pcapng timestamps > 2^64 ns", w.buf, &both, false, "NgWriter: LE, interface 0 µs (every 5th+1 at 2*10^16 µs), interface 1 tsresol 10^0 (every 5th+3 at 2^40 s)");

        // Big-endian pcapng with simple and obsolete packet blocks, blocks to skip, two sections.
        let mut w = NgWriter::new(true);
        w.interface(1, 200, None, None);
        w.noise(0);
        for (i, (f, t)) in frames.iter().zip(&ts).enumerate() {
            let keep = f.len().min(200);
            match i % 7 {
                3 => w.spb(&f[..keep], f.len() as u32),
                5 => w.pb(0, *t / 1000, &f[..keep], f.len() as u32),
                _ => w.epb(0, *t / 1000, &f[..keep], f.len() as u32),
            }
            if i == frames.len() / 2 {
                w.section();
                w.interface(1, 200, Some(9), None);
            }
        }
        self.write(&d, "pcapng-big-endian", "big-endian pcapng, SPB/PB/NRB/ISB/custom, 2 sections", w.buf, &both, false, "NgWriter: big-endian, snaplen 200, EPB + SPB (every 7th+3) + PB (every 7th+5), NRB/ISB/custom blocks, a second section (tsresol 9) half way");
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        d: &Path,
        name: &str,
        class: &str,
        bytes: Vec<u8>,
        checks: &[(Prec, Prec)],
        windows: bool,
        how: &str,
    ) {
        let ext = if bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
            "pcapng"
        } else {
            "pcap"
        };
        let out = d.join(format!("{name}.{ext}"));
        std::fs::write(&out, bytes).unwrap();
        let prov = vec![format!("written by the test ({how}; seed {})", self.seed)];
        self.push(name, class, out.clone(), out, checks, windows, prov);
    }

    /// A store of several files in one directory, in different formats, whose packets interleave
    /// in time with equal timestamps across files. The reference is mergecap's merge of them.
    /// The tie rule relied on: among packets of equal time, ringcap takes the one of the file
    /// whose name sorts first (docs/index.md: files in path order, merged by (time, file));
    /// mergecap takes the one of the file given last (wiretap/merge.c: is_earlier() counts an
    /// equal time as earlier, so a later file replaces the candidate), so mergecap is given the
    /// files in reverse name order.
    fn store(&mut self, rng: &mut Rng) {
        let d = self.sub("store");
        let s = d.join("store");
        std::fs::create_dir_all(&s).unwrap();
        let files = ["a.pcap", "b.pcap", "c.pcapng", "d.pcap"];
        let fmts = ["pcap", "nsecpcap", "pcapng", "pcap"];
        let mut texts = vec![String::new(); files.len()];
        let ts = times(rng, self.n, true);
        let mut last = 0usize;
        for (i, t) in ts.iter().enumerate() {
            // Equal timestamps go to another file than the previous packet's: the tie rule decides.
            let k = if i > 0 && *t == ts[i - 1] {
                (last + 1 + rng.below(3) as usize) % files.len()
            } else {
                rng.below(files.len() as u64) as usize
            };
            last = k;
            let f = packets::frame(rng, 1);
            hexdump(&mut texts[k], *t, &f);
        }
        let mut prov = Vec::new();
        let plain_d = d.join("d.pcap");
        for (k, name) in files.iter().enumerate() {
            let txt = d.join(format!("{name}.txt"));
            std::fs::write(&txt, &texts[k]).unwrap();
            let out = if k == 3 {
                plain_d.clone()
            } else {
                s.join(name)
            };
            self.make(
                &mut prov,
                &format!(
                    "TZ=UTC text2pcap -q -t ISO -F {} -l 1 {} {}",
                    fmts[k],
                    txt.display(),
                    out.display()
                ),
            );
        }
        self.make(
            &mut prov,
            &format!(
                "zstd -q -c {} > {}",
                plain_d.display(),
                s.join("d.pcap.zst").display()
            ),
        );
        let merged = d.join("merged.pcapng");
        self.make(
            &mut prov,
            &format!(
                "mergecap -w {} {} {} {} {}",
                merged.display(),
                plain_d.display(),
                s.join("c.pcapng").display(),
                s.join("b.pcap").display(),
                s.join("a.pcap").display()
            ),
        );
        let mut extra = String::new();
        let _ = write!(
            extra,
            "ties: {} packets share a timestamp with the one before",
            ts.windows(2).filter(|w| w[0] == w[1]).count()
        );
        prov.push(extra);
        self.push(
            "store-4-files",
            "store of 4 files (pcap, pcap-ns, pcapng, zstd) vs mergecap",
            s,
            merged,
            &[(Prec::Nano, Prec::Nano)],
            true,
            prov,
        );
    }
}
