//! Packets as a pcap or pcapng byte stream into any writer (a socket, a pipe), with no writer
//! thread and no file: for results that leave as they are found (`ringcap serve`).

use std::io::{self, Write};

use crate::format::{Emit, Encoder, Format, MAX_SNAPLEN};

/// Link type written when no packet came (Ethernet, as an empty tcpdump file has).
const EMPTY_LINKTYPE: u32 = 1;

/// A pcap/pcapng stream: the file header at the first packet (whose link type it names), then
/// one record per packet, straight into the writer (give it a buffered one).
pub struct PacketStream<W: Write> {
    out: W,
    encoder: Encoder,
    linktype: Option<u32>,
    record: Vec<u8>,
}

impl Emit for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl<W: Write> PacketStream<W> {
    pub fn new(out: W, format: Format) -> Self {
        PacketStream {
            out,
            encoder: Encoder {
                format,
                snaplen: MAX_SNAPLEN,
                tsresol: crate::format::TSRESOL_NS,
                interface: 0,
            },
            linktype: None,
            record: Vec::with_capacity(2048),
        }
    }

    /// Appends one packet; the first one decides the link type of the whole stream.
    pub fn packet(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        linktype: u32,
        data: &[u8],
    ) -> io::Result<()> {
        match self.linktype {
            None => {
                self.out
                    .write_all(&self.encoder.file_header(linktype, &[], ""))?;
                self.linktype = Some(linktype);
            }
            Some(first) => check_same_linktype(first, linktype)?,
        }
        let caplen = data.len().min(MAX_SNAPLEN as usize);
        let rec_len = self.encoder.record_len(caplen);
        self.record.clear();
        self.encoder.emit_packet(
            &mut self.record,
            ts_ns,
            wire_len,
            &data[..caplen],
            None,
            caplen,
            rec_len,
        );
        self.out.write_all(&self.record)
    }

    /// Ends the stream (a header alone when no packet came, so the result is still a valid file)
    /// and gives the writer back, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        if self.linktype.is_none() {
            self.out
                .write_all(&self.encoder.file_header(EMPTY_LINKTYPE, &[], ""))?;
        }
        self.out.flush()?;
        Ok(self.out)
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
        let mut s = PacketStream::new(Vec::new(), Format::Pcap { nanos: true });
        s.packet(1_500_000_001, 100, 1, &[7u8; 60]).unwrap();
        s.packet(1_500_000_002, 61, 1, &[8u8; 61]).unwrap();
        assert!(
            s.packet(3, 60, 101, &[0u8; 60]).is_err(),
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
    fn an_empty_result_is_a_valid_file() {
        let bytes = PacketStream::new(Vec::new(), Format::PcapNg)
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
