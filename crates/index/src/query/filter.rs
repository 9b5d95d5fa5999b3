//! The query's filter, compiled for each link its files have, as `tcpdump -r FILE EXPR` compiles
//! it for FILE: on a savefile of that link type, snaplen and byte order (`bpf::compile_for_file`),
//! so every link type libpcap knows can be filtered, BSD loopback's IPv6 families all match, and
//! what libpcap refuses for a link type ("no VLAN support for Raw IP", "expression rejects all
//! packets") is refused with its words.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use libc::sock_filter;
use store::FileLink;

/// A compiled program, shared by the workers reading files of its link.
type Program = Arc<Vec<sock_filter>>;

/// One program per (link type, byte order); the snaplen only sets what an accepting program
/// returns, which a query does not use.
pub(crate) struct Filters {
    expr: String,
    programs: Mutex<HashMap<(u32, bool), Program>>,
}

impl Filters {
    pub(crate) fn new(expr: &str) -> Filters {
        Filters {
            expr: expr.to_string(),
            programs: Mutex::default(),
        }
    }

    /// The program for packets of this link (None: the expression is empty, every packet
    /// matches); Err with libpcap's message when it refuses the expression for this link.
    pub(crate) fn for_link(&self, link: FileLink) -> Result<Option<Program>, String> {
        if self.expr.is_empty() {
            return Ok(None);
        }
        let key = (link.linktype, link.swapped);
        let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = programs.get(&key) {
            return Ok(Some(p.clone()));
        }
        let savefile = bpf::SavefileLink {
            linktype: link.linktype,
            snaplen: link.snaplen,
            swapped: link.swapped,
        };
        let program = Arc::new(bpf::compile_for_file(&self.expr, savefile).map_err(|e| {
            let why = match e {
                bpf::FilterError::Syntax { message, .. } => message,
                other => other.to_string(),
            };
            format!(
                "bad filter expression for link type {}: {why} (tcpdump -r refuses it the same way)",
                link.linktype & 0x03ff_ffff
            )
        })?);
        programs.insert(key, program.clone());
        Ok(Some(program))
    }
}
