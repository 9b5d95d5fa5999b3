//! TCP header (RFC 9293), flags and options.

use core::fmt;

use crate::bytes::{be16, be32, put16, put32};
use crate::error::{need, Error, Result};

mod field {
    use crate::bytes::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    pub const FLAGS: Field = 12..14;
    pub const WIN_SIZE: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
}

/// TCP header length without options.
pub const TCP_HDR: usize = 20;

/// The nine TCP flag bits (low 9 bits of bytes 12..14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN.
    pub const FIN: u16 = 0x001;
    /// SYN.
    pub const SYN: u16 = 0x002;
    /// RST.
    pub const RST: u16 = 0x004;
    /// PSH.
    pub const PSH: u16 = 0x008;
    /// ACK.
    pub const ACK: u16 = 0x010;
    /// URG.
    pub const URG: u16 = 0x020;
    /// ECN echo.
    pub const ECE: u16 = 0x040;
    /// Congestion window reduced.
    pub const CWR: u16 = 0x080;
    /// Accurate ECN (formerly NS).
    pub const AE: u16 = 0x100;

    /// True when all bits of `mask` are set.
    #[inline]
    pub const fn has(self, mask: u16) -> bool {
        self.0 & mask == mask
    }
}

/// tcpdump's letters: `F S R P . U E W e`, "none" when no flag is set.
impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LETTERS: [(u16, char); 9] = [
            (TcpFlags::FIN, 'F'),
            (TcpFlags::SYN, 'S'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::ACK, '.'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::AE, 'e'),
        ];
        if self.0 & 0x1ff == 0 {
            return f.write_str("none");
        }
        for (bit, c) in LETTERS {
            if self.0 & bit != 0 {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// A view of a TCP segment.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header (options included) is present and its length is at least 20.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need("TCP", TCP_HDR, len)?;
        let hl = self.header_len() as usize;
        if hl < TCP_HDR {
            return Err(Error::Malformed {
                header: "TCP",
                what: "data offset below 5 words",
            });
        }
        need("TCP", hl, len)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT.start)
    }

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ_NUM.start)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK_NUM.start)
    }

    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS.start] >> 4) * 4
    }

    /// Flags.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(be16(self.buffer.as_ref(), field::FLAGS.start) & 0x1ff)
    }

    /// Window size (unscaled).
    #[inline]
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WIN_SIZE.start)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// Option bytes.
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[TCP_HDR..self.header_len() as usize]
    }

    /// Decoded options.
    pub fn option_iter(&self) -> TcpOptions<'a> {
        TcpOptions::new(self.options())
    }

    /// Bytes after the header (the caller bounds them by the IP length).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len() as usize..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT.start, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT.start, v);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::SEQ_NUM.start, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::ACK_NUM.start, v);
    }

    /// Sets header length (bytes, multiple of 4) and flags together.
    pub fn set_header_len_and_flags(&mut self, header_len: u8, flags: TcpFlags) {
        let v = (((header_len / 4) as u16) << 12) | (flags.0 & 0x1ff);
        put16(self.buffer.as_mut(), field::FLAGS.start, v);
    }

    /// Sets the window.
    pub fn set_window(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::WIN_SIZE.start, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::URGENT.start, v);
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0; ends the list.
    EndOfList,
    /// Kind 1.
    Nop,
    /// Kind 2.
    Mss(u16),
    /// Kind 3.
    WindowScale(u8),
    /// Kind 4.
    SackPermitted,
    /// Kind 5: (left, right) edge pairs, 8 bytes each.
    Sack(&'a [u8]),
    /// Kind 8.
    Timestamp {
        /// TSval.
        val: u32,
        /// TSecr.
        ecr: u32,
    },
    /// Any other kind, or a known kind with the wrong length.
    Other {
        /// Option kind.
        kind: u8,
        /// Option data (after kind and length).
        data: &'a [u8],
    },
    /// A length byte that is missing, below 2, or past the end; iteration stops after it.
    Malformed {
        /// Option kind.
        kind: u8,
    },
}

/// Iterator over the options of a TCP header; never panics.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Iterates over option bytes.
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptions { data }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = TcpOption<'a>;

    fn next(&mut self) -> Option<TcpOption<'a>> {
        let (&kind, rest) = self.data.split_first()?;
        match kind {
            0 => {
                self.data = &[];
                return Some(TcpOption::EndOfList);
            }
            1 => {
                self.data = rest;
                return Some(TcpOption::Nop);
            }
            _ => {}
        }
        let len = match rest.first() {
            Some(&l) if l >= 2 && l as usize <= self.data.len() => l as usize,
            _ => {
                self.data = &[];
                return Some(TcpOption::Malformed { kind });
            }
        };
        let body = &self.data[2..len];
        self.data = &self.data[len..];
        Some(match (kind, body.len()) {
            (2, 2) => TcpOption::Mss(u16::from_be_bytes([body[0], body[1]])),
            (3, 1) => TcpOption::WindowScale(body[0]),
            (4, 0) => TcpOption::SackPermitted,
            (5, n) if n % 8 == 0 => TcpOption::Sack(body),
            (8, 8) => TcpOption::Timestamp {
                val: be32(body, 0),
                ecr: be32(body, 4),
            },
            _ => TcpOption::Other { kind, data: body },
        })
    }
}
