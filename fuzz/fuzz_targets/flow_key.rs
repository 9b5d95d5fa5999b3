//! index: the fast flow key of the live indexer on any bytes under every link type. It must never
//! panic, and whenever it answers it must equal the key (and direction) the general parser gives.
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
        if let Some((k, a_to_b)) = FlowKey::compact_v4_of(data, lt) {
            let (key, slow_a_to_b) = FlowKey::directed_of(data, lt);
            assert_eq!(Some(k), key.compact_v4());
            assert_eq!(a_to_b, slow_a_to_b);
        }
    }
});
