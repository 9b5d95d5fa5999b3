//! pcapng blocks: sections (either byte order), several interfaces with their own link type and
//! timestamp resolution, EPB / SPB / obsolete PB packets; other blocks are skipped. Every block
//! carries its length at both ends, which is how damage is found and resynchronised.

use std::io;

use super::source::Source;
use super::{rd16, rd32, truncated, Log, Meta, Step};
use crate::format::{
    pad4, BT_EPB, BT_IDB, BT_ISB, BT_NRB, BT_OPB, BT_SHB, BT_SPB, BYTE_ORDER_MAGIC, MAX_SNAPLEN,
};
use crate::record_time::{RecordTime, MICROS};

/// Largest packet block believed: maximal caplen plus generous room for options.
const MAX_PACKET_BLOCK: usize = MAX_SNAPLEN as usize + 32 + 65_536;
/// Largest other block read (larger ones are treated as damage).
const MAX_BLOCK: usize = 16 << 20;
/// Blocks that are legal and ignored: NRB, ISB, custom (2), systemd journal, decryption secrets.
const IGNORED: [u32; 6] = [BT_NRB, BT_ISB, 0x0000_0bad, 0x4000_0bad, 9, 10];

/// An interface's timestamp resolution (if_tsresol): units per second, 10^n or 2^n.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Resolution {
    per_sec: u64,
    binary: bool,
}

impl Resolution {
    const MICROS: Resolution = Resolution {
        per_sec: MICROS,
        binary: false,
    };

    /// From the if_tsresol byte: 10^-n, or 2^-n when the top bit is set; None past what libpcap
    /// reads (10^-19, 2^-63).
    fn from_tsresol(v: u8) -> Option<Resolution> {
        let n = u32::from(v & 0x7f);
        if v & 0x80 != 0 {
            (n <= 63).then(|| Resolution {
                per_sec: 1 << n,
                binary: true,
            })
        } else {
            10u64.checked_pow(n).map(|per_sec| Resolution {
                per_sec,
                binary: false,
            })
        }
    }
}

#[derive(Clone, Debug)]
struct Iface {
    linktype: u32,
    snaplen: u32,
    resolution: Resolution,
    /// if_tsoffset: seconds added to every time (wrapping, as libpcap adds it).
    offset_s: u64,
}

/// Interfaces one section may describe: each costs a few dozen bytes, and a file of nothing but
/// interface blocks must not grow the reader without bound (150 M of them in a 275 KB .zst).
const MAX_INTERFACES: usize = 1 << 16;

/// libpcap's `pcap_adjust_snapshot`: 0 or more than the link type's maximum means the maximum.
fn adjust_snapshot(linktype: u32, snaplen: u32) -> u32 {
    let max = super::pcap::max_caplen(linktype);
    if snaplen == 0 || snaplen > max {
        max
    } else {
        snaplen
    }
}

#[derive(Default)]
pub(crate) struct NgState {
    be: bool,
    ifaces: Vec<Iface>,
    /// What libpcap fixes at the file's first interface (its link type and adjusted snaplen) and
    /// first section (byte order): a strict reader stops where a later one differs.
    first: Option<(u32, u32)>,
    first_be: Option<bool>,
    /// A packet was returned: interfaces described after it are not in a file's prelude.
    seen_packet: bool,
    late_interfaces: bool,
}

/// Checks that the stream starts with a whole, sane Section Header Block.
pub(crate) fn check_first_block(src: &mut Source) -> io::Result<Result<(), String>> {
    if !src.fill(12)? {
        return Ok(Err("the file ends inside the pcapng section header".into()));
    }
    let Some(be) = byte_order(src.peek(12)) else {
        return Ok(Err(
            "the pcapng section header has a bad byte-order magic".into()
        ));
    };
    let len = rd32(src.peek(12), 4, be) as usize;
    if !(28..=MAX_BLOCK).contains(&len) || !len.is_multiple_of(4) {
        return Ok(Err(format!(
            "the pcapng section header has an impossible length {len}"
        )));
    }
    if !src.fill(len)? {
        return Ok(Err("the file ends inside the pcapng section header".into()));
    }
    if rd32(src.peek(len), len - 4, be) as usize != len {
        return Ok(Err("the pcapng section header's two lengths differ".into()));
    }
    Ok(Ok(()))
}

