//! A size model ready for generation: exact (alias) or createDist, plus its fidelity.

use std::str::FromStr;
use std::sync::Arc;

use rand_distr::WeightedAliasIndex;

use super::createdist::{CreateDist, Params};
use super::error::{DistError, Result};
use super::fidelity::tv_distance;
use super::histogram::{Histogram, SIZE_SLOTS};
use super::named::Distribution;
use super::sampler::{seeded_rng, Arrays, Kind, SizeSampler};

/// How sizes are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Walker/Vose alias sampling over the full histogram: the source distribution exactly.
    /// The default for generation.
    #[default]
    Exact,
    /// The two-stage arrays of createDist (seed 000 §4.2), as the thesis's pktgen drew them.
    CreateDist,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "exact" => Ok(Mode::Exact),
            "createdist" | "create-dist" | "arrays" => Ok(Mode::CreateDist),
            _ => Err(format!("unknown size mode {s:?}: use exact or createdist")),
        }
    }
}

#[derive(Clone, Debug)]
enum Built {
    Fixed(u16),
    Alias {
        sizes: Arc<[u16]>,
        alias: Arc<WeightedAliasIndex<u64>>,
    },
    Cycle(Arc<[u16]>),
    Arrays {
        model: Arc<CreateDist>,
        arrays: Arc<Arrays>,
    },
}

/// A built size model: draws sizes and knows how far it is from its source histogram.
///
/// Cheap to clone (tables are shared); each sending thread takes its own
/// [`SizeModel::sampler`].
#[derive(Clone, Debug)]
pub struct SizeModel {
    name: String,
    source: Arc<Histogram>,
    built: Built,
}

impl SizeModel {
    /// Builds `dist` in `mode` (`params` only matter for [`Mode::CreateDist`]).
    pub fn build(dist: &Distribution, mode: Mode, params: Params) -> Result<SizeModel> {
        match mode {
            Mode::Exact => SizeModel::exact(dist),
            Mode::CreateDist => SizeModel::create_dist(dist, params),
        }
    }

    /// Exact mode: alias table over every size of the histogram (integer weights, so the
    /// table's probabilities are the histogram's shares exactly). A distribution with a fixed
    /// order (an RFC 6985 genome) is replayed in that order instead.
    pub fn exact(dist: &Distribution) -> Result<SizeModel> {
        let hist = &dist.histogram;
        if hist.is_empty() {
            return Err(DistError::Model(format!(
                "distribution {} is empty",
                dist.name
            )));
        }
        let built = if let Some(seq) = &dist.sequence {
            Built::Cycle(seq.clone().into())
        } else if hist.distinct() == 1 {
            Built::Fixed(hist.min_size().expect("not empty"))
        } else {
            let (sizes, weights): (Vec<u16>, Vec<u64>) = hist.iter().unzip();
            let alias = WeightedAliasIndex::new(weights).map_err(|e| {
                DistError::Model(format!(
                    "alias table for {}: {e} (counts above 2^64 / number of sizes; scale the counts down)",
                    dist.name
                ))
            })?;
            Built::Alias {
                sizes: sizes.into(),
                alias: Arc::new(alias),
            }
        };
        Ok(SizeModel {
            name: dist.name.clone(),
            source: Arc::new(hist.clone()),
            built,
        })
    }

    /// createDist mode: the arrays of seed 000 §4.2.3 (see [`CreateDist::build`]).
    pub fn create_dist(dist: &Distribution, params: Params) -> Result<SizeModel> {
        let model = CreateDist::build(&dist.histogram, params)?;
        let arrays = Arrays::new(
            model.outliers_array().to_vec(),
            model.bins_array().to_vec(),
            params.bin_width,
        );
        Ok(SizeModel {
            name: dist.name.clone(),
            source: Arc::new(dist.histogram.clone()),
            built: Built::Arrays {
                model: Arc::new(model),
                arrays: Arc::new(arrays),
            },
        })
    }

    /// Name of the source distribution (spec or file).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The mode this model draws in (a genome replay counts as exact).
    pub fn mode(&self) -> Mode {
        match self.built {
            Built::Arrays { .. } => Mode::CreateDist,
            _ => Mode::Exact,
        }
    }

    /// The histogram the model was built from.
    pub fn source(&self) -> &Histogram {
        &self.source
    }

    /// The createDist arrays and entries, in createDist mode.
    pub fn create_dist_model(&self) -> Option<&CreateDist> {
        match &self.built {
            Built::Arrays { model, .. } => Some(model),
            _ => None,
        }
    }

    /// A sampler seeded with `seed` (stream 0).
    pub fn sampler(&self, seed: u64) -> SizeSampler {
        self.sampler_stream(seed, 0)
    }

    /// A sampler seeded with `seed` on ChaCha stream `stream` (one stream per thread).
    pub fn sampler_stream(&self, seed: u64, stream: u64) -> SizeSampler {
        let kind = match &self.built {
            Built::Fixed(s) => Kind::Fixed(*s),
            Built::Alias { sizes, alias } => Kind::Alias {
                sizes: sizes.clone(),
                alias: alias.clone(),
            },
            Built::Cycle(sizes) => Kind::Cycle {
                sizes: sizes.clone(),
                next: 0,
            },
            Built::Arrays { arrays, .. } => Kind::Arrays(arrays.clone()),
        };
        SizeSampler::new(kind, seeded_rng(seed, stream))
    }

    /// The probability of each size under the model, dense (index = size), computed from the
    /// tables, not by sampling.
    pub fn probabilities(&self) -> Vec<f64> {
        match &self.built {
            Built::Arrays { model, .. } => model.probabilities(),
            Built::Fixed(s) => {
                let mut p = vec![0.0; SIZE_SLOTS];
                p[*s as usize] = 1.0;
                p
            }
            // Integer alias tables are exact: P(size) = count / total. A genome cycle gives
            // each size its share of the genome over every whole period.
            Built::Alias { .. } | Built::Cycle(_) => self.source.probabilities(),
        }
    }

    /// Total-variation distance between the model and its source histogram, analytically:
    /// ½ Σ |P_model(i) − c_i / c_all| over all sizes (packets above N_ps count as missed).
    pub fn tv_distance(&self) -> f64 {
        tv_distance(&self.probabilities(), &self.source.probabilities())
    }

    /// Mean size under the model, in bytes.
    pub fn mean(&self) -> f64 {
        self.probabilities()
            .iter()
            .enumerate()
            .map(|(s, p)| s as f64 * p)
            .sum()
    }
}
