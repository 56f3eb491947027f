//! Configuration: every knob defined once, settable from the environment
//! (like DPDK's `--trace*` EAL options) or from the [`Config`] builder.
//!
//! | variable              | builder                  | accepted values                          | default                 |
//! |-----------------------|--------------------------|------------------------------------------|-------------------------|
//! | `TAPE_TRACE`          | [`Config::enable`]       | comma-separated names, globs, `/regex/`  | none enabled            |
//! | `TAPE_TRACE_DIR`      | [`Config::dir`]          | a directory path                         | `$HOME/tape-traces`     |
//! | `TAPE_TRACE_BUFSZ`    | [`Config::buffer_size`]  | bytes, or with `K`, `M`, `G` (`4M`)       | `1M` per thread         |
//! | `TAPE_TRACE_PACKETSZ` | [`Config::packet_size`]  | as above, `256` .. `BUFSZ / 2`           | `BUFSZ / 16`, 4K..1M    |
//! | `TAPE_TRACE_MODE`     | [`Config::mode`]         | `overwrite` or `discard`                 | `overwrite`             |
//! | `TAPE_TRACE_CLOCK`    | [`Config::clock`]        | `auto` or `monotonic`                    | `auto` (TSC if invariant)|
//! | `TAPE_CONTROL`        | [`Config::control`]      | `on` or `off`                            | `on` (the control socket)|
//! | `TAPE_USDT`           | [`Config::usdt`]         | `on` or `off`                            | `on` (the USDT watcher)  |
//! | `TAPE_DUMP`           | [`Config::dump`]         | `trace`, `text` or `off`                 | `trace` (dump on crash)  |
//! | `TAPE_SAVE_ON_STOP`   | [`Config::save_on_stop`] | `on` or `off`                            | `on` (SIGTERM, SIGINT, SIGHUP save) |
//! | `TAPE_FILTER`         | [`Config::filter`]       | `PATTERN if EXPR; PATTERN if EXPR...`    | none                     |
//! | `TAPE_TRIGGER`        | [`Config::trigger`]      | `PATTERN TRIGGER; PATTERN TRIGGER...`    | none                     |
//! | `TAPE_TRACER`         | [`Config::tracer`]       | `nop`, `function`, `function_graph`, `latency` | none chosen       |
//! | `TAPE_LATENCY`        | [`Config::latency`]      | `on`/`off`, `thresh=D`, `keep=N`, comma-separated | off              |
//! | `TAPE_WAKEUP`         | [`Config::wakeup`]       | `NAME FROM TO [KEY]; ...`                | none                     |
//! | `TAPE_SHM`            | [`Config::shared_rings`] | `on` or `off`                            | shared where there is room, quietly |
//!
//! The shared rings' own settings have no builder: `TAPE_SHM_DIR` (an
//! absolute directory instead of `/dev/shm`), `TAPE_SHM_MAX` (the most bytes
//! of ring files a process keeps; default half the filesystem),
//! `TAPE_SHM_KEEP_SIZE` and `TAPE_SHM_KEEP_AGE` (the dead processes' rings
//! kept: `1G`, `7d`). A process that never calls `init` makes rings, and the
//! consumer (`tape ps`, `tape record`) finds them, so they are read where
//! they are used (`ring/shm.rs`, `ring/dirs.rs`, through `knobs`, with the
//! parsers their rows use); `init` checks them with the others. No other
//! code reads a setting from the environment (`tests/it/settings_reads.rs`).
//!
//! A bad value is an [`Error`] naming the variable, the value, the position
//! of the problem and the accepted forms. A value that is not UTF-8 is an
//! error too (never taken as unset), except `TAPE_TRACE_DIR`, a path, which
//! is taken as the bytes it is. A ring larger than the machine's memory is
//! refused with both figures. Buffer sizes apply to rings
//! created afterwards; the mode applies at once (at each ring's next packet
//! switch).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, ErrorKind};
use crate::knobs::{self, bad, check_geometry, on_off};
pub use crate::knobs::{mode, parse_size, set_buffer_size, trace_dir, Mode, DEFAULT_BUFFER_SIZE};
use crate::registry::{self, Pattern};
pub use crate::ring::set_mode;

/// One setting read from the environment: its variable, the [`Config`]
/// builder that sets it, what it accepts and its default (the module
/// docs' table), a line and an example of the guide's table
/// (`docs/02-record.md`), and how its value is taken (`None`: not by
/// [`Config::from_env`] as text: `TAPE_TRACE_DIR`, a path, is taken as
/// bytes). The two tables are
/// checked against this one (the tests below): a setting is defined here
/// once.
// The columns only the tables show are read by the tests that hold the
// tables to this one.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Setting {
    pub(crate) var: &'static str,
    /// The [`Config`] method that sets it, or empty.
    pub(crate) builder: &'static str,
    pub(crate) accepts: &'static str,
    pub(crate) default: &'static str,
    pub(crate) meaning: &'static str,
    pub(crate) example: &'static str,
    /// The `tape ctl PID` command that changes it while the program runs,
    /// as an example (the guide's table), or empty: its first word is the
    /// command, and the command takes the value with the parser the row's
    /// `apply` uses (in `knobs`, below `control`).
    pub(crate) ctl: &'static str,
    apply: Option<Apply>,
}

/// How a setting's text is taken into a [`Config`] (the setting given:
/// its variable names the errors).
type Apply = fn(&mut Config, &Setting, &str) -> Result<(), Error>;

