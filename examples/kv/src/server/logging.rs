//! `loglevel` at run time: the binary installs how to change its log filter, CONFIG SET
//! calls it. A server started from code (tests) has none, and the level only is recorded.

use std::sync::OnceLock;

type SetLevel = Box<dyn Fn(&str) + Send + Sync>;

static SET_LEVEL: OnceLock<SetLevel> = OnceLock::new();

/// Installs the function that applies a Redis log level name (once per process).
pub fn install(set_level: impl Fn(&str) + Send + Sync + 'static) {
    let _ = SET_LEVEL.set(Box::new(set_level));
}

/// Applies `level` (`debug`, `verbose`, `notice`, `warning`) if a logger listens.
pub(crate) fn set_level(level: &str) {
    if let Some(set_level) = SET_LEVEL.get() {
        set_level(level);
    }
}

/// The `tracing` filter directive for a Redis log level.
pub fn filter_for(level: &str) -> &'static str {
    match level {
        "debug" => "debug",
        "verbose" => "debug",
        "warning" => "warn",
        _ => "info",
    }
}