/// Byte order of a section from the SHB's byte-order magic (at offset 8).
fn byte_order(h: &[u8]) -> Option<bool> {
    match (rd32(h, 8, false), rd32(h, 8, true)) {
        (BYTE_ORDER_MAGIC, _) => Some(false),
        (_, BYTE_ORDER_MAGIC) => Some(true),
        _ => None,
    }
}

impl NgState {
    pub fn first_linktype(&self) -> Option<u32> {
        self.ifaces.first().map(|i| i.linktype)
    }

    pub fn first_snaplen(&self) -> Option<u32> {
        self.ifaces.first().map(|i| i.snaplen)
    }

    /// The first interface's times are finer than microseconds.
    pub fn first_resolution_finer_than_micros(&self) -> bool {
        self.ifaces
            .first()
            .is_some_and(|i| i.resolution.per_sec > MICROS)
    }

    /// The first section's byte order is not this machine's.
    pub fn swapped(&self) -> bool {
        self.first_be.unwrap_or(self.be) != cfg!(target_endian = "big")
    }

    /// An interface or section was described after the first packet.
    pub fn late_interfaces(&self) -> bool {
        self.late_interfaces
    }

    pub fn step(&mut self, src: &mut Source, log: &mut Log) -> io::Result<Step> {
        let offset = src.offset();
        if !src.fill(8)? {
            if src.avail() == 0 {
                return Ok(Step::End);
            }
            return truncated(src, log, "block header", 8);
        }
        let ty = rd32(src.peek(8), 0, self.be);
        if ty == BT_SHB {
            if !src.fill(12)? {
                return truncated(src, log, "section header", 12);
            }
            match byte_order(src.peek(12)) {
                Some(be) => self.be = be,
                None => {
                    return self.resync(
                        src,
                        log,
                        offset,
                        "section header with a bad byte-order magic".into(),
                    )
                }
            }
        }
        let len = rd32(src.peek(8), 4, self.be) as usize;
        if len < 12 || !len.is_multiple_of(4) {
            let why = format!(
                "block type {ty:#x} has length {len}, which is not a multiple of 4 of at least 12"
            );
            return self.resync(src, log, offset, why);
        }
        let max = if matches!(ty, BT_EPB | BT_SPB | BT_OPB) {
            MAX_PACKET_BLOCK
        } else {
            MAX_BLOCK
        };
        if len > max {
            return self.resync(
                src,
                log,
                offset,
                format!("block type {ty:#x} claims {len} bytes, more than {max}"),
            );
        }
        if !src.fill(len)? {
            return truncated(src, log, "block", len);
        }
        let trailer = rd32(src.peek(len), len - 4, self.be) as usize;
        if trailer != len {
            let why =
                format!("block type {ty:#x} starts with length {len} but ends with {trailer}");
            return self.resync(src, log, offset, why);
        }
        let step = self.block(src.peek(len), src.pos, ty, offset, log);
        src.consume(len);
        Ok(step)
    }

