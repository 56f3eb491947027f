//! Per-thread rings of packets: the emit path, loss accounting and the
//! consistent snapshot taken by a save. These files hold the crate's real
//! `unsafe`.
//!
//! | file | what it holds |
//! |---|---|
//! | `buffer.rs` | the ring: its region (head, counters, gate, slot metadata, packet memory), made on the heap or in a shared file; [`Drops`] |
//! | `gate.rs` | the owner's entries into slots, a copier's pin and claim (model-checked) |
//! | `emit.rs` | the emit path: [`try_emit`], [`emit`], the filtered emits, packet switches |
//! | `lifecycle.rs` | a thread's writer state, its ring's creation, its exit, fork |
//! | `list.rs` | every ring of the process, the exited ones kept for a save, the mode |
//! | `outside.rs` | events lost where no ring could count them |
//! | `snapshot.rs` | the copy a save or a reader takes of a ring, packet by packet |
//! | `stats.rs` | [`stats`]: what the rings hold and lost |
//! | `threads.rs` | the thread filter (`tape ctl PID threads`) |
//! | `shm.rs`, `cut.rs`, `dirs.rs` | shared ring files, their process file and template; files cut under a mapping; the user's ring directories |
//!
//! Each file uses only the ones listed after it in this order: `stats`,
//! `emit`, `lifecycle`, `threads`, `list`, `snapshot`, `buffer`,
//! `outside`, `dirs`, `shm`, `gate`, `cut` (`tests/it/layout.rs` keeps it so).
//!
//! # Layout
//!
//! Each thread that emits gets one `Ring` on its first enabled event: `N`
//! fixed-size **slots**, each holding the events of one **packet** (LTTng's
//! sub-buffers). Packets are numbered `k = 0, 1, 2, ...`; packet `k` lives in
//! slot `k % N`.
//!
//! ```text
//!  ring memory (N slots of S bytes)                 per-slot metadata (atomics)
//! +------------------+------------------+-----+     +------------------------------+
//! | slot 0: packet 4 | slot 1: packet 5 | ... |     | ts_begin  ts_end  content    |
//! | ev ev ev ev ev . | ev ev ev ....... |     |     | committed_before             |
//! +------------------+------------------+-----+     | dropped_at_close             |
//!                         ^ off                     +------------------------------+
//!  head.pos = (k << 32) | off   (k = 5: the packet being written, off = bytes used)
//!
//!  event, packed, byte aligned, native byte order:
//! +--------+--------------+---------------------------+
//! | id u16 | timestamp u64| fields (see field.rs)     |
//! +--------+--------------+---------------------------+
//! ```
//!
//! The packet header and context are *not* in the ring: a save writes them
//! from the slot metadata, so the ring holds only events and its layout is
//! free of CTF concerns.
//!
//! # The emit path
//!
//! The writer state (slot base, offset, capacity) lives in a const-initialised
//! thread local with no destructor, so reaching it is one `fs:`-relative
//! access. An emit checks `off + size <= capacity`, copies the event, reads
//! the clock and publishes with one `Release` store of `head.pos` (plus
//! relaxed stores of the last timestamp and of the count of events written,
//! on the same cache line). No lock, no atomic read-modify-write,
//! no allocation, no syscall. That common case is [`try_emit`], a leaf that
//! calls no function (so a tracepoint's out-of-line `__record` saves no
//! register and sets up no frame: issue 23); everything else is the cold
//! path, [`emit`]: creating the ring (the first event of a thread
//! allocates, as the issue allows; call [`crate::register_thread`] earlier
//! to avoid it), switching packets, dropping, the fallback clock, and
//! fields whose encoding calls `memcpy` (strings and slices over 64 bytes).
//!
//! # Modes and losses
//!
//! * **overwrite** (flight recorder): a switch reuses the oldest slot, so
//!   the ring always holds the newest `N - 1` full packets plus the one being
//!   written. The overwritten packets' events are lost; how many is known
//!   from `committed_before` of the oldest packet still held, which the
//!   switch stores as the ring's `overwritten` count (so that
//!   `written = recorded + overwritten`, `head.written` counting every
//!   event written).
//! * **discard**: when packet `N - 1` is full, new events are dropped and
//!   counted (`full`).
//!
//! Events larger than a slot are dropped (`big`); an emit that interrupts
//! another on the same thread (a signal handler, a probe) is dropped
//! (`busy`); so is an event that would overwrite a packet a save has yet to
//! copy (`saving`, see "The snapshot"). Every cause reaches the trace,
//! cumulative per stream as LTTng writes `events_discarded`: all in the
//! packet context's `events_discarded`, and each in a field of its own in
//! the trace's losses stream (`lost_<cause>`, `metadata.rs`).
//!
//! # The snapshot
//!
//! A save runs on another thread while the owner keeps emitting, and never
//! reads a byte the owner may be writing at the same time (that would be a
//! data race under the memory model, even if the copy were discarded):
//!
//! 1. The save *pins* the ring's packets from the oldest still there on
//!    (the gate, `ring/gate.rs`): the owner cannot overwrite a pinned
//!    packet; an event that would is dropped and counted (`saving`).
//! 2. `pos1 = head.pos.load(Acquire)` — pairs with the `Release` store that
//!    published the last event or packet switch: every event byte below
//!    `off1` in packet `k1`, and the metadata of that packet's slot, are
//!    visible, and the owner writes only beyond `off1` while `k1` is open.
//! 3. The packets from the pinned one to `k1` are copied oldest first, one
//!    at a time (`content` bytes of a closed packet, `off1` of the open
//!    one), the pin moving past each as soon as it is copied; the caller
//!    writes each out before the next is copied, so a save holds one
//!    packet, not a copy of the ring.
//!
//! So a saved packet holds exactly the complete events that were committed,
//! never a torn one, never one from a previous lap. `ring/gate.rs` draws the
//! protocol, argues its orderings, and model-checks it with loom.
//!
//! A packet switch writes the new packet's metadata (`ts_begin`,
//! `committed_before`) after entering its slot and before publishing it in
//! `head.pos`, so a save that sees the packet open sees its metadata.
//!
//! The same protocol serves readers in other processes, through the ring's
//! file (`ring/shm.rs`): `tape recover` walks a dead process's rings as a
//! save does (`Ring::open_recovered`), `tape record` and `tape pipe`
//! stream a running one's from a cursor (`Ring::stream_packets`), the
//! gate's copy claim making them and this process's saves take turns.

pub(crate) mod buffer;
pub(crate) mod cut;
pub mod dirs;
pub(crate) mod emit;
mod gate;
pub(crate) mod lifecycle;
pub(crate) mod list;
pub(crate) mod outside;
pub mod shm;
pub(crate) mod snapshot;
pub(crate) mod stats;
pub mod threads;

pub use buffer::Drops;
pub use buffer::Ring;
pub use emit::{emit, try_emit, try_emit_with};
pub(crate) use emit::{emit_if, emit_tested, with_current};
pub(crate) use lifecycle::has_ring;
pub use lifecycle::register_thread;
pub(crate) use list::{rejected, release_saved, rings, with_rings_for_crash};
pub use list::{set_mode, MAX_EXITED_RINGS};
pub(crate) use outside::{
    lost_outside_rings, DROPPED_NO_MEMORY, DROPPED_NO_RING, EVENTS_LOST_EXITED,
};
pub(crate) use snapshot::CopyError;
pub use snapshot::{PacketMeta, StreamStop, CLAIM_PATIENCE};
pub use stats::{stats, Stats, ThreadStats};
