//! The kernel beside the program: ftrace's events (the scheduler's, the
//! system calls', interrupts') read from its raw per-CPU buffers on the
//! program's clock, written as a CTF trace beside the program's, so that
//! a slow call shows why (its thread switched out, who ran, when it woke).
//!
//! ```text
//!  kernel: per-CPU ring buffers of tape's instance  (tracefs.rs)
//!     | trace_pipe_raw, a page at a time, non-blocking
//!     v
//!  page.rs     records and times of a page, what the kernel lost before it
//!     | format.rs: each event's layout, from its format file
//!     v
//!  trace.rs    a CTF stream per CPU, events named as LTTng's kernel tracer
//!              names them, on the program's clock (x86-tsc: the TSC itself)
//! ```
//!
//! The records kept are also held in memory for a while (`recent.rs`,
//! [`RECENT_BYTES`] a CPU): a latency snapshot the program saves meanwhile
//! gets the kernel's events of its window ([`KernelRecorder::write_window`]).
//!
//! Which threads: the traced process's, followed in user space. Every
//! record of the events asked is read, and one is kept when the task that
//! wrote it, or a task it names (`prev_pid`/`next_pid` of a switch, the
//! `pid` a wakeup wakes), is followed; a followed task's fork (the kernel's
//! `sched_process_fork`, enabled for this even when not asked, and then
//! not written) follows its child. ftrace's own filter (`set_event_pid`
//! with `event-fork`) was tried first: on this project's kernel (6.18) it
//! dropped some of the followed threads' switches that an unfiltered
//! instance, read by trace-cmd, held (6 of about 50 in one run), so it is
//! not used.
//!
//! One clock, no mapping: when tape's clock is the TSC, the instance's
//! `trace_clock` is `x86-tsc`, whose stamps are the same counter the
//! program's `rdtsc` reads ("events can be unambiguously interlaced",
//! as the kernel's commit adding it says); when it is `CLOCK_MONOTONIC`,
//! the instance's is `mono`. The kernel trace states the program's clock
//! block, so both traces' times compare exactly.
//!
//! Written by hand: no crate reads ftrace's raw pages or format files
//! (trace-cmd's libtraceevent is C); the format is small and the tests
//! hold it against trace-cmd on this kernel.

pub mod format;
pub mod page;
pub mod recent;
pub mod snapshots;
pub mod trace;
pub mod tracefs;

use std::path::Path;

use tape_ctf_model::{Clock, EnvValue};

use std::collections::{HashMap, HashSet};

pub use trace::KernelStats;

/// The clock source codes of a process's header (`tape::clock`).
const SOURCE_TSC: u32 = 1;
const SOURCE_MONOTONIC: u32 = 3;

/// Each CPU's buffer in tape's instance (KiB) unless asked otherwise: at
/// 100k `sched_switch` records a second (64 bytes each), about 600 ms of
/// them.
pub const DEFAULT_BUFFER_KB: u32 = 4096;

/// The recent records held a CPU for latency snapshots (`recent.rs`): at
/// 100k `sched_switch` records a second over 2 CPUs, more than a second.
pub const RECENT_BYTES: usize = 8 << 20;

/// The most pages taken from one CPU in one turn, so that one busy CPU
/// does not keep the others (and the program's rings) waiting.
const PAGES_PER_TURN: usize = 256;

/// What the follower reads of an event's records: where the tasks it
/// names are, and whether it was asked (else it is read only to follow
/// forks, and not written).
struct Watch {
    tasks: Vec<usize>,
    /// `sched_process_fork`: (parent_pid, child_pid) offsets.
    fork: Option<(usize, usize)>,
    written: bool,
}

/// The offsets of the tasks a record of `f` names: the writer's, and for
/// the scheduler's events every `pid` / `*_pid` field (a task id).
fn watch(f: &format::Format, written: bool) -> Watch {
    let mut tasks = vec![f.pid_offset];
    let at = |name: &str| {
        f.fields
            .iter()
            .find(|x| x.name == name && x.size == 4)
            .map(|x| x.offset)
    };
    let fork = match (f.system.as_str(), f.name.as_str()) {
        ("sched", "sched_process_fork") => at("parent_pid").zip(at("child_pid")),
        _ => None,
    };
    if f.system == "sched" {
        tasks.extend(
            f.fields
                .iter()
                .filter(|x| x.size == 4 && (x.name == "pid" || x.name.ends_with("_pid")))
                .map(|x| x.offset),
        );
    }
    Watch {
        tasks,
        fork,
        written,
    }
}

