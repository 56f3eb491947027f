//! `tracepoint!`: the declarations parsed (events, classes, their names
//! and formats checked), and each expanded into its emit function, its
//! module (the `Tracepoint` static, `enabled`, typed probes) and its
//! fields' description; the helpers the function tracer's expansion
//! shares (`hit_fn`, the payload tuples, a declaration's line).

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, FnArg, Ident, LitStr, Pat, Token, Type, Visibility};

use crate::usdt::usdt_site;

/// One `fn name(args) = "dotted.name";` item, or an event of a class
/// (`fn name = "dotted.name";`, its arguments those of the class).
pub(crate) struct Decl {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) fast_path: bool,
    pub(crate) format: Option<LitStr>,
    pub(crate) vis: Visibility,
    pub(crate) ident: Ident,
    pub(crate) args: Vec<(Ident, Type)>,
    pub(crate) name: LitStr,
}

/// `class name(args) { events }`.
pub(crate) struct Class {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) format: Option<LitStr>,
    pub(crate) vis: Visibility,
    pub(crate) ident: Ident,
    pub(crate) args: Vec<(Ident, Type)>,
    pub(crate) events: Vec<Decl>,
}

pub(crate) enum Item {
    Event(Decl),
    Class(Class),
}

pub(crate) struct Items(pub(crate) Vec<Item>);

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
pub(crate) fn take_attrs(attrs: &mut Vec<Attribute>) -> syn::Result<(bool, Option<LitStr>)> {
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

pub(crate) fn parse_args(input: ParseStream) -> syn::Result<Vec<(Ident, Type)>> {
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
    // The trace names a slice's length `_<name>_len` and an `Option`'s tag
    // `_<name>_tag`: a field of that name would be a second field of one
    // name, which no reader takes.
    let plain = |i: &Ident| i.unraw().to_string();
    for (n, _) in &args {
        let name = plain(n);
        for (m, _) in &args {
            let m = plain(m);
            if name == format!("_{m}_len") || name == format!("_{m}_tag") {
                return Err(syn::Error::new(
                    n.span(),
                    format!(
                        "`{name}` is the name the trace gives the length or tag of `{m}`: \
                         name this field otherwise"
                    ),
                ));
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
pub(crate) fn check_format(lit: &LitStr, args: &[(Ident, Type)]) -> syn::Result<()> {
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
pub(crate) fn check_name(lit: &LitStr) -> syn::Result<()> {
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

/// `Some("...")` or `None`, as tokens.
pub(crate) fn option_lit(lit: Option<&LitStr>) -> TokenStream2 {
    match lit {
        Some(f) => quote!(::core::option::Option::Some(#f)),
        None => quote!(::core::option::Option::None),
    }
}

/// The arguments' names and types, apart.
pub(crate) fn split_args(args: &[(Ident, Type)]) -> (Vec<&Ident>, Vec<&Type>) {
    args.iter().map(|(n, t)| (n, t)).unzip()
}

/// Field descriptions of `args`, as the elements of a `[FieldDesc]`.
pub(crate) fn field_descs(args: &[(Ident, Type)]) -> (Vec<TokenStream2>, TokenStream2) {
    let descs = args
        .iter()
        .map(|(n, t)| {
            // `r#type` is the field `type`.
            let s = n.unraw().to_string();
            quote!(::tape::FieldDesc { name: #s, describe: <#t as ::tape::Field>::describe })
        })
        .collect();
    let tys = args.iter().map(|(_, t)| t);
    (descs, quote!(0 #(+ <#tys as ::tape::Field>::FIXED_SIZE)*))
}

/// A class: a module with the fields, their fixed size and the one encoder
/// every event of the class calls; then each event.
pub(crate) fn expand_class(c: Class) -> TokenStream2 {
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
pub(crate) fn declaration_line(ident: &Ident) -> TokenStream2 {
    let span = ident.span();
    let line = span.start().line as u32;
    if line == 0 || span.file() != proc_macro2::Span::call_site().file() {
        return quote!(::core::line!());
    }
    quote!(#line)
}

/// One event: its emit function and its module. An event of a class calls
/// the class's encoder and shares its field descriptions.
pub(crate) fn expand(d: Decl, class: Option<&Ident>) -> TokenStream2 {
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
    let Emitting {
        record,
        cold,
        fields,
        fixed,
        class_name,
        callback,
    } = match class {
        Some(c) => of_class(c, &ident, &names),
        None => own(&ident, &args, &names, &tys),
    };
    let format = option_lit(format.as_ref());
    let fn_doc = format!("Emits tracepoint `{}`.", name.value());
    let mod_doc = format!(
        "The tracepoint object of [`{ident}()`]: `{}`.",
        name.value()
    );
    let register = format_ident!("__TAPE_REGISTER_{}", ident.to_string().to_uppercase());
    let line = declaration_line(&ident);
    let usdt = usdt_site(&name.value(), &args);
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
                loglevel: ::core::option::Option::None,
                emf_uri: ::core::option::Option::None,
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

            #usdt

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

/// What an event's emit function and module are made of: the calls that
/// record it and that take its cold path, its field descriptions and
/// fixed size, its class's name, and its probes' type (with, for an event
/// of its own, its encoder).
struct Emitting {
    record: TokenStream2,
    cold: TokenStream2,
    fields: TokenStream2,
    fixed: TokenStream2,
    class_name: TokenStream2,
    callback: TokenStream2,
}

/// An event of class `c`: the class's encoder, fields and probes' type.
fn of_class(c: &Ident, ident: &Ident, names: &[&Ident]) -> Emitting {
    Emitting {
        record: quote!(#c::emit(__tape_state, #(#names),*)),
        cold: quote!(#c::__hit(&#ident::TRACEPOINT, __tape_state, #(#names),*)),
        fields: quote!(&#c::FIELDS),
        fixed: quote!(#c::FIXED_SIZE),
        class_name: quote!(::core::option::Option::Some(#c::NAME)),
        callback: quote! {
            /// A typed probe of this tracepoint: the arguments by reference.
            pub type Callback = #c::Callback;
        },
    }
}

/// An event of its own: its encoder (`__record`, out of line, and its cold
/// half), its field descriptions and its hit function.
fn own(ident: &Ident, args: &[(Ident, Type)], names: &[&Ident], tys: &[&Type]) -> Emitting {
    let private = quote!(::tape::__private);
    let payload = payload_tuple(names);
    let borrowed = borrowed_tuple(names);
    let (descs, fixed) = field_descs(args);
    let hit = hit_fn(args, quote!(), quote!(&TRACEPOINT));
    Emitting {
        record: quote!(#ident::__record(__tape_state, #(#names),*)),
        cold: quote!(#ident::__hit(__tape_state, #(#names),*)),
        fields: quote!(&[#(#descs),*]),
        fixed,
        class_name: quote!(::core::option::Option::None),
        callback: quote! {
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
    }
}

/// The cold path of a hit (probes attached, a filter, a trigger): records
/// the event if enabled (through its filter, if it has one), fires its
/// triggers, then calls the probes (which a filter does not concern). `extra` and `tp`
/// are the class's tracepoint parameter and the tracepoint expression.
pub(crate) fn hit_fn(
    args: &[(Ident, Type)],
    extra: TokenStream2,
    tp: TokenStream2,
) -> TokenStream2 {
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
pub(crate) fn payload_tuple(names: &[&Ident]) -> TokenStream2 {
    let items: Vec<TokenStream2> = names.iter().map(|n| quote!(#n)).collect();
    payload_tuple_of(&items)
}

/// The payload of borrowed arguments, `(&a, &b, ..)`: what `try_emit`
/// encodes, leaving the arguments to the cold twin if it declines.
pub(crate) fn borrowed_tuple(names: &[&Ident]) -> TokenStream2 {
    let items: Vec<TokenStream2> = names.iter().map(|n| quote!(&#n)).collect();
    payload_tuple_of(&items)
}

pub(crate) fn payload_tuple_of(items: &[TokenStream2]) -> TokenStream2 {
    if items.len() <= 12 {
        return quote!((#(#items,)*));
    }
    let chunks: Vec<TokenStream2> = items.chunks(12).map(|c| quote!((#(#c,)*))).collect();
    quote!((#(#chunks,)*))
}

/// The error for an argument whose type is an owning container of the
/// standard library (`Vec<T>`, `Box<T>`, a map...), or `None`.
///
/// Such a type is never a field, and the compiler's own error (the
/// `Field` trait's note) would come once per use of the type in the
/// expansion (the description, the encoder, the cold path, the
/// triggers): four times the same text. Caught here by its name, it is
/// said once, at the type, with what to declare instead; the caller then
/// expands only the emit functions' signatures ([`placeholder`]), so that
/// the calls in the user's code raise nothing more. Other types that are
/// not fields (a struct without `#[derive(tape::Fields)]`) are left to
/// the compiler.
pub(crate) fn owned_container(ty: &Type) -> Option<syn::Error> {
    let Type::Path(p) = ty else {
        return None;
    };
    let last = p.path.segments.last()?;
    let inner = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a.args.first().map(|g| quote!(#g).to_string()),
        _ => None,
    };
    let inner = inner.unwrap_or_else(|| "T".to_owned());
    let shown = quote!(#ty)
        .to_string()
        .replace(" < ", "<")
        .replace(" >", ">")
        .replace(" ,", ",");
    let instead = match last.ident.to_string().as_str() {
        "Vec" | "VecDeque" | "LinkedList" | "BinaryHeap" => format!(
            "a {} is recorded as a slice; declare the field `&[{inner}]` and pass `&v` \
             (a VecDeque: `v.make_contiguous()`)",
            last.ident
        ),
        "Box" | "Rc" | "Arc" => format!(
            "declare the field as what the {} holds, by reference (`&{inner}`), and pass `&*v`",
            last.ident
        ),
        "HashMap" | "HashSet" | "BTreeMap" | "BTreeSet" => format!(
            "a {} is not recorded whole; record its length (`usize`), or one event per entry",
            last.ident
        ),
        _ => return None,
    };
    Some(syn::Error::new_spanned(
        ty,
        format!(
            "`{shown}` is not a tracepoint field type: {instead}\n\
             field types: u8..u64, i8..i64, usize, isize, f32, f64, bool, char, &str, \
             String, &CStr, CString, [u8; N], [T; N] and &[T] of those numbers, bool or Hex, \
             Option<T>, Ipv4Addr, Ipv6Addr, Duration, *const T, tape::Hex<T>, a \
             #[derive(tape::Enum)] enum, a tape::flags! type, &S for a #[derive(tape::Fields)] \
             struct S"
        ),
    ))
}

/// What stands for an item one of whose arguments is refused by
/// [`owned_container`]: its emit functions with their signatures and an
/// empty body (the user's calls type-check; nothing else is generated).
pub(crate) fn placeholder(item: &Item) -> TokenStream2 {
    let stub = |vis: &Visibility, ident: &Ident, args: &[(Ident, Type)]| {
        let (names, tys) = split_args(args);
        quote! {
            #[allow(unused_variables, clippy::too_many_arguments)]
            #vis fn #ident(#(#names: #tys),*) {}
        }
    };
    match item {
        Item::Event(d) => stub(&d.vis, &d.ident, &d.args),
        Item::Class(c) => c
            .events
            .iter()
            .map(|e| stub(&e.vis, &e.ident, &c.args))
            .collect(),
    }
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
