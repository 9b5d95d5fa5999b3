//! pcap/pcapng → Parquet: every column of known packets, offsets that point at the packet bytes,
//! hour partitions, metadata, compressed inputs, one thread and several.

mod common;

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use common::*;
use trace::{convert, ConvertOptions, Progress};

/// One row, decoded from the batches for easy comparison.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    ts: i64,
    wire_len: u32,
    cap_len: u32,
    linktype: u16,
    src_mac: Option<u64>,
    dst_mac: Option<u64>,
    ethertype: Option<u16>,
    vlan: Option<u16>,
    ip_version: Option<u8>,
    src_ip4: Option<u32>,
    dst_ip4: Option<u32>,
    src_ip6: Option<Vec<u8>>,
    dst_ip6: Option<Vec<u8>>,
    ip_len: Option<u32>,
    ttl: Option<u8>,
    protocol: Option<u8>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    tcp_flags: Option<u16>,
    udp_len: Option<u16>,
    icmp_type: Option<u8>,
    icmp_code: Option<u8>,
    flow_hash: Option<u64>,
    file: String,
    offset: u64,
}

fn opt<T: ArrowPrimitiveType>(b: &RecordBatch, name: &str, i: usize) -> Option<T::Native> {
    let a = b.column_by_name(name).unwrap().as_primitive::<T>();
    a.is_valid(i).then(|| a.value(i))
}

fn rows(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let s6 = b.column_by_name("src_ip6").unwrap().as_fixed_size_binary();
        let d6 = b.column_by_name("dst_ip6").unwrap().as_fixed_size_binary();
        let file = b
            .column_by_name("file")
            .unwrap()
            .as_dictionary::<Int32Type>();
        let names = file.values().as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push(Row {
                ts: opt::<TimestampNanosecondType>(b, "ts", i).unwrap(),
                wire_len: opt::<UInt32Type>(b, "wire_len", i).unwrap(),
                cap_len: opt::<UInt32Type>(b, "cap_len", i).unwrap(),
                linktype: opt::<UInt16Type>(b, "linktype", i).unwrap(),
                src_mac: opt::<UInt64Type>(b, "src_mac", i),
                dst_mac: opt::<UInt64Type>(b, "dst_mac", i),
                ethertype: opt::<UInt16Type>(b, "ethertype", i),
                vlan: opt::<UInt16Type>(b, "vlan", i),
                ip_version: opt::<UInt8Type>(b, "ip_version", i),
                src_ip4: opt::<UInt32Type>(b, "src_ip4", i),
                dst_ip4: opt::<UInt32Type>(b, "dst_ip4", i),
                src_ip6: s6.is_valid(i).then(|| s6.value(i).to_vec()),
                dst_ip6: d6.is_valid(i).then(|| d6.value(i).to_vec()),
                ip_len: opt::<UInt32Type>(b, "ip_len", i),
                ttl: opt::<UInt8Type>(b, "ttl", i),
                protocol: opt::<UInt8Type>(b, "protocol", i),
                src_port: opt::<UInt16Type>(b, "src_port", i),
                dst_port: opt::<UInt16Type>(b, "dst_port", i),
                tcp_flags: opt::<UInt16Type>(b, "tcp_flags", i),
                udp_len: opt::<UInt16Type>(b, "udp_len", i),
                icmp_type: opt::<UInt8Type>(b, "icmp_type", i),
                icmp_code: opt::<UInt8Type>(b, "icmp_code", i),
                flow_hash: opt::<UInt64Type>(b, "flow_hash", i),
                file: names.value(file.keys().value(i) as usize).to_string(),
                offset: opt::<UInt64Type>(b, "offset", i).unwrap(),
            });
        }
    }
    out.sort_by(|a, b| (a.ts, a.offset, &a.file).cmp(&(b.ts, b.offset, &b.file)));
    out
}

/// 2026-11-22 00:59:59.9 UTC in ns: the trace crosses into the next hour.
const T0: u64 = 1_795_309_199_900_000_000;

