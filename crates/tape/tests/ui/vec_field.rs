// A `Vec` as a field: the error names the type, the field types and the
// slice to use instead.
tape::tracepoint! {
    pub fn rx(port: u16, lens: Vec<u32>) = "app.net.rx";
}

fn main() {}
