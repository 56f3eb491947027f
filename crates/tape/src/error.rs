//! The control plane's error type. The emit path has none: it counts.

use std::fmt;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No tracepoint has this name.
    NotFound,
    /// A glob or regex pattern does not parse.
    BadPattern,
    /// Two tracepoints share a name.
    Duplicate,
    /// A configuration value (environment variable or builder) is invalid.
    Config,
    /// Writing a trace failed (permission, disk full, ...).
    Io,
    /// An event's fields could not be decoded (an untyped probe's view).
    Decode,
    /// A control command is malformed (unknown, missing or extra words).
    Command,
    /// A filter expression does not parse or does not fit its event's fields.
    BadFilter,
    /// A trigger does not parse, does not fit its event, or is already set.
    BadTrigger,
    /// A name or text could not be in the trace's description (a NUL in
    /// a tracepoint's name or place, given at run time): refused, so that
    /// nothing is written that readers would refuse.
    Metadata,
    /// A process cannot be controlled: it does not exist, belongs to
    /// another user, has no control socket, or the connection failed.
    Control,
}

/// An error of the control plane: a kind and a message that names the
/// input and, where it applies, the position in it.
///
/// `Debug` prints the message too (`{:#?}` the fields), so that
/// `fn main() -> Result<(), tape::Error>` ends with `Error: <message>`,
/// not with the struct.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message (also given by `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return f
                .debug_struct("Error")
                .field("kind", &self.kind)
                .field("message", &self.message)
                .finish();
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
