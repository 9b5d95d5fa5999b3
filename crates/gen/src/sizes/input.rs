//! Inputs that become a histogram: `sizes` and `dist` text (seed 000 A.1.1) and packet traces.
//!
//! Several files of one kind may be read into the same histogram (A.1.1: "multiple files
//! concatenated together"). A bad line stops the read with the file name and line number.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;
use std::str::FromStr;

use wire::{ethertype, LinkType};

use super::createdist::DEFAULT_MAX_SIZE;
use super::error::{DistError, Result};
use super::histogram::Histogram;

/// Kind of an input file (the `-I` of createDist, A.1.3; `live` is counted by the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// One size per line.
    Sizes,
    /// `<size><sep><count>` per line.
    Dist,
    /// A pcap or pcapng trace, plain or zstd-compressed.
    Trace,
}

impl FromStr for InputKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "sizes" => Ok(InputKind::Sizes),
            "dist" => Ok(InputKind::Dist),
            "trace" => Ok(InputKind::Trace),
            _ => Err(format!(
                "unknown input type {s:?}: use sizes, dist or trace (live is read from an interface)"
            )),
        }
    }
}

/// How text and trace inputs are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Field separator of `dist` lines; `None` splits on runs of spaces and tabs (A.1.3 `-fs`).
    pub field_sep: Option<char>,
    /// Largest size accepted: a text line above it is an error, trace packets above it are
    /// skipped and counted (N_ps, A.1.3 `-max`).
    pub max_size: u16,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            field_sep: None,
            max_size: DEFAULT_MAX_SIZE,
        }
    }
}

/// What reading the inputs found besides the histogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputReport {
    /// Files read.
    pub files: usize,
    /// Text lines that carried a size (`sizes`) or a size and count (`dist`).
    pub records: u64,
    /// Trace counters (all zero for text inputs).
    pub trace: TraceStats,
}

/// Counters of a trace read: createDist counts IP packets and skips the rest (A.1.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Records in the trace.
    pub packets: u64,
    /// IP packets counted into the histogram.
    pub ip: u64,
    /// Packets that are not IPv4 or IPv6 (ARP, LLDP, …): skipped.
    pub non_ip: u64,
    /// IP packets whose header is cut short by the snap length or is malformed: skipped.
    pub bad_ip: u64,
    /// IP packets longer than the largest accepted size: skipped.
    pub oversize: u64,
    /// Damaged or unusual regions the trace reader reported (and skipped where damaged).
    pub reader_issues: u64,
}

impl TraceStats {
    /// Adds the counters of another trace.
    pub fn add(&mut self, o: &TraceStats) {
        self.packets += o.packets;
        self.ip += o.ip;
        self.non_ip += o.non_ip;
        self.bad_ip += o.bad_ip;
        self.oversize += o.oversize;
        self.reader_issues += o.reader_issues;
    }
}

/// Reads every file of one kind into one histogram; `-` reads standard input.
pub fn read_files<P: AsRef<Path>>(
    kind: InputKind,
    paths: &[P],
    opts: &ReadOptions,
) -> Result<(Histogram, InputReport)> {
    let mut hist = Histogram::new();
    let mut report = InputReport::default();
    for p in paths {
        read_file(kind, p.as_ref(), opts, &mut hist, &mut report)?;
    }
    Ok((hist, report))
}

/// Reads one file of `kind` into `hist`, adding to `report`; `-` reads standard input.
pub fn read_file(
    kind: InputKind,
    path: &Path,
    opts: &ReadOptions,
    hist: &mut Histogram,
    report: &mut InputReport,
) -> Result<()> {
    let name = path.display().to_string();
    if kind == InputKind::Trace {
        let stats = read_trace(path, opts, hist)?;
        report.files += 1;
        report.trace.add(&stats);
        return Ok(());
    }
    let records = if name == "-" {
        read_text(kind, io::stdin().lock(), "<stdin>", opts, hist)?
    } else {
        let f = File::open(path).map_err(|source| DistError::Io {
            file: name.clone(),
            source,
        })?;
        read_text(kind, BufReader::new(f), &name, opts, hist)?
    };
    report.files += 1;
    report.records += records;
    Ok(())
}

/// Reads `sizes` or `dist` text from `reader` (named `name` in errors); returns records read.
pub fn read_text<R: BufRead>(
    kind: InputKind,
    reader: R,
    name: &str,
    opts: &ReadOptions,
    hist: &mut Histogram,
) -> Result<u64> {
    match kind {
        InputKind::Sizes => read_sizes(reader, name, opts, hist),
        InputKind::Dist => read_dist(reader, name, opts, hist),
        InputKind::Trace => Err(DistError::Trace {
            file: name.to_string(),
            msg: "a trace is read from a file path, not from a text stream".into(),
        }),
    }
}

