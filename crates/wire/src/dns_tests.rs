//! Real messages, with the values tshark 4.0.17 decodes from the same captures (the test pcaps of
//! github.com/FoxIO-LLC/ja4, commit 0e54bc8), and hand-built hostile names.

use super::*;

/// `pcap/latest.pcapng` frame 108, the UDP payload. `tshark -e dns.id -e dns.qry.name -e dns.resp.name
/// -e dns.resp.type -e dns.resp.ttl -e dns.cname -e dns.a`: 0x5a7e, apps.identrust.com;
/// apps.identrust.com,identrust.edgesuite.net,a1952.dscq.akamai.net,a1952.dscq.akamai.net; 5,5,1,1;
/// 101,21401,20,20; identrust.edgesuite.net,a1952.dscq.akamai.net; 23.43.242.57,23.43.242.58.
const CNAME_CHAIN: &[u8] = include_bytes!("../testdata/dns-latest-frame108.bin");
/// `pcap/latest.pcapng` frame 105: the query, id 0x5a7e, apps.identrust.com type 1 class 0x0001.
const QUERY: &[u8] = include_bytes!("../testdata/dns-latest-frame105-query.bin");
/// `pcap/v6.pcap` frame 15: kiwi.itojun.org AAAA; 2 answers (dns.count.answers), TTL 3425 both,
/// dns.aaaa 3ffe:501:410:0:2c0:dfff:fe47:33e,3ffe:501:410:100:5254:ff:feda:48bf.
const AAAA: &[u8] = include_bytes!("../testdata/dns-v6-frame15.bin");

fn names(r: &[Answer<'_>]) -> Vec<String> {
    r.iter().map(|a| a.name.to_string()).collect()
}

#[test]
fn query() {
    let m = Message::new_checked(QUERY).unwrap();
    assert_eq!(
        (m.id(), m.is_response(), m.opcode(), m.question_count()),
        (0x5a7e, false, 0, 1)
    );
    let q: Vec<_> = m.questions().collect::<Result<_>>().unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].name, "apps.identrust.com");
    assert_eq!((q[0].qtype, q[0].qclass), (rtype::A, 1));
    assert_eq!(m.answers().count(), 0);
}

#[test]
fn cname_chain_with_compression() {
    let m = Message::new_checked(CNAME_CHAIN).unwrap();
    assert_eq!(
        (m.id(), m.is_response(), m.rcode(), m.answer_count()),
        (0x5a7e, true, 0, 4)
    );
    let q = m.questions().next().unwrap().unwrap();
    assert_eq!(q.name, "apps.identrust.com");
    let a: Vec<_> = m.answers().collect::<Result<_>>().unwrap();
    assert_eq!(
        names(&a),
        [
            "apps.identrust.com",
            "identrust.edgesuite.net",
            "a1952.dscq.akamai.net",
            "a1952.dscq.akamai.net"
        ]
    );
    assert_eq!(a.iter().map(|a| a.rtype).collect::<Vec<_>>(), [5, 5, 1, 1]);
    assert_eq!(
        a.iter().map(|a| a.ttl).collect::<Vec<_>>(),
        [101, 21401, 20, 20]
    );
    assert_eq!(
        a[0].data,
        Rdata::Cname(Name::from_bytes(b"identrust.edgesuite.net"))
    );
    assert_eq!(
        a[1].data,
        Rdata::Cname(Name::from_bytes(b"a1952.dscq.akamai.net"))
    );
    assert_eq!(a[2].data, Rdata::A(Ipv4Addr::new(23, 43, 242, 57)));
    assert_eq!(a[3].data, Rdata::A(Ipv4Addr::new(23, 43, 242, 58)));
}

#[test]
fn aaaa() {
    let m = Message::new_checked(AAAA).unwrap();
    let a: Vec<_> = m.answers().collect::<Result<_>>().unwrap();
    assert_eq!(names(&a), ["kiwi.itojun.org", "kiwi.itojun.org"]);
    assert_eq!(a.iter().map(|a| a.ttl).collect::<Vec<_>>(), [3425, 3425]);
    let want: [Ipv6Addr; 2] = [
        "3ffe:501:410:0:2c0:dfff:fe47:33e".parse().unwrap(),
        "3ffe:501:410:100:5254:ff:feda:48bf".parse().unwrap(),
    ];
    assert_eq!(a[0].data, Rdata::Aaaa(want[0]));
    assert_eq!(a[1].data, Rdata::Aaaa(want[1]));
}

