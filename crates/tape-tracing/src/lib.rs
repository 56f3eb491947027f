//! `tracing` events and spans recorded into tape's rings: a
//! [`tracing_subscriber::Layer`] for programs already instrumented with the
//! `tracing` crate.
//!
//! ```no_run
//! # fn main() -> Result<(), tape::Error> {
//! use tracing_subscriber::prelude::*;
//! let _tape = tape::init()?; // the rings; saves at the end of main
//! tracing_subscriber::registry().with(tape_tracing::layer()).init();
//! # Ok(())
//! # }
//! ```
//!
//! **One tape tracepoint per `tracing` event callsite**, and four per span
//! callsite, registered at run time ([`tape::registry::register_shared`])
//! when `tracing` registers the callsite, named from its target and level
//! (and an event's own name, a span's name), its place as the metadata's
//! `model.emf.uri` ([`callsite`] draws them):
//!
//! ```text
//! tracing::info!(target: "app::db", rows, "query")   at src/db.rs:42
//!   -> tracepoint  tracing.app.db.info                  (`::` becomes `.`)
//!      fields      message, rows                        (names from its Metadata)
//!      place       model.emf.uri "src/db.rs:42", loglevel 6
//! tracing::info_span!(target: "app::db", "request", id)
//!   -> tracing.app.db.info.request.entry / .exit       (each running interval)
//!      tracing.app.db.info.request.new / .record       (call, id: its fields)
//! ```
//!
//! so tape's patterns select them (`TAPE_TRACE='tracing.app.*'`, `tape ctl
//! PID enable 'tracing.*.warn.*'`), filters, triggers and probes apply, and
//! a pattern applied before a callsite is first hit still takes it in.
//!
//! **Any name is taken as it is**: a field named by OpenTelemetry's
//! conventions (`http.method`), with a space, a quote or any Unicode, an
//! empty one, a target or span name of any characters. A field's name
//! reaches the metadata as a CTF identifier made by one reversible escape
//! (`tape_ctf_model::escape_name`: `http.method` is `_http_2e_method`,
//! which babeltrace2 and `tape show` print as `http_2e_method`); tape's
//! JSON, ftrace text, exports and filters give and take the name itself
//! (`--filter 'http.method == "GET"'`, or `` `a b` `` in backquotes).
//! Event names are TSDL strings, quoted. A name longer than
//! [`callsite::MAX_NAME`] bytes (a field's; a target and name, making a
//! tracepoint's) is cut as a value is, to its start and [`CUT_MARK`], and
//! counted ([`cut_names`]). There is no limit on the number
//! of callsites but the registry's 65,535 event ids: past them a
//! callsite's events are counted as lost
//! (`events_lost_tracing_unregistered`), never dropped unsaid.
//!
//! **Values are recorded typed** ([`value`]): each field with the type its
//! callsite's first recorded event gives it (`callsite::Typing`: the
//! tracepoint is described anew then, before that event is written), so
//! readers print `message = "query done", rows = 42`: integers, floats,
//! booleans and strings as they are; 128-bit integers as their decimal
//! digits (CTF readers stop at 64 bits); values `tracing` only offers as
//! `Debug` or `Display` (`?x`, `%x`, errors, the message) formatted into a
//! buffer on the stack, the one formatting there is. A field the first
//! event does not record stays a tagged value (`none` when absent); a later
//! value of another type is converted when it can be, else the event is
//! counted ([`mistyped_events`]), not recorded. Strings share [`TEXT_BYTES`] bytes per event: past
//! them, a value is cut (at a character boundary), ends with
//! [`CUT_MARK`] (`…[cut]`) and is counted ([`cut_values`]).
//!
//! **Spans** ([`span`]) are drawn as traced calls: each enter/exit a
//! running interval (class `fn_poll`: depth, call), the span's id the call,
//! so a span that moves between threads or across `.await` stays one call
//! with several intervals; `tape graph` and `tape export` draw them. Its
//! fields are the `.new` event (and `.record` for `Span::record`), which
//! carry the same call id. `follows_from` is not recorded.
//!
//! **Cost, and the interest `tracing` caches.** [`layer()`] is the layer
//! with its own per-layer filter, which answers `Interest::never` for a
//! callsite none of whose tracepoints is enabled (or has a probe, a filter
//! or a trigger): `tracing` then skips it at the callsite, at the cost
//! `tracing` itself has for a disabled callsite; other layers beside it
//! still see it. When tape's selection changes (a pattern, `tape ctl`, a
//! probe, a filter or a trigger set), the layer has `tracing` ask again
//! ([`tape::registry::on_change`], `rebuild_interest_cache`). While a
//! trigger that enables events is set, disabled callsites are asked at
//! each event instead ("sometimes"), since a trigger switches them where
//! no rebuild can run. `tracing::enabled!` (a hint, with no event of its
//! own) is answered yes: tape decides per event callsite, not per target,
//! and a no would lose the events it guards. An enabled event costs
//! `tracing`'s dispatch, a lookup of its callsite (the one this thread
//! found last, else a pointer hash in a table read without a lock), and
//! the visit of its fields: once its fields are typed, straight into the
//! ring's packet ([`tape::__private::try_emit_with`], `value::Direct`);
//! else, or when a value is not of its field's type, into a stack buffer,
//! then tape's emit path. No allocation, lock or system call (a callsite's
//! registration, once, takes a lock and allocates). A span's enter,
//! record and close find its callsite by its id among the spans the
//! thread made (`made`: no look-up in `tracing`'s registry,
//! whose every look-up is two atomic read-modify-writes), else (a span
//! made on another thread) in the registry, once; its exit, on the
//! thread's stack of entries. While a value's `Debug` or
//! `Display` is formatted into the ring, this thread's other events (one
//! such formatting emits, a signal handler's) are dropped and counted as
//! an interrupted emit's are; a value formatted, then given up (a later
//! value of another type), is formatted again for the stack buffer.
//!
//! Written by hand because no crate records `tracing` events into an
//! external ring with typed values.

