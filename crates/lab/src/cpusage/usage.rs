//! Tick differences as percentages of an interval per mode, the stretches under an idle limit, and
//! min / max / avg over samples.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde::Serialize as DeriveSerialize;

use super::proc_stat::{ProcStat, Ticks, IDLE, MODES};

/// Percentage of an interval spent in each mode, in [`MODES`] order (they add up to 100).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage(pub [f64; 8]);

impl Usage {
    /// Usage between two readouts; None if no tick passed (interval shorter than a tick).
    /// A counter that went backwards (iowait can, on some kernels) counts as 0.
    pub fn between(before: &Ticks, after: &Ticks) -> Option<Usage> {
        let mut d = [0u64; 8];
        for (i, slot) in d.iter_mut().enumerate() {
            *slot = after.0[i].saturating_sub(before.0[i]);
        }
        let total: u64 = d.iter().sum();
        if total == 0 {
            return None;
        }
        Some(Usage(d.map(|x| 100.0 * x as f64 / total as f64)))
    }

    /// Idle percentage.
    pub fn idle(&self) -> f64 {
        self.0[IDLE]
    }

    /// CPU usage as the thesis plots it (§6.2.2): 100 % − idle.
    pub fn busy(&self) -> f64 {
        100.0 - self.idle()
    }

    /// The percentage of a mode by name (`user`, `softirq`, …).
    pub fn get(&self, mode: &str) -> Option<f64> {
        MODES.iter().position(|m| *m == mode).map(|i| self.0[i])
    }
}

/// One line of the thesis's output: `user: 35.2%, nice: 0.0%, …, steal: 0.0%,` (Figure 5.1).
impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in MODES.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}: {:.1}%,", self.0[i])?;
        }
        Ok(())
    }
}

/// JSON: `{"user": 35.2, …}`.
impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(MODES.len()))?;
        for (name, v) in MODES.iter().zip(self.0) {
            m.serialize_entry(name, &v)?;
        }
        m.end()
    }
}

/// The usage over one sampling interval.
#[derive(Clone, Debug, PartialEq, DeriveSerialize)]
pub struct Sample {
    /// Seconds from the start of sampling to the end of this interval.
    pub t: f64,
    pub all: Usage,
    /// Per CPU (by number), for the CPUs online at both readouts. JSON: `{"cpu0": {…}, …}`.
    #[serde(serialize_with = "cpu_map")]
    pub cpus: Vec<(u32, Usage)>,
}

impl Sample {
    /// Usage between two readouts `t` seconds after the start; None if no tick passed.
    pub fn between(before: &ProcStat, after: &ProcStat, t: f64) -> Option<Sample> {
        let all = Usage::between(&before.all, &after.all)?;
        let cpus = after
            .cpus
            .iter()
            .filter_map(|(cpu, a)| {
                let (_, b) = before.cpus.iter().find(|(c, _)| c == cpu)?;
                Some((*cpu, Usage::between(b, a)?))
            })
            .collect();
        Some(Sample { t, all, cpus })
    }
}

/// A run of consecutive samples: `len` samples from index `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, DeriveSerialize)]
pub struct Window {
    pub start: usize,
    pub len: usize,
}

impl Window {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// cpusage's snapping: the first run of samples with idle < `limit`.
pub fn first_window_under(idle: &[f64], limit: f64) -> Option<Window> {
    let start = idle.iter().position(|&i| i < limit)?;
    let len = idle[start..].iter().take_while(|&&i| i < limit).count();
    Some(Window { start, len })
}

/// trimusage: the longest run of samples with idle < `limit` (the first of equally long ones).
/// Unlike the awk script, a run of a single sample counts too.
pub fn longest_window_under(idle: &[f64], limit: f64) -> Option<Window> {
    let mut best: Option<Window> = None;
    let mut i = 0;
    while i < idle.len() {
        if idle[i] < limit {
            let len = idle[i..].iter().take_while(|&&x| x < limit).count();
            if best.is_none_or(|b| len > b.len) {
                best = Some(Window { start: i, len });
            }
            i += len;
        } else {
            i += 1;
        }
    }
    best
}

/// Min, max and average of each mode.
#[derive(Clone, Copy, Debug, PartialEq, DeriveSerialize)]
pub struct Stats {
    pub min: Usage,
    pub max: Usage,
    pub avg: Usage,
}

/// Min, max and average per mode; None for no samples.
pub fn stats<'a>(usages: impl IntoIterator<Item = &'a Usage>) -> Option<Stats> {
    let mut min = [f64::INFINITY; 8];
    let mut max = [f64::NEG_INFINITY; 8];
    let mut sum = [0.0; 8];
    let mut n = 0usize;
    for u in usages {
        for i in 0..8 {
            min[i] = min[i].min(u.0[i]);
            max[i] = max[i].max(u.0[i]);
            sum[i] += u.0[i];
        }
        n += 1;
    }
    (n > 0).then(|| Stats {
        min: Usage(min),
        max: Usage(max),
        avg: Usage(sum.map(|s| s / n as f64)),
    })
}

/// Per-CPU values as a JSON object keyed `cpu0`, `cpu1`, … .
#[allow(clippy::ptr_arg)] // serde hands the field itself
pub(super) fn cpu_map<S: Serializer, T: Serialize>(
    v: &Vec<(u32, T)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(v.len()))?;
    for (c, x) in v {
        m.serialize_entry(&format!("cpu{c}"), x)?;
    }
    m.end()
}
