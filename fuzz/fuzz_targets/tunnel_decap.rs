//! wire: `decapsulate` on any bytes under every link type: no panic, offsets inside the frame,
//! the depth bound kept, a packet without tunnel decoded exactly as `parse` does, and the VXLAN
//! fast path (`vxlan_fast`) never saying other than `decapsulate`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::tunnel::MAX_DEPTH;
use wire::*;

const LINK_TYPES: [LinkType; 4] = [
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
];

fuzz_target!(|data: &[u8]| {
    for lt in LINK_TYPES {
        let d = decapsulate(data, lt);
        assert!(usize::from(d.depth) <= MAX_DEPTH);
        for l in d.layers() {
            assert!(l.inner_offset as usize <= data.len());
        }
        if let Some(o) = d.inner.l4_offset {
            assert!(o as usize <= data.len());
            assert!(d.inner.l3_offset.is_some_and(|l3| l3 <= o));
        }
        if d.depth == 0 {
            assert_eq!(d.inner, parse(data, lt));
        }
        if let Some((vni, off)) = tunnel::vxlan_fast(data, lt) {
            let l = d.layers()[0];
            assert_eq!((l.kind, l.id, l.inner_offset), (TunnelKind::Vxlan, Some(vni), off));
            assert_eq!(l.payload, Payload::Ethernet);
        }
    }
});
