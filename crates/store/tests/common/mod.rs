//! Helpers shared by the store integration tests: temp dirs, test packets, external tools.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use store::{CaptureReader, CaptureWriter, WriterOptions};
use wire::Vlan;

/// A directory removed on drop (also on panic).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory under `base` (e.g. "/var/tmp" for the real disk).
    pub fn new_in(base: &str, tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = PathBuf::from(base).join(format!("ringcap-store-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn new(tag: &str) -> TempDir {
        Self::new_in("/var/tmp", tag)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One test packet as offered to the writer.
#[derive(Clone, Debug)]
pub struct TestPacket {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub data: Vec<u8>,
    pub vlan: Option<Vlan>,
}

/// Deterministic packets of varied sizes (14..=1514 bytes), every byte depending on the index,
/// timestamps with nanosecond digits, every 3rd with a VLAN tag when `vlan`.
pub fn packets(n: usize, vlan: bool) -> Vec<TestPacket> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = 14 + (state % 1501) as usize;
            let data: Vec<u8> = (0..len)
                .map(|j| (i * 31 + j * 7 + (state >> 20) as usize) as u8)
                .collect();
            TestPacket {
                ts_ns: 1_700_000_000_000_000_000 + i as u64 * 1_234_567 + (state % 1000),
                wire_len: len as u32 + (i % 4) as u32, // sometimes longer on the wire than captured
                data,
                vlan: (vlan && i % 3 == 0).then_some(Vlan {
                    tpid: 0x8100,
                    tci: (i % 4096) as u16,
                }),
            }
        })
        .collect()
}

/// What a reader must return for `p` (computed here, independently of the writer).
pub fn expected_bytes(p: &TestPacket, snaplen: usize) -> Vec<u8> {
    let mut v = p.data.clone();
    // libpcap's rule: the tag goes after the two MACs, and a capture too short to hold them stays untagged.
    if let Some(t) = p.vlan.filter(|_| v.len() >= 12) {
        let at = 12;
        let tag = [
            (t.tpid >> 8) as u8,
            t.tpid as u8,
            (t.tci >> 8) as u8,
            t.tci as u8,
        ];
        v.splice(at..at, tag);
    }
    v.truncate(snaplen);
    v
}

/// Writes `pkts`, returning the ones accepted (the rest were storage drops).
pub fn write_all(
    path: &Path,
    opts: WriterOptions,
    pkts: &[TestPacket],
) -> (Vec<TestPacket>, store::WriterStats) {
    let mut w = CaptureWriter::create(path, opts).expect("create writer");
    let mut accepted = Vec::new();
    for p in pkts {
        if w.write_packet(p.ts_ns, p.wire_len, &p.data, p.vlan) {
            accepted.push(p.clone());
        }
    }
    let stats = w.finish(None).expect("finish");
    assert_eq!(
        stats.packets + stats.storage_drops,
        pkts.len() as u64,
        "every packet is written or counted"
    );
    (accepted, stats)
}

/// An owned copy of a packet read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPacket {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub data: Vec<u8>,
    pub linktype: u32,
    pub interface: u32,
}

/// Reads every packet of a file (panics on I/O errors, not on damage).
pub fn read_all(path: &Path) -> (Vec<ReadPacket>, CaptureReader) {
    let mut r =
        CaptureReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("read");
        out.push(ReadPacket {
            ts_ns: p.ts_ns,
            wire_len: p.wire_len,
            data: p.data.to_vec(),
            linktype: p.linktype,
            interface: p.interface,
        });
    }
    (out, r)
}

#[allow(unused_imports)] // not every test binary skips
pub use testbed::skip;

/// Whether an external program is installed; skips (fails under CI) when not.
pub fn have(tool: &str) -> bool {
    testbed::have(tool, "apt-get install tshark tcpdump zstd lz4")
}

/// Runs a command, panicking with its stderr when it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Packet count according to `capinfos -M -c`.
pub fn capinfos_count(path: &Path) -> u64 {
    let out = run(Command::new("capinfos").args(["-M", "-c"]).arg(path));
    let line = out
        .lines()
        .find(|l| l.contains("Number of packets"))
        .expect("capinfos count line");
    line.rsplit(|c: char| c.is_whitespace() || c == '=')
        .find(|s| !s.is_empty())
        .unwrap()
        .trim()
        .parse()
        .expect("count")
}

/// Frame lengths (wire lengths) according to `tshark -r`.
pub fn tshark_lengths(path: &Path) -> Vec<u32> {
    let out = run(Command::new("tshark").args(["-n", "-r"]).arg(path).args([
        "-T",
        "fields",
        "-e",
        "frame.len",
    ]));
    out.lines()
        .map(|l| l.trim().parse().expect("frame.len"))
        .collect()
}