fn mixed_packets() -> Vec<Pkt> {
    let v6a: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let v6b: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let mut snapped = Pkt::new(T0 + 5, udp4([10, 0, 0, 3], [10, 0, 0, 4], 7, 9, 1000, None));
    snapped.frame.truncate(64);
    vec![
        Pkt::new(T0, udp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53, 30, None)),
        Pkt::new(
            T0 + 1,
            tcp4([10, 0, 0, 2], [10, 0, 0, 1], 443, 50000, 0x12, 0),
        ),
        Pkt::new(T0 + 2, udp6(v6a, v6b, 5353, 5353, 100)),
        Pkt::new(T0 + 3, arp()),
        Pkt::new(
            T0 + 4,
            udp4([10, 0, 0, 2], [10, 0, 0, 1], 53, 1234, 60, Some(42)),
        ),
        snapped,
        Pkt::new(T0 + 100_000_000, icmp4([10, 0, 0, 1], [10, 0, 0, 9])),
        Pkt::new(
            T0 + 100_000_001,
            tcp4([10, 0, 0, 1], [10, 0, 0, 2], 50000, 443, 0x10, 1400),
        ),
    ]
}

fn convert_files(
    inputs: &[&Path],
    out: &Path,
    threads: usize,
    rows_per_group: usize,
) -> trace::ConvertReport {
    let mut o = ConvertOptions::new(out);
    o.threads = threads;
    o.rows_per_group = rows_per_group;
    let inputs: Vec<_> = inputs.iter().map(|p| p.to_path_buf()).collect();
    convert(&inputs, &o, &Progress::default()).expect("convert")
}

#[test]
fn every_column_of_known_packets() {
    let dir = tempdir();
    let pkts = mixed_packets();
    let (bytes, offsets) = pcap_bytes(&pkts, 1);
    let input = write(dir.path(), "mixed.pcap", &bytes);
    let out = dir.path().join("out");
    let rep = convert_files(&[&input], &out, 1, 1000);
    assert_eq!(rep.packets, 8);
    assert_eq!(rep.inputs[0].issues_total, 0);
    let r = rows(&read_all(&out));
    assert_eq!(r.len(), 8);
    for (i, row) in r.iter().enumerate() {
        assert_eq!(row.ts as u64, pkts[i].ts_ns);
        assert_eq!(row.wire_len, pkts[i].wire_len);
        assert_eq!(row.cap_len, pkts[i].frame.len() as u32);
        assert_eq!(row.offset, offsets[i], "row {i}");
        assert_eq!(row.linktype, 1);
        assert_eq!(row.file, input.display().to_string());
        // The offset finds the packet's bytes in the input.
        let o = row.offset as usize;
        assert_eq!(&bytes[o..o + row.cap_len as usize], &pkts[i].frame[..]);
    }
    // UDP over IPv4.
    let u = &r[0];
    assert_eq!(u.src_mac, Some(0x0200_0000_0001));
    assert_eq!(u.dst_mac, Some(0x0200_0000_0002));
    assert_eq!(u.ethertype, Some(0x0800));
    assert_eq!(u.ip_version, Some(4));
    assert_eq!(u.src_ip4, Some(0x0a00_0001));
    assert_eq!(u.dst_ip4, Some(0x0a00_0002));
    assert_eq!(u.src_ip6, None);
    assert_eq!(
        (u.ip_len, u.ttl, u.protocol),
        (Some(58), Some(64), Some(17))
    );
    assert_eq!(
        (u.src_port, u.dst_port, u.udp_len),
        (Some(1234), Some(53), Some(38))
    );
    assert_eq!(u.tcp_flags, None);
    // TCP SYN-ACK.
    let t = &r[1];
    assert_eq!(
        (t.protocol, t.tcp_flags, t.ttl),
        (Some(6), Some(0x12), Some(57))
    );
    assert_eq!(
        (t.src_port, t.dst_port, t.udp_len),
        (Some(443), Some(50000), None)
    );
    // IPv6.
    let v6 = &r[2];
    assert_eq!(v6.ip_version, Some(6));
    assert_eq!((v6.src_ip4, v6.dst_ip4), (None, None));
    assert_eq!(v6.src_ip6.as_ref().unwrap()[15], 1);
    assert_eq!(v6.dst_ip6.as_ref().unwrap()[0..2], [0x20, 0x01]);
    assert_eq!(
        (v6.ip_len, v6.ttl, v6.protocol),
        (Some(148), Some(33), Some(17))
    );
    // ARP: no IP fields, no flow hash.
    let a = &r[3];
    assert_eq!(a.ethertype, Some(0x0806));
    assert_eq!(
        (a.ip_version, a.ip_len, a.flow_hash, a.src_port),
        (None, None, None, None)
    );
    assert_eq!(a.dst_mac, Some(0xffff_ffff_ffff));
    // VLAN 42.
    assert_eq!(
        (r[4].vlan, r[4].ethertype, r[4].dst_port),
        (Some(42), Some(0x0800), Some(1234))
    );
    // Snapped at 64 bytes: wire length kept, headers still decoded.
    assert_eq!(
        (r[5].cap_len, r[5].wire_len, r[5].ip_len),
        (64, 1042, Some(1028))
    );
    // ICMP.
    assert_eq!(
        (r[6].icmp_type, r[6].icmp_code, r[6].src_port),
        (Some(8), Some(0), None)
    );
    // Symmetric flow hash: both directions of 10.0.0.1:1234 <-> 10.0.0.2:53 and of the TCP
    // connection agree; different connections differ.
    assert_eq!(r[0].flow_hash, r[4].flow_hash);
    assert_eq!(r[1].flow_hash, r[7].flow_hash);
    assert_ne!(r[0].flow_hash, r[1].flow_hash);
    assert!(r[0].flow_hash.is_some());
}

