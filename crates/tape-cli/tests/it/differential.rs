//! Differential test: random valid traces (`support/gen.rs`) read by
//! `tape show`, `tape show --format json`, `tape check` and babeltrace2.
//!
//! For every trace:
//! * `tape show`'s text equals babeltrace2's, line for line, and both
//!   succeed;
//! * `tape show --format json` gives every event with the generator's
//!   values (scopes, fields, enums' labels, variants' options, strings'
//!   bytes);
//! * `tape check` passes.
//!
//! A difference fails the test, naming the seed and keeping the trace on
//! disk; `TAPE_DIFF_SEED=S TAPE_DIFF_N=1` replays it. `TAPE_DIFF_N` sets
//! the number of traces (default 300), `TAPE_DIFF_SEED` the first seed;
//! `scripts/differential.sh` runs any number.

use crate::shared;

use crate::gen;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

fn tape() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tape"))
}

/// What a command gave.
struct Run {
    ok: bool,
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs `cmd` for at most 20 s and 64 MiB of output (a reader that loops
/// must not take the test down with it).
fn run(mut cmd: Command) -> Run {
    use std::io::Read;
    const LIMIT: u64 = 64 << 20;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command runs");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let errs = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = (&mut err).take(LIMIT).read_to_end(&mut v);
        v
    });
    // The watchdog kills the child after 20 s unless told it ended (the
    // child is reaped only after that, so its pid is still its own).
    let pid = child.id();
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if ended.recv_timeout(Duration::from_secs(20)).is_ok() {
            return false;
        }
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        true
    });
    let mut stdout = Vec::new();
    let _ = (&mut out).take(LIMIT).read_to_end(&mut stdout);
    let big = stdout.len() as u64 >= LIMIT;
    if big {
        let _ = child.kill();
    }
    drop(out);
    let status = child.wait().expect("waited");
    let _ = done.send(());
    let timed_out = watchdog.join().unwrap_or(false);
    let mut stderr = String::from_utf8_lossy(&errs.join().unwrap_or_default()).into_owned();
    if big {
        stderr.push_str("\n[more than 64 MiB of output: killed]");
    }
    if timed_out {
        stderr.push_str("\n[still running after 20 s: killed]");
    }
    Run {
        ok: status.success() && !big && !timed_out,
        stdout,
        stderr,
    }
}

/// Shapes of valid traces that babeltrace2 2.0.4 cannot read, how its
/// failure reads, and why the trace is valid. On such a trace tape's text
/// has no oracle; its JSON is still checked against the generator's
/// values, and `tape check` must pass.
const BT2_CANNOT: &[(&str, &str, &str)] = &[
    (
        "absolute variant tag",
        "syntax error, unexpected CTF_",
        "CTF 1.8 §4.2.2 and §7.3.2: a variant's tag is a field path, relative or absolute \
         (`variant <event.fields.x>`); babeltrace2's grammar takes an identifier only there, \
         and `event`, `stream`, `trace` are keywords to its lexer",
    ),
    (
        "wide integer",
        "integer fields over 64 bits are not supported",
        "CTF 1.8 §4.1.5: an integer's `size` is any number of bits; babeltrace2 2.0.4 \
         rejects the metadata of any integer over 64 bits",
    ),
    (
        "dynamic event context",
        "Assertion `tgt_fc` failed",
        "CTF 1.8 §5 (event context: any type) and §4.2.2/§4.2.4: a sequence or variant \
         in an event class's `context` is valid; babeltrace2 2.0.4 aborts on an assertion \
         (ctf-meta-update-value-storing-indexes.c) when it resolves its length or tag",
    ),
];

/// Shapes of valid traces that babeltrace2 2.0.4 prints wrongly, and the
/// part of its text to set aside: both texts go through the function
/// before they are compared (tape's values are checked in its JSON).
#[allow(clippy::type_complexity)]
const BT2_WRONG: &[(&str, fn(&str) -> String, &str)] = &[
    (
        "hex 61-63 bits",
        hex_digits_aside,
        "CTF 1.8 §4.1.5: `base = 16` is how to show the integer's value; babeltrace2 2.0.4 \
         masks a hexadecimal value to its size rounded up to whole nibbles with \
         `(1 << 64) - 1`, undefined in C and 0 on x86-64, so every integer of 61 to 63 bits \
         prints as `0x0`",
    ),
    (
        "time before the epoch",
        time_aside,
        "CTF 1.8 §8: a clock's `offset_s` may be negative, so a time may come before the \
         epoch; babeltrace2 2.0.4 prints the first such time as `-S.nnnnnnnnn` and every \
         later one as the wall time of its distance to the epoch (-3.5 s as 00:00:03.5), \
         the time of another instant; tape prints them all as `-S.nnnnnnnnn` (the deltas \
         are compared)",
    ),
];

