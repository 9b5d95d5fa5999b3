//! Filter expressions come from users, scripts and config files: the one front end (bpf::expr) parses
//! any text into a tree or a time-term error, never a panic nor a stack overflow, and both lowerings of
//! the tree hold their promises: the query's libpcap text is the input's own text with time terms cut
//! off, and an XDP prefilter exists only for a tree without Opaque, `not` or time terms, and fits its map.
#![no_main]
use bpf::expr::{Expr, Kind, Node, Span};
use libfuzzer_sys::fuzz_target;

const NOW: u64 = 1_800_000_000_000_000_000;

/// Checks that spans nest and follow each other; says whether the prefilter may use every node.
fn walk(text: &str, n: &Node, within: Span) -> bool {
    let s = n.span;
    assert!(
        within.start <= s.start && s.start <= s.end && s.end <= within.end,
        "{s:?} outside {within:?}"
    );
    let _ = s.of(text); // on char boundaries
    match &n.kind {
        Kind::Group(e) => expr(text, e, s),
        Kind::Not(x) => {
            walk(text, x, s);
            false
        }
        Kind::Prim(_) => true,
        Kind::Time(t) => {
            assert!(
                s.start < t.value.start && t.value.end == s.end,
                "{t:?} in {s:?}"
            );
            false
        }
        Kind::Opaque => false,
    }
}

fn expr(text: &str, e: &Expr, within: Span) -> bool {
    let mut at = within.start;
    let mut lowerable = true;
    for (_, n) in e.operands() {
        assert!(n.span.start >= at, "operands out of order");
        lowerable &= walk(text, n, within);
        at = n.span.end;
    }
    lowerable
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = index::parse_time(s, NOW);
    let whole = Span {
        start: 0,
        end: s.len(),
    };
    let tree = bpf::expr::parse(s);
    let lowerable = tree.as_ref().is_ok_and(|t| expr(s, t, whole));
    match index::parse_query(s, NOW) {
        Ok(q) => {
            assert!(
                s.contains(q.filter.as_str()),
                "{:?} is not a slice of {s:?}",
                q.filter
            );
            let times = q.after_ns.is_some() || q.before_ns.is_some();
            assert!(
                times || q.filter == s.trim(),
                "{:?} lost text of {s:?}",
                q.filter
            );
        }
        Err(_) => {}
    }
    let Ok(tree) = tree else {
        assert!(xdp::Prefilter::recognise(s).is_none());
        return;
    };
    if let Some(p) = xdp::Prefilter::lower(&tree) {
        assert!(
            lowerable,
            "{s:?} gave a prefilter from a tree it cannot hold"
        );
        let _ = p.to_string();
        assert!(
            p.map_value().is_ok(),
            "{s:?} gave a prefilter its map cannot hold"
        );
    }
});
