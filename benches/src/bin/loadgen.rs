//! Raw-echo load generator; see `loadgen --help`.

use std::process::ExitCode;

use clap::Parser;
use corewire_bench::loadgen::accept_storm::run_accept_storm;
use corewire_bench::loadgen::cli::{Cli, Command};
use corewire_bench::loadgen::closed_loop::{run_closed_loop, run_probe};
use corewire_bench::report::print_json;

fn main() -> ExitCode {
    let command = Cli::parse().load.command();
    let errors = match command {
        Command::ClosedLoop(cfg) => {
            let r = run_closed_loop(&cfg);
            print_json(&r);
            r.errors
        }
        Command::Probe(cfg) => {
            let r = run_probe(&cfg);
            print_json(&r);
            r.errors
        }
        Command::AcceptStorm(cfg) => {
            let r = run_accept_storm(&cfg);
            print_json(&r);
            r.errors
        }
    };
    // The report is printed either way; a non-zero exit tells scripts the numbers include
    // failures.
    if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
