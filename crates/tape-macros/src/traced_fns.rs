//! `#[traced]` and `#[notrace]`: the function and function_graph tracers'
//! compile-time half. A traced function's body is wrapped in its entry
//! and exit tracepoints (and an async function's polls); an `impl` or an
//! inline module traces each function in it, `#[notrace]` leaving one out;
//! `args(..)` and `ret` add the arguments and the return value.

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Ident, Type};

use crate::tracepoints::*;
use crate::usdt::usdt_site_named;

/// `#[tape::traced(args(a, b), ret)]`: the arguments recorded with the
/// entry (funcgraph-args), and the return value recorded before the exit
/// (funcgraph-retval).
#[derive(Default)]
pub(crate) struct TracedOptions {
    pub(crate) args: Vec<Ident>,
    pub(crate) ret: bool,
}

impl TracedOptions {
    pub(crate) fn is_empty(&self) -> bool {
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
pub(crate) fn take_traced_options(
    attrs: &mut Vec<Attribute>,
) -> syn::Result<Option<TracedOptions>> {
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

/// Whether `attrs` hold `#[notrace]` / `#[tape::notrace]` (removed if so).
pub(crate) fn take_notrace(attrs: &mut Vec<Attribute>) -> bool {
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
pub(crate) fn has_traced(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "traced")
    })
}

pub(crate) fn traced_item(item: syn::Item) -> syn::Result<syn::Item> {
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
pub(crate) fn impl_type_name(ty: &Type) -> syn::Result<String> {
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

/// The tracepoints of one traced function, named at compile time from
/// `module_path!()`, its type and its name.
struct Points<'a> {
    /// `::tape::__private::traced`.
    t: TokenStream2,
    ty: &'a str,
    func: String,
    line: TokenStream2,
    /// Its class (`fn_call`, or `fn_poll` for an async fn).
    class: TokenStream2,
}

impl Points<'_> {
    /// Tracepoint `tp`, named from the function and `suffix`: `before`
    /// (its own field list, if any) and `layout` (fields, size, format,
    /// class).
    fn named(
        &self,
        tp: &Ident,
        suffix: TokenStream2,
        before: TokenStream2,
        layout: TokenStream2,
    ) -> TokenStream2 {
        let Points {
            t, ty, func, line, ..
        } = self;
        let len = format_ident!("{tp}_LEN");
        let name = format_ident!("{tp}_NAME");
        let desc = format_ident!("{tp}_DESC");
        let usdt = usdt_site_named(tp, quote!(#t::as_str(&#name)));
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
                loglevel: ::core::option::Option::None,
                emf_uri: ::core::option::Option::None,
                #layout
            };
            static #tp: ::tape::Tracepoint = ::tape::Tracepoint::new(&#desc);
            #usdt
        }
    }

    /// One of the class's (fn_call, fn_poll).
    fn of_class(&self, suffix: TokenStream2, tp: &Ident) -> TokenStream2 {
        let class = &self.class;
        self.named(
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
    }

    /// One with its own fields, `fs`.
    fn with_fields(&self, tp: &Ident, suffix: TokenStream2, fs: &[(Ident, Type)]) -> TokenStream2 {
        let fields_static = format_ident!("{tp}_FIELDS");
        let (descs, fixed) = field_descs(fs);
        let n = descs.len();
        self.named(
            tp,
            suffix,
            quote!(static #fields_static: [::tape::FieldDesc; #n] = [#(#descs),*];),
            quote! {
                fields: &#fields_static,
                fixed_size: #fixed,
                format: ::core::option::Option::None,
                class: ::core::option::Option::None,
            },
        )
    }
}

/// A recorded type (`what`: the argument or the return value) must be
/// nameable in a static: no generic parameter (`generics`), no `Self`, no
/// `impl Trait`, no owned container.
fn check_nameable(ty: &Type, what: &str, generics: &[String]) -> syn::Result<()> {
    if let Some(e) = crate::tracepoints::owned_container(ty) {
        return Err(e);
    }
    fn walk(tt: proc_macro2::TokenTree, g: &[String]) -> Option<String> {
        match tt {
            proc_macro2::TokenTree::Ident(i)
                if i == "Self" || i == "impl" || g.iter().any(|n| i == n) =>
            {
                Some(i.to_string())
            }
            proc_macro2::TokenTree::Group(gr) => gr.stream().into_iter().find_map(|t| walk(t, g)),
            _ => None,
        }
    }
    match ty
        .to_token_stream()
        .into_iter()
        .find_map(|tt| walk(tt, generics))
    {
        Some(b) => Err(syn::Error::new_spanned(
            ty,
            format!(
                "{what}: a recorded type cannot use `{b}` (it is described once, in a \
                 static): record a value of a concrete type"
            ),
        )),
        None => Ok(()),
    }
}

/// The arguments `args(..)` chooses, by name, with their types.
fn recorded_args(
    sig: &syn::Signature,
    opts: &TracedOptions,
    generics: &[String],
) -> syn::Result<Vec<(Ident, Type)>> {
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
        check_nameable(&ty, &format!("args({name})"), generics)?;
        fields.push((name.clone(), ty));
    }
    Ok(fields)
}

/// The type `ret` records: the function's, unless it returns nothing.
fn returned_type(sig: &syn::Signature) -> syn::Result<Type> {
    match &sig.output {
        syn::ReturnType::Type(_, t) if !matches!(&**t, Type::Tuple(u) if u.elems.is_empty()) => {
            Ok((**t).clone())
        }
        _ => Err(syn::Error::new_spanned(
            &sig.ident,
            "ret: the function returns nothing to record",
        )),
    }
}

/// The body of a traced function: its two tracepoints (named at compile
/// time from `module_path!()`, `ty` and the function), then the call guard,
/// then the original body. An `async fn` records each poll of its body as
/// a call.
pub(crate) fn traced_block(
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
    let t = quote!(::tape::__private::traced);
    let private = quote!(::tape::__private);
    let points = Points {
        ty,
        func: sig.ident.to_string().trim_start_matches("r#").to_owned(),
        line: declaration_line(&sig.ident),
        // An async fn's polls are of the class with the call id.
        class: if sig.asyncness.is_some() {
            quote!(#t::fn_poll)
        } else {
            quote!(#t::fn_call)
        },
        t: t.clone(),
    };
    let entry = format_ident!("__TAPE_FN_ENTRY");
    let exit = format_ident!("__TAPE_FN_EXIT");
    let mut entry_point = points.of_class(quote!(#t::ENTRY), &entry);
    let exit_point = points.of_class(quote!(#t::EXIT), &exit);
    if let (Some(a), false) = (&sig.asyncness, opts.is_empty()) {
        return Err(syn::Error::new_spanned(
            a,
            "args(..) and ret are not recorded for an async fn (its polls carry the call id)",
        ));
    }
    let generics: Vec<String> = sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    let fields = recorded_args(sig, opts, &generics)?;
    let depth_field = (format_ident!("depth"), syn::parse_quote!(u32));
    let mut entry_fields = vec![depth_field];
    entry_fields.extend(fields.iter().cloned());
    let names: Vec<&Ident> = fields.iter().map(|(n, _)| n).collect();
    let enter = if fields.is_empty() {
        quote!(#t::enter(&#entry, &#exit))
    } else {
        entry_point = points.with_fields(&entry, quote!(#t::ENTRY), &entry_fields);
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
        let out_ty = returned_type(sig)?;
        check_nameable(&out_ty, "ret", &generics)?;
        let point = points.with_fields(
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
                let __tape_ret: #out_ty = (move || -> #out_ty #block)();
                __tape_call.returned(&#ret_tp, &(&__tape_ret,));
                __tape_ret
            },
        )
    } else {
        (
            quote!(),
            quote!(),
            // The body's statements, not the block: a block as the tail
            // of ours would be "unnecessary braces" for a one-line body.
            {
                let stmts = &block.stmts;
                quote! {
                    let __tape_call = #enter;
                    #(#stmts)*
                }
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
