//! On-disk layouts of pcap and pcapng: constants, file headers, per-packet record encoding.
//!
//! Files are written in the host's byte order (as libpcap does); readers handle both orders.

use wire::{reinsert_tag, reinsert_tag_len, Vlan};

/// pcap magic for microsecond timestamps.
pub const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
/// pcap magic for nanosecond timestamps.
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// pcapng Section Header Block type (a palindrome, so byte order does not matter).
pub const BT_SHB: u32 = 0x0a0d_0d0a;
/// pcapng Interface Description Block.
pub const BT_IDB: u32 = 1;
/// pcapng obsolete Packet Block.
pub const BT_OPB: u32 = 2;
/// pcapng Simple Packet Block.
pub const BT_SPB: u32 = 3;
/// pcapng Name Resolution Block.
pub const BT_NRB: u32 = 4;
/// pcapng Interface Statistics Block.
pub const BT_ISB: u32 = 5;
/// pcapng Enhanced Packet Block.
pub const BT_EPB: u32 = 6;
/// pcapng byte-order magic.
pub const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// Largest snaplen accepted (libpcap's MAXIMUM_SNAPLEN); larger caplens mean a corrupt file.
pub const MAX_SNAPLEN: u32 = 262_144;
/// Length of a pcap file header.
pub const PCAP_HEADER_LEN: usize = 24;
/// Length of a pcap record header.
pub const PCAP_RECORD_LEN: usize = 16;
/// Fixed part of an EPB: type, length, interface, ts high, ts low, caplen, origlen.
pub const EPB_HEADER_LEN: usize = 28;

/// Output file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap; `nanos` selects the nanosecond magic.
    Pcap { nanos: bool },
    /// pcapng with one Interface Description Block per interface; their if_tsresol is the encoder's `tsresol` (9 by default).
    PcapNg,
}

/// Interface statistics written in the pcapng Interface Statistics Block at close.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfStats {
    /// The interface id the block is about (0 for the first interface block).
    pub interface: u32,
    /// isb_ifrecv: packets received by the interface / socket.
    pub ifrecv: Option<u64>,
    /// isb_ifdrop: packets dropped by the interface for lack of resources.
    pub ifdrop: Option<u64>,
    /// isb_filteraccept: packets accepted by the filter.
    pub filter_accept: Option<u64>,
    /// isb_osdrop: packets dropped by the operating system (kernel ring).
    pub os_drop: Option<u64>,
    /// isb_usrdeliv: packets delivered to the user (defaults to the packets written).
    pub usr_deliv: Option<u64>,
    /// isb_starttime in ns (defaults to the first packet's timestamp).
    pub start_ns: Option<u64>,
    /// isb_endtime in ns (defaults to the last packet's timestamp).
    pub end_ns: Option<u64>,
}

/// Rounds up to a multiple of 4 (pcapng alignment).
#[inline]
pub const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Destination for the bytes of one record: a plain slice on the fast path, two buffers when a
/// record straddles a buffer boundary.
pub trait Emit {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
}

/// Emits into one slice that is known to be large enough (the fast path).
pub struct SliceEmit<'a> {
    pub buf: &'a mut [u8],
    pub at: usize,
}

impl Emit for SliceEmit<'_> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

/// Record encoder for one output format; built once per file.
#[derive(Clone, Copy, Debug)]
pub struct Encoder {
    pub format: Format,
    pub snaplen: u32,
    /// pcapng only: stamps in units of 10^-tsresol s, written as if_tsresol (6 = µs, 9 = ns). pcap
    /// says its precision with its magic (`Format::Pcap { nanos }`).
    pub tsresol: u8,
    /// pcapng only: the interface id written in each Enhanced Packet Block (0: the first interface block).
    pub interface: u32,
}

/// pcapng if_tsresol for nanosecond stamps.
pub const TSRESOL_NS: u8 = 9;
/// pcapng if_tsresol for microsecond stamps.
pub const TSRESOL_US: u8 = 6;