    /// Interprets one whole block (`b`, starting at buffer index `start`).
    fn block(&mut self, b: &[u8], start: usize, ty: u32, offset: u64, log: &mut Log) -> Step {
        let be = self.be;
        let len = b.len();
        let short = |log: &mut Log, what: &str| {
            log.corrupt(
                offset,
                len as u64,
                format!("{what} of {len} bytes is too short"),
            );
            Step::Continue
        };
        match ty {
            BT_SHB => {
                if len < 28 {
                    return short(log, "section header");
                }
                let (major, minor) = (rd16(b, 12, be), rd16(b, 14, be));
                self.late_interfaces |= self.seen_packet;
                let first_be = *self.first_be.get_or_insert(be);
                if log.strict && first_be != be {
                    log.corrupt(
                        offset,
                        0,
                        "the file has sections with different byte orders (libpcap stops here)"
                            .into(),
                    );
                    return Step::Continue;
                }
                if major != 1 {
                    if log.strict {
                        log.corrupt(offset, 0, format!("unknown pcapng savefile major version number {major} (libpcap stops here)"));
                        return Step::Continue;
                    }
                    log.odd(
                        offset,
                        0,
                        format!("pcapng version {major}.{minor} (expected 1.x), read anyway"),
                    );
                }
                self.ifaces.clear();
                Step::Continue
            }
            BT_IDB => {
                if len < 20 {
                    return short(log, "interface description");
                }
                self.late_interfaces |= self.seen_packet;
                if self.ifaces.len() >= MAX_INTERFACES {
                    log.corrupt(
                        offset,
                        len as u64,
                        format!("more than {MAX_INTERFACES} interfaces in one section"),
                    );
                    return Step::Continue;
                }
                let mut iface = Iface {
                    linktype: u32::from(rd16(b, 8, be)),
                    snaplen: rd32(b, 12, be),
                    resolution: Resolution::MICROS, // the default: microseconds
                    offset_s: 0,
                };
                match self.idb_options(&b[16..len - 4], &mut iface) {
                    Err(why) if log.strict => {
                        log.corrupt(offset, 0, format!("{why} (libpcap stops here)"));
                        return Step::Continue;
                    }
                    Err(why) => log.odd(offset, 0, format!("{why}: the option is ignored")),
                    Ok(()) => {}
                }
                let link = (
                    iface.linktype,
                    adjust_snapshot(iface.linktype, iface.snaplen),
                );
                let first = *self.first.get_or_insert(link);
                if log.strict && first.0 != link.0 {
                    log.corrupt(offset, 0, format!("an interface has a type {} different from the type of the first interface (libpcap stops here)", link.0));
                    return Step::Continue;
                }
                if log.strict && first.1 != link.1 {
                    log.corrupt(offset, 0, format!("an interface has a snapshot length {} different from the snapshot length of the first interface (libpcap stops here)", iface.snaplen));
                    return Step::Continue;
                }
                self.ifaces.push(iface);
                Step::Continue
            }
            BT_EPB | BT_OPB => {
                if len < 32 {
                    return short(log, "packet block");
                }
                let interface = if ty == BT_EPB {
                    rd32(b, 8, be)
                } else {
                    u32::from(rd16(b, 8, be))
                };
                let ts = (u64::from(rd32(b, 12, be)) << 32) | u64::from(rd32(b, 16, be));
                let (caplen, wire_len) = (rd32(b, 20, be), rd32(b, 24, be));
                if 28 + caplen as usize > len - 4 {
                    log.corrupt(
                        offset,
                        len as u64,
                        format!("packet block of {len} bytes claims caplen {caplen}"),
                    );
                    return Step::Continue;
                }
                self.packet(
                    start + 28,
                    caplen as usize,
                    ts,
                    wire_len,
                    interface,
                    offset,
                    len,
                    log,
                )
            }
            BT_SPB => {
                if len < 16 {
                    return short(log, "simple packet block");
                }
                let wire_len = rd32(b, 8, be);
                // libpcap: the captured length is the packet's, cut to the snapshot length; a
                // block too short for it is damage (a lenient reader keeps what is there).
                let snap = self
                    .ifaces
                    .first()
                    .map_or(0, |i| adjust_snapshot(i.linktype, i.snaplen));
                let want = (wire_len as usize).min(snap as usize);
                if log.strict && want > len - 16 {
                    log.corrupt(offset, len as u64, format!("simple packet block of {len} bytes is too short for its {want} captured bytes (libpcap stops here)"));
                    return Step::Continue;
                }
                let caplen = want.min(len - 16);
                // SPBs carry no timestamp.
                self.packet(start + 12, caplen, 0, wire_len, 0, offset, len, log)
            }
            t if IGNORED.contains(&t) => Step::Continue,
            t => {
                log.odd(
                    offset,
                    len as u64,
                    format!("unknown block type {t:#x} skipped"),
                );
                Step::Continue
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn packet(
        &mut self,
        start: usize,
        caplen: usize,
        ts: u64,
        wire_len: u32,
        interface: u32,
        offset: u64,
        len: usize,
        log: &mut Log,
    ) -> Step {
        self.seen_packet = true;
        let Some(iface) = self.ifaces.get(interface as usize) else {
            let n = self.ifaces.len();
            log.corrupt(
                offset,
                len as u64,
                format!("packet for interface {interface}, but only {n} described"),
            );
            return Step::Continue;
        };
        if log.strict && caplen as u32 > adjust_snapshot(iface.linktype, iface.snaplen) {
            log.corrupt(
                offset,
                len as u64,
                format!(
                    "invalid packet capture length {caplen}, bigger than snaplen of {} (libpcap stops here)",
                    adjust_snapshot(iface.linktype, iface.snaplen)
                ),
            );
            return Step::Continue;
        }
        // libpcap's split: seconds (plus if_tsoffset) and the rest in the interface's units.
        let r = iface.resolution;
        let time = RecordTime {
            sec: (ts / r.per_sec).wrapping_add(iface.offset_s),
            frac: ts % r.per_sec,
            per_sec: r.per_sec,
            binary: r.binary,
            signed: false,
        };
        Step::Packet(Meta {
            start,
            len: caplen,
            ts_ns: time.ns(),
            time,
            wire_len,
            linktype: iface.linktype,
            interface,
            offset,
        })
    }

    /// Reads if_tsresol and if_tsoffset; Err with libpcap's complaint about them.
    fn idb_options(&self, opts: &[u8], iface: &mut Iface) -> Result<(), String> {
        let be = self.be;
        let (mut saw_resol, mut saw_offset) = (false, false);
        let mut at = 0;
        while at + 4 <= opts.len() {
            let (code, olen) = (rd16(opts, at, be), rd16(opts, at + 2, be) as usize);
            let v = at + 4;
            if code == 0 || v + olen > opts.len() {
                break;
            }
            match code {
                9 => {
                    if olen != 1 {
                        return Err(format!("Interface Description Block has if_tsresol option with length {olen} != 1"));
                    }
                    if std::mem::replace(&mut saw_resol, true) {
                        return Err(
                            "Interface Description Block has more than one if_tsresol option"
                                .into(),
                        );
                    }
                    iface.resolution = Resolution::from_tsresol(opts[v]).ok_or_else(|| {
                        format!("Interface Description Block if_tsresol option resolution {:#04x} is too high", opts[v])
                    })?;
                }
                14 => {
                    if olen != 8 {
                        return Err(format!("Interface Description Block has if_tsoffset option with length {olen} != 8"));
                    }
                    if std::mem::replace(&mut saw_offset, true) {
                        return Err(
                            "Interface Description Block has more than one if_tsoffset option"
                                .into(),
                        );
                    }
                    let raw: [u8; 8] = opts[v..v + 8].try_into().expect("8 bytes");
                    iface.offset_s = if be {
                        u64::from_be_bytes(raw)
                    } else {
                        u64::from_le_bytes(raw)
                    };
                }
                _ => {}
            }
            at = v + pad4(olen);
        }
        Ok(())
    }

    /// Skips byte by byte to the next block whose two lengths agree.
    fn resync(
        &mut self,
        src: &mut Source,
        log: &mut Log,
        offset: u64,
        why: String,
    ) -> io::Result<Step> {
        if log.strict {
            log.corrupt(offset, 0, format!("{why} (libpcap stops here)"));
            return Ok(Step::End);
        }
        let mut skipped = 0u64;
        loop {
            src.consume(1);
            skipped += 1;
            if !src.fill(12)? {
                let rest = src.drain()?;
                log.corrupt(
                    offset,
                    skipped + rest,
                    format!("{why}; no valid block follows"),
                );
                return Ok(Step::End);
            }
            if let Some(len) = self.candidate(src.peek(12)) {
                if src.fill(len)?
                    && rd32(src.peek(len), len - 4, self.candidate_order(src.peek(12))) as usize
                        == len
                {
                    break;
                }
            }
        }
        log.corrupt(
            offset,
            skipped,
            format!("{why}; skipped to the next valid block"),
        );
        Ok(Step::Continue)
    }

    fn candidate_order(&self, h: &[u8]) -> bool {
        if rd32(h, 0, false) == BT_SHB {
            byte_order(h).unwrap_or(self.be)
        } else {
            self.be
        }
    }

    /// Length of a block that could start at `h` (12 bytes), if its type and length look right.
    fn candidate(&self, h: &[u8]) -> Option<usize> {
        let ty = rd32(h, 0, self.be);
        let be = if ty == BT_SHB {
            byte_order(h)?
        } else {
            self.be
        };
        let known =
            matches!(ty, BT_SHB | BT_IDB | BT_EPB | BT_SPB | BT_OPB) || IGNORED.contains(&ty);
        let len = rd32(h, 4, be) as usize;
        (known && len >= 12 && len.is_multiple_of(4) && len <= MAX_PACKET_BLOCK).then_some(len)
    }
}
