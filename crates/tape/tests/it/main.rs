//! The tests of crates/tape that touch no recorder state of their own
//! process (the layout, the dependency tree, the compile errors, the
//! disabled tracepoint's machine code), in one binary (issue 37). The
//! others stay one binary per file: each owns its process's tape (its
//! configuration, its clock, its rings), as the module docs of each say.

#[path = "../common/mod.rs"]
mod common;

mod compile_fail;
mod dependencies;
mod disabled_cost;
mod layout;
mod public_items;
mod settings_reads;
