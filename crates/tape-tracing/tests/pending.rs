//! An exact tracepoint name of a `tracing` callsite, given to tape before
//! the callsite exists (`TAPE_TRACE='tracing.jobq.warn'`, the name `tape
//! show` prints): `tracing` callsites become tracepoints at their first
//! event, after `init()`, so the name stays pending and enables the
//! callsite then; `init()` succeeds, and `tape::enable` of such a name too.
//! One test in its own binary: the registry is the process's.

mod support;

use tracing_subscriber::layer::SubscriberExt;

#[test]
fn an_exact_name_enables_a_callsite_first_hit_after_init() {
    let dir = std::env::temp_dir().join(format!("tape-tracing-pending-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let env = |k: &str| (k == "TAPE_TRACE").then(|| "tracing.jobq.warn".to_owned());
    tape::Config::from_vars(env)
        .expect("TAPE_TRACE")
        .dir(&dir)
        .control(false)
        .shared_rings(false)
        .init()
        .expect("init with a name no tracepoint has yet")
        .disarm();
    // By the API too, before the callsite exists.
    tape::enable("tracing.jobq.error").expect("enable a name registered later");
    let subscriber = tracing_subscriber::registry().with(tape_tracing::layer());
    tracing::subscriber::with_default(subscriber, || {
        for n in 0..3u64 {
            tracing::warn!(target: "jobq", n, "slow job");
            tracing::error!(target: "jobq", n, "failed job");
            tracing::info!(target: "jobq", n, "not enabled");
        }
    });
    let trace = tape::save().expect("save");
    let names: Vec<String> = support::events(&trace)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let count = |name: &str| names.iter().filter(|n| *n == name).count();
    assert_eq!(count("tracing.jobq.warn"), 3, "{names:?}");
    assert_eq!(count("tracing.jobq.error"), 3, "{names:?}");
    assert_eq!(names.len(), 6, "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
