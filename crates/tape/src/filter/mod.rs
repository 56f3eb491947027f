//! Event filters: the kernel's filter expressions (Documentation/trace/
//! events.rst §5), compiled against a tracepoint's fields and evaluated on
//! an event's encoded bytes.
//!
//! ```text
//! len > 1400 && ifname == "eth1"
//! op == Write || (hdr.len >= 512 && !(name ~ "tmp*"))
//! flags & 0x4
//! data[0] == 0x45 && common_thread ~ "worker-*"
//! ```
//!
//! * numbers (integers, floats, enums by value): `== != < <= > >=`, and
//!   `&` on integers (true when the bits are not all clear);
//! * strings (and `[u8; N]` text): `== !=` and `~`, a glob (`*`, `?`,
//!   `[abc]`, `[a-z]`, `[!x]`);
//! * enums, `bool` included: by label (`op == Write`, `ok == true`) or by
//!   value;
//! * struct members with dots (`hdr.len`), array and sequence elements with
//!   `[i]` (an index past the end compares false); an `Option` field
//!   compares its value when it is `Some`, and is false when `None`;
//! * the common fields `common_tid` (ftrace's `common_pid`: the kernel's
//!   task id is a thread's), `common_thread` (the thread's name; ftrace's
//!   `common_comm`) and `common_cpu`, where the events carry them
//!   ([`Commons`]: a tape trace read back has no CPU);
//! * `&&`, `||`, `!`, parentheses.
//!
//! [`Filter::new`] parses and type-checks once, against the fields as the
//! trace describes them; an error names the event and the field, and
//! draws a caret under the position, as the kernel's `error_log` does:
//!
//! ```text
//! filter for app.net.rx: no field `lenn` (fields: port, len, ifname, common_tid, common_thread, common_cpu)
//!   lenn > 1400
//!   ^
//! ```
//!
//! On a tracepoint ([`set`], `tape ctl PID filter`, `TAPE_FILTER`), an
//! event is encoded in place in the ring, tested, and only if it matches
//! read the clock for and published; a rejected event is counted per
//! tracepoint ([`rejected`]), not as a loss. An event that finds no room
//! (discard mode with the ring full, too big) is dropped and counted as
//! lost before the filter sees it, as ftrace reserves before it filters.
//!
//! [`Filter::matches`] walks the encoded payload to each field it compares
//! (fixed offsets summed, strings and sequences stepped over) with no
//! allocation, and never panics on bytes it cannot read: a comparison whose
//! field is not there is false.

mod capture;
mod compile;
mod eval;
mod installed;
mod layout;
mod parse;

pub use capture::Capture;
pub use compile::{duration_paths, pointed, Commons, Context, Filter};
pub use installed::{clear, emit_filtered, get, rejected, set, set_warned, Key};
pub use parse::{parse, Expr, Literal, Op, Step, SyntaxError, MAX_DEPTH, MAX_TERMS};
