//! Raw-echo load generator; see `corewire_bench::loadgen::cli::USAGE`.

use std::process::ExitCode;

use corewire_bench::args::Args;
use corewire_bench::loadgen::accept_storm::run_accept_storm;
use corewire_bench::loadgen::cli::{self, Command, USAGE};
use corewire_bench::loadgen::closed_loop::{run_closed_loop, run_probe};
use corewire_bench::report::print_json;

fn main() -> ExitCode {
    let command = match Args::from_env(&["probe", "server-syscalls"]).and_then(cli::parse) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("loadgen: {e}\nusage: {USAGE}");
            return ExitCode::from(2);
        }
    };
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
