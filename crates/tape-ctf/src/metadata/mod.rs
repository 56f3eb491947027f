//! The metadata stage: TSDL text into the trace model.
//!
//! ```text
//! metadata file --read--> TSDL text --lexer--> tokens --parse--> Trace --validate--> checked Trace
//!                                                                 |
//!                                   the writer (`tape-ctf-model`): Trace --> TSDL text
//! ```
//!
//! The model itself (types, fields, classes, clocks, the trace) is
//! `tape-ctf-model`'s, re-exported at this crate's root. Nothing here decodes a stream.

pub(crate) mod formats;
pub(crate) mod lexer;
pub(crate) mod parse;
pub(crate) mod read;
pub(crate) mod validate;

// The metadata stage as other crates see it: finding and opening a
// trace's directory, and the read-time formats of its events.
pub use formats::{Executable, Formats, Hint};
pub use read::{find_traces, metadata_text, open_trace, plain_text_signature, OpenError, TraceDir};

/// A field name as shown: one leading `_` removed (§4.2.1).
pub fn shown_name(n: &str) -> &str {
    n.strip_prefix('_').unwrap_or(n)
}
