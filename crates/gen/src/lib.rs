//! gen

pub mod dist;
pub mod frames;
pub mod pace;
pub mod replay;
pub mod report;
pub mod run;
pub mod tx;

pub use replay::{replay, ReplayOptions};
pub use report::{GenReport, Progress};
pub use run::{run, Control, FixedSize, GenError, GenOptions, SizeSource, Sizes};
