//! Streaming to LTTng's relay daemon (`lttng-relayd`), the collector that
//! babeltrace2 and Trace Compass read live (issue 39): the producer
//! protocol's bytes (`wire`) and a connection that speaks it (`client`).
//! `tape record --relayd` will feed it from the same consuming reader of
//! the shared rings that `tape record -o DIR` and `tape pipe` use.
//!
//! **No authentication.** The relay daemon trusts every peer and has no
//! TLS: keep it on loopback, a trusted network, or an ssh tunnel.

pub(crate) mod client;
pub(crate) mod wire;