/// A record's task id at `offset`.
fn task_at(data: &[u8], offset: usize) -> Option<u32> {
    data.get(offset..offset + 4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
}

/// A kernel recording: tape's instance, and the trace it is written to.
pub struct KernelRecorder {
    instance: tracefs::Instance,
    trace: trace::KernelTrace,
    layout: format::PageLayout,
    page: Vec<u8>,
    spec: String,
    clock_name: &'static str,
    clock_source: u32,
    /// The kernel's own loss counts at the start, per stream.
    lost_before: Vec<Option<u64>>,
    /// The events read, by ftrace id.
    watches: HashMap<u16, Watch>,
    /// The tasks followed.
    followed: HashSet<u32>,
    /// The events written (for a window's trace).
    formats: Vec<format::Format>,
    /// Each CPU's recent records, for latency snapshots.
    recent: Vec<recent::Recent>,
    /// Its clock just before tracing started (no record is older).
    started_at: u64,
}

/// What [`KernelRecorder::write_window`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Events written.
    pub events: u64,
    /// Events the kernel lost within the window (a loss it did not
    /// count, and an incomplete window's start, as 1 each).
    pub lost: u64,
    /// Whether records of the window's start were no longer held (its
    /// trace counts an unknown loss there).
    pub incomplete: bool,
}

impl KernelRecorder {
    /// Makes tape's instance for the events `spec` names, on the clock of
    /// source `clock_source` (a process header's code), each CPU's buffer
    /// `buffer_kb` KiB, following the threads `tids` (and their
    /// children), and the trace in `out` (`None`: kept in memory, packet
    /// by packet, for a relay: [`KernelRecorder::take_packets`]).
    /// Tracing starts before this returns. `said` hears what is worth
    /// saying (an instance of a dead recorder removed).
    pub fn start(
        spec: &str,
        out: Option<&Path>,
        clock_source: u32,
        tids: &[u32],
        buffer_kb: u32,
        said: &mut dyn FnMut(String),
    ) -> Result<KernelRecorder, String> {
        let clock_name = match clock_source {
            SOURCE_TSC => "x86-tsc",
            SOURCE_MONOTONIC => "mono",
            _ => {
                return Err(
                    "--kernel: the program's clock is neither the TSC nor CLOCK_MONOTONIC, \
                     which ftrace has no clock of (TAPE_TRACE_CLOCK=monotonic makes it the \
                     latter)"
                        .to_owned(),
                )
            }
        };
        let root = tracefs::root()?;
        let mut instance = tracefs::Instance::create(&root, said)?;
        let header = tracefs::read_file(&root.join("events/header_page"))?;
        let layout = format::parse_header_page("events/header_page", &header)?;
        instance.set_clock(clock_name)?;
        instance.write("buffer_size_kb", &buffer_kb.to_string(), false)?;
        instance.write("tracing_on", "0", false)?;
        let mut chosen = instance.select(spec)?;
        let fork = ("sched".to_owned(), "sched_process_fork".to_owned());
        let asked = chosen.len();
        if !chosen.contains(&fork) {
            chosen.push(fork);
        }
        let mut formats = Vec::new();
        let mut watches = HashMap::new();
        for (k, (sys, ev)) in chosen.iter().enumerate() {
            let rel = format!("events/{sys}/{ev}/format");
            let text = instance.read(&rel)?;
            let f = format::parse_format(sys, &rel, &text)?;
            watches.insert(f.id, watch(&f, k < asked));
            if k < asked {
                formats.push(f);
            }
        }
        for (sys, ev) in &chosen {
            instance.write(&format!("events/{sys}/{ev}/enable"), "1", false)?;
        }
        instance.open_pipes()?;
        let cpus = instance.cpus();
        let trace = match out {
            Some(out) => trace::KernelTrace::create(out, &formats, &cpus)?,
            None => trace::KernelTrace::in_memory(&formats, &cpus)?,
        };
        let lost_before = cpus.iter().map(|&c| instance.kernel_lost(c)).collect();
        let recent = cpus
            .iter()
            .map(|_| recent::Recent::new(RECENT_BYTES))
            .collect();
        let started_at = counter_now(clock_source).unwrap_or(0);
        instance.write("tracing_on", "1", false)?;
        Ok(KernelRecorder {
            instance,
            trace,
            layout,
            page: vec![0; layout.size],
            spec: spec.to_owned(),
            clock_name,
            clock_source,
            lost_before,
            watches,
            followed: tids.iter().copied().collect(),
            formats,
            recent,
            started_at,
        })
    }

    /// Follows these tasks too (and, from now on, their children).
    pub fn follow(&mut self, tids: &[u32]) {
        self.followed.extend(tids.iter().copied());
    }

