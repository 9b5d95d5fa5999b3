//! The measurement lab: CPU accounting, plans, the measurement cycle, statistics and reports (the testbed it
//! runs benches on is the `testbed` crate).

pub mod anova;
pub mod bench;
pub mod cgroup;
pub mod cpusage;
pub mod machine;
pub mod plan;
pub mod proc_cpu;
pub mod report;
pub mod smt;
