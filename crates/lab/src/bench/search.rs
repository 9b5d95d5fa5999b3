//! The max loss-free rate (issue 14): per point of the other factors, the highest offered rate at which the
//! capturer lost less than the plan's threshold (default 0.1 %). The sweep gives the bracket (the highest
//! rate without loss below the lowest rate with loss); a bounded number of bisection runs narrows it.

use serde::Serialize;

use crate::plan::{Rate, Run};
use crate::report::RunResult;

/// One bisection run.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    /// Rate asked of the generator (the plan's unit).
    pub rate: f64,
    /// Rate reached, measured, in the plan's unit (None: not measured).
    pub reached: Option<f64>,
    /// Measured: 1 - capture rate of the worst app (None: the run failed).
    pub loss: Option<f64>,
    pub measured_pps: Option<f64>,
    pub status: String,
}

/// The answer for one point.
#[derive(Clone, Debug, Serialize)]
pub struct Found {
    /// The other factors' levels, e.g. `method=tcpdump;cpu_limit=10`.
    pub point: String,
    pub levels: Vec<(String, String)>,
    /// `rate_pps` or `rate_mbps`.
    pub factor: String,
    /// Highest rate reached without loss, as measured (None: loss even at the lowest rate tried).
    pub max_loss_free: Option<f64>,
    /// Packets per second measured in the run that gave `max_loss_free`.
    pub measured_pps: Option<f64>,
    /// Lowest rate reached with loss, as measured (None: no loss anywhere, so the true maximum is at
    /// least `max_loss_free`).
    pub lossy_at: Option<f64>,
    pub probes: Vec<Probe>,
    /// What the numbers mean in words ("no loss up to the generator's top speed", ...).
    pub note: String,
}

/// The rate a run reached, in the plan's unit (pps or Mb/s as measured on the wire); the level asked for
/// only when the run has no measurement. Asked and reached differ near the generator's limit, and a
/// bracket must compare like with like.
fn rate_of(factor: &str, level: &str, r: &RunResult) -> Option<f64> {
    r.values
        .get(if factor == "rate_pps" { "pps" } else { "mbps" })
        .copied()
        .or_else(|| level.parse().ok())
}

/// Loss of a run: 1 - capture rate of its worst app.
fn loss_of(r: &RunResult) -> Option<f64> {
    let rate = r
        .values
        .get("capture_rate_worst")
        .or_else(|| r.values.get("capture_rate"))?;
    Some(1.0 - rate)
}

/// The levels of the other factors that name one point of the search.
pub type PointKey = Vec<(String, String)>;

/// What one sweep run says at a rate: (rate, loss fraction, measured pps).
type Observation = (f64, f64, Option<f64>);

/// One point's bracket: (its key, highest loss-free rate with the pps measured there, lowest lossy rate).
pub type Bracket = (PointKey, Option<(f64, Option<f64>)>, Option<f64>);

/// Bracket from the sweep, per group. A rate is lossy if any successful rerun lost `threshold` or more.
pub fn brackets(
    factors: &[String],
    runs: &[RunResult],
    rate_factor: &str,
    threshold: f64,
) -> Vec<Bracket> {
    let Some(fi) = factors.iter().position(|f| f == rate_factor) else {
        return Vec::new();
    };
    // group key -> [(rate, loss, pps)]
    let mut groups: Vec<(PointKey, Vec<Observation>)> = Vec::new();
    for r in runs.iter().filter(|r| r.ok) {
        let key: Vec<(String, String)> = factors
            .iter()
            .zip(&r.levels)
            .enumerate()
            .filter(|(i, _)| *i != fi)
            .map(|(_, (f, l))| (f.clone(), l.clone()))
            .collect();
        let (Some(rate), Some(loss)) = (rate_of(rate_factor, &r.levels[fi], r), loss_of(r)) else {
            continue;
        };
        let entry = (rate, loss, r.values.get("pps").copied());
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(entry),
            None => groups.push((key, vec![entry])),
        }
    }
    groups
        .into_iter()
        .map(|(key, obs)| {
            let lossy_at = obs
                .iter()
                .filter(|o| o.1 >= threshold)
                .map(|o| o.0)
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b))));
            // Loss-free: below the first lossy rate, and no rerun at that rate lost.
            let clean = obs
                .iter()
                .filter(|o| lossy_at.is_none_or(|h| o.0 < h))
                .filter(|o| !obs.iter().any(|p| p.0 == o.0 && p.1 >= threshold))
                .fold(None, |a: Option<(f64, Option<f64>)>, o| match a {
                    Some((r, _)) if r >= o.0 => a,
                    _ => Some((o.0, o.2)),
                });
            (key, clean, lossy_at)
        })
        .collect()
}

