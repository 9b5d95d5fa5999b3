//! The rules a parsed plan must satisfy: every level valid, one rate factor, no factor both fixed and varied.

use super::{invalid, Plan, PlanError, Setup};

impl Plan {
    /// Check every level of every factor (and the fixed ones) and the combination rules.
    pub(super) fn validate(&mut self) -> Result<(), PlanError> {
        if self.reruns == 0 {
            return Err(invalid("[run] reruns = 0: at least 1 rerun is needed"));
        }
        if self.packets < 1000 {
            return Err(invalid(format!(
                "[run] packets = {}: use at least 1000 packets per run",
                self.packets
            )));
        }
        if let Some(sp) = &self.sampling {
            if sp.samples == 0 || sp.sample_s < 0.1 {
                return Err(invalid(
                    "[run] samples must be ≥ 1 and sample_s ≥ 0.1 s (time-based runs)",
                ));
            }
            // Captured per sample comes from the capture file's time stamps.
            let null = self.fixed.iter().any(|(k, v)| k == "output" && v == "null")
                || self
                    .factors
                    .iter()
                    .any(|f| f.name == "output" && f.levels.iter().any(|l| l == "null"));
            if null {
                return Err(invalid(
                    "time-based runs (samples) count captured packets per sample from the capture file: use output = \"disk\"",
                ));
            }
            let burst = |k: &str, v: &str| k == "burst" && v != "none";
            if self.fixed.iter().any(|(k, v)| burst(k, v))
                || self
                    .factors
                    .iter()
                    .any(|f| f.levels.iter().any(|l| burst(&f.name, l)))
            {
                return Err(invalid(
                    "time-based runs (samples) and burst cannot be combined",
                ));
            }
        }
        let mut base = Setup::default();
        for (k, v) in &self.fixed {
            base.apply(k, v, &self.dir, &self.methods)
                .map_err(|e| invalid(format!("[run] {e}")))?;
        }
        self.base = base.clone();
        let mut all = self.factors.clone();
        if let Some(q) = &self.quick {
            all.extend(q.factors.iter().cloned());
        }
        for f in &all {
            for l in &f.levels {
                let mut s = base.clone();
                s.apply(&f.name, l, &self.dir, &self.methods)
                    .map_err(|e| invalid(format!("[factors] {e}")))?;
                if f.name == "filter" {
                    self.filters.insert(l.clone(), s.filter);
                }
            }
        }
        let rates: Vec<&str> = ["rate_mbps", "rate_pps", "gap_ns"]
            .into_iter()
            .filter(|r| {
                self.factors.iter().any(|f| f.name == *r) || self.fixed.iter().any(|f| f.0 == *r)
            })
            .collect();
        if rates.len() > 1 {
            return Err(invalid(format!(
                "the plan sets {}: use only one of rate_mbps, rate_pps, gap_ns",
                rates.join(" and ")
            )));
        }
        self.validate_traffic(&all)?;
        for f in &self.factors {
            if self.fixed.iter().any(|(k, _)| k == &f.name) {
                return Err(invalid(format!(
                    "{} is both fixed in [run] and varied in [factors]: keep one",
                    f.name
                )));
            }
        }
        Ok(())
    }
}

impl Plan {
    /// `traffic = "synth:..."` replays a trace written at the run's packet rate on the testbed: it needs a
    /// rate_pps level (a trace has no "max", and its frame sizes are synth's, so Mb/s is not a rate it can be
    /// written at), and it replaces the generator that burst, samples and [interface] configure.
    fn validate_traffic(&self, all: &[super::Factor]) -> Result<(), PlanError> {
        let levels = |name: &str| -> Vec<&str> {
            let fixed = self
                .fixed
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str());
            let varied = all
                .iter()
                .filter(|f| f.name == name)
                .flat_map(|f| f.levels.iter().map(String::as_str));
            fixed.chain(varied).collect()
        };
        if !levels("traffic").iter().any(|l| l.starts_with("synth:")) {
            return Ok(());
        }
        let pps = levels("rate_pps");
        if pps.is_empty() || pps.contains(&"max") {
            return Err(invalid(
                "traffic = \"synth:...\" writes its trace at the run's packet rate: set rate_pps to numbers (not \"max\"), not rate_mbps or gap_ns",
            ));
        }
        if self.interface.is_some() {
            return Err(invalid(
                "traffic = \"synth:...\" is replayed on the testbed: it cannot be combined with [interface] (give the template a `ringcap replay` instead)",
            ));
        }
        if self.sampling.is_some() || levels("burst").iter().any(|l| *l != "none") {
            return Err(invalid(
                "traffic = \"synth:...\" brings its own bursts: it cannot be combined with burst or time-based runs (samples)",
            ));
        }
        Ok(())
    }
}
