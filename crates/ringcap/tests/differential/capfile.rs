//! A small pcap reader (for tcpdump's and ringcap's outputs: the comparison is of raw record
//! fields), small pcap and pcapng writers for the edge cases no tool writes on request, the hex
//! dumps text2pcap reads, and RFC 3339 times. None of it shares code with ringcap.

/// The fields of a pcap file header the comparison looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub big_endian: bool,
    /// Nanosecond magic (0xa1b23c4d).
    pub nano: bool,
    pub snaplen: u32,
    pub linktype: u32,
}

/// One record, as stored: the timestamp's two fields, not a time computed from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub sec: u32,
    pub frac: u32,
    pub caplen: u32,
    pub len: u32,
    pub data: Vec<u8>,
}

impl Rec {
    /// The time the fields mean, in ns (a fraction of a second ≥ 1 s counts as what it says).
    pub fn ns(&self, nano: bool) -> u64 {
        self.sec as u64 * 1_000_000_000 + self.frac as u64 * if nano { 1 } else { 1000 }
    }
}

pub struct Pcap {
    pub header: Header,
    pub recs: Vec<Rec>,
    /// Where each record starts in the file.
    pub offsets: Vec<usize>,
    /// Bytes after the last whole record (a cut file), if any.
    pub trailing: usize,
}

/// Parses a classic pcap file (either byte order, µs or ns). tcpdump and ringcap write whole
/// records; a cut last record is counted in `trailing`.
pub fn read_pcap(b: &[u8]) -> Result<Pcap, String> {
    if b.len() < 24 {
        return Err(format!("{} bytes: no pcap file header", b.len()));
    }
    let magic_le = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let (big, nano) = match magic_le {
        0xa1b2c3d4 => (false, false),
        0xa1b23c4d => (false, true),
        0xd4c3b2a1 => (true, false),
        0x4d3cb2a1 => (true, true),
        m => return Err(format!("not a pcap file (magic {m:#010x})")),
    };
    let u32at = |at: usize| {
        let a: [u8; 4] = b[at..at + 4].try_into().unwrap();
        if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let header = Header {
        big_endian: big,
        nano,
        snaplen: u32at(16),
        linktype: u32at(20),
    };
    let mut recs = Vec::new();
    let mut offsets = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = u32at(at + 8);
        if at + 16 + caplen as usize > b.len() {
            break;
        }
        offsets.push(at);
        recs.push(Rec {
            sec: u32at(at),
            frac: u32at(at + 4),
            caplen,
            len: u32at(at + 12),
            data: b[at + 16..at + 16 + caplen as usize].to_vec(),
        });
        at += 16 + caplen as usize;
    }
    Ok(Pcap {
        header,
        recs,
        offsets,
        trailing: b.len() - at,
    })
}

fn put16(v: &mut Vec<u8>, big: bool, x: u16) {
    v.extend_from_slice(&if big {
        x.to_be_bytes()
    } else {
        x.to_le_bytes()
    });
}

fn put32(v: &mut Vec<u8>, big: bool, x: u32) {
    v.extend_from_slice(&if big {
        x.to_be_bytes()
    } else {
        x.to_le_bytes()
    });
}

/// A classic pcap file whose record fields are written as given (caplen may disagree with the
/// snaplen, the fraction may be ≥ 1 s): the edge cases.
pub struct PcapWriter {
    big: bool,
    pub buf: Vec<u8>,
}

impl PcapWriter {
    pub fn new(big: bool, nano: bool, snaplen: u32, linktype: u32) -> PcapWriter {
        let mut buf = Vec::new();
        put32(&mut buf, big, if nano { 0xa1b23c4d } else { 0xa1b2c3d4 });
        put16(&mut buf, big, 2);
        put16(&mut buf, big, 4);
        put32(&mut buf, big, 0);
        put32(&mut buf, big, 0);
        put32(&mut buf, big, snaplen);
        put32(&mut buf, big, linktype);
        PcapWriter { big, buf }
    }
    /// A record with `data` stored (its caplen field is data.len()) and wire length `len`.
    pub fn rec(&mut self, sec: u32, frac: u32, data: &[u8], len: u32) {
        put32(&mut self.buf, self.big, sec);
        put32(&mut self.buf, self.big, frac);
        put32(&mut self.buf, self.big, data.len() as u32);
        put32(&mut self.buf, self.big, len);
        self.buf.extend_from_slice(data);
    }
}

