//! The query's filter, compiled for each link its files have, as `tcpdump -r FILE EXPR` compiles
//! it for FILE: on a savefile of that link type, snaplen and byte order (`bpf::compile_for_file`),
//! so every link type libpcap knows can be filtered, BSD loopback's IPv6 families all match, and
//! what libpcap refuses for a link type ("no VLAN support for Raw IP", "expression rejects all
//! packets") is refused with its words.
//!
//! A query with ringcap's own `vxlan`/`gre`/`erspan` term ([`crate::tunnel_term`]) is a
//! [`Matcher::Tunnel`]: libpcap compiles the part before the term for the file's link and the part
//! after it for the carried packet's link (Ethernet or raw IP); [`wire::decapsulate`] finds the
//! tunnel between them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bpf::{FilterError, SavefileLink};
use libc::sock_filter;
use store::FileLink;
use wire::{LinkType, Payload};

use crate::{Query, TunnelTerm, TunnelWord};

/// How the packets of one link are tested.
#[derive(Debug)]
pub enum Matcher {
    /// A libpcap program on the frame.
    Program(Vec<sock_filter>),
    /// A tunnel term with libpcap programs around it.
    Tunnel(TunnelMatcher),
}

/// A [`Matcher::Tunnel`]'s parts.
#[derive(Debug)]
pub struct TunnelMatcher {
    term: TunnelTerm,
    /// The file's link as `wire` reads it; `None`: a link it cannot decode, where no tunnel is
    /// found.
    link: Option<LinkType>,
    /// On the frame; `None`: every frame.
    outer: Option<Vec<sock_filter>>,
    /// On a carried Ethernet frame / IP packet; `None`: every one.
    ethernet: Option<Vec<sock_filter>>,
    ip: Option<Vec<sock_filter>>,
}

impl Matcher {
    /// Whether the packet (`frame` as captured, `wire_len` its length on the wire) matches.
    pub fn accepts(&self, frame: &[u8], wire_len: u32) -> bool {
        match self {
            Matcher::Program(insns) => bpf::run_filter(insns, frame, wire_len) != 0,
            Matcher::Tunnel(t) => t.accepts(frame, wire_len),
        }
    }
}

impl TunnelMatcher {
    fn accepts(&self, frame: &[u8], wire_len: u32) -> bool {
        let run = |p: &Option<Vec<sock_filter>>, data: &[u8], len: u32| {
            p.as_ref()
                .is_none_or(|p| bpf::run_filter(p, data, len) != 0)
        };
        if !run(&self.outer, frame, wire_len) {
            return false;
        }
        let Some(link) = self.link else {
            return false;
        };
        if self.term.word == TunnelWord::Vxlan {
            // Most packets of a mirror store, in a few loads (`vxlan_fast` says why); another
            // VNI may still have the asked one inside it: `decapsulate` decides.
            if let Some((vni, off)) = wire::tunnel::vxlan_fast(frame, link) {
                if self.term.id.is_none_or(|id| id == vni) {
                    let len = wire_len.saturating_sub(off);
                    return run(&self.ethernet, &frame[off as usize..], len);
                }
            }
        }
        let d = wire::decapsulate(frame, link);
        let layers = d.layers();
        let Some(at) = layers.iter().position(|l| self.term.names(l.kind, l.id)) else {
            return false;
        };
        if self.ethernet.is_none() && self.ip.is_none() {
            return true;
        }
        // Behind an MPLS stack (GRE 0x8847), INNER reads what the stack carries.
        let layer = match layers[at].payload {
            Payload::Mpls => match layers.get(at + 1) {
                Some(next) => next,
                None => return false,
            },
            _ => &layers[at],
        };
        let off = layer.inner_offset as usize;
        let Some(carried) = frame.get(off..) else {
            return false;
        };
        let len = wire_len.saturating_sub(off as u32);
        match layer.payload {
            Payload::Ethernet => run(&self.ethernet, carried, len),
            Payload::Ip => run(&self.ip, carried, len),
            Payload::Mpls => false,
        }
    }
}

