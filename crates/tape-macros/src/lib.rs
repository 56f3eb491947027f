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

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::{
    Attribute, Data, DeriveInput, Fields, FnArg, Ident, LitStr, Pat, Token, Type, Visibility,
};

/// One `fn name(args) = "dotted.name";` item, or an event of a class
/// (`fn name = "dotted.name";`, its arguments those of the class).
struct Decl {
    attrs: Vec<Attribute>,
    fast_path: bool,
    format: Option<LitStr>,
    vis: Visibility,
    ident: Ident,
    args: Vec<(Ident, Type)>,
    name: LitStr,
}

/// `class name(args) { events }`.
struct Class {
    attrs: Vec<Attribute>,
    format: Option<LitStr>,
    vis: Visibility,
    ident: Ident,
    args: Vec<(Ident, Type)>,
    events: Vec<Decl>,
}

enum Item {
    Event(Decl),
    Class(Class),
}

struct Items(Vec<Item>);

impl Parse for Items {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut v = Vec::new();
        while !input.is_empty() {
            v.push(input.parse()?);
        }
        Ok(Items(v))
    }
}

/// Takes `#[fast_path]` and `#[format("...")]` out of `attrs`.
fn take_attrs(attrs: &mut Vec<Attribute>) -> syn::Result<(bool, Option<LitStr>)> {
    let mut fast_path = false;
    let mut format = None;
    let mut err = None;
    attrs.retain(|a| {
        if a.path().is_ident("fast_path") {
            fast_path = true;
            false
        } else if a.path().is_ident("format") {
            match a.parse_args::<LitStr>() {
                Ok(l) => format = Some(l),
                Err(e) => err = Some(e),
            }
            false
        } else {
            true
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok((fast_path, format)),
    }
}

fn parse_args(input: ParseStream) -> syn::Result<Vec<(Ident, Type)>> {
    let content;
    syn::parenthesized!(content in input);
    let raw = content.parse_terminated(FnArg::parse, Token![,])?;
    let mut args = Vec::new();
    for a in raw {
        match a {
            FnArg::Typed(pt) => match *pt.pat {
                Pat::Ident(pi) => args.push((pi.ident, *pt.ty)),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "tracepoint arguments must be plain names: `name: Type`",
                    ))
                }
            },
            FnArg::Receiver(r) => {
                return Err(syn::Error::new_spanned(r, "a tracepoint takes no `self`"))
            }
        }
    }
    Ok(args)
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attrs = input.call(Attribute::parse_outer)?;
        let (fast_path, format) = take_attrs(&mut attrs)?;
        let vis: Visibility = input.parse()?;
        if input.peek(Ident) && !input.peek(Token![fn]) {
            let kw: Ident = input.parse()?;
            if kw != "class" {
                return Err(syn::Error::new(kw.span(), "expected `fn` or `class`"));
            }
            if fast_path {
                return Err(syn::Error::new(
                    kw.span(),
                    "`#[fast_path]` goes on the events of a class, not on the class",
                ));
            }
            let ident: Ident = input.parse()?;
            let args = parse_args(input)?;
            if let Some(f) = &format {
                check_format(f, &args)?;
            }
            let body;
            syn::braced!(body in input);
            let mut events = Vec::new();
            while !body.is_empty() {
                let mut attrs = body.call(Attribute::parse_outer)?;
                let (fast_path, own) = take_attrs(&mut attrs)?;
                let vis: Visibility = body.parse()?;
                body.parse::<Token![fn]>()?;
                let ident: Ident = body.parse()?;
                body.parse::<Token![=]>()?;
                let name: LitStr = body.parse()?;
                body.parse::<Token![;]>()?;
                check_name(&name)?;
                if let Some(f) = &own {
                    check_format(f, &args)?;
                }
                events.push(Decl {
                    attrs,
                    fast_path,
                    format: own.or_else(|| format.clone()),
                    vis,
                    ident,
                    args: args.clone(),
                    name,
                });
            }
            return Ok(Item::Class(Class {
                attrs,
                format,
                vis,
                ident,
                args,
                events,
            }));
        }
        input.parse::<Token![fn]>()?;
        let ident: Ident = input.parse()?;
        let args = parse_args(input)?;
        input.parse::<Token![=]>()?;
        let name: LitStr = input.parse()?;
        input.parse::<Token![;]>()?;
        check_name(&name)?;
        if let Some(f) = &format {
            check_format(f, &args)?;
        }
        Ok(Item::Event(Decl {
            attrs,
            fast_path,
            format,
            vis,
            ident,
            args,
            name,
        }))
    }
}

