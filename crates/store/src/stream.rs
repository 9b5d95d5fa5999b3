//! Packets as a pcap or pcapng byte stream into any writer (a socket, a pipe), with no writer
//! thread and no file: for results that leave as they are found (`ringcap serve`).

use std::io::{self, Write};

use crate::format::{Emit, Encoder, Format, MAX_SNAPLEN};
use crate::record_time::{RecordTime, MICROS, NANOS};

/// What a result's file header says: the link type and snaplen of the files it comes from (as
/// `tcpdump -r FILE -w OUT` keeps them), and whether its times keep nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHeader {
    pub linktype: u32,
    pub snaplen: u32,
    pub nanos: bool,
}

impl Default for StreamHeader {
    /// Ethernet at the largest snaplen, nanoseconds: what a result with no file to follow says.
    fn default() -> Self {
        StreamHeader {
            linktype: 1,
            snaplen: MAX_SNAPLEN,
            nanos: true,
        }
    }
}

/// A pcap/pcapng stream: the file header (from the first packet's header, or at the end for an
/// empty result), then one record per packet, straight into the writer (give it a buffered one).
/// Records keep their time fields as the file gave them, turned into this stream's precision as
/// libpcap does (nothing carried into the seconds).
pub struct PacketStream<W: Write> {
    out: W,
    encoder: Encoder,
    header: StreamHeader,
    started: bool,
    /// The first packet's link type as its file gave it (the header may say libpcap's name for
    /// it: 12 becomes 101): every packet must have it.
    linktype: Option<u32>,
    record: Vec<u8>,
}

impl Emit for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl<W: Write> PacketStream<W> {
    /// A stream in `format` (pcap µs or ns, pcapng with nanosecond times) with this header.
    pub fn new(out: W, format: Format, header: StreamHeader) -> Self {
        PacketStream {
            out,
            encoder: Encoder {
                format,
                snaplen: header.snaplen,
                tsresol: crate::format::TSRESOL_NS,
                interface: 0,
            },
            header,
            started: false,
            linktype: None,
            record: Vec::with_capacity(2048),
        }
    }

    fn start(&mut self) -> io::Result<()> {
        if !self.started {
            self.started = true;
            let h = self.encoder.file_header(self.header.linktype, &[], "");
            self.out.write_all(&h)?;
        }
        Ok(())
    }

    /// Appends one packet of link type `linktype` (the header's: a file has one).
    pub fn packet(
        &mut self,
        time: &RecordTime,
        wire_len: u32,
        linktype: u32,
        data: &[u8],
    ) -> io::Result<()> {
        self.start()?;
        check_same_linktype(*self.linktype.get_or_insert(linktype), linktype)?;
        self.record.clear();
        match self.encoder.format {
            Format::Pcap { nanos } => {
                // libpcap's fields at the file's precision, each cut to 32 bits as pcap_dump
                // writes them.
                let (sec, frac) = time.at(if nanos { NANOS } else { MICROS });
                let caplen = data.len() as u32;
                for v in [sec as u32, frac as u32, caplen, wire_len] {
                    self.record.extend_from_slice(&v.to_ne_bytes());
                }
                self.record.extend_from_slice(data);
            }
            Format::PcapNg => {
                let rec_len = self.encoder.record_len(data.len());
                self.encoder.emit_packet(
                    &mut self.record,
                    time.ns(),
                    wire_len,
                    data,
                    None,
                    data.len(),
                    rec_len,
                );
            }
        }
        self.out.write_all(&self.record)
    }

    /// Ends the stream (a header alone when no packet came, so the result is still a valid file)
    /// and gives the writer back, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        self.start()?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// The writer, for a caller that must flush it on its own schedule.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }
}

/// One capture file has one link type: a result that mixes two cannot be written.
pub fn check_same_linktype(first: u32, this: u32) -> io::Result<()> {
    if first == this {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "the result mixes link types {first} and {this}: one file cannot hold both; narrow the query to one kind of interface"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_reads_back_as_the_packets_written() {
        let mut s = PacketStream::new(
            Vec::new(),
            Format::Pcap { nanos: true },
            StreamHeader::default(),
        );
        let t = RecordTime::from_ns;
        s.packet(&t(1_500_000_001), 100, 1, &[7u8; 60]).unwrap();
        s.packet(&t(1_500_000_002), 61, 1, &[8u8; 61]).unwrap();
        assert!(
            s.packet(&t(3), 60, 101, &[0u8; 60]).is_err(),
            "mixed link types"
        );
        let bytes = s.finish().unwrap();
        let mut r = crate::CaptureReader::from_reader(
            Box::new(std::io::Cursor::new(bytes)),
            std::path::Path::new("mem"),
        )
        .unwrap();
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(
            (p.ts_ns, p.wire_len, p.data),
            (1_500_000_001, 100, &[7u8; 60][..])
        );
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!((p.ts_ns, p.data.len()), (1_500_000_002, 61));
        assert!(r.next_packet().is_none());
    }

    #[test]
    fn a_copy_keeps_the_records_time_fields_and_the_files_header() {
        let header = StreamHeader {
            linktype: 101,
            snaplen: 96,
            nanos: false,
        };
        let mut s = PacketStream::new(Vec::new(), Format::Pcap { nanos: false }, header);
        // 1.5 s of microseconds, kept as the file gave them (tcpdump -w copies them).
        let odd = RecordTime {
            sec: 7,
            frac: 1_500_000,
            per_sec: crate::MICROS,
            binary: false,
            signed: true,
        };
        s.packet(&odd, 20, 101, &[0x45; 20]).unwrap();
        let b = s.finish().unwrap();
        let rd = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        assert_eq!((rd(0), rd(16), rd(20)), (crate::PCAP_MAGIC_US, 96, 101));
        assert_eq!((rd(24), rd(28), rd(32), rd(36)), (7, 1_500_000, 20, 20));
    }

    #[test]
    fn an_empty_result_is_a_valid_file() {
        let bytes = PacketStream::new(Vec::new(), Format::PcapNg, StreamHeader::default())
            .finish()
            .unwrap();
        let mut r = crate::CaptureReader::from_reader(
            Box::new(std::io::Cursor::new(bytes)),
            std::path::Path::new("mem"),
        )
        .unwrap();
        assert!(r.next_packet().is_none());
    }
}
