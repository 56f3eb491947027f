//! `#[derive(Enum)]` and `#[derive(Fields)]`: a user enum as a CTF
//! enumeration of its integer, a user struct as a CTF struct of its
//! fields, each with its `tape::Field` and encoder impls.

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Ident, Type};

pub(crate) const REPRS: [&str; 10] = [
    "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize",
];

pub(crate) fn enum_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
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
            const USDT_SIZE: i32 = <#repr as ::tape::Field>::USDT_SIZE;
            #[inline(always)]
            fn usdt_arg(&self) -> u64 {
                ::tape::Field::usdt_arg(&::tape::field::Symbolic::repr(self))
            }
        }
    })
}

pub(crate) fn fields_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
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
