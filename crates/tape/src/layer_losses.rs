//! Events lost outside tape's rings by a layer built on tape (the
//! `tracing` bridge, `tape-tracing`): counters it registers, each written
//! into every trace's `env` as `events_lost_<what> = N;`, where `tape
//! stats` and `tape check` add them to the trace's losses (babeltrace2
//! reads them as metadata, without printing them).
//!
//! ```text
//!  env {
//!      ...
//!      events_lost_tracing_span_entries = 0;   // a layer's counter, at the save
//!      events_lost_tracing_span_exits = 3;
//!  };
//! ```
//!
//! A counter is a `&'static AtomicU64` the layer increments as it loses
//! (relaxed: a count read at a save, publishing nothing). Registration is
//! once per name, usually when the layer is made; a crash dump's metadata
//! is prepared when `tape::init` installs its handler, so a counter
//! registered later is in saves, snapshots and recordings, not in crash
//! dumps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, ErrorKind};

/// The registered counters: (env name, counter).
static COUNTERS: Mutex<Vec<(&'static str, &'static AtomicU64)>> = Mutex::new(Vec::new());

/// The prefix every counter's name has (what the readers look for).
pub const PREFIX: &str = "events_lost_";

/// Registers `counter` under `name` (`events_lost_` then lowercase ASCII
/// letters, digits and `_`); registering the same name and counter again
/// does nothing, another counter under a taken name is an error.
pub fn register(name: &'static str, counter: &'static AtomicU64) -> Result<(), Error> {
    let rest = name.strip_prefix(PREFIX).unwrap_or("");
    if rest.is_empty()
        || !rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(Error::new(
            ErrorKind::Config,
            format!(
                "loss counter {name:?}: a name is `{PREFIX}` then lowercase letters, digits and \
                 `_`"
            ),
        ));
    }
    let mut all = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    match all.iter().find(|(n, _)| *n == name) {
        Some((_, c)) if std::ptr::eq(*c, counter) => Ok(()),
        Some(_) => Err(Error::new(
            ErrorKind::Duplicate,
            format!("loss counter {name:?} is registered already, with another counter"),
        )),
        None => {
            all.push((name, counter));
            Ok(())
        }
    }
}

/// Every registered counter's name and value now (at most `i64::MAX`, an
/// `env` integer's largest).
pub(crate) fn values() -> Vec<(&'static str, i64)> {
    COUNTERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        // Relaxed: see the module docs.
        .map(|(n, c)| (*n, c.load(Ordering::Relaxed).min(i64::MAX as u64) as i64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: AtomicU64 = AtomicU64::new(0);
    static B: AtomicU64 = AtomicU64::new(0);

    #[test]
    fn names_are_checked_and_taken_once() {
        for bad in [
            "lost",
            "events_lost_",
            "events_lost_Span",
            "events_lost_a-b",
            "x_events_lost_a",
        ] {
            assert!(register(bad, &A).is_err(), "{bad}");
        }
        register("events_lost_unit_a", &A).unwrap();
        register("events_lost_unit_a", &A).unwrap();
        let e = register("events_lost_unit_a", &B).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Duplicate);
        A.store(u64::MAX, Ordering::Relaxed);
        assert!(values().contains(&("events_lost_unit_a", i64::MAX)));
    }
}
