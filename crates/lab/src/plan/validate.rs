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