#[test]
fn every_prefix_reads_what_is_there() {
    for msg in [CNAME_CHAIN, QUERY, AAAA] {
        let full = Message::new_checked(msg)
            .unwrap()
            .answers()
            .filter(|r| r.is_ok())
            .count();
        for n in 0..msg.len() {
            let Ok(m) = Message::new_checked(&msg[..n]) else {
                assert!(n < DNS_HDR);
                continue;
            };
            let _ = m.questions().count();
            let ok = m.answers().take_while(|r| r.is_ok()).count();
            assert!(ok <= full);
            // Records whole in the prefix are read, and the first one cut short is an error.
            assert!(m.answers().filter(|r| r.is_err()).count() <= 1);
        }
    }
}

/// A query header (1 question) followed by `name` and type/class A IN.
fn with_question(name: &[u8]) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(name);
    m.extend_from_slice(&[0, 1, 0, 1]);
    m
}

fn question_err(msg: &[u8]) -> Error {
    let m = Message::new_checked(msg).unwrap();
    let mut q = m.questions();
    let e = q.next().unwrap().unwrap_err();
    assert!(q.next().is_none(), "the iterator ends after an error");
    assert!(m.answers().next().is_none_or(|r| r.is_err()));
    e
}

#[test]
fn pointer_loops_are_malformed() {
    // A pointer to itself.
    let e = question_err(&with_question(&[0xc0, 12]));
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    // A label, then a pointer back to that label: backwards in the message but a loop.
    let e = question_err(&with_question(&[1, b'a', 0xc0, 12]));
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    // Two pointers pointing at each other (one of them forward).
    let e = question_err(&with_question(&[0xc0, 14, 0xc0, 12]));
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
}

#[test]
fn pointer_chain_is_bounded() {
    // At 12 the root; then 200 pointers, each to the one before: every jump goes backwards.
    let mut name = vec![0u8];
    for i in 0..200u16 {
        let target = if i == 0 { 12 } else { 13 + 2 * (i - 1) };
        name.extend_from_slice(&(0xc000 | target).to_be_bytes());
    }
    let msg = with_question(&name);
    // The question's name is the last pointer.
    let last = msg.len() - 4 - 2;
    let mut out = Name::new();
    let e = read_name(&msg, last, &mut out).unwrap_err();
    assert_eq!(e, malformed("too many compression pointers"));
    // A short chain is fine: the root.
    assert_eq!(read_name(&msg, 13 + 2 * 5, &mut out), Ok(13 + 2 * 6));
    assert!(out.is_empty());
}

#[test]
fn names_over_255_bytes_are_malformed() {
    let mut name = Vec::new();
    for _ in 0..4 {
        name.push(63);
        name.extend_from_slice(&[b'x'; 63]);
    }
    name.push(0);
    // 4 × 64 + 1 = 257 bytes.
    let e = question_err(&with_question(&name));
    assert_eq!(e, malformed("name longer than 255 bytes"));
    // 3 × 64 + 62 + 1 = 255 bytes: the longest name, 253 bytes dotted.
    let mut ok = name[..3 * 64].to_vec();
    ok.push(61);
    ok.extend_from_slice(&[b'y'; 61]);
    ok.push(0);
    assert_eq!(ok.len(), 255);
    let m = with_question(&ok);
    let q = Message::new_checked(&m[..])
        .unwrap()
        .questions()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!((q.name.len(), q.name.is_cut()), (253, false));
}

#[test]
fn label_types_and_truncation() {
    let e = question_err(&with_question(&[0x40, 0]));
    assert_eq!(e, malformed("unknown label type"));
    let e = question_err(&with_question(&[0x80, 0]));
    assert_eq!(e, malformed("unknown label type"));
    let m = with_question(&[3, b'c', b'o', b'm', 0]);
    let e = question_err(&m[..m.len() - 1]);
    assert!(matches!(e, Error::Truncated { .. }));
    assert!(Message::new_checked(&m[..11]).is_err());
}

#[test]
fn wrong_address_length_is_malformed() {
    // Response to `a.` with one A record of 3 bytes.
    let mut m = vec![
        0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 1, b'a', 0, 0, 1, 0, 1,
    ];
    m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 3, 1, 2, 3]);
    let msg = Message::new_checked(&m[..]).unwrap();
    let mut a = msg.answers();
    assert_eq!(
        a.next(),
        Some(Err(malformed("address record of the wrong length")))
    );
    assert_eq!(a.next(), None);
}

#[test]
fn tcp_length_prefix() {
    let mut p = (QUERY.len() as u16).to_be_bytes().to_vec();
    p.extend_from_slice(QUERY);
    assert_eq!(strip_tcp_length(&p), Ok(QUERY));
    assert!(matches!(
        strip_tcp_length(&p[..20]),
        Err(Error::Truncated { need: 38, .. })
    ));
    assert!(strip_tcp_length(&p[..1]).is_err());
}
