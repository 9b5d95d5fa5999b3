//! The `traffic` factor: what the testbed sends. `gen` is `ringcap gen`'s steady stream (the default);
//! `synth:bmodel=B[,levels=N][,concurrent=N]` is a `ringcap synth` trace (b-model bursts at every time scale,
//! TCP and UDP flows, full frames) written before the run and sent by `ringcap replay` at its recorded timing,
//! so a plan can show what bursts above the sustained rate do to a capturer at the same mean rate (seed 002
//! §3).

/// A synth trace's shape (`ringcap synth`'s flags of the same names; the rest keep synth's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct SynthTraffic {
    /// b-model bias, 0.5 (constant rate) to below 1.
    pub bmodel: f64,
    /// Splits per cascade period (None: synth's default).
    pub levels: Option<u32>,
    /// Flows open at any time (None: synth's default).
    pub concurrent: Option<u32>,
}

impl SynthTraffic {
    /// `ringcap synth`'s flags for this shape (without the file, rate, duration and seed).
    pub fn synth_args(&self) -> Vec<String> {
        let mut a = vec!["--bmodel".to_string(), self.bmodel.to_string()];
        if let Some(l) = self.levels {
            a.extend(["--levels".to_string(), l.to_string()]);
        }
        if let Some(c) = self.concurrent {
            a.extend(["--concurrent".to_string(), c.to_string()]);
        }
        a
    }
}

/// What a run sends.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Traffic {
    /// `ringcap gen` at the run's rate and dist.
    #[default]
    Gen,
    /// A `ringcap synth` trace replayed by `ringcap replay`.
    Synth(SynthTraffic),
}

/// `gen` or `synth:bmodel=B[,levels=N][,concurrent=N]`.
pub(super) fn parse_traffic(level: &str) -> Result<Traffic, String> {
    if level == "gen" {
        return Ok(Traffic::Gen);
    }
    let usage = || {
        format!(
            "traffic = `{level}`: expected \"gen\" or \"synth:bmodel=B[,levels=N][,concurrent=N]\" with B from 0.5 (constant) to below 1"
        )
    };
    let spec = level.strip_prefix("synth:").ok_or_else(usage)?;
    let mut t = SynthTraffic {
        bmodel: f64::NAN,
        levels: None,
        concurrent: None,
    };
    for part in spec.split(',') {
        let (k, v) = part.split_once('=').ok_or_else(usage)?;
        let v = v.trim();
        match k.trim() {
            "bmodel" => {
                t.bmodel = v
                    .parse::<f64>()
                    .ok()
                    .filter(|b| (0.5..1.0).contains(b))
                    .ok_or_else(usage)?
            }
            // synth refuses more than 30 levels; 100 µs × 2^20 is already a 105 s period.
            "levels" => {
                t.levels = Some(
                    v.parse()
                        .ok()
                        .filter(|l| (1..=20).contains(l))
                        .ok_or_else(|| format!("{}: levels from 1 to 20", usage()))?,
                )
            }
            "concurrent" => {
                t.concurrent = Some(
                    v.parse()
                        .ok()
                        .filter(|c| (1..=1_000_000).contains(c))
                        .ok_or_else(|| format!("{}: concurrent from 1 to 1000000", usage()))?,
                )
            }
            _ => return Err(usage()),
        }
    }
    if t.bmodel.is_nan() {
        return Err(format!("{}: bmodel is required", usage()));
    }
    Ok(Traffic::Synth(t))
}