/// Compiles `q`'s filter for the packets of a file of `link` (`None`: the filter is empty,
/// every packet matches). libpcap's error when it refuses the expression (or, for a tunnel
/// term, the part after it for every link the tunnel may carry).
pub fn compile_query(q: &Query, link: SavefileLink) -> Result<Option<Matcher>, FilterError> {
    let Some(term) = &q.tunnel else {
        if q.filter.is_empty() {
            return Ok(None);
        }
        return bpf::compile_for_file(&q.filter, link).map(|p| Some(Matcher::Program(p)));
    };
    let part = |text: &str, link: SavefileLink| {
        (!text.is_empty())
            .then(|| bpf::compile_for_file(text, link))
            .transpose()
    };
    let carried = |linktype| SavefileLink {
        linktype,
        snaplen: bpf::MAX_SNAPLEN,
        swapped: false,
    };
    let outer = part(&term.outer, link)?;
    // libpcap's words for the part after the term, saying where it was read.
    let inside = |e: FilterError| match e {
        FilterError::Syntax { expr, message } => FilterError::Syntax {
            expr,
            message: format!(
                "{message} (in the part after `{}`, read on the packet inside the tunnel)",
                term.word.name()
            ),
        },
        other => other,
    };
    let ethernet = part(&term.inner, carried(1)).map_err(inside);
    // VXLAN and ERSPAN carry Ethernet only; GRE also IP (and IP behind MPLS): a part that
    // libpcap refuses for one of the two matches none of those packets, for both it is an error.
    let (ethernet, ip) = match term.word {
        TunnelWord::Vxlan | TunnelWord::Erspan => (ethernet?, None),
        TunnelWord::Gre => match (ethernet, part(&term.inner, carried(101))) {
            (Err(e), Err(_)) => return Err(e),
            (Ok(e), Ok(i)) => (e, i),
            (Ok(e), Err(_)) => (e, Some(bpf::drop_all())),
            (Err(_), Ok(i)) => (Some(bpf::drop_all()), i),
        },
    };
    Ok(Some(Matcher::Tunnel(TunnelMatcher {
        term: term.clone(),
        link: LinkType::from_pcap(link.linktype & 0x03ff_ffff),
        outer,
        ethernet,
        ip,
    })))
}

/// One matcher per (link type, byte order); the snaplen only sets what an accepting program
/// returns, which a query does not use.
pub(crate) struct Filters {
    query: Query,
    programs: Mutex<HashMap<(u32, bool), Arc<Matcher>>>,
}

impl Filters {
    pub(crate) fn new(query: &Query) -> Filters {
        Filters {
            query: query.clone(),
            programs: Mutex::default(),
        }
    }

    /// The matcher for packets of this link (None: the expression is empty, every packet
    /// matches); Err with libpcap's message when it refuses the expression for this link.
    pub(crate) fn for_link(&self, link: FileLink) -> Result<Option<Arc<Matcher>>, String> {
        if self.query.filter.is_empty() {
            return Ok(None);
        }
        let key = (link.linktype, link.swapped);
        let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = programs.get(&key) {
            return Ok(Some(p.clone()));
        }
        let savefile = SavefileLink {
            linktype: link.linktype,
            snaplen: link.snaplen,
            swapped: link.swapped,
        };
        let matcher = compile_query(&self.query, savefile).map_err(|e| {
            let why = match e {
                FilterError::Syntax { message, .. } => message,
                other => other.to_string(),
            };
            format!(
                "bad filter expression for link type {}: {why} (tcpdump -r refuses it the same way)",
                link.linktype & 0x03ff_ffff
            )
        })?;
        let Some(matcher) = matcher else {
            return Ok(None);
        };
        let matcher = Arc::new(matcher);
        programs.insert(key, matcher.clone());
        Ok(Some(matcher))
    }
}