impl Encoder {
    /// Captured length of a frame of `data_len` bytes, with the tag if it is re-inserted, after snaplen.
    #[inline(always)]
    pub fn caplen(&self, data_len: usize, vlan: bool) -> usize {
        let full = data_len + reinsert_tag_len(data_len, vlan);
        full.min(self.snaplen as usize)
    }

    /// Total record length for a captured length.
    #[inline(always)]
    pub fn record_len(&self, caplen: usize) -> usize {
        self.record_len_opts(caplen, 0)
    }

    /// Total record length for a captured length and `opts_len` bytes of pcapng options (see
    /// [`epb_comment`]; pcap has no place for them and leaves them out).
    #[inline(always)]
    pub fn record_len_opts(&self, caplen: usize, opts_len: usize) -> usize {
        match self.format {
            Format::Pcap { .. } => PCAP_RECORD_LEN + caplen,
            Format::PcapNg => EPB_HEADER_LEN + pad4(caplen) + opts_len + 4,
        }
    }

    /// Whether stamps are kept in µs (pcap µs, pcapng with if_tsresol 6).
    fn micros(&self) -> bool {
        match self.format {
            Format::Pcap { nanos } => !nanos,
            Format::PcapNg => self.tsresol == TSRESOL_US,
        }
    }

    /// A stamp (ns) as the file records it, in ns: cut to the µs where the file keeps µs.
    pub fn stored_ns(&self, ts_ns: u64) -> u64 {
        if self.micros() {
            ts_ns / 1000 * 1000
        } else {
            ts_ns
        }
    }

    /// The stamp of the packet record at the start of `rest` (this encoder's), in ns; None if it
    /// is not a whole packet record.
    pub fn record_ns(&self, rest: &[u8]) -> Option<u64> {
        let (ts, _, _) = own_record(self.format, rest)?.packet?;
        // pcapng: `own_record` takes the 64-bit stamp for ns; a µs file holds µs there.
        Some(match self.format {
            Format::PcapNg if self.tsresol == TSRESOL_US => ts.saturating_mul(1000),
            _ => ts,
        })
    }

