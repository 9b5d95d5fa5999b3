//! tcpdump-syntax filters, compiled by libpcap into classic BPF: for a live socket
//! ([`compile_filter`], attached with SO_ATTACH_FILTER by `capture`) and for the packets of a
//! capture file ([`compile_for_file`], as `tcpdump -r` compiles them), run in user space by
//! [`run_filter`]. One crate for the filter language so that `capture`, `index` and `xdp` agree on
//! it without pulling in each other. [`expr`] parses the language once into a tree, for the
//! index's narrowing and the XDP prefilter; libpcap stays the judge of every expression.
//!
//! The kernel runs a live program on every packet before it reaches the socket; a packet the
//! program rejects is never copied into the ring. The kernel counts only accepted packets
//! (PACKET_STATISTICS), so **the number of packets a filter rejected is not known** to a packet
//! socket; the caller can estimate it from interface counters when it is the only capturer.

pub mod expr;
mod file;

pub use file::{compile_for_file, tcpdump_file_header, SavefileLink};

use std::ffi::{c_char, c_int, c_uint, CStr};
use std::fmt::Write as _;
use std::sync::Mutex;

use libc::sock_filter;

use wire::LinkType;

/// The largest snaplen libpcap uses (MAXIMUM_SNAPLEN).
pub const MAX_SNAPLEN: u32 = 262_144;
/// The kernel's limit on classic BPF program length (BPF_MAXINSNS).
pub const MAX_INSNS: usize = 4096;

const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

extern "C" {
    // Both live in libpcap, which the `pcap` crate already links.
    fn bpf_image(insn: *const sock_filter, n: c_int) -> *mut c_char;
    fn bpf_filter(
        insns: *const sock_filter,
        pkt: *const u8,
        wirelen: c_uint,
        buflen: c_uint,
    ) -> c_uint;
}

/// Compile `expr` (tcpdump syntax) for `linktype` with libpcap's optimiser, as tcpdump does.
///
/// Accepting `ret` instructions return `snaplen`, so the kernel copies at most `snaplen` bytes of a
/// matching packet (libpcap does the same in memory-mapped mode).
pub fn compile_filter(
    expr: &str,
    linktype: LinkType,
    snaplen: u32,
) -> Result<Vec<sock_filter>, FilterError> {
    let syntax = |message: String| FilterError::Syntax {
        expr: expr.to_string(),
        message,
    };
    let dead = pcap::Capture::dead(pcap::Linktype(linktype.dlt() as i32))
        .map_err(|e| syntax(pcap_msg(e)))?;
    let program = dead.compile(expr, true).map_err(|e| syntax(pcap_msg(e)))?;
    let mut insns = Vec::with_capacity(program.get_instructions().len());
    for insn in program.get_instructions() {
        // The pcap crate keeps the fields private but prints them as "code jt jf k".
        let text = insn.to_string();
        let mut f = text.split(' ').map(|s| s.parse::<u32>().ok());
        let (Some(Some(code)), Some(Some(jt)), Some(Some(jf)), Some(Some(k))) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(syntax(format!(
                "unexpected instruction text {text:?} from libpcap"
            )));
        };
        insns.push(sock_filter {
            code: code as u16,
            jt: jt as u8,
            jf: jf as u8,
            k,
        });
    }
    set_snaplen(&mut insns, snaplen);
    if insns.len() > MAX_INSNS {
        return Err(FilterError::TooLong {
            expr: expr.to_string(),
            len: insns.len(),
        });
    }
    Ok(insns)
}

fn pcap_msg(e: pcap::Error) -> String {
    match e {
        pcap::Error::PcapError(m) => m,
        other => other.to_string(),
    }
}

/// Make every accepting `ret #k` return `snaplen` (`ret #0` stays a reject).
pub fn set_snaplen(insns: &mut [sock_filter], snaplen: u32) {
    for i in insns.iter_mut() {
        if i.code == BPF_RET_K && i.k != 0 {
            i.k = snaplen;
        }
    }
}

/// A one-instruction program that accepts every packet, truncated to `snaplen`.
pub fn accept_all(snaplen: u32) -> Vec<sock_filter> {
    vec![sock_filter {
        code: BPF_RET_K,
        jt: 0,
        jf: 0,
        k: snaplen,
    }]
}

/// A one-instruction program that rejects every packet (used while a socket is being set up).
pub fn drop_all() -> Vec<sock_filter> {
    accept_all(0)
}

