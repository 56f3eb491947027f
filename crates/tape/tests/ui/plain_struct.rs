// A struct without `#[derive(tape::Fields)]` as a field.
struct Req {
    len: u32,
}

tape::tracepoint! {
    pub fn submit(req: &Req) = "app.io.submit";
}

fn main() {
    let _ = Req { len: 1 }.len;
}
