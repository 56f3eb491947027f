//! Writes a large trace with tape for reader speed tests: `THREADS` threads
//! emit `EVENTS` events each (a u64, a u32 and a short string), with rings
//! large enough to keep them all; prints the trace directory.
//!
//! ```text
//! cargo run --release --example bulk -- OUT_DIR [EVENTS_PER_THREAD] [THREADS]
//! ```

tape::tracepoint! {
    /// A request with a small payload.
    pub fn request(seq: u64, len: u32, path: &str) = "bulk.request.done";
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or("usage: bulk OUT_DIR [EVENTS_PER_THREAD] [THREADS]")?;
    let events: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let threads: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(4);
    // Each event: 10 header + 8 + 4 + ~12 string bytes; a quarter more room.
    let ring = ((events as usize) * 40).next_power_of_two().max(1 << 20);
    let tape = tape::Config::new()
        .enable("bulk.*")
        .buffer_size(ring)
        .packet_size(1 << 20)
        .init()?;
    let paths = ["/", "/index.html", "/api/v1/users", "/static/app.js"];
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("bulk-{t}"))
                .spawn(move || {
                    for i in 0..events {
                        request(i, (i * 7 + t) as u32, paths[(i % 4) as usize]);
                    }
                })
        })
        .collect::<Result<_, _>>()?;
    for h in handles {
        h.join().map_err(|_| "a bulk thread panicked")?;
    }
    tape.disarm();
    let dir = tape::save_to(&out)?;
    println!("{}", dir.display());
    Ok(())
}