pub mod callsite;
mod made;
pub mod span;
pub mod value;

use std::sync::atomic::Ordering;

use callsite::Typing;
use tape::Tracepoint;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Interest, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

pub use callsite::{event_name, kept_name, span_name};
pub use value::{CUT_MARK, TEXT_BYTES};

/// Values cut so far (see the module docs).
pub fn cut_values() -> u64 {
    value::CUT.load(Ordering::Relaxed)
}

/// Names (of fields, or a target and name making a tracepoint's) longer
/// than [`callsite::MAX_NAME`] bytes, cut so far (see the module docs).
pub fn cut_names() -> u64 {
    callsite::NAMES_CUT.load(Ordering::Relaxed)
}

/// Events not recorded because a value did not fit its field's type (set
/// by the callsite's first event): `events_lost_tracing_mistyped` in the
/// trace (see [`value`]).
pub fn mistyped_events() -> u64 {
    value::MISTYPED.load(Ordering::Relaxed)
}

/// Callsites whose events are not recorded (no tracepoint could be made:
/// the registry's event ids are all given, or the name is taken by a
/// tracepoint of another class).
pub fn unregistered_callsites() -> u64 {
    callsite::UNREGISTERED.load(Ordering::Relaxed)
}

/// Events (and span creations) of those callsites, counted as lost:
/// `events_lost_tracing_unregistered` in the trace.
pub fn unregistered_events() -> u64 {
    callsite::UNREGISTERED_EVENTS.load(Ordering::Relaxed)
}

/// Span entries not recorded: the thread had [`span::MAX_OPEN`] recorded
/// spans open, was already inside the layer (a signal handler entering a
/// span), or was past the end of its life.
pub fn spans_not_recorded() -> u64 {
    span::NOT_RECORDED.load(Ordering::Relaxed)
}

/// Span exits not recorded: their entry is not on the exiting thread's
/// stack (not recorded, entered on another thread, or before the
/// tracepoints were enabled).
pub fn span_exits_not_recorded() -> u64 {
    span::EXITS_NOT_RECORDED.load(Ordering::Relaxed)
}

/// The layer, unfiltered: it records what tape's tracepoints say, and
/// leaves every callsite's interest to the other layers (`always`). Use
/// [`layer()`] instead, unless you filter it yourself.
#[derive(Debug, Default, Clone, Copy)]
pub struct TapeLayer {
    _private: (),
}

impl TapeLayer {
    /// The layer. Its loss counters are registered with tape
    /// (`tape::layer_losses`): every trace saved from then on counts, in its
    /// `env`, the span entries and exits it could not record.
    pub fn new() -> TapeLayer {
        span::register_losses();
        TapeLayer { _private: () }
    }
}

/// The per-layer filter of [`layer()`]: `Interest::never` for callsites
/// tape does not want (module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct TapeFilter {
    _private: (),
}

impl TapeFilter {
    /// The filter; it also has `tracing` ask again when tape's selection
    /// changes.
    pub fn new() -> TapeFilter {
        tape::registry::on_change(tracing_core::callsite::rebuild_interest_cache);
        TapeFilter { _private: () }
    }
}

/// The layer to add to a `tracing_subscriber` registry: [`TapeLayer`]
/// with its [`TapeFilter`] ([`FilteredLayer`]).
pub fn layer<S>() -> FilteredLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    FilteredLayer {
        filtered: TapeLayer::new().with_filter(TapeFilter::new()),
    }
}

