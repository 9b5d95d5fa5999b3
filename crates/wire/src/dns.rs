//! DNS messages (RFC 1035): the header, the questions, and the answers with A, AAAA and CNAME data.
//!
//! [`Message`] is a view of a message (a UDP payload, or a TCP payload after [`strip_tcp_length`]).
//! Names are decompressed into a [`Name`]; decompression follows at most [`MAX_POINTERS`] pointers, each
//! of which must point before the start of the labels that led to it (so a loop, or any pointer forward,
//! is `Malformed`), and a name longer than 255 bytes on the wire is `Malformed` too. Records are read
//! lazily by the iterators: a malformed or truncated record ends its iterator with one `Err`.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bytes::{array, be16, be32};
use crate::error::{need, Error, Result};
use crate::names::Name;

/// Length of the DNS header.
pub const DNS_HDR: usize = 12;

/// Most compression pointers followed in one name (a valid name of at most 127 labels never needs more).
pub const MAX_POINTERS: usize = 127;

/// Longest name on the wire: length octets and the final zero included (RFC 1035 §2.3.4).
pub const NAME_WIRE_MAX: usize = 255;

/// Record types this module reads the data of.
pub mod rtype {
    /// IPv4 address.
    pub const A: u16 = 1;
    /// Canonical name.
    pub const CNAME: u16 = 5;
    /// IPv6 address.
    pub const AAAA: u16 = 28;
}

const HDR: &str = "DNS";

fn malformed(what: &'static str) -> Error {
    Error::Malformed { header: HDR, what }
}

/// A view of a DNS message.
#[derive(Debug, Clone)]
pub struct Message<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Message { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let m = Self::new_unchecked(buffer);
        m.check_len()?;
        Ok(m)
    }

    /// Checks that the 12-byte header is present (the sections are checked as they are read).
    pub fn check_len(&self) -> Result<()> {
        need(HDR, DNS_HDR, self.buffer.as_ref().len())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message ID.
    pub fn id(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// The 16 flag bits (QR, opcode, AA, TC, RD, RA, Z, AD, CD, RCODE).
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// True for a response (QR set).
    pub fn is_response(&self) -> bool {
        self.flags() & 0x8000 != 0
    }

    /// Operation code (0 = query).
    pub fn opcode(&self) -> u8 {
        ((self.flags() >> 11) & 0xf) as u8
    }

    /// True when the message was truncated (TC set).
    pub fn truncated(&self) -> bool {
        self.flags() & 0x0200 != 0
    }

    /// Response code (0 = no error, 3 = NXDOMAIN).
    pub fn rcode(&self) -> u8 {
        (self.flags() & 0xf) as u8
    }

    /// Number of questions.
    pub fn question_count(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// Number of answer records.
    pub fn answer_count(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// Number of authority records.
    pub fn authority_count(&self) -> u16 {
        be16(self.buffer.as_ref(), 8)
    }

    /// Number of additional records.
    pub fn additional_count(&self) -> u16 {
        be16(self.buffer.as_ref(), 10)
    }

    /// The questions, in order.
    pub fn questions(&self) -> Questions<'_> {
        Questions {
            msg: self.buffer.as_ref(),
            at: DNS_HDR,
            left: self.question_count(),
        }
    }

    /// The answer records, in order (the questions are skipped first; an error doing so is the first item).
    pub fn answers(&self) -> Answers<'_> {
        let msg = self.buffer.as_ref();
        let mut at = DNS_HDR;
        let mut err = None;
        for _ in 0..self.question_count() {
            match skip_name(msg, at).and_then(|end| {
                need(HDR, end + 4, msg.len())?;
                Ok(end + 4)
            }) {
                Ok(end) => at = end,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        Answers {
            msg,
            at,
            left: if err.is_some() {
                1
            } else {
                self.answer_count()
            },
            err,
        }
    }
}

/// One question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The name asked for.
    pub name: Name,
    /// Query type (see [`rtype`]).
    pub qtype: u16,
    /// Query class (1 = IN; mDNS's unicast-response bit included).
    pub qclass: u16,
}

/// Iterator over the questions of a [`Message`]; ends after the first error.
#[derive(Debug, Clone)]
pub struct Questions<'a> {
    msg: &'a [u8],
    at: usize,
    left: u16,
}

impl Iterator for Questions<'_> {
    type Item = Result<Question>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut name = Name::new();
        let r = read_name(self.msg, self.at, &mut name).and_then(|end| {
            need(HDR, end + 4, self.msg.len())?;
            Ok(end)
        });
        match r {
            Ok(end) => {
                self.at = end + 4;
                Some(Ok(Question {
                    name,
                    qtype: be16(self.msg, end),
                    qclass: be16(self.msg, end + 2),
                }))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

/// The data of a record, for the types names are found by.
// The CNAME's Name stays inline (258 bytes) so that reading a record never allocates.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rdata {
    /// An A record's address.
    A(Ipv4Addr),
    /// An AAAA record's address.
    Aaaa(Ipv6Addr),
    /// A CNAME record's target (decompressed).
    Cname(Name),
    /// Any other type: see [`Answer::rdata`].
    Other,
}

/// One resource record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<'a> {
    /// The owner name.
    pub name: Name,
    /// Record type (see [`rtype`]).
    pub rtype: u16,
    /// Class (1 = IN; mDNS's cache-flush bit included).
    pub class: u16,
    /// Time to live in seconds.
    pub ttl: u32,
    /// The raw record data, as on the wire (names inside may be compressed).
    pub rdata: &'a [u8],
    /// The data read for A, AAAA and CNAME.
    pub data: Rdata,
}

/// Iterator over the answer records of a [`Message`]; ends after the first error.
#[derive(Debug, Clone)]
pub struct Answers<'a> {
    msg: &'a [u8],
    at: usize,
    left: u16,
    err: Option<Error>,
}

