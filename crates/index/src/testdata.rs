//! Capture bytes built by hand for unit tests: what they hold is known without the code under test.

/// A pcap file header (µs, Ethernet, little-endian as this machine writes it).
pub fn pcap_header() -> Vec<u8> {
    let mut v = Vec::new();
    for x in [store::PCAP_MAGIC_US, 0x0004_0002, 0, 0, 65535, 1] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

/// pcap records of Ethernet/IPv4/UDP packets `range`, packet i from 10.0.0.(i % 4 + 1):1000 to
/// 10.1.0.1:53 at 1 700 000 000 + i s: four flows.
pub fn pcap_packets(range: std::ops::Range<u32>) -> Vec<u8> {
    let mut v = Vec::new();
    for i in range {
        let f = udp_frame([10, 0, 0, (i % 4 + 1) as u8], [10, 1, 0, 1], 1000, 53);
        for x in [1_700_000_000 + i, i, 60, 60] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&f);
    }
    v
}

/// A 60-byte Ethernet/IPv4/UDP frame with 18 bytes of zero payload.
pub fn udp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}
