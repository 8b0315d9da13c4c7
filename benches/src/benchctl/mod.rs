//! `benchctl`: runs a named suite R times against servers started from command templates and
//! prints a markdown table of medians with ratios to a baseline, plus the exact commands.

pub mod catalog;
pub mod cli;
pub mod listen;
pub mod plan;
pub mod process;
pub mod record;
pub mod suite;
pub mod summary;
pub mod template;