impl<'a> Iterator for Answers<'a> {
    type Item = Result<Answer<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if let Some(e) = self.err.take() {
            return Some(Err(e));
        }
        match read_record(self.msg, self.at) {
            Ok((answer, end)) => {
                self.at = end;
                Some(Ok(answer))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

/// Reads the record at `at`; returns it and the offset after it.
fn read_record(msg: &[u8], at: usize) -> Result<(Answer<'_>, usize)> {
    let mut name = Name::new();
    let end = read_name(msg, at, &mut name)?;
    need(HDR, end + 10, msg.len())?;
    let rtype = be16(msg, end);
    let class = be16(msg, end + 2);
    let ttl = be32(msg, end + 4);
    let rdlen = be16(msg, end + 8) as usize;
    let start = end + 10;
    need(HDR, start + rdlen, msg.len())?;
    let rdata = &msg[start..start + rdlen];
    let data = match rtype {
        rtype::A if rdlen == 4 => Rdata::A(Ipv4Addr::from(array::<4>(rdata, 0))),
        rtype::AAAA if rdlen == 16 => Rdata::Aaaa(Ipv6Addr::from(array::<16>(rdata, 0))),
        rtype::A | rtype::AAAA => return Err(malformed("address record of the wrong length")),
        rtype::CNAME => {
            let mut target = Name::new();
            // The name is read from the whole message (pointers reach outside the data) but must end in it.
            let name_end = read_name(&msg[..start + rdlen], start, &mut target)?;
            if name_end != start + rdlen {
                return Err(malformed("CNAME data longer than its name"));
            }
            Rdata::Cname(target)
        }
        _ => Rdata::Other,
    };
    let answer = Answer {
        name,
        rtype,
        class,
        ttl,
        rdata,
        data,
    };
    Ok((answer, start + rdlen))
}

/// Decompresses the name at `at` into `out` (labels joined by `.`, the root as the empty name); returns the
/// offset after the name where it starts (after its first pointer, if any).
///
/// Every pointer must point before the start of the run of labels that contains it, so the positions
/// read strictly decrease from jump to jump and no loop is possible; at most [`MAX_POINTERS`] are
/// followed, and the name may not exceed [`NAME_WIRE_MAX`] bytes on the wire. Label types 01 and 10
/// (RFC 6891's extended labels, never deployed) are `Malformed`.
pub fn read_name(msg: &[u8], at: usize, out: &mut Name) -> Result<usize> {
    out.clear();
    let mut pos = at;
    let mut run_start = at;
    let mut end = None;
    let mut jumps = 0;
    let mut wire_len = 0usize;
    loop {
        need(HDR, pos + 1, msg.len())?;
        let len = msg[pos];
        match len & 0xc0 {
            0x00 => {
                wire_len += len as usize + 1;
                if wire_len > NAME_WIRE_MAX {
                    return Err(malformed("name longer than 255 bytes"));
                }
                if len == 0 {
                    return Ok(end.unwrap_or(pos + 1));
                }
                let label = pos + 1..pos + 1 + len as usize;
                need(HDR, label.end, msg.len())?;
                if !out.is_empty() {
                    out.push(b".");
                }
                out.push(&msg[label.clone()]);
                pos = label.end;
            }
            0xc0 => {
                need(HDR, pos + 2, msg.len())?;
                let target = (be16(msg, pos) & 0x3fff) as usize;
                if target >= run_start {
                    return Err(malformed(
                        "compression pointer does not point backwards (loop)",
                    ));
                }
                jumps += 1;
                if jumps > MAX_POINTERS {
                    return Err(malformed("too many compression pointers"));
                }
                end.get_or_insert(pos + 2);
                pos = target;
                run_start = target;
            }
            _ => return Err(malformed("unknown label type")),
        }
    }
}

/// Returns the offset after the name at `at` without decompressing it (a pointer ends it).
fn skip_name(msg: &[u8], at: usize) -> Result<usize> {
    let mut pos = at;
    loop {
        need(HDR, pos + 1, msg.len())?;
        let len = msg[pos];
        match len & 0xc0 {
            0x00 if len == 0 => return Ok(pos + 1),
            0x00 => {
                pos += 1 + len as usize;
                if pos - at >= NAME_WIRE_MAX {
                    return Err(malformed("name longer than 255 bytes"));
                }
            }
            0xc0 => {
                need(HDR, pos + 2, msg.len())?;
                return Ok(pos + 2);
            }
            _ => return Err(malformed("unknown label type")),
        }
    }
}

/// The message in a DNS-over-TCP payload that starts with its 2-byte length (RFC 1035 §4.2.2); `Truncated`
/// when the message continues in a later segment.
pub fn strip_tcp_length(payload: &[u8]) -> Result<&[u8]> {
    need("DNS over TCP", 2, payload.len())?;
    let len = be16(payload, 0) as usize;
    need("DNS over TCP", 2 + len, payload.len())?;
    Ok(&payload[2..2 + len])
}

#[cfg(test)]
#[path = "dns_tests.rs"]
mod tests;
