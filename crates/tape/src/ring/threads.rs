//! The thread filter: record only some threads (ftrace's `set_event_pid`).
//!
//! A filter is a list of thread ids and thread-name globs (`1234`,
//! `worker-*`); a thread records if it matches one. Each ring carries a
//! flag, set here for the threads left out; the owner thread applies it in
//! its cold path: at its first event (a new thread is filtered from birth),
//! at its next packet switch, and then at every event while it is left out
//! (its room is set to 0 so that each emit reaches the cold path, which
//! counts the event as `filtered`, not as lost). So the emit path's fast
//! path is unchanged, and a thread left out stops recording at its next
//! packet switch: at most one packet of events later (64 KiB by default),
//! as ftrace applies `set_event_pid` at each CPU's next `sched_switch`. A
//! thread let in again records from its next event. Events recorded before
//! a thread was left out stay in its ring, as ftrace's buffer keeps them.

use std::sync::Mutex;

use crate::error::{Error, ErrorKind};

/// A parsed filter.
struct Filter {
    words: Vec<String>,
    tids: Vec<u32>,
    names: Vec<globset::GlobMatcher>,
}

impl Filter {
    fn selects(&self, tid: u32, name: &str) -> bool {
        self.tids.contains(&tid) || self.names.iter().any(|g| g.is_match(name))
    }
}

static FILTER: Mutex<Option<Filter>> = Mutex::new(None);

fn filter() -> std::sync::MutexGuard<'static, Option<Filter>> {
    FILTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Applies the current filter to a new ring, under the filter's lock (a
/// `set` either finished before, and this sees it, or starts after, and
/// finds the ring in the registry, where it was put first).
pub(crate) fn apply_to(ring: &super::buffer::Ring) {
    let f = filter();
    let out = f
        .as_ref()
        .is_some_and(|f| !f.selects(ring.tid(), &ring.name));
    ring.set_filtered(out);
}

/// Records only the threads that `words` name: thread ids, or globs on
/// thread names. Returns what it did, thread by thread.
pub fn set(words: &[&str]) -> Result<String, Error> {
    if words.is_empty() {
        return Err(Error::new(
            ErrorKind::Command,
            "`threads` takes thread ids or thread-name globs (`threads 1234 'worker-*'`), or \
             --all",
        ));
    }
    let mut f = Filter {
        words: words.iter().map(|w| (*w).to_owned()).collect(),
        tids: Vec::new(),
        names: Vec::new(),
    };
    for w in words {
        if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) {
            let tid = w.parse().map_err(|_| {
                Error::new(ErrorKind::Command, format!("thread id {w:?} is too large"))
            })?;
            f.tids.push(tid);
        } else {
            let g = globset::GlobBuilder::new(w)
                .literal_separator(false)
                .build()
                .map_err(|e| {
                    Error::new(
                        ErrorKind::BadPattern,
                        format!("bad thread-name glob {w:?}: {}", e.kind()),
                    )
                })?;
            f.names.push(g.compile_matcher());
        }
    }
    let mut guard = filter();
    for r in super::list::rings() {
        r.set_filtered(!f.selects(r.tid(), &r.name));
    }
    *guard = Some(f);
    drop(guard);
    Ok(describe())
}

/// Lets every thread record again.
pub fn clear() -> String {
    let mut guard = filter();
    for r in super::list::rings() {
        r.set_filtered(false);
    }
    *guard = None;
    drop(guard);
    describe()
}

/// The filter and each thread's state, one line each.
pub fn describe() -> String {
    let rings = super::list::rings();
    let mut out = match filter().as_ref() {
        None => "threads: all\n".to_owned(),
        Some(f) => format!("threads: {}\n", f.words.join(" ")),
    };
    for r in rings.iter().filter(|r| !r.exited()) {
        out.push_str(&format!(
            "thread {} ({}): {}\n",
            r.tid(),
            r.name,
            if r.is_filtered() {
                "left out (from its next packet)"
            } else {
                "recording"
            }
        ));
    }
    out
}

/// The filter as `status` shows it.
pub(crate) fn summary() -> String {
    match filter().as_ref() {
        None => "all".into(),
        Some(f) => {
            let rings = super::list::rings();
            let live: Vec<_> = rings.iter().filter(|r| !r.exited()).collect();
            let on = live.iter().filter(|r| !r.is_filtered()).count();
            format!(
                "{} ({on} of {} threads recording)",
                f.words.join(" "),
                live.len()
            )
        }
    }
}
