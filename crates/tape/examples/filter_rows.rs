//! The program `tape-cli/tests/it/filter_table.rs` drives: it emits the two
//! rows of the shared filter table (`tape-test-support/src/filter_table.rs`, an
//! event with a field of every type) each time it reads `emit` on stdin,
//! on a thread named `filt-rows`, and answers `emitted`; the test sets the
//! filters with `tape ctl PID filter` in between. It ends at end of input.
//!
//! ```text
//! TAPE_TRACE=test.filter.every cargo run -p tape --example filter_rows
//! ```

use std::io::BufRead;

use tape_test_support::filter_table as table;

fn main() -> Result<(), tape::Error> {
    let _guard = tape::init()?;
    // One emitting thread for the whole run (one ring).
    let (go, rx) = std::sync::mpsc::channel::<()>();
    let (done, emitted) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("filt-rows".into())
        .spawn(move || {
            for () in rx {
                table::emit_rows();
                let _ = done.send(());
            }
        })
        .expect("spawn");
    println!("filter_rows: pid {}", std::process::id());
    for line in std::io::stdin().lock().lines() {
        match line.as_deref().map(str::trim) {
            Ok("emit") => {
                go.send(()).expect("the emitting thread");
                emitted.recv().expect("the emitting thread");
                println!("emitted");
            }
            Ok(other) => eprintln!("filter_rows: unknown command {other:?} (emit)"),
            Err(_) => break,
        }
    }
    Ok(())
}