/// babeltrace2 2.0.4 shows an empty string as the value a string field
/// of its pool held before (the text of another event); CTF 1.8 §4.2.5: a
/// string is its bytes up to the NUL, an empty one only the NUL. Whether
/// `bt2` equals `tape` where every empty string `""` of tape's may stand
/// for any string of babeltrace2's (tape's values are checked in its JSON).
fn equal_but_empty_strings(bt2: &str, tape: &str) -> bool {
    let (b, t) = (bt2.as_bytes(), tape.as_bytes());
    let (mut i, mut j) = (0, 0);
    while j < t.len() {
        // A value `""` (after `= ` or `{ `) against any string.
        if j > 0 && t[j - 1] == b' ' && t[j..].starts_with(b"\"\"") && b.get(i) == Some(&b'"') {
            // Skip babeltrace2's string: up to its closing quote.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            j += 2;
            continue;
        }
        if i >= b.len() || b[i] != t[j] {
            return false;
        }
        i += 1;
        j += 1;
    }
    i == b.len()
}

/// The time at the start of a line as `[_]`.
fn time_aside(line: &str) -> String {
    match (line.strip_prefix('['), line.find("] ")) {
        (Some(_), Some(i)) => format!("[_]{}", &line[i + 1..]),
        _ => line.to_owned(),
    }
}

/// Every hexadecimal number as `0x_`.
fn hex_digits_aside(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        out.push_str("0x_");
        rest = rest[i + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// What one trace gave: `Ok(None)` when all agreed, `Ok(Some(shape))`
/// when babeltrace2 could not read it for a known reason and tape's values
/// were right, `Err(why)` else.
fn compare(trace: &gen::Trace, dir: &Path) -> Result<Option<&'static str>, String> {
    json_values(trace, dir)?;
    let mut cmd = tape();
    cmd.arg("check").arg(dir);
    let check = run(cmd);
    if !check.ok {
        return Err(format!("tape check failed: {}", check.stderr));
    }
    let mut cmd = Command::new("babeltrace2");
    cmd.arg(dir);
    let bt2 = run(cmd);
    if !bt2.ok {
        return BT2_CANNOT
            .iter()
            .find(|(shape, sign, _)| trace.shapes.contains(shape) && bt2.stderr.contains(sign))
            .map(|(shape, _, _)| Some(*shape))
            .ok_or_else(|| {
                format!(
                    "babeltrace2 failed on a valid trace: {}",
                    bt2.stderr.lines().take(8).collect::<Vec<_>>().join("\n")
                )
            });
    }
    let mut cmd = tape();
    cmd.arg("show").arg(dir);
    let show = run(cmd);
    if !show.ok {
        return Err(format!("tape show failed: {}", show.stderr));
    }
    // Lost events: tape prints `[LOST n EVENTS]` lines in the text where
    // babeltrace2 prints warnings on stderr (counted in the JSON check).
    let lines = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out)
            .split('\n')
            .filter(|l| !l.starts_with("[LOST "))
            .map(str::to_owned)
            .collect()
    };
    let (mut b, mut t) = (lines(&bt2.stdout), lines(&show.stdout));
    let mut wrong = None;
    for (shape, aside, _) in BT2_WRONG {
        if trace.shapes.contains(shape) && b != t {
            b = b.iter().map(|l| aside(l)).collect();
            t = t.iter().map(|l| aside(l)).collect();
            wrong = Some(*shape);
        }
    }
    if b.len() == t.len()
        && b != t
        && b.iter()
            .zip(&t)
            .all(|(x, y)| x == y || equal_but_empty_strings(x, y))
        && trace
            .events
            .iter()
            .any(|(_, v)| v.to_string().contains("\"\""))
    {
        return Ok(Some("empty string"));
    }
    if b != t {
        let at = b
            .iter()
            .zip(&t)
            .position(|(x, y)| x != y)
            .unwrap_or(b.len().min(t.len()));
        return Err(format!(
            "text differs at line {} ({} lines vs {}):\n  babeltrace2: {:?}\n  tape:        {:?}",
            at + 1,
            b.len(),
            t.len(),
            b.get(at),
            t.get(at)
        ));
    }
    Ok(wrong)
}

