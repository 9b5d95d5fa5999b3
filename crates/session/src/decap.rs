//! `capture --decap`: the writer's lane writes the Ethernet frame a tunnel carries instead of the
//! tunnelled packet, as Arkime's collapse does, for tools that cannot decode tunnels; the tunnel
//! stays named in the packet block's comment (pcapng opt_comment, Wireshark's `frame.comment`):
//! `vxlan 42 192.0.2.1 > 192.0.2.2` (kind, VNI / key / session, the carrier's addresses; ` vlan N`
//! when the carrier had a VLAN tag).
//!
//! What is stripped: the OUTERMOST tunnel of the frame, when it is of a kind asked for and carries
//! an Ethernet frame, with everything in front of it (the carrier's Ethernet, VLAN tags, IP, UDP
//! or GRE headers). A tunnel inside it stays in the frame written. Every other packet is written
//! as it came and counted ([`DecapStats`]): not tunnelled (or by a kind not asked for), a tunnel
//! carrying IP or MPLS rather than Ethernet (the file's link type is Ethernet, and libpcap refuses
//! a pcapng whose interfaces differ in link type), or a tunnel header cut or malformed.
//!
//! Lengths: the frame written ends where the carrier's IP packet ends (its length field, so the
//! carrier's Ethernet padding is not part of it); its wire length is the carrier's minus the bytes
//! stripped in front and the padding after; a snaplen cut stays a cut.

use std::fmt;
use std::str::FromStr;

use wire::tunnel::{decapsulate_parsed_ports, vxlan_fast_port, Ports, GENEVE_PORT, VXLAN_PORT};
use wire::{parse, IpVersion, LinkType, Payload, TunnelKind, Vlan};

/// Which tunnels `--decap` strips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecapConfig {
    /// VXLAN, on this UDP destination port.
    pub vxlan: Option<u16>,
    /// GENEVE (with an Ethernet payload), on this UDP destination port.
    pub geneve: Option<u16>,
    /// GRE carrying Ethernet (gretap, transparent Ethernet bridging), with or without key.
    pub gre: bool,
    /// ERSPAN type I, II or III carrying Ethernet.
    pub erspan: bool,
}

const KINDS_HELP: &str = "vxlan[:PORT] (default 4789), geneve[:PORT] (6081), gre (gretap), erspan";

impl FromStr for DecapConfig {
    type Err = String;

    /// `KIND[:PORT][,KIND[:PORT]...]`, e.g. `vxlan`, `vxlan:8472,geneve`, `gre,erspan`.
    fn from_str(s: &str) -> Result<DecapConfig, String> {
        let mut c = DecapConfig::default();
        for item in s.split(',') {
            let item = item.trim();
            let (kind, port) = match item.split_once(':') {
                Some((k, p)) => (k, Some(p)),
                None => (item, None),
            };
            let port_of = |default: u16| -> Result<u16, String> {
                match port {
                    None => Ok(default),
                    Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
                        format!("`{item}`: PORT must be a UDP port number, 1-65535")
                    }),
                }
            };
            let no_port = || match port {
                Some(_) => Err(format!(
                    "`{item}`: {kind} is not carried over UDP and has no port"
                )),
                None => Ok(()),
            };
            let twice = |set: bool| match set {
                true => Err(format!("`{s}`: {kind} is given twice")),
                false => Ok(()),
            };
            match kind.to_ascii_lowercase().as_str() {
                "vxlan" => {
                    twice(c.vxlan.is_some())?;
                    c.vxlan = Some(port_of(VXLAN_PORT)?);
                }
                "geneve" => {
                    twice(c.geneve.is_some())?;
                    c.geneve = Some(port_of(GENEVE_PORT)?);
                }
                "gre" | "gretap" => {
                    twice(c.gre)?;
                    no_port()?;
                    c.gre = true;
                }
                "erspan" => {
                    twice(c.erspan)?;
                    no_port()?;
                    c.erspan = true;
                }
                "ipip" | "ip6in4" | "mpls" => {
                    return Err(format!(
                        "`{kind}`: --decap writes the Ethernet frame a tunnel carries; {kind} carries \
                         IP packets, which would need a second link type in the file (libpcap, hence \
                         tcpdump -r, refuses a pcapng whose interfaces differ in link type). The \
                         store's index reads inside it already; --decap takes {KINDS_HELP}"
                    ))
                }
                "" => return Err(format!("`{s}`: an empty tunnel kind; give {KINDS_HELP}")),
                other => {
                    return Err(format!(
                        "`{other}`: not a tunnel kind --decap knows; give {KINDS_HELP}"
                    ))
                }
            }
        }
        if c.vxlan.is_some() && c.vxlan == c.geneve {
            return Err(format!(
                "`{s}`: VXLAN and GENEVE cannot share UDP port {}",
                c.vxlan.unwrap_or(0)
            ));
        }
        Ok(c)
    }
}

