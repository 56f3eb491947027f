//! tape-cli's integration tests, one module per file, in one binary:
//! linking one test binary per file against tape and tape-ctf took most
//! of the test command's time (issue 37). The helpers they share are
//! declared once, here. The mutation run (`tests/mutants.rs`) stays a
//! binary of its own: it runs for minutes, and its many processes would
//! crowd the timed tests here.

use tape_test_support::filter_table as filter_table_rows;
#[path = "../support/flight.rs"]
mod flight;
#[path = "../support/gen.rs"]
mod gen;
use tape_test_support::mutate;
#[path = "../support/pipeline.rs"]
mod pipeline;
use tape_test_support::shared;

/// Held by the tests that time latencies (`pipe`, the relay's live view) and by those that keep
/// both cores busy for seconds (`names`' 120 names and 70,000 callsites),
/// so that no such test runs beside another: a latency test beside
/// another test's checks measures them (the first lines of a pipe started
/// while another test parsed its 100,000 lines came 150-170 ms late on
/// this 2-core machine; beside the names tests, 0.9 s).
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

mod bounded;
mod conformance;
mod crash;
mod ctl;
mod differential;
mod export;
mod filter_formats;
mod filter_table;
mod first_hour;
mod graph;
mod hostile;
mod kernel;

mod latency;
mod layout;
mod losses;
mod names;
mod operated;
mod pipe;
mod reader_table;
mod readme_shell;
mod record;
mod recover;
mod relay;
mod relay_meddled;
mod samples;
mod shared_rings;
mod show_options;
mod stacktrace;
mod stop;
mod truncation;
mod usdt;
