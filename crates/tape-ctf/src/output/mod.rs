//! The outputs: what a reader makes of decoded events, one module each
//! (`text/`: babeltrace2's text; `json`, `ftrace`, `graph`, `profile`,
//! `latency`: the latency snapshot's header; `perfetto`, `chrome`: the
//! exports), and their shared helpers (`event_text`: an event's text by its
//! read-time format, `function`: the function tracer's events, `calls`,
//! `export`). The text pieces the stream reader writes while it decodes
//! (numbers, strings, line programs, JSON values) are the decode stage's
//! (`crate::decode::text`, `crate::decode::json`). An output never uses
//! another output (`tests/it/layout.rs`).

pub(crate) mod calls;
pub(crate) mod chrome;
pub(crate) mod event_text;
pub(crate) mod export;
pub(crate) mod ftrace;
pub(crate) mod function;
pub(crate) mod graph;
pub(crate) mod json;
pub(crate) mod latency;
pub(crate) mod perfetto;
pub(crate) mod profile;
pub(crate) mod text;