/// The `{field}` references of a format: each must name an argument (its
/// first path segment: `{hdr.len}` names `hdr`); `{{` and `}}` are braces.
fn check_format(lit: &LitStr, args: &[(Ident, Type)]) -> syn::Result<()> {
    let f = lit.value();
    let err = |why: String| Err(syn::Error::new(lit.span(), format!("format {f:?}: {why}")));
    let mut rest = f.as_str();
    while let Some(i) = rest.find(['{', '}']) {
        let (c, after) = (rest.as_bytes()[i], &rest[i + 1..]);
        if after.starts_with(c as char) {
            rest = &after[1..];
            continue;
        }
        if c == b'}' {
            return err("a `}` with no `{` (write `}}` for a brace)".into());
        }
        let Some(end) = after.find('}') else {
            return err("a `{` with no `}` (write `{{` for a brace)".into());
        };
        let inside = &after[..end];
        let path = inside.split(':').next().unwrap_or("");
        let first = path.split('.').next().unwrap_or("");
        if !args.iter().any(|(n, _)| n == first) {
            let names: Vec<String> = args.iter().map(|(n, _)| n.to_string()).collect();
            return err(format!(
                "`{{{inside}}}` names no field (fields: {})",
                names.join(", ")
            ));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

/// Tracepoint names are dotted lowercase words: `crate.subsystem.event`.
fn check_name(lit: &LitStr) -> syn::Result<()> {
    let name = lit.value();
    let err = |why: &str| {
        Err(syn::Error::new(
            lit.span(),
            format!(
                "tracepoint name {name:?} {why}: use dotted lowercase words such as \"app.net.rx\""
            ),
        ))
    };
    let words: Vec<&str> = name.split('.').collect();
    if words.len() < 2 {
        return err("has no dot");
    }
    for w in words {
        let mut chars = w.chars();
        match chars.next() {
            None => return err("has an empty word"),
            Some(c) if !c.is_ascii_lowercase() => {
                return err("has a word that does not start with a lowercase letter")
            }
            _ => {}
        }
        if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return err("has a character other than a-z, 0-9, '_' and '.'");
        }
    }
    Ok(())
}

/// Declares tracepoints. See `tape::tracepoint!` for the documentation.
#[proc_macro]
pub fn tracepoint(input: TokenStream) -> TokenStream {
    let items = syn::parse_macro_input!(input as Items);
    let mut out = TokenStream2::new();
    for item in items.0 {
        match item {
            Item::Event(d) => out.extend(expand(d, None)),
            Item::Class(c) => out.extend(expand_class(c)),
        }
    }
    out.into()
}

/// `Some("...")` or `None`, as tokens.
fn option_lit(lit: Option<&LitStr>) -> TokenStream2 {
    match lit {
        Some(f) => quote!(::core::option::Option::Some(#f)),
        None => quote!(::core::option::Option::None),
    }
}

/// The arguments' names and types, apart.
fn split_args(args: &[(Ident, Type)]) -> (Vec<&Ident>, Vec<&Type>) {
    args.iter().map(|(n, t)| (n, t)).unzip()
}

/// Field descriptions of `args`, as the elements of a `[FieldDesc]`.
fn field_descs(args: &[(Ident, Type)]) -> (Vec<TokenStream2>, TokenStream2) {
    let descs = args
        .iter()
        .map(|(n, t)| {
            let s = n.to_string();
            quote!(::tape::FieldDesc { name: #s, describe: <#t as ::tape::Field>::describe })
        })
        .collect();
    let tys = args.iter().map(|(_, t)| t);
    (descs, quote!(0 #(+ <#tys as ::tape::Field>::FIXED_SIZE)*))
}

/// A class: a module with the fields, their fixed size and the one encoder
/// every event of the class calls; then each event.
fn expand_class(c: Class) -> TokenStream2 {
    let Class {
        attrs,
        format,
        vis,
        ident,
        args,
        events,
    } = c;
    let (names, tys) = split_args(&args);
    let (descs, fixed) = field_descs(&args);
    let n = descs.len();
    let payload = payload_tuple(&names);
    let borrowed = borrowed_tuple(&names);
    let hit = hit_fn(
        &args,
        quote!(__tape_tp: &'static ::tape::Tracepoint,),
        quote!(__tape_tp),
    );
    let format = option_lit(format.as_ref());
    let class_name = ident.to_string();
    let class_doc = format!(
        "Event class `{ident}`: the fields, the encoder and the probe type its events share."
    );
    let mut out = quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #class_doc]
        #[allow(non_snake_case, non_upper_case_globals, unused_imports)]
        #vis mod #ident {
            use super::*;

            /// The class name.
            pub const NAME: &str = #class_name;
            /// The fields every event of the class has.
            pub static FIELDS: [::tape::FieldDesc; #n] = [#(#descs),*];
            /// Bytes taken by the fields of fixed size.
            pub const FIXED_SIZE: usize = #fixed;
            /// The class's format, if it has one.
            pub const FORMAT: ::core::option::Option<&str> = #format;

            /// Records an event of the class: the one encoder its events
            /// share (out of line, so it exists once).
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            pub fn emit(__tape_state: u64, #(#names: #tys),*) {
                if !::tape::__private::try_emit(__tape_state, &#borrowed) {
                    emit_cold(__tape_state, #(#names),*);
                }
            }

            /// Records an event of the class in the cases `try_emit`
            /// declines (a jump from `emit`: the same arguments).
            #[doc(hidden)]
            #[cold]
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            pub fn emit_cold(__tape_state: u64, #(#names: #tys),*) {
                ::tape::__private::emit(__tape_state, #payload);
            }

            /// A typed probe of the class's events: the arguments by reference.
            pub type Callback = dyn Fn(#(&#tys),*) + ::core::marker::Send + ::core::marker::Sync;

            #hit
        }
    };
    for e in events {
        out.extend(expand(e, Some(&ident)));
    }
    out
}

/// The line of a declaration (its name), not of the `tracepoint!` block
/// (what `line!()` gives: the line of the outermost macro call), so that a
/// name declared twice is reported where each declaration is. `line!()`
/// when the compiler cannot say (before Rust 1.88) or when the name comes
/// from another file than the call (a `macro_rules!` elsewhere).
fn declaration_line(ident: &Ident) -> TokenStream2 {
    let span = ident.span();
    let line = span.start().line as u32;
    if line == 0 || span.file() != proc_macro2::Span::call_site().file() {
        return quote!(::core::line!());
    }
    quote!(#line)
}

/// One event: its emit function and its module. An event of a class calls
/// the class's encoder and shares its field descriptions.
fn expand(d: Decl, class: Option<&Ident>) -> TokenStream2 {
    let Decl {
        attrs,
        fast_path,
        format,
        vis,
        ident,
        args,
        name,
    } = d;
    // Types as written may elide lifetimes (`&str`); inside the static they
    // are `'static`, which is what a description needs.
    let (names, tys) = split_args(&args);
    let private = quote!(::tape::__private);
    let compiled_in = if fast_path {
        quote!(#private::FAST_PATH)
    } else {
        quote!(true)
    };
    let (record, cold, fields, fixed, class_name, callback) = match class {
        Some(c) => (
            quote!(#c::emit(__tape_state, #(#names),*)),
            quote!(#c::__hit(&#ident::TRACEPOINT, __tape_state, #(#names),*)),
            quote!(&#c::FIELDS),
            quote!(#c::FIXED_SIZE),
            quote!(::core::option::Option::Some(#c::NAME)),
            quote! {
                /// A typed probe of this tracepoint: the arguments by reference.
                pub type Callback = #c::Callback;
            },
        ),
        None => {
            let payload = payload_tuple(&names);
            let borrowed = borrowed_tuple(&names);
            let (descs, fixed) = field_descs(&args);
            let hit = hit_fn(&args, quote!(), quote!(&TRACEPOINT));
            (
                quote!(#ident::__record(__tape_state, #(#names),*)),
                quote!(#ident::__hit(__tape_state, #(#names),*)),
                quote!(&[#(#descs),*]),
                fixed,
                quote!(::core::option::Option::None),
                quote! {
                    /// A typed probe of this tracepoint: the arguments by reference.
                    pub type Callback = dyn Fn(#(&#tys),*) + ::core::marker::Send + ::core::marker::Sync;

                    /// Records an event: out of line, so that the site of a
                    /// disabled tracepoint is the load, the test and the
                    /// branch alone (no register the recording needs is
                    /// saved on its way). A leaf in the common case
                    /// (`try_emit`); the rest jumps to `__record_cold`.
                    #[doc(hidden)]
                    #[inline(never)]
                    #[allow(clippy::too_many_arguments)]
                    pub fn __record(__tape_state: u64, #(#names: #tys),*) {
                        if !#private::try_emit(__tape_state, &#borrowed) {
                            __record_cold(__tape_state, #(#names),*);
                        }
                    }

                    /// Records an event in the cases `try_emit` declines.
                    #[doc(hidden)]
                    #[cold]
                    #[inline(never)]
                    #[allow(clippy::too_many_arguments)]
                    pub fn __record_cold(__tape_state: u64, #(#names: #tys),*) {
                        #private::emit(__tape_state, #payload);
                    }

                    #hit
                },
            )
        }
    };
    let format = option_lit(format.as_ref());
    let fn_doc = format!("Emits tracepoint `{}`.", name.value());
    let mod_doc = format!(
        "The tracepoint object of [`{ident}()`]: `{}`.",
        name.value()
    );
    let register = format_ident!("__TAPE_REGISTER_{}", ident.to_string().to_uppercase());
    let line = declaration_line(&ident);
    quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #fn_doc]
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        #vis fn #ident(#(#names: #tys),*) {
            if #compiled_in {
                let __tape_state = #ident::TRACEPOINT.state();
                if #private::is_active(__tape_state) {
                    if #private::records_only(__tape_state) {
                        #record;
                    } else {
                        #cold;
                    }
                }
            }
        }

        #[doc = #mod_doc]
        #[allow(non_snake_case, non_upper_case_globals, unused_imports)]
        #vis mod #ident {
            use super::*;

            /// The tracepoint: its state word and its description.
            pub static TRACEPOINT: ::tape::Tracepoint = ::tape::Tracepoint::new(&DESC);

            static DESC: ::tape::TracepointDesc = ::tape::TracepointDesc {
                name: #name,
                file: ::core::file!(),
                line: #line,
                module_path: ::core::module_path!(),
                fast_path: #fast_path,
                fields: #fields,
                fixed_size: #fixed,
                format: #format,
                class: #class_name,
            };

            #[#private::linkme::distributed_slice(#private::TRACEPOINTS)]
            #[linkme(crate = #private::linkme)]
            static #register: &::tape::Tracepoint = &TRACEPOINT;

            /// Whether the tracepoint is enabled (recording, or probes
            /// attached): guard costly argument preparation with it.
            #[inline(always)]
            pub fn enabled() -> bool {
                #compiled_in && #private::is_active(TRACEPOINT.state())
            }

            #callback

            /// Attaches a typed probe, called with the arguments of every
            /// hit (by reference), at the default priority; see
            /// [`tape::probe`](::tape::probe).
            pub fn attach<__TapeF>(probe: __TapeF) -> ::tape::probe::Probe
            where
                __TapeF: Fn(#(&#tys),*) + ::core::marker::Send + ::core::marker::Sync + 'static,
            {
                attach_with_priority(#private::DEFAULT_PRIORITY, probe)
            }

            /// [`attach`] with a priority: higher priorities are called first.
            pub fn attach_with_priority<__TapeF>(priority: i32, probe: __TapeF) -> ::tape::probe::Probe
            where
                __TapeF: Fn(#(&#tys),*) + ::core::marker::Send + ::core::marker::Sync + 'static,
            {
                let callback: ::std::boxed::Box<Callback> = ::std::boxed::Box::new(probe);
                #private::attach_typed(&TRACEPOINT, priority, ::std::boxed::Box::new(callback))
            }
        }
    }
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

const REPRS: [&str; 10] = [
    "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize",
];

fn enum_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(tape::Enum)] is for enums; use #[derive(tape::Fields)] for structs",
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "#[derive(tape::Enum)] takes no generic parameters",
        ));
    }
    let mut repr: Option<Ident> = None;
    for a in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        a.parse_nested_meta(|m| {
            if let Some(i) = m.path.get_ident() {
                if REPRS.contains(&i.to_string().as_str()) {
                    repr = Some(i.clone());
                }
            }
            Ok(())
        })?;
    }
    let explicit = repr.is_some();
    let repr = repr.unwrap_or_else(|| format_ident!("i32"));
    let mut variants = Vec::new();
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(syn::Error::new_spanned(
                v,
                "#[derive(tape::Enum)] needs variants without fields",
            ));
        }
        variants.push(&v.ident);
    }
    let labels: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
    // Without a repr the discriminants are isize: each must fit the i32 recorded.
    let fits = (!explicit).then(|| {
        quote! {
            const _: () = {
                #(assert!(
                    #name::#variants as isize >= i32::MIN as isize
                        && #name::#variants as isize <= i32::MAX as isize,
                    "a discriminant does not fit i32: give the enum a #[repr]"
                );)*
            };
        }
    });
    Ok(quote! {
        #fits
        impl ::tape::field::Symbolic for #name {
            type Repr = #repr;
            const LABELS: &'static [(&'static str, i128)] =
                &[#((#labels, #name::#variants as i128)),*];
            #[inline(always)]
            fn repr(&self) -> #repr {
                match self {
                    #(#name::#variants => #name::#variants as #repr,)*
                }
            }
        }

        // SAFETY: forwards to the repr integer's encoder.
        unsafe impl ::tape::Encode for #name {
            #[inline(always)]
            fn max_size(&self) -> usize {
                ::core::mem::size_of::<#repr>()
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                // SAFETY: forwarded from the caller.
                unsafe {
                    ::tape::Encode::encode(&::tape::field::Symbolic::repr(self), dst)
                }
            }
        }

        impl ::tape::Field for #name {
            const FIXED_SIZE: usize = ::core::mem::size_of::<#repr>();
            fn describe(name: &str, out: &mut ::tape::field::Layout) {
                out.push(name, ::tape::field::symbolic_type::<Self>());
            }
        }
    })
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

fn fields_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(tape::Fields)] is for structs; use #[derive(tape::Enum)] for enums",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(tape::Fields)] needs named fields (they name the CTF members)",
        ));
    };
    let idents: Vec<&Ident> = named
        .named
        .iter()
        .filter_map(|f| f.ident.as_ref())
        .collect();
    let strs: Vec<String> = idents.iter().map(|i| i.to_string()).collect();
    let tys: Vec<&Type> = named.named.iter().map(|f| &f.ty).collect();
    let (ig, tg, wc) = input.generics.split_for_impl();
    Ok(quote! {
        // SAFETY: each field writes at most its max_size(), one after the
        // other; their sum is max_size().
        unsafe impl #ig ::tape::Encode for #name #tg #wc {
            #[inline(always)]
            fn max_size(&self) -> usize {
                0 #(+ ::tape::Encode::max_size(&self.#idents))*
            }
            #[inline(always)]
            fn is_inline(&self) -> bool {
                true #(&& ::tape::Encode::is_inline(&self.#idents))*
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
                let p = dst;
                // SAFETY: the caller gave max_size() bytes, the sum of the
                // fields' bounds; each writes within its own.
                #(let p = unsafe { ::tape::Encode::encode(&self.#idents, p) };)*
                p
            }
        }

        impl #ig ::tape::Field for #name #tg #wc {
            const FIXED_SIZE: usize = 0 #(+ <#tys as ::tape::Field>::FIXED_SIZE)*;
            fn describe(name: &str, out: &mut ::tape::field::Layout) {
                out.push_struct(name, |inner| {
                    #(<#tys as ::tape::Field>::describe(#strs, inner);)*
                });
            }
        }
    })
}

/// The cold path of a hit (probes attached, a filter, a trigger): records
/// the event if enabled (through its filter, if it has one), fires its
/// triggers, then calls the probes (which a filter does not concern). `extra` and `tp`
/// are the class's tracepoint parameter and the tracepoint expression.
fn hit_fn(args: &[(Ident, Type)], extra: TokenStream2, tp: TokenStream2) -> TokenStream2 {
    let (names, tys) = split_args(args);
    let refs: Vec<TokenStream2> = names.iter().map(|n| quote!(&#n)).collect();
    let payload = payload_tuple_of(&refs);
    let private = quote!(::tape::__private);
    quote! {
        #[doc(hidden)]
        #[cold]
        #[inline(never)]
        #[allow(clippy::too_many_arguments)]
        pub fn __hit(#extra __tape_state: u64, #(#names: #tys),*) {
            let __tape_payload = #payload;
            if __tape_state & #private::TRIGGER != 0 {
                #private::trigger_hit(#tp, __tape_state, &__tape_payload);
            } else if __tape_state & #private::FILTER != 0 {
                #private::emit_filtered(#tp, __tape_state, &__tape_payload);
            } else if __tape_state & #private::RECORD != 0 {
                #private::emit(__tape_state, &__tape_payload);
            }
            if __tape_state & #private::PROBES != 0 {
                #private::call_probes(#tp, &__tape_payload, &|__tape_p: &(dyn ::core::any::Any + ::core::marker::Send + ::core::marker::Sync)| {
                    if let ::core::option::Option::Some(__tape_f) = __tape_p.downcast_ref::<::std::boxed::Box<Callback>>() {
                        __tape_f(#(&#names),*)
                    }
                });
            }
        }
    }
}

