//! Procedural macros of tape. Users call them through `tape::tracepoint!`;
//! see the `tape` crate for the documentation.
//!
//! One declaration generates everything about a tracepoint:
//!
//! ```text
//! tape::tracepoint! {
//!     /// A packet was received.
//!     pub fn net_rx(port: u16, len: u32, ifname: &str) = "app.net.rx";
//! }
//! ```
//!
//! expands to
//!
//! * `pub fn net_rx(port, len, ifname)`: the emit function. Inlined at the
//!   call site, where it is one relaxed load of the tracepoint's state word,
//!   a test of its top bit (ACTIVE) and a branch; when active, a second test
//!   on the same register picks `net_rx::__record` (out of line: recording
//!   only) or `net_rx::__hit` (cold: records if enabled, then calls probes).
//! * `pub mod net_rx`: `net_rx::TRACEPOINT` (the `tape::Tracepoint` static,
//!   registered through a `linkme` link section), `net_rx::enabled()`,
//!   `net_rx::attach(|port, len, ifname| ..)` and `attach_with_priority`
//!   (typed probes; `net_rx::Callback` is their type), and a description of
//!   the fields from which the CTF metadata is written.
//!
//! An **event class** (the kernel's DECLARE_EVENT_CLASS / DEFINE_EVENT)
//! declares the fields and format once, then events of that shape:
//!
//! ```text
//! tape::tracepoint! {
//!     #[format("comm={comm} pid={pid} prio={prio} target_cpu={target_cpu:03}")]
//!     pub class sched_wakeup_template(comm: [u8; 16], pid: i32, prio: i32, target_cpu: u32) {
//!         pub fn sched_wakeup = "sched.wakeup";
//!         pub fn sched_wakeup_new = "sched.wakeup_new";
//!     }
//! }
//! ```
//!
//! The class becomes a module with the shared field descriptions and one
//! out-of-line encoder (`sched_wakeup_template::emit`); each event keeps
//! its own inlined enabled test and calls it, so 50 events of a class carry
//! one encoder, not 50.
//!
//! Names and formats are checked here, at compile time: names are dotted
//! lowercase words (`crate.subsystem.event`), each `[a-z][a-z0-9_]*`, at
//! least two words; every `{field}` of a format names an argument.
//!
//! `#[derive(Enum)]` and `#[derive(Fields)]` write the `tape::Field` impls
//! of a user enum (a CTF enumeration) and of a user struct (a CTF struct).
#![forbid(unsafe_code)]
//!
//! | file | what it expands |
//! |---|---|
//! | `tracepoints.rs` | `tracepoint!`: events, classes, their checks |
//! | `derives.rs` | `#[derive(Enum)]`, `#[derive(Fields)]` |
//! | `traced_fns.rs` | `#[traced]`, `#[notrace]` |
//! | `usdt.rs` | the SDT probe (note, semaphore, site) of each tracepoint |
//!
//! This file holds the entry points only (a proc-macro crate must export
//! them from its root).

mod derives;
mod traced_fns;
mod tracepoints;
mod usdt;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::DeriveInput;

use derives::{enum_impl, fields_impl};
use traced_fns::{traced_block, traced_item, TracedOptions};
use tracepoints::{expand, expand_class, Item, Items};

/// Declares tracepoints. See `tape::tracepoint!` for the documentation.
#[proc_macro]
pub fn tracepoint(input: TokenStream) -> TokenStream {
    let items = syn::parse_macro_input!(input as Items);
    let mut out = TokenStream2::new();
    for item in items.0 {
        let args = match &item {
            Item::Event(d) => &d.args,
            Item::Class(c) => &c.args,
        };
        let refused: Vec<_> = args
            .iter()
            .filter_map(|(_, ty)| tracepoints::owned_container(ty))
            .collect();
        if !refused.is_empty() {
            refused
                .iter()
                .for_each(|e| out.extend(e.to_compile_error()));
            out.extend(tracepoints::placeholder(&item));
            continue;
        }
        match item {
            Item::Event(d) => out.extend(expand(d, None)),
            Item::Class(c) => out.extend(expand_class(c)),
        }
    }
    out.into()
}

/// `#[derive(tape::Enum)]`: a fieldless enum becomes a CTF enumeration of
/// its `#[repr]` integer (`i32` without one).
#[proc_macro_derive(Enum)]
pub fn derive_enum(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    match enum_impl(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[derive(tape::Fields)]`: a struct with named fields becomes a CTF
/// struct of them, encoded one after the other.
#[proc_macro_derive(Fields)]
pub fn derive_fields(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    match fields_impl(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[tape::traced]` on a function, an `impl` block or an inline module:
/// see `tape::traced` for the documentation. Each function (each method of
/// the `impl`, each function and method of the module, nested modules
/// included) records its entry and exit; `#[tape::notrace]` leaves one
/// out.
#[proc_macro_attribute]
pub fn traced(attr: TokenStream, item: TokenStream) -> TokenStream {
    let opts = match syn::parse::<TracedOptions>(attr) {
        Ok(o) => o,
        Err(e) => return e.to_compile_error().into(),
    };
    let item = syn::parse_macro_input!(item as syn::Item);
    let untraced = item.clone();
    let out = match (&item, opts.is_empty()) {
        (_, true) => traced_item(item),
        (syn::Item::Fn(f), false) => {
            let mut f = f.clone();
            traced_block(&f.sig, "", &f.block, &opts).map(|b| {
                *f.block = b;
                syn::Item::Fn(f)
            })
        }
        (other, false) => Err(syn::Error::new_spanned(
            other,
            "#[tape::traced(args(..), ret)] goes on a function or a method: on an impl or a \
             module, put it on the methods that need it",
        )),
    };
    match out {
        Ok(out) => quote!(#out).into(),
        // The error, and the item as written: its callers raise nothing more.
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(quote!(#untraced));
            out.into()
        }
    }
}

/// `#[tape::notrace]`: leaves a function of a `#[tape::traced]` `impl` or
/// module untraced (ftrace's `set_ftrace_notrace` at compile time). On its
/// own it changes nothing.
#[proc_macro_attribute]
pub fn notrace(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}