/// [`TapeLayer`] under its per-layer [`TapeFilter`], as
/// `tracing_subscriber`'s `Filtered` puts them (the filter's interest and
/// answers are that of this layer alone: a callsite tape does not want is
/// still seen by the other layers), with one difference: a span's enter,
/// exit, record and close reach [`TapeLayer`] without `Filtered`'s look-up
/// of the span in the registry (was it enabled for this layer?), two
/// atomic read-modify-writes each time. With the layer's own look-ups
/// gone too (`made`), a span's new, enter, exit and close went from about
/// 540 to 370 TSC ticks, beside 250 for a layer that only timestamps its
/// enter and exit (`benches/peers/RESULTS.md`). The layer answers for
/// itself instead: it records a span's entries and exits when its
/// tracepoints are enabled then, so a span made while tape did not want
/// its callsite is recorded from its next entry once it does (`Filtered`
/// would never record it; its `.new` is not in the trace), and one made
/// while wanted is not once its tracepoints are disabled.
pub struct FilteredLayer<S> {
    filtered: tracing_subscriber::filter::Filtered<TapeLayer, TapeFilter, S>,
}

impl<S> std::fmt::Debug for FilteredLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilteredLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for FilteredLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    // What per-layer filtering is: `Filtered`'s own.
    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        self.filtered.on_register_dispatch(subscriber);
    }
    fn on_layer(&mut self, subscriber: &mut S) {
        self.filtered.on_layer(subscriber);
    }
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.filtered.register_callsite(meta)
    }
    fn enabled(&self, meta: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.filtered.enabled(meta, ctx)
    }
    fn event_enabled(&self, _: &Event<'_>, _: Context<'_, S>) -> bool {
        // `Filtered`'s would ask `TapeFilter::event_enabled` (not
        // implemented: yes), leave the per-layer state as `enabled` set it
        // and answer yes whatever it said (a per-layer filter never
        // disables an event for the others): the same, without its
        // thread-local's look-up at each event.
        true
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.filtered.on_event(event, ctx);
    }
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.filtered.on_new_span(attrs, id, ctx);
    }
    fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
        self.filtered.max_level_hint()
    }

    // A span's later hooks: straight to the layer (see the type's docs).
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.filtered.inner().on_record(id, values, ctx);
    }
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.filtered.inner().on_enter(id, ctx);
    }
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.filtered.inner().on_exit(id, ctx);
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.filtered.inner().on_close(id, ctx);
    }

    #[doc(hidden)]
    unsafe fn downcast_raw(&self, id: std::any::TypeId) -> Option<*const ()> {
        if id == std::any::TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // `Filtered`'s answers, its marker of a per-layer filter among
        // them: the stack then treats this layer as the filtered one it is
        // (an interest of `never` here is not everyone's).
        // SAFETY: the caller's contract is passed on as it is: a pointer
        // given is to a value of type `id`, living as long as `self`.
        unsafe { self.filtered.downcast_raw(id) }
    }
}

/// Records `payload` on `tp` (state word `state`, active): the emit path
/// when it only records, else a declared tracepoint's cold path.
#[inline(always)]
fn emit<P: tape::Encode>(tp: &'static Tracepoint, state: u64, payload: &P) {
    if tape::__private::records_only(state) {
        tape::__private::emit(state, payload);
    } else {
        tape::__private::traced::record_payload(tp, state, payload);
    }
}

/// Records an event's fields on `tp` (active, state `state`), typed as
/// `typing` says (set by its first event): encoded straight into the ring
/// as they are visited when every field is typed and the tracepoint only
/// records, else (and when that gives up) gathered, checked and encoded.
#[inline(never)]
fn record_event(tp: &'static Tracepoint, typing: &Typing, state: u64, event: &Event<'_>) {
    if let (Some((kinds, need)), true) = (typing.direct(), tape::__private::records_only(state)) {
        let done = tape::__private::try_emit_with(state, need, |out| {
            value::Direct::encode(out, kinds, need, |v| event.record(v))
        });
        if done == Some(true) {
            return;
        }
    }
    record_event_gathered(tp, typing, state, event);
}

/// [`record_event`]'s way when the values cannot go straight into the
/// ring: gathered on the stack, checked, converted or cut, then encoded.
/// A function of its own, so that the direct way's frame is not this
/// one's (its stack buffer, its registers saved at every event).
#[inline(never)]
fn record_event_gathered(tp: &'static Tracepoint, typing: &Typing, state: u64, event: &Event<'_>) {
    value::with_values(
        event.metadata().fields().len(),
        |v| event.record(v),
        |values| {
            let kinds = typing.kinds(tp, false, values);
            if values.fit(kinds) {
                emit(tp, state, &value::Typed { values, kinds });
            }
        },
    );
}