    /// Writes one packet record. `caplen` and `rec_len` come from [`Self::caplen`] / [`Self::record_len`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn emit_packet<E: Emit>(
        &self,
        out: &mut E,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
        caplen: usize,
        rec_len: usize,
    ) {
        self.emit_packet_opts(out, ts_ns, wire_len, data, vlan, caplen, rec_len, &[]);
    }

    /// [`Self::emit_packet`] with pcapng options after the packet data (`opts`: whole options,
    /// each padded to 4, ending with opt_endofopt, as [`epb_comment`] makes them; `rec_len` from
    /// [`Self::record_len_opts`]). pcap records have no options: `opts` is left out.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn emit_packet_opts<E: Emit>(
        &self,
        out: &mut E,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
        caplen: usize,
        rec_len: usize,
        opts: &[u8],
    ) {
        let wire = wire_len.saturating_add(reinsert_tag_len(data.len(), vlan.is_some()) as u32);
        match self.format {
            Format::Pcap { nanos } => {
                let sec = (ts_ns / 1_000_000_000) as u32;
                let sub = (ts_ns % 1_000_000_000) as u32;
                let frac = if nanos { sub } else { sub / 1000 };
                let mut h = [0u8; PCAP_RECORD_LEN];
                h[0..4].copy_from_slice(&sec.to_ne_bytes());
                h[4..8].copy_from_slice(&frac.to_ne_bytes());
                h[8..12].copy_from_slice(&(caplen as u32).to_ne_bytes());
                h[12..16].copy_from_slice(&wire.to_ne_bytes());
                out.put(&h);
                emit_frame(out, data, vlan, caplen);
            }
            Format::PcapNg => {
                let ts = if self.tsresol == TSRESOL_US {
                    ts_ns / 1000
                } else {
                    ts_ns
                };
                let mut h = [0u8; EPB_HEADER_LEN];
                h[0..4].copy_from_slice(&BT_EPB.to_ne_bytes());
                h[4..8].copy_from_slice(&(rec_len as u32).to_ne_bytes());
                h[8..12].copy_from_slice(&self.interface.to_ne_bytes());
                h[12..16].copy_from_slice(&((ts >> 32) as u32).to_ne_bytes());
                h[16..20].copy_from_slice(&(ts as u32).to_ne_bytes());
                h[20..24].copy_from_slice(&(caplen as u32).to_ne_bytes());
                h[24..28].copy_from_slice(&wire.to_ne_bytes());
                out.put(&h);
                emit_frame(out, data, vlan, caplen);
                out.put(&[0u8; 3][..pad4(caplen) - caplen]);
                if !opts.is_empty() {
                    out.put(opts);
                }
                out.put(&(rec_len as u32).to_ne_bytes());
            }
        }
    }

    /// The file header: pcap global header, or pcapng SHB + one IDB per name of `if_names` (interface ids
    /// 0, 1, ... in that order; one IDB without a name when there is none), with if_description when not empty.
    pub fn file_header(&self, linktype: u32, if_names: &[String], if_description: &str) -> Vec<u8> {
        let mut v = Vec::with_capacity(256);
        match self.format {
            Format::Pcap { nanos } => {
                let magic = if nanos { PCAP_MAGIC_NS } else { PCAP_MAGIC_US };
                v.extend_from_slice(&magic.to_ne_bytes());
                v.extend_from_slice(&2u16.to_ne_bytes());
                v.extend_from_slice(&4u16.to_ne_bytes());
                v.extend_from_slice(&0i32.to_ne_bytes()); // thiszone
                v.extend_from_slice(&0u32.to_ne_bytes()); // sigfigs
                v.extend_from_slice(&self.snaplen.to_ne_bytes());
                v.extend_from_slice(&linktype.to_ne_bytes());
            }
            Format::PcapNg => {
                let mut shb = Vec::new();
                shb.extend_from_slice(&BYTE_ORDER_MAGIC.to_ne_bytes());
                shb.extend_from_slice(&1u16.to_ne_bytes());
                shb.extend_from_slice(&0u16.to_ne_bytes());
                shb.extend_from_slice(&(-1i64).to_ne_bytes()); // section length unknown
                let appl = concat!("ringcap ", env!("CARGO_PKG_VERSION"));
                push_option(&mut shb, 4, appl.as_bytes()); // shb_userappl
                push_option(&mut shb, 0, &[]);
                push_block(&mut v, BT_SHB, &shb);

                let unnamed = [String::new()];
                let names = if if_names.is_empty() {
                    &unnamed[..]
                } else {
                    if_names
                };
                for if_name in names {
                    let mut idb = Vec::new();
                    idb.extend_from_slice(&(linktype as u16).to_ne_bytes());
                    idb.extend_from_slice(&0u16.to_ne_bytes());
                    idb.extend_from_slice(&self.snaplen.to_ne_bytes());
                    if !if_name.is_empty() {
                        push_option(&mut idb, 2, if_name.as_bytes()); // if_name
                    }
                    if !if_description.is_empty() {
                        push_option(&mut idb, 3, if_description.as_bytes()); // if_description
                    }
                    push_option(&mut idb, 9, &[self.tsresol]); // if_tsresol: 10^-tsresol
                    push_option(&mut idb, 0, &[]);
                    push_block(&mut v, BT_IDB, &idb);
                }
            }
        }
        v
    }

    /// The pcapng Interface Statistics Block (empty for pcap, which has no place for it).
    pub fn stats_block(&self, s: &IfStats, now_ns: u64) -> Vec<u8> {
        let mut v = Vec::new();
        if self.format != Format::PcapNg {
            return v;
        }
        let mut isb = Vec::new();
        isb.extend_from_slice(&s.interface.to_ne_bytes());
        isb.extend_from_slice(&((now_ns >> 32) as u32).to_ne_bytes());
        isb.extend_from_slice(&(now_ns as u32).to_ne_bytes());
        let time = |t: u64| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&((t >> 32) as u32).to_ne_bytes());
            b[4..].copy_from_slice(&(t as u32).to_ne_bytes());
            b
        };
        if let Some(t) = s.start_ns {
            push_option(&mut isb, 2, &time(t));
        }
        if let Some(t) = s.end_ns {
            push_option(&mut isb, 3, &time(t));
        }
        let counters = [
            (4, s.ifrecv),
            (5, s.ifdrop),
            (6, s.filter_accept),
            (7, s.os_drop),
            (8, s.usr_deliv),
        ];
        for (code, value) in counters {
            if let Some(n) = value {
                push_option(&mut isb, code, &n.to_ne_bytes());
            }
        }
        push_option(&mut isb, 0, &[]);
        push_block(&mut v, BT_ISB, &isb);
        v
    }
}