/// `tape show --format json` gives the generator's events and values (as
/// multisets: the order is the text's business).
fn json_values(trace: &gen::Trace, dir: &Path) -> Result<(), String> {
    let mut cmd = tape();
    cmd.args(["show", "--format", "json"]).arg(dir);
    let json = run(cmd);
    if !json.ok {
        return Err(format!("tape show --format json failed: {}", json.stderr));
    }
    let mut got = Vec::new();
    let mut lost = 0;
    for (n, line) in json
        .stdout
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| format!("JSON line {} is not JSON: {e}", n + 1))?;
        if let Some(n) = v.get("lost") {
            lost += n.as_u64().unwrap_or_default();
            continue;
        }
        let mut scopes = serde_json::Map::new();
        for key in ["packet_context", "stream_context", "context", "fields"] {
            if let Some(s) = v.get(key).filter(|s| !s.is_null()) {
                scopes.insert(key.to_owned(), s.clone());
            }
        }
        let name = v["name"].as_str().unwrap_or_default();
        let stream = v["stream"].as_str().unwrap_or_default();
        let file = stream.rsplit('/').next().unwrap_or_default();
        got.push(format!("{file} {name} {}", Value::Object(scopes)));
    }
    let mut want: Vec<String> = trace
        .events
        .iter()
        .map(|(name, scopes)| format!("{name} {scopes}"))
        .collect();
    got.sort();
    want.sort();
    if got != want {
        let at = got.iter().zip(&want).position(|(a, b)| a != b);
        return Err(match at {
            Some(i) => format!(
                "JSON values differ:\n  generator: {}\n  tape:      {}",
                want[i], got[i]
            ),
            None => format!(
                "JSON has {} events, the generator wrote {}",
                got.len(),
                want.len()
            ),
        });
    }
    if lost != trace.discarded {
        return Err(format!(
            "JSON says {lost} events lost, the packets {}",
            trace.discarded
        ));
    }
    Ok(())
}

#[test]
fn tape_reads_generated_traces_as_babeltrace2_does() {
    if !shared::babeltrace2("the differential test") {
        return;
    }
    let n: u64 = std::env::var("TAPE_DIFF_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let first: u64 = std::env::var("TAPE_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("differential");
    let next = AtomicU64::new(first);
    let failures = Mutex::new(Vec::new());
    let deviations = Mutex::new(std::collections::BTreeMap::<&str, u64>::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= first + n {
                    break;
                }
                let trace = gen::generate(seed);
                let dir = root.join(format!("seed-{seed}"));
                let _ = std::fs::remove_dir_all(&dir);
                trace.write(&dir).expect("the trace is written");
                match compare(&trace, &dir) {
                    Ok(deviation) => {
                        if let Some(d) = deviation {
                            *deviations.lock().unwrap().entry(d).or_default() += 1;
                        }
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                    Err(why) => {
                        // The generator's values beside the trace, to look at.
                        let want: String = trace
                            .events
                            .iter()
                            .map(|(name, scopes)| format!("{name} {scopes}\n"))
                            .collect();
                        let _ = std::fs::write(dir.with_extension("expected"), want);
                        failures.lock().unwrap().push((seed, why, dir))
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort_by_key(|f| f.0);
    let deviations = deviations.into_inner().unwrap();
    eprintln!(
        "differential: {n} traces from seed {first}: {} unexplained differences, \
         named babeltrace2 deviations {} (tape's values checked): {deviations:?}",
        failures.len(),
        deviations.values().sum::<u64>()
    );
    for (seed, why, dir) in failures.iter().take(10) {
        eprintln!("seed {seed} ({}): {why}\n", dir.display());
    }
    assert!(
        failures.is_empty(),
        "{} of {n} traces differ",
        failures.len()
    );
}