/// Reads a `sizes` input: one packet size per line (blank lines and `#` comments allowed).
pub fn read_sizes<R: BufRead>(
    reader: R,
    name: &str,
    opts: &ReadOptions,
    hist: &mut Histogram,
) -> Result<u64> {
    let mut records = 0;
    for_each_line(reader, name, |line_no, line| {
        let err = |msg: String| parse_err(name, line_no, msg);
        let mut fields = line.split_whitespace();
        let field = fields.next().unwrap_or_default();
        if fields.next().is_some() {
            return Err(err(format!(
                "expected one packet size per line, found {line:?}"
            )));
        }
        let size = parse_size(field, opts.max_size).map_err(err)?;
        hist.try_add(size, 1).ok_or_else(|| err(overflow_msg()))?;
        records += 1;
        Ok(())
    })?;
    if records == 0 {
        return Err(DistError::Empty { file: name.into() });
    }
    Ok(records)
}

/// Reads a `dist` input: `<size><sep><count>` per line (A.1.1), `sep` from [`ReadOptions`].
pub fn read_dist<R: BufRead>(
    reader: R,
    name: &str,
    opts: &ReadOptions,
    hist: &mut Histogram,
) -> Result<u64> {
    let mut records = 0;
    for_each_line(reader, name, |line_no, line| {
        let err = |msg: String| parse_err(name, line_no, msg);
        let fields: Vec<&str> = match opts.field_sep {
            None => line.split_whitespace().collect(),
            Some(sep) => line.split(sep).map(str::trim).collect(),
        };
        if fields.len() != 2 {
            let sep = match opts.field_sep {
                None => "spaces".to_string(),
                Some(c) => format!("{c:?}"),
            };
            return Err(err(format!(
                "expected \"<size> <count>\" separated by {sep}, found {line:?} \
                 (set the field separator if the file uses another one)"
            )));
        }
        let size = parse_size(fields[0], opts.max_size).map_err(err)?;
        let count: u64 = match fields[1].parse::<i128>() {
            Ok(c) if c < 0 => return Err(err(format!("count {c} is negative"))),
            Ok(c) => u64::try_from(c).map_err(|_| err(format!("count {c} is too large")))?,
            Err(_) => return Err(err(format!("count {:?} is not a whole number", fields[1]))),
        };
        hist.try_add(size, count)
            .ok_or_else(|| err(overflow_msg()))?;
        records += 1;
        Ok(())
    })?;
    if records == 0 {
        return Err(DistError::Empty { file: name.into() });
    }
    Ok(records)
}

fn overflow_msg() -> String {
    "the packet count overflows 64 bits".into()
}

fn parse_err(file: &str, line: usize, msg: String) -> DistError {
    DistError::Parse {
        file: file.into(),
        line,
        msg,
    }
}

/// Parses one size: a whole number in 1..=max.
fn parse_size(field: &str, max: u16) -> std::result::Result<u16, String> {
    let v: i128 = field
        .parse()
        .map_err(|_| format!("packet size {field:?} is not a whole number"))?;
    if v < 0 {
        return Err(format!("packet size {v} is negative"));
    }
    if v == 0 {
        return Err("packet size 0: sizes are IP packet lengths, at least 1 byte".into());
    }
    if v > max as i128 {
        return Err(format!(
            "packet size {v} is above the maximum size {max} (N_ps); raise the maximum if such packets are wanted"
        ));
    }
    Ok(v as u16)
}

/// Calls `f(line_number, trimmed_line)` for each line that is not blank or a `#` comment.
fn for_each_line<R: BufRead>(
    mut reader: R,
    name: &str,
    mut f: impl FnMut(usize, &str) -> Result<()>,
) -> Result<()> {
    let mut buf = String::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        line_no += 1;
        match reader.read_line(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(parse_err(
                    name,
                    line_no,
                    "line is not UTF-8 text (is this a trace? read it as a trace)".into(),
                ))
            }
            Err(source) => {
                return Err(DistError::Io {
                    file: name.into(),
                    source,
                })
            }
        }
        let line = buf.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        f(line_no, line)?;
    }
}

/// What a captured frame holds, as far as the size model cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSize {
    /// An IP packet of this length (IPv4 total length, or IPv6 payload length + 40).
    Ip(u16),
    /// Not an IP packet.
    NonIp,
    /// An IP packet whose header is cut short or inconsistent.
    BadIp,
}

