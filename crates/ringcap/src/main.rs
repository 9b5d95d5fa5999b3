//! ringcap: the command-line front end. Parsing, wiring and printing only; the work lives in the crates.

mod analyze_cmd;
mod anova_cmd;
mod archive_cmd;
mod bench_cmd;
mod capture_cmd;
mod capture_stats;
mod cli;
mod collect_cmd;
mod config;
mod convert_cmd;
mod cpusage_cmd;
mod dist_cmd;
mod extcap;
mod gen_cmd;
mod generate_cmd;
mod index_cmd;
mod logging;
mod metrics;
mod privileges;
mod progress;
mod query_cmd;
mod query_sources;
mod repair_cmd;
mod serve_check;
mod serve_cmd;
mod synth_cmd;
mod xdp_metrics;
mod xdp_summary;

use clap::Parser;
use std::process::ExitCode;

/// An error that ends the program, with the exit code it means.
#[derive(Debug)]
pub struct Fatal {
    /// 2: usage or configuration (the user must change the command); 1: runtime (I/O, capture).
    pub code: u8,
    pub error: anyhow::Error,
}

impl Fatal {
    pub fn usage(error: impl Into<anyhow::Error>) -> Fatal {
        Fatal {
            code: 2,
            error: error.into(),
        }
    }
    pub fn runtime(error: impl Into<anyhow::Error>) -> Fatal {
        Fatal {
            code: 1,
            error: error.into(),
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // serve's check of a query, in a child of its own (see serve_check): not a command.
    if args.get(1).is_some_and(|a| a == serve_check::SUBCOMMAND) {
        return serve_check::child_main(&args[2..]);
    }
    logging::init();
    let result = if extcap::is_extcap_call(&args) {
        extcap::run(args)
    } else {
        parse_and_run(cli::with_default_subcommand(args))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // One line (plus causes): what went wrong and what to do.
            log::error!("{:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

/// Parse the command line (with the keys of `capture --config FILE` spliced in) and run the command.
fn parse_and_run(args: Vec<std::ffi::OsString>) -> Result<(), Fatal> {
    let args = config::expand(args)?;
    let cli = cli::Cli::try_parse_from(&args).unwrap_or_else(|e| {
        let _ = e.print();
        let with_config = args
            .iter()
            .filter_map(|a| a.to_str())
            .any(|a| a == "--config" || a.starts_with("--config="));
        if e.use_stderr() && with_config {
            // A conflict or a missing flag may come from the file: show what clap was given.
            eprintln!(
                "note: with --config, the command line was: {}",
                config::shell_line(&args)
            );
        }
        std::process::exit(e.exit_code())
    });
    if let cli::Command::Capture(a) = &cli.command {
        logging::set_json(a.log_format == cli::LogFormat::Json);
        if a.check_config {
            println!("{}", config::shell_line(&args));
            eprintln!("ringcap: configuration OK");
            return Ok(());
        }
    }
    run(cli)
}

fn run(cli: cli::Cli) -> Result<(), Fatal> {
    match cli.command {
        cli::Command::Capture(a) => capture_cmd::run(*a),
        cli::Command::Dist(a) => dist_cmd::run(a),
        cli::Command::Gen(a) => gen_cmd::run_gen(a),
        cli::Command::Replay(a) => gen_cmd::run_replay(a),
        cli::Command::Synth(a) => synth_cmd::run(a),
        cli::Command::Repair(a) => repair_cmd::run(a),
        cli::Command::Anova(a) => anova_cmd::run(a),
        cli::Command::Cpusage(a) => cpusage_cmd::run(a),
        cli::Command::Convert(a) => convert_cmd::run(a),
        cli::Command::Analyze(a) => analyze_cmd::run(a),
        cli::Command::Bench(a) => bench_cmd::run_bench(a),
        cli::Command::Report(a) => bench_cmd::run_report(a),
        cli::Command::Collect(a) => collect_cmd::run_collect(a),
        cli::Command::Dedup(a) => collect_cmd::run_dedup(a),
        cli::Command::Index(a) => index_cmd::run(a),
        cli::Command::Query(a) => query_cmd::run(a),
        cli::Command::Serve(a) => serve_cmd::run(a),
        cli::Command::Archive(a) => archive_cmd::run(a),
        cli::Command::Generate(w) => generate_cmd::run(w),
    }
}
