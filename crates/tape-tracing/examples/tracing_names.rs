//! `tracing` callsites made at run time, with names given from outside:
//! what a program instrumented with OpenTelemetry's conventions
//! (`http.method`, `otel.name`) or with generated names does, and what a
//! hostile tester feeds tape-tracing. The tests of issue 47 run it.
//!
//! ```text
//! tracing_names NAMES_FILE            # one callsite per name, one event each
//! tracing_names --callsites N         # N callsites (field `i`), one event each
//! ```
//!
//! `NAMES_FILE` holds one name a line, as the hex digits of its UTF-8
//! bytes (so that a name may hold any character, a NUL or a newline
//! too). For each case the program prints a line: `k`, then its event's
//! tracepoint name and its fields' names, hex, tab-separated. For name number `k`
//! (of `n`) the program makes, and hits once on one of two threads:
//!
//! ```text
//! an event callsite   target  names[k]           (`::` kept as written)
//!                     name    names[k+1]         (the event's own name, and its file)
//!                     fields  names[k], names[k+2], names[k+3]   values k, "v<k>", true
//! a span callsite     target  names[k]
//!                     name    names[k+1]         (and its file)
//!                     field   names[k]                value k
//! ```
//!
//! (indices modulo `n`; a field name that repeats one before it is left
//! out, as `tracing`'s macros would refuse it). Every event and span is
//! recorded with `TAPE_TRACE='tracing.*'`; the program saves its trace
//! at exit as any tape program does.

use std::sync::OnceLock;

use tracing_core::callsite::{Callsite, Identifier};
use tracing_core::field::{FieldSet, Value};
use tracing_core::metadata::Kind;
use tracing_core::{Interest, Level, Metadata};
use tracing_subscriber::prelude::*;

/// A callsite made at run time.
struct Site(OnceLock<&'static Metadata<'static>>);

impl Callsite for Site {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        self.0.get().expect("set before it is registered")
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// A registered callsite of `kind` named `name` in `target`, with `fields`.
fn site(
    name: &str,
    target: &str,
    file: &str,
    fields: Vec<&'static str>,
    kind: Kind,
    line: u32,
) -> &'static Metadata<'static> {
    let site: &'static Site = Box::leak(Box::new(Site(OnceLock::new())));
    let fields: &'static [&'static str] = Box::leak(fields.into_boxed_slice());
    let meta: &'static Metadata<'static> = Box::leak(Box::new(Metadata::new(
        leak(name),
        leak(target),
        Level::INFO,
        Some(leak(file)),
        Some(line),
        Some(module_path!()),
        FieldSet::new(fields, Identifier(site)),
        kind,
    )));
    let _ = site.0.set(meta);
    tracing_core::callsite::register(site);
    meta
}

/// The names of a case's fields: `picks` of `names`, each once.
fn distinct(names: &[String], picks: &[usize]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for &p in picks {
        let n = &names[p % names.len()];
        if !out.iter().any(|o| *o == n) {
            out.push(leak(n));
        }
    }
    out
}

/// Case `k`'s event and span (module docs).
fn case(names: &[String], k: usize) {
    let n = names.len();
    let target = &names[k % n];
    let own = &names[(k + 1) % n];
    let fields = distinct(names, &[k, k + 2, k + 3]);
    let meta = site(own, target, own, fields.clone(), Kind::EVENT, k as u32);
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let mut line = format!("{k}\t{}", hex(&tape_tracing::event_name(meta)));
    for f in &fields {
        line.push('\t');
        line.push_str(&hex(&tape_tracing::kept_name(f)));
    }
    println!("{line}");
    let set = meta.fields();
    let f: Vec<_> = fields
        .iter()
        .map(|n| set.field(n).expect("its own field"))
        .collect();
    let number = k as u64;
    let text = format!("v{k}");
    let values: [&dyn Value; 3] = [&number, &text.as_str(), &true];
    match f.len() {
        1 => tracing_core::Event::dispatch(meta, &set.value_set(&[(&f[0], Some(values[0]))])),
        2 => tracing_core::Event::dispatch(
            meta,
            &set.value_set(&[(&f[0], Some(values[0])), (&f[1], Some(values[1]))]),
        ),
        _ => tracing_core::Event::dispatch(
            meta,
            &set.value_set(&[
                (&f[0], Some(values[0])),
                (&f[1], Some(values[1])),
                (&f[2], Some(values[2])),
            ]),
        ),
    }
    let span_meta = site(own, target, own, vec![leak(target)], Kind::SPAN, k as u32);
    let sf = span_meta
        .fields()
        .field(target.as_str())
        .expect("its own field");
    let span = tracing::Span::new(
        span_meta,
        &span_meta
            .fields()
            .value_set(&[(&sf, Some(&number as &dyn Value))]),
    );
    span.in_scope(|| {});
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _tape = tape::init()?;
    tracing_subscriber::registry()
        .with(tape_tracing::layer())
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, count] if flag == "--callsites" => {
            let count: usize = count.parse()?;
            for k in 0..count {
                let meta = site(
                    &format!("site{k}"),
                    "many",
                    file!(),
                    vec!["i"],
                    Kind::EVENT,
                    k as u32,
                );
                let set = meta.fields();
                let i = set.field("i").expect("its field");
                let v = k as u64;
                tracing_core::Event::dispatch(
                    meta,
                    &set.value_set(&[(&i, Some(&v as &dyn Value))]),
                );
            }
        }
        [file] => {
            let text = std::fs::read_to_string(file)?;
            let mut names = Vec::new();
            for line in text.lines() {
                let bytes = (0..line.len() / 2)
                    .map(|i| u8::from_str_radix(&line[2 * i..2 * i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()?;
                names.push(String::from_utf8(bytes)?);
            }
            let (even, odd): (Vec<usize>, Vec<usize>) = (0..names.len()).partition(|k| k % 2 == 0);
            std::thread::scope(|s| {
                for ks in [even, odd] {
                    let names = &names;
                    s.spawn(move || ks.into_iter().for_each(|k| case(names, k)));
                }
            });
        }
        _ => return Err("usage: tracing_names NAMES_FILE | --callsites N".into()),
    }
    Ok(())
}