/// A pcapng file block by block, in either byte order.
pub struct NgWriter {
    big: bool,
    pub buf: Vec<u8>,
}

/// pcapng options: (code, value), each padded to 4 bytes, then opt_endofopt.
fn options(big: bool, opts: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    if opts.is_empty() {
        return v;
    }
    for (code, val) in opts {
        put16(&mut v, big, *code);
        put16(&mut v, big, val.len() as u16);
        v.extend_from_slice(val);
        v.resize(v.len().div_ceil(4) * 4, 0);
    }
    put32(&mut v, big, 0);
    v
}

impl NgWriter {
    pub fn new(big: bool) -> NgWriter {
        let mut w = NgWriter {
            big,
            buf: Vec::new(),
        };
        w.section();
        w
    }
    fn block(&mut self, ty: u32, body: &[u8]) {
        let total = 12 + body.len().div_ceil(4) * 4;
        put32(&mut self.buf, self.big, ty);
        put32(&mut self.buf, self.big, total as u32);
        self.buf.extend_from_slice(body);
        self.buf
            .resize(self.buf.len() + (total - 12 - body.len()), 0);
        put32(&mut self.buf, self.big, total as u32);
    }
    /// A section header (a file may hold several).
    pub fn section(&mut self) {
        let mut b = Vec::new();
        put32(&mut b, self.big, 0x1a2b3c4d);
        put16(&mut b, self.big, 1);
        put16(&mut b, self.big, 0);
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
        b.extend(options(
            self.big,
            &[(4, b"ringcap differential test".to_vec())],
        ));
        self.block(0x0a0d0d0a, &b);
    }
    /// An interface: if_tsresol (9 = 10^-9, 0x94 = 2^-20, …) and if_tsoffset (seconds) if given.
    pub fn interface(
        &mut self,
        linktype: u16,
        snaplen: u32,
        tsresol: Option<u8>,
        tsoffset: Option<i64>,
    ) {
        let mut b = Vec::new();
        put16(&mut b, self.big, linktype);
        put16(&mut b, self.big, 0);
        put32(&mut b, self.big, snaplen);
        let mut opts = vec![(2u16, b"eth0".to_vec())];
        if let Some(r) = tsresol {
            opts.push((9, vec![r]));
        }
        if let Some(o) = tsoffset {
            let v = if self.big {
                o.to_be_bytes()
            } else {
                o.to_le_bytes()
            };
            opts.push((14, v.to_vec()));
        }
        b.extend(options(self.big, &opts));
        self.block(1, &b);
    }
    /// An enhanced packet block; `ts` in the interface's units.
    pub fn epb(&mut self, ifid: u32, ts: u64, data: &[u8], len: u32) {
        let mut b = Vec::new();
        put32(&mut b, self.big, ifid);
        put32(&mut b, self.big, (ts >> 32) as u32);
        put32(&mut b, self.big, ts as u32);
        put32(&mut b, self.big, data.len() as u32);
        put32(&mut b, self.big, len);
        b.extend_from_slice(data);
        b.resize(b.len().div_ceil(4) * 4, 0);
        b.extend(options(self.big, &[(1, b"epb comment".to_vec())]));
        self.block(6, &b);
    }
    /// A simple packet block: no timestamp, no interface (the first), caplen from the snaplen.
    pub fn spb(&mut self, data: &[u8], len: u32) {
        let mut b = Vec::new();
        put32(&mut b, self.big, len);
        b.extend_from_slice(data);
        self.block(3, &b);
    }
    /// The obsolete packet block (type 2) that old Wireshark versions wrote.
    pub fn pb(&mut self, ifid: u16, ts: u64, data: &[u8], len: u32) {
        let mut b = Vec::new();
        put16(&mut b, self.big, ifid);
        put16(&mut b, self.big, 0); // drops count
        put32(&mut b, self.big, (ts >> 32) as u32);
        put32(&mut b, self.big, ts as u32);
        put32(&mut b, self.big, data.len() as u32);
        put32(&mut b, self.big, len);
        b.extend_from_slice(data);
        self.block(2, &b);
    }
    /// Blocks a reader must step over: a name resolution block, interface statistics, a
    /// custom block.
    pub fn noise(&mut self, ifid: u32) {
        let mut nrb = Vec::new();
        put16(&mut nrb, self.big, 1);
        put16(&mut nrb, self.big, 4 + 5);
        nrb.extend_from_slice(&[10, 0, 0, 1]);
        nrb.extend_from_slice(b"host\0");
        nrb.resize(nrb.len().div_ceil(4) * 4, 0);
        put32(&mut nrb, self.big, 0);
        self.block(4, &nrb);
        let mut isb = Vec::new();
        put32(&mut isb, self.big, ifid);
        put32(&mut isb, self.big, 0);
        put32(&mut isb, self.big, 0);
        self.block(5, &isb);
        let mut custom = Vec::new();
        put32(&mut custom, self.big, 32473); // the PEN reserved for examples
        custom.extend_from_slice(b"opaque");
        self.block(0x0000_0bad, &custom);
    }
}

