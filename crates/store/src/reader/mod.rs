//! Reading pcap and pcapng (either byte order), plain or gzip/zstd/lz4 compressed (found by magic,
//! not by name). Packets are borrowed from one large buffer; damaged input yields every whole
//! packet that can be found, and each skipped region is reported with its offset and a reason.
//! Bytes read from the file (before decompression) are counted for progress displays.

mod pcap;
mod pcapng;
mod source;

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::container::Compression;
use crate::error::StoreError;
use crate::record_time::RecordTime;
use source::Source;

/// Size of the read buffer.
const READ_BUFFER: usize = 1 << 20;
/// Issues kept in detail; later ones are only counted.
const MAX_ISSUES: usize = 100;

/// One packet, borrowed from the reader's buffer until the next call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Timestamp in nanoseconds since the epoch (saturating): for time windows and order.
    pub ts_ns: u64,
    /// The record's time fields as the file gives them: for copies of the record.
    pub time: RecordTime,
    /// Length on the wire.
    pub wire_len: u32,
    /// Captured bytes (caplen of them).
    pub data: &'a [u8],
    /// Link-layer type of the packet's interface.
    pub linktype: u32,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    /// Byte offset of the packet's record in the (decompressed) stream: the pcap record header, or
    /// the pcapng block (EPB, SPB or obsolete PB).
    pub offset: u64,
    /// Byte offset of the first captured byte (`data[0]`) in the (decompressed) stream.
    pub data_offset: u64,
}

/// What a capture file says of its packets' link: what libpcap compiles a filter for and what a
/// copy of the file's packets should say in its own header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileLink {
    /// The link type field as the file gives it (pcap: with its FCS bits; pcapng: the first
    /// interface's).
    pub linktype: u32,
    /// The snaplen as the file gives it (libpcap adjusts 0 and too-large values).
    pub snaplen: u32,
    /// The file is in the other byte order than this machine's.
    pub swapped: bool,
    /// Times finer than microseconds (a nanosecond pcap; a pcapng interface with a finer
    /// if_tsresol): a copy keeps nanoseconds.
    pub nanos: bool,
}

/// The capture format found inside the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// Classic pcap.
    Pcap { nanos: bool, big_endian: bool },
    /// pcapng (byte order may change per section).
    PcapNg,
}

/// Something the reader skipped or found odd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// Stream offset (after decompression) where the problem starts.
    pub offset: u64,
    /// Bytes skipped because of it (0 when nothing was dropped).
    pub skipped: u64,
    /// What was wrong.
    pub reason: String,
    /// Damage (truncation, bad lengths), as opposed to something legal but unusual.
    pub corrupt: bool,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offset {}: {}", self.offset, self.reason)?;
        if self.skipped > 0 {
            write!(f, " ({} bytes skipped)", self.skipped)?;
        }
        Ok(())
    }
}

/// What a step of the parser produced. `Packet` holds positions in the buffer, not a borrow, so
/// the parsing loop can continue past skipped records without fighting the borrow checker.
enum Step {
    Packet(Meta),
    Continue,
    End,
}

#[derive(Clone, Copy)]
struct Meta {
    start: usize,
    len: usize,
    ts_ns: u64,
    time: RecordTime,
    wire_len: u32,
    linktype: u32,
    interface: u32,
    /// Stream offset of the record (pcap record header or pcapng block).
    offset: u64,
}

enum Kind {
    Pcap(pcap::PcapState),
    PcapNg(pcapng::NgState),
}

/// Reads packets from a capture file or stream.
pub struct CaptureReader {
    src: Source,
    kind: Kind,
    path: PathBuf,
    compression: Compression,
    log: Log,
    packets: u64,
    /// End of the last whole record before the first damage (where `repair` cuts).
    clean_end: u64,
    clean_packets: u64,
    /// End of the last whole record read, damage or not (what follows is a cut tail).
    records_end: u64,
    /// pcap: the run of all-zero records (caplen, length and time 0) the stream ends with so
    /// far: its offset and length in packets.
    zero_run: Option<(u64, u64)>,
    damaged: bool,
    done: bool,
}