/// Copies a frame with its VLAN tag put back (see [`wire::reinsert_tag`]), cut at `caplen`.
#[inline(always)]
fn emit_frame<E: Emit>(out: &mut E, data: &[u8], vlan: Option<Vlan>, caplen: usize) {
    if vlan.is_none() {
        // Nearly every packet: one copy (caplen ≤ data.len() without a tag), not three calls.
        out.put(&data[..caplen]);
        return;
    }
    let (head, tag, tail) = reinsert_tag(data, vlan);
    let tag = tag.as_ref().map_or(&[][..], |t| &t[..]);
    let mut left = caplen;
    for part in [head, tag, tail] {
        let n = part.len().min(left);
        out.put(&part[..n]);
        left -= n;
    }
}

/// pcapng opt_comment.
pub const OPT_COMMENT: u16 = 1;

/// Sets `out` to the options of an Enhanced Packet Block holding one opt_comment of `text` (at
/// most 65535 bytes of it, UTF-8 as pcapng wants) and opt_endofopt: what
/// [`Encoder::emit_packet_opts`] takes; Wireshark shows it as `frame.comment`.
pub fn epb_comment(out: &mut Vec<u8>, text: &[u8]) {
    out.clear();
    push_option(
        out,
        OPT_COMMENT,
        &text[..text.len().min(usize::from(u16::MAX))],
    );
    push_option(out, 0, &[]);
}

/// Appends a pcapng option (code, length, value padded to 4).
fn push_option(v: &mut Vec<u8>, code: u16, value: &[u8]) {
    v.extend_from_slice(&code.to_ne_bytes());
    v.extend_from_slice(&(value.len() as u16).to_ne_bytes());
    v.extend_from_slice(value);
    v.resize(pad4(v.len()), 0);
}

/// Appends a pcapng block around `body` (which must already be padded to 4).
fn push_block(v: &mut Vec<u8>, block_type: u32, body: &[u8]) {
    let total = (body.len() + 12) as u32;
    v.extend_from_slice(&block_type.to_ne_bytes());
    v.extend_from_slice(&total.to_ne_bytes());
    v.extend_from_slice(body);
    v.extend_from_slice(&total.to_ne_bytes());
}

/// One record this crate wrote (host byte order), as the indexer reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnRecord {
    /// Whole record length.
    pub len: usize,
    /// For a packet: timestamp (ns), wire length, and where its captured bytes lie in the record.
    pub packet: Option<(u64, u32, std::ops::Range<usize>)>,
}

/// Length of the fixed record header: what must be present to learn a record's length.
pub fn own_header_len(format: Format) -> usize {
    match format {
        Format::Pcap { .. } => PCAP_RECORD_LEN,
        Format::PcapNg => 8,
    }
}

