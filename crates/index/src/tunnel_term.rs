//! ringcap's own tunnel terms, for the tunnels this libpcap (1.10) has no keyword for:
//! `vxlan [VNI]`, `gre [KEY]` and `erspan [SESSION]`, shaped like libpcap's `geneve [VNI]`.
//!
//! Meaning (docs/query.md): in `OUTER and vxlan 42 and INNER`
//! - OUTER (optional) is a libpcap expression on the frame as captured;
//! - `vxlan 42` holds when the frame carries a VXLAN tunnel with VNI 42 at any depth
//!   ([`wire::decapsulate`]: UDP destination port 4789, as Wireshark decodes it); without an id,
//!   any VXLAN tunnel; the outermost such tunnel is the one INNER reads;
//! - INNER (optional) is a libpcap expression on the packet that tunnel carries, compiled for
//!   Ethernet or raw IP as that packet is (behind an MPLS stack: on what the stack carries).
//!
//! `gre [KEY]` is GRE carrying IP, Ethernet (gretap) or MPLS, with that key; ERSPAN, which rides
//! in GRE too, is `erspan [SESSION]` (types I, II and III; type I has no session id). The term
//! must be a top-level operand of a chain of `and`s, once per query: anything else is refused
//! with an example, since libpcap would only say "syntax error".

use bpf::expr::{Kind, Node, Op};
use wire::TunnelKind;

/// One of ringcap's tunnel words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelWord {
    Vxlan,
    Gre,
    Erspan,
}

impl TunnelWord {
    fn from_word(w: &str) -> Option<TunnelWord> {
        Some(match w {
            "vxlan" => TunnelWord::Vxlan,
            "gre" => TunnelWord::Gre,
            "erspan" => TunnelWord::Erspan,
            _ => return None,
        })
    }

    /// The word as written in a query.
    pub const fn name(self) -> &'static str {
        match self {
            TunnelWord::Vxlan => "vxlan",
            TunnelWord::Gre => "gre",
            TunnelWord::Erspan => "erspan",
        }
    }

    /// The largest id: a 24-bit VNI, a 32-bit key, a 10-bit ERSPAN session.
    const fn max_id(self) -> u32 {
        match self {
            TunnelWord::Vxlan => (1 << 24) - 1,
            TunnelWord::Gre => u32::MAX,
            TunnelWord::Erspan => (1 << 10) - 1,
        }
    }

    /// What the id is called, for messages.
    const fn id_name(self) -> &'static str {
        match self {
            TunnelWord::Vxlan => "VNI",
            TunnelWord::Gre => "key",
            TunnelWord::Erspan => "session id",
        }
    }

    /// The decapsulated tunnel kinds this word names.
    pub const fn kinds(self) -> &'static [TunnelKind] {
        match self {
            TunnelWord::Vxlan => &[TunnelKind::Vxlan],
            TunnelWord::Gre => &[TunnelKind::Gre],
            TunnelWord::Erspan => &[
                TunnelKind::Erspan1,
                TunnelKind::Erspan2,
                TunnelKind::Erspan3,
            ],
        }
    }
}

/// A query `OUTER and WORD [ID] and INNER` (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelTerm {
    pub word: TunnelWord,
    pub id: Option<u32>,
    /// libpcap's part on the captured frame; empty: every frame.
    pub outer: String,
    /// libpcap's part on the carried packet; empty: every packet the tunnel carries.
    pub inner: String,
}

impl TunnelTerm {
    /// Whether a tunnel of `kind` and `id` is the one this term names.
    pub fn names(&self, kind: TunnelKind, id: Option<u32>) -> bool {
        self.word.kinds().contains(&kind) && (self.id.is_none() || self.id == id)
    }
}

fn example(word: TunnelWord) -> String {
    let w = word.name();
    format!("e.g. 'udp and {w} 42 and host 10.0.0.1': terms after `{w}` read the packet inside the tunnel")
}

/// The tunnel word and id of an operand that is exactly `WORD [ID]`; Err for a bad id.
fn term_of(text: &str) -> Result<Option<(TunnelWord, Option<u32>)>, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (Some(word), 1..=2) = (
        words.first().and_then(|w| TunnelWord::from_word(w)),
        words.len(),
    ) else {
        return Ok(None);
    };
    let Some(id) = words.get(1) else {
        return Ok(Some((word, None)));
    };
    let parsed = if let Some(hex) = id.strip_prefix("0x") {
        u32::from_str_radix(hex, 16).ok()
    } else {
        id.parse::<u32>().ok()
    };
    match parsed.filter(|&n| n <= word.max_id()) {
        Some(n) => Ok(Some((word, Some(n)))),
        None => Err(format!(
            "`{} {id}`: the {} is a number from 0 to {}",
            word.name(),
            word.id_name(),
            word.max_id()
        )),
    }
}

