//! Classic pcap records: 24-byte file header, 16-byte record headers, no sync markers, so after
//! damage the reader looks for the next pair of plausible record headers.

use std::io;

use super::source::Source;
use super::{rd16, rd32, truncated, Log, Meta, Step};
use crate::format::{MAX_SNAPLEN, PCAP_HEADER_LEN, PCAP_MAGIC_NS, PCAP_MAGIC_US, PCAP_RECORD_LEN};
use crate::record_time::{RecordTime, MICROS, NANOS};

/// Longest wire length believed while resynchronising (TSO/GRO frames reach 64 KiB and more).
const MAX_WIRE_LEN: u32 = MAX_SNAPLEN;
/// Neighbouring records more than a day apart are not believed while resynchronising.
const MAX_TS_JUMP_S: u32 = 86_400;

pub(crate) struct PcapState {
    pub be: bool,
    pub nanos: bool,
    /// Bytes of a record header: 16, or 24 in a patched file.
    pub record_len: usize,
    pub snaplen: u32,
    pub linktype: u32,
    /// The header's link type field whole (FCS bits included), as libpcap writes it back.
    pub linktype_field: u32,
    /// Longest packet returned: the snaplen as libpcap adjusts it (0 or too large: the link
    /// type's maximum); longer records are cut to it, as libpcap does.
    snapshot: u32,
    /// The largest caplen libpcap believes for this link type; larger is damage.
    max_caplen: u32,
    /// Files before version 2.3 swap caplen and len; 2.3 files may (libpcap's rule).
    lengths: Lengths,
    last_sec: Option<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lengths {
    Normal,
    Swapped,
    MaybeSwapped,
}

/// libpcap's `max_snaplen_for_dlt`: 256 KiB, more for a few link types.
pub(super) fn max_caplen(linktype: u32) -> u32 {
    match linktype {
        231 => 128 << 20, // D-Bus
        279 => 8 << 20,   // EBHSCR
        249 => 1 << 20,   // USBPcap
        _ => MAX_SNAPLEN,
    }
}

/// The "modified" pcap of Alexey Kuznetzov's patched libpcap (`editcap -F modpcap`): µs times,
/// 24-byte record headers (ifindex, protocol, packet type after the usual 16). libpcap reads it.
pub(crate) const PCAP_MAGIC_PATCHED: u32 = 0xa1b2_cd34;

impl PcapState {
    /// Recognises the pcap magics (µs/ns, patched; either byte order).
    pub fn detect(magic: &[u8]) -> Option<PcapState> {
        let m: [u8; 4] = magic.try_into().ok()?;
        let (be, nanos, patched) = match (u32::from_le_bytes(m), u32::from_be_bytes(m)) {
            (PCAP_MAGIC_US, _) => (false, false, false),
            (PCAP_MAGIC_NS, _) => (false, true, false),
            (PCAP_MAGIC_PATCHED, _) => (false, false, true),
            (_, PCAP_MAGIC_US) => (true, false, false),
            (_, PCAP_MAGIC_NS) => (true, true, false),
            (_, PCAP_MAGIC_PATCHED) => (true, false, true),
            _ => return None,
        };
        Some(PcapState {
            be,
            nanos,
            record_len: if patched { 24 } else { PCAP_RECORD_LEN },
            snaplen: 0,
            linktype: 0,
            linktype_field: 0,
            snapshot: MAX_SNAPLEN,
            max_caplen: MAX_SNAPLEN,
            lengths: Lengths::Normal,
            last_sec: None,
        })
    }

    /// Parses the file header; the inner `Err` is a reason the file cannot be read.
    pub fn read_header(
        &mut self,
        src: &mut Source,
        strict: bool,
    ) -> io::Result<Result<(), String>> {
        if !src.fill(PCAP_HEADER_LEN)? {
            return Ok(Err("the file ends inside the 24-byte pcap header".into()));
        }
        let h = src.peek(PCAP_HEADER_LEN);
        let (major, minor) = (rd16(h, 4, self.be), rd16(h, 6, self.be));
        if major != 2 {
            return Ok(Err(format!(
                "unsupported pcap version {major}.{minor} (only 2.x exists)"
            )));
        }
        if strict && minor > 4 {
            return Ok(Err(format!(
                "unsupported pcap savefile version {major}.{minor} (libpcap reads 2.0 to 2.4)"
            )));
        }
        self.lengths = match minor {
            0..=2 => Lengths::Swapped,
            3 => Lengths::MaybeSwapped,
            _ => Lengths::Normal,
        };
        self.snaplen = rd32(h, 16, self.be);
        // The top bits carry FCS information, not the link type (libpcap's LT_LINKTYPE).
        self.linktype_field = rd32(h, 20, self.be);
        self.linktype = self.linktype_field & 0x03ff_ffff;
        self.max_caplen = max_caplen(self.linktype);
        self.snapshot = match self.snaplen {
            0 => self.max_caplen,
            n => n.min(self.max_caplen),
        };
        if self.record_len != PCAP_RECORD_LEN && self.linktype == 1 {
            // libpcap: a patched Ethernet capture may have been cooked, with a 14-byte header
            // made up on top of the snaplen.
            self.snapshot = self.snapshot.saturating_add(14);
        }
        src.consume(PCAP_HEADER_LEN);
        Ok(Ok(()))
    }

