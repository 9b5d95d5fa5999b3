//! index: the fast flow key of the live indexer on any bytes under every link type. It must never
//! panic, and whenever it answers it must equal the key the general parser gives.
#![no_main]

use index::key::FlowKey;
use libfuzzer_sys::fuzz_target;
use wire::LinkType;

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
    for lt in LINK_TYPES {
        if let Some(k) = FlowKey::compact_v4_of(data, lt) {
            assert_eq!(Some(k), FlowKey::of(data, lt).compact_v4());
        }
    }
});
