//! The metadata stage: TSDL text into the trace model.
//!
//! ```text
//! metadata file --read--> TSDL text --lexer--> tokens --parse--> Trace --validate--> checked Trace
//!                                                                 |
//!                                                    tsdl (the writer): Trace --> TSDL text
//! ```
//!
//! The model itself (types, fields, classes, clocks, the trace) is the
//! crate's root. Nothing here decodes a stream.

pub(crate) mod lexer;
pub(crate) mod parse;
pub mod read;
pub(crate) mod tsdl;
pub(crate) mod validate;
