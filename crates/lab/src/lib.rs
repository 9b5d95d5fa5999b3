//! The measurement lab: throwaway testbeds, CPU accounting, and (later) plans, statistics and reports.

pub mod proc_cpu;
pub mod testbed;
