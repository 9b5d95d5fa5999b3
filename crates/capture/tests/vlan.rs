//! VLAN tags: the receive path moves a tag out of the frame into metadata before packet sockets see it;
//! the sources report it (TPID + TCI) and hand out the remaining bytes untouched.

mod common;

use capture::{Source, SourceConfig, SourceKind};
use common::*;
use testbed::{Side, Testbed, TestbedOptions};
use wire::Vlan;

fn tags_come_back(kind: SourceKind) {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let mut cfg = SourceConfig::new(&tb.rx_if);
    cfg.kind = kind;
    let mut src = tb.run_in(Side::Rx, || Source::open(&cfg)).expect("open");
    let tags = [
        None,
        Some(Vlan {
            tpid: 0x8100,
            tci: 0x2064,
        }), // priority 1, VLAN 100
        Some(Vlan {
            tpid: 0x88a8,
            tci: 0x0ffe,
        }), // 802.1ad, VLAN 4094
        Some(Vlan {
            tpid: 0x8100,
            tci: 0x0000,
        }), // priority tag, VLAN 0
    ];
    let specs: Vec<Spec> = (0..400u32)
        .map(|i| Spec {
            vlan: tags[i as usize % tags.len()],
            ..Spec::udp(i, 60 + (i as usize * 11) % 1400)
        })
        .collect();
    let frames: Vec<Vec<u8>> = specs.iter().map(frame).collect();
    tb.run_in(Side::Tx, || send_frames(&tb.tx_if, &frames));
    let got = drain(&mut src, frames.len() as u64);
    assert_eq!(got.len(), frames.len(), "{kind:?}");
    for ((g, s), f) in got.iter().zip(&specs).zip(&frames) {
        assert_eq!(g.vlan, s.vlan, "{kind:?} seq {}", s.seq);
        match s.vlan {
            Some(_) => {
                // Data is the frame without its 4 tag bytes; re-inserted it is the frame as sent.
                let mut untagged = f[..12].to_vec();
                untagged.extend_from_slice(&f[16..]);
                assert_eq!(g.data, untagged, "{kind:?} seq {}", s.seq);
                assert_eq!(g.wire_len as usize, f.len() - 4);
            }
            None => {
                assert_eq!(&g.data, f);
                assert_eq!(g.wire_len as usize, f.len());
            }
        }
        assert_eq!(&g.record, f, "{kind:?} seq {}: re-inserted tag", s.seq);
    }
}

#[test]
fn ring_reports_vlan_tags() {
    tags_come_back(SourceKind::Ring);
}

#[test]
fn copy_reports_vlan_tags() {
    tags_come_back(SourceKind::Copy);
}
