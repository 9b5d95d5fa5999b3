//! pcapng blocks: sections (either byte order), several interfaces with their own link type and
//! timestamp resolution, EPB / SPB / obsolete PB packets; other blocks are skipped. Every block
//! carries its length at both ends, which is how damage is found and resynchronised.

use std::io;

use super::source::Source;
use super::{rd16, rd32, truncated, Log, Meta, Step};
use crate::format::{
    pad4, BT_EPB, BT_IDB, BT_ISB, BT_NRB, BT_OPB, BT_SHB, BT_SPB, BYTE_ORDER_MAGIC, MAX_SNAPLEN,
};

/// Largest packet block believed: maximal caplen plus generous room for options.
const MAX_PACKET_BLOCK: usize = MAX_SNAPLEN as usize + 32 + 65_536;
/// Largest other block read (larger ones are treated as damage).
const MAX_BLOCK: usize = 8 << 20;
/// Blocks that are legal and ignored: NRB, ISB, custom (2), systemd journal, decryption secrets.
const IGNORED: [u32; 6] = [BT_NRB, BT_ISB, 0x0000_0bad, 0x4000_0bad, 9, 10];

/// Converts an interface's timestamp units to nanoseconds.
#[derive(Clone, Copy, Debug)]
enum TsScale {
    Mul(u64),
    Div(u64),
    /// Units of 2^-n seconds.
    Pow2(u32),
}

impl TsScale {
    /// From the if_tsresol byte: 10^-n, or 2^-n when the top bit is set.
    fn from_tsresol(v: u8) -> TsScale {
        let n = u32::from(v & 0x7f);
        if v & 0x80 != 0 {
            TsScale::Pow2(n)
        } else if n <= 9 {
            TsScale::Mul(10u64.pow(9 - n))
        } else {
            TsScale::Div(10u64.checked_pow(n - 9).unwrap_or(u64::MAX))
        }
    }

    #[inline]
    fn to_ns(self, ts: u64) -> u64 {
        match self {
            TsScale::Mul(m) => ts.saturating_mul(m),
            TsScale::Div(d) => ts / d,
            TsScale::Pow2(n) => {
                u64::try_from((u128::from(ts) * 1_000_000_000) >> n).unwrap_or(u64::MAX)
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Iface {
    linktype: u32,
    snaplen: u32,
    scale: TsScale,
    offset_ns: i64,
}

#[derive(Default)]
pub(crate) struct NgState {
    be: bool,
    ifaces: Vec<Iface>,
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
                if major != 1 {
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
                let mut iface = Iface {
                    linktype: u32::from(rd16(b, 8, be)),
                    snaplen: rd32(b, 12, be),
                    scale: TsScale::Mul(1000), // default resolution: microseconds
                    offset_ns: 0,
                };
                let opts = &b[16..len - 4];
                let mut at = 0;
                while at + 4 <= opts.len() {
                    let (code, olen) = (rd16(opts, at, be), rd16(opts, at + 2, be) as usize);
                    let v = at + 4;
                    if code == 0 || v + olen > opts.len() {
                        break;
                    }
                    match (code, olen) {
                        (9, 1..) => iface.scale = TsScale::from_tsresol(opts[v]),
                        (14, 8..) => {
                            let raw: [u8; 8] = opts[v..v + 8].try_into().expect("8 bytes");
                            let secs = if be {
                                i64::from_be_bytes(raw)
                            } else {
                                i64::from_le_bytes(raw)
                            };
                            iface.offset_ns = secs.saturating_mul(1_000_000_000);
                        }
                        _ => {}
                    }
                    at = v + pad4(olen);
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
                let snap = self.ifaces.first().map_or(0, |i| i.snaplen);
                let mut caplen = (wire_len as usize).min(len - 16);
                if snap != 0 {
                    caplen = caplen.min(snap as usize);
                }
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
        &self,
        start: usize,
        caplen: usize,
        ts: u64,
        wire_len: u32,
        interface: u32,
        offset: u64,
        len: usize,
        log: &mut Log,
    ) -> Step {
        let Some(iface) = self.ifaces.get(interface as usize) else {
            let n = self.ifaces.len();
            log.corrupt(
                offset,
                len as u64,
                format!("packet for interface {interface}, but only {n} described"),
            );
            return Step::Continue;
        };
        Step::Packet(Meta {
            start,
            len: caplen,
            ts_ns: iface.scale.to_ns(ts).saturating_add_signed(iface.offset_ns),
            wire_len,
            linktype: iface.linktype,
            interface,
            offset,
        })
    }

    /// Skips byte by byte to the next block whose two lengths agree.
    fn resync(
        &mut self,
        src: &mut Source,
        log: &mut Log,
        offset: u64,
        why: String,
    ) -> io::Result<Step> {
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