/// Bisect between `lo` (no loss; 0 if unknown) and `hi` (loss) with at most `steps` probes; `probe` returns
/// the loss at a rate (None: the run failed, which ends the search). Returns the narrowed bracket.
pub fn bisect<E>(
    lo: f64,
    hi: f64,
    steps: u32,
    mut probe: impl FnMut(f64) -> Result<Option<f64>, E>,
    threshold: f64,
) -> Result<(f64, f64, bool), E> {
    let (mut lo, mut hi) = (lo, hi);
    for _ in 0..steps {
        let mid = (lo + hi) / 2.0;
        match probe(mid)? {
            Some(loss) if loss >= threshold => hi = mid,
            Some(_) => lo = mid,
            None => return Ok((lo, hi, false)),
        }
    }
    Ok((lo, hi, true))
}

/// The run to probe `rate` with: `template`'s setup and levels with the rate changed.
pub fn probe_run(template: &Run, rate_factor: &str, rate: f64, index: usize) -> Run {
    let mut run = template.clone();
    // Whole packets (or 0.1 Mb/s) per second: enough resolution for five or six halvings.
    let rate = if rate_factor == "rate_pps" {
        rate.round()
    } else {
        (rate * 10.0).round() / 10.0
    };
    run.setup.rate = if rate_factor == "rate_pps" {
        Rate::Pps(rate)
    } else {
        Rate::Mbps(rate)
    };
    for (f, l) in run.levels.iter_mut() {
        if f == rate_factor {
            *l = rate.to_string();
        }
    }
    run.point = format!("search:{}", crate::plan::point_key(&run.levels));
    run.index = index;
    run.rerun = 0;
    run
}

/// `rate_pps` values read as kpps/Mpps, `rate_mbps` as Mb/s.
pub fn rate_text(factor: &str, v: f64) -> String {
    if factor == "rate_pps" {
        units::si(v, "pps")
    } else {
        format!("{} Mb/s", units::sig(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capturer that loses above 333 333 pps: after n halvings of [0, 600 000] the bracket is
    /// 600 000 / 2^n wide and holds the threshold (the textbook bound of bisection).
    #[test]
    fn bisection_narrows_to_the_threshold() {
        let truth = 333_333.0;
        let mut probes = Vec::new();
        let (lo, hi, done) = bisect::<()>(
            0.0,
            600_000.0,
            6,
            |r| {
                probes.push(r);
                Ok(Some(if r > truth { 0.05 } else { 0.0 }))
            },
            0.001,
        )
        .unwrap();
        assert!(done);
        assert_eq!(probes.len(), 6);
        assert_eq!(hi - lo, 600_000.0 / 64.0);
        assert!(lo <= truth && truth < hi, "{lo} {hi}");
        // A failed run stops the search with the bracket so far.
        let (lo, hi, done) = bisect::<()>(100.0, 200.0, 5, |_| Ok(None), 0.001).unwrap();
        assert_eq!((lo, hi, done), (100.0, 200.0, false));
    }

    /// Near the generator's limit a run asked for 200 kpps reaches 150 kpps, and "max" reaches 180 kpps: the
    /// bracket compares what was reached, not a number asked with a number measured.
    #[test]
    fn brackets_compare_rates_reached() {
        let run = |level: &str, pps: f64, capture_rate: f64| RunResult {
            run: 0,
            point: String::new(),
            rerun: 0,
            levels: vec!["tcpdump".into(), level.into()],
            apps: 1,
            ok: true,
            status: "ok".into(),
            values: [
                ("pps".to_string(), pps),
                ("capture_rate".to_string(), capture_rate),
            ]
            .into_iter()
            .collect(),
        };
        let factors = ["method".to_string(), "rate_pps".to_string()];
        let runs = [
            run("100000", 99_000.0, 1.0),
            run("200000", 150_000.0, 1.0),
            run("max", 180_000.0, 0.97),
        ];
        let b = brackets(&factors, &runs, "rate_pps", 0.001);
        assert_eq!(b.len(), 1);
        let (key, clean, lossy) = &b[0];
        assert_eq!(key, &vec![("method".to_string(), "tcpdump".to_string())]);
        assert_eq!(*clean, Some((150_000.0, Some(150_000.0))));
        assert_eq!(*lossy, Some(180_000.0));
    }
}
