//! tape-ctf's integration tests, one module per file, in one binary
//! (issue 37: a binary per file took most of the test command's time
//! linking). The helpers they share are declared once, here.

use tape_test_support::{mutate, shared};

mod babeltrace_expect;
mod fuzz_corpus;
mod graph;
mod layout;
mod mutations;
mod parallel;
mod strict;
mod test_command;
mod values;
