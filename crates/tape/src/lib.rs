//! # tape: a tape recorder for a running Rust program
//!
//! Tracepoints in the code record **events**, with nanosecond timestamps and
//! typed fields, into per-thread **rings** of packets; at any moment the
//! rings can be **saved** as a trace in the Common Trace Format (CTF 1.8),
//! which babeltrace2, babeltrace 1.5 and Trace Compass open as they are.
//!
//! ```no_run
//! tape::tracepoint! {
//!     /// A packet was received.
//!     pub fn net_rx(port: u16, len: u32, ifname: &str) = "app.net.rx";
//! }
//!
//! fn main() -> Result<(), tape::Error> {
//!     let _tape = tape::init()?;         // TAPE_TRACE=app.net.* etc.; saves at the end
//!     tape::enable_pattern("app.net.*")?; // or at run time
//!     net_rx(3, 1500, "eth0");           // ~1 load + branch when disabled
//!     if net_rx::enabled() { /* costly argument preparation */ }
//!     let dir = tape::save()?;           // any time, while threads emit
//!     println!("babeltrace2 {}", dir.display());
//!     Ok(())
//! }
//! ```
//!
//! ## Contents
//!
//! * [`tracepoint!`] declares tracepoints; [`Tracepoint`] is the tracepoint
//!   object and its packed state word; [`field`] the field types and their CTF
//!   form.
//! * [`probe`]: callbacks attached to tracepoints at run time, typed
//!   (`net_rx::attach(|port, len, ifname| ..)`) or untyped (an [`probe::Event`]
//!   view, by name or pattern), and `synchronize`.
//! * [`filter`]: the kernel's event filter expressions, compiled against a
//!   tracepoint's fields and evaluated on encoded events.
//! * [`trigger`]: the kernel's event triggers (`traceoff:1 if depth > 1000`,
//!   `snapshot`, `stacktrace`, `enable_event:PATTERN`...), fired on the
//!   emitting thread without blocking.
//! * [`registry`]: link-section registration, ids, duplicates, selection by
//!   name, glob or regex.
//! * The rings (private: `ring/`): per-thread rings of packets, the emit path,
//!   loss counters ([`stats`], [`Drops`]) and the consistent snapshot.
//! * [`clock`]: TSC or fallback clock, calibration.
//! * [`save()`](fn@save), [`save_to`]: the trace directory, written atomically.
//! * [`config`]: `TAPE_TRACE*` variables and the [`Config`] builder.
//! * [`crash`]: dump on crash: the trace saved on a panic or a fatal signal,
//!   with a `tape.crash` event, from an async-signal-safe handler.
//! * [`control`]: `tape ctl`: ftrace's control files (tracing_on, set_event,
//!   buffer_size_kb, snapshot, stats) as commands over a socket reachable by
//!   the process's own user, and as library functions.
//!
//! ## Floors
//!
//! The files of this crate stand on floors; each uses only its own floor
//! and those below it, and no two files use each other, even through
//! others (`tests/it/layout.rs` fails on an import that goes up, naming the
//! file, the line and both floors). Where a lower floor must reach a
//! higher one, the higher registers a hook (`registry::on_change`,
//! `registry::on_register`, the snapshot thread's services, the control
//! server's commands).
//!
//! | floor | modules | what they are |
//! |---|---|---|
//! | control | `config`, [`control`], [`crash`] | the composition root (the environment, the builder, the guard), `tape ctl`, dump on crash |
//! | features | [`probe`], [`filter`], [`trigger`], `traced`, [`latency`], `printk`, `snapshot` | what runs at a tracepoint or beside the rings |
//! | storage | `ring`, `save` | per-thread rings, the emit path, snapshots, shared ring files, trace directories |
//! | schema | `metadata`, `template` | the CTF description of a trace, and the same with holes |
//! | model | `point`, [`registry`] | the tracepoint and its state word; the set of them, `printk!` sites |
//! | base | `error`, `sys`, `knobs`, [`clock`], [`field`], `layer_losses` | errors, OS helpers, the settings every floor reads, time, field types |
//!
//! ## Guarantees
//!
//! The emit path never locks, allocates (except a thread's very first event,
//! which creates its ring: see [`register_thread`]), makes a syscall or
//! panics; every event it cannot record is counted and reported in the trace
//! (`events_discarded`). A save taken while threads emit never contains a
//! torn event.

