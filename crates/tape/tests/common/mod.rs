//! Helpers shared by the integration tests: running the real readers
//! (babeltrace2, babeltrace 1.5) on the traces tape writes, and parsing
//! their text output.
//!
//! A reader that is not installed makes the test print a notice and skip,
//! unless `TAPE_REQUIRE_TOOLS=1` (set in CI), where it fails the test.

#![allow(dead_code)]

pub use tape_test_support::skipped;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The two readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// babeltrace2 (2.0.x).
    Bt2,
    /// babeltrace 1.5.
    Bt1,
    /// tape's own reader (`tape_ctf`), in babeltrace2's text format.
    Tape,
}

impl Reader {
    pub fn command(self) -> &'static str {
        match self {
            Reader::Bt2 => "babeltrace2",
            Reader::Bt1 => "babeltrace",
            Reader::Tape => "tape",
        }
    }
}

/// What tape's reader prints for a trace (babeltrace2's format, times
/// left out): `tape show`, as library calls.
pub fn tape_text(trace: &Path) -> Result<ReadOutput, String> {
    use tape_ctf::merge::{Step, StreamMerge};
    use tape_ctf::text::write_event_line;
    let traces = tape_ctf::metadata::find_traces(trace).map_err(|e| e.to_string())?;
    let mut merge = StreamMerge::new(&traces)?;
    let (mut stdout, mut stderr) = (tape_ctf::decode::TextBuf::new(), String::new());
    while let Some(step) = merge.next() {
        match step.map_err(|e| e.to_string())? {
            Step::Event(stream, _) => {
                write_event_line(&mut stdout, b"00:00:00.000000000", None, stream)
                    .map_err(|e| e.to_string())?;
            }
            Step::Lost(stream, count, _) => {
                stderr.push_str(&format!(
                    "WARNING: Tracer discarded {count} events within stream \"{}\"\n",
                    stream.path().display()
                ));
            }
        }
    }
    let stdout = String::from_utf8(stdout.as_slice().to_vec()).map_err(|e| e.to_string())?;
    Ok(ReadOutput { stdout, stderr })
}

/// Whether `reader` is installed; prints a notice (or panics under
/// `TAPE_REQUIRE_TOOLS=1`) when it is not.
pub fn available(reader: Reader) -> bool {
    if reader == Reader::Tape {
        return true;
    }
    let ok = Command::new(reader.command())
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skipped::required(
            &format!("{}'s side of a check of tape's traces", reader.command()),
            &format!("apt-get install {}", reader.command()),
        );
    }
    ok
}

/// What a reader printed.
pub struct ReadOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `reader` on `trace` with extra `args`; `None` when the reader is not
/// installed (and tools are not required). Panics if the reader fails.
pub fn read(reader: Reader, trace: &Path, args: &[&str]) -> Option<ReadOutput> {
    if reader == Reader::Tape {
        return Some(tape_text(trace).unwrap_or_else(|e| panic!("tape reader: {e}")));
    }
    if !available(reader) {
        return None;
    }
    let out = Command::new(reader.command())
        .args(args)
        .arg(trace)
        .output()
        .expect("run reader");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} {} failed ({}):\n{stderr}",
        reader.command(),
        trace.display(),
        out.status
    );
    Some(ReadOutput { stdout, stderr })
}

/// Runs `reader` and checks it printed nothing on stderr (no warning,
/// no error): for traces without lost events.
pub fn read_clean(reader: Reader, trace: &Path) -> Option<String> {
    let out = read(reader, trace, &[])?;
    assert!(
        out.stderr.trim().is_empty(),
        "{} printed on stderr for {}:\n{}",
        reader.command(),
        trace.display(),
        out.stderr
    );
    assert!(
        !out.stdout.contains("WARNING"),
        "{} warned for {}",
        reader.command(),
        trace.display()
    );
    Some(out.stdout)
}

/// One event as printed by babeltrace's default text format:
/// `[time] (+delta) host name: { context }, { payload }`.
#[derive(Clone, Debug)]
pub struct Event {
    pub time: String,
    pub name: String,
    /// `tid = 12, thread_name = "main"` (packet context, as printed).
    pub context: String,
    /// The payload between the outer braces, e.g. `a = 1, b = "x"`.
    pub payload: String,
}

/// Splits a reader's output into events (a string may contain newlines in
/// babeltrace 1.5's output: a record starts at a line beginning with `[`
/// followed by a digit).
pub fn events(text: &str) -> Vec<Event> {
    let mut records: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        let starts = line.starts_with('[') && line[1..].starts_with(|c: char| c.is_ascii_digit());
        if starts || records.is_empty() {
            records.push(line.to_owned());
        } else if let Some(last) = records.last_mut() {
            last.push_str(line);
        }
    }
    records
        .iter()
        .filter(|r| r.starts_with('['))
        .filter_map(|r| parse_event(r.strip_suffix('\n').unwrap_or(r)))
        .collect()
}

fn parse_event(r: &str) -> Option<Event> {
    let close = r.find(']')?;
    let time = r[1..close].to_owned();
    let rest = &r[close + 1..];
    let colon = rest.find(": {")?;
    let name = rest[..colon].rsplit(' ').next()?.to_owned();
    let body = &rest[colon + 2..];
    let split = body.find("}, {")?;
    let context = body[2..split].trim().to_owned();
    let payload = body[split + 4..].strip_suffix('}')?.trim().to_owned();
    Some(Event {
        time,
        name,
        context,
        payload,
    })
}

