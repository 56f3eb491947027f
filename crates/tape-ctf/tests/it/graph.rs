//! `tape graph`'s renderer against golden files written by hand from
//! ftrace.txt's function_graph layout (`data/graph-*.golden`): nested and
//! leaf calls, recursion, comments, an exit whose entry is not in the
//! trace, an entry never exited, lost events, the overhead marks, two
//! threads interleaved (a long leaf holding the other thread's lines
//! behind it), and the `funcgraph-abstime` and `funcgraph-proc` columns.

use tape_ctf::graph::{Event, Graph, Options};

const T0: i128 = 1_700_000_000_123_456_789;

/// (tid, comm, ns after T0, event)
type Row = (i64, &'static str, i128, Event<'static>);

fn render(opts: Options, rows: &[Row]) -> String {
    let mut g = Graph::new(opts);
    let mut out = g.header();
    for &(tid, comm, t, e) in rows {
        g.event(tid, comm, Some(T0 + t), e, &mut out);
    }
    g.finish(&mut out);
    out
}

fn entry(func: &'static str, depth: u32) -> Event<'static> {
    Event::Entry {
        func,
        depth,
        args: "",
    }
}

fn exit(func: &'static str, depth: u32) -> Event<'static> {
    Event::Exit {
        func,
        depth,
        ret: "",
    }
}

fn golden(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn two_threads_in_ftrace_function_graph_layout() {
    let rows: &[Row] = &[
        (42, "worker", 0, entry("app::serve", 0)),
        (42, "worker", 1_000, entry("app::parse", 1)),
        (7, "main", 2_000, exit("app::orphan", 0)),
        (42, "worker", 2_382, exit("app::parse", 1)),
        (7, "main", 2_500, Event::Comment("app.tick: n=1")),
        (42, "worker", 3_000, entry("app::io::Store::put", 1)),
        (
            42,
            "worker",
            3_500,
            Event::Comment("app.net.tx: port=3 len=64"),
        ),
        (42, "worker", 4_000, entry("app::fact", 2)),
        (42, "worker", 4_100, entry("app::fact", 3)),
        (42, "worker", 4_200, exit("app::fact", 3)),
        (42, "worker", 4_300, exit("app::fact", 2)),
        (7, "main", 5_000, entry("app::long", 0)),
        (42, "worker", 18_011, exit("app::io::Store::put", 1)),
        (42, "worker", 150_210, exit("app::serve", 0)),
        (7, "main", 2_005_000, exit("app::long", 0)),
        (7, "main", 2_100_000, Event::Lost(5)),
        (7, "main", 2_200_000, entry("app::never", 0)),
    ];
    let opts = Options {
        tid_width: 2,
        ..Options::default()
    };
    assert_eq!(render(opts, rows), golden("graph-default.golden"));
}

/// Arguments drawn in the parentheses (funcgraph-args), return values as
/// funcgraph-retval draws them: `f(); /* = v */` for a leaf, `} /* f = v */`
/// for a call with calls inside; other exit fields whole.
#[test]
fn arguments_and_return_values() {
    let e = |func, depth, args| Event::Entry { func, depth, args };
    let x = |func, depth, ret| Event::Exit { func, depth, ret };
    let rows: &[Row] = &[
        (42, "worker", 0, e("app::fetch", 0, "call=7")),
        (42, "worker", 1_000, e("app::parse", 1, "line=\"42\"")),
        (42, "worker", 1_500, x("app::parse", 1, "42")),
        (42, "worker", 2_000, e("app::check", 1, "")),
        (42, "worker", 2_100, x("app::check", 1, "-22")),
        (42, "worker", 3_000, x("app::fetch", 0, "")),
        (42, "worker", 4_000, e("app::load", 0, "")),
        (42, "worker", 4_500, e("app::parse", 1, "")),
        (42, "worker", 4_600, x("app::parse", 1, "")),
        (42, "worker", 5_000, x("app::load", 0, "ret=Ok, bytes=3")),
    ];
    let opts = Options {
        tid_width: 2,
        ..Options::default()
    };
    let out = render(opts, rows);
    let calls: Vec<&str> = out
        .lines()
        .skip(5)
        .map(|l| l.split_once("|  ").unwrap().1)
        .collect();
    assert_eq!(
        calls,
        [
            "app::fetch(call=7) {",
            "  app::parse(line=\"42\"); /* = 42 */",
            "  app::check(); /* = -22 */",
            "}",
            "app::load() {",
            "  app::parse();",
            "} /* app::load = ret=Ok, bytes=3 */",
        ],
        "{out}"
    );
}

#[test]
fn the_abstime_and_proc_columns() {
    let rows: &[Row] = &[
        (42, "worker-thread-long", 0, entry("app::serve", 0)),
        (42, "worker-thread-long", 1_000, entry("app::parse", 1)),
        (42, "worker-thread-long", 2_382, exit("app::parse", 1)),
        (42, "worker-thread-long", 150_210, exit("app::serve", 0)),
    ];
    let opts = Options {
        tid_width: 2,
        abstime: true,
        proc_: true,
        ..Options::default()
    };
    assert_eq!(render(opts, rows), golden("graph-abstime-proc.golden"));
}