/// Run `insns` in libpcap's interpreter on a frame: the number of bytes it would keep (0 = reject).
///
/// Useful to check what the kernel accepted against what the same program says offline.
pub fn run_filter(insns: &[sock_filter], frame: &[u8], wire_len: u32) -> u32 {
    if insns.is_empty() {
        return wire_len;
    }
    // SAFETY: libpcap reads at most `buflen` bytes of `frame` and only `insns`; bpf_filter bounds-checks jumps
    // only as far as the program is valid, which every libpcap-compiled or hand-built one-insn program is.
    unsafe {
        bpf_filter(
            insns.as_ptr(),
            frame.as_ptr(),
            wire_len,
            frame.len() as c_uint,
        )
    }
}

/// How to print a program (tcpdump's -d, -dd, -ddd).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpStyle {
    /// `-d`: human-readable, one instruction per line.
    Asm,
    /// `-dd`: a C array initialiser.
    C,
    /// `-ddd`: the count, then `code jt jf k` in decimal.
    Decimal,
}

// bpf_image formats into a static buffer inside libpcap.
static IMAGE_LOCK: Mutex<()> = Mutex::new(());

/// Print a program the way `tcpdump -d`/`-dd`/`-ddd` does.
pub fn dump(insns: &[sock_filter], style: DumpStyle) -> String {
    let mut out = String::new();
    match style {
        DumpStyle::Asm => {
            let _guard = IMAGE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
            for (n, insn) in insns.iter().enumerate() {
                // SAFETY: bpf_image only reads one instruction and returns a NUL-terminated static buffer,
                // which we copy out while holding the lock.
                let line = unsafe { CStr::from_ptr(bpf_image(insn, n as c_int)) };
                let _ = writeln!(out, "{}", line.to_string_lossy());
            }
        }
        DumpStyle::C => {
            for i in insns {
                let _ = writeln!(
                    out,
                    "{{ 0x{:x}, {}, {}, 0x{:08x} }},",
                    i.code, i.jt, i.jf, i.k
                );
            }
        }
        DumpStyle::Decimal => {
            let _ = writeln!(out, "{}", insns.len());
            for i in insns {
                let _ = writeln!(out, "{} {} {} {}", i.code, i.jt, i.jf, i.k);
            }
        }
    }
    out
}

/// A filter expression could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// libpcap rejected the expression; `message` is libpcap's own text.
    #[error(
        "bad filter expression: {message}; check the addresses and syntax \
         (tcpdump -d '{expr}' shows the same)"
    )]
    Syntax {
        /// The expression as given.
        expr: String,
        /// libpcap's message, e.g. "invalid IPv4 address '990.99.12.23'".
        message: String,
    },
    /// The program is longer than the kernel accepts (BPF_MAXINSNS = 4096).
    #[error("filter '{expr}' compiles to {len} instructions; the kernel accepts at most 4096: simplify it")]
    TooLong {
        /// The expression as given.
        expr: String,
        /// Its instruction count.
        len: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_expression_accepts_everything() {
        let p = compile_filter("", LinkType::Ethernet, 96).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].code, p[0].k), (BPF_RET_K, 96));
    }

    #[test]
    fn syntax_error_keeps_libpcap_text_and_says_what_to_do() {
        let e = compile_filter("udp port", LinkType::Ethernet, MAX_SNAPLEN).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("bad filter expression: "), "{msg}");
        assert!(msg.contains("syntax error"), "{msg}");
        assert!(msg.contains("tcpdump -d 'udp port'"), "{msg}");
    }

    #[test]
    fn snaplen_lands_in_accepting_returns_only() {
        let p = compile_filter("udp port 9", LinkType::Ethernet, 128).unwrap();
        let rets: Vec<u32> = p
            .iter()
            .filter(|i| i.code == BPF_RET_K)
            .map(|i| i.k)
            .collect();
        assert_eq!(rets, vec![128, 0]);
    }

    #[test]
    fn decimal_dump_round_trips() {
        let p = compile_filter("tcp", LinkType::Ethernet, MAX_SNAPLEN).unwrap();
        let text = dump(&p, DumpStyle::Decimal);
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap().parse::<usize>().unwrap(), p.len());
        for (line, i) in lines.zip(&p) {
            assert_eq!(line, format!("{} {} {} {}", i.code, i.jt, i.jf, i.k));
        }
    }

    /// A raw-IP filter tests the IP header at offset 0 (libpcap compiles DLT_RAW; LINKTYPE_RAW 101 is
    /// the number in files and an unknown DLT to pcap_compile).
    #[test]
    fn raw_ip_filter_reads_the_ip_header_at_offset_zero() {
        let p = compile_filter("udp dst port 53", LinkType::Raw, MAX_SNAPLEN).unwrap();
        let mut ip = [0u8; 28];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&28u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[22..24].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(run_filter(&p, &ip, 28), MAX_SNAPLEN);
        ip[22..24].copy_from_slice(&54u16.to_be_bytes());
        assert_eq!(run_filter(&p, &ip, 28), 0);
    }
}
