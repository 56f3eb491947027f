//! `printk!`: an ad-hoc print, formatted only when the trace is read (the
//! kernel's `trace_printk`, LTTng's `tracef`).
//!
//! ```
//! # fn main() -> Result<(), tape::Error> {
//! # tape::Config::new().enable("tape.printk").init()?.disarm();
//! let (queue, depth) = (3u32, 17usize);
//! tape::printk!("queue {} is {} deep, head {:#x}", queue, depth, 0xbeefu64);
//! # Ok(()) }
//! ```
//!
//! Each call site is a [`Site`] registered at link time (`linkme`) with its
//! format; the format id is the site's index, sorted by file, line and
//! format. An event records the id and the raw arguments, never text, so a
//! print costs what a tracepoint of the same arguments costs. The format is
//! checked against the arguments at compile time (by `format_args!`, never
//! run), and saved in the trace's `env` block (`tape_printk_<id>`, and
//! `tape_printk_at_<id>` = `file:line`) where `tape show --format ftrace`
//! applies it. Every print is one event, `tape.printk`, enabled and
//! disabled like any tracepoint:
//!
//! ```text
//! struct {
//!     uint32_t site;                                // the format id
//!     uint8_t _args_len;
//!     struct {
//!         enum : uint8_t { u64 = 0, i64 = 1, f64 = 2, str = 3 } kind;
//!         variant <kind> { uint64_t u64; int64_t i64; double f64; string str; } value;
//!     } args[_args_len];
//! }
//! ```
//!
//! Arguments are integers (recorded as `u64` or `i64`), `bool` (as 0 or 1),
//! `f32`/`f64` (as `f64`) and strings. At most 255 arguments; placeholders
//! are `{}` and `{:spec}` (`{:#x}`, `{:08}`, `{:.2}`).

use tape_ctf_model::{Encoding, Float, Integer, Type};

use crate::field::{enum_type, Encode, Field, Layout};

pub use crate::registry::{PrintkSite as Site, PRINTK_SITES as SITES};

tape_macros::tracepoint! {
    /// One `printk!`: its format id and raw arguments.
    pub fn printk_event(site: u32, args: Args<'_>) = "tape.printk";
}

/// Whether `tape.printk` is enabled (the whole cost of a disabled print).
#[inline(always)]
pub fn enabled() -> bool {
    printk_event::enabled()
}

/// Records one print (called by `printk!` once `enabled()`): one
/// out-of-line encoder for every site, as for a class.
#[inline(never)]
pub fn emit(site: &'static Site, args: &[Arg<'_>]) {
    let id = site.id();
    if id != crate::registry::NO_PRINTK_ID {
        printk_event(id, Args(args));
    }
}

/// One argument of a print, as recorded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    /// An unsigned integer or a bool.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A float.
    F64(f64),
    /// A string.
    Str(&'a str),
}

macro_rules! arg_from {
    ($($t:ty => $v:ident as $as:ty),*) => {$(
        impl From<&$t> for Arg<'_> {
            #[inline(always)]
            fn from(v: &$t) -> Self {
                Arg::$v(*v as $as)
            }
        }
    )*};
}

arg_from! {
    u8 => U64 as u64, u16 => U64 as u64, u32 => U64 as u64, u64 => U64 as u64,
    usize => U64 as u64, i8 => I64 as i64, i16 => I64 as i64, i32 => I64 as i64,
    i64 => I64 as i64, isize => I64 as i64, f32 => F64 as f64, f64 => F64 as f64
}

impl From<&bool> for Arg<'_> {
    #[inline(always)]
    fn from(v: &bool) -> Self {
        Arg::U64(u64::from(*v))
    }
}

impl<'a> From<&'a &str> for Arg<'a> {
    #[inline(always)]
    fn from(v: &'a &str) -> Self {
        Arg::Str(v)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    #[inline(always)]
    fn from(v: &'a String) -> Self {
        Arg::Str(v)
    }
}

/// The arguments of a print, as one field.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a>(pub &'a [Arg<'a>]);

/// At most this many arguments are recorded (the length is a `u8`).
const MAX_ARGS: usize = 255;

// SAFETY: writes the u8 count, then per argument one kind byte and 8 bytes
// or the string up to its first NUL and a NUL: at most max_size().
unsafe impl Encode for Args<'_> {
    #[inline]
    fn max_size(&self) -> usize {
        1 + self.0[..self.0.len().min(MAX_ARGS)]
            .iter()
            .map(|a| match a {
                Arg::Str(s) => 1 + s.max_size(),
                _ => 9,
            })
            .sum::<usize>()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> *mut u8 {
        let args = &self.0[..self.0.len().min(MAX_ARGS)];
        // SAFETY: each write is within the bound max_size() adds up.
        unsafe {
            let mut p = (args.len() as u8).encode(dst);
            for a in args {
                p = match a {
                    Arg::U64(v) => v.encode(0u8.encode(p)),
                    Arg::I64(v) => v.encode(1u8.encode(p)),
                    Arg::F64(v) => v.encode(2u8.encode(p)),
                    Arg::Str(s) => s.encode(3u8.encode(p)),
                };
            }
            p
        }
    }
}

impl Field for Args<'_> {
    const FIXED_SIZE: usize = 1;
    fn describe(name: &str, out: &mut Layout) {
        let len = format!("_{name}_len");
        out.push(&len, Type::Integer(Integer::unsigned(8)));
        let kind = enum_type(
            Integer::unsigned(8),
            &[("u64", 0), ("i64", 1), ("f64", 2), ("str", 3)],
        );
        let options = vec![
            tape_ctf_model::Field::new("u64", Type::Integer(Integer::unsigned(64))),
            tape_ctf_model::Field::new("i64", Type::Integer(Integer::signed(64))),
            tape_ctf_model::Field::new("f64", Type::Float(Float::binary64())),
            tape_ctf_model::Field::new("str", Type::String(Encoding::Utf8)),
        ];
        let arg = crate::field::tagged_union(kind, options);
        out.push(
            name,
            Type::Sequence {
                element: Box::new(Type::Struct(arg)),
                length: tape_ctf_model::escape_name(&len),
            },
        );
    }
}

/// Records a print whose format is applied only when the trace is read:
/// `tape::printk!("queue {} is {} deep", q, depth)`. See the guide's first chapter (`docs/01-instrument.md`).
///
/// A format that does not match its arguments does not compile:
///
/// ```compile_fail
/// tape::printk!("{} and {}", 1u32);
/// ```
#[macro_export]
macro_rules! printk {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        static SITE: $crate::__private::printk::Site =
            $crate::__private::printk::Site::new($fmt, ::core::file!(), ::core::line!());
        #[$crate::__private::linkme::distributed_slice($crate::__private::printk::SITES)]
        #[linkme(crate = $crate::__private::linkme)]
        static REGISTER: &$crate::__private::printk::Site = &SITE;
        if false {
            // The format checked against the arguments, at compile time only.
            let _ = ::core::format_args!($fmt $(, $arg)*);
        }
        if $crate::__private::printk::enabled() {
            $crate::__private::printk::emit(&SITE, &[$($crate::__private::printk::Arg::from(&$arg)),*]);
        }
    }};
}
