//! The hot paths allocate nothing: a counting global allocator watches parse, format_line (into a
//! reused String), emit and the incremental rewrites.

mod samples;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use wire::*;

struct Counting;

thread_local! {
    // const-initialised, no destructor: touching it never allocates.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

#[test]
fn parse_format_emit_allocate_nothing() {
    let mut line = String::with_capacity(1024);
    let mut frame = [0u8; 128];
    let spec = UdpFrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        ip: IpPair::V6 {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
        },
        src_port: 1,
        dst_port: 2,
        ttl: 64,
        payload_len: 20,
    };
    let before = allocs();
    let mut seen = 0u64;
    for round in 0..100u32 {
        for &(_, f, wire, lt) in samples::ALL {
            let h = parse(f, lt);
            seen += h.l4_offset.unwrap_or(0) as u64;
            line.clear();
            format_line(&mut line, round as u64 * 1_000_000_007, f, wire, lt).unwrap();
            seen += line.len() as u64;
        }
        spec.emit(&mut frame);
        spec.set_ports(&mut frame, round as u16, 80);
        spec.write_payload(&mut frame, 3, &round.to_be_bytes());
    }
    assert_eq!(allocs() - before, 0, "hot path allocated");
    assert!(seen > 0);
    // The counter does count: one small Vec is one allocation.
    let v = std::hint::black_box(vec![1u8; 3]);
    assert_eq!(allocs() - before, 1);
    drop(v);
}

#[test]
fn names_allocate_nothing() {
    let dns = include_bytes!("../testdata/dns-latest-frame108.bin");
    let hello = include_bytes!("../testdata/ja4-tls-sni-frame1.bin");
    let request = include_bytes!("../testdata/curl-http11.bin");
    let initial = include_bytes!("../testdata/ja4-tls-sni-frame2-quic-initial.bin");
    let (mut plain, mut crypto) = ([0u8; 1500], [0u8; 4096]);
    let before = allocs();
    let mut seen = 0usize;
    for _ in 0..100 {
        let m = dns::Message::new_checked(&dns[..]).unwrap();
        seen += m.questions().flatten().map(|q| q.name.len()).sum::<usize>();
        seen += m.answers().flatten().map(|a| a.name.len()).sum::<usize>();
        let h = tls::ClientHello::parse(hello).unwrap();
        seen += h.sni().map_or(0, |s| s.len()) + h.alpn().count();
        seen += h.ja4(tls::Transport::Tcp).as_str().len();
        let r = http::Request::parse(request).unwrap();
        seen += r.host().map_or(0, |h| h.len()) + r.path().len();
        let h = quic::client_hello(initial, &mut plain, &mut crypto).unwrap();
        seen += h.sni().map_or(0, |s| s.len());
    }
    assert_eq!(allocs() - before, 0, "names allocated");
    assert!(seen > 0);
}
