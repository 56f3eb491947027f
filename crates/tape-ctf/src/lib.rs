//! # tape-ctf: tape's reader of CTF 1.8 traces
//!
//! The reader half of tape: the TSDL parser and validator, finding and
//! opening traces ([`metadata`]), the stream decoder ([`decode`]), the
//! merge of streams in time order ([`merge`]) and the outputs, which
//! `tape show` and the other commands of `tape-cli` run. It reads tape's
//! traces, DPDK's and LTTng's.
//!
//! ## The surface, chosen
//!
//! What other crates use is named here, at most one module below the
//! root (`tape_ctf::decode::StreamReader`, never the file it lives in): the
//! three stages, each a module whose files are private behind its door,
//! and one module an output, each re-exporting from `output/` what its
//! command calls:
//!
//! | module        | what                                                    | used by            |
//! |---------------|---------------------------------------------------------|--------------------|
//! | [`metadata`]  | a trace's directory found, opened, its read-time formats | every command      |
//! | [`decode`]    | stream readers, their plan, value sinks, the text buffer | `show`, `pipe`, `stats` |
//! | [`merge`]     | streams merged in time order, losses in line             | every command      |
//! | [`text`]      | babeltrace2's text lines, one thread or several; JSON lines | `show`, `pipe` |
//! | [`ftrace`]    | ftrace's text layout                                     | `show --ftrace`    |
//! | [`graph`]     | the function_graph view                                  | `graph`            |
//! | [`profile`]   | the function profile, off-CPU time                       | `profile`          |
//! | [`latency`]   | a latency snapshot's header                              | `show --ftrace`    |
//! | [`export`]    | Perfetto's protobuf and Chrome's JSON trace              | `export`           |
//!
//! The folders below (`metadata/`, `decode/`, `merge/`, `output/`) keep
//! their floors (`tests/it/layout.rs`); a change of this surface shows
//! in `public-items.txt` (`crates/tape/tests/it/public_items.rs`).
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

pub use tape_ctf_model::{
    check_identifier, escape_name, is_identifier, name_of, quote, unescape_name, uuid_string, Base,
    ByteOrder, Clock, Encoding, Enum, EnumEntry, EnvValue, EventClass, Field, Float, Integer,
    StreamClass, Struct, Trace, TsdlError, Type, Value, KEYWORDS, LOSSES_STREAM, LOSSES_STREAM_ENV,
    LOSSES_STREAM_ID, LOSS_CAUSES, TRACER_NAME,
};

pub mod decode;
pub mod merge;
pub mod metadata;
mod output;

pub use metadata::parse::{parse_metadata, parse_metadata_strict, ParseError, Parsed};
pub use metadata::validate::validate;

pub mod text {
    //! babeltrace2's text lines (`output/text/`): an event's line written
    //! from its reader ([`write_event_line`], or its prefix and rest), and a
    //! merged trace rendered by several threads in order ([`render_merged`]);
    //! the JSON-lines twin of a line ([`write_json_line`]).

    pub use crate::output::json::write_json_line;
    pub use crate::output::text::parallel::{render_merged, Piece, Render, Seconds, Threads};
    pub use crate::output::text::{write_event_line, write_event_rest, write_line_prefix};
}

pub mod ftrace {
    //! ftrace's text layout (`output/ftrace.rs`): `trace`'s header and lines,
    //! events printed by their read-time formats.

    pub use crate::output::ftrace::{render, render_with_symbols, write_line, HEADER};
}

pub mod graph {
    //! The function_graph view (`output/graph.rs`) and which classes are a
    //! traced function's entry ([`entry_of`], `output/function.rs`).

    pub use crate::output::function::entry_of;
    pub use crate::output::graph::{
        render, render_streams, thread_ids, Event, FunctionFilter, Graph, Options, STREAM_THREADS,
    };
}

pub mod profile {
    //! The function profile and off-CPU time (`output/profile.rs`).

    pub use crate::output::profile::{gather_streams, off_cpu, OffCpu, Profile, SortBy, Stat};
}

pub mod latency {
    //! A latency snapshot's header (`output/latency.rs`), as ftrace's
    //! latency tracers print theirs.

    pub use crate::output::latency::Header;
}

pub mod export {
    //! The exports (`output/perfetto/`, `output/chrome.rs`, their shared
    //! `output/export.rs`): Perfetto's protobuf trace ([`perfetto`]) and the
    //! JSON trace event format ([`chrome`]), with the options, counters and
    //! report both take and give.

    pub use crate::output::chrome::export as chrome;
    pub use crate::output::export::{check_counters, CounterSpec, Exported, NameFilter, Options};
    pub use crate::output::perfetto::export as perfetto;
}