/// Every setting, in the guide's order (also the order in which values
/// are taken, once all are read and found UTF-8).
pub(crate) const SETTINGS: &[Setting] = &[
    Setting {
        var: "TAPE_TRACE",
        builder: "enable",
        accepts: "comma-separated names, globs, `/regex/`",
        default: "none enabled",
        meaning: "tracepoints to enable: names, globs, `/regex/`; one that matches nothing yet is said at `init()` with the nearest names (but one under `tracing.`: tape-tracing's callsites all register after `init()`) and enables what registers later (a `tracing` callsite at its first event); at the end it is said again if it never matched",
        example: "`app.net.*,/^app\\.disk/`",
        ctl: "enable app.net.*",
        apply: Some(|c, s, v| {
            c.enable = parse_patterns(s.var, v)?
                .into_iter()
                .map(|p| (p, Some(s.var)))
                .collect();
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_TRACE_DIR",
        builder: "dir",
        accepts: "a directory path",
        default: "`$HOME/tape-traces`",
        meaning: "where `save()` creates traces",
        example: "`/var/tmp/traces`",
        ctl: "",
        apply: None,
    },
    Setting {
        var: "TAPE_TRACE_BUFSZ",
        builder: "buffer_size",
        accepts: "bytes, or with `K`, `M`, `G` (`4M`)",
        default: "`1M` per thread",
        meaning: "ring size per thread (default `1M`)",
        example: "`4M`",
        ctl: "buffer 4M",
        apply: Some(|c, s, v| {
            c.buffer_size = parse_size(s.var, v)?;
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_TRACE_PACKETSZ",
        builder: "packet_size",
        accepts: "as above, `256` .. `BUFSZ / 2`",
        default: "`BUFSZ / 16`, 4K..1M",
        meaning: "packet size (default ring / 16)",
        example: "`64K`",
        ctl: "buffer 4M 64K",
        apply: Some(|c, s, v| {
            c.packet_size = Some(parse_size(s.var, v)?);
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_TRACE_MODE",
        builder: "mode",
        accepts: knobs::MODE_ACCEPTS,
        default: "`overwrite`",
        meaning: "`overwrite` (default) or `discard`",
        example: "`discard`",
        ctl: "mode discard",
        apply: Some(|c, s, v| {
            c.mode = knobs::parse_mode(s.var, v)?;
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_TRACE_CLOCK",
        builder: "clock",
        accepts: "`auto` or `monotonic`",
        default: "`auto` (TSC if invariant)",
        meaning: "`auto` (TSC when invariant) or `monotonic`",
        example: "`monotonic`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.clock = match v.trim() {
                "auto" => ClockChoice::Auto,
                "monotonic" => ClockChoice::Monotonic,
                _ => return Err(refused(s, v, "is not a clock")),
            };
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_CONTROL",
        builder: "control",
        accepts: "`on` or `off`",
        default: "`on` (the control socket)",
        meaning: "`on` (default: serve `tape ctl`) or `off`",
        example: "`off`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.control = on_off(
                s.var,
                v,
                "`on` (serve `tape ctl` on a socket) or `off`",
            )?;
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_USDT",
        builder: "usdt",
        accepts: "`on` or `off`",
        default: "`on` (the USDT watcher)",
        meaning: "`on` (default: USDT tools' probes fire, [chapter 3](03-probes.md)) or `off`",
        example: "`off`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.usdt = on_off(
                s.var,
                v,
                "`on` (a watcher makes USDT tools' probes fire) or `off`",
            )?;
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_DUMP",
        builder: "dump",
        accepts: "`trace`, `text` or `off`",
        default: "`trace` (dump on crash)",
        meaning: "`trace` (default: save on a crash), `text`, `off`",
        example: "`text`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.dump = match v.trim() {
                "trace" => crate::crash::Dump::Trace,
                "text" => crate::crash::Dump::Text,
                "off" => crate::crash::Dump::Off,
                _ => {
                    return Err(bad(
                        s.var,
                        v,
                        0,
                        "is not a dump mode",
                        "`trace` (save the trace on a crash), `text` (and print its last \
                         events on stderr) or `off`",
                    ))
                }
            };
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_SAVE_ON_STOP",
        builder: "save_on_stop",
        accepts: "`on` or `off`",
        default: "`on` (SIGTERM, SIGINT, SIGHUP save)",
        meaning: "`on` (default: SIGTERM, SIGINT or SIGHUP saves the trace, its path on stderr, then ends the program by that signal, exit 128+N; a second one ends it at once; a signal the program handles or ignores is left alone) or `off`",
        example: "`off`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.save_on_stop = on_off(
                s.var,
                v,
                "`on` (SIGTERM, SIGINT and SIGHUP save the trace, then end the program) or `off`",
            )?;
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_FILTER",
        builder: "filter",
        accepts: "`PATTERN if EXPR; PATTERN if EXPR...`",
        default: "none",
        meaning: "event filters: `PATTERN if EXPR; ...`",
        example: "`app.net.rx if len > 1400`",
        ctl: "filter app.net.rx 'len > 1400'",
        apply: Some(|c, s, v| {
            c.filters = parse_filters(s.var, v)?
                .into_iter()
                .map(|(p, e)| (p, e, Some(s.var)))
                .collect();
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_TRIGGER",
        builder: "trigger",
        accepts: "`PATTERN TRIGGER; PATTERN TRIGGER...`",
        default: "none",
        meaning: "triggers: `PATTERN TRIGGER; ...`",
        example: "`app.q traceoff:1 if depth > 1000`",
        ctl: "trigger app.q 'traceoff:1 if depth > 1000'",
        apply: Some(|c, s, v| {
            c.triggers = parse_triggers(s.var, v)?
                .into_iter()
                .map(|(p, t)| (p, t, Some(s.var)))
                .collect();
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_TRACER",
        builder: "tracer",
        accepts: "`nop`, `function`, `function_graph`, `latency`",
        default: "none chosen",
        meaning: "`nop`, `function`, `function_graph`, `latency` (chapters [7](07-function-tracer.md), [9](09-latency.md))",
        example: "`latency`",
        ctl: "tracer latency",
        apply: Some(|c, s, v| {
            let i = knobs::parse_tracer(v)
                .map_err(|what| bad(s.var, v, 0, what, &knobs::TRACERS.join(", ")))?;
            c.tracer = Some((knobs::TRACERS[i].to_owned(), Some(s.var)));
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_LATENCY",
        builder: "latency",
        accepts: "`on`/`off`, `thresh=D`, `keep=N`, comma-separated",
        default: "off",
        meaning: "the latency tracer: `on`/`off`, `thresh=D`, `keep=N`",
        example: "`on,thresh=50us`",
        ctl: "latency thresh 50us",
        apply: Some(|c, s, v| {
            c.latency = parse_latency(s.var, v)?;
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_WAKEUP",
        builder: "wakeup",
        accepts: "`NAME FROM TO [KEY]; ...`",
        default: "none",
        meaning: "wakeup pairs: `NAME FROM TO [KEY]; ...`",
        example: "`req app.req.arrive app.req.reply id`",
        ctl: "latency wakeup req app.req.arrive app.req.reply id",
        apply: Some(|c, s, v| {
            c.wakeups = parse_wakeups(s.var, v)?
                .into_iter()
                .map(|w| (w, Some(s.var)))
                .collect();
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_SHM",
        builder: "shared_rings",
        accepts: "`on` or `off`",
        default: "shared where there is room, quietly",
        meaning: "rings in shared files another process can read (`tape pipe`, `tape record`), left if the process dies (`tape recover`): `/dev/shm/tape-UID/PID/`, 0700 ([chapter 5](05-flight-recorder.md)). Default: shared where there is room, quietly; `on`: say on stderr when a ring cannot be; `off`: private memory",
        example: "`off`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.shared_rings = Some(on_off(
                s.var,
                v,
                "`on` (rings in shared files another process can read) or `off`",
            )?);
            Ok(())
        }),
    },
    // The shared rings' own: no builder (a process that never calls
    // `init` makes rings, and the consumer, `tape ps` or `tape record`,
    // finds them: read where they are used, `knobs::READ_WHERE_USED`, by
    // the parsers their rows use here).
    Setting {
        var: "TAPE_SHM_DIR",
        builder: "",
        accepts: "an absolute directory",
        default: "`/dev/shm`, else `$XDG_RUNTIME_DIR`",
        meaning: "where the shared rings go instead of `/dev/shm` (an absolute directory)",
        example: "`/run/tape`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.shm_dir = Some(knobs::parse_absolute_dir(s.var, v)?);
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_SHM_MAX",
        builder: "",
        accepts: "bytes, or with `K`, `M`, `G`",
        default: "half the filesystem",
        meaning: "the most bytes of shared rings a process keeps (default half the filesystem)",
        example: "`2G`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.shm_max = Some(parse_size(s.var, v)?);
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_SHM_KEEP_SIZE",
        builder: "",
        accepts: "bytes, or with `K`, `M`, `G`",
        default: "`1G`",
        meaning: "the most bytes of dead processes' rings kept (default `1G`)",
        example: "`4G`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.keep_size = Some(parse_size(s.var, v)? as u64);
            Ok(())
        }),
    },
    Setting {
        var: "TAPE_SHM_KEEP_AGE",
        builder: "",
        accepts: knobs::AGE_ACCEPTS,
        default: "`7d`",
        meaning: "the oldest dead processes' rings kept (default `7d`)",
        example: "`2d`",
        ctl: "",
        apply: Some(|c, s, v| {
            c.keep_age = Some(knobs::parse_age_of(s.var, v)?);
            Ok(())
        }),
    },
];

/// The settings `vars` alone, as the environment has them, taken by their
/// rows' parsers into a default [`Config`], with the errors `init` gives
/// for them: for a consumer that needs a program's setting before the
/// program runs (the clock a recorder expects of the programs it starts).
/// A name not in the table is a mistake of tape's (caught by the tests),
/// read as unset.
pub(crate) fn from_env_only(vars: &[&str]) -> Result<Config, Error> {
    debug_assert!(
        vars.iter().all(|v| SETTINGS.iter().any(|s| s.var == *v)),
        "{vars:?}: every setting is in SETTINGS"
    );
    Config::taking(|k| std::env::var_os(k), |s| vars.contains(&s.var))
}

/// Whether the programs a recorder starts will use the monotonic clock
/// when asked (`TAPE_TRACE_CLOCK=monotonic` in the environment they get):
/// the clock's row read alone ([`from_env_only`]).
pub(crate) fn monotonic_asked() -> Result<bool, Error> {
    Ok(from_env_only(&["TAPE_TRACE_CLOCK"])?.clock == ClockChoice::Monotonic)
}

/// The error for a value of `s` that is none of those it accepts (its
/// `accepts`, as the tables say).
fn refused(s: &Setting, v: &str, what: &str) -> Error {
    bad(s.var, v, 0, what, s.accepts)
}

/// Which clock to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockChoice {
    /// The TSC when it is invariant (x86_64), the virtual counter (aarch64),
    /// else `CLOCK_MONOTONIC`.
    Auto,
    /// Always `CLOCK_MONOTONIC`.
    Monotonic,
}

/// Settings for [`Config::init`]; [`Config::from_env`] reads them from the
/// environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// Patterns, and the variable they came from (for error messages).
    enable: Vec<(String, Option<&'static str>)>,
    dir: Option<PathBuf>,
    buffer_size: usize,
    packet_size: Option<usize>,
    mode: Mode,
    clock: ClockChoice,
    control: bool,
    usdt: bool,
    save_on_stop: bool,
    /// `None`: shared where there is room (the default).
    shared_rings: Option<bool>,
    dump: crate::crash::Dump,
    /// (pattern, expression, the variable it came from).
    filters: Vec<(String, String, Option<&'static str>)>,
    triggers: Vec<(String, String, Option<&'static str>)>,
    tracer: Option<(String, Option<&'static str>)>,
    latency: Latency,
    /// (name, from, to, key, the variable it came from).
    wakeups: Vec<([String; 4], Option<&'static str>)>,
    /// The shared rings' settings (no builder: [`from_env_only`]).
    shm_dir: Option<PathBuf>,
    shm_max: Option<usize>,
    keep_size: Option<u64>,
    keep_age: Option<std::time::Duration>,
}

/// The latency tracer's settings ([`Config::latency`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// On (`Some(true)`), off, or as it is.
    pub on: Option<bool>,
    /// `tracing_thresh` in ns (0: new maxima only).
    pub thresh_ns: Option<u64>,
    /// Snapshots kept per tracker.
    pub keep: Option<usize>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            enable: Vec::new(),
            dir: None,
            buffer_size: DEFAULT_BUFFER_SIZE,
            packet_size: None,
            mode: Mode::Overwrite,
            clock: ClockChoice::Auto,
            control: true,
            usdt: true,
            save_on_stop: true,
            shared_rings: None,
            dump: crate::crash::Dump::Trace,
            filters: Vec::new(),
            triggers: Vec::new(),
            tracer: None,
            latency: Latency::default(),
            wakeups: Vec::new(),
            shm_dir: None,
            shm_max: None,
            keep_size: None,
            keep_age: None,
        }
    }
}

impl Config {
    /// The defaults (nothing enabled, 1 MiB rings, overwrite).
    pub fn new() -> Config {
        Config::default()
    }

    /// The defaults overridden by the `TAPE_TRACE*` environment variables.
    pub fn from_env() -> Result<Config, Error> {
        Config::from_os_vars(|k| std::env::var_os(k))
    }

    /// As [`from_env`](Self::from_env), reading variables through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, Error> {
        Config::from_os_vars(|k| get(k).map(OsString::from))
    }

    /// As [`from_env`](Self::from_env), reading variables (as the bytes
    /// the environment holds) through `get`.
    pub fn from_os_vars(get: impl Fn(&str) -> Option<OsString>) -> Result<Config, Error> {
        Config::taking(get, |_| true)
    }

    /// The settings `wanted` picks, read through `get`.
    fn taking(
        get: impl Fn(&str) -> Option<OsString>,
        wanted: impl Fn(&Setting) -> bool,
    ) -> Result<Config, Error> {
        let mut c = Config::default();
        let dir_wanted = SETTINGS
            .iter()
            .any(|s| s.var == "TAPE_TRACE_DIR" && wanted(s));
        if let Some(v) = get("TAPE_TRACE_DIR").filter(|_| dir_wanted) {
            if v.is_empty() {
                return Err(bad("TAPE_TRACE_DIR", "", 0, "is empty", "a directory path"));
            }
            // A path: any bytes but NUL, as the system takes them.
            c.dir = Some(PathBuf::from(v));
        }
        // Every other variable as text, all checked before any is used.
        let mut taken = Vec::new();
        for s in SETTINGS.iter().filter(|s| wanted(s)) {
            let Some(apply) = s.apply else {
                continue;
            };
            let v = get(s.var).map(|v| knobs::utf8(s.var, v));
            if let Some(v) = v.transpose()? {
                taken.push((apply, s, v));
            }
        }
        for (apply, s, v) in taken {
            apply(&mut c, s, &v)?;
        }
        check_geometry(
            c.buffer_size,
            c.packet_size,
            "TAPE_TRACE_BUFSZ/TAPE_TRACE_PACKETSZ",
        )?;
        Ok(c)
    }

    /// Sets an event filter at init on the tracepoints `pattern` selects
    /// (see [`crate::filter`]): they record only the events `expr` matches.
    pub fn filter(mut self, pattern: &str, expr: &str) -> Config {
        self.filters
            .push((pattern.to_owned(), expr.to_owned(), None));
        self
    }

    /// Sets a trigger at init on the tracepoints `pattern` selects (see
    /// [`crate::trigger`]), such as `traceoff:1 if depth > 1000`.
    pub fn trigger(mut self, pattern: &str, trigger: &str) -> Config {
        self.triggers
            .push((pattern.to_owned(), trigger.to_owned(), None));
        self
    }

    /// Chooses a tracer at init, as `tape ctl PID tracer NAME` does (see
    /// [`crate::control::set_tracer`]): `nop`, `function`,
    /// `function_graph` or `latency`.
    pub fn tracer(mut self, name: &str) -> Config {
        self.tracer = Some((name.to_owned(), None));
        self
    }

    /// The latency tracer's settings at init (see [`crate::latency`]).
    pub fn latency(mut self, latency: Latency) -> Config {
        self.latency = latency;
        self
    }

    /// Sets up a wakeup pair at init (see [`crate::latency::wakeup`]).
    pub fn wakeup(mut self, name: &str, from: &str, to: &str, key: &str) -> Config {
        self.wakeups
            .push(([name, from, to, key].map(str::to_owned), None));
        self
    }

    /// Adds a selection pattern to enable at init: a name, a glob or `/regex/`.
    pub fn enable(mut self, pattern: &str) -> Config {
        self.enable.push((pattern.to_owned(), None));
        self
    }

    /// Sets the directory in which `save()` creates traces.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.dir = Some(dir.into());
        self
    }

    /// Sets the ring size per thread, in bytes.
    pub fn buffer_size(mut self, bytes: usize) -> Config {
        self.buffer_size = bytes;
        self
    }

    /// Sets the packet size, in bytes.
    pub fn packet_size(mut self, bytes: usize) -> Config {
        self.packet_size = Some(bytes);
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: Mode) -> Config {
        self.mode = mode;
        self
    }

    /// Whether [`Config::init`] starts the control socket and its thread
    /// (`tape ctl`; see [`crate::control`]). On by default.
    pub fn control(mut self, on: bool) -> Config {
        self.control = on;
        self
    }

    /// Whether a watcher thread makes the tracepoints fire their SDT probes
    /// while a USDT tool (bpftrace, perf, gdb) is attached (`usdt.rs`);
    /// on by default.
    pub fn usdt(mut self, on: bool) -> Config {
        self.usdt = on;
        self
    }

    /// Whether rings created after [`Config::init`] are files in a shared
    /// directory of this user (`/dev/shm/tape-UID/PID/`, 0700) that another
    /// process can read (`tape pipe`, `tape record`), left there if the
    /// process dies (`tape recover`); see the guide's flight recorder chapter (`docs/05-flight-recorder.md`).
    /// Unset (the default), rings are shared where there is room and made
    /// in private memory where there is not, quietly (`tape ctl status`
    /// says why); `true` (`TAPE_SHM=on`) says so on stderr; `false`
    /// (`TAPE_SHM=off`) keeps every ring in private memory.
    pub fn shared_rings(mut self, on: bool) -> Config {
        self.shared_rings = Some(on);
        self
    }

    /// Whether a stop (SIGTERM, SIGINT, SIGHUP) whose disposition is the
    /// default at [`Config::init`] saves the trace, then ends the program
    /// with that signal, as it would have ended without tape (see
    /// `end.rs`). `true` by default; a signal the
    /// program handles or ignores is never touched.
    pub fn save_on_stop(mut self, on: bool) -> Config {
        self.save_on_stop = on;
        self
    }

    /// What to do when the program crashes (panic, fatal signal): see
    /// [`crate::crash`]. [`crate::crash::Dump::Trace`] by default.
    pub fn dump(mut self, dump: crate::crash::Dump) -> Config {
        self.dump = dump;
        self
    }

    /// Chooses the clock.
    pub fn clock(mut self, clock: ClockChoice) -> Config {
        self.clock = clock;
        self
    }

    /// Applies the configuration: checks the tracepoints (duplicate names are
    /// an error), starts the clock, sets sizes and mode, enables the
    /// patterns. The returned guard saves the trace when dropped.
    pub fn init(self) -> Result<Guard, Error> {
        registry::check()?;
        crate::clock::init(self.clock == ClockChoice::Monotonic);
        set_buffer_size(self.buffer_size, self.packet_size)?;
        set_mode(self.mode);
        knobs::set_shared_rings(self.shared_rings);
        knobs::set_dir(self.dir.clone());
        let patterns: Vec<(Pattern, Option<&str>)> = self
            .enable
            .iter()
            .map(|(p, var)| (Pattern::parse(p), *var))
            .collect();
        let named = |var: Option<&str>, e: Error| match var {
            Some(var) => Error::new(e.kind(), format!("{var}: {}", e.message())),
            None => e,
        };
        for (p, var) in &patterns {
            p.validate().map_err(|e| named(*var, e))?;
        }
        for (p, var) in &patterns {
            // One that matches nothing yet stays pending (a `tracing`
            // callsite becomes a tracepoint at its first event): said once,
            // with the nearest names; the program runs. A pattern of
            // tape-tracing's names (`tracing.`) matches nothing at init by
            // design: said only at the end, if it never matched.
            let tracing = p.text().starts_with("tracing.");
            if p.apply(true).map_err(|e| named(*var, e))? == 0 && !tracing {
                eprintln!(
                    "tape: {}: {:?} matches no tracepoint yet: it enables the ones registered \
                     later{}",
                    var.unwrap_or("Config::enable"),
                    p.text(),
                    registry::nearest_said(&p.text())
                );
            }
        }
        for (pattern, expr, var) in &self.filters {
            let (_, warnings) =
                crate::filter::set_warned(pattern, expr).map_err(|e| named(*var, e))?;
            for w in warnings {
                eprintln!("tape: {}: warning: {w}", var.unwrap_or("filter"));
            }
        }
        for (pattern, trigger, var) in &self.triggers {
            crate::trigger::set(pattern, trigger).map_err(|e| named(*var, e))?;
        }
        if let Some((name, var)) = &self.tracer {
            crate::control::set_tracer(name).map_err(|e| named(*var, e))?;
        }
        for ([name, from, to, key], var) in &self.wakeups {
            crate::latency::wakeup(name, from, to, key).map_err(|e| named(*var, e))?;
        }
        if let Some(ns) = self.latency.thresh_ns {
            crate::latency::set_threshold(ns);
        }
        if let Some(k) = self.latency.keep {
            crate::latency::set_keep(k);
        }
        if let Some(on) = self.latency.on {
            crate::latency::set_on(on);
        }
        knobs::set_initialised();
        crate::crash::install(self.dump);
        if self.save_on_stop {
            crate::end::install_stop();
        }
        // The program goes on without USDT probes; it is told why.
        if let Err(e) = self.usdt.then(crate::usdt::start).unwrap_or(Ok(())) {
            eprintln!("tape: no USDT watcher (bpftrace, perf and gdb see no event): {e}");
        }
        if self.control {
            // The program goes on without control; it is told why.
            if let Err(e) = crate::control::server::start(crate::control::execute) {
                eprintln!("tape: no control socket (`tape ctl` cannot reach this process): {e}");
            }
        }
        static AT_EXIT: std::sync::Once = std::sync::Once::new();
        AT_EXIT.call_once(|| {
            // SAFETY: `save_at_process_exit` is an `extern "C"` function
            // valid for the life of the process; registering it has no other
            // effect. (A failure to register leaves `exit()` unsaved, as
            // before: nothing to report it to.)
            unsafe { libc::atexit(save_at_process_exit) };
        });
        ARMED_GUARDS.fetch_add(1, Ordering::Relaxed);
        Ok(Guard { armed: true })
    }
}

/// Reads the configuration from the environment and applies it; the guard
/// saves the trace when the program ends (when it is dropped).
///
/// ```no_run
/// fn main() -> Result<(), tape::Error> {
///     let _tape = tape::init()?; // saved when main returns
///     Ok(())
/// }
/// ```
pub fn init() -> Result<Guard, Error> {
    Config::from_env()?.init()
}

/// Guards alive and armed: `exit()` saves when there is one
/// ([`save_at_process_exit`]). Relaxed: a count, read at exit.
static ARMED_GUARDS: AtomicUsize = AtomicUsize::new(0);

/// Saves the trace at the end of the program: when the guard is dropped (at
/// the end of `main`, or when a panic unwinds through it), or at
/// `std::process::exit` while it is alive. Keep it alive for the whole
/// program.
///
/// The save at the end writes a trace only if something reached the tape
/// since the last save (so `tape::save()` then the end of `main` leaves one
/// trace, not a second, empty one); when nothing was ever recorded, it
/// writes none and says why on stderr. A stop (SIGTERM, SIGINT, SIGHUP
/// with their default disposition at `init`) saves, then ends the process
/// by that signal (`TAPE_SAVE_ON_STOP`); `abort`, `_exit` and `kill -9` do
/// not save (a crash dumps: `TAPE_DUMP`).
#[must_use = "the trace is saved when the guard is dropped: bind it with `let _tape = ...`"]
#[derive(Debug)]
pub struct Guard {
    armed: bool,
}

impl Guard {
    /// Saves now instead of at the end, and returns the trace directory.
    pub fn save(mut self) -> Result<PathBuf, Error> {
        self.disarm_now();
        crate::save::save()
    }

    /// Drops the guard without saving.
    pub fn disarm(mut self) {
        self.disarm_now();
    }

    fn disarm_now(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            // Never below 0: `exit()` may have taken the count already
            // (another thread drops its guard while the process exits).
            let _ = ARMED_GUARDS
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            self.disarm_now();
            crate::end::save_at_end();
        }
    }
}

/// `atexit` handler: `exit()` with a guard alive saves as its drop would.
/// (After `main` returns, its guard was dropped already: nothing to do.)
extern "C" fn save_at_process_exit() {
    if ARMED_GUARDS.swap(0, Ordering::Relaxed) > 0 {
        crate::end::save_at_end();
    }
}

/// The `;`-separated items of `v` (a `;` inside a quoted string does not
/// separate), each with the byte where its text starts; blank ones left out.
fn items(v: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let bytes = v.as_bytes();
    for i in 0..=bytes.len() {
        match bytes.get(i) {
            Some(b'"') if i == 0 || bytes[i - 1] != b'\\' => {
                quoted = !quoted;
                continue;
            }
            Some(b';') if !quoted => {}
            Some(_) => continue,
            None => {}
        }
        let item = &v[start..i];
        if !item.trim().is_empty() {
            let first = start + (item.len() - item.trim_start().len());
            out.push((first, item.trim()));
        }
        start = i + 1;
    }
    out
}

/// Parses `PATTERN if EXPR; PATTERN if EXPR...` (a `;` inside a quoted
/// string of an expression does not separate).
pub(crate) fn parse_filters(var: &str, v: &str) -> Result<Vec<(String, String)>, Error> {
    const ACCEPTED: &str = "`PATTERN if EXPR`, several separated by `;`, such as \
                            TAPE_FILTER='app.net.rx if len > 1400; app.disk.* if bytes >= 4096'";
    let mut out = Vec::new();
    for (first, item) in items(v) {
        let at = if item.starts_with("if ") {
            Some(0)
        } else {
            item.find(" if ")
        };
        let Some(at) = at else {
            return Err(bad(var, v, first, "an item has no ` if `", ACCEPTED));
        };
        let (pattern, expr) = (item[..at].trim(), item[at + 3..].trim());
        if pattern.is_empty() || expr.is_empty() {
            return Err(bad(
                var,
                v,
                first,
                "an item has an empty pattern or expression",
                ACCEPTED,
            ));
        }
        out.push((pattern.to_owned(), expr.to_owned()));
    }
    Ok(out)
}

/// Parses `PATTERN TRIGGER; PATTERN TRIGGER...` (the pattern is the first
/// word; a `;` inside a quoted string does not separate).
pub(crate) fn parse_triggers(var: &str, v: &str) -> Result<Vec<(String, String)>, Error> {
    const ACCEPTED: &str = "`PATTERN TRIGGER`, several separated by `;`, such as \
                            TAPE_TRIGGER='app.queue traceoff:1 if depth > 1000; app.err snapshot:3'";
    let mut out = Vec::new();
    for (first, item) in items(v) {
        let Some((pattern, trigger)) = item.split_once(char::is_whitespace) else {
            return Err(bad(
                var,
                v,
                first,
                "an item has a pattern and no trigger",
                ACCEPTED,
            ));
        };
        out.push((pattern.to_owned(), trigger.trim().to_owned()));
    }
    Ok(out)
}

/// Parses the latency tracer's settings: `on` or `off`, `thresh=D`
/// (`50us`, `2ms`; a bare number is µs), `keep=N`, comma-separated.
pub(crate) fn parse_latency(var: &str, v: &str) -> Result<Latency, Error> {
    const ACCEPTED: &str = "`on` or `off`, `thresh=DURATION` (50us, 2ms), `keep=N`, \
                            comma-separated, such as TAPE_LATENCY=on,thresh=100us,keep=8";
    let mut l = Latency::default();
    let mut at = 0;
    for item in v.split(',') {
        let first = at + (item.len() - item.trim_start().len());
        at += item.len() + 1;
        let item = item.trim();
        match item.split_once('=') {
            None if item == "on" => l.on = Some(true),
            None if item == "off" => l.on = Some(false),
            None if item.is_empty() => {}
            Some(("thresh", d)) => {
                l.thresh_ns = Some(
                    knobs::parse_duration_ns(d)
                        .map_err(|e| bad(var, v, first + 7, &e, ACCEPTED))?,
                );
            }
            Some(("keep", k)) => {
                l.keep = Some(
                    knobs::parse_keep(k).map_err(|what| bad(var, v, first + 5, what, ACCEPTED))?,
                );
            }
            _ => return Err(bad(var, v, first, "not a setting", ACCEPTED)),
        }
    }
    Ok(l)
}

/// Parses `NAME FROM TO [KEY]; ...` (wakeup pairs).
pub(crate) fn parse_wakeups(var: &str, v: &str) -> Result<Vec<[String; 4]>, Error> {
    const ACCEPTED: &str = "`NAME FROM TO KEY` (FROM, TO: patterns, each may end in :FIELD), \
                            several separated by `;`, such as \
                            TAPE_WAKEUP='request app.req.arrive app.req.reply id'";
    let mut out = Vec::new();
    for (first, item) in items(v) {
        let words: Vec<&str> = item.split_whitespace().collect();
        match words.as_slice() {
            [name, from, to] => out.push([name, from, to, &""].map(|s| s.to_string())),
            [name, from, to, key] => out.push([name, from, to, key].map(|s| s.to_string())),
            _ => {
                return Err(bad(
                    var,
                    v,
                    first,
                    "an item is not NAME FROM TO [KEY]",
                    ACCEPTED,
                ))
            }
        }
    }
    Ok(out)
}

/// Splits a comma-separated pattern list; a `/regex/` may contain commas.
pub(crate) fn parse_patterns(var: &str, v: &str) -> Result<Vec<String>, Error> {
    const ACCEPTED: &str = "comma-separated tracepoint names, globs (app.net.*) or /regex/";
    let mut out = Vec::new();
    let bytes = v.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i] == b',' || bytes[i] == b' ') {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        let start = i;
        if bytes[i] == b'/' {
            let close = v[i + 1..]
                .find('/')
                .ok_or_else(|| bad(var, v, start, "regex has no closing '/'", ACCEPTED))?;
            i = i + 1 + close + 1;
        } else {
            while i < bytes.len() && bytes[i] != b',' {
                i += 1;
            }
        }
        let item = v[start..i].trim();
        if let Err(e) = Pattern::parse(item).validate() {
            return Err(Error::new(
                ErrorKind::Config,
                format!(
                    "{var}={v:?}: at byte {start}: {}; accepted: {ACCEPTED}",
                    e.message()
                ),
            ));
        }
        out.push(item.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_lists() {
        assert_eq!(
            parse_filters("V", "app.rx if len > 3; app.* if name == \"a;b\" ;").unwrap(),
            vec![
                ("app.rx".to_owned(), "len > 3".to_owned()),
                ("app.*".to_owned(), "name == \"a;b\"".to_owned())
            ]
        );
        assert!(parse_filters("V", "").unwrap().is_empty());
        assert_eq!(
            parse_triggers(
                "V",
                " app.q  traceoff:1 if name == \"a;b\"; app.* snapshot ;"
            )
            .unwrap(),
            vec![
                (
                    "app.q".to_owned(),
                    "traceoff:1 if name == \"a;b\"".to_owned()
                ),
                ("app.*".to_owned(), "snapshot".to_owned())
            ]
        );
    }

    #[test]
    fn sizes() {
        let ok = [
            ("4M", 4 << 20),
            ("512K", 512 << 10),
            ("1048576", 1 << 20),
            ("1g", 1 << 30),
            (" 2MiB ", 2 << 20),
        ];
        for (s, want) in ok {
            assert_eq!(parse_size("V", s).unwrap(), want, "{s}");
        }
        for (s, at) in [
            ("", 0),
            ("M", 0),
            ("4Q", 1),
            ("12 M", 2),
            ("99999999999999999999", 0),
        ] {
            let e = parse_size("TAPE_TRACE_BUFSZ", s).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Config);
            assert!(e.message().contains("TAPE_TRACE_BUFSZ"), "{e}");
            assert!(e.message().contains(&format!("at byte {at}")), "{s}: {e}");
            assert!(e.message().contains("4M"), "{e}");
        }
    }

    #[test]
    fn patterns() {
        assert_eq!(
            parse_patterns("V", "a.b, c.*,/^x,y$/,d.e").unwrap(),
            vec!["a.b", "c.*", "/^x,y$/", "d.e"]
        );
        assert!(parse_patterns("V", "/unclosed").is_err());
        let e = parse_patterns("TAPE_TRACE", "a.b,/(/").unwrap_err();
        assert!(e.message().contains("at byte 4"), "{e}");
        let e = parse_patterns("TAPE_TRACE", "a.[").unwrap_err();
        assert!(e.message().contains("TAPE_TRACE"), "{e}");
    }

    #[test]
    fn environment_values() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = Config::from_vars(env(&[
            ("TAPE_TRACE_MODE", "discard"),
            ("TAPE_TRACE_BUFSZ", "64K"),
        ]))
        .unwrap();
        assert_eq!(c.mode, Mode::Discard);
        assert_eq!(c.buffer_size, 64 << 10);
        let c = Config::from_vars(env(&[
            ("TAPE_SHM_DIR", "/run/tape"),
            ("TAPE_SHM_MAX", "2G"),
            ("TAPE_SHM_KEEP_SIZE", "4G"),
            ("TAPE_SHM_KEEP_AGE", "2d"),
        ]))
        .unwrap();
        assert_eq!(
            c.shm_dir.as_deref(),
            Some(std::path::Path::new("/run/tape"))
        );
        assert_eq!(c.shm_max, Some(2 << 30));
        assert_eq!(c.keep_size, Some(4 << 30));
        assert_eq!(c.keep_age, Some(std::time::Duration::from_secs(2 * 86_400)));
        let bad_cases: &[(&[(&str, &str)], &str)] = &[
            (&[("TAPE_TRACE_MODE", "ring")], "TAPE_TRACE_MODE=\"ring\""),
            (&[("TAPE_TRACE_BUFSZ", "lots")], "TAPE_TRACE_BUFSZ=\"lots\""),
            (&[("TAPE_TRACE_BUFSZ", "100")], "not possible"),
            (&[("TAPE_TRACE_DIR", "")], "TAPE_TRACE_DIR"),
            (&[("TAPE_TRACE_CLOCK", "hpet")], "TAPE_TRACE_CLOCK"),
            (&[("TAPE_TRACE", "x.[")], "TAPE_TRACE="),
            (
                &[("TAPE_FILTER", "app.rx len > 3")],
                "TAPE_FILTER=\"app.rx len > 3\": at byte 0: an item has no ` if `",
            ),
            (
                &[("TAPE_FILTER", "a.b if x == 1; if y == 2")],
                "at byte 15: an item has an empty pattern",
            ),
            (&[("TAPE_DUMP", "core")], "TAPE_DUMP=\"core\""),
            (
                &[("TAPE_TRIGGER", "a.b traceoff; snapshot")],
                "TAPE_TRIGGER=\"a.b traceoff; snapshot\": at byte 14: an item has a pattern and no trigger",
            ),
            (&[("TAPE_CONTROL", "maybe")], "TAPE_CONTROL=\"maybe\""),
            (&[("TAPE_USDT", "yes")], "TAPE_USDT=\"yes\""),
            (&[("TAPE_SHM", "yes")], "TAPE_SHM=\"yes\""),
            // The shared rings' own, read where used by the same parsers
            // (a bad one was taken as unset before).
            (
                &[("TAPE_SHM_DIR", "run/tape")],
                "TAPE_SHM_DIR=\"run/tape\": at byte 0: is not an absolute path",
            ),
            (&[("TAPE_SHM_MAX", "2Q")], "TAPE_SHM_MAX=\"2Q\""),
            (&[("TAPE_SHM_KEEP_SIZE", "lots")], "TAPE_SHM_KEEP_SIZE=\"lots\""),
            (
                &[("TAPE_SHM_KEEP_AGE", "7y")],
                "TAPE_SHM_KEEP_AGE=\"7y\": at byte 0: is not an age",
            ),
        ];
        for (vars, needle) in bad_cases {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            let e =
                Config::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
                    .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Config);
            assert!(e.message().contains(needle), "{needle}: {e}");
        }
    }

    /// The cells of the Markdown table rows of `text` whose first cell is
    /// a `TAPE_` variable (`line_prefix` before each row, `//!` in module
    /// docs).
    fn rows(text: &str, line_prefix: &str) -> Vec<Vec<String>> {
        text.lines()
            .filter_map(|l| l.strip_prefix(line_prefix))
            .map(str::trim)
            .filter(|l| l.starts_with("| `TAPE_"))
            .map(|l| {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_module_docs_table_is_the_settings_table() {
        let text = include_str!("config.rs");
        let want: Vec<Vec<String>> = SETTINGS
            .iter()
            .filter(|s| !s.builder.is_empty())
            .map(|s| {
                vec![
                    format!("`{}`", s.var),
                    format!("[`Config::{}`]", s.builder),
                    s.accepts.to_owned(),
                    s.default.to_owned(),
                ]
            })
            .collect();
        assert_eq!(rows(text, "//!"), want);
    }

    #[test]
    fn the_guides_table_is_the_settings_table() {
        let guide = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/02-record.md");
        let text = std::fs::read_to_string(guide).expect("docs/02-record.md");
        let want: Vec<Vec<String>> = SETTINGS
            .iter()
            .map(|s| {
                vec![
                    format!("`{}`", s.var),
                    s.meaning.to_owned(),
                    s.example.to_owned(),
                    if s.ctl.is_empty() {
                        "–".to_owned()
                    } else {
                        format!("`{}`", s.ctl)
                    },
                ]
            })
            .collect();
        assert_eq!(rows(&text, ""), want);
    }

    #[test]
    fn a_settings_ctl_command_is_one_tape_ctl_knows_and_takes_its_value() {
        let commands: Vec<&str> = crate::control::COMMANDS
            .split(", ")
            .filter_map(|c| c.split_whitespace().next())
            .collect();
        for s in SETTINGS.iter().filter(|s| !s.ctl.is_empty()) {
            let word = s.ctl.split_whitespace().next().unwrap_or_default();
            assert!(
                commands.contains(&word),
                "{}: {word} in {commands:?}",
                s.var
            );
        }
        // A command's bad value and the variable's: the same error but
        // for the name (one parser; bad values only: nothing is applied).
        for (var, words, word, bad) in [
            (
                "TAPE_TRACE_MODE",
                &["mode", "sideways"][..],
                "mode",
                "sideways",
            ),
            (
                "TAPE_TRACE_BUFSZ",
                &["buffer", "4Q"][..],
                "buffer SIZE",
                "4Q",
            ),
            (
                "TAPE_TRACE_PACKETSZ",
                &["buffer", "4M", "1X"][..],
                "buffer PACKET",
                "1X",
            ),
        ] {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            let e = crate::control::execute(&words).expect_err(bad);
            let env = Config::from_vars(|k| (k == var).then(|| bad.to_owned())).expect_err(bad);
            assert_eq!(
                e.message().replacen(word, var, 1),
                env.message(),
                "the command's error is the variable's"
            );
        }
        // A value inside a variable's list and the command's value: the
        // same parser says what is wrong (the positions and the forms
        // accepted are each input's own).
        let what = |m: &str| -> String {
            let after = m.split_once(": at byte ").map_or("", |(_, r)| r);
            let after = after.split_once(": ").map_or("", |(_, r)| r);
            after
                .split("; accepted: ")
                .next()
                .unwrap_or_default()
                .to_owned()
        };
        for (var, value, words, word) in [
            (
                "TAPE_TRACER",
                "irqsoff",
                &["tracer", "irqsoff"][..],
                "tracer=\"irqsoff\"",
            ),
            (
                "TAPE_LATENCY",
                "on,thresh=5parsecs",
                &["latency", "thresh", "5parsecs"][..],
                "latency thresh=\"5parsecs\"",
            ),
            (
                "TAPE_LATENCY",
                "on,thresh=1e400s",
                &["latency", "thresh", "1e400s"][..],
                "latency thresh=\"1e400s\"",
            ),
            (
                "TAPE_LATENCY",
                "keep=0",
                &["latency", "keep", "0"][..],
                "latency keep=\"0\"",
            ),
        ] {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            let e = crate::control::execute(&words).expect_err(value);
            let env = Config::from_vars(|k| (k == var).then(|| value.to_owned())).expect_err(value);
            assert!(e.message().starts_with(word), "{}", e.message());
            assert!(!what(e.message()).is_empty(), "{}", e.message());
            assert_eq!(what(e.message()), what(env.message()), "{var}={value}");
        }
    }

    #[test]
    fn the_settings_read_where_used_are_rows_of_the_table() {
        for var in knobs::READ_WHERE_USED {
            assert!(SETTINGS.iter().any(|s| s.var == *var), "{var}");
        }
    }

    #[test]
    fn every_setting_taken_as_text_is_read_and_refuses_bad_text() {
        // A value that is not UTF-8 is refused naming the variable: the
        // parser reads every setting the table says it takes.
        use std::os::unix::ffi::OsStringExt as _;
        for s in SETTINGS.iter().filter(|s| s.apply.is_some()) {
            let e = Config::from_os_vars(|k| {
                (k == s.var).then(|| OsString::from_vec(vec![b'a', 0xff]))
            })
            .expect_err(s.var);
            assert!(e.message().contains(s.var), "{}: {e}", s.var);
            assert!(e.message().contains("UTF-8"), "{}: {e}", s.var);
        }
    }
}
