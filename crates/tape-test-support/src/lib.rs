//! What the tests of tape's crates share, in one crate that each of them
//! takes as a dev-dependency (no test includes another crate's files by
//! `#[path]`, and no production source includes a test's):
//!
//! ```text
//! child          a child process run within a deadline
//! skipped        a check that cannot run here: a notice, or a failure
//!                under TAPE_REQUIRE_TOOLS=1 (CI)
//! shared         ../shared beside the repository: the CTF suites,
//!                babeltrace2's presence, generated LTTng-like traces
//! mutate         seeded random mutations of trace files
//! filter_table   the one table of filters that the process, `tape ctl`
//!                and the reader must answer alike, and its two rows
//! layout         a crate's files on floors, read from its source: the
//!                layout tests of tape, tape-consumer and tape-cli
//! text           captured text cut at the first of its markers
//! ```
//!
//! Not published: it exists for the tests, benches and examples of this
//! workspace.

pub mod child;
pub mod filter_table;
pub mod layout;
pub mod mutate;
pub mod shared;
pub mod skipped;
pub mod text;