/// The arguments as a tuple, nested in tuples of at most 12 so any number
/// of fields is encodable (tuples implement `Encode` up to 12 elements).
fn payload_tuple(names: &[&Ident]) -> TokenStream2 {
    let items: Vec<TokenStream2> = names.iter().map(|n| quote!(#n)).collect();
    payload_tuple_of(&items)
}

/// The payload of borrowed arguments, `(&a, &b, ..)`: what `try_emit`
/// encodes, leaving the arguments to the cold twin if it declines.
fn borrowed_tuple(names: &[&Ident]) -> TokenStream2 {
    let items: Vec<TokenStream2> = names.iter().map(|n| quote!(&#n)).collect();
    payload_tuple_of(&items)
}

fn payload_tuple_of(items: &[TokenStream2]) -> TokenStream2 {
    if items.len() <= 12 {
        return quote!((#(#items,)*));
    }
    let chunks: Vec<TokenStream2> = items.chunks(12).map(|c| quote!((#(#c,)*))).collect();
    quote!((#(#chunks,)*))
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
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[tape::traced(args(a, b), ret)]`: the arguments recorded with the
/// entry (funcgraph-args), and the return value recorded before the exit
/// (funcgraph-retval).
#[derive(Default)]
struct TracedOptions {
    args: Vec<Ident>,
    ret: bool,
}

impl TracedOptions {
    fn is_empty(&self) -> bool {
        self.args.is_empty() && !self.ret
    }
}

impl Parse for TracedOptions {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut o = TracedOptions::default();
        while !input.is_empty() {
            let word: Ident = input.parse()?;
            match word.to_string().as_str() {
                "ret" if !o.ret => o.ret = true,
                "args" if o.args.is_empty() => {
                    let inner;
                    syn::parenthesized!(inner in input);
                    let names = inner.parse_terminated(Ident::parse, syn::Token![,])?;
                    if names.is_empty() {
                        return Err(syn::Error::new_spanned(&word, "args(..) names no argument"));
                    }
                    o.args = names.into_iter().collect();
                }
                _ => {
                    return Err(syn::Error::new_spanned(
                        &word,
                        "#[tape::traced] takes `args(NAME, ..)` and `ret` (each once): the \
                         arguments recorded at the entry, the return value at the exit",
                    ))
                }
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(o)
    }
}

/// The options of a `#[traced(..)]` among `attrs`, removed (a method of a
/// traced `impl` that asks for arguments or its return value).
fn take_traced_options(attrs: &mut Vec<Attribute>) -> syn::Result<Option<TracedOptions>> {
    let Some(i) = attrs.iter().position(|a| {
        a.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "traced")
            && matches!(a.meta, syn::Meta::List(_))
    }) else {
        return Ok(None);
    };
    let a = attrs.remove(i);
    a.parse_args::<TracedOptions>().map(Some)
}

/// `#[tape::notrace]`: leaves a function of a `#[tape::traced]` `impl` or
/// module untraced (ftrace's `set_ftrace_notrace` at compile time). On its
/// own it changes nothing.
#[proc_macro_attribute]
pub fn notrace(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Whether `attrs` hold `#[notrace]` / `#[tape::notrace]` (removed if so).
fn take_notrace(attrs: &mut Vec<Attribute>) -> bool {
    let before = attrs.len();
    attrs.retain(|a| {
        a.path()
            .segments
            .last()
            .is_none_or(|s| s.ident != "notrace")
    });
    attrs.len() != before
}

/// Whether `attrs` already hold `#[traced]` (an item inside a traced
/// module that asks for it again is traced once).
fn has_traced(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "traced")
    })
}

fn traced_item(item: syn::Item) -> syn::Result<syn::Item> {
    match item {
        syn::Item::Fn(mut f) => {
            if take_notrace(&mut f.attrs) {
                return Ok(syn::Item::Fn(f));
            }
            let block = traced_block(&f.sig, "", &f.block, &TracedOptions::default())?;
            f.block = Box::new(block);
            Ok(syn::Item::Fn(f))
        }
        syn::Item::Impl(mut i) => {
            // `impl Display for A` and `impl Debug for A` both have `fmt`:
            // the trait is part of the name (`A.Display.fmt`).
            let mut ty = impl_type_name(&i.self_ty)?;
            if let Some(last) = i.trait_.as_ref().and_then(|(path, _)| path.segments.last()) {
                ty = format!("{ty}.{}", last.ident.to_string().trim_start_matches("r#"));
            }
            for it in &mut i.items {
                if let syn::ImplItem::Fn(m) = it {
                    if take_notrace(&mut m.attrs) {
                        continue;
                    }
                    let opts = match take_traced_options(&mut m.attrs)? {
                        Some(o) => o,
                        None if has_traced(&m.attrs) => continue,
                        None => TracedOptions::default(),
                    };
                    m.block = traced_block(&m.sig, &ty, &m.block, &opts)?;
                }
            }
            Ok(syn::Item::Impl(i))
        }
        syn::Item::Mod(mut m) => {
            let Some((brace, items)) = m.content.take() else {
                return Err(syn::Error::new_spanned(
                    &m,
                    "#[tape::traced] on a module needs its items inline (`mod m { .. }`): put \
                     the attribute on the items of a module in another file",
                ));
            };
            let mut out = Vec::with_capacity(items.len());
            for it in items {
                out.push(match it {
                    syn::Item::Fn(ref f) if has_traced(&f.attrs) => it,
                    syn::Item::Impl(ref i) if has_traced(&i.attrs) => it,
                    syn::Item::Mod(ref n) if has_traced(&n.attrs) => it,
                    syn::Item::Fn(_) | syn::Item::Impl(_) => traced_item(it)?,
                    syn::Item::Mod(ref n) if n.content.is_some() => traced_item(it)?,
                    other => other,
                });
            }
            m.content = Some((brace, out));
            Ok(syn::Item::Mod(m))
        }
        other => Err(syn::Error::new_spanned(
            other,
            "#[tape::traced] goes on a function, an `impl` block or an inline module",
        )),
    }
}

/// The name an `impl`'s type gives its methods: the last segment of its
/// path, without generic arguments (`Reader` for `io::Reader<T>`).
fn impl_type_name(ty: &Type) -> syn::Result<String> {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string().trim_start_matches("r#").to_owned())
            .ok_or_else(|| syn::Error::new_spanned(ty, "an impl of an empty path")),
        Type::Reference(r) => impl_type_name(&r.elem),
        Type::Paren(p) => impl_type_name(&p.elem),
        Type::Group(g) => impl_type_name(&g.elem),
        other => Err(syn::Error::new_spanned(
            other,
            "#[tape::traced] on an impl needs a named type (`impl Reader`, `impl<T> Trait for \
             Wrapper<T>`): put it on the methods instead",
        )),
    }
}

/// The body of a traced function: its two tracepoints (named at compile
/// time from `module_path!()`, `ty` and the function), then the call guard,
/// then the original body. An `async fn` records each poll of its body as
/// a call.
fn traced_block(
    sig: &syn::Signature,
    ty: &str,
    block: &syn::Block,
    opts: &TracedOptions,
) -> syn::Result<syn::Block> {
    if let Some(c) = &sig.constness {
        return Err(syn::Error::new_spanned(
            c,
            "a const fn cannot be traced (it may run at compile time): mark it #[tape::notrace]",
        ));
    }
    let func = sig.ident.to_string().trim_start_matches("r#").to_owned();
    let line = declaration_line(&sig.ident);
    let t = quote!(::tape::traced);
    let private = quote!(::tape::__private);
    // An async fn's polls are of the class with the call id.
    let class = if sig.asyncness.is_some() {
        quote!(#t::fn_poll)
    } else {
        quote!(#t::fn_call)
    };
    // A tracepoint named from the function and `suffix`: `before` (its own
    // field list, if any) and `layout` (fields, size, format, class).
    let named = |tp: &Ident, suffix: TokenStream2, before: TokenStream2, layout: TokenStream2| {
        let len = format_ident!("{tp}_LEN");
        let name = format_ident!("{tp}_NAME");
        let desc = format_ident!("{tp}_DESC");
        quote! {
            const #len: usize = #t::name_len(::core::module_path!(), #ty, #func, #suffix);
            const #name: [u8; #len] =
                #t::name::<#len>(::core::module_path!(), #ty, #func, #suffix);
            #before
            static #desc: ::tape::TracepointDesc = ::tape::TracepointDesc {
                name: #t::as_str(&#name),
                file: ::core::file!(),
                line: #line,
                module_path: ::core::module_path!(),
                fast_path: false,
                #layout
            };
            static #tp: ::tape::Tracepoint = ::tape::Tracepoint::new(&#desc);
        }
    };
    // One of the class's (fn_call, fn_poll).
    let point = |suffix: TokenStream2, tp: &Ident| {
        named(
            tp,
            suffix,
            quote!(),
            quote! {
                fields: &#class::FIELDS,
                fixed_size: #class::FIXED_SIZE,
                format: #class::FORMAT,
                class: ::core::option::Option::Some(#class::NAME),
            },
        )
    };
    let entry = format_ident!("__TAPE_FN_ENTRY");
    let exit = format_ident!("__TAPE_FN_EXIT");
    let mut entry_point = point(quote!(#t::ENTRY), &entry);
    let exit_point = point(quote!(#t::EXIT), &exit);
    if let (Some(a), false) = (&sig.asyncness, opts.is_empty()) {
        return Err(syn::Error::new_spanned(
            a,
            "args(..) and ret are not recorded for an async fn (its polls carry the call id)",
        ));
    }
    // The types must be nameable in a static: no generic parameter, no
    // `Self`, no `impl Trait`.
    let generics: Vec<String> = sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    let check = |ty: &Type, what: &str| -> syn::Result<()> {
        let bad = ty.to_token_stream().into_iter().find_map(|tt| {
            fn walk(tt: proc_macro2::TokenTree, g: &[String]) -> Option<String> {
                match tt {
                    proc_macro2::TokenTree::Ident(i)
                        if i == "Self" || i == "impl" || g.iter().any(|n| i == n) =>
                    {
                        Some(i.to_string())
                    }
                    proc_macro2::TokenTree::Group(gr) => {
                        gr.stream().into_iter().find_map(|t| walk(t, g))
                    }
                    _ => None,
                }
            }
            walk(tt, &generics)
        });
        match bad {
            Some(b) => Err(syn::Error::new_spanned(
                ty,
                format!(
                    "{what}: a recorded type cannot use `{b}` (it is described once, in a \
                     static): record a value of a concrete type"
                ),
            )),
            None => Ok(()),
        }
    };
    // The chosen arguments, by name, with their types.
    let mut fields: Vec<(Ident, Type)> = Vec::new();
    for name in &opts.args {
        let ty = sig
            .inputs
            .iter()
            .find_map(|a| match a {
                syn::FnArg::Typed(pt) => match &*pt.pat {
                    syn::Pat::Ident(pi) if pi.ident == *name => Some((*pt.ty).clone()),
                    _ => None,
                },
                syn::FnArg::Receiver(_) => None,
            })
            .ok_or_else(|| {
                syn::Error::new_spanned(
                    name,
                    format!("args({name}): the function has no argument `{name}` (by name, not a pattern; not self)"),
                )
            })?;
        check(&ty, &format!("args({name})"))?;
        fields.push((name.clone(), ty));
    }
    let depth_field = (format_ident!("depth"), syn::parse_quote!(u32));
    let mut entry_fields = vec![depth_field];
    entry_fields.extend(fields.iter().cloned());
    let fields_of = |fs: &[(Ident, Type)]| {
        let (descs, fixed) = field_descs(fs);
        let n = descs.len();
        (
            quote!([::tape::FieldDesc; #n]),
            quote!([#(#descs),*]),
            fixed,
        )
    };
    // One with its own fields.
    let desc_of = |tp: &Ident, suffix: TokenStream2, fs: &[(Ident, Type)]| {
        let fields_static = format_ident!("{tp}_FIELDS");
        let (fty, fval, fixed) = fields_of(fs);
        named(
            tp,
            suffix,
            quote!(static #fields_static: #fty = #fval;),
            quote! {
                fields: &#fields_static,
                fixed_size: #fixed,
                format: ::core::option::Option::None,
                class: ::core::option::Option::None,
            },
        )
    };
    let names: Vec<&Ident> = fields.iter().map(|(n, _)| n).collect();
    let enter = if fields.is_empty() {
        quote!(#t::enter(&#entry, &#exit))
    } else {
        entry_point = desc_of(&entry, quote!(#t::ENTRY), &entry_fields);
        quote! {
            #t::enter_with(&#entry, &#exit, |__tape_state, __tape_depth| {
                #t::record_payload(&#entry, __tape_state, &(__tape_depth, #(&#names,)*));
            })
        }
    };
    let (ret_point, ret_register, body) = if sig.asyncness.is_some() {
        (
            quote!(),
            quote!(),
            quote! {
                #t::Polls::new(&#entry, &#exit, async move #block).await
            },
        )
    } else if opts.ret {
        let ret_tp = format_ident!("__TAPE_FN_RET");
        let out_ty: Type = match &sig.output {
            syn::ReturnType::Type(_, t) if !matches!(&**t, Type::Tuple(u) if u.elems.is_empty()) => {
                (**t).clone()
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    &sig.ident,
                    "ret: the function returns nothing to record",
                ))
            }
        };
        check(&out_ty, "ret")?;
        let point = desc_of(
            &ret_tp,
            quote!(#t::RET),
            &[(format_ident!("ret"), out_ty.clone())],
        );
        (
            point,
            quote! {
                #[#private::linkme::distributed_slice(#private::TRACEPOINTS)]
                #[linkme(crate = #private::linkme)]
                static __TAPE_FN_RET_REGISTER: &::tape::Tracepoint = &#ret_tp;
            },
            quote! {
                let __tape_call = #enter;
                #[allow(unused_mut, clippy::redundant_closure_call)]
                let __tape_ret: #out_ty = (move || -> #out_ty { #block })();
                __tape_call.returned(&#ret_tp, &(&__tape_ret,));
                __tape_ret
            },
        )
    } else {
        (
            quote!(),
            quote!(),
            quote! {
                let __tape_call = #enter;
                #block
            },
        )
    };
    let out = quote! {{
        #entry_point
        #exit_point
        #ret_point
        #[#private::linkme::distributed_slice(#private::TRACEPOINTS)]
        #[linkme(crate = #private::linkme)]
        static __TAPE_FN_ENTRY_REGISTER: &::tape::Tracepoint = &#entry;
        #[#private::linkme::distributed_slice(#private::TRACEPOINTS)]
        #[linkme(crate = #private::linkme)]
        static __TAPE_FN_EXIT_REGISTER: &::tape::Tracepoint = &#exit;
        #ret_register
        #body
    }};
    syn::parse2(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::Span;

    #[test]
    fn formats() {
        let args: Vec<(Ident, Type)> = vec![
            (format_ident!("pid"), syn::parse_quote!(i32)),
            (format_ident!("hdr"), syn::parse_quote!(Hdr)),
        ];
        let ok = ["", "pid={pid}", "{pid:03} {hdr.len} {{literal}}", "}}{{"];
        for f in ok {
            assert!(
                check_format(&LitStr::new(f, Span::call_site()), &args).is_ok(),
                "{f}"
            );
        }
        let bad = [
            ("{prio}", "names no field"),
            ("pid={pid", "with no `}`"),
            ("pid}", "with no `{`"),
            ("{}", "names no field"),
        ];
        for (f, why) in bad {
            let e = check_format(&LitStr::new(f, Span::call_site()), &args).unwrap_err();
            assert!(e.to_string().contains(why), "{f}: {e}");
        }
    }

    #[test]
    fn names() {
        let ok = ["app.net.rx", "a.b", "crate_1.sub_sys.event2", "x.y.z.w"];
        for n in ok {
            assert!(
                check_name(&LitStr::new(n, Span::call_site())).is_ok(),
                "{n}"
            );
        }
        let bad = [
            ("rx", "has no dot"),
            ("App.net", "does not start with a lowercase letter"),
            ("app..rx", "empty word"),
            ("app.rx.", "empty word"),
            ("app.1rx", "does not start with a lowercase letter"),
            ("app.net-rx", "other than a-z"),
            ("app.nét", "other than a-z"),
        ];
        for (n, why) in bad {
            let e = check_name(&LitStr::new(n, Span::call_site())).unwrap_err();
            assert!(e.to_string().contains(why), "{n}: {e}");
        }
    }
}
