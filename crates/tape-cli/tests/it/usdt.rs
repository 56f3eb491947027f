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
    let t = tape_ctf::metadata::read::open_trace(&trace).unwrap();
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

/// bpftrace (as root) attached to a running tape program's SDT probe: the
/// program, which waits for it, emits N events; bpftrace counts exactly N
/// and prints each one's integer, string and enum fields as `tape show`
/// prints them from the program's own trace; once bpftrace exits, the
/// tracepoint's state word is as before. Skipped with a notice where
/// bpftrace is missing or the kernel refuses (a failure under
/// `TAPE_REQUIRE_TOOLS=1`).
#[test]
fn bpftrace_sees_exactly_what_tape_records() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let have = Command::new("bpftrace").arg("--version").output().is_ok();
    if !root || !have {
        shared::required(
            "bpftrace attached to a tape program's USDT probe",
            "apt-get install bpftrace, and run the tests as root",
        );
        return;
    }
    use std::io::BufRead;
    use std::process::Stdio;
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
    let mut program = Command::new(&usdt)
        .args(["--events", &n.to_string(), "--go-line", "--traced"])
        .stdin(Stdio::piped())
        .env("TAPE_TRACE", "usdt_demo.*")
        .env("TAPE_TRACE_DIR", &dir)
        .env("TAPE_CONTROL", "off")
        .env("TAPE_SHM", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pid = String::new();
    std::io::BufReader::new(program.stdout.take().unwrap())
        .read_line(&mut pid)
        .unwrap();
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }} usdt:{}:usdt_demo:request {{ printf(\"%d %s %d\\n\", \
         arg0, str(arg1, arg2), arg3); @n = count(); }} usdt:{}:fn:usdt_serve_entry {{ \
         printf(\"entry %d %d\\n\", *(uint32 *)arg0, arg1); @e = count(); }}",
        usdt.display(),
        usdt.display()
    );
    let mut bpf = Command::new("bpftrace")
        .args(["-p", pid.trim(), "-e", &script])
        // Room for every line in bpftrace's perf buffer (it would say
        // "Lost N events" otherwise).
        .env("BPFTRACE_PERF_RB_PAGES", "4096")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bpf_out = bpf.stdout.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(bpf_out).lines() {
                let Ok(l) = l else { break };
                lines.lock().unwrap().push(l);
            }
        })
    };
    // Once bpftrace runs (its BEGIN) and the program saw the probe
    // attached (bounded), the program emits.
    let t = std::time::Instant::now();
    while !lines.lock().unwrap().iter().any(|l| l == "ready")
        && t.elapsed() < std::time::Duration::from_secs(30)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
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
        let _ = bpf.kill();
        let out = bpf.wait_with_output().unwrap();
        shared::required(
            &format!(
                "bpftrace attached to a tape program's USDT probe (the kernel refused: {})",
                text(&out.stderr).trim()
            ),
            "a kernel with uprobes and BPF",
        );
        return;
    }
    // Every line printed (bounded), then bpftrace ends on SIGINT, printing
    // its count.
    let t = std::time::Instant::now();
    while lines.lock().unwrap().len() < 2 * n as usize + 2
        && t.elapsed() < std::time::Duration::from_secs(10)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(bpf.id() as i32, libc::SIGINT) };
    let out = bpf.wait_with_output().unwrap();
    reader.join().unwrap();
    let seen = lines.lock().unwrap().join("\n");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    said.push_str(&rest);
    assert!(program.wait().unwrap().success(), "{said}");
    let count = seen
        .lines()
        .find_map(|l| l.strip_prefix("@n: "))
        .unwrap_or_else(|| panic!("{seen}{}", text(&out.stderr)));
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
        "{states}; bpftrace said: {}",
        text(&out.stderr)
    );
    let words: Vec<&str> = states.split_whitespace().collect();
    let at = |w: &str| words.iter().position(|x| *x == w).map(|i| words[i + 1]);
    let (before, after) = (at("before"), at("after"));
    assert!(before.is_some(), "{states}");
    assert_eq!(before, after, "{states}");
    let _ = std::fs::remove_dir_all(&dir);
}
