//! `#[tape::traced]`: the tracepoints it registers (named from the module
//! path, the `impl`'s type and the function), their selection by the
//! function's name, and the depth and exits its calls record (returns,
//! early returns, panics, async polls), read back through a probe.

// No warning may come from tape's expansions (issue: a one-line body
// `{ self.id }` warned "unnecessary braces" at the user's code).
#![deny(unused_braces, unused_parens)]

use std::future::Future;
use std::sync::{Arc, Mutex};

#[tape::traced]
fn leaf(x: u32) -> u32 {
    x + 1
}

struct Counter;

#[tape::traced]
impl Counter {
    fn twice(&self, x: u32) -> u32 {
        leaf(leaf(x))
    }

    fn early(&self, x: u32) -> Option<u32> {
        if x == 0 {
            return None;
        }
        Some(leaf(x))
    }

    fn boom(&self) {
        panic!("boom");
    }

    #[tape::notrace]
    fn quiet(&self) -> u32 {
        1
    }
}

#[tape::traced]
impl std::fmt::Display for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("counter")
    }
}

#[tape::traced]
impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counter")
    }
}

#[tape::traced]
mod inner {
    pub fn nested() -> u32 {
        super::leaf(1) * 2
    }
}

/// The crate's module path as the names have it (`traced` here).
fn m() -> &'static str {
    module_path!()
}

fn point(name: &str) -> &'static tape::Tracepoint {
    tape::lookup(name).unwrap_or_else(|| panic!("no tracepoint {name}"))
}

/// (name, depth) of every fn_call event of this thread, in order, while
/// `f` runs (the tests run in parallel: probes see every thread).
fn calls(f: impl FnOnce()) -> Vec<(String, u32)> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let me = std::thread::current().id();
    let mut probes = Vec::new();
    for p in tape::tracepoints() {
        if !p.name().starts_with("fn.") {
            continue;
        }
        let (s, name) = (seen.clone(), p.name());
        probes.push(tape::probe::attach_to(
            p,
            0,
            move |ev: &tape::probe::Event<'_>| {
                let depth = ev
                    .field("depth")
                    .and_then(|v| v.as_u64())
                    .map_or(u32::MAX, |d| d as u32);
                if std::thread::current().id() == me {
                    s.lock().unwrap().push((name.to_owned(), depth));
                }
            },
        ));
    }
    f();
    for p in probes {
        p.detach();
    }
    let v = seen.lock().unwrap().clone();
    v
}

#[test]
fn names_selection_depths_and_exits() {
    let m = m();
    // Registered, named from the path; the notrace method is not.
    for n in [
        format!("fn.{m}.leaf.entry"),
        format!("fn.{m}.Counter.twice.exit"),
        format!("fn.{m}.inner.nested.entry"),
        // A trait's methods are named with the trait: two `fmt` here.
        format!("fn.{m}.Counter.Display.fmt.entry"),
        format!("fn.{m}.Counter.Debug.fmt.exit"),
    ] {
        point(&n);
    }
    assert!(tape::lookup(&format!("fn.{m}.Counter.quiet.entry")).is_none());

    // A function's name selects its entry and exit; a glob too.
    assert_eq!(
        tape::enable_pattern(&format!("fn.{m}.inner.nested")).unwrap(),
        2
    );
    assert!(point(&format!("fn.{m}.inner.nested.entry")).is_enabled());
    assert!(point(&format!("fn.{m}.inner.nested.exit")).is_enabled());
    assert!(!point(&format!("fn.{m}.leaf.entry")).is_enabled());
    assert_eq!(
        tape::enable_pattern(&format!("fn.{m}.Counter.*")).unwrap(),
        10 // twice, early, boom, Display.fmt, Debug.fmt: entry and exit
    );
    tape::disable_pattern("fn.*").unwrap();

    let e = |f: &str, d: u32| (format!("fn.{m}.{f}.entry"), d);
    let x = |f: &str, d: u32| (format!("fn.{m}.{f}.exit"), d);
    let c = Counter;
    // Probes make the tracepoints active whether or not they record.
    let got = calls(|| {
        assert_eq!(c.twice(1), 3);
        assert_eq!(c.early(0), None);
        assert_eq!(c.quiet(), 1);
        assert!(std::panic::catch_unwind(|| Counter.boom()).is_err());
        assert_eq!(inner::nested(), 4);
    });
    let want = vec![
        e("Counter.twice", 0),
        e("leaf", 1),
        x("leaf", 1),
        e("leaf", 1),
        x("leaf", 1),
        x("Counter.twice", 0),
        e("Counter.early", 0),
        x("Counter.early", 0),
        e("Counter.boom", 0),
        x("Counter.boom", 0),
        e("inner.nested", 0),
        e("leaf", 1),
        x("leaf", 1),
        x("inner.nested", 0),
    ];
    assert_eq!(got, want);
}

