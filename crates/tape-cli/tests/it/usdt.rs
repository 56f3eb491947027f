//! USDT probes in the binary (issue 40): `readelf -n` of tape's `flight`
//! example shows one SystemTap SDT note per tracepoint (the ones its trace
//! declares), named by the rule of `tape::usdt`, with its arguments; gdb's
//! `info probes` lists them. Skipped with a notice without binutils or gdb
//! (a failure under `TAPE_REQUIRE_TOOLS=1`).

use crate::flight::text;
use crate::pipeline;
use crate::shared;

use std::collections::BTreeSet;
use std::process::Command;

/// (provider, name, arguments) of each stapsdt note of `binary`.
fn notes(readelf: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, String)> = None;
    for l in readelf.lines().map(str::trim) {
        if let Some(p) = l.strip_prefix("Provider: ") {
            cur = Some((p.to_owned(), String::new()));
        } else if let Some(n) = l.strip_prefix("Name: ") {
            if let Some(c) = cur.as_mut() {
                c.1 = n.to_owned();
            }
        } else if let Some(a) = l.strip_prefix("Arguments: ") {
            if let Some((p, n)) = cur.take() {
                out.push((p, n, a.to_owned()));
            }
        }
    }
    out
}

#[test]
fn every_tracepoint_is_an_sdt_probe_readelf_and_gdb_list() {
    let flight = pipeline::example("flight");
    let Ok(r) = Command::new("readelf").arg("-n").arg(&flight).output() else {
        shared::required("the SDT notes of the binary", "apt-get install binutils");
        return;
    };
    let found = notes(&text(&r.stdout));
    // The tracepoints of the binary: the event classes of its trace.
    let dir = crate::flight::base("usdt-notes");
    let trace = pipeline::saved(
        {
            let mut c = Command::new(&flight);
            c.args(["--threads", "1", "--seconds", "0.05"])
                .env("TAPE_TRACE", "flight.*");
            c
        },
        &dir,
    );
    let t = tape_ctf::metadata::open_trace(&trace).unwrap();
    let classes: BTreeSet<String> = t.trace.events.iter().map(|e| e.name.clone()).collect();
    let want: BTreeSet<(String, String)> = classes
        .iter()
        .map(|n| match n.split_once('.') {
            Some((p, rest)) => (p.to_owned(), rest.replace('.', "_")),
            None => ("tape".to_owned(), n.clone()),
        })
        .collect();
    let got: Vec<(String, String)> = found
        .iter()
        .map(|(p, n, _)| (p.clone(), n.clone()))
        .collect();
    assert_eq!(got.len(), want.len(), "one note per tracepoint: {found:?}");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
    // flight.event(thread: u32, seq: u64, text: &str, sum: u64): five
    // arguments, the text a pointer and a length.
    let (_, _, args) = found
        .iter()
        .find(|(p, n, _)| p == "flight" && n == "event")
        .unwrap();
    let sizes: Vec<&str> = args
        .split(' ')
        .map(|a| a.split('@').next().unwrap())
        .collect();
    assert_eq!(sizes, ["4", "8", "8", "8", "8"], "{args}");
    // gdb reads the same notes.
    let Ok(g) = Command::new("gdb")
        .args(["-batch", "-ex", "info probes"])
        .arg(&flight)
        .output()
    else {
        shared::required(
            "gdb's `info probes` of the SDT notes",
            "apt-get install gdb",
        );
        return;
    };
    let listed = text(&g.stdout);
    for (p, n) in &want {
        assert!(
            listed.lines().any(|l| l.split_whitespace().take(3).eq([
                "stap",
                p.as_str(),
                n.as_str()
            ])),
            "gdb does not list {p}:{n}: {listed}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The values after `key = ` in a `tape show` line: a number, or a quoted
/// text.
fn value_after<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line
        .find(&format!(" {key} = "))
        .unwrap_or_else(|| panic!("{key} in {line}"));
    let rest = &line[at + key.len() + 4..];
    match rest.strip_prefix('"') {
        Some(q) => q.split('"').next().unwrap(),
        None => rest.split([',', ' ', '}']).next().unwrap(),
    }
}

/// Whether the tests run as root with `tool` (it runs `--version`), and
/// `also` holds; if not, the notice (or the failure, under
/// `TAPE_REQUIRE_TOOLS=1`) that `what` is not checked, with how to get it.
fn as_root_with(tool: &str, also: bool, what: &str, how: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let have = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && have && also {
        return true;
    }
    shared::required(what, how);
    false
}

/// Starts `program` with its standard streams piped; it and the pid it
/// prints first.
fn start_saying_pid(program: &mut Command) -> (std::process::Child, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = program
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pid = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut pid)
        .unwrap();
    (child, pid)
}

/// bpftrace running a script against process `pid` (as root), its lines
/// gathered as they come.
struct Bpftrace {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Bpftrace {
    /// Starts it, with room for every line in its perf buffer (it would
    /// say "Lost N events" otherwise).
    fn start(pid: &str, script: &str) -> Bpftrace {
        use std::io::BufRead;
        let mut child = Command::new("bpftrace")
            .args(["-p", pid.trim(), "-e", script])
            .env("BPFTRACE_PERF_RB_PAGES", "4096")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(l);
                }
            })
        };
        Bpftrace {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits (at most `secs`) until its lines so far satisfy `what`.
    fn wait_for(&self, what: impl Fn(&[String]) -> bool, secs: u64) {
        let t = std::time::Instant::now();
        while !what(&self.lines.lock().unwrap()) && t.elapsed().as_secs() < secs {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Stops it (SIGINT: it prints its maps) and gives its lines and its
    /// standard error.
    fn stop(mut self) -> (Vec<String>, String) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.end()
    }

    /// Kills it; its lines and standard error.
    fn kill(mut self) -> (Vec<String>, String) {
        let _ = self.child.kill();
        self.end()
    }

    fn end(&mut self) -> (Vec<String>, String) {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        (std::mem::take(&mut self.lines.lock().unwrap()), err)
    }
}

/// bpftrace (as root) attached to a running tape program's SDT probe: the
/// program, which waits for it, emits N events; bpftrace counts exactly N
/// and prints each one's integer, string and enum fields as `tape show`
/// prints them from the program's own trace; once bpftrace exits, the
/// tracepoint's state word is as before. Skipped with a notice where
/// bpftrace is missing or the kernel refuses (a failure under
/// `TAPE_REQUIRE_TOOLS=1`).
#[test]
fn bpftrace_sees_exactly_what_tape_records() {
    if !as_root_with(
        "bpftrace",
        true,
        "bpftrace attached to a tape program's USDT probe",
        "apt-get install bpftrace, and run the tests as root",
    ) {
        return;
    }
    use std::io::BufRead;
    let n = 500u64;
    let dir = crate::flight::base("usdt-bpftrace");
    let usdt = pipeline::example("usdt");
    // bpftrace lists the program's probes: the ones it registered.
    let listed = Command::new("bpftrace")
        .arg("-l")
        .arg(format!("usdt:{}:*", usdt.display()))
        .output()
        .unwrap();
    let prefix = format!("usdt:{}:", usdt.display());
    let listed: BTreeSet<String> = text(&listed.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    let own = Command::new(&usdt).arg("--list").output().unwrap();
    let own: BTreeSet<String> = text(&own.stdout).lines().map(str::to_owned).collect();
    assert!(
        own.contains("usdt_demo:request") && own.contains("fn:usdt_serve_entry"),
        "{own:?}"
    );
    assert_eq!(listed, own, "bpftrace -l against the program's own list");
    let (mut program, pid) = start_saying_pid(
        Command::new(&usdt)
            .args(["--events", &n.to_string(), "--go-line", "--traced"])
            .env("TAPE_TRACE", "usdt_demo.*")
            .env("TAPE_TRACE_DIR", &dir)
            .env("TAPE_SHM", "off"),
    );
    // What `tape ctl PID list` says of the tracepoint and the traced entry.
    let listed = |pid: &str| {
        let out = Command::new(pipeline::TAPE)
            .args(["ctl", pid.trim(), "list"])
            .output()
            .unwrap();
        let all = text(&out.stdout);
        ["usdt_demo.request\t", "fn.usdt.serve.entry\t"].map(|name| {
            all.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} in {all}{}", text(&out.stderr)))
                .to_owned()
        })
    };
    for l in listed(&pid) {
        assert!(!l.contains(", usdt "), "no tool yet: {l}");
    }
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }} usdt:{}:usdt_demo:request {{ printf(\"%d %s %d\\n\", \
         arg0, str(arg1, arg2), arg3); @n = count(); }} usdt:{}:fn:usdt_serve_entry {{ \
         printf(\"entry %d %d\\n\", *(uint32 *)arg0, arg1); @e = count(); }}",
        usdt.display(),
        usdt.display()
    );
    let bpf = Bpftrace::start(&pid, &script);
    // Once bpftrace runs (its BEGIN) and the program saw the probe
    // attached (bounded), the program emits.
    bpf.wait_for(|l| l.iter().any(|l| l == "ready"), 30);
    {
        use std::io::Write;
        let mut stdin = program.stdin.take().unwrap();
        let _ = stdin.write_all(b"go\n");
    }
    // The program says when it has emitted (it waits for the probe first).
    let mut err = std::io::BufReader::new(program.stderr.take().unwrap());
    let mut said = String::new();
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        said.push_str(&line);
        if line.starts_with("usdt: emitted") {
            break;
        }
        line.clear();
    }
    if !said.contains("usdt: emitted") {
        let _ = program.kill();
        let _ = program.wait();
        let (_, bpf_err) = bpf.kill();
        shared::required(
            &format!(
                "bpftrace attached to a tape program's USDT probe (the kernel refused: {})",
                bpf_err.trim()
            ),
            "a kernel with uprobes and BPF",
        );
        return;
    }
    let [request, entry] = listed(&pid);
    assert!(
        request.contains(", usdt usdt_demo:request attached"),
        "{request}"
    );
    assert!(
        entry.contains(", usdt fn:usdt_serve_entry attached"),
        "{entry}"
    );
    // Every line printed (bounded), then bpftrace ends on SIGINT, printing
    // its count.
    bpf.wait_for(|l| l.len() >= 2 * n as usize + 2, 10);
    let (lines, bpf_err) = bpf.stop();
    let seen = lines.join("\n");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    said.push_str(&rest);
    assert!(program.wait().unwrap().success(), "{said}");
    let count = seen
        .lines()
        .find_map(|l| l.strip_prefix("@n: "))
        .unwrap_or_else(|| panic!("{seen}{bpf_err}"));
    assert_eq!(count.trim(), n.to_string(), "{seen}");
    // The traced function's entry, which only bpftrace wants: its payload
    // (the fn_call class: a u32 depth, 0 here) at arg0, its size at arg1.
    let entries = seen
        .lines()
        .find_map(|l| l.strip_prefix("@e: "))
        .unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(entries.trim(), n.to_string(), "{seen}");
    let shapes: BTreeSet<&str> = seen.lines().filter(|l| l.starts_with("entry ")).collect();
    assert_eq!(shapes, BTreeSet::from(["entry 0 4"]), "{seen}");
    let printed: Vec<&str> = seen
        .lines()
        .filter(|l| l.split(' ').count() == 3 && l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    // What tape recorded, in the same words.
    let shown = Command::new(pipeline::TAPE)
        .arg("show")
        .arg(pipeline::only_trace(&dir))
        .output()
        .unwrap();
    let recorded: Vec<String> = text(&shown.stdout)
        .lines()
        .map(|l| {
            format!(
                "{} {} {}",
                value_after(l, "id"),
                value_after(l, "path"),
                value_after(l, "container")
            )
        })
        .collect();
    assert_eq!(recorded.len() as u64, n);
    assert_eq!(printed, recorded);
    // Detached: the state word as before.
    let states = said
        .lines()
        .find(|l| l.contains("state before"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        states.contains("tool detached"),
        "{states}; bpftrace said: {bpf_err}"
    );
    let words: Vec<&str> = states.split_whitespace().collect();
    let at = |w: &str| words.iter().position(|x| *x == w).map(|i| words[i + 1]);
    let (before, after) = (at("before"), at("after"));
    assert!(before.is_some(), "{states}");
    assert_eq!(before, after, "{states}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `id = N` and enum values of the `usdt_demo.request` events of the
/// one trace in `dir`, as `tape show` prints them: (id, path length,
/// status).
fn recorded_requests(dir: &std::path::Path) -> Vec<(u64, usize, u64)> {
    let shown = Command::new(pipeline::TAPE)
        .arg("show")
        .arg(pipeline::only_trace(dir))
        .output()
        .unwrap();
    text(&shown.stdout)
        .lines()
        .filter(|l| l.contains("usdt_demo.request"))
        .map(|l| {
            (
                value_after(l, "id").parse().unwrap(),
                value_after(l, "path").len(),
                value_after(l, "container").parse().unwrap(),
            )
        })
        .collect()
}

/// Removes a perf probe event when dropped (the test's, left otherwise in
/// the kernel's tracefs).
struct PerfEvent(&'static str);

impl Drop for PerfEvent {
    fn drop(&mut self) {
        let _ = Command::new("perf")
            .args(["probe", "-q", "-d", self.0])
            .output();
    }
}

/// perf (as root, tracefs mounted): `perf probe` makes a uprobe event of
/// the SDT probe, with its semaphore; `perf record -- PROGRAM` runs the
/// usdt example, which sees the probe attached and emits N events; `perf
/// script` prints N samples whose integer, length and enum arguments are
/// what `tape show` prints of the same events. Skipped with a notice
/// without perf, root or tracefs (a failure under `TAPE_REQUIRE_TOOLS=1`).
#[test]
fn perf_records_the_probe_with_its_arguments() {
    if !as_root_with(
        "perf",
        std::path::Path::new("/sys/kernel/tracing/uprobe_events").exists(),
        "perf recording a tape program's USDT probe",
        "apt-get install linux-perf; run as root with tracefs mounted \
         (mount -t tracefs nodev /sys/kernel/tracing)",
    ) {
        return;
    }
    let n = 300u64;
    let dir = crate::flight::base("usdt-perf");
    std::fs::create_dir_all(&dir).unwrap();
    let usdt = pipeline::example("usdt");
    // perf's cache of SDT notes, the test's own (not ~/.debug).
    let perf = |args: &[&str]| {
        let out = Command::new("perf")
            .args(args)
            .env("PERF_BUILDID_DIR", dir.join("buildid"))
            .output()
            .unwrap();
        assert!(out.status.success(), "perf {args:?}: {}", text(&out.stderr));
        out
    };
    let bin = usdt.to_str().unwrap();
    perf(&["buildid-cache", "--add", bin]);
    let event = "sdt_usdt_demo:request";
    let _ = Command::new("perf")
        .args(["probe", "-q", "-d", event])
        .output();
    let _cleanup = PerfEvent(event);
    perf(&["probe", "-q", "-x", bin, "-a", event]);
    let data = dir.join("perf.data");
    let record = Command::new("perf")
        .args(["record", "-q", "-e", event, "-o"])
        .arg(&data)
        .args(["--", bin, "--events", &n.to_string(), "--leave"])
        .env("PERF_BUILDID_DIR", dir.join("buildid"))
        .env("TAPE_TRACE", "usdt_demo.*")
        .env("TAPE_TRACE_DIR", dir.join("traces"))
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM", "off")
        .output()
        .unwrap();
    let said = text(&record.stderr);
    assert!(
        record.status.success() && said.contains("usdt: emitted"),
        "{said}"
    );
    let script = perf(&["script", "-i", data.to_str().unwrap()]);
    // `usdt PID [CPU] TIME: sdt_usdt_demo:request: (ADDR) arg1=.. arg2=.. arg3=.. arg4=..`
    let sampled: Vec<(u64, usize, u64)> = text(&script.stdout)
        .lines()
        .filter(|l| l.contains(event))
        .map(|l| {
            let arg = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{k}=")))
                    .unwrap_or_else(|| panic!("{k} in {l}"))
                    .parse::<u64>()
                    .unwrap()
            };
            (arg("arg1"), arg("arg3") as usize, arg("arg4"))
        })
        .collect();
    assert_eq!(sampled.len() as u64, n, "one sample per event");
    assert_eq!(sampled, recorded_requests(&dir.join("traces")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// gdb stops at the SDT probe (`break -probe-stap`, which raises its
/// semaphore as a uprobe would): the program sees it attached and gdb
/// reads the arguments of its first events (`$_probe_arg0`: the id).
#[test]
fn gdb_stops_at_the_probe_and_reads_its_arguments() {
    if Command::new("gdb").arg("--version").output().is_err() {
        shared::required(
            "gdb stopping at a tape program's USDT probe",
            "apt-get install gdb",
        );
        return;
    }
    let dir = crate::flight::base("usdt-gdb");
    let usdt = pipeline::example("usdt");
    let out = Command::new("gdb")
        .args(["-batch", "-nx"])
        .args(["-ex", "break -probe-stap usdt_demo:request"])
        .args(["-ex", "run --events 3 --leave"])
        .args([
            "-ex",
            "printf \"probe %d %d\\n\", $_probe_arg0, $_probe_arg2",
        ])
        .args(["-ex", "continue"])
        .args([
            "-ex",
            "printf \"probe %d %d\\n\", $_probe_arg0, $_probe_arg2",
        ])
        .args(["-ex", "kill"])
        .arg(&usdt)
        .env("TAPE_TRACE_DIR", &dir)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM", "off")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = text(&out.stdout);
    let probes: Vec<&str> = said.lines().filter(|l| l.starts_with("probe ")).collect();
    // Ids 0 and 1; their paths "/items/0" and "/items/7", 8 bytes each.
    assert_eq!(
        probes,
        ["probe 0 8", "probe 1 8"],
        "{said}{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// bpftrace on `tape:runtime_event`, the SDT probe of the tracepoints
/// made at run time (tape-tracing's callsites, which no note names): the
/// `tracing_spans` example, which waits for it, records its events with
/// tape as well; bpftrace sees as many events of each tracepoint as tape
/// recorded, and reads the payload (a span's `close` carries its call id,
/// a `u64`) as tape shows it. Skipped with a notice as the test above.
#[test]
fn bpftrace_sees_the_events_of_tracepoints_made_at_run_time() {
    use std::io::Write;
    if !as_root_with(
        "bpftrace",
        true,
        "bpftrace attached to tape:runtime_event",
        "apt-get install bpftrace, and run the tests as root",
    ) {
        return;
    }
    let dir = crate::flight::base("usdt-runtime");
    let bin = pipeline::example("tracing_spans");
    let (mut program, pid) = start_saying_pid(
        Command::new(&bin)
            .args(["--wait-usdt", "--requests", "20"])
            .env("TAPE_TRACE", "tracing.*")
            .env("TAPE_TRACE_DIR", &dir)
            .env("TAPE_CONTROL", "off")
            .env("TAPE_SHM", "off"),
    );
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }} usdt:{}:tape:runtime_event {{ \
         printf(\"%s %d %lu\\n\", str(arg0, arg1), arg3, *(uint64 *)arg2); }}",
        bin.display()
    );
    let bpf = Bpftrace::start(&pid, &script);
    bpf.wait_for(|l| l.iter().any(|l| l == "ready"), 30);
    let _ = program.stdin.take().unwrap().write_all(b"go\n");
    // The program ends (bounded) once it ran.
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = program.try_wait().unwrap() {
            break s;
        }
        if t.elapsed().as_secs() > 60 {
            let _ = program.kill();
            panic!("tracing_spans did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut program.stderr.take().unwrap(), &mut said).unwrap();
    if status.code() == Some(2) {
        let (_, bpf_err) = bpf.kill();
        shared::required(
            &format!(
                "bpftrace attached to tape:runtime_event (the kernel refused: {})",
                bpf_err.trim()
            ),
            "a kernel with uprobes and BPF",
        );
        return;
    }
    assert!(status.success(), "{said}");
    // What tape recorded: events by tracepoint, and the call ids of the
    // request spans' `close`.
    let shown = Command::new(pipeline::TAPE)
        .arg("show")
        .arg(pipeline::only_trace(&dir))
        .output()
        .unwrap();
    let shown = text(&shown.stdout);
    let mut recorded = std::collections::BTreeMap::<String, usize>::new();
    let mut recorded_calls = Vec::new();
    for l in shown.lines() {
        let name = l.split_whitespace().nth(3).unwrap().trim_end_matches(':');
        *recorded.entry(name.to_owned()).or_default() += 1;
        if name == "tracing.app.info.request.close" {
            recorded_calls.push(value_after(l, "call").to_owned());
        }
    }
    let total: usize = recorded.values().sum();
    bpf.wait_for(|l| l.len() > total, 10);
    let (lines, bpf_err) = bpf.stop();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut seen_calls = Vec::new();
    for l in lines.iter().filter(|l| l.starts_with("tracing.")) {
        let w: Vec<&str> = l.split(' ').collect();
        *seen.entry(w[0].to_owned()).or_default() += 1;
        if w[0] == "tracing.app.info.request.close" {
            assert_eq!(w[1], "8", "{l}");
            seen_calls.push(w[2].to_owned());
        }
    }
    assert!(recorded.len() >= 10 && total >= 200, "{recorded:?}");
    assert_eq!(seen, recorded, "{bpf_err}");
    // (Two threads: bpftrace's per-CPU buffers need not keep tape's order.)
    seen_calls.sort();
    recorded_calls.sort();
    assert_eq!(seen_calls, recorded_calls);
    let _ = std::fs::remove_dir_all(&dir);
}
