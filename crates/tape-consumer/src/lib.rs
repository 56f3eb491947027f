//! The consumer of tape's shared rings: what reads other processes' rings,
//! as LTTng's consumer daemon reads LTTng-UST's buffers through
//! `lttng-ust-ctl` — with no daemon: `tape record`, `tape pipe`,
//! `tape recover` and `tape ps` run it in the `tape` command.
//!
//! ```text
//!   instrumented program (crate tape)         tape-consumer (this crate)
//!   ring/  emit path, rings, their gate  <-- record: attach to a running process,
//!          shared ring files (shm)               take its packets with their losses,
//!   template  metadata with holes                move the reader's mark; sinks:
//!   tape::__consumer: the door                   a trace directory or a live reader
//!                                            recover: a dead process's rings as a
//!                                               trace; finding ring directories
//! ```
//!
//! The rings' layout and their copy protocol (claim, pin, copy, release,
//! the reader mark) stay in `tape` beside the emit path that writes them,
//! with their unsafe and its proofs; they reach this crate through one door,
//! `tape::__consumer`. What only a consumer does lives here: following a
//! process and its ring files, the loss arithmetic of a reader that comes
//! and goes, writing a growing trace, rebuilding a dead one's. An
//! instrumented program depends on `tape` alone and links none of it
//! (`tape/tests/it/dependencies.rs`).
//!
//! | floor | modules | what they are |
//! |---|---|---|
//! | kernel | [`kernel`] | ftrace's raw buffers read on the program's clock, written as a kernel trace beside it |
//! | process | [`recover`] | ring directories, a dead process's trace, its metadata and clock |
//! | reader | [`record`] | a running process read as it runs: packets, losses, the reader mark |
//!
//! (`tape/tests/it/layout.rs` keeps the floors.)

#![deny(unsafe_op_in_unsafe_fn)]

pub mod kernel;
pub mod record;
pub mod recover;