/// The IP length of a captured frame, or `None` for a link type we do not know.
///
/// The length is read from the IP header, as createDist does (A.1.2: "the length of the IP
/// packet"), so a snap length shorter than the packet does not change it. createDist counted
/// IPv4 only (EtherType 0x0800); we count IPv6 too, as `payload length + 40`. [`wire::parse`] finds
/// the IP header (link header, VLAN tags); the length is read here because `parse` wants the whole
/// fixed header and a short snap length may cut it.
pub fn frame_ip_size(linktype: u32, frame: &[u8]) -> Option<FrameSize> {
    let link = LinkType::from_pcap(linktype)?;
    let h = wire::parse(frame, link);
    let Some(l3) = h.l3_offset.and_then(|at| frame.get(at as usize..)) else {
        return Some(FrameSize::NonIp);
    };
    Some(match (link, h.ethertype) {
        (_, Some(ethertype::IPV4)) | (LinkType::Ipv4, _) => ipv4_size(l3),
        (_, Some(ethertype::IPV6)) | (LinkType::Ipv6, _) => ipv6_size(l3),
        (LinkType::Raw, _) => match l3.first().map(|b| b >> 4) {
            Some(4) => ipv4_size(l3),
            Some(6) => ipv6_size(l3),
            _ => FrameSize::NonIp,
        },
        _ => FrameSize::NonIp,
    })
}

fn ipv4_size(l3: &[u8]) -> FrameSize {
    if l3.len() < 4 || l3[0] >> 4 != 4 {
        return FrameSize::BadIp;
    }
    let ihl = (l3[0] & 0x0f) as u16 * 4;
    let total = u16::from_be_bytes([l3[2], l3[3]]);
    if ihl < 20 || total < ihl {
        return FrameSize::BadIp;
    }
    FrameSize::Ip(total)
}

fn ipv6_size(l3: &[u8]) -> FrameSize {
    if l3.len() < 6 || l3[0] >> 4 != 6 {
        return FrameSize::BadIp;
    }
    let payload = u16::from_be_bytes([l3[4], l3[5]]);
    // Payload length 0 means a jumbogram (RFC 2675): its size is not in this header.
    match payload.checked_add(40) {
        Some(len) if payload != 0 => FrameSize::Ip(len),
        _ => FrameSize::BadIp,
    }
}

/// Counts one captured frame of `linktype` into `hist` and `stats` (sizes above `max_size`
/// are skipped and counted as oversize). `None` if the link type is not supported.
pub fn count_frame(
    linktype: u32,
    frame: &[u8],
    max_size: u16,
    hist: &mut Histogram,
    stats: &mut TraceStats,
) -> Option<()> {
    let what = frame_ip_size(linktype, frame)?;
    stats.packets += 1;
    match what {
        FrameSize::Ip(len) if len > max_size => stats.oversize += 1,
        FrameSize::Ip(len) => {
            hist.add_one(len);
            stats.ip += 1;
        }
        FrameSize::NonIp => stats.non_ip += 1,
        FrameSize::BadIp => stats.bad_ip += 1,
    }
    Some(())
}

/// Counts the IP packet sizes of a pcap or pcapng trace (plain, `.zst` or `.lz4`, found by
/// content; `-` reads stdin) into `hist`, with the `store` crate's tolerant reader.
///
/// Non-IP packets, malformed IP headers and packets above `opts.max_size` are skipped and
/// counted in the returned [`TraceStats`], as are regions the reader found damaged or odd. A trace
/// with no IP packet, or with a link type we cannot find IP in, is an error.
pub fn read_trace(path: &Path, opts: &ReadOptions, hist: &mut Histogram) -> Result<TraceStats> {
    let name = path.display().to_string();
    let trace_err = |msg: String| DistError::Trace {
        file: name.clone(),
        msg,
    };
    let mut reader = store::CaptureReader::open(path).map_err(|e| trace_err(e.to_string()))?;
    let mut stats = TraceStats::default();
    while let Some(packet) = reader.next_packet() {
        let packet = packet.map_err(|e| trace_err(e.to_string()))?;
        if count_frame(
            packet.linktype,
            packet.data,
            opts.max_size,
            hist,
            &mut stats,
        )
        .is_none()
        {
            return Err(trace_err(format!(
                "link type {} is not supported for size counting (supported: Ethernet 1, raw IP 101/228/229, Linux cooked 113/276, loopback 0/108)",
                packet.linktype
            )));
        }
    }
    stats.reader_issues = reader.issues_total();
    if stats.ip == 0 {
        return Err(trace_err(format!(
            "no IP packet of at most {} bytes in {} packets ({} non-IP, {} malformed, {} oversize)",
            opts.max_size, stats.packets, stats.non_ip, stats.bad_ip, stats.oversize
        )));
    }
    Ok(stats)
}
