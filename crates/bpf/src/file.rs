//! Filters for the packets of a capture file, compiled as `tcpdump -r FILE EXPR` compiles them:
//! on a savefile handle with the file's link type, snaplen and byte order, optimised, netmask 0.
//!
//! A handle from `pcap_open_dead` is not the same: libpcap's code generator looks at whether it
//! reads a file. On DLT_NULL/DLT_LOOP a file's IPv6 is tested against every BSD family value
//! (24, 28 and 30), a live handle's only against this system's (Linux: 10), and a byte-swapped
//! file's loopback header is tested swapped. So the handle here is a real savefile: a pcap file
//! header in memory, opened with `pcap_fopen_offline`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

use libc::sock_filter;

use crate::FilterError;

/// What libpcap needs of a capture file: the link type field as the file gives it (a LINKTYPE_
/// value, FCS bits included), its snaplen as the file gives it (libpcap adjusts 0 and too-large
/// values itself), and whether it is in the other byte order than this machine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SavefileLink {
    pub linktype: u32,
    pub snaplen: u32,
    pub swapped: bool,
}

#[repr(C)]
struct PcapT {
    _opaque: [u8; 0],
}

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut sock_filter,
}

extern "C" {
    fn pcap_fopen_offline_with_tstamp_precision(
        fp: *mut libc::FILE,
        precision: c_uint,
        errbuf: *mut c_char,
    ) -> *mut PcapT;
    fn pcap_dump_fopen(p: *mut PcapT, fp: *mut libc::FILE) -> *mut c_void;
    fn pcap_dump_close(d: *mut c_void);
    fn pcap_compile(
        p: *mut PcapT,
        prog: *mut BpfProgram,
        expr: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    fn pcap_freecode(prog: *mut BpfProgram);
    fn pcap_geterr(p: *mut PcapT) -> *mut c_char;
    fn pcap_close(p: *mut PcapT);
}

const PCAP_ERRBUF_SIZE: usize = 256;
const PCAP_TSTAMP_PRECISION_MICRO: c_uint = 0;
const PCAP_TSTAMP_PRECISION_NANO: c_uint = 1;
const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;

/// A savefile handle over a file header in memory; closed (with its stream) on drop.
struct Savefile {
    p: *mut PcapT,
    /// The bytes the stream reads; they must outlive it.
    _header: Box<[u8; 24]>,
}

impl Savefile {
    fn open(link: SavefileLink, nanos: bool) -> Result<Savefile, String> {
        let swap = |v: u32| if link.swapped { v.swap_bytes() } else { v };
        let swap16 = |v: u16| if link.swapped { v.swap_bytes() } else { v };
        let mut header = Box::new([0u8; 24]);
        header[0..4].copy_from_slice(&swap(PCAP_MAGIC_US).to_ne_bytes());
        header[4..6].copy_from_slice(&swap16(2).to_ne_bytes());
        header[6..8].copy_from_slice(&swap16(4).to_ne_bytes());
        header[16..20].copy_from_slice(&swap(link.snaplen).to_ne_bytes());
        header[20..24].copy_from_slice(&swap(link.linktype).to_ne_bytes());
        let mode = c"r";
        // SAFETY: `header` is a live heap buffer of 24 bytes that outlives the stream (it is
        // kept in the returned value, which closes the stream before dropping it).
        let fp = unsafe { libc::fmemopen(header.as_mut_ptr().cast::<c_void>(), 24, mode.as_ptr()) };
        if fp.is_null() {
            return Err(format!("fmemopen: {}", std::io::Error::last_os_error()));
        }
        let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
        // SAFETY: `fp` is an open stream; libpcap owns it from here (pcap_close closes it) and
        // writes at most PCAP_ERRBUF_SIZE bytes, NUL-terminated, into `errbuf`.
        let precision = if nanos {
            PCAP_TSTAMP_PRECISION_NANO
        } else {
            PCAP_TSTAMP_PRECISION_MICRO
        };
        let p =
            unsafe { pcap_fopen_offline_with_tstamp_precision(fp, precision, errbuf.as_mut_ptr()) };
        if p.is_null() {
            // SAFETY: on failure libpcap leaves the stream to the caller, and wrote a message.
            unsafe { libc::fclose(fp) };
            let msg = unsafe { CStr::from_ptr(errbuf.as_ptr()) };
            return Err(msg.to_string_lossy().into_owned());
        }
        Ok(Savefile { p, _header: header })
    }
}

impl Drop for Savefile {
    fn drop(&mut self) {
        // SAFETY: `p` came from pcap_fopen_offline and is closed once, here.
        unsafe { pcap_close(self.p) };
    }
}

/// Compiles `expr` for the packets of a file of this link type, snaplen and byte order as
/// `tcpdump -r` does: libpcap's messages on failure, including its refusals ("no VLAN support
/// for link-layer type 101", "expression rejects all packets"). The empty expression accepts
/// every packet.
pub fn compile_for_file(expr: &str, link: SavefileLink) -> Result<Vec<sock_filter>, FilterError> {
    let syntax = |message: String| FilterError::Syntax {
        expr: expr.to_string(),
        message,
    };
    let text =
        CString::new(expr).map_err(|_| syntax("the expression holds a NUL byte".to_string()))?;
    let file = Savefile::open(link, false).map_err(syntax)?;
    let mut prog = BpfProgram {
        bf_len: 0,
        bf_insns: std::ptr::null_mut(),
    };
    // SAFETY: `file.p` is an open handle, `prog` a valid out-parameter, `text` NUL-terminated.
    let rc = unsafe { pcap_compile(file.p, &mut prog, text.as_ptr(), 1, 0) };
    if rc != 0 {
        // SAFETY: pcap_geterr returns the handle's NUL-terminated message buffer.
        let msg = unsafe { CStr::from_ptr(pcap_geterr(file.p)) };
        return Err(syntax(msg.to_string_lossy().into_owned()));
    }
    // SAFETY: a successful pcap_compile filled `prog` with `bf_len` instructions, whose layout
    // is the kernel's `sock_filter` (code u16, jt u8, jf u8, k u32); freed once after the copy.
    let insns = unsafe {
        let v = std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec();
        pcap_freecode(&mut prog);
        v
    };
    Ok(insns)
}

/// The 24-byte header `tcpdump -r FILE -w OUT` writes for a file of this link: libpcap's own
/// (its link type mapped there and back, FCS bits kept, its adjusted snaplen), in this machine's
/// byte order, with the nanosecond magic when `nanos` (as `--time-stamp-precision=nano` writes).
pub fn tcpdump_file_header(link: SavefileLink, nanos: bool) -> Result<[u8; 24], String> {
    let file = Savefile::open(link, nanos)?;
    let mut buf: *mut c_char = std::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: open_memstream gets valid out-pointers; it allocates `buf`, freed below.
    let fp = unsafe { libc::open_memstream(&mut buf, &mut size) };
    if fp.is_null() {
        return Err(format!(
            "open_memstream: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `file.p` is an open handle and `fp` an open stream, which the dumper owns from here
    // (pcap_dump_close closes it, which sets `buf` and `size`).
    let header = unsafe {
        let d = pcap_dump_fopen(file.p, fp);
        if d.is_null() {
            libc::fclose(fp);
        } else {
            pcap_dump_close(d);
        }
        let bytes = if d.is_null() || buf.is_null() || size < 24 {
            None
        } else {
            let mut h = [0u8; 24];
            h.copy_from_slice(std::slice::from_raw_parts(buf.cast::<u8>(), 24));
            Some(h)
        };
        libc::free(buf.cast());
        bytes
    };
    header.ok_or_else(|| "libpcap wrote no file header".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_filter;

    fn null_frame(family: u32, swapped: bool) -> Vec<u8> {
        // A 4-byte loopback header in the capturing host's order, then a minimal IPv6 header.
        let fam = if swapped {
            family.to_be_bytes()
        } else {
            family.to_le_bytes()
        };
        let mut f = fam.to_vec();
        let mut ip6 = [0u8; 40];
        ip6[0] = 0x60;
        ip6[6] = 17;
        f.extend_from_slice(&ip6);
        f
    }

    #[test]
    fn bsd_loopback_ipv6_matches_every_bsd_family_as_tcpdump_reads_a_file() {
        for swapped in [false, true] {
            let link = SavefileLink {
                linktype: 0,
                snaplen: 65535,
                swapped,
            };
            let p = compile_for_file("ip6", link).unwrap();
            for fam in [24, 28, 30] {
                let f = null_frame(fam, swapped);
                assert_ne!(
                    run_filter(&p, &f, f.len() as u32),
                    0,
                    "AF {fam} swapped {swapped}"
                );
            }
            let f = null_frame(2, swapped);
            assert_eq!(run_filter(&p, &f, f.len() as u32), 0, "AF_INET is not ip6");
        }
    }

    #[test]
    fn refusals_are_libpcaps_own_words() {
        let raw = SavefileLink {
            linktype: 101,
            snaplen: 65535,
            swapped: false,
        };
        let e = compile_for_file("vlan and udp", raw)
            .unwrap_err()
            .to_string();
        assert!(e.contains("VLAN"), "{e}");
        let eth = SavefileLink { linktype: 1, ..raw };
        let e = compile_for_file("tcp and udp", eth)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expression rejects all packets"), "{e}");
        assert!(compile_for_file("udp port", eth).is_err());
        assert_eq!(compile_for_file("", eth).unwrap().len(), 1);
    }

    #[test]
    fn a_copys_header_is_the_one_libpcap_writes() {
        // Snaplen 0 means the link type's maximum; LINKTYPE 12 (DLT_RAW here) is written back as
        // LINKTYPE_RAW 101; a byte-swapped file's copy is in this machine's order.
        let h = tcpdump_file_header(
            SavefileLink {
                linktype: 12,
                snaplen: 0,
                swapped: true,
            },
            false,
        )
        .unwrap();
        let rd = |i: usize| u32::from_ne_bytes(h[i..i + 4].try_into().unwrap());
        assert_eq!(rd(0), 0xa1b2_c3d4);
        assert_eq!(rd(16), 262_144);
        assert_eq!(rd(20), 101);
        let ns = tcpdump_file_header(
            SavefileLink {
                linktype: 1,
                snaplen: 96,
                swapped: false,
            },
            true,
        )
        .unwrap();
        assert_eq!(
            u32::from_ne_bytes(ns[0..4].try_into().unwrap()),
            0xa1b2_3c4d
        );
        assert_eq!(u32::from_ne_bytes(ns[16..20].try_into().unwrap()), 96);
    }

    #[test]
    fn any_link_type_libpcap_knows_compiles() {
        // 802.11 + radiotap, PPP, Cisco HDLC, Linux SLL2.
        for lt in [127, 9, 104, 276] {
            let link = SavefileLink {
                linktype: lt,
                snaplen: 0,
                swapped: false,
            };
            let r = compile_for_file("ip", link);
            assert!(r.is_ok(), "link type {lt}: {r:?}");
        }
        // DOCSIS: libpcap refuses, as `tcpdump -r` does.
        let docsis = SavefileLink {
            linktype: 143,
            snaplen: 0,
            swapped: false,
        };
        let e = compile_for_file("ip", docsis).unwrap_err().to_string();
        assert!(
            e.contains("DOCSIS link-layer type filtering not implemented"),
            "{e}"
        );
    }
}
