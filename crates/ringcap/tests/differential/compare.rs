//! One case of the matrix against tcpdump's answer: tcpdump run as the reference, ringcap's
//! output read back, and the records compared field by field.

use super::*;

/// tcpdump's answer for one expression at one precision.
pub(super) struct Reference {
    pub(super) out: Out,
    /// None when tcpdump wrote no file (it refused the expression or the input).
    pub(super) pcap: Option<Pcap>,
    pub(super) cmd: String,
    pub(super) path: PathBuf,
}

pub(super) fn tcpdump(input: &Input, expr: &str, prec: Prec, path: &Path) -> Reference {
    let _ = std::fs::remove_file(path);
    let nano = if prec == Prec::Nano {
        "--time-stamp-precision=nano "
    } else {
        ""
    };
    let cmd = format!(
        "tcpdump {nano}-r {} -w {} {}",
        input.reference.display(),
        path.display(),
        q(expr)
    );
    let out = sh(&format!("timeout -k 5 120 {cmd}"));
    let pcap = std::fs::read(path).ok().and_then(|b| read_pcap(&b).ok());
    Reference {
        out,
        pcap,
        cmd,
        path: path.to_path_buf(),
    }
}

/// A window bound: ns since the epoch, and the zone offset (minutes) its RFC 3339 text is written in.
pub(super) type Bound = Option<(u64, i32)>;

/// Per class of failure: the count per mode, and the first failure's number.
pub(super) type ClassCount = (BTreeMap<&'static str, usize>, usize);

/// One ringcap query of the matrix.
pub(super) struct Case<'a> {
    pub(super) input: usize,
    pub(super) expr: &'a str,
    pub(super) indexed: bool,
    pub(super) refp: Prec,
    pub(super) outp: Prec,
    /// --after / --before.
    pub(super) after: Bound,
    pub(super) before: Bound,
    /// Time terms written into the expression instead of flags.
    pub(super) terms: bool,
}

impl Case<'_> {
    pub(super) fn label(&self) -> String {
        let mut s = format!(
            "{} {}",
            if self.indexed {
                "indexed"
            } else {
                "--no-index"
            },
            if self.outp == Prec::Micro {
                "-F pcap"
            } else {
                "pcap-ns"
            }
        );
        if self.after.is_some() || self.before.is_some() {
            s.push_str(if self.terms {
                ", window in the expression"
            } else {
                ", window flags"
            });
        }
        s
    }

    /// The ringcap command line (the expression with time terms when asked).
    pub(super) fn command(&self, store: &Path, out: &Path) -> String {
        let mut expr = self.expr.to_string();
        let mut flags = String::new();
        if self.terms {
            if let Some((t, z)) = self.after {
                expr = format!("{expr} and after {}", rfc3339(t, z));
            }
            if let Some((t, z)) = self.before {
                expr = format!("{expr} and before {}", rfc3339(t, z));
            }
        } else {
            if let Some((t, z)) = self.after {
                flags.push_str(&format!(" --after {}", rfc3339(t, z)));
            }
            if let Some((t, z)) = self.before {
                flags.push_str(&format!(" --before {}", rfc3339(t, z)));
            }
        }
        format!(
            "{} query {} {} -w {} -q{}{}{}",
            ringcap(),
            store.display(),
            q(&expr),
            out.display(),
            if self.indexed { "" } else { " --no-index" },
            if self.outp == Prec::Micro {
                " -F pcap"
            } else {
                ""
            },
            flags
        )
    }
}

/// A failed comparison: what differed (short kinds, for the summary) and the report text.
pub(super) struct Failure {
    pub(super) input: usize,
    /// "indexed", "--no-index" or "index" (`ringcap index` itself).
    pub(super) mode: &'static str,
    pub(super) kinds: Vec<String>,
    pub(super) detail: String,
}

pub(super) fn rec_text(r: &Rec) -> String {
    let hex: String = r.data.iter().take(40).map(|b| format!("{b:02x}")).collect();
    format!(
        "sec {} frac {} caplen {} len {} data {}{}",
        r.sec,
        r.frac,
        r.caplen,
        r.len,
        hex,
        if r.data.len() > 40 { "…" } else { "" }
    )
}

