// Owning containers as fields: each error is given once, at the type,
// with what to declare instead, and the calls raise nothing more.
tape::tracepoint! {
    pub fn rx(port: u16, lens: Vec<u32>) = "app.net.rx";
    class io(dev: u32, buf: Box<[u8; 4]>) {
        pub fn io_read = "app.io.read";
    }
}

fn main() {
    rx(1, vec![2, 3]);
    io_read(0, Box::new([0; 4]));
    more();
}

// The function tracer's recorded arguments likewise; the function stays.
#[tape::traced(args(ids))]
fn batch(ids: Vec<u64>) -> usize {
    ids.len()
}

fn more() -> usize {
    batch(vec![1])
}
