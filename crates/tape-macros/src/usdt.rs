//! SDT probes (`tape::usdt`): the ELF note, semaphore and probe site that
//! make a tracepoint a USDT probe, on Linux x86-64.
//!
//! The note is written by the assembler, beside the `nop` it names
//! (SystemTap SDT version 3, as `<sys/sdt.h>` writes it):
//!
//! ```text
//! .note.stapsdt   namesz=8 descsz type=3 "stapsdt\0"
//!                 desc: u64 pc (the nop)  u64 base (.stapsdt.base)
//!                       u64 semaphore     "provider\0" "probe\0" "8@%rdi ...\0"
//! .stapsdt.base   one byte, one per binary (a comdat group): tools compare
//!                 its address with `base` to find where the binary moved;
//!                 executable, so that the linker puts it in the segment
//!                 of the code (perf turns a probe's address into a file
//!                 offset with this section's offset: right only when the
//!                 two share a segment, as they do in small C programs)
//! .probes         the u16 semaphores
//! ```
//!
//! `tracepoint!` knows its names when it expands and writes them as
//! strings. `#[traced]` names a tracepoint from `module_path!()`, which
//! only the compiler knows: its note's strings are a constant the
//! compiler computes (`tape::__private::usdt::note_strings`), written as
//! `tape::__private::usdt::NOTE_WORDS` words of `const` operands, zeros after the
//! last string (readers stop at its NUL).

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::{Ident, Type};

/// The most arguments a probe site has (`tape::__private::usdt::MAX_ARGS`).
const MAX_ARGS: usize = 10;

/// The words of a note whose strings the compiler computes
/// (`tape::__private::usdt::NOTE_WORDS`).
const NOTE_WORDS: usize = 40;

/// The SDT provider and probe names of the tracepoint named `name`
/// (`tape::usdt`'s rule, also `tape::__private::usdt::note_strings`'): the first
/// part, and the rest with `.` as `_`; `tape` and the name for one part;
/// characters other than letters, digits and `_` as `_`, a `_` before a
/// leading digit.
fn usdt_names(name: &str) -> (String, String) {
    let ident = |s: &str| {
        let mut out: String = s
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
            out.insert(0, '_');
        }
        out
    };
    match name.split_once('.') {
        Some((provider, rest)) => (ident(provider), ident(rest)),
        None => ("tape".to_owned(), ident(name)),
    }
}

/// Whether an argument of type `ty` is a pointer and a length as a USDT
/// probe argument: `&str` and slices, as written.
fn pointer_and_length(ty: &Type) -> bool {
    let Type::Reference(r) = ty else {
        return false;
    };
    match &*r.elem {
        Type::Slice(_) => true,
        Type::Path(p) => p.path.is_ident("str"),
        _ => false,
    }
}

/// The assembler text of a probe site: the `nop`, and the note naming it
/// whose strings `strings` writes (directives), the semaphore as the
/// operand `{sema}`.
fn note(strings: &str) -> String {
    format!(
        r#"990: nop
.pushsection .note.stapsdt, "", "note"
.balign 4
.4byte 992f-991f, 994f-993f, 3
991: .asciz "stapsdt"
992: .balign 4
993: .8byte 990b
.8byte _.stapsdt.base
.8byte {{sema}}
{strings}
994: .balign 4
.popsection
.ifndef _.stapsdt.base
.pushsection .stapsdt.base, "axGR", "progbits", .stapsdt.base, comdat
.weak _.stapsdt.base
.hidden _.stapsdt.base
_.stapsdt.base: .space 1
.size _.stapsdt.base, 1
.popsection
.endif"#
    )
}

/// The semaphore of a probe site, which the note names.
fn semaphore() -> TokenStream2 {
    quote! {
        /// Incremented by the kernel while a uprobe is attached to the
        /// probe (the note names it).
        #[link_section = ".probes"]
        static SEMAPHORE: ::core::sync::atomic::AtomicU16 =
            ::core::sync::atomic::AtomicU16::new(0);
    }
}

/// The `asm!` of a probe site: `text` (the `nop` and its note), its named
/// `operands`, the semaphore, then its explicit-register `registers`.
fn site_asm(text: &str, operands: TokenStream2, registers: TokenStream2) -> TokenStream2 {
    quote! {
        // SAFETY: a `nop` and assembler directives that write an ELF
        // note and a section of their own: nothing is written, no
        // stack or flag touched at run time. (`readonly`: a tool
        // attached reads the memory the arguments point to.)
        unsafe {
            ::core::arch::asm!(
                #text,
                #operands
                sema = sym SEMAPHORE,
                #registers
                options(att_syntax, readonly, nostack, preserves_flags)
            );
        }
    }
}

/// A probe site's registration for the watcher (`tape::__private::usdt::UsdtSite`).
fn registration(
    tracepoint: TokenStream2,
    provider: TokenStream2,
    name: TokenStream2,
    attach: TokenStream2,
) -> TokenStream2 {
    quote! {
        #[::tape::__private::linkme::distributed_slice(::tape::__private::USDT_SITES)]
        #[linkme(crate = ::tape::__private::linkme)]
        static SITE: ::tape::__private::usdt::UsdtSite = ::tape::__private::usdt::UsdtSite {
            tracepoint: #tracepoint,
            semaphore: &SEMAPHORE,
            provider: #provider,
            name: #name,
            attach: #attach,
            on: ::core::sync::atomic::AtomicBool::new(false),
        };
    }
}

