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

pub mod formats;
pub(crate) mod lexer;
pub(crate) mod parse;
pub mod read;
pub(crate) mod validate;

/// A field name as shown: one leading `_` removed (§4.2.1).
pub fn shown_name(n: &str) -> &str {
    n.strip_prefix('_').unwrap_or(n)
}
