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
//!   call site; when the tracepoint is disabled it costs one relaxed load of
//!   the tracepoint's state word and a branch.
//! * `pub mod net_rx`: `net_rx::TRACEPOINT` (the `tape::Tracepoint` static,
//!   registered through a `linkme` link section), `net_rx::enabled()`, and a
//!   description of the fields from which the CTF metadata is written.
//!
//! The name is checked here, at compile time: dotted lowercase words
//! (`crate.subsystem.event`), each `[a-z][a-z0-9_]*`, at least two words.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, FnArg, Ident, LitStr, Pat, Token, Type, Visibility};

/// One `fn name(args) = "dotted.name";` item.
struct Decl {
    attrs: Vec<Attribute>,
    fast_path: bool,
    vis: Visibility,
    ident: Ident,
    args: Vec<(Ident, Type)>,
    name: LitStr,
}

struct Decls(Vec<Decl>);

impl Parse for Decls {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut v = Vec::new();
        while !input.is_empty() {
            v.push(input.parse()?);
        }
        Ok(Decls(v))
    }
}

impl Parse for Decl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attrs = input.call(Attribute::parse_outer)?;
        let mut fast_path = false;
        attrs.retain(|a| {
            if a.path().is_ident("fast_path") {
                fast_path = true;
                false
            } else {
                true
            }
        });
        let vis: Visibility = input.parse()?;
        input.parse::<Token![fn]>()?;
        let ident: Ident = input.parse()?;
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
        input.parse::<Token![=]>()?;
        let name: LitStr = input.parse()?;
        input.parse::<Token![;]>()?;
        check_name(&name)?;
        Ok(Decl {
            attrs,
            fast_path,
            vis,
            ident,
            args,
            name,
        })
    }
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
    let decls = syn::parse_macro_input!(input as Decls);
    let mut out = TokenStream2::new();
    for d in decls.0 {
        out.extend(expand(d));
    }
    out.into()
}

fn expand(d: Decl) -> TokenStream2 {
    let Decl {
        attrs,
        fast_path,
        vis,
        ident,
        args,
        name,
    } = d;
    let names: Vec<&Ident> = args.iter().map(|(n, _)| n).collect();
    let name_strs: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    // Types as written may elide lifetimes (`&str`); inside the static they
    // are `'static`, which is what a description needs.
    let tys: Vec<&Type> = args.iter().map(|(_, t)| t).collect();
    let private = quote!(::tape::__private);
    let compiled_in = if fast_path {
        quote!(#private::FAST_PATH)
    } else {
        quote!(true)
    };
    let payload = payload_tuple(&names);
    let fn_doc = format!("Emits tracepoint `{}`.", name.value());
    let mod_doc = format!(
        "The tracepoint object of [`{ident}()`]: `{}`.",
        name.value()
    );
    let register = format_ident!("__TAPE_REGISTER_{}", ident.to_string().to_uppercase());
    quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #fn_doc]
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        #vis fn #ident(#(#names: #tys),*) {
            if #compiled_in {
                let state = #ident::TRACEPOINT.state();
                if #private::is_enabled(state) {
                    #private::emit(state, #payload);
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
                line: ::core::line!(),
                module_path: ::core::module_path!(),
                fast_path: #fast_path,
                fields: &[#(::tape::FieldDesc {
                    name: #name_strs,
                    describe: <#tys as ::tape::Field>::describe,
                }),*],
                fixed_size: 0 #(+ <#tys as ::tape::Field>::FIXED_SIZE)*,
            };

            #[#private::linkme::distributed_slice(#private::TRACEPOINTS)]
            #[linkme(crate = #private::linkme)]
            static #register: &::tape::Tracepoint = &TRACEPOINT;

            /// Whether the tracepoint is enabled: guard costly argument
            /// preparation with it.
            #[inline(always)]
            pub fn enabled() -> bool {
                #compiled_in && #private::is_enabled(TRACEPOINT.state())
            }
        }
    }
}

/// The arguments as a tuple, nested in tuples of at most 12 so any number
/// of fields is encodable (tuples implement `Encode` up to 12 elements).
fn payload_tuple(names: &[&Ident]) -> TokenStream2 {
    if names.len() <= 12 {
        return quote!((#(#names,)*));
    }
    let chunks: Vec<TokenStream2> = names.chunks(12).map(|c| quote!((#(#c,)*))).collect();
    quote!((#(#chunks,)*))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::Span;

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
