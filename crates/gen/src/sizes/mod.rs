//! Packet-size models for the generator: createDist (seed 000 §4.2–4.3, A.1–A.2) and exact
//! alias sampling.
//!
//! Sizes are **IP packet lengths** in bytes throughout (what createDist counts, A.1.2).
//!
//! Pipeline: inputs ([`read_files`]: `sizes`, `dist`, `trace`) or a named spec
//! ([`Distribution::from_spec`]: `internet`, `imix`, `rfc6985:…`, `fixed:N`, `uniform:A-B`,
//! `file:PATH`) → [`Histogram`] → [`SizeModel`] in [`Mode::Exact`] (default) or
//! [`Mode::CreateDist`] ([`Params`]: ρ, N_ps, p_Ωbound, σ_bin) → [`SizeSampler::next_size`]
//! per packet. Outputs: [`write_dist`], [`CreateDist::write_procfs`], [`write_sizes`],
//! [`Summary`]; fidelity: [`SizeModel::tv_distance`] (analytic), [`sampled_tv`], [`plot_svg`].
//!
//! ```
//! use gen::sizes::{Distribution, Mode, Params, SizeModel};
//! let dist = Distribution::from_spec("imix").unwrap();
//! let model = SizeModel::build(&dist, Mode::Exact, Params::default()).unwrap();
//! let mut sampler = model.sampler(42);
//! let size = sampler.next_size();
//! assert!([40, 576, 1500].contains(&size));
//! ```

mod createdist;
mod error;
mod fidelity;
mod histogram;
mod input;
mod model;
mod named;
mod output;
mod sampler;

pub use createdist::{
    Bin, CreateDist, Outlier, Params, DEFAULT_BIN_WIDTH, DEFAULT_MAX_SIZE, DEFAULT_OUTLIER_BOUND,
    DEFAULT_PRECISION, MAX_PRECISION,
};
pub use error::{DistError, Result};
pub use fidelity::{histogram_tv, plot_svg, sample_histogram, sampled_tv, tv_distance};
pub use histogram::{Histogram, SIZE_SLOTS};
pub use input::{
    count_frame, frame_ip_size, read_dist, read_file, read_files, read_sizes, read_text,
    read_trace, FrameSize, InputKind, InputReport, ReadOptions, TraceStats,
};
pub use model::{Mode, SizeModel};
pub use named::{Distribution, DEFAULT_SPEC, ETHERNET_OVERHEAD, SPECS};
pub use output::{write_dist, write_sizes, HeavyHitter, Summary, DEFAULT_SIZES_COUNT};
pub use sampler::{seeded_rng, SizeRng, SizeSampler};
