//! gen

pub mod error;
pub mod frames;
mod job;
mod live_tx;
pub mod options;
pub mod pace;
pub mod phases;
pub mod replay;
pub mod report;
pub mod run;
pub mod sizes;
pub mod synth;
pub mod threads;
pub mod tx;
mod xdp_tx;

pub use error::GenError;
pub use job::SizeSource;
pub use options::{GenOptions, ReplayOptions};
pub use replay::replay;
pub use report::{GenReport, Progress};
pub use run::{run, FixedSize, Sizes};
pub use threads::Control;