#![deny(unsafe_op_in_unsafe_fn)]

extern crate self as tape;

// The modules shown are what an instrumented program uses (ten: held by
// `tests/it/public_items.rs`); the rest are private, and what the macros
// and tape's other crates need of them goes through the hidden doors below
// (`__private`, `__consumer`).
pub mod clock;
pub mod config;
pub mod control;
pub mod crash;
mod dump_text;
mod end;
mod error;
pub mod field;
pub mod filter;
mod knobs;
pub mod latency;
mod layer_losses;
mod metadata;
mod point;
mod printk;
pub mod probe;
pub mod registry;
mod ring;
mod save;
mod snapshot_thread;
mod sys;
mod template;
mod traced;
pub mod trigger;
mod usdt;
mod view;

pub use config::{init, ClockChoice, Config, Guard, Mode};
pub use error::{Error, ErrorKind};
pub use field::{Element, Encode, Field, FieldDesc, Hex, Layout, RawEnum};
pub use point::{Tracepoint, TracepointDesc};
pub use registry::{
    disable, disable_glob, disable_pattern, disable_regex, enable, enable_glob, enable_pattern,
    enable_regex, lookup, select, tracepoints,
};
pub use ring::{register_thread, stats, Drops, Stats, ThreadStats};
pub use save::{save, save_to};
/// Derives [`Field`] for a fieldless enum: a CTF enumeration, shown by name
/// (see [`field::Symbolic`]).
pub use tape_macros::Enum;
/// Derives [`Field`] for a struct with named fields: a CTF struct of them.
///
/// ```
/// #[derive(tape::Fields)]
/// struct Hdr<'a> { len: u16, proto: u8, name: &'a str }
///
/// tape::tracepoint! {
///     pub fn rx(hdr: &Hdr<'_>, port: u16) = "app.net.rx";
/// }
///
/// fn main() {
///     rx(&Hdr { len: 60, proto: 6, name: "eth0" }, 3);
/// }
/// ```
pub use tape_macros::Fields;

