//! Quickstart: a small multi-threaded program with tracepoints.
//!
//! A "dispatcher" hands requests to three workers through a channel; every
//! step emits an event. The trace is saved at the end and the program prints
//! where it is and how to open it.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// How a request ended (a CTF enumeration: readers show the name).
#[derive(Clone, Copy, tape::Enum)]
#[repr(u16)]
enum Status {
    Ok = 200,
    NotFound = 404,
}

tape::flags! {
    /// What a cache slot holds (shown as `HIT|DIRTY` in ftrace text).
    pub struct SlotFlags: u8 {
        const HIT = 0x1;
        const DIRTY = 0x2;
        const PINNED = 0x4;
    }
}

tape::tracepoint! {
    /// The dispatcher queued a request for a worker.
    #[format("id={id} worker={worker} path={path}")]
    pub fn request_queued(id: u64, worker: u8, path: &str) = "quickstart.request.queued";
    /// A worker started a request.
    #[format("id={id} path={path}")]
    pub fn request_start(id: u64, path: &str) = "quickstart.request.start";
    /// A worker finished a request.
    #[format("id={id} status={status} bytes={bytes} ok={ok} latency_us={latency_us:.1}")]
    pub fn request_done(id: u64, status: Status, bytes: u32, ok: bool, latency_us: f64) = "quickstart.request.done";
    /// Cache events: one class, one shared encoder, one format.
    #[format("key={key:#018x} flags={flags} slot={slot}")]
    pub class cache_event(key: u64, flags: SlotFlags, slot: *const u8) {
        /// A worker's cache lookup.
        pub fn cache_lookup = "quickstart.cache.lookup";
        /// A miss filled the slot.
        pub fn cache_fill = "quickstart.cache.fill";
    }
    /// Not enabled by the quickstart: shows that disabled tracepoints cost nothing.
    pub fn debug_detail(step: u32) = "quickstart.debug.detail";
}

const PATHS: [&str; 5] = [
    "/",
    "/index.html",
    "/api/v1/users",
    "/static/app.js",
    "/ünïcode/路径",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Environment first (TAPE_TRACE, TAPE_TRACE_DIR, ...), then our own choice.
    let tape = tape::init()?;
    if std::env::var_os("TAPE_TRACE").is_none() {
        tape::enable_pattern("quickstart.request.*")?;
        tape::enable_pattern("/^quickstart\\.cache\\./")?;
    }

    let mut senders = Vec::new();
    let mut workers = Vec::new();
    for w in 0..3u8 {
        let (tx, rx) = mpsc::channel::<(u64, &'static str)>();
        senders.push(tx);
        workers.push(
            thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    let cache = [0u8; 64];
                    for (id, path) in rx {
                        let t0 = std::time::Instant::now();
                        request_start(id, path);
                        let key = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                        let slot = cache.as_ptr().wrapping_add((key % 64) as usize);
                        let hit = key % 3 == 0;
                        let mut flags = SlotFlags::empty();
                        if hit {
                            flags = flags | SlotFlags::HIT;
                        }
                        if id % 4 == 0 {
                            flags = flags | SlotFlags::DIRTY;
                        }
                        cache_lookup(key, flags, slot);
                        if !hit {
                            cache_fill(key, flags | SlotFlags::PINNED, slot);
                        }
                        debug_detail(1);
                        thread::sleep(Duration::from_micros(50 + id % 7 * 10));
                        let status = if id % 11 == 0 {
                            Status::NotFound
                        } else {
                            Status::Ok
                        };
                        let bytes = (path.len() as u32) * 100 + id as u32;
                        request_done(
                            id,
                            status,
                            bytes,
                            matches!(status, Status::Ok),
                            t0.elapsed().as_secs_f64() * 1e6,
                        );
                    }
                })?,
        );
    }
    thread::Builder::new()
        .name("dispatcher".into())
        .spawn(move || {
            for id in 0..60u64 {
                let w = (id % 3) as u8;
                let path = PATHS[id as usize % PATHS.len()];
                request_queued(id, w, path);
                senders[w as usize].send((id, path)).expect("worker alive");
                thread::sleep(Duration::from_micros(100));
            }
        })?
        .join()
        .expect("dispatcher");
    for w in workers {
        w.join().expect("worker");
    }

    let dir = tape.save()?;
    println!("trace saved to {}", dir.display());
    println!("open it with:");
    println!("  babeltrace2 {}", dir.display());
    println!("  babeltrace {}          (babeltrace 1.5)", dir.display());
    println!(
        "  Trace Compass: File > Open Trace..., choose {}/metadata",
        dir.display()
    );
    Ok(())
}