    pub fn step(&mut self, src: &mut Source, log: &mut Log) -> io::Result<Step> {
        let offset = src.offset();
        if !src.fill(self.record_len)? {
            if src.avail() == 0 {
                return Ok(Step::End);
            }
            return truncated(src, log, "record header", self.record_len);
        }
        let h = src.peek(self.record_len);
        let (sec, frac) = (rd32(h, 0, self.be), rd32(h, 4, self.be));
        let (mut caplen, mut wire_len) = (rd32(h, 8, self.be), rd32(h, 12, self.be));
        let swap = match self.lengths {
            Lengths::Normal => false,
            Lengths::Swapped => true,
            Lengths::MaybeSwapped => caplen > wire_len,
        };
        if swap {
            std::mem::swap(&mut caplen, &mut wire_len);
        }
        // A caplen of 0 is legal (libpcap reads it, and what follows); one above the link
        // type's maximum is damage.
        if caplen > self.max_caplen {
            let why = format!(
                "record claims caplen {caplen}, more than the maximum {}",
                self.max_caplen
            );
            return self.resync(src, log, offset, why);
        }
        let total = self.record_len + caplen as usize;
        if !src.fill(total)? {
            return truncated(src, log, "record", total);
        }
        let kept = caplen.min(self.snapshot);
        if kept < caplen {
            log.odd(
                offset,
                u64::from(caplen - kept),
                format!(
                    "caplen {caplen} exceeds the file's snaplen {}: cut to {kept} bytes, as libpcap does",
                    self.snaplen
                ),
            );
        }
        // The fields as they are: libpcap carries nothing into the seconds.
        let time = RecordTime {
            sec: u64::from(sec),
            frac: u64::from(frac),
            per_sec: if self.nanos { NANOS } else { MICROS },
            binary: false,
            signed: true,
        };
        let meta = Meta {
            start: src.pos + self.record_len,
            len: kept as usize,
            ts_ns: time.ns(),
            time,
            wire_len,
            linktype: self.linktype,
            interface: 0,
            offset,
        };
        src.consume(total);
        self.last_sec = Some(sec);
        Ok(Step::Packet(meta))
    }

    /// Whether 16 bytes look like a record header of this file.
    fn plausible(&self, h: &[u8]) -> bool {
        let (sec, frac) = (rd32(h, 0, self.be), rd32(h, 4, self.be));
        let (caplen, wire_len) = (rd32(h, 8, self.be), rd32(h, 12, self.be));
        let limit = self.snapshot;
        let frac_limit = if self.nanos { 1_000_000_000 } else { 1_000_000 };
        caplen <= limit
            && wire_len >= caplen
            && wire_len > 0
            && wire_len <= MAX_WIRE_LEN
            && frac < frac_limit
            && self
                .last_sec
                .is_none_or(|last| sec.abs_diff(last) <= MAX_TS_JUMP_S)
    }

    /// Skips byte by byte to a plausible record header followed by another one (or by the end).
    fn resync(
        &mut self,
        src: &mut Source,
        log: &mut Log,
        offset: u64,
        why: String,
    ) -> io::Result<Step> {
        if log.strict {
            // libpcap stops at the first bad record; so does a strict reader.
            log.corrupt(offset, 0, format!("{why} (libpcap stops here)"));
            return Ok(Step::End);
        }
        let mut skipped = 0u64;
        loop {
            src.consume(1);
            skipped += 1;
            if !src.fill(self.record_len)? {
                let rest = src.drain()?;
                log.corrupt(
                    offset,
                    skipped + rest,
                    format!("{why}; no valid record follows"),
                );
                return Ok(Step::End);
            }
            if self.plausible(src.peek(self.record_len)) {
                let next = self.record_len + rd32(src.peek(self.record_len), 8, self.be) as usize;
                if src.fill(next + self.record_len)? {
                    if self.plausible(&src.peek(next + self.record_len)[next..]) {
                        break;
                    }
                } else if src.avail() == next {
                    break; // a plausible last record
                }
            }
        }
        log.corrupt(
            offset,
            skipped,
            format!("{why}; skipped to the next plausible record"),
        );
        Ok(Step::Continue)
    }
}