/// Leaves a function of a `#[tape::traced]` `impl` or module untraced.
pub use tape_macros::notrace;
/// Traces a function, the methods of an `impl` or the functions of an
/// inline module: each call records its entry and exit as the tracepoints
/// `fn.<module path>.<function>.entry` / `.exit` (ftrace's function and
/// function_graph tracers; the guide's chapter 7, `docs/07-function-tracer.md`).
///
/// ```
/// #[tape::traced]
/// fn parse(line: &str) -> usize {
///     line.len()
/// }
/// tape::enable_pattern("fn.*").unwrap();
/// assert_eq!(parse("abc"), 3);
/// ```
///
/// `#[tape::traced(args(a, ..), ret)]` on a function or a method also
/// records the arguments named with its entry (drawn `f(a=1) {` by `tape
/// graph`, as funcgraph-args does) and its return value as the event
/// `fn.<path>.<function>.ret` just before the exit (drawn `f(); /* = 42 */`
/// or `} /* f = 42 */`, as funcgraph-retval does; a panic records no
/// value). The types must be field types ([`Field`]) that a static can
/// name:
///
/// ```
/// #[tape::traced(args(key, name), ret)]
/// fn lookup(key: u64, name: &str) -> Option<u32> {
///     (key == 7).then_some(name.len() as u32)
/// }
/// tape::enable_pattern("fn.*").unwrap();
/// assert_eq!(lookup(7, "seven"), Some(5));
/// ```
///
/// An argument that is not there, a generic type, and an async function
/// (whose polls carry their call id instead) are compile errors:
///
/// ```compile_fail
/// #[tape::traced(args(nope))]
/// fn f(x: u32) -> u32 { x }
/// ```
///
/// ```compile_fail
/// #[tape::traced(ret)]
/// fn g<T: Default>() -> T { T::default() }
/// ```
///
/// ```compile_fail
/// #[tape::traced(args(x))]
/// async fn h(x: u32) -> u32 { x }
/// ```
pub use tape_macros::traced;
/// Declares tracepoints.
///
/// ```
/// tape::tracepoint! {
///     /// A packet was received.
///     pub fn net_rx(port: u16, len: u32, ifname: &str) = "app.net.rx";
///     /// Compiled in only with the `fast-path` feature (DPDK's RTE_TRACE_POINT_FP).
///     #[fast_path]
///     pub fn net_poll(budget: u32) = "app.net.poll";
/// }
/// net_rx(3, 1500, "eth0");
/// assert!(!net_rx::enabled());
/// assert_eq!(net_rx::TRACEPOINT.name(), "app.net.rx");
/// ```
///
/// Each item generates a function that emits the event (inlined: a disabled
/// tracepoint costs one relaxed load and a branch; the recording is out of
/// line) and a module of the same name with `TRACEPOINT` (the registered
/// [`Tracepoint`]), `enabled()`, and `attach` / `attach_with_priority` for
/// typed probes (see [`probe`]).
/// Names are dotted lowercase words (`crate.subsystem.event`), checked at
/// compile time: these do not compile.
///
/// ```compile_fail
/// tape::tracepoint! { pub fn rx(port: u16) = "App.Net.Rx"; } // uppercase
/// ```
/// ```compile_fail
/// tape::tracepoint! { pub fn rx(port: u16) = "rx"; } // no dot
/// ```
/// ```compile_fail
/// tape::tracepoint! { pub fn rx(port: u16) = "app..rx"; } // empty word
/// ```
///
/// **Event classes** (the kernel's DECLARE_EVENT_CLASS / DEFINE_EVENT):
/// the fields and the format are declared once, then any number of events
/// of that shape, each with its own name and id. The events of a class
/// share one encoder (`sched_wakeup_template::emit`, out of line); each
/// keeps its own inlined enabled test. An event may bring a format of its
/// own (DEFINE_EVENT_PRINT). Events go inside their class's block.
///
/// **Formats** (`#[format("...")]`) are applied at read time only: the
/// trace stores them in its `env` block, and `tape show --format ftrace`
/// prints with them (`{field}`, `{field:03}`, `{field:#x}`, `{hdr.len}`;
/// see `tape_ctf::ftrace`, the reader's). Recording costs the same with or without one.
/// A `{name}` that is not a field does not compile.
///
/// ```
/// tape::tracepoint! {
///     #[format("comm={comm} pid={pid} prio={prio} success={success} target_cpu={target_cpu:03}")]
///     pub class sched_wakeup_template(comm: [u8; 16], pid: i32, prio: i32, success: bool, target_cpu: u32) {
///         /// A task was woken.
///         pub fn sched_wakeup = "sched.wakeup";
///         /// A new task was woken.
///         pub fn sched_wakeup_new = "sched.wakeup_new";
///         #[format("comm={comm} pid={pid}")]
///         pub fn sched_waking = "sched.waking";
///     }
/// }
///
/// fn main() {
///     let mut comm = [0u8; 16];
///     comm[..4].copy_from_slice(b"bash");
///     sched_wakeup(comm, 4251, 120, true, 1);
///     assert_eq!(sched_wakeup::TRACEPOINT.desc().class, Some("sched_wakeup_template"));
/// }
/// ```
/// ```compile_fail
/// tape::tracepoint! {
///     #[format("pid={pid} cpu={cpu}")] // no field `cpu`
///     pub fn wakeup(pid: i32) = "sched.wakeup";
/// }
/// ```
///
/// Field types: see [`field`]; a type that is not a field does not compile:
///
/// ```compile_fail
/// tape::tracepoint! { pub fn rx(v: Vec<u8>) = "app.net.rx"; }
/// ```
pub use tape_macros::tracepoint;

/// Whether `#[fast_path]` tracepoints are compiled in (the `fast-path` feature).
pub const FAST_PATH: bool = cfg!(feature = "fast-path");

