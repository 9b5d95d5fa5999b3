//! Compression ratio and compressor CPU vs compressed frame size (not a test): the records of a
//! plain pcap file are packed into 1 MiB buffers as a compressed capture packs them (records never
//! span two buffers), each buffer is cut into frames of at most SIZE bytes at record boundaries
//! (the rule of `store::frame_cuts`), and every frame is compressed as the compressor threads do
//! (zstd bulk, checksum on) at each level of the `auto` ladder. Thread CPU, `ROUNDS` rounds over
//! the sizes interleaved; prints one line per (round, level, size).
//!
//! cargo run --release -p store --example frame_cost -- FILE.pcap [ROUNDS]

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: frame_cost FILE.pcap [ROUNDS]");
    let rounds: usize = args.next().map_or(3, |s| s.parse().expect("rounds"));
    let file = std::fs::read(&path).expect("read the file");
    // Record lengths after the 24-byte header (native-endian pcap, as ringcap writes it).
    let mut recs = Vec::new();
    let mut at = 24;
    while at + 16 <= file.len() {
        let caplen = u32::from_ne_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + caplen > file.len() {
            break;
        }
        recs.push((at, 16 + caplen));
        at += 16 + caplen;
    }
    // 1 MiB buffers of whole records.
    let mut buffers: Vec<Vec<(usize, usize)>> = vec![Vec::new()];
    let mut fill = 0;
    for &r in &recs {
        if fill + r.1 > 1 << 20 {
            buffers.push(Vec::new());
            fill = 0;
        }
        buffers.last_mut().unwrap().push(r);
        fill += r.1;
    }
    let raw: usize = recs.iter().map(|r| r.1).sum();
    println!(
        "# {path}: {} records, {raw} bytes, {} buffers",
        recs.len(),
        buffers.len()
    );
    println!("round,level,frame_kib,frames,ratio,cpu_ns_per_mb");
    let mut out = vec![0u8; 4 << 20];
    let mut src = Vec::with_capacity(2 << 20);
    let mut z = zstd::bulk::Compressor::new(1).unwrap();
    z.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
        .unwrap();
    for round in 0..rounds {
        for level in [-5, -1, 1, 3] {
            z.set_compression_level(level).unwrap();
            for kib in [64usize, 128, 256, 1024] {
                let size = kib << 10;
                let (mut frames, mut written) = (0usize, 0usize);
                let cpu0 = sys::thread_cpu_ns();
                for b in &buffers {
                    src.clear();
                    for &(o, n) in b {
                        src.extend_from_slice(&file[o..o + n]);
                    }
                    // Greedy cuts at record ends: a frame takes records while it stays <= size.
                    let (mut start, mut pos) = (0, 0);
                    for &(_, n) in b {
                        if pos + n - start > size && pos > start {
                            written += z.compress_to_buffer(&src[start..pos], &mut out).unwrap();
                            frames += 1;
                            start = pos;
                        }
                        pos += n;
                    }
                    written += z.compress_to_buffer(&src[start..pos], &mut out).unwrap();
                    frames += 1;
                }
                let cpu = sys::thread_cpu_ns() - cpu0;
                println!(
                    "{round},{level},{kib},{frames},{:.4},{:.0}",
                    raw as f64 / written as f64,
                    cpu as f64 / (raw as f64 / 1e6)
                );
            }
        }
    }
}