/// Opens a capture file (pcap or pcapng, plain, .gz, .zst or .lz4, found by content).
pub fn open_capture(path: &Path) -> Result<CaptureReader, StoreError> {
    CaptureReader::open(path)
}

impl CaptureReader {
    /// Opens a capture file; "-" reads stdin.
    pub fn open(path: &Path) -> Result<CaptureReader, StoreError> {
        Self::open_with_progress(path, Arc::default())
    }

    /// Opens a capture file ("-" reads stdin) and adds every byte read from it, as stored
    /// (compressed or not), to `progress`: another thread can show it against the file size. One
    /// counter may be shared by several readers.
    pub fn open_with_progress(
        path: &Path,
        progress: Arc<AtomicU64>,
    ) -> Result<CaptureReader, StoreError> {
        if path.as_os_str() == "-" {
            let stdin = Counting {
                inner: io::stdin(),
                progress,
            };
            return Self::from_reader(Box::new(stdin), Path::new("stdin"));
        }
        let file = File::open(path).map_err(|source| StoreError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_reader(
            Box::new(Counting {
                inner: file,
                progress,
            }),
            path,
        )
    }

    /// Reads from any byte stream; `label` names it in messages.
    pub fn from_reader(r: Box<dyn Read + Send>, label: &Path) -> Result<CaptureReader, StoreError> {
        Self::from_reader_sized(r, label, READ_BUFFER)
    }

    /// As [`Self::from_reader`] with a read buffer of `capacity` bytes to begin with (it grows for
    /// larger records): for reading many small pieces of a file, as a query does.
    pub fn from_reader_sized(
        r: Box<dyn Read + Send>,
        label: &Path,
        capacity: usize,
    ) -> Result<CaptureReader, StoreError> {
        Self::from_reader_with(r, label, capacity, false)
    }

    /// As [`Self::from_reader_sized`], reading as libpcap (and so `tcpdump -r`) does: the stream
    /// ends at the first damage or at anything libpcap refuses (an interface of another link
    /// type, a packet longer than the snapshot length, ...), said as an issue, where a lenient
    /// reader skips to the next plausible record. What a query returns must be what tcpdump
    /// returns.
    pub fn strict_from_reader(
        r: Box<dyn Read + Send>,
        label: &Path,
        capacity: usize,
    ) -> Result<CaptureReader, StoreError> {
        Self::from_reader_with(r, label, capacity, true)
    }

    fn from_reader_with(
        mut r: Box<dyn Read + Send>,
        label: &Path,
        capacity: usize,
        strict: bool,
    ) -> Result<CaptureReader, StoreError> {
        let path = label.to_path_buf();
        let read_err = |source| StoreError::Read {
            path: path.clone(),
            source,
        };
        let mut head = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match r.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(read_err(e)),
            }
        }
        let raw = io::Cursor::new(head[..got].to_vec()).chain(r);
        let compression = Compression::sniff(&head[..got]);
        let inner = crate::container::decoder(raw, compression).map_err(read_err)?;
        let mut src = Source::new(inner, capacity.max(64));
        let kind = match src.fill(4) {
            Ok(true) => {
                let magic = src.peek(4);
                if let Some(st) = pcap::PcapState::detect(magic) {
                    Kind::Pcap(st)
                } else if magic == crate::format::BT_SHB.to_le_bytes() {
                    Kind::PcapNg(pcapng::NgState::default())
                } else {
                    return Err(StoreError::format(
                        &path,
                        format!(
                            "not a pcap or pcapng file (starts with {:02x?}); compressed input is recognised only as gzip, zstd or lz4",
                            magic
                        ),
                    ));
                }
            }
            Ok(false) if src.avail() == 0 => {
                return Err(StoreError::format(
                    &path,
                    "the file is empty (no capture header)",
                ))
            }
            Ok(false) => {
                return Err(StoreError::format(
                    &path,
                    "the file is too short to be a capture file",
                ))
            }
            Err(e) => return Err(read_err(e)),
        };
        let mut reader = CaptureReader {
            src,
            kind,
            path,
            compression,
            log: Log {
                strict,
                ..Log::default()
            },
            packets: 0,
            clean_end: 0,
            clean_packets: 0,
            records_end: 0,
            zero_run: None,
            damaged: false,
            done: false,
        };
        reader.read_header()?;
        if strict {
            reader.read_to_first_interface()?;
        }
        Ok(reader)
    }

    fn read_header(&mut self) -> Result<(), StoreError> {
        let result = match &mut self.kind {
            Kind::Pcap(st) => st.read_header(&mut self.src, self.log.strict),
            Kind::PcapNg(_) => pcapng::check_first_block(&mut self.src),
        };
        match result {
            Ok(Ok(())) => {
                self.clean_end = self.src.offset();
                self.records_end = self.clean_end;
                Ok(())
            }
            Ok(Err(reason)) => Err(StoreError::format(&self.path, reason)),
            Err(e) => Err(StoreError::Read {
                path: self.path.clone(),
                source: e,
            }),
        }
    }

    /// pcapng: reads the blocks before the first interface description, as libpcap does when it
    /// opens a file, so that [`Self::link`] is known before the first packet. A packet before
    /// any interface is damage (said when the packets are read).
    fn read_to_first_interface(&mut self) -> Result<(), StoreError> {
        while let Kind::PcapNg(st) = &mut self.kind {
            if st.first_linktype().is_some() || self.log.damaged || self.done {
                break;
            }
            if !self.src.fill(8).map_err(|source| StoreError::Read {
                path: self.path.clone(),
                source,
            })? {
                break;
            }
            // A packet block first: leave it to the packet loop, which says what is wrong.
            let ty = self.src.peek(8);
            if matches!(
                u32::from_le_bytes(ty[..4].try_into().expect("4 bytes")),
                crate::format::BT_EPB | crate::format::BT_SPB | crate::format::BT_OPB
            ) || matches!(
                u32::from_be_bytes(ty[..4].try_into().expect("4 bytes")),
                crate::format::BT_EPB | crate::format::BT_SPB | crate::format::BT_OPB
            ) {
                break;
            }
            // Not a packet block: it cannot give a packet.
            let _ = self.step_once()?;
        }
        Ok(())
    }

    /// The next packet, `None` at the end. After `Some(Err)` (an I/O error), only `None` follows.
    #[allow(clippy::should_implement_trait)] // a lending iterator: the packet borrows the reader
    pub fn next_packet(&mut self) -> Option<Result<Packet<'_>, StoreError>> {
        match self.advance() {
            Ok(Some(m)) => Some(Ok(Packet {
                ts_ns: m.ts_ns,
                time: m.time,
                wire_len: m.wire_len,
                data: &self.src.buf[m.start..m.start + m.len],
                linktype: m.linktype,
                interface: m.interface,
                offset: m.offset,
                // The buffer has not moved since the record was parsed (it moves only in `fill`).
                data_offset: self.src.offset_of(m.start),
            })),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    fn advance(&mut self) -> Result<Option<Meta>, StoreError> {
        while !self.done {
            if let Some(m) = self.step_once()? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// Reads one record or block: a packet, or None (a block that is not one, or the end).
    fn step_once(&mut self) -> Result<Option<Meta>, StoreError> {
        let step = match &mut self.kind {
            Kind::Pcap(st) => st.step(&mut self.src, &mut self.log),
            Kind::PcapNg(st) => st.step(&mut self.src, &mut self.log),
        };
        let step = match step {
            Ok(s) => s,
            Err(e) if self.compression != Compression::None => {
                // A damaged or cut compressed stream: keep what was decoded, report the rest.
                let offset = self.src.offset();
                self.log.corrupt(
                    offset,
                    0,
                    format!(
                        "the {:?} stream is damaged or cut here: {e}",
                        self.compression
                    ),
                );
                Step::End
            }
            Err(e) => {
                return Err(StoreError::Read {
                    path: self.path.clone(),
                    source: e,
                })
            }
        };
        self.damaged = self.log.damaged;
        let step = if self.damaged && self.log.strict {
            Step::End
        } else {
            step
        };
        if !matches!(step, Step::End) {
            self.records_end = self.src.offset();
        }
        match step {
            Step::Packet(m) => {
                self.packets += 1;
                let zero =
                    matches!(self.kind, Kind::Pcap(_)) && (m.len, m.wire_len, m.ts_ns) == (0, 0, 0);
                self.zero_run = match self.zero_run {
                    _ if !zero => None,
                    None => Some((m.offset, 1)),
                    Some((at, n)) => Some((at, n + 1)),
                };
                if !self.damaged {
                    self.clean_end = self.src.offset();
                    self.clean_packets += 1;
                }
                Ok(Some(m))
            }
            Step::Continue => {
                if !self.damaged {
                    self.clean_end = self.src.offset();
                }
                Ok(None)
            }
            Step::End => {
                self.done = true;
                Ok(None)
            }
        }
    }

    /// Format of the stream.
    pub fn format(&self) -> InputFormat {
        match &self.kind {
            Kind::Pcap(st) => InputFormat::Pcap {
                nanos: st.nanos,
                big_endian: st.be,
            },
            Kind::PcapNg(_) => InputFormat::PcapNg,
        }
    }

    /// Compression of the file.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Link type of the pcap file or of the first pcapng interface (None before one is seen).
    pub fn linktype(&self) -> Option<u32> {
        match &self.kind {
            Kind::Pcap(st) => Some(st.linktype),
            Kind::PcapNg(st) => st.first_linktype(),
        }
    }

    /// What libpcap needs to compile a filter for this file's packets and to write a file like
    /// it: the link type field as the file gives it (pcap: FCS bits included), the snaplen, and
    /// whether the file is in the other byte order. None for a pcapng file before its first
    /// interface.
    pub fn link(&self) -> Option<FileLink> {
        match &self.kind {
            Kind::Pcap(st) => Some(FileLink {
                linktype: st.linktype_field,
                // A patched Ethernet file's snapshot is 14 bytes more, as libpcap has it.
                snaplen: if st.record_len != crate::format::PCAP_RECORD_LEN
                    && st.linktype == 1
                    && st.snaplen != 0
                {
                    st.snaplen.saturating_add(14)
                } else {
                    st.snaplen
                },
                swapped: st.be != cfg!(target_endian = "big"),
                nanos: st.nanos,
            }),
            Kind::PcapNg(st) => Some(FileLink {
                linktype: st.first_linktype()?,
                snaplen: st.first_snaplen()?,
                swapped: st.swapped(),
                nanos: st.first_resolution_finer_than_micros(),
            }),
        }
    }

    /// pcapng: an interface or a section was described after the first packet, so the blocks
    /// before the first packet do not describe the whole file (a reader of a piece of the file
    /// after it could not know its packets' interfaces).
    pub fn late_interfaces(&self) -> bool {
        match &self.kind {
            Kind::Pcap(_) => false,
            Kind::PcapNg(st) => st.late_interfaces(),
        }
    }

    /// Snaplen of the pcap file or of the first pcapng interface.
    pub fn snaplen(&self) -> Option<u32> {
        match &self.kind {
            Kind::Pcap(st) => Some(st.snaplen),
            Kind::PcapNg(st) => st.first_snaplen(),
        }
    }

    /// Packets returned so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Problems found so far (the first 100; see [`Self::issues_total`]).
    pub fn issues(&self) -> &[Issue] {
        &self.log.list
    }

    /// Number of problems found so far.
    pub fn issues_total(&self) -> u64 {
        self.log.total
    }

    /// Stream offset just after the last whole record read before the first damage.
    pub fn clean_end(&self) -> u64 {
        self.clean_end
    }

    /// Packets before [`Self::clean_end`].
    pub fn clean_packets(&self) -> u64 {
        self.clean_packets
    }

    /// Whether any damage (not just oddities) was found.
    pub fn damaged(&self) -> bool {
        self.damaged
    }

    /// Stream offset just after the last whole record or block read (damage before it or not).
    pub fn records_end(&self) -> u64 {
        self.records_end
    }

    /// pcap: where the run of all-zero records the stream ends with begins, and how many there
    /// are. libpcap reads them as empty packets, but zeros at the end are what a torn write
    /// leaves (the file grew, its blocks were never written), so `repair` cuts them.
    pub fn zero_tail(&self) -> Option<(u64, u64)> {
        self.zero_run
    }

    /// Every damaged region skipped so far, as (stream offset, length), in stream order. The
    /// stream without them (and without what follows [`Self::records_end`]) holds exactly the
    /// records this reader returned: what `repair` keeps.
    pub fn dropped_regions(&self) -> &[(u64, u64)] {
        &self.log.dropped
    }
}

/// Adds the bytes read through it to a shared counter.
struct Counting<R> {
    inner: R,
    progress: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

/// Collects issues, keeping the first [`MAX_ISSUES`] in full.
#[derive(Default)]
pub(crate) struct Log {
    /// Read as libpcap does: the first damage (or anything libpcap refuses) ends the stream, where
    /// a lenient reader skips to the next plausible record.
    pub strict: bool,
    list: Vec<Issue>,
    total: u64,
    damaged: bool,
    /// Every damaged region skipped (all of them, not only the first [`MAX_ISSUES`]; regions
    /// that touch joined).
    dropped: Vec<(u64, u64)>,
}

impl Log {
    fn push(&mut self, offset: u64, skipped: u64, reason: String, corrupt: bool) {
        self.total += 1;
        self.damaged |= corrupt;
        if corrupt && skipped > 0 {
            // Regions that touch are one: a run of millions of bad blocks (a hostile file) is
            // one region, not millions of entries.
            match self.dropped.last_mut() {
                Some((at, len)) if *at + *len == offset => *len += skipped,
                _ => self.dropped.push((offset, skipped)),
            }
        }
        if self.list.len() < MAX_ISSUES {
            self.list.push(Issue {
                offset,
                skipped,
                reason,
                corrupt,
            });
        }
    }

    /// Damage: the file is not valid from `offset`.
    pub fn corrupt(&mut self, offset: u64, skipped: u64, reason: String) {
        self.push(offset, skipped, reason, true);
    }

    /// Legal but unusual, nothing lost.
    pub fn odd(&mut self, offset: u64, skipped: u64, reason: String) {
        self.push(offset, skipped, reason, false);
    }
}

/// Reads a u16 in the given byte order.
#[inline]
fn rd16(b: &[u8], at: usize, be: bool) -> u16 {
    let v = [b[at], b[at + 1]];
    if be {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

/// Reads a u32 in the given byte order.
#[inline]
fn rd32(b: &[u8], at: usize, be: bool) -> u32 {
    let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if be {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

/// Records what is left after a cut: the whole tail is skipped.
fn truncated(src: &mut Source, log: &mut Log, what: &str, need: usize) -> io::Result<Step> {
    let offset = src.offset();
    let left = src.drain()?;
    if left > 0 {
        log.corrupt(
            offset,
            left,
            format!("the input ends {left} bytes into a {need}-byte {what}"),
        );
    }
    Ok(Step::End)
}