/// The Rust blocks of the README and of the guide (`docs/`), compiled and
/// run as doctests: one item per page (`tests/readme.rs` checks that every
/// page is here; the complete program that saves, `examples/readme.rs`, is
/// run there).
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../../../README.md")]
    pub struct Readme;
    #[doc = include_str!("../../../docs/01-instrument.md")]
    pub struct Chapter01Instrument;
    #[doc = include_str!("../../../docs/02-record.md")]
    pub struct Chapter02Record;
    #[doc = include_str!("../../../docs/03-probes.md")]
    pub struct Chapter03Probes;
    #[doc = include_str!("../../../docs/04-operate.md")]
    pub struct Chapter04Operate;
    #[doc = include_str!("../../../docs/05-flight-recorder.md")]
    pub struct Chapter05FlightRecorder;
    #[doc = include_str!("../../../docs/06-fleet.md")]
    pub struct Chapter06Fleet;
    #[doc = include_str!("../../../docs/07-function-tracer.md")]
    pub struct Chapter07FunctionTracer;
    #[doc = include_str!("../../../docs/08-kernel.md")]
    pub struct Chapter08Kernel;
    #[doc = include_str!("../../../docs/09-latency.md")]
    pub struct Chapter09Latency;
    #[doc = include_str!("../../../docs/10-tracing.md")]
    pub struct Chapter10Tracing;
    #[doc = include_str!("../../../docs/11-view.md")]
    pub struct Chapter11View;
    #[doc = include_str!("../../../docs/12-peers.md")]
    pub struct Chapter12Peers;
    #[doc = include_str!("../../../docs/13-limits.md")]
    pub struct Chapter13Limits;
    #[doc = include_str!("../../../docs/14-layout.md")]
    pub struct Chapter14Layout;
    #[doc = include_str!("../../../docs/README.md")]
    pub struct Index;
}

#[doc(hidden)]
pub mod __private {
    pub use crate::field::{copy_short_until_nul, nul_at, put_str};
    pub use crate::filter::emit_filtered;
    pub use crate::point::{is_active, records_only, RECORD};
    pub use crate::point::{FILTER, PROBES, TRIGGER};
    pub use crate::probe::{attach_typed, call as call_probes, DEFAULT_PRIORITY};
    pub use crate::registry::TRACEPOINTS;
    pub use crate::ring::{emit, try_emit, try_emit_with};
    pub use crate::trigger::hit as trigger_hit;
    pub use crate::usdt::USDT_SITES;
    pub use crate::FAST_PATH;
    pub use linkme;

    /// What `printk!` expands to.
    pub mod printk {
        pub use crate::printk::*;
    }
    /// What `#[tape::traced]` and tape-tracing's callsites use: the call
    /// and span descriptions, the entry and exit kinds.
    pub mod traced {
        pub use crate::traced::*;
    }
    /// What `tape::usdt!`'s notes and the USDT tools' tests use.
    pub mod usdt {
        pub use crate::usdt::*;
    }
    /// tape-tracing's loss counters, registered for the traces' losses.
    pub mod layer_losses {
        pub use crate::layer_losses::*;
    }
}

/// What a consumer in another process uses of the shared rings: the
/// `tape-consumer` crate (`tape record`, `tape pipe`, `tape recover`,
/// `tape ps`), as LTTng's consumer daemon uses `lttng-ust-ctl`. The rings'
/// layout and their copy protocol stay here, beside the emit path that
/// writes them (`ring/`, with its unsafe and its proofs); the consumer's
/// loop, its loss arithmetic and its sinks live there, so that an
/// instrumented program does not link them. Not an API for programs: its
/// items follow the consumer's needs.
#[doc(hidden)]
pub mod __consumer {
    pub use crate::clock::{
        civil_utc, clock_description, frequency, offsets, pairs_of_source, to_realtime_ns,
        MIN_CALIBRATION,
    };
    pub use crate::ring::{
        dirs, shm, Drops, PacketMeta, Ring, StreamStop, CLAIM_PATIENCE, MAX_EXITED_RINGS,
    };
    pub use crate::save::PACKET_MAGIC;
    pub use crate::save::{
        losses_packet, losses_packet_size, write_atomically, write_file, write_streams, Context,
    };
    pub use crate::sys::{
        boot_id, hostname, local_date, new_uuid, process_exists, sanitize, truncate_utf8,
    };
    pub use crate::template::{fill, Hole, AWAITING_ENV};

    /// Whether the programs a recorder starts will use the monotonic
    /// clock when asked (`TAPE_TRACE_CLOCK=monotonic`), read by the
    /// setting's own parser (`config::SETTINGS`).
    pub fn monotonic_asked() -> Result<bool, crate::Error> {
        crate::config::monotonic_asked()
    }

    /// An error of tape's kind, for what the consumer reports.
    pub fn error(kind: crate::ErrorKind, message: impl Into<String>) -> crate::Error {
        crate::Error::new(kind, message)
    }
}