impl fmt::Display for DecapConfig {
    /// The canonical form: `vxlan:4789,geneve:6081,gre,erspan` (the kinds asked for).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(p) = self.vxlan {
            parts.push(format!("vxlan:{p}"));
        }
        if let Some(p) = self.geneve {
            parts.push(format!("geneve:{p}"));
        }
        if self.gre {
            parts.push("gre".into());
        }
        if self.erspan {
            parts.push("erspan".into());
        }
        f.write_str(&parts.join(","))
    }
}

impl DecapConfig {
    /// The UDP ports the decapsulation looks at: a kind not asked for gets port 0, so its
    /// packets are not tunnels here.
    fn ports(&self) -> Ports {
        Ports {
            vxlan: self.vxlan.unwrap_or(0),
            geneve: self.geneve.unwrap_or(0),
        }
    }

    fn wants(&self, kind: TunnelKind) -> bool {
        match kind {
            TunnelKind::Vxlan => self.vxlan.is_some(),
            TunnelKind::Geneve => self.geneve.is_some(),
            TunnelKind::Gre => self.gre,
            TunnelKind::Erspan1 | TunnelKind::Erspan2 | TunnelKind::Erspan3 => self.erspan,
            TunnelKind::Mpls | TunnelKind::IpInIp => false,
        }
    }
}

/// What `--decap` did, per lane and summed over them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecapStats {
    /// Packets written as the frame their tunnel carries.
    pub decapsulated: u64,
    /// Wire bytes those packets lost (outer headers and the carrier's padding).
    pub bytes_stripped: u64,
    /// Kept whole: no tunnel of a kind asked for outermost.
    pub not_tunnelled: u64,
    /// Kept whole: such a tunnel, carrying IP or MPLS rather than Ethernet.
    pub not_ethernet: u64,
    /// Kept whole: such a tunnel whose header is cut (snaplen, the first IP fragment) or malformed.
    pub bad: u64,
}

impl DecapStats {
    /// Packets written unchanged.
    pub fn kept_whole(&self) -> u64 {
        self.not_tunnelled + self.not_ethernet + self.bad
    }

    /// Adds another lane's counts.
    pub fn add(&mut self, o: &DecapStats) {
        self.decapsulated += o.decapsulated;
        self.bytes_stripped += o.bytes_stripped;
        self.not_tunnelled += o.not_tunnelled;
        self.not_ethernet += o.not_ethernet;
        self.bad += o.bad;
    }
}

/// The tunnel a comment names; the last one's comment is kept (a mirror session sends many
/// packets in a row between the same two carriers).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    kind: TunnelKind,
    id: Option<u32>,
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    vlan: Option<u16>,
}

/// One capture thread's decapsulation: the configuration, its counters, and the options of the
/// last packet decapsulated.
pub struct Decap {
    cfg: DecapConfig,
    ports: Ports,
    stats: DecapStats,
    /// pcapng options (opt_comment, opt_endofopt) of the last decapsulated packet.
    opts: Vec<u8>,
    key: Option<Key>,
    text: Vec<u8>,
}

impl Decap {
    pub fn new(cfg: DecapConfig) -> Decap {
        Decap {
            cfg,
            ports: cfg.ports(),
            stats: DecapStats::default(),
            opts: Vec::with_capacity(96),
            key: None,
            text: Vec::with_capacity(96),
        }
    }

    pub fn stats(&self) -> DecapStats {
        self.stats
    }

    /// The pcapng options to write with the frame [`Self::strip`] returned last.
    pub fn opts(&self) -> &[u8] {
        &self.opts
    }

