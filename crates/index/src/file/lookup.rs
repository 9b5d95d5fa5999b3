//! Look-ups in an index: which flows a narrowing term selects (by the address, endpoint and
//! port directories) and where their packets are (postings).

use std::ops::{Range, RangeInclusive};

use wire::TunnelKind;

use crate::expr::Narrow;
use crate::key::{addr16, KIND_IP, KIND_PORTS, KIND_VLAN};

/// Which packet a narrowing term reads: the one on the wire, or the one inside its tunnel
/// (terms after libpcap's `geneve` or `mpls`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Outer,
    Inner,
}

use super::{varint, FlowRow, IndexError, IndexFile, DIR_STEP, FLOW_LEN};

impl IndexFile {
    /// Address ids in `[lo, hi]` (16-byte form): a contiguous range, addresses being sorted.
    fn addr_ids(&self, lo: &[u8; 16], hi: &[u8; 16]) -> Result<Range<u32>, IndexError> {
        let n = self.header.addrs;
        let first = partition(0, n, |i| Ok(self.addr(i)? < *lo))?;
        let end = partition(first, n, |i| Ok(self.addr(i)? <= *hi))?;
        Ok(first..end)
    }

    /// First flow whose first endpoint is not below `id` (flows are sorted by it); the directory
    /// narrows the search to one step, so one chunk or two are read.
    fn flows_from_a(&self, id: u32) -> Result<u32, IndexError> {
        let (lo, hi) = dir_window(&self.flows_dir, self.header.flows, |k| k < id);
        partition(lo, hi, |i| Ok(self.flow(i)?.a < id))
    }

    /// First `by_b` entry whose second endpoint is not below `id`.
    fn by_b_from(&self, id: u32) -> Result<u32, IndexError> {
        let (lo, hi) = dir_window(&self.by_b_dir, self.header.flows, |k| k < id);
        partition(lo, hi, |i| Ok(self.by_b(i)?.0 < id))
    }

