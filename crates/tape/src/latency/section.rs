//! Sections: `tape::latency::section!("name")`, a guard measured from its
//! creation to its drop (ftrace's irqsoff/preemptoff windows, for any
//! stretch of user code).
//!
//! ```text
//! let _s = tape::latency::section!("db.commit");   // here: clock read (tracer on)
//! ...                                              // the section's work
//! // scope end: clock read, compared with the section's maximum
//!
//!   registers two tracepoints of the function tracer's class fn_call:
//!     latency.db.commit.entry   recorded where the section starts
//!     latency.db.commit.exit    recorded where it ends (drop, `?`, panic)
//!   so `tape graph` draws a section as a call among the traced functions,
//!   and `tape profile` counts it.
//! ```
//!
//! A section's name is unique in the program, as a tracepoint's is (two
//! sites with one name are the registry's duplicate error).

use super::tracker::{Kind, Tracker, ON};
use crate::point::Tracepoint;
use crate::traced::Call;

/// A section's site: its tracepoints and its tracker. Made by
/// `tape::latency::section!`, one per use.
pub struct Site {
    pub(crate) tracker: Tracker,
    entry: &'static Tracepoint,
    exit: &'static Tracepoint,
}

impl Site {
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        at: &'static str,
        entry: &'static Tracepoint,
        exit: &'static Tracepoint,
    ) -> Site {
        Site {
            tracker: Tracker::new(name, Kind::Section, at, at),
            entry,
            exit,
        }
    }

    /// Starts the section: records its entry event if that is enabled, and
    /// reads the clock if the latency tracer is on. The guard ends it.
    #[inline(always)]
    pub fn start(&'static self) -> Section {
        let call = crate::traced::enter(self.entry, self.exit);
        // Relaxed: an independent switch; a section that starts just before
        // the tracer goes on is not measured.
        let start = if ON.load(std::sync::atomic::Ordering::Relaxed) {
            crate::clock::now()
        } else {
            0
        };
        Section {
            site: self,
            start,
            _call: call,
        }
    }

    /// The section's name.
    pub fn name(&self) -> &'static str {
        self.tracker.name
    }
}

/// A section in progress: measured when dropped (before its exit event is
/// recorded, so the events bracket the measured time).
#[must_use = "a section ends when its guard is dropped: bind it (`let _s = ...`)"]
pub struct Section {
    site: &'static Site,
    /// The clock at the start; 0 when not measured.
    start: u64,
    _call: Call,
}

impl Section {
    /// Ends the section here (as dropping it does).
    pub fn end(self) {}
}

impl Drop for Section {
    #[inline(always)]
    fn drop(&mut self) {
        if self.start != 0 {
            let end = crate::clock::now();
            self.site.tracker.measured(self.start, end, 0);
        }
    }
}

/// Starts a latency section named by a string literal, ended when the
/// returned guard is dropped: `let _s = tape::latency::section!("db.commit");`.
/// See [`crate::latency`].
#[doc(hidden)]
#[macro_export]
macro_rules! __latency_section {
    ($name:literal) => {{
        static __TAPE_SECTION_ENTRY_DESC: $crate::TracepointDesc =
            $crate::__private::traced::call_desc(
                ::core::concat!("latency.", $name, ".entry"),
                ::core::file!(),
                ::core::line!(),
                ::core::module_path!(),
            );
        static __TAPE_SECTION_EXIT_DESC: $crate::TracepointDesc =
            $crate::__private::traced::call_desc(
                ::core::concat!("latency.", $name, ".exit"),
                ::core::file!(),
                ::core::line!(),
                ::core::module_path!(),
            );
        static __TAPE_SECTION_ENTRY: $crate::Tracepoint =
            $crate::Tracepoint::new(&__TAPE_SECTION_ENTRY_DESC);
        static __TAPE_SECTION_EXIT: $crate::Tracepoint =
            $crate::Tracepoint::new(&__TAPE_SECTION_EXIT_DESC);
        #[$crate::__private::linkme::distributed_slice($crate::__private::TRACEPOINTS)]
        #[linkme(crate = $crate::__private::linkme)]
        static __TAPE_SECTION_ENTRY_REGISTER: &$crate::Tracepoint = &__TAPE_SECTION_ENTRY;
        #[$crate::__private::linkme::distributed_slice($crate::__private::TRACEPOINTS)]
        #[linkme(crate = $crate::__private::linkme)]
        static __TAPE_SECTION_EXIT_REGISTER: &$crate::Tracepoint = &__TAPE_SECTION_EXIT;
        static __TAPE_SECTION: $crate::latency::Site = $crate::latency::Site::new(
            $name,
            ::core::concat!($name, " (", ::core::file!(), ":", ::core::line!(), ")"),
            &__TAPE_SECTION_ENTRY,
            &__TAPE_SECTION_EXIT,
        );
        #[$crate::__private::linkme::distributed_slice($crate::latency::SECTIONS)]
        #[linkme(crate = $crate::__private::linkme)]
        static __TAPE_SECTION_REGISTER: &$crate::latency::Site = &__TAPE_SECTION;
        __TAPE_SECTION.start()
    }};
}