    /// The Ethernet frame the outermost tunnel of `data` (an Ethernet frame of `wire_len` bytes
    /// on the wire, `vlan` the tag the kernel took out of it) carries, and its wire length; then
    /// [`Self::opts`] names the tunnel. `None`: write the packet as it came (counted why).
    #[inline]
    pub fn strip<'a>(
        &mut self,
        data: &'a [u8],
        wire_len: u32,
        vlan: Option<Vlan>,
    ) -> Option<(&'a [u8], u32)> {
        if let Some(port) = self.cfg.vxlan {
            // Most packets of a VXLAN mirror, in a few loads: IPv4 at 14, no fragment, whole.
            if let Some((vni, off)) = vxlan_fast_port(data, LinkType::Ethernet, port) {
                let total = usize::from(u16::from_be_bytes([data[16], data[17]]));
                let mut src = [0u8; 16];
                let mut dst = [0u8; 16];
                src[..4].copy_from_slice(&data[26..30]);
                dst[..4].copy_from_slice(&data[30..34]);
                let key = Key {
                    kind: TunnelKind::Vxlan,
                    id: Some(vni),
                    v6: false,
                    src,
                    dst,
                    vlan: vlan.map(|v| v.tci & 0x0fff),
                };
                return Some(self.inner(data, wire_len, off as usize, 14 + total, key));
            }
        }
        self.strip_slow(data, wire_len, vlan)
    }

    #[cold]
    fn strip_slow<'a>(
        &mut self,
        data: &'a [u8],
        wire_len: u32,
        vlan: Option<Vlan>,
    ) -> Option<(&'a [u8], u32)> {
        let outer = parse(data, LinkType::Ethernet);
        let d = decapsulate_parsed_ports(data, LinkType::Ethernet, outer, self.ports);
        let Some(layer) = d.layers().first() else {
            if d.problem.is_some() && self.candidate(data, &outer) {
                self.stats.bad += 1;
            } else {
                self.stats.not_tunnelled += 1;
            }
            return None;
        };
        if !self.cfg.wants(layer.kind) {
            self.stats.not_tunnelled += 1;
            return None;
        }
        if layer.payload != Payload::Ethernet {
            self.stats.not_ethernet += 1;
            return None;
        }
        // The carrier of the outermost tunnel is the frame's own IP header.
        let (Some(l3), Some(ip_len)) = (outer.l3_offset, outer.ip_len) else {
            self.stats.bad += 1;
            return None;
        };
        let key = Key {
            kind: layer.kind,
            id: layer.id,
            v6: layer.carrier_version == Some(IpVersion::V6),
            src: layer.carrier_src,
            dst: layer.carrier_dst,
            vlan: vlan.map(|v| v.tci & 0x0fff).or(d.outer_vlan),
        };
        let end = l3 as usize + ip_len as usize;
        Some(self.inner(data, wire_len, layer.inner_offset as usize, end, key))
    }

    /// Whether a packet whose tunnel could not be read was meant for a kind asked for.
    fn candidate(&self, data: &[u8], h: &wire::Headers) -> bool {
        match h.protocol {
            Some(wire::ip_proto::UDP) => h
                .dst_port
                .is_some_and(|p| Some(p) == self.cfg.vxlan || Some(p) == self.cfg.geneve),
            Some(wire::ip_proto::GRE) => {
                // The GRE protocol type, when the frame holds it (a first fragment may not).
                let ty = h
                    .l4_offset
                    .and_then(|o| data.get(o as usize + 2..o as usize + 4))
                    .map(|b| u16::from_be_bytes([b[0], b[1]]));
                match ty {
                    Some(0x6558) => self.cfg.gre,
                    Some(0x88be | 0x22eb) => self.cfg.erspan,
                    Some(_) => false,
                    None => self.cfg.gre || self.cfg.erspan,
                }
            }
            _ => false,
        }
    }

    /// The frame at `off` up to the carrier's IP end `end` (declared), counted; the comment set.
    #[inline]
    fn inner<'a>(
        &mut self,
        data: &'a [u8],
        wire_len: u32,
        off: usize,
        end: usize,
        key: Key,
    ) -> (&'a [u8], u32) {
        let cap_end = end.min(data.len()).max(off);
        let wire_end = end.min(wire_len as usize).max(off);
        let inner_wire = (wire_end - off) as u32;
        self.stats.decapsulated += 1;
        self.stats.bytes_stripped += u64::from(wire_len - inner_wire);
        if self.key != Some(key) {
            self.comment(&key);
            self.key = Some(key);
        }
        (&data[off..cap_end], inner_wire)
    }

    #[cold]
    fn comment(&mut self, k: &Key) {
        let t = &mut self.text;
        t.clear();
        t.extend_from_slice(k.kind.name().as_bytes());
        if let Some(id) = k.id {
            t.push(b' ');
            push_decimal(t, id);
        }
        t.push(b' ');
        push_addr(t, k.v6, &k.src);
        t.extend_from_slice(b" > ");
        push_addr(t, k.v6, &k.dst);
        if let Some(v) = k.vlan {
            t.extend_from_slice(b" vlan ");
            push_decimal(t, u32::from(v));
        }
        store::epb_comment(&mut self.opts, &self.text);
    }
}

fn push_decimal(t: &mut Vec<u8>, mut n: u32) {
    let mut d = [0u8; 10];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    t.extend_from_slice(&d[i..]);
}

fn push_addr(t: &mut Vec<u8>, v6: bool, a: &[u8; 16]) {
    if v6 {
        t.extend_from_slice(std::net::Ipv6Addr::from(*a).to_string().as_bytes());
        return;
    }
    for (i, b) in a[..4].iter().enumerate() {
        if i > 0 {
            t.push(b'.');
        }
        push_decimal(t, u32::from(*b));
    }
}

#[cfg(test)]
#[path = "decap_tests.rs"]
mod tests;
