//! Burst phases: each on-period of a burst schedule with its own traffic, cycling through a list (seed 002
//! §5.2: on-periods of 1514-byte frames at top speed, of 64-byte frames at top speed, and of six frame sizes
//! at 6 × 60 kpps, over and over).
//!
//! A phase is written `DIST[@RATE]`: a `--dist` spec, optionally followed by `@pps=N`, `@mbps=N`,
//! `@gap=NS` (the names of gen's rate options) or `@max` (top speed); without a rate the phase sends at the
//! run's rate. Phases are separated by `;`, e.g.
//! `fixed:1500@max;fixed:50@max;mix:50,186,562,754,1010,1500@pps=360000`.
//!
//! Each on-period's departures are scheduled from its own beginning; frames a sender could not send by the
//! end of the on time are not sent, so the off time stays silent and the next phase starts on time.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::sizes::{Distribution, SizeSampler};
use crate::SizeSource;

/// Most phases in one schedule (a guard against a runaway list, not a limit of the pacer).
pub const MAX_PHASES: usize = 64;

/// The rate of one phase, in the words of gen's rate options.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseRate {
    /// Top speed, whatever the run's rate.
    Max,
    /// Packets per second (all threads together), as `--pps`.
    Pps(f64),
    /// Megabits per second (all threads together, counted by the run's rate basis), as `--mbps`.
    Mbps(f64),
    /// Nanoseconds between departures (all threads together), as `--gap`.
    Gap(f64),
}

/// The traffic of one on-period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// A `--dist` spec.
    pub dist: String,
    /// None: the run's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<PhaseRate>,
}

impl fmt::Display for PhaseRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PhaseRate::Max => write!(f, "max"),
            PhaseRate::Pps(v) => write!(f, "pps={v}"),
            PhaseRate::Mbps(v) => write!(f, "mbps={v}"),
            PhaseRate::Gap(v) => write!(f, "gap={v}"),
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rate {
            Some(r) => write!(f, "{}@{r}", self.dist),
            None => write!(f, "{}", self.dist),
        }
    }
}

/// Writes phases as they are parsed: `A;B;C`.
pub fn format_phases(phases: &[Phase]) -> String {
    phases
        .iter()
        .map(Phase::to_string)
        .collect::<Vec<_>>()
        .join(";")
}

const USAGE: &str =
    "write phases as DIST[@RATE] separated by ';', with RATE one of max, pps=N, mbps=N, \
                     gap=NS, e.g. phases=fixed:1500@max;mix:50,186,1500@pps=360000";

fn parse_rate(text: &str) -> Result<PhaseRate, String> {
    if text == "max" {
        return Ok(PhaseRate::Max);
    }
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("rate {text:?} is not max, pps=N, mbps=N or gap=NS"))?;
    let v: f64 = value
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{key}={value}: the rate must be a positive number"))?;
    match key.trim() {
        "pps" => Ok(PhaseRate::Pps(v)),
        "mbps" => Ok(PhaseRate::Mbps(v)),
        "gap" => Ok(PhaseRate::Gap(v)),
        other => Err(format!(
            "unknown rate {other:?}: use max, pps=N, mbps=N or gap=NS"
        )),
    }
}

/// Parses `DIST[@RATE];DIST[@RATE];...`; the error names the phase (counted from 1) and says what to write.
pub fn parse_phases(text: &str) -> Result<Vec<Phase>, String> {
    let mut phases = Vec::new();
    for (i, part) in text.split(';').enumerate() {
        let n = i + 1;
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("phase {n} is empty: {USAGE}"));
        }
        let (dist, rate) = match part.rsplit_once('@') {
            Some((d, r)) => (
                d.trim(),
                Some(parse_rate(r.trim()).map_err(|e| format!("phase {n}: {e}"))?),
            ),
            None => (part, None),
        };
        if dist.is_empty() {
            return Err(format!("phase {n} has no size distribution: {USAGE}"));
        }
        // The spec is checked now (files read once) so a bad one fails before anything is sent.
        Distribution::from_spec(dist).map_err(|e| format!("phase {n}: {e}"))?;
        phases.push(Phase {
            dist: dist.to_string(),
            rate,
        });
    }
    if phases.len() > MAX_PHASES {
        return Err(format!(
            "{} phases: at most {MAX_PHASES} are allowed",
            phases.len()
        ));
    }
    Ok(phases)
}

/// The size source of a thread: the run's sampler, or with phases one sampler per phase, the current one
/// chosen by the pacer.
pub struct PhasedSizes<S> {
    base: S,
    phases: Vec<SizeSampler>,
    current: usize,
}

impl<S: SizeSource> PhasedSizes<S> {
    /// `phases` empty: every size from `base`.
    pub fn new(base: S, phases: Vec<SizeSampler>) -> Self {
        PhasedSizes {
            base,
            phases,
            current: 0,
        }
    }
}

impl<S: SizeSource> SizeSource for PhasedSizes<S> {
    #[inline]
    fn next_size(&mut self) -> u16 {
        match self.phases.get_mut(self.current) {
            Some(p) => p.next_size(),
            None => self.base.next_size(),
        }
    }

    #[inline]
    fn set_phase(&mut self, phase: usize) {
        self.current = phase;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_three_phases_parse() {
        let p = parse_phases("fixed:1500@max; fixed:50 ;mix:50,186,562,754,1010,1500@pps=360000")
            .unwrap();
        assert_eq!(
            p,
            [
                Phase {
                    dist: "fixed:1500".into(),
                    rate: Some(PhaseRate::Max)
                },
                Phase {
                    dist: "fixed:50".into(),
                    rate: None
                },
                Phase {
                    dist: "mix:50,186,562,754,1010,1500".into(),
                    rate: Some(PhaseRate::Pps(360000.0))
                },
            ]
        );
        // Printed as parsed, so it round-trips (the report records it).
        assert_eq!(parse_phases(&format_phases(&p)).unwrap(), p);
        assert_eq!(
            parse_phases("imix@mbps=500;uniform:46-100@gap=2000").unwrap()[1].rate,
            Some(PhaseRate::Gap(2000.0))
        );
    }

    #[test]
    fn bad_phases_say_which_and_why() {
        let err = |t: &str| parse_phases(t).unwrap_err();
        assert!(err("fixed:50;;imix").starts_with("phase 2 is empty"));
        assert!(err("fixed:50;@max").starts_with("phase 2 has no size distribution"));
        let e = err("fixed:50@pps=0");
        assert!(e.contains("phase 1") && e.contains("positive"), "{e}");
        let e = err("imix;fixed:50@kpps=3");
        assert!(
            e.contains("phase 2") && e.contains("unknown rate \"kpps\""),
            "{e}"
        );
        let e = err("imix@fast");
        assert!(e.contains("not max, pps=N"), "{e}");
        let e = err("fixed:50;nosuch:3");
        assert!(
            e.contains("phase 2") && e.contains("unknown distribution"),
            "{e}"
        );
        let e = err("mix:50,x,1500");
        assert!(e.contains("\"x\" is not a size"), "{e}");
        assert!(err(&vec!["fixed:50"; 65].join(";")).contains("at most 64"));
    }
}