    /// Stops following `tid` (the recorder itself, followed until it had
    /// started the program: its children stay followed).
    pub fn unfollow(&mut self, tid: u32) {
        self.followed.remove(&tid);
    }

    /// Whether a record is of a followed task (following a followed
    /// task's child from its fork on), and is written.
    fn keep(&mut self, data: &[u8]) -> bool {
        let Some(id) = data.get(..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
            // Not a record any event asked: the trace counts it.
            return true;
        };
        let Some(w) = self.watches.get(&id) else {
            return true;
        };
        if let Some((parent, child)) = w.fork {
            if let (Some(p), Some(c)) = (task_at(data, parent), task_at(data, child)) {
                if self.followed.contains(&p) {
                    self.followed.insert(c);
                }
            }
        }
        w.written
            && w.tasks
                .iter()
                .any(|&o| task_at(data, o).is_some_and(|t| self.followed.contains(&t)))
    }

    /// Takes the pages ready on every CPU (at most `PAGES_PER_TURN` from
    /// each) into the trace: how many.
    pub fn poll(&mut self) -> Result<usize, String> {
        let mut pages = 0;
        for i in 0..self.trace.cpus().len() {
            for _ in 0..PAGES_PER_TURN {
                let n = self.instance.read_page(i, &mut self.page)?;
                if n == 0 {
                    break;
                }
                self.take_page(i, n)?;
                pages += 1;
            }
        }
        Ok(pages)
    }

    fn take_page(&mut self, i: usize, n: usize) -> Result<(), String> {
        let page = std::mem::take(&mut self.page);
        let mut records = Vec::new();
        let missed = page::read_page(&self.layout, &page[..n], |time, data| {
            records.push((time, data));
        });
        // What the kernel lost came before this page's records.
        let r = match missed {
            Ok(m) => {
                match m {
                    page::Missed::None => {}
                    page::Missed::Count(n) => self.recent[i].push_lost(n),
                    page::Missed::Unknown => self.recent[i].push_lost(1),
                }
                self.trace.lost(i, m)
            }
            Err(_) => {
                self.trace.damaged();
                Ok(())
            }
        };
        let r = r.and_then(|()| {
            for (time, data) in records {
                if self.keep(data) {
                    self.recent[i].push(time, data);
                    self.trace.record(i, time, data)?;
                }
            }
            Ok(())
        });
        self.page = page;
        r
    }

    /// The clock source (a process header's code) it records on.
    pub fn clock_source(&self) -> u32 {
        self.clock_source
    }

    /// The kernel trace's `env` (but its counts).
    fn env(&self) -> Vec<(String, EnvValue)> {
        let uname = uname();
        vec![
            (
                "hostname".to_owned(),
                EnvValue::Str(tape::__consumer::hostname()),
            ),
            ("sysname".to_owned(), EnvValue::Str(uname.0)),
            ("kernel_release".to_owned(), EnvValue::Str(uname.1)),
            ("kernel_version".to_owned(), EnvValue::Str(uname.2)),
            (
                "tape_ftrace_events".to_owned(),
                EnvValue::Str(self.spec.clone()),
            ),
            (
                "tape_ftrace_clock".to_owned(),
                EnvValue::Str(self.clock_name.into()),
            ),
        ]
    }

    /// Writes the kernel's events from `begin` to `end` (the program's
    /// clock values: a latency snapshot's window) as a kernel trace in
    /// `out`, stating `clock` (the snapshot's own clock block), from the
    /// records held in memory ([`RECENT_BYTES`] a CPU), after taking
    /// what the kernel has ready. A window that reaches back before what
    /// is held is written with an unknown loss at its start, and said.
    pub fn write_window(
        &mut self,
        out: &Path,
        begin: u64,
        end: u64,
        clock: Clock,
    ) -> Result<WindowStats, String> {
        // What the kernel has of the window (its end is a few ms ago);
        // bounded, as a turn is.
        for _ in 0..4 {
            if self.poll()? == 0 {
                break;
            }
        }
        let cpus = self.trace.cpus();
        let mut t = trace::KernelTrace::create(out, &self.formats, &cpus)?;
        let mut w = WindowStats::default();
        for (i, held) in self.recent.iter().enumerate() {
            if held.forgot_since(begin) {
                w.incomplete = true;
                t.lost(i, page::Missed::Unknown)?;
            }
            let mut r = Ok(());
            held.each_in(begin, end, |item| {
                if r.is_err() {
                    return;
                }
                r = match item {
                    recent::Item::Record(time, data) => t.record(i, time, data),
                    recent::Item::Lost(n) => t.lost(i, page::Missed::Count(n)),
                };
            });
            r?;
        }
        let mut env = self.env();
        env.extend([
            (
                "tape_ftrace_window_begin".to_owned(),
                EnvValue::Int(begin as i64),
            ),
            (
                "tape_ftrace_window_end".to_owned(),
                EnvValue::Int(end as i64),
            ),
            (
                "tape_ftrace_lost".to_owned(),
                EnvValue::Int(t.stats.lost as i64),
            ),
        ]);
        t.finish(clock, env)?;
        w.events = t.stats.events;
        w.lost = t.stats.lost;
        Ok(w)
    }