    /// Flows with an endpoint whose address id is in `ids`, plus the flows without IP (always
    /// candidates), sorted.
    fn flows_with_addr(&self, ids: Range<u32>) -> Result<Vec<u32>, IndexError> {
        let mut out = Vec::new();
        if !ids.is_empty() {
            out.extend(self.flows_from_a(ids.start)?..self.flows_from_a(ids.end)?);
            for i in self.by_b_from(ids.start)?..self.by_b_from(ids.end)? {
                out.push(self.by_b(i)?.1);
            }
        }
        out.extend(self.flows_from_a(u32::MAX)?..self.header.flows);
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Every flow for which `keep` holds, plus those without IP. The flows section is read in
    /// one piece (a copy of ~3 MB per 100 k flows) rather than a look-up per flow.
    fn flows_where(
        &self,
        keep: impl Fn(&FlowRow) -> Result<bool, IndexError>,
    ) -> Result<Vec<u32>, IndexError> {
        let n = self.header.flows as usize;
        let all = self.raw(self.flows_at, n * FLOW_LEN)?;
        let mut out = Vec::new();
        for (i, b) in all.chunks_exact(FLOW_LEN).enumerate() {
            let f = self.flow_row(b)?;
            if f.kind & KIND_IP == 0 || keep(&f)? {
                out.push(i as u32);
            }
        }
        Ok(out)
    }

    /// The flows of a host or net term at `level`: those with an endpoint in `ids`, kept or
    /// widened for tunnelled flows (see [`Self::accepts_at`]).
    fn flows_with_addr_at(&self, ids: Range<u32>, level: Level) -> Result<Vec<u32>, IndexError> {
        let listed = self.flows_with_addr(ids)?;
        if self.header.tunnelled == 0 {
            return Ok(listed);
        }
        match level {
            // A tunnelled flow's carrier addresses are not indexed: any of them may be the host.
            Level::Outer => {
                let mut all = listed;
                all.extend(self.flows_where(|f| Ok(f.tunnel != 0))?);
                all.sort_unstable();
                all.dedup();
                Ok(all)
            }
            Level::Inner => {
                let mut kept = Vec::with_capacity(listed.len());
                for i in listed {
                    let f = self.flow(i)?;
                    if f.kind & KIND_IP == 0 || f.tunnel != 0 {
                        kept.push(i);
                    }
                }
                Ok(kept)
            }
        }
    }

    /// At most how many flows a narrowing keeps, found cheaply: host and net terms are counted in
    /// the sorted lists (through the directories); any other term may keep every flow.
    fn estimate(&self, n: &Narrow) -> Result<u64, IndexError> {
        let all = u64::from(self.header.flows);
        let addrs = |ids: Range<u32>| -> Result<u64, IndexError> {
            if ids.is_empty() {
                return Ok(all - u64::from(self.flows_from_a(u32::MAX)?));
            }
            let a = self.flows_from_a(ids.end)? - self.flows_from_a(ids.start)?;
            let b = self.by_b_from(ids.end)? - self.by_b_from(ids.start)?;
            Ok(u64::from(a) + u64::from(b) + all - u64::from(self.flows_from_a(u32::MAX)?))
        };
        Ok(match n {
            Narrow::Host(ip) => {
                let a = addr16(*ip);
                addrs(self.addr_ids(&a, &a)?)?
            }
            Narrow::Net { addr, prefix } => {
                let (lo, hi) = net_range(*addr, *prefix);
                addrs(self.addr_ids(&lo, &hi)?)?
            }
            // An estimate only picks the side of an `and` to list: tunnelled flows, which a host
            // term at the outer level adds, are not counted.
            Narrow::Inner(x) => self.estimate(x)?,
            Narrow::And(x, y) => self.estimate(x)?.min(self.estimate(y)?),
            Narrow::Or(x, y) => self.estimate(x)?.saturating_add(self.estimate(y)?),
            _ => all,
        })
    }

    /// Whether flow `f` may hold a packet the narrowing accepts (flows without IP always may):
    /// the per-flow form of [`Self::candidates`], for terms that read the packet at `level`.
    /// A tunnelled flow's row holds the carried packet's endpoints, ports and protocol and the
    /// tunnel's kind and id, not the carrier's addresses: outer host and net terms keep it, outer
    /// port terms when the carrier is UDP (VXLAN, GENEVE: their source ports vary), an outer
    /// protocol term when it is the carrier's. Inner terms (after `geneve`/`mpls`, which a
    /// tunnelled flow of that kind satisfies) test the row's fields; no flow without a tunnel
    /// has an inner packet.
    fn accepts_at(&self, f: &FlowRow, n: &Narrow, level: Level) -> Result<bool, IndexError> {
        if f.kind & KIND_IP == 0 {
            return Ok(true);
        }
        let tunnel = TunnelKind::from_code(f.tunnel);
        if let Narrow::And(x, y) = n {
            return Ok(self.accepts_at(f, x, level)? && self.accepts_at(f, y, level)?);
        }
        if let Narrow::Or(x, y) = n {
            return Ok(self.accepts_at(f, x, level)? || self.accepts_at(f, y, level)?);
        }
        match (n, level, tunnel) {
            (Narrow::All, _, _) => return Ok(true),
            (Narrow::Inner(x), _, _) => return self.accepts_at(f, x, Level::Inner),
            (Narrow::Tunnel { kind, id }, _, t) => {
                return Ok(t == Some(*kind) && id.is_none_or(|id| id == f.tunnel_id))
            }
            (_, Level::Inner, None) => return Ok(false),
            (_, Level::Outer, Some(t)) => return Ok(carrier_may_match(t, f, n)),
            _ => {}
        }
        Ok(match n {
            Narrow::Host(ip) => {
                let a = addr16(*ip);
                self.addr(f.a)? == a || self.addr(f.b)? == a
            }
            Narrow::Net { addr, prefix } => {
                let (lo, hi) = net_range(*addr, *prefix);
                let inside = |x: [u8; 16]| lo <= x && x <= hi;
                inside(self.addr(f.a)?) || inside(self.addr(f.b)?)
            }
            Narrow::Port(p) => port_may_match(f, *p..=*p),
            Narrow::PortRange(lo, hi) => port_may_match(f, *lo..=*hi),
            Narrow::Proto(p) => f.proto == *p,
            Narrow::Vlan(v) => f.kind & KIND_VLAN != 0 && f.vlan == *v,
            Narrow::All | Narrow::Inner(_) | Narrow::Tunnel { .. } => true,
            Narrow::And(..) | Narrow::Or(..) => unreachable!("handled above"),
        })
    }

    /// The flows of the index with these keys (as [`crate::key::FlowKey::directed_of`] gives
    /// them; the carrier addresses, which rows do not keep, are not compared), sorted.
    pub fn flows_of_keys(&self, keys: &[crate::key::FlowKey]) -> Result<Vec<u32>, IndexError> {
        let mut out = Vec::new();
        for k in keys.iter().filter(|k| k.kind & KIND_IP != 0) {
            let (a, b) = (self.addr_ids(&k.a, &k.a)?, self.addr_ids(&k.b, &k.b)?);
            if a.is_empty() || b.is_empty() {
                continue;
            }
            let mut i = self.flows_from_a(a.start)?;
            while i < self.header.flows {
                let f = self.flow(i)?;
                if f.a != a.start {
                    break;
                }
                if f.b == b.start
                    && (
                        f.port_a,
                        f.port_b,
                        f.proto,
                        f.kind,
                        f.vlan,
                        f.tunnel,
                        f.tunnel_id,
                    ) == (
                        k.port_a,
                        k.port_b,
                        k.proto,
                        k.kind,
                        k.vlan,
                        k.tunnel,
                        k.tunnel_id,
                    )
                {
                    out.push(i);
                }
                i += 1;
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The candidate flows of a narrowing (`None`: every packet is a candidate).
    pub fn candidates(&self, n: &Narrow) -> Result<Option<Vec<u32>>, IndexError> {
        self.candidates_at(n, Level::Outer)
    }

    fn candidates_at(&self, n: &Narrow, level: Level) -> Result<Option<Vec<u32>>, IndexError> {
        Ok(Some(match n {
            Narrow::All => return Ok(None),
            Narrow::Inner(x) => return self.candidates_at(x, Level::Inner),
            Narrow::Host(ip) => {
                let a = addr16(*ip);
                self.flows_with_addr_at(self.addr_ids(&a, &a)?, level)?
            }
            Narrow::Net { addr, prefix } => {
                let (lo, hi) = net_range(*addr, *prefix);
                self.flows_with_addr_at(self.addr_ids(&lo, &hi)?, level)?
            }
            Narrow::Port(_)
            | Narrow::PortRange(..)
            | Narrow::Proto(_)
            | Narrow::Vlan(_)
            | Narrow::Tunnel { .. } => self.flows_where(|f| self.accepts_at(f, n, level))?,
            Narrow::And(x, y) => {
                // The side that keeps fewer flows is listed; the other is tested on those flows
                // only: `udp and src host A and ... dst host B` lists A's flows, not every udp flow
                // nor every flow of a busy server B.
                let (few, other) = if self.estimate(x)? <= self.estimate(y)? {
                    (x, y)
                } else {
                    (y, x)
                };
                let Some(listed) = self.candidates_at(few, level)? else {
                    return self.candidates_at(other, level);
                };
                let mut kept = Vec::with_capacity(listed.len());
                for i in listed {
                    if self.accepts_at(&self.flow(i)?, other, level)? {
                        kept.push(i);
                    }
                }
                kept
            }
            Narrow::Or(x, y) => {
                match (self.candidates_at(x, level)?, self.candidates_at(y, level)?) {
                    (None, _) | (_, None) => return Ok(None),
                    (Some(mut x), Some(y)) => {
                        x.extend(y);
                        x.sort_unstable();
                        x.dedup();
                        x
                    }
                }
            }
        }))
    }

    /// The postings of `flows`, appended to `out` (each flow in file order): the record offsets
    /// of their packets in a plain file, the numbers of the frames holding them in a compressed
    /// one ([`Self::postings_are_frames`]).
    pub fn postings(&self, flows: &[u32], out: &mut Vec<u64>) -> Result<(), IndexError> {
        let len = self.header.postings_len;
        for &i in flows {
            let f = self.flow(i)?;
            // A flow's postings end where the next flow's begin (they are written in flow order).
            let end = match i + 1 < self.header.flows {
                true => self.flow(i + 1)?.postings,
                false => len,
            };
            if end < f.postings {
                return Err(self.corrupt());
            }
            let b = self.raw(
                self.postings_at + f.postings as usize,
                (end - f.postings) as usize,
            )?;
            let (mut at, mut off) = (0, 0u64);
            for _ in 0..f.entries {
                let (delta, n) = varint(&b[at..]).ok_or_else(|| self.corrupt())?;
                off += delta;
                at += n;
                out.push(off);
            }
        }
        Ok(())
    }
}

/// Where in `0..n` a sorted list's first entry with `before(key)` false lies, from a directory
/// of the key of every [`DIR_STEP`]th entry: entries `lo..hi` (at most one step).
fn dir_window(dir: &[u32], n: u32, before: impl Fn(u32) -> bool) -> (u32, u32) {
    let j = dir.partition_point(|&k| before(k));
    let lo = if j == 0 {
        0
    } else {
        ((j - 1) * DIR_STEP + 1) as u32
    };
    let hi = (j * DIR_STEP).min(n as usize) as u32;
    (lo.min(hi), hi)
}

/// First index in `lo..hi` where `before` turns false (it must be true, then false).
fn partition(
    mut lo: u32,
    mut hi: u32,
    before: impl Fn(u32) -> Result<bool, IndexError>,
) -> Result<u32, IndexError> {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid)? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The lowest and highest address of a network, in the index's 16-byte form.
fn net_range(addr: std::net::IpAddr, prefix: u8) -> ([u8; 16], [u8; 16]) {
    let base = addr16(addr);
    let bits = match addr {
        std::net::IpAddr::V4(_) => 96 + u32::from(prefix.min(32)),
        std::net::IpAddr::V6(_) => u32::from(prefix.min(128)),
    };
    let v = u128::from_be_bytes(base);
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    };
    ((v & mask).to_be_bytes(), (v | !mask).to_be_bytes())
}

/// Whether flow `f` may hold a packet libpcap's `port`/`portrange` accepts for a port in `range`.
fn port_may_match(f: &FlowRow, range: RangeInclusive<u16>) -> bool {
    if f.kind & KIND_PORTS == 0 {
        // TCP, UDP or SCTP with its ports not both captured: libpcap still matches the source
        // port when it was captured (it tests it before the destination's), which the key lost.
        // Found by fuzz_targets/query_vs_libpcap (`portrange 0-4`, 2 bytes of SCTP captured).
        return matches!(f.proto, 6 | 17 | 132);
    }
    range.contains(&f.port_a) || range.contains(&f.port_b)
}

/// Whether an outer-level leaf term may accept a packet of a flow that came in tunnel `t`: the
/// term reads the carrier, of which the row knows only what the kind implies.
fn carrier_may_match(t: TunnelKind, f: &FlowRow, n: &Narrow) -> bool {
    match n {
        // The carrier's addresses are not in the row.
        Narrow::Host(_) | Narrow::Net { .. } => t != TunnelKind::Mpls,
        // VXLAN and GENEVE ride in UDP with varying source ports; the others have no ports.
        Narrow::Port(_) | Narrow::PortRange(..) => {
            matches!(t, TunnelKind::Vxlan | TunnelKind::Geneve)
        }
        Narrow::Proto(p) => match t {
            TunnelKind::Vxlan | TunnelKind::Geneve => *p == 17,
            TunnelKind::Gre | TunnelKind::Erspan1 | TunnelKind::Erspan2 | TunnelKind::Erspan3 => {
                *p == 47
            }
            TunnelKind::IpInIp => *p == 4 || *p == 41,
            TunnelKind::Mpls => false,
        },
        // The row's VLAN is the outer tag.
        Narrow::Vlan(v) => f.kind & KIND_VLAN != 0 && f.vlan == *v,
        Narrow::All | Narrow::Inner(_) | Narrow::Tunnel { .. } => true,
        Narrow::And(..) | Narrow::Or(..) => true,
    }
}