#[test]
fn hour_partitions_row_groups_and_metadata() {
    let dir = tempdir();
    let pkts = mixed_packets();
    let (bytes, _) = pcap_bytes(&pkts, 1);
    let input = write(dir.path(), "mixed.pcap", &bytes);
    let out = dir.path().join("out");
    // Two rows per row group: the first hour's 6 rows make 3 row groups.
    let rep = convert_files(&[&input], &out, 1, 2);
    let files = parquet_files(&out);
    let rel: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
        .collect();
    assert_eq!(
        rel,
        [
            "hour=2026-11-22T00/part-00000-00.parquet",
            "hour=2026-11-22T01/part-00000-00.parquet"
        ]
    );
    assert_eq!(rep.parts.iter().map(|p| p.rows).collect::<Vec<_>>(), [6, 2]);
    assert_eq!(
        rep.parts.iter().map(|p| p.row_groups).collect::<Vec<_>>(),
        [3, 1]
    );
    assert_eq!(
        rep.output_bytes,
        files
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum::<u64>()
    );

    let reader = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(&files[0]).unwrap(),
    )
    .unwrap();
    use parquet::file::reader::FileReader;
    let md = reader.metadata();
    assert_eq!(md.num_row_groups(), 3);
    // Row groups in time order, with min/max statistics on ts.
    let mut prev_max = i64::MIN;
    for rg in md.row_groups() {
        let ts = rg.column(0);
        assert!(matches!(
            ts.compression(),
            parquet::basic::Compression::ZSTD(_)
        ));
        let st = ts.statistics().expect("statistics");
        let (min, max) = match st {
            parquet::file::statistics::Statistics::Int64(s) => {
                (*s.min_opt().unwrap(), *s.max_opt().unwrap())
            }
            other => panic!("ts statistics of type {other:?}"),
        };
        assert!(min >= prev_max && max >= min);
        prev_max = max;
    }
    let kv = md.file_metadata().key_value_metadata().unwrap();
    let get = |k: &str| {
        kv.iter()
            .find(|e| e.key == k)
            .and_then(|e| e.value.clone())
            .unwrap()
    };
    assert_eq!(get("ringcap.version"), env!("CARGO_PKG_VERSION"));
    assert!(get("ringcap.inputs").contains("mixed.pcap"));
    assert!(get("ringcap.options").contains("\"rows_per_group\":2"));
    assert_eq!(get("ringcap.input"), input.display().to_string());

    // A second run into the same directory is refused rather than mixed in.
    let mut o = ConvertOptions::new(&out);
    o.threads = 1;
    let err = convert(&[input], &o, &Progress::default()).unwrap_err();
    assert!(
        err.to_string().contains("already holds a converted set"),
        "{err}"
    );
}