/// Ready at its second poll.
struct Twice(bool);

impl Future for Twice {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[tape::traced]
async fn waits() -> u32 {
    Twice(false).await;
    leaf(0)
}

#[test]
fn an_async_fn_records_each_poll() {
    let m = m();
    let got = calls(|| {
        let mut f = std::pin::pin!(waits());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while f.as_mut().poll(&mut cx).is_pending() {}
    });
    let e = |f: &str, d: u32| (format!("fn.{m}.{f}.entry"), d);
    let x = |f: &str, d: u32| (format!("fn.{m}.{f}.exit"), d);
    assert_eq!(
        got,
        vec![
            e("waits", 0),
            x("waits", 0),
            e("waits", 0),
            e("leaf", 1),
            x("leaf", 1),
            x("waits", 0),
        ]
    );
}

#[tape::traced]
fn guarded(x: u32) -> u32 {
    x * 2
}

#[test]
fn a_trigger_set_by_a_functions_name_fires_at_its_entry_only() {
    let m = m();
    let (entry, exit) = (
        point(&format!("fn.{m}.guarded.entry")),
        point(&format!("fn.{m}.guarded.exit")),
    );
    // ftrace's function commands (`guarded:traceoff`) fire at entry: by
    // the function's name or a glob over names, the entry gets it.
    assert_eq!(
        tape::trigger::set(&format!("fn.{m}.guarded"), "traceoff").unwrap(),
        1
    );
    assert_eq!(tape::trigger::list(entry).len(), 1);
    assert!(tape::trigger::list(exit).is_empty());
    assert_eq!(
        tape::trigger::set(&format!("fn.{m}.guard*"), "stacktrace").unwrap(),
        1
    );
    assert!(tape::trigger::list(exit).is_empty());
    // An exit named as such still can have one.
    assert_eq!(
        tape::trigger::set(&format!("fn.{m}.guarded.exit"), "traceoff").unwrap(),
        1
    );
    assert_eq!(
        tape::trigger::set(&format!("fn.{m}.guard*.exit"), "stacktrace").unwrap(),
        1
    );
    assert_eq!(tape::trigger::list(exit).len(), 2);
    assert_eq!(tape::trigger::clear(&format!("fn.{m}.guarded")).unwrap(), 2);
    assert_eq!(guarded(2), 4);
}

/// A one-line body (`{ self.id }`), traced with and without its return
/// value: the expansion adds no braces the compiler warns about
/// (`unused_braces`, denied for this file), and the value is returned.
struct Ident {
    id: u64,
}

#[tape::traced]
impl Ident {
    fn id(&self) -> u64 {
        self.id
    }
}

#[tape::traced(ret)]
fn one_line(x: u64) -> u64 {
    x
}

#[test]
fn one_line_bodies_raise_no_warning() {
    let m = m();
    point(&format!("fn.{m}.Ident.id.entry"));
    point(&format!("fn.{m}.one_line.ret"));
    assert_eq!(Ident { id: 7 }.id() + one_line(1), 8);
}
