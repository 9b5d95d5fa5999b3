//! Time estimates of a plan's runs (shown before a plan starts, and for --quick's budget).

use super::{Plan, Rate, Run, Setup};

/// Packet rate assumed for `max` in time estimates: what `ringcap gen` reaches on the 2-vCPU test machine.
const MAX_PPS_ESTIMATE: f64 = 500_000.0;
/// Fixed cost of one run in time estimates (testbed, start-up, drain, stop, counting), seconds.
pub(super) const RUN_OVERHEAD_S: f64 = 3.5;

impl Setup {
    /// Packets per second the generator is asked for (an estimate for `max` and size mixes).
    pub fn pps_estimate(&self) -> f64 {
        let frame = self
            .dist
            .strip_prefix("fixed:")
            .and_then(|n| n.parse::<f64>().ok())
            .map_or(400.0, |ip| (ip + 14.0).max(60.0));
        let pps = match self.rate {
            Rate::Max => MAX_PPS_ESTIMATE,
            Rate::Pps(p) => p,
            Rate::Mbps(m) => m * 1e6 / ((frame + 24.0) * 8.0),
            Rate::GapNs(g) => 1e9 / g,
        };
        pps.min(MAX_PPS_ESTIMATE)
    }
}

impl Plan {
    /// Rough wall time of the given runs in seconds (fixed overhead per run plus sending time).
    pub fn estimate_seconds(&self, runs: &[Run]) -> f64 {
        runs.iter()
            .map(|r| {
                if let Some(sp) = &self.sampling {
                    return RUN_OVERHEAD_S + sp.send_s();
                }
                let send = match &r.setup.burst {
                    // A burst run lasts its cycles (or ends earlier at `packets`).
                    Some(b) => (b.cycles as f64 * b.period_s() + b.period_s())
                        .min(self.packets as f64 / r.setup.pps_estimate() * b.period_s() / b.on_s),
                    None => self.packets as f64 / r.setup.pps_estimate(),
                };
                RUN_OVERHEAD_S + send + self.warmup_packets as f64 / r.setup.pps_estimate()
            })
            .sum()
    }
}
