//! CPU cost of the indexer alone: a plain pcap file is read into memory first, then its records
//! are walked in place and given to a [`index::build::Builder`] as the live indexer gives them
//! from the written buffers (frames of 1 MiB), and the thread CPU time of filing the packets and
//! of finishing the index and of writing its flow table (Parquet, to a temporary file) is reported
//! per packet.
//! What `make bench-query` reports as "indexer ns/packet" also includes walking the written
//! buffers' records and the thread hand-over; this isolates the builder.
//!
//! Usage: cargo run --release -p index --example indexer_cost -- FILE.pcap [RUNS] [plain|zst]
//! (`INDEX_OUT=PATH`: the index is also written there, and the flow table to PATH.flows.parquet,
//! to compare builds.)
//! (`zst`: index as if the file were compressed, as `--compress` captures are: frame postings.)
//! (FILE.pcap: microsecond or nanosecond pcap in this machine's byte order, as ringcap writes.)

use std::path::PathBuf;

use index::build::Builder;
use index::file::{Compression, Identity};
use wire::LinkType;

const FRAME: u64 = 1 << 20;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().expect("usage: indexer_cost FILE.pcap [RUNS]"));
    let runs: usize = args
        .next()
        .map_or(5, |r| r.parse().expect("RUNS is a number"));
    let compression = match args.next().as_deref() {
        None | Some("plain") => Compression::None,
        Some("zst") => Compression::Zstd,
        Some(other) => panic!("{other}: say plain or zst"),
    };
    let file = std::fs::read(&path).expect("a readable capture file");
    let (linktype, nanos) =
        pcap_header(&file).expect("a plain pcap file in this machine's byte order");
    // (record offset, timestamp, data range), in file order.
    let mut packets: Vec<(u64, u64, std::ops::Range<usize>)> = Vec::new();
    let mut at = 24;
    while at + 16 <= file.len() {
        let u = |i: usize| u32::from_ne_bytes(file[at + i..at + i + 4].try_into().unwrap());
        let (sec, frac, caplen) = (u(0) as u64, u(4) as u64, u(8) as usize);
        let ts = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        if at + 16 + caplen > file.len() {
            break;
        }
        packets.push((at as u64, ts, at + 16..at + 16 + caplen));
        at += 16 + caplen;
    }
    let n = packets.len() as f64;
    let (mut filing, mut finish, mut table) = (Vec::new(), Vec::new(), Vec::new());
    let (mut index_bytes, mut flows_bytes) = (0, 0);
    let tmp = std::env::temp_dir().join(format!("indexer-cost-{}.pcap", std::process::id()));
    // The live indexer reads each buffer right after the writer compressed it (in cache): copy
    // each frame's records into a scratch buffer first, untimed, as that pass would.
    let mut scratch = Vec::with_capacity(2 * FRAME as usize);
    // Sized as the live indexer sizes each file's builder: like the file before (the first run
    // starts empty and is left out of the figures).
    let mut last_sizes = (0, 0);
    for run in 0..=runs {
        let mut b = Builder::with_capacity(vec![0; 24], compression, last_sizes.0, last_sizes.1);
        let mut filing_ns = 0;
        let mut i = 0;
        let mut frame_start = 24u64;
        while i < packets.len() {
            let mut j = i;
            while j < packets.len() && packets[j].0 < frame_start + FRAME {
                j += 1;
            }
            let (from, to) = (packets[i].2.start - 16, packets[j - 1].2.end);
            scratch.clear();
            scratch.extend_from_slice(&file[from..to]);
            let t0 = sys::thread_cpu_ns();
            b.frame(frame_start, FRAME, frame_start, FRAME);
            for (off, ts, data) in &packets[i..j] {
                let data = &scratch[data.start - from..data.end - from];
                // The record header's wire length, from the copy in cache.
                let at = *off as usize - from + 12;
                let wire = u32::from_ne_bytes(scratch[at..at + 4].try_into().unwrap());
                b.packet(*off, *ts, wire, Some(linktype), data);
            }
            filing_ns += sys::thread_cpu_ns() - t0;
            frame_start += FRAME;
            i = j;
        }
        let t1 = sys::thread_cpu_ns();
        let id = Identity {
            size: frame_start,
            head_crc: 0,
            tail_crc: 0,
        };
        let covered = b.covered();
        last_sizes = b.sizes();
        let built = b.finish(id);
        index_bytes = built.index.len();
        if let Some(out) = std::env::var_os("INDEX_OUT") {
            // To compare two builds' indexes byte for byte.
            std::fs::write(out, &built.index).expect("INDEX_OUT written");
        }
        let t2 = sys::thread_cpu_ns();
        flows_bytes = index::flows::write_flow_table(&tmp, id, covered, &built.flows, &built.names)
            .expect("flow table written");
        let t3 = sys::thread_cpu_ns();
        if run == 0 {
            continue;
        }
        filing.push(filing_ns as f64 / n);
        finish.push((t2 - t1) as f64 / n);
        table.push((t3 - t2) as f64 / n);
    }
    if let Some(out) = std::env::var_os("INDEX_OUT") {
        let mut flows = out;
        flows.push(".flows.parquet");
        std::fs::copy(index::flows_path(&tmp), flows).expect("flow table copied");
    }
    let _ = std::fs::remove_file(index::flows_path(&tmp));
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (f, fmin, fmax) = med(&mut filing);
    let (g, gmin, gmax) = med(&mut finish);
    let (t, tmin, tmax) = med(&mut table);
    println!(
        "{} packets, {runs} runs: filing {f:.1} ns/packet ({fmin:.1}-{fmax:.1}), finishing {g:.1} \
         ({gmin:.1}-{gmax:.1}), flow table {t:.1} ({tmin:.1}-{tmax:.1}), total {:.1}; index \
         {index_bytes} bytes, flow table {flows_bytes} bytes",
        packets.len(),
        f + g + t
    );
}

/// Link type and whether timestamps are in nanoseconds.
fn pcap_header(f: &[u8]) -> Option<(LinkType, bool)> {
    let magic = u32::from_ne_bytes(f.get(..4)?.try_into().ok()?);
    let nanos = match magic {
        0xa1b2_c3d4 => false,
        0xa1b2_3c4d => true,
        _ => return None,
    };
    let lt = u32::from_ne_bytes(f.get(20..24)?.try_into().ok()?);
    Some((LinkType::from_pcap(lt)?, nanos))
}
