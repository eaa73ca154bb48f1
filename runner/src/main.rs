//! `runner`: validate, critique, draw and run LLM multi-agent plans.

mod apply;
mod cache;
mod cancel;
mod children;
mod cli;
mod critic;
mod decide;
mod diagnostics;
mod drive;
mod event_line;
mod exit;
mod explain;
mod fix;
mod forecast;
mod format;
mod graph;
mod grouping;
mod growing;
mod home;
mod live;
mod logs;
mod lsp;
mod models;
mod output;
mod past;
mod plan;
mod plan_limit;
mod probe;
mod provenance;
mod resume;
mod retry;
mod runs;
mod sarif;
mod schema;
mod scored;
mod serve;
mod status;
mod store;
mod survivors;
mod telemetry;
mod test;
mod unified;
mod validate;
mod worker;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let telemetry = telemetry::init(cli.log_format);
    let code = match cli::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            if let Some(code) = explain::code_of(&error) {
                eprint!("{}", explain::hint(&code));
            }
            ExitCode::from(exit::exit_code_of(&error))
        }
    };
    telemetry.finish();
    code
}

/// Output piped into `head` and closed early is not an error worth reporting.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
