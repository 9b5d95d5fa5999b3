//! `ringcap anova`: analysis of variance of a full-factorial experiment in any CSV (seed 004's Tables 3
//! and 5), as a text table or JSON, with the residual plots of the visual tests.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::Args;
use lab::anova::{self, Anova, AnovaError, AnovaOptions};
use serde::Serialize;

use crate::Fatal;

#[derive(Args, Debug)]
#[command(
    after_help = "The CSV needs a header row; each row is one observation (one run). Every combination of \
the factors' levels must have the same number of rows (replications), at least 2.\n\
Examples:\n  ringcap anova results.csv --response capture_rate --factors method,placement\n  \
ringcap anova results.csv --response mbps --factors method,machine --log --plots anova-plots\n  \
ringcap anova hostA/results.csv hostB/results.csv --response capture_rate --factors method,machine\n  \
ringcap anova results.csv --response cpu --factors a,b,c --json"
)]
#[command(
    mut_arg("json", |a| a.help("Print JSON: {\"components\":[{\"name\",\"ss\",\"df\",\"ms\",\"f\",\"p\",\"percent\",\"f_table\"}, …], …}."))
)]
pub struct AnovaArgs {
    /// CSV files with a header row ("-" for stdin). Several files are one experiment: their rows are pooled
    /// (e.g. results.csv of `ringcap bench` on two hosts, told apart by the `machine` column).
    #[arg(value_name = "FILE.csv", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Column with the response (a number in every row).
    #[arg(long = "response", value_name = "COL")]
    pub response: String,
    /// Factor columns, comma separated (any text values; each distinct value is a level).
    #[arg(
        long = "factors",
        value_name = "A,B",
        value_delimiter = ',',
        required = true
    )]
    pub factors: Vec<String>,
    /// Analyse log10(response): for effects that multiply rather than add (all responses must be > 0).
    #[arg(long = "log")]
    pub log: bool,
    #[command(flatten)]
    pub json: crate::cli::Json,
    /// Confidence level of the F-Table column.
    #[arg(long = "confidence", value_name = "P", default_value_t = 0.95)]
    pub confidence: f64,
    /// Write residuals-vs-predicted and normal Q-Q plots (SVG) into this directory.
    #[arg(long = "plots", value_name = "DIR")]
    pub plots: Option<PathBuf>,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    response: &'a str,
    #[serde(flatten)]
    anova: &'a Anova,
}

pub fn run(a: AnovaArgs) -> Result<(), Fatal> {
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        return Err(Fatal::usage(anyhow!(
            "--confidence {} must be between 0 and 1 (e.g. 0.95)",
            a.confidence
        )));
    }
    let factors: Vec<String> = a.factors.iter().map(|f| f.trim().to_string()).collect();
    let mut observations = Vec::new();
    for file in &a.files {
        let input: Box<dyn Read> = if file.as_os_str() == "-" {
            Box::new(io::stdin().lock())
        } else {
            Box::new(
                File::open(file)
                    .with_context(|| format!("cannot open {}", file.display()))
                    .map_err(Fatal::usage)?,
            )
        };
        observations
            .extend(anova::read_csv(input, &a.response, &factors).map_err(data_error(file))?);
    }
    let all = a
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let opts = AnovaOptions {
        log10: a.log,
        confidence: a.confidence,
    };
    let result =
        anova::analyse(&factors, &observations, &opts).map_err(data_error(Path::new(&all)))?;

    if let Some(dir) = &a.plots {
        write_plots(dir, &a.response, &result).map_err(Fatal::runtime)?;
    }
    if a.json.on {
        let out = JsonOut {
            response: &a.response,
            anova: &result,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(Fatal::runtime)?
        );
    } else {
        println!("Response: {}", a.response);
        print!("{}", anova::format_table(&result));
    }
    Ok(())
}

/// Problems with the data are the user's to fix (exit 2), I/O errors are runtime errors (exit 1).
fn data_error(file: &Path) -> impl Fn(AnovaError) -> Fatal + '_ {
    move |e| {
        let io = matches!(&e, AnovaError::Csv(c) if c.is_io_error());
        let e = anyhow::Error::new(e).context(format!("{}", file.display()));
        if io {
            Fatal::runtime(e)
        } else {
            Fatal::usage(e)
        }
    }
}

fn write_plots(dir: &Path, response: &str, a: &Anova) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let [residuals, normal_qq] = anova::residual_plots(a, response);
    for (name, p) in [("residuals.svg", residuals), ("qq.svg", normal_qq)] {
        let path = dir.join(name);
        let svg = plot::chart_svg(&p)?;
        plot::write_svg(&path, &svg).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