/// A `tracepoint!`'s SDT probe: its semaphore, the function whose `nop`
/// is the probe site (its note beside it), and its registration for the
/// watcher, which attaches the probe that calls it while a tool is
/// attached. Inside the tracepoint's module (`attach_with_priority`).
pub(crate) fn usdt_site(name: &str, args: &[(Ident, Type)]) -> TokenStream2 {
    let (provider, probe) = usdt_names(name);
    let (names, tys): (Vec<&Ident>, Vec<&Type>) = args.iter().map(|(n, t)| (n, t)).unzip();
    let mut values = Vec::new();
    let mut operands = Vec::new();
    let mut formats = Vec::new();
    for (n, ty) in names.iter().zip(&tys) {
        let parts: Vec<(TokenStream2, TokenStream2)> = if pointer_and_length(ty) {
            vec![
                (quote!(#n.as_ptr() as u64), quote!(8i32)),
                (quote!(#n.len() as u64), quote!(8i32)),
            ]
        } else {
            vec![(
                quote!(::tape::Field::usdt_arg(#n)),
                quote!(<#ty as ::tape::Field>::USDT_SIZE),
            )]
        };
        for (value, size) in parts {
            if values.len() == MAX_ARGS {
                break;
            }
            let k = values.len();
            let v = format_ident!("__tape_a{k}");
            let r = format_ident!("r{k}");
            let z = format_ident!("s{k}");
            values.push(quote!(let #v: u64 = #value;));
            operands.push(quote!(#r = in(reg) #v, #z = const #size,));
            formats.push(format!("{{s{k}}}@{{r{k}}}"));
        }
    }
    let text = note(&format!(
        ".asciz \"{provider}\"\n.asciz \"{probe}\"\n.asciz \"{}\"",
        formats.join(" ")
    ));
    let semaphore = semaphore();
    let asm = site_asm(&text, quote!(#(#operands)*), quote!());
    let registration = registration(
        quote!(&TRACEPOINT),
        quote!(#provider),
        quote!(#probe),
        quote!(|| attach_with_priority(::tape::__private::usdt::PRIORITY, |#(#names: &#tys),*| {
            fire(#(#names),*)
        })),
    );
    quote! {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        const _: () = {
            #semaphore

            /// The probe site: a `nop` with the arguments in registers,
            /// described by the note beside it.
            #[cold]
            #[inline(never)]
            #[allow(clippy::too_many_arguments, unused_variables)]
            fn fire(#(#names: &#tys),*) {
                #(#values)*
                #asm
            }

            #registration
        };
    }
}

/// The SDT probe of a tracepoint whose name only the compiler knows
/// (`#[traced]`): `tracepoint` is its static, `name` a constant `&str`
/// expression. Its arguments are the event's encoded payload, a pointer
/// and a size (`8@%rdi 8@%rsi`); an untyped probe calls the site.
pub(crate) fn usdt_site_named(tracepoint: &Ident, name: TokenStream2) -> TokenStream2 {
    let words: Vec<Ident> = (0..NOTE_WORDS).map(|k| format_ident!("w{k}")).collect();
    let operands = (0..NOTE_WORDS).map(|k| {
        let w = &words[k];
        quote!(#w = const ::tape::__private::usdt::note_word(&STRINGS, #k),)
    });
    // Exactly `{n}` bytes (readers such as bcc take a note whose strings
    // end where its description does, and no other): the whole words,
    // then the last one's bytes.
    let mut directives = String::new();
    for (k, w) in words.iter().enumerate() {
        let at = k * 8;
        directives.push_str(&format!(".if {{n}} >= {}\n.8byte {{{w}}}\n.else\n", at + 8));
        for j in 0..8 {
            directives.push_str(&format!(
                ".if {{n}} > {}\n.byte ({{{w}}} >> {}) & 0xff\n.endif\n",
                at + j,
                8 * j
            ));
        }
        directives.push_str(".endif\n");
    }
    let text = note(&directives);
    let semaphore = semaphore();
    let asm = site_asm(
        &text,
        quote!(#(#operands)* n = const ::tape::__private::usdt::note_len(&STRINGS),),
        quote!(in("rdi") payload.as_ptr(), in("rsi") payload.len(),),
    );
    let registration = registration(
        quote!(&#tracepoint),
        quote!(::tape::__private::usdt::note_part(&STRINGS, 0)),
        quote!(::tape::__private::usdt::note_part(&STRINGS, 1)),
        quote!(|| ::tape::probe::attach_to(&#tracepoint, ::tape::__private::usdt::PRIORITY, |e| {
            fire(e.payload())
        })),
    );
    quote! {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        const _: () = {
            const STRINGS: [u8; ::tape::__private::usdt::NOTE_BYTES] =
                ::tape::__private::usdt::note_strings(#name, "8@%rdi 8@%rsi");

            #semaphore

            /// The probe site: a `nop`, the payload's address and size in
            /// the registers the note names.
            #[cold]
            #[inline(never)]
            fn fire(payload: &[u8]) {
                #asm
            }

            #registration
        };
    }
}