    /// Stops tracing, takes what is left, writes the trace's metadata with
    /// the program's clock (freq, offset_s, offset: the CTF clock's) and
    /// removes the instance. (Kept in memory: the last packets are made,
    /// for [`KernelRecorder::take_packets`].)
    pub fn finish(mut self, clock: (u64, i64, i64)) -> Result<KernelStats, String> {
        let stats = self.stop()?;
        let mut env = self.env();
        env.extend([
            (
                "tape_ftrace_lost".to_owned(),
                EnvValue::Int(self.trace.stats.lost as i64),
            ),
            (
                "tape_ftrace_kernel_lost".to_owned(),
                EnvValue::Int(stats.lost as i64),
            ),
        ]);
        self.trace.finish(clock_of(clock), env)?;
        Ok(stats)
    }

    /// Stops tracing and takes what is left, every packet made: what it
    /// took and lost (the kernel's own loss count, when it says more than
    /// the pages did).
    pub fn stop(&mut self) -> Result<KernelStats, String> {
        self.instance.write("tracing_on", "0", false)?;
        while self.poll()? > 0 {}
        self.flush()?;
        let cpus = self.trace.cpus();
        let kernel_lost: u64 = cpus
            .iter()
            .zip(&self.lost_before)
            .filter_map(|(&c, b)| Some(self.instance.kernel_lost(c)? - (*b)?))
            .sum();
        let mut stats = self.trace.stats.clone();
        stats.lost = stats.lost.max(kernel_lost);
        Ok(stats)
    }

    /// Makes a packet of every CPU's events not yet in one (a relay's
    /// live timer).
    pub fn flush(&mut self) -> Result<(), String> {
        for i in 0..self.trace.cpus().len() {
            self.trace.flush(i)?;
        }
        Ok(())
    }

    /// The packets made since the last call (a trace kept in memory).
    pub fn take_packets(&mut self) -> Vec<trace::KernelPacket> {
        self.trace.take_packets()
    }

    /// The trace's metadata (a trace kept in memory: for a relay), with
    /// the program's clock (freq, offset_s, offset) and `uuid`; its counts
    /// are the summary's.
    pub fn metadata(&mut self, clock: (u64, i64, i64), uuid: [u8; 16]) -> Result<String, String> {
        self.trace.set_uuid(uuid);
        self.trace.metadata(clock_of(clock), self.env())
    }

    /// Another UUID for the packets made from now on (a relay session's
    /// resumed trace).
    pub fn set_uuid(&mut self, uuid: [u8; 16]) {
        self.trace.set_uuid(uuid);
    }

    /// Its clock just before tracing started: no record is older.
    pub fn started_at(&self) -> u64 {
        self.started_at
    }

    /// Its clock now (the program's clock source's counter).
    pub fn clock_now(&self) -> Option<u64> {
        counter_now(self.clock_source)
    }

    /// The CPUs of its streams, in order.
    pub fn cpus(&self) -> Vec<u32> {
        self.trace.cpus()
    }
}

/// The program trace's very clock block (as its recorder writes it), of
/// (freq, offset_s, offset).
fn clock_of(clock: (u64, i64, i64)) -> Clock {
    let (freq, offset_s, offset) = clock;
    tape::__consumer::clock_description(freq, offset_s, offset)
}

/// The counter of clock source `source` (a process header's code: TSC,
/// CNTVCT or monotonic ns, as a program's timestamps count) read now in
/// this process; `None` if this machine cannot read it (a counter this CPU
/// lacks, a code no source has). The kernel trace's clock and the reader's
/// of a running program (`crate::record`) are both this.
pub fn counter_now(source: u32) -> Option<u64> {
    let source = u8::try_from(source).ok()?;
    tape::__consumer::pairs_of_source(source).map(|(mono, _)| mono.0)
}

/// (sysname, release, version) of the running kernel.
fn uname() -> (String, String, String) {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    (read("ostype"), read("osrelease"), read("version"))
}
