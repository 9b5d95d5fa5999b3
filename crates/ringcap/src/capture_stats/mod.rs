//! What `ringcap capture` prints while it runs and when it ends: a stats line per interval, then tcpdump's
//! three summary lines and ringcap's per-stage lines (or JSON objects with `--json`).

mod stats_line;
mod summary;

pub use crate::xdp_summary::XdpSummary;
pub use stats_line::{LiveStats, StatsPrinter};
pub use summary::Summary;
