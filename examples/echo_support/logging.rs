//! Log set-up shared by the echo examples: warnings and up by default (`RUST_LOG` overrides),
//! to stderr so stdout carries only results, colours only on a terminal.

use std::io::IsTerminal;

pub fn init() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
