//! The measurement lab: throwaway testbeds, CPU accounting, and (later) plans, statistics and reports.

pub mod anova;
pub mod bench;
pub mod cpusage;
pub mod machine;
pub mod plan;
pub mod plot;
pub mod proc_cpu;
pub mod report;
pub mod testbed;