/// Decodes the record at the start of `rest`; `None` if `rest` does not hold the whole record
/// (or its length is impossible: `Some` with `len == 0` is never returned).
pub fn own_record(format: Format, rest: &[u8]) -> Option<OwnRecord> {
    let u32_at = |at: usize| u32::from_ne_bytes(rest[at..at + 4].try_into().unwrap());
    match format {
        Format::Pcap { nanos } => {
            if rest.len() < PCAP_RECORD_LEN {
                return None;
            }
            let caplen = u32_at(8) as usize;
            let len = PCAP_RECORD_LEN + caplen;
            if len > rest.len() {
                return None;
            }
            let sub = u64::from(u32_at(4));
            let ts = u64::from(u32_at(0)) * 1_000_000_000 + if nanos { sub } else { sub * 1000 };
            Some(OwnRecord {
                len,
                packet: Some((ts, u32_at(12), PCAP_RECORD_LEN..len)),
            })
        }
        Format::PcapNg => {
            if rest.len() < 8 {
                return None;
            }
            let (ty, len) = (u32_at(0), u32_at(4) as usize);
            if len < 12 || len > rest.len() {
                return None;
            }
            if ty != BT_EPB || len < EPB_HEADER_LEN + 4 {
                return Some(OwnRecord { len, packet: None });
            }
            // if_tsresol is 9 in every file this crate writes: the 64-bit stamp is in ns.
            let ts = (u64::from(u32_at(12)) << 32) | u64::from(u32_at(16));
            let caplen = (u32_at(20) as usize).min(len - EPB_HEADER_LEN - 4);
            Some(OwnRecord {
                len,
                packet: Some((ts, u32_at(24), EPB_HEADER_LEN..EPB_HEADER_LEN + caplen)),
            })
        }
    }
}

