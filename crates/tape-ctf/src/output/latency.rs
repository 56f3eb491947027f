//! The latency-format header of a latency snapshot (a trace tape's latency
//! tracer saved at a new maximum; its metadata's `env` holds
//! `tape_latency_*`), in the layout of ftrace's latency tracers
//! (`Documentation/trace/ftrace.txt`, "irqsoff"):
//!
//! ```text
//! # tracer: section
//! #
//! section latency trace v1.1.5 on tape 0.1.0
//! --------------------------------------------------------------------
//!  latency: 5012 us, #1520/1520, TID#4242 | (M:user VP:0, KP:0, SP:0 HP:0 #P:2)
//!     -----------------
//!     | task: worker-2-4242 (uid:1000 nice:0 policy:0 rt_prio:0)
//!     -----------------
//!  => started at: db.commit (src/db.rs:40)
//!  => ended at:   db.commit (src/db.rs:40)
//! ```
//!
//! As in ftrace: the latency in whole microseconds; `#E/T` the events in
//! the trace and those written (the events plus the ones lost); the task's
//! name-id, uid, nice, scheduling policy and real-time priority; "v1.1.5"
//! (ftrace's, which never changes). tape prints `TID#` where the kernel
//! prints `CPU#` (a thread is tape's unit, as a CPU is ftrace's), and
//! `M:user` for the preemption model (a user-space program is always
//! preemptible); the `VP`, `KP`, `SP`, `HP` fields are 0, as the kernel's
//! always are.

use crate::{EnvValue, Trace};

/// What a latency snapshot's `env` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The tracer: `section` or `wakeup`.
    pub tracer: String,
    /// The tracker: the section's or the pair's name.
    pub name: String,
    /// The latency, in ns.
    pub latency_ns: u64,
    /// The window, in ns since the epoch (the trace's clock).
    pub start_ns: i128,
    /// Where the window ends.
    pub end_ns: i128,
    /// The thread that measured it (the section's; a pair's second event's).
    pub tid: i64,
    /// Its name.
    pub thread: String,
    /// Its uid, nice, policy and real-time priority.
    pub uid: i64,
    /// Nice value.
    pub nice: i64,
    /// Scheduling policy (0 normal, 1 FIFO, 2 RR).
    pub policy: i64,
    /// Real-time priority.
    pub rt_prio: i64,
    /// CPUs of the machine.
    pub cpus: i64,
    /// Where the window started and ended.
    pub started_at: String,
    /// Where it ended.
    pub ended_at: String,
    /// The tracer's version, `major.minor.patchlevel`.
    pub version: String,
}

impl Header {
    /// The header of `trace`, if it is a latency snapshot.
    pub fn of(trace: &Trace) -> Option<Header> {
        let get = |k: &str| trace.env.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        let int = |k: &str| match get(k) {
            Some(EnvValue::Int(v)) => *v,
            _ => 0,
        };
        let text = |k: &str| match get(k) {
            Some(EnvValue::Str(s)) => s.clone(),
            Some(EnvValue::Int(v)) => v.to_string(),
            None => String::new(),
        };
        let tracer = match get("tape_latency_tracer") {
            Some(EnvValue::Str(s)) => s.clone(),
            _ => return None,
        };
        let ns = |ticks: i64| -> i128 {
            let Some(c) = trace.clocks.first() else {
                return i128::from(ticks);
            };
            let f = i128::from(c.freq.max(1));
            i128::from(c.offset_s) * 1_000_000_000
                + (i128::from(c.offset) + i128::from(ticks as u64)) * 1_000_000_000 / f
        };
        Some(Header {
            tracer,
            name: text("tape_latency_name"),
            latency_ns: int("tape_latency_ns").max(0) as u64,
            start_ns: ns(int("tape_latency_start")),
            end_ns: ns(int("tape_latency_end")),
            tid: int("tape_latency_tid"),
            thread: text("tape_latency_thread"),
            uid: int("tape_latency_uid"),
            nice: int("tape_latency_nice"),
            policy: int("tape_latency_policy"),
            rt_prio: int("tape_latency_rt_prio"),
            cpus: int("tape_latency_cpus"),
            started_at: text("tape_latency_started_at"),
            ended_at: text("tape_latency_ended_at"),
            version: format!(
                "{}.{}.{}",
                int("tracer_major"),
                int("tracer_minor"),
                int("tracer_patchlevel")
            ),
        })
    }

    /// The header's text, for a trace of `events` events that lost `lost`.
    pub fn render(&self, events: u64, lost: u64) -> String {
        format!(
            "# tracer: {tracer}\n\
             #\n\
             {tracer} latency trace v1.1.5 on tape {version}\n\
             --------------------------------------------------------------------\n \
             latency: {us} us, #{events}/{total}, TID#{tid} | (M:user VP:0, KP:0, SP:0 HP:0 #P:{cpus})\n    \
             -----------------\n    \
             | task: {thread}-{tid} (uid:{uid} nice:{nice} policy:{policy} rt_prio:{rt_prio})\n    \
             -----------------\n \
             => started at: {started}\n \
             => ended at:   {ended}\n\n",
            tracer = self.tracer,
            version = self.version,
            us = self.latency_ns / 1000,
            total = events + lost,
            tid = self.tid,
            cpus = self.cpus,
            thread = self.thread,
            uid = self.uid,
            nice = self.nice,
            policy = self.policy,
            rt_prio = self.rt_prio,
            started = self.started_at,
            ended = self.ended_at,
        )
    }

    /// Whether an event at `t` (ns) falls in the measured window.
    pub fn in_window(&self, t: i128) -> bool {
        (self.start_ns..=self.end_ns).contains(&t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_in_ftrace_layout() {
        let mut t = Trace::new([0; 16]);
        let s = |v: &str| EnvValue::Str(v.into());
        t.env = vec![
            ("tracer_major".into(), EnvValue::Int(0)),
            ("tracer_minor".into(), EnvValue::Int(1)),
            ("tracer_patchlevel".into(), EnvValue::Int(0)),
            ("tape_latency_tracer".into(), s("irqsoff")),
            ("tape_latency_name".into(), s("sys_setpgid")),
            ("tape_latency_ns".into(), EnvValue::Int(12_345)),
            ("tape_latency_tid".into(), EnvValue::Int(3730)),
            ("tape_latency_thread".into(), s("bash")),
            ("tape_latency_cpus".into(), EnvValue::Int(2)),
            ("tape_latency_started_at".into(), s("sys_setpgid")),
            ("tape_latency_ended_at".into(), s("sys_setpgid")),
        ];
        let h = Header::of(&t).unwrap();
        // ftrace.txt's irqsoff example, with TID# for CPU# and M:user.
        let want = "# tracer: irqsoff
#
irqsoff latency trace v1.1.5 on tape 0.1.0
--------------------------------------------------------------------
 latency: 12 us, #3/3, TID#3730 | (M:user VP:0, KP:0, SP:0 HP:0 #P:2)
    -----------------
    | task: bash-3730 (uid:0 nice:0 policy:0 rt_prio:0)
    -----------------
 => started at: sys_setpgid
 => ended at:   sys_setpgid

";
        assert_eq!(h.render(3, 0), want);
        assert!(h.render(3, 2).contains("#3/5,"));
        t.env.retain(|(k, _)| k != "tape_latency_tracer");
        assert_eq!(Header::of(&t), None);
    }
}
