//! Records the packets a program receives and sends, and saves the trace.

tape::tracepoint! {
    /// A packet was received.
    pub fn net_rx(port: u16, len: u32, ifname: &str) = "app.net.rx";
    /// A packet was sent.
    pub fn net_tx(port: u16, len: u32, data: &[u8]) = "app.net.tx";
}

fn main() -> Result<(), tape::Error> {
    let _tape = tape::init()?; // reads TAPE_TRACE* (below); saves at the end of main
    tape::enable("app.net.rx")?; // one tracepoint (or the one registered later by that name)
    tape::enable_glob("app.net.*")?; // a glob
    tape::enable_regex(r"^app\.net\.(rx|tx)$")?; // a regex
    tape::enable_pattern("/tx$/")?; // name, glob or /regex/
    tape::config::set_mode(tape::Mode::Discard);
    let rx = std::thread::spawn(|| (0..1000).for_each(|i| net_rx(3, 60 + i, "eth0")));
    net_tx(3, 1500, &[0xde, 0xad, 0xbe, 0xef]);
    rx.join().unwrap();
    let dir = tape::save()?; // any time, from any thread
    println!("saved to {}", dir.display());
    Ok(()) // nothing new since the save: no second trace
}
