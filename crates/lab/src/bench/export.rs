//! Exporters of bench results, one per format, as hyperfine's: the runner calls each one after every run, so a
//! crash or Ctrl-C leaves every file with what was measured until then, and once more when the plan is done.
//! results.csv is the record the others are derived from (and what `--resume` reads), so it comes first.

use std::path::Path;

use super::results::{self, Row};
use super::{io_err, BenchError};
use crate::report::{self, ReportSummary};

/// One output format of a bench directory.
pub trait Exporter {
    /// After each run, with the rows that run measured.
    fn run_finished(&mut self, dir: &Path, rows: &[Row]) -> Result<(), BenchError>;

    /// After the last run of a plan that was not interrupted.
    fn plan_finished(&mut self, _dir: &Path) -> Result<(), BenchError> {
        Ok(())
    }
}

/// results.csv: the run's rows appended in one write (the file and its header are made before the first run).
pub struct Csv;

impl Exporter for Csv {
    fn run_finished(&mut self, dir: &Path, rows: &[Row]) -> Result<(), BenchError> {
        results::append(&dir.join("results.csv"), rows)
            .map_err(io_err("cannot append to results.csv"))
    }
}

/// results.parquet: rewritten from results.csv, so resumed runs are in it too.
pub struct Parquet;

impl Exporter for Parquet {
    fn run_finished(&mut self, dir: &Path, _rows: &[Row]) -> Result<(), BenchError> {
        self.plan_finished(dir)
    }

    /// Also when no run was left to do (a resumed or all-skipped plan still gets its file).
    fn plan_finished(&mut self, dir: &Path) -> Result<(), BenchError> {
        results::write_parquet(&dir.join("results.csv"), &dir.join("results.parquet"))
            .map_err(io_err("cannot write results.parquet"))
    }
}

/// report.html with summary.csv, the plots and anova.json; written once the plan is done (drawing every plot
/// after each run would cost more than some runs), or by `ringcap report` for an interrupted plan.
#[derive(Default)]
pub struct Html {
    /// What the report holds, once written.
    pub summary: Option<ReportSummary>,
}

impl Exporter for Html {
    fn run_finished(&mut self, _dir: &Path, _rows: &[Row]) -> Result<(), BenchError> {
        Ok(())
    }

    fn plan_finished(&mut self, dir: &Path) -> Result<(), BenchError> {
        self.summary = Some(report::write(dir).map_err(BenchError::Report)?);
        Ok(())
    }
}
