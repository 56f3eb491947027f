//! The interest `tape_tracing::layer()` gives `tracing`, which `tracing`
//! caches per callsite: `never` for a callsite tape does not want (alone,
//! the subscriber then skips it at the callsite), `always` once a pattern
//! enables it (the layer has `tracing` rebuild its cache when tape's
//! selection changes: without that, the cached `never` would lose the
//! events), `sometimes` while a trigger can enable events from the emit
//! path; another layer beside it still sees what tape does not want.
//! One test in its own binary: `tracing`'s interest cache is global.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tracing_core::callsite::Callsite;
use tracing_core::field::FieldSet;
use tracing_core::{identify_callsite, Interest, Kind, Level, Metadata};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

struct Site;
static SITE: Site = Site;
static META: Metadata<'static> = Metadata::new(
    "probe site",
    "quiet",
    Level::INFO,
    Some(file!()),
    Some(line!()),
    Some(module_path!()),
    FieldSet::new(&["n"], identify_callsite!(&SITE)),
    Kind::EVENT,
);
impl Callsite for Site {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &META
    }
}

/// Counts the events it sees.
struct Count(Arc<AtomicU64>);
impl<S: tracing::Subscriber> Layer<S> for Count {
    fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn interest(d: &tracing::Dispatch) -> &'static str {
    let i = d.register_callsite(&META);
    if i.is_never() {
        "never"
    } else if i.is_always() {
        "always"
    } else {
        "sometimes"
    }
}

tape::tracepoint! {
    /// Fires the trigger that enables `tracing.late.*`.
    pub fn fire(n: u64) = "test.fire";
}

#[test]
fn callsites_tape_does_not_want_are_never_asked_until_it_wants_them() {
    let dir = support::tape_in("interest");

    // The answers, asked directly: alone, and beside a layer with no filter.
    let seen = Arc::new(AtomicU64::new(0));
    let alone = tracing::Dispatch::new(tracing_subscriber::registry().with(tape_tracing::layer()));
    let beside = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tape_tracing::layer())
            .with(Count(seen.clone())),
    );
    assert_eq!(interest(&alone), "never");
    // Beside a layer that wants everything: asked at each event, so the
    // other layer sees it while tape's filter skips it.
    assert_eq!(interest(&beside), "sometimes");
    tracing::dispatcher::with_default(&beside, || tracing::info!(target: "quiet", n = 5u64));
    assert_eq!(seen.load(Ordering::Relaxed), 1, "the other layer saw it");
    tape::enable_pattern("tracing.quiet.*").unwrap();
    assert_eq!(interest(&alone), "always");
    tape::disable_pattern("tracing.quiet.*").unwrap();
    assert_eq!(interest(&alone), "never");
    // A probe wants its events too.
    let probe = tape::probe::attach("tracing.quiet.*", |_| {}).unwrap();
    assert_eq!(interest(&alone), "always");
    probe.detach();
    assert_eq!(interest(&alone), "never");
    drop(beside);

    // `tracing::enabled!` (a hint, no event): yes, and no tracepoint made
    // for it, so guarded events still reach their own callsites.
    assert!(tracing::dispatcher::with_default(
        &alone,
        || tracing::enabled!(
            target: "quiet",
            tracing::Level::INFO
        )
    ));
    assert!(!tape::registry::tracepoints()
        .iter()
        .any(|p| p.name().contains("enabled")));

    // Real callsites, through the global subscriber: tape alone.
    tracing::dispatcher::set_global_default(alone).unwrap();
    for n in 0..3u64 {
        // Hit before, while and after it is enabled: the middle one
        // records only if `tracing` asked again when the pattern changed.
        if n == 1 {
            tape::enable_pattern("tracing.later.*").unwrap();
        }
        if n == 2 {
            tape::disable_pattern("tracing.later.*").unwrap();
        }
        tracing::info!(target: "later", n);
    }
    // A trigger enables `tracing.late.*` from the emit path: the callsite,
    // registered and disabled before, is asked at each event meanwhile.
    let late = |n: u64| tracing::info!(target: "late", n);
    late(0);
    tape::trigger::set("test.fire", "enable_event:tracing.late.*").unwrap();
    late(1);
    tape::enable("test.fire").unwrap();
    fire(0);
    late(2);
    assert_eq!(
        seen.load(Ordering::Relaxed),
        1,
        "the other dispatch is gone"
    );

    let trace = tape::save().expect("save");
    let mut got = Vec::new();
    for (name, fields) in support::events(&trace) {
        if let Some(rest) = name.strip_prefix("tracing.") {
            let target = rest.split('.').next().unwrap().to_owned();
            let (_, n) = fields.iter().find(|(n, _)| n == "n").unwrap();
            got.push(format!("{target} {n:?}"));
        }
    }
    let want = ["later UInt(1, Decimal)", "late UInt(2, Decimal)"];
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}