/// A tunnel word somewhere in `n` other than as a top-level operand (inside parentheses or
/// after `not`).
fn nested_word(text: &str, n: &Node) -> Option<TunnelWord> {
    match &n.kind {
        Kind::Group(e) => e.operands().find_map(|(_, x)| {
            term_of(x.span.of(text))
                .ok()
                .flatten()
                .map(|(w, _)| w)
                .or_else(|| nested_word(text, x))
        }),
        Kind::Not(x) => term_of(x.span.of(text))
            .ok()
            .flatten()
            .map(|(w, _)| w)
            .or_else(|| nested_word(text, x)),
        Kind::Prim(_) | Kind::Time(_) | Kind::Opaque => None,
    }
}

/// Finds the tunnel term among the top-level operands `ops` of `text` (time terms already
/// taken out): `Ok(None)` without one; with one, the term and its operand's position.
pub(crate) fn find(
    text: &str,
    ops: &[(Option<Op>, &Node)],
) -> Result<Option<(TunnelTerm, usize)>, String> {
    let mut found = None;
    for (i, (_, n)) in ops.iter().enumerate() {
        if let Some(w) = nested_word(text, n) {
            return Err(format!(
                "`{}` may not stand inside parentheses or after `not`; join it to the rest with `and`, {}",
                w.name(),
                example(w)
            ));
        }
        let Some((word, id)) = term_of(n.span.of(text))? else {
            continue;
        };
        if let Some((w, _, _)) = found {
            let w: TunnelWord = w;
            return Err(format!(
                "one tunnel term per query (`{}` and `{}` here); {}",
                w.name(),
                word.name(),
                example(word)
            ));
        }
        found = Some((word, id, i));
    }
    let Some((word, id, k)) = found else {
        return Ok(None);
    };
    if ops.iter().any(|(op, _)| *op == Some(Op::Or)) {
        return Err(format!(
            "`{}` may only be joined to the rest with `and` (put an `or` inside parentheses); {}",
            word.name(),
            example(word)
        ));
    }
    let join = |part: &[(Option<Op>, &Node)]| match (part.first(), part.last()) {
        (Some(a), Some(b)) => text[a.1.span.start..b.1.span.end].trim().to_string(),
        _ => String::new(),
    };
    for (part, side) in [(&ops[..k], "before"), (&ops[k + 1..], "after")] {
        if part.iter().any(|(_, n)| n.span.start == n.span.end) {
            return Err(format!(
                "an `and` {side} `{}` needs an expression; {}",
                word.name(),
                example(word)
            ));
        }
    }
    Ok(Some((
        TunnelTerm {
            word,
            id,
            outer: join(&ops[..k]),
            inner: join(&ops[k + 1..]),
        },
        k,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Result<Option<TunnelTerm>, String> {
        let tree = bpf::expr::parse(text)?;
        let ops: Vec<_> = tree.operands().collect();
        find(text, &ops).map(|f| f.map(|(t, _)| t))
    }

    #[test]
    fn splits_outer_term_and_inner() {
        let got = t("udp and vxlan 42 and host 10.0.0.1 and tcp port 80")
            .unwrap()
            .unwrap();
        assert_eq!(
            got,
            TunnelTerm {
                word: TunnelWord::Vxlan,
                id: Some(42),
                outer: "udp".into(),
                inner: "host 10.0.0.1 and tcp port 80".into(),
            }
        );
        let got = t("gre").unwrap().unwrap();
        assert_eq!(
            (got.word, got.id, got.outer.as_str(), got.inner.as_str()),
            (TunnelWord::Gre, None, "", "")
        );
        let got = t("erspan 0x10 and (port 1 or port 2)").unwrap().unwrap();
        assert_eq!(
            (got.id, got.inner.as_str()),
            (Some(16), "(port 1 or port 2)")
        );
        assert_eq!(t("ip proto gre and host 10.0.0.1").unwrap(), None);
        assert_eq!(t("geneve 7 and host 10.0.0.1").unwrap(), None);
    }

    #[test]
    fn refuses_what_it_cannot_mean_with_an_example() {
        for (e, says) in [
            ("vxlan 16777216", "0 to 16777215"),
            ("erspan 1024", "0 to 1023"),
            ("vxlan x", "VNI is a number"),
            ("host 10.0.0.1 or vxlan", "only be joined"),
            ("not vxlan", "parentheses or after `not`"),
            ("(vxlan 4 and host 10.0.0.1)", "parentheses"),
            ("vxlan and gre", "one tunnel term"),
            ("vxlan and", "needs an expression"),
        ] {
            let err = t(e).unwrap_err();
            assert!(err.contains(says), "{e}: {err}");
        }
        assert!(t("vxlan 1 or tcp")
            .unwrap_err()
            .contains("e.g. 'udp and vxlan 42"));
    }

    #[test]
    fn names_its_kinds_and_id() {
        let term = t("erspan 5").unwrap().unwrap();
        assert!(term.names(TunnelKind::Erspan3, Some(5)));
        assert!(!term.names(TunnelKind::Erspan2, Some(6)));
        assert!(!term.names(TunnelKind::Gre, Some(5)));
        let any = t("erspan").unwrap().unwrap();
        assert!(any.names(TunnelKind::Erspan1, None));
    }
}
