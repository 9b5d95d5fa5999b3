//! wire: `parse` and `format_line` on any bytes under every link type, and every accessor of every view
//! that `new_checked` accepted (the views promise no accessor panics after it).
#![no_main]

use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use wire::*;

const LINK_TYPES: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Null,
    LinkType::Loop,
];

fuzz_target!(|data: &[u8]| {
    let mut line = String::with_capacity(512);
    for lt in LINK_TYPES {
        let h = parse(data, lt);
        if let Some(o) = h.l4_offset {
            assert!(o as usize <= data.len());
            assert!(h.l3_offset.is_some_and(|l3| l3 <= o));
        }
        line.clear();
        format_line(&mut line, u64::MAX, data, data.len() as u32, lt).unwrap();
        line.clear();
        let _ = write!(line, "{:?}", (h.src_addr(), h.dst_addr(), h.ip_payload_len()));
    }
    views(data);
});

fn views(d: &[u8]) {
    if let Ok(p) = EthernetFrame::new_checked(d) {
        let _ = (p.dst_addr(), p.src_addr(), p.ethertype(), p.payload());
    }
    if let Ok(p) = VlanHeader::new_checked(d) {
        let _ = (p.tci(), p.pcp(), p.dei(), p.vid(), p.ethertype(), p.payload());
    }
    if let Ok(p) = Ipv4Packet::new_checked(d) {
        let _ = (p.version(), p.header_len(), p.dscp(), p.ecn(), p.total_len(), p.ident());
        let _ = (p.dont_frag(), p.more_frags(), p.frag_offset(), p.is_fragment(), p.ttl());
        let _ = (p.protocol(), p.checksum(), p.src_addr(), p.dst_addr(), p.verify_checksum());
        let _ = (p.options(), p.payload());
    }
    if let Ok(p) = Ipv6Packet::new_checked(d) {
        let _ = (p.version(), p.traffic_class(), p.flow_label(), p.payload_len(), p.next_header());
        let _ = (p.hop_limit(), p.src_addr(), p.dst_addr(), p.payload());
        let ul = p.upper_layer();
        assert!(ul.offset <= p.payload().len());
    }
    if let Ok(p) = TcpPacket::new_checked(d) {
        let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number(), p.header_len());
        let _ = (p.flags().to_string(), p.window(), p.checksum(), p.urgent(), p.payload());
        let _ = p.option_iter().count();
    }
    if let Ok(p) = UdpPacket::new_checked(d) {
        let _ = (p.src_port(), p.dst_port(), p.len(), p.checksum(), p.payload());
    }
    if let Ok(p) = IcmpPacket::new_checked(d) {
        let _ = (p.msg_type(), p.code(), p.checksum(), p.rest_of_header(), p.echo_ident());
        let _ = (p.echo_seq(), p.verify_checksum_v4(), p.payload());
    }
    if let Ok(p) = ArpPacket::new_checked(d) {
        let _ = (p.hw_type(), p.proto_type(), p.hw_len(), p.proto_len(), p.opcode());
        let _ = (p.sender_mac(), p.sender_ip(), p.target_mac(), p.target_ip());
        let _ = (p.sender_hw(), p.sender_proto(), p.target_hw(), p.target_proto());
    }
}