/// Whether a reference record's timestamp fields equal ringcap's, as the fields mean: the same
/// precision field for field; a µs reference against ns output as usec = nsec / 1000.
pub(super) fn same_time(r: &Rec, g: &Rec, refp: Prec, outp: Prec) -> bool {
    r.sec == g.sec
        && match (refp, outp) {
            (Prec::Micro, Prec::Nano) => r.frac == g.frac / 1000,
            (Prec::Nano, Prec::Micro) => r.frac / 1000 == g.frac,
            _ => r.frac == g.frac,
        }
}

/// Compares ringcap's result with tcpdump's; returns the kinds of difference and a description.
pub(super) fn compare(
    reference: &Reference,
    got: &Out,
    got_path: &Path,
    case: &Case,
) -> Option<(Vec<String>, String)> {
    let mut kinds = Vec::new();
    let mut text = String::new();
    if got.code.is_none() || got.code == Some(124) || got.code == Some(101) {
        kinds.push("ringcap crashed or timed out".to_string());
    }
    if reference.out.ok() != got.ok() {
        kinds.push(format!(
            "exit status (tcpdump {}, ringcap {})",
            if reference.out.ok() { "0" } else { "non-zero" },
            if got.ok() { "0" } else { "non-zero" }
        ));
    }
    let Some(want) = &reference.pcap else {
        // tcpdump refused before writing: only the status is compared.
        return (!kinds.is_empty()).then_some((kinds, text));
    };
    let bytes = std::fs::read(got_path).unwrap_or_default();
    let have = match read_pcap(&bytes) {
        Ok(p) => p,
        Err(e) => {
            kinds.push("ringcap wrote no readable pcap".into());
            text.push_str(&format!("  ringcap's output: {e}\n"));
            return Some((kinds, text));
        }
    };
    if have.header.linktype != want.header.linktype {
        kinds.push(format!(
            "header link type ({} vs {})",
            want.header.linktype, have.header.linktype
        ));
    }
    if have.header.snaplen != want.header.snaplen {
        kinds.push("header snaplen".into());
    }
    if have.header.linktype != want.header.linktype || have.header.snaplen != want.header.snaplen {
        text.push_str(&format!(
            "  header: tcpdump link type {} snaplen {}; ringcap link type {} snaplen {}\n",
            want.header.linktype, want.header.snaplen, have.header.linktype, have.header.snaplen
        ));
    }
    // ringcap's precision is what its output says: by default µs when the input's times are µs
    // (as tcpdump -w writes), ns when they are finer.
    let outp = if have.header.nano {
        Prec::Nano
    } else {
        Prec::Micro
    };
    let nano = case.refp == Prec::Nano;
    let expect: Vec<&Rec> = want
        .recs
        .iter()
        .filter(|r| {
            let t = r.ns(nano);
            case.after.is_none_or(|(a, _)| t >= a) && case.before.is_none_or(|(b, _)| t < b)
        })
        .collect();
    let first = expect
        .iter()
        .zip(&have.recs)
        .position(|(w, g)| !same_time(w, g, case.refp, outp) || w.len != g.len || w.data != g.data);
    if expect.len() != have.recs.len() {
        kinds.push(format!(
            "{} packets",
            if have.recs.len() < expect.len() {
                "missing"
            } else {
                "extra"
            }
        ));
    } else if let Some(i) = first {
        let (w, g) = (expect[i], &have.recs[i]);
        if w.data != g.data {
            kinds.push("packet bytes".into());
        } else if !same_time(w, g, case.refp, outp) {
            kinds.push("timestamp fields".into());
        } else {
            kinds.push("caplen/len".into());
        }
    }
    if expect.len() != have.recs.len() || first.is_some() {
        let i = first.unwrap_or(expect.len().min(have.recs.len()));
        text.push_str(&format!(
            "  records: tcpdump {}, ringcap {}; first difference at record {i}:\n    tcpdump: {}\n    ringcap: {}\n",
            expect.len(),
            have.recs.len(),
            expect.get(i).map_or("(none)".into(), |r| rec_text(r)),
            have.recs.get(i).map_or("(none)".into(), rec_text),
        ));
    }
    if have.trailing != 0 {
        kinds.push("ringcap's output ends inside a record".into());
    }
    (!kinds.is_empty()).then_some((kinds, text))
}