/// The blocks of a little-endian pcapng file: (offset, type, length).
pub fn pcapng_blocks(b: &[u8]) -> Vec<(usize, u32, usize)> {
    let mut v = Vec::new();
    let mut at = 0;
    while at + 12 <= b.len() {
        let ty = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
        if len < 12 || at + len > b.len() {
            break;
        }
        v.push((at, ty, len));
        at += len;
    }
    v
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// `ns` since the epoch as RFC 3339, written in the zone `offset_min` minutes east of UTC.
pub fn rfc3339(ns: u64, offset_min: i32) -> String {
    let local = ns as i128 + offset_min as i128 * 60_000_000_000;
    let secs = local.div_euclid(1_000_000_000) as i64;
    let frac = local.rem_euclid(1_000_000_000);
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let zone = if offset_min == 0 {
        "Z".to_string()
    } else {
        let a = offset_min.abs();
        format!(
            "{}{:02}:{:02}",
            if offset_min < 0 { '-' } else { '+' },
            a / 60,
            a % 60
        )
    };
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}{zone}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// One packet as text2pcap reads it with `-t ISO`: a time line, then offset and hex bytes.
pub fn hexdump(out: &mut String, ts_ns: u64, data: &[u8]) {
    use std::fmt::Write;
    out.push_str(&rfc3339(ts_ns, 0));
    out.push('\n');
    for (i, chunk) in data.chunks(16).enumerate() {
        let _ = write!(out, "{:06x} ", i * 16);
        for b in chunk {
            let _ = write!(out, " {b:02x}");
        }
        out.push('\n');
    }
    out.push('\n');
}

#[test]
fn rfc3339_known_values() {
    assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000000Z");
    assert_eq!(
        rfc3339(1_700_000_000_123_456_789, 0),
        "2023-11-14T22:13:20.123456789Z"
    );
    assert_eq!(
        rfc3339(1_700_000_000_000_000_000, 330),
        "2023-11-15T03:43:20.000000000+05:30"
    );
    assert_eq!(
        rfc3339((1u64 << 32) - 1, 0).split('T').next(),
        Some("1970-01-01")
    );
    assert_eq!(
        rfc3339(((1u64 << 32) - 1) * 1_000_000_000, 0),
        "2106-02-07T06:28:15.000000000Z"
    );
}