/// Discarded-event reports of a reader (on its stderr), summed:
/// babeltrace2 prints `WARNING: Tracer discarded N events between ...`,
/// babeltrace 1.5 `[warning] Tracer discarded N events between ...`.
pub fn discarded_reported(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("WARNING: Tracer discarded ")
                .or_else(|| l.strip_prefix("[warning] Tracer discarded "))
        })
        .filter_map(|l| l.split(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A fresh, not yet existing path for a trace, under cargo's temporary
/// directory for integration tests.
pub fn trace_path(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("traces");
    std::fs::create_dir_all(&dir).expect("create tmp dir");
    let p = dir.join(format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// The value of a field `name = value` in a payload (values without
/// top-level commas: integers, floats, simple strings).
pub fn field<'a>(payload: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name} = ");
    let start = if payload.starts_with(&key) {
        0
    } else {
        payload.find(&format!(", {key}"))? + 2
    };
    let v = &payload[start + key.len()..];
    Some(v.split(", ").next().unwrap_or(v))
}

/// `field` parsed as an integer.
pub fn field_u64(payload: &str, name: &str) -> u64 {
    field(payload, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no integer field {name} in {payload}"))
}

/// Checks the absolute times that babeltrace2 prints (`--clock-seconds`)
/// for the events named `name` against the `CLOCK_REALTIME` values `rt_ns`
/// read just before each emit (field `rt`, in order). Returns (median
/// |error| in ns, frequency error in ppm).
///
/// Targets: 10 us and 10 ppm. The machine is shared and noisy: a thread
/// can be preempted between reading the clock and emitting, so single
/// samples may be late by a scheduling quantum; the checks therefore use the
/// median error and a robust (Theil-Sen) slope, and a 100 us bound on the
/// 90th percentile.
pub fn check_event_times(dir: &Path, name: &str, rt_ns: &[i64]) -> Option<(i128, f64)> {
    let out = read(Reader::Bt2, dir, &["--clock-seconds"])?;
    let evs: Vec<Event> = events(&out.stdout)
        .into_iter()
        .filter(|e| e.name == name)
        .collect();
    assert_eq!(evs.len(), rt_ns.len());
    let mut errs = Vec::new();
    for (e, &rt) in evs.iter().zip(rt_ns) {
        let (s, ns) = e.time.split_once('.').expect("seconds.nanoseconds");
        let t = s.parse::<i128>().unwrap() * 1_000_000_000 + ns.parse::<i128>().unwrap();
        assert_eq!(field(&e.payload, "rt").unwrap().parse::<i64>().unwrap(), rt);
        errs.push((i128::from(rt), t - i128::from(rt)));
    }
    let mut abs: Vec<i128> = errs.iter().map(|(_, d)| d.abs()).collect();
    abs.sort();
    let median = abs[abs.len() / 2];
    let p90 = abs[abs.len() * 9 / 10];
    let mut slopes = Vec::new();
    for (i, a) in errs.iter().enumerate() {
        for b in &errs[i + 1..] {
            if b.0 - a.0 > 100_000_000 {
                slopes.push((b.1 - a.1) as f64 / (b.0 - a.0) as f64 * 1e6);
            }
        }
    }
    slopes.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let ppm = slopes[slopes.len() / 2];
    eprintln!("event time vs CLOCK_REALTIME: median |error| {median} ns, p90 {p90} ns, slope {ppm:.3} ppm");
    assert!(
        median <= 10_000,
        "median error {median} ns > 10 us: {errs:?}"
    );
    assert!(p90 <= 100_000, "p90 error {p90} ns > 100 us: {errs:?}");
    assert!(ppm.abs() <= 10.0, "frequency error {ppm} ppm > 10 ppm");
    Some((median, ppm))
}

/// The clock test of one clock choice: `stamp(rt, i)` emits the event
/// `test.clock.stamp` with the realtime read just before it; 40 events over
/// one second, then the times babeltrace2 prints are checked
/// ([`check_event_times`]) and the metadata names the clock source.
pub fn clock_test(choice: tape::ClockChoice, stamp: impl Fn(i64, u32)) {
    let _g = tape::Config::new()
        .enable("test.clock.*")
        .clock(choice)
        .init()
        .expect("init");
    _g.disarm();
    let mut rts = Vec::new();
    for i in 0..40 {
        let rt = tape::clock::realtime_ns() as i64;
        stamp(rt, i);
        rts.push(rt);
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let dir = trace_path("clock");
    tape::save_to(&dir).expect("save");
    let meta = std::fs::read_to_string(dir.join("metadata")).unwrap();
    let source = match choice {
        tape::ClockChoice::Monotonic => "monotonic",
        tape::ClockChoice::Auto => tape::clock::source().name(),
    };
    assert!(
        meta.contains(&format!("clock_source = \"{source}\";")),
        "{meta}"
    );
    if choice == tape::ClockChoice::Monotonic {
        assert!(meta.contains("freq = 1000000000;"), "{meta}");
    }
    #[cfg(target_arch = "x86_64")]
    if choice == tape::ClockChoice::Auto && tape::clock::invariant_tsc() {
        assert_eq!(source, "tsc");
    }
    check_event_times(&dir, "test.clock.stamp", &rts);
}
