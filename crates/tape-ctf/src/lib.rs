//! # tape-ctf: tape's reader of CTF 1.8 traces
//!
//! The reader half of tape: the TSDL parser and validator ([`metadata`]),
//! the stream decoder ([`decode`]), the merge of streams in time order
//! ([`merge`]) and the outputs (babeltrace2's text, JSON, ftrace's text,
//! the call graph, the profile, Perfetto and Chrome: [`output`]), which
//! `tape show` and the other commands of `tape-cli` run. It reads tape's
//! traces, DPDK's and LTTng's.
//!
//! The CTF model (types, fields, classes, clocks, the trace), its TSDL
//! writer and the decoded [`Value`] are `tape-ctf-model`'s, which the
//! recorder depends on alone; they are re-exported here, so a reader
//! names them `tape_ctf::Type`, `tape_ctf::Trace`...
//!
//! ```
//! use tape_ctf::{Clock, EventClass, Field, Integer, StreamClass, Struct, Trace, Type};
//!
//! let mut trace = Trace::new([7; 16]);
//! trace.packet_header = Some(Struct::new(vec![
//!     Field::new("stream_id", Type::Integer(Integer::unsigned(32))),
//! ]));
//! trace.clocks.push(Clock::new("monotonic", 1_000_000_000));
//! trace.streams.push(StreamClass {
//!     id: Some(0),
//!     event_header: Some(Struct::new(vec![
//!         Field::new("id", Type::Integer(Integer::unsigned(16))),
//!         Field::new("timestamp", Type::Integer(Integer::unsigned(64).mapped("monotonic"))),
//!     ])),
//!     ..StreamClass::default()
//! });
//! trace.events.push(EventClass::new("app.net.rx", 0, Struct::new(vec![
//!     Field::new("port", Type::Integer(Integer::unsigned(16))),
//! ])));
//! // Written by the model's TSDL writer, read back by the parser as
//! // babeltrace2 2.0 reads it (nothing beyond it).
//! let parsed = tape_ctf::parse_metadata_strict(&trace.to_tsdl().unwrap()).unwrap();
//! assert_eq!(parsed.trace.events[0].name, "app.net.rx");
//! ```
#![forbid(unsafe_code)]

pub use tape_ctf_model::*;

pub mod decode;
pub mod merge;
pub mod metadata;
pub mod output;

pub use metadata::parse::{parse_metadata, parse_metadata_strict, ParseError, Parsed};
pub use metadata::validate::validate;
