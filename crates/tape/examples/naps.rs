//! Slow calls the kernel explains: `nap` sleeps 3 ms (its thread switched
//! out and back), `spin` runs on the CPU for `--spin-ms` (preempted when
//! another task wants that CPU). Recorded with the kernel's scheduling
//! events beside them, each call shows why it took its time:
//!
//! ```text
//! cargo build --release -p tape --example naps -p tape-cli --bin tape
//! sudo TAPE_TRACE='fn.*' target/release/tape record --kernel sched -o /tmp/naps \
//!     -- target/release/examples/naps
//! target/release/tape show /tmp/naps | grep -E 'nap|sched_switch'
//! ```
//!
//! `--threads N` (2), `--calls N` (10 of each a thread), `--spin-ms MS` (2),
//! `--cpu C`: every worker pinned to CPU C (beside a CPU hog there, `spin`
//! is preempted).

#[tape::traced]
fn nap() {
    // A latency section too: with the latency tracer on (TAPE_LATENCY=on),
    // the slowest nap is saved as a snapshot, which `tape record --kernel`
    // gives the kernel's events of its window.
    let _s = tape::latency::section!("nap");
    std::thread::sleep(std::time::Duration::from_millis(3));
}

#[tape::traced]
fn spin(ms: u64) -> u64 {
    let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    let mut n = 0u64;
    while std::time::Instant::now() < end {
        n = n.wrapping_add(1);
    }
    n
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and
    // sched_setaffinity read and write only the set passed, by reference.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            eprintln!(
                "naps: cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

fn main() {
    let _tape = tape::init();
    let mut threads = 2;
    let mut calls = 10;
    let mut spin_ms = 2;
    let mut cpu: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{a} {what}"))
        };
        match a.as_str() {
            "--threads" => threads = value("N"),
            "--calls" => calls = value("N"),
            "--spin-ms" => spin_ms = value("MS") as u64,
            "--cpu" => cpu = Some(value("C")),
            _ => panic!("naps: unknown argument {a}"),
        }
    }
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("napper-{t}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        pin(c);
                    }
                    tape::register_thread();
                    for _ in 0..calls {
                        nap();
                        spin(spin_ms);
                    }
                })
                .expect("spawn")
        })
        .collect();
    for w in workers {
        w.join().expect("a worker panicked");
    }
}