/// Walks records this crate wrote (host byte order) in `bytes[start..]`, stopping at the first
/// record that does not end inside `bytes`. Returns (end of the last whole record, packets).
/// Used after a failed write to find where the file can be cut.
pub fn walk_own_records(format: Format, bytes: &[u8], start: usize) -> (usize, u64) {
    let mut at = start;
    let mut packets = 0;
    loop {
        let rest = &bytes[at.min(bytes.len())..];
        let (len, is_packet) = match format {
            Format::Pcap { .. } => {
                if rest.len() < PCAP_RECORD_LEN {
                    break;
                }
                let caplen = u32::from_ne_bytes(rest[8..12].try_into().unwrap()) as usize;
                (PCAP_RECORD_LEN + caplen, true)
            }
            Format::PcapNg => {
                if rest.len() < 8 {
                    break;
                }
                let ty = u32::from_ne_bytes(rest[0..4].try_into().unwrap());
                let len = u32::from_ne_bytes(rest[4..8].try_into().unwrap()) as usize;
                if len < 12 {
                    break; // never written by us; stop rather than loop
                }
                (len, ty == BT_EPB)
            }
        };
        if len > rest.len() {
            break;
        }
        at += len;
        packets += u64::from(is_packet);
    }
    (at, packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct VecEmit(Vec<u8>);
    impl Emit for VecEmit {
        fn put(&mut self, b: &[u8]) {
            self.0.extend_from_slice(b);
        }
    }

    #[test]
    fn vlan_tag_goes_after_the_macs_and_snaplen_cuts_after_it() {
        let frame: Vec<u8> = (0u8..20).collect();
        let enc = Encoder {
            format: Format::Pcap { nanos: true },
            snaplen: 14,
            tsresol: TSRESOL_NS,
            interface: 0,
        };
        let tag = Some(Vlan {
            tpid: 0x8100,
            tci: 0x0123,
        });
        let caplen = enc.caplen(frame.len(), true);
        assert_eq!(caplen, 14);
        let mut out = VecEmit(Vec::new());
        enc.emit_packet(
            &mut out,
            1_500_000_123,
            20,
            &frame,
            tag,
            caplen,
            enc.record_len(caplen),
        );
        let rec = out.0;
        assert_eq!(&rec[0..4], &1u32.to_ne_bytes());
        assert_eq!(&rec[4..8], &500_000_123u32.to_ne_bytes());
        assert_eq!(&rec[8..12], &14u32.to_ne_bytes());
        assert_eq!(&rec[12..16], &24u32.to_ne_bytes());
        assert_eq!(&rec[16..28], &frame[..12]);
        assert_eq!(&rec[28..30], &[0x81, 0x00]);
        assert_eq!(rec.len(), 30);
    }

    #[test]
    fn epb_with_a_comment_keeps_the_packet_where_readers_look() {
        let enc = Encoder {
            format: Format::PcapNg,
            snaplen: MAX_SNAPLEN,
            tsresol: TSRESOL_NS,
            interface: 0,
        };
        let mut opts = Vec::new();
        epb_comment(&mut opts, b"vxlan 42");
        // code 1, length 8, "vxlan 42", then opt_endofopt.
        assert_eq!(opts.len(), 4 + 8 + 4);
        let data = [0x5au8; 61];
        let c = enc.caplen(data.len(), false);
        let rec_len = enc.record_len_opts(c, opts.len());
        let mut out = VecEmit(Vec::new());
        enc.emit_packet_opts(&mut out, 7, 80, &data, None, c, rec_len, &opts);
        let bytes = out.0;
        assert_eq!(bytes.len(), rec_len);
        assert_eq!(&bytes[rec_len - 4..], &(rec_len as u32).to_ne_bytes());
        assert_eq!(&bytes[28 + 64 + 4..28 + 64 + 12], b"vxlan 42");
        let r = own_record(Format::PcapNg, &bytes).unwrap();
        assert_eq!(r.len, rec_len);
        let (ts, wire, range) = r.packet.unwrap();
        assert_eq!((ts, wire), (7, 80));
        assert_eq!(&bytes[range], &data[..]);
        assert_eq!(walk_own_records(Format::PcapNg, &bytes, 0), (rec_len, 1));
        // pcap has no options: the record is as without them.
        let pcap = Encoder {
            format: Format::Pcap { nanos: true },
            ..enc
        };
        assert_eq!(pcap.record_len_opts(c, opts.len()), pcap.record_len(c));
    }

    #[test]
    fn epb_is_padded_and_walkable() {
        let enc = Encoder {
            format: Format::PcapNg,
            snaplen: MAX_SNAPLEN,
            tsresol: TSRESOL_NS,
            interface: 0,
        };
        let mut out = VecEmit(Vec::new());
        for len in [1usize, 2, 3, 4, 5] {
            let data = vec![0xa5; len];
            let c = enc.caplen(len, false);
            enc.emit_packet(&mut out, 7, len as u32, &data, None, c, enc.record_len(c));
        }
        let bytes = out.0;
        assert_eq!(bytes.len(), 4 * 36 + 40);
        assert_eq!(
            walk_own_records(Format::PcapNg, &bytes, 0),
            (bytes.len(), 5)
        );
        assert_eq!(
            walk_own_records(Format::PcapNg, &bytes[..bytes.len() - 1], 0),
            (144, 4)
        );
    }

    #[test]
    fn pcapng_micro_stamps_and_description() {
        let enc = Encoder {
            format: Format::PcapNg,
            snaplen: MAX_SNAPLEN,
            tsresol: TSRESOL_US,
            interface: 0,
        };
        let h = enc.file_header(1, &["eth0".to_string()], "timestamps: host");
        let shb_len = u32::from_ne_bytes(h[4..8].try_into().unwrap()) as usize;
        let idb = &h[shb_len..];
        let find = |code: u16| {
            let mut at = 16; // type, length, linktype, reserved, snaplen
            loop {
                let c = u16::from_ne_bytes([idb[at], idb[at + 1]]);
                let l = u16::from_ne_bytes([idb[at + 2], idb[at + 3]]) as usize;
                if c == code {
                    return Some(idb[at + 4..at + 4 + l].to_vec());
                }
                if c == 0 {
                    return None;
                }
                at += 4 + pad4(l);
            }
        };
        assert_eq!(find(9), Some(vec![6]));
        assert_eq!(find(3), Some(b"timestamps: host".to_vec()));
        let mut out = VecEmit(Vec::new());
        enc.emit_packet(
            &mut out,
            1_500_000_123_456,
            1,
            &[0],
            None,
            1,
            enc.record_len(1),
        );
        let t = ((u32::from_ne_bytes(out.0[12..16].try_into().unwrap()) as u64) << 32)
            | u32::from_ne_bytes(out.0[16..20].try_into().unwrap()) as u64;
        assert_eq!(t, 1_500_000_123, "microseconds");
    }
}