/// Records a span's fields (at its creation, or recorded later) with its
/// id on `tp` (active, state `state`).
#[inline(never)]
fn record_span_fields(
    tp: &'static Tracepoint,
    typing: &Typing,
    state: u64,
    id: &Id,
    n: usize,
    visit: impl Fn(&mut dyn tracing_core::field::Visit),
) {
    let call = id.into_u64();
    if let (Some((kinds, need)), true) = (typing.direct(), tape::__private::records_only(state)) {
        // The call id, then the values as they are visited (`WithCall`).
        let done = tape::__private::try_emit_with(state, 8 + need, |out| {
            let (head, rest) = out.split_at_mut(8);
            for (d, b) in head.iter_mut().zip(call.to_ne_bytes()) {
                d.write(b);
            }
            value::Direct::encode(rest, kinds, need, &visit).map(|len| 8 + len)
        });
        if done == Some(true) {
            return;
        }
    }
    record_span_fields_gathered(tp, typing, state, call, n, visit);
}

/// [`record_span_fields`]'s way when the values cannot go straight into
/// the ring (as [`record_event_gathered`]).
#[inline(never)]
fn record_span_fields_gathered(
    tp: &'static Tracepoint,
    typing: &Typing,
    state: u64,
    call: u64,
    n: usize,
    visit: impl Fn(&mut dyn tracing_core::field::Visit),
) {
    value::with_values(n, visit, |values| {
        let kinds = typing.kinds(tp, true, values);
        if values.fit(kinds) {
            let payload = value::WithCall {
                call,
                values: value::Typed { values, kinds },
            };
            emit(tp, state, &payload)
        }
    });
}

impl<S> Layer<S> for TapeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if !callsite::is_hint(meta) {
            callsite::register(meta);
        }
        // Unfiltered, the layer decides nothing for the others: whether
        // tape records is its tracepoints' state, read at each event.
        Interest::always()
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let c = callsite::find_or_register(event.metadata());
        if c.lost() {
            return;
        }
        let state = c.main.state();
        if tape::__private::is_active(state) {
            record_event(c.main, &c.main_kinds, state, event);
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let c = callsite::find_or_register(attrs.metadata());
        if c.lost() {
            return;
        }
        if c.span.is_some() {
            made::note(id.into_u64(), c);
        }
        let state = c.main.state();
        if tape::__private::is_active(state) {
            let n = attrs.metadata().fields().len();
            record_span_fields(c.main, &c.main_kinds, state, id, n, |v| attrs.record(v));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(c) =
            made::find(id.into_u64()).or_else(|| ctx.metadata(id).and_then(callsite::find))
        else {
            return;
        };
        let Some(s) = &c.span else {
            return;
        };
        let state = s.record.state();
        if tape::__private::is_active(state) {
            let n = c.fields();
            record_span_fields(s.record, &s.record_kinds, state, id, n, |v| {
                values.record(v)
            });
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let c = made::find(id.into_u64()).or_else(|| ctx.metadata(id).and_then(callsite::find));
        if let Some(s) = c.and_then(|c| c.span.as_ref()) {
            span::enter(id.into_u64(), s.entry, s.exit);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        // The exit's tracepoint is on this thread's stack, from the entry;
        // the registry is asked only when it is not (to count the exit).
        span::exit(id.into_u64(), || {
            ctx.metadata(id)
                .and_then(callsite::find)
                .and_then(|c| c.span.as_ref())
                .map(|s| s.exit)
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let c = made::forget(id.into_u64()).or_else(|| {
            let c = ctx.metadata(&id).and_then(callsite::find)?;
            made::closed_elsewhere(c);
            Some(c)
        });
        let Some(s) = c.and_then(|c| c.span.as_ref()) else {
            return;
        };
        let state = s.close.state();
        if tape::__private::is_active(state) {
            emit(s.close, state, &id.into_u64());
        }
    }
}

impl<S> Filter<S> for TapeFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        // Asked at each event while the interest is "sometimes": while a
        // trigger can switch events, and while another thread registers
        // the callsite (`tracing` answers "sometimes" to the threads that
        // hit it then). A callsite not in the table yet is let through:
        // the layer registers it (`find_or_register`) and reads its state.
        // A callsite that got no tracepoint is asked each time (its
        // interest is "sometimes"), so that its events are counted.
        callsite::find(meta).is_none_or(|c| !c.lost() && c.active())
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if callsite::is_hint(meta) {
            // `tracing::enabled!`: asks whether events of a target and
            // level would be recorded, with no event of its own. tape
            // decides per event callsite, not per target: say yes, so that
            // code guarded by it still reaches the event callsites, which
            // answer for themselves (a "no" here would lose their events).
            return Interest::always();
        }
        let c = callsite::register(meta);
        if c.unregistered() {
            // Its events come to `enabled`, which counts them.
            Interest::sometimes()
        } else if c.wanted() {
            Interest::always()
        } else if tape::trigger::switches_events() {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }
}