/// Many packets over several files, compressed and not: the same rows with 1 and 3 threads.
#[test]
fn threads_and_compressed_inputs_give_the_same_rows() {
    let dir = tempdir();
    let mut pkts = Vec::new();
    for i in 0..20_000u64 {
        let size = (i * 7919 % 1400) as usize;
        pkts.push(Pkt::new(
            T0 + i * 10_000,
            udp4(
                [10, 1, (i % 7) as u8, 1],
                [10, 2, 0, (i % 5) as u8],
                1000 + (i % 100) as u16,
                80,
                size,
                None,
            ),
        ));
    }
    let (plain, offsets) = pcap_bytes(&pkts, 1);
    let p_plain = write(dir.path(), "a.pcap", &plain);
    let p_zst = write(
        dir.path(),
        "b.pcap.zst",
        &zstd::encode_all(&plain[..], 3).unwrap(),
    );
    let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
    std::io::Write::write_all(&mut lz4, &plain).unwrap();
    let p_lz4 = write(dir.path(), "c.pcap.lz4", &lz4.finish().unwrap());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &plain).unwrap();
    let p_gz = write(dir.path(), "d.pcap.gz", &gz.finish().unwrap());
    let inputs = [
        p_plain.as_path(),
        p_zst.as_path(),
        p_lz4.as_path(),
        p_gz.as_path(),
    ];

    let one = dir.path().join("one");
    let three = dir.path().join("three");
    let r1 = convert_files(&inputs, &one, 1, 3000);
    let r3 = convert_files(&inputs, &three, 3, 3000);
    for r in [&r1, &r3] {
        assert_eq!(r.packets, 80_000);
        let comp: Vec<_> = r
            .inputs
            .iter()
            .map(|i| format!("{:?}", i.compression.unwrap()))
            .collect();
        assert_eq!(comp, ["None", "Zstd", "Lz4", "Gzip"]);
        assert!(r
            .inputs
            .iter()
            .all(|i| i.issues_total == 0 && i.error.is_none()));
    }
    let a = rows(&read_all(&one));
    let b = rows(&read_all(&three));
    assert_eq!(a.len(), 80_000);
    assert_eq!(a, b);
    // Each input's offsets are the same as the plain file's, decompressed or not.
    for f in &inputs {
        let name = f.display().to_string();
        let offs: Vec<u64> = a
            .iter()
            .filter(|r| r.file == name)
            .map(|r| r.offset)
            .collect();
        assert_eq!(offs, offsets, "{name}");
    }
    let wire: u64 = pkts.iter().map(|p| u64::from(p.wire_len)).sum();
    assert_eq!(
        a.iter().map(|r| u64::from(r.wire_len)).sum::<u64>(),
        wire * 4
    );
    // With three encoders each input's rows are spread over three part files per hour.
    assert!(r3.parts.len() > r1.parts.len());
}

/// pcapng: two interfaces (Ethernet in µs, raw IPv6 in ns), an unknown block in between.
#[test]
fn pcapng_interfaces_link_types_and_resolutions() {
    let dir = tempdir();
    let v6a = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa];
    let v6b = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xb];
    let pkts = vec![
        (
            0,
            Pkt::new(
                T0 + 1000,
                udp4([192, 168, 1, 1], [192, 168, 1, 2], 1, 2, 10, None),
            ),
        ),
        (1, Pkt::new(T0 + 1001, ipv6_udp(v6a, v6b, 3, 4, 20))),
        (
            0,
            Pkt::new(
                T0 + 3000,
                tcp4([192, 168, 1, 2], [192, 168, 1, 1], 2, 1, 0x02, 0),
            ),
        ),
    ];
    let ifaces = [
        Iface {
            linktype: 1,
            tsresol: 6,
        },
        Iface {
            linktype: 101,
            tsresol: 9,
        },
    ];
    let (bytes, offsets) = pcapng_bytes(&ifaces, &pkts, true);
    let input = write(dir.path(), "two.pcapng", &bytes);
    let out = dir.path().join("out");
    let rep = convert_files(&[&input], &out, 2, 100);
    assert_eq!(rep.packets, 3);
    assert_eq!(rep.inputs[0].format.as_deref(), Some("pcapng"));
    assert!(
        rep.inputs[0].issues.iter().all(|i| !i.corrupt),
        "{:?}",
        rep.inputs[0].issues
    );
    let r = rows(&read_all(&out));
    assert_eq!(
        r.iter().map(|r| r.ts as u64).collect::<Vec<_>>(),
        [T0 + 1000, T0 + 1001, T0 + 3000]
    );
    assert_eq!(
        r.iter().map(|r| r.linktype).collect::<Vec<_>>(),
        [1, 101, 1]
    );
    assert_eq!(r.iter().map(|r| r.offset).collect::<Vec<_>>(), offsets);
    assert_eq!(r[1].ip_version, Some(6));
    assert_eq!(r[1].src_mac, None);
    assert_eq!((r[1].src_port, r[1].dst_port), (Some(3), Some(4)));
    assert_eq!(r[2].tcp_flags, Some(0x02));
}
