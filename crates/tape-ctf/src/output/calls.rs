//! A thread's traced calls as slices, for the exports that draw them
//! (Perfetto, Chrome JSON): entries wait on a stack until their exit is
//! read, so a slice is written whole and slices always nest, whatever was
//! lost around them.
//!
//! ```text
//! entry f depth 0        push f                      stack: f
//! entry g depth 1        push g                      stack: f g
//! exit  g depth 1        pop g: a slice (g)          stack: f
//! entry h depth 1        push h                      stack: f h
//! entry k depth 1        h has no exit (lost):       stack: f k
//!                        pop it as unexited
//! exit  f depth 0        k unexited, then f: a slice stack:
//! exit  q depth 0        no entry in the trace
//! ```
//!
//! An entry at depth `d` shows that every open call at `d` or deeper lost
//! its exit; an exit at `d` the same of those deeper than `d`; an exit
//! matches the innermost open call if it has the same depth and function.
//! At most [`MAX_OPEN`] calls are held: past it, the outermost is given
//! up as unexited. Arguments are the output's own encoding (bytes), kept
//! with the call; buffers are reused.

/// The most calls open at once on one thread.
pub const MAX_OPEN: usize = 1024;

/// A call whose entry was read, not yet its exit.
#[derive(Debug, Default)]
pub(crate) struct OpenCall {
    /// Its depth among the thread's traced calls.
    pub(crate) depth: u32,
    /// Its entry's time.
    pub(crate) ts: u64,
    /// The function (an output's id for its name).
    pub(crate) name: u32,
    /// An async poll's call id.
    pub(crate) call: Option<u64>,
    /// Its arguments, in the output's encoding.
    pub(crate) args: Vec<u8>,
    /// Its begin was written already (an output that writes a call when
    /// its exit comes may begin an enclosing one early: Perfetto's).
    pub(crate) begun: bool,
}

/// One thread's open calls and the return value read for the next exit.
#[derive(Default)]
pub(crate) struct CallStack {
    stack: Vec<OpenCall>,
    spare: Vec<Vec<u8>>,
    ret: Option<(u32, Vec<u8>)>,
}

impl CallStack {
    /// The innermost open call if an entry at `depth` shows it lost its
    /// exit (it is at `depth` or deeper), or, when the stack is full, the
    /// outermost: removed, for the caller to write and [`recycle`].
    ///
    /// [`recycle`]: CallStack::recycle
    pub(crate) fn unexited_before_entry(&mut self, depth: u32) -> Option<OpenCall> {
        if self.stack.last().is_some_and(|c| c.depth >= depth) {
            return self.stack.pop();
        }
        (self.stack.len() >= MAX_OPEN).then(|| self.stack.remove(0))
    }

    /// The innermost open call if an exit at `depth` shows it lost its
    /// own (it is deeper): removed.
    pub(crate) fn unexited_before_exit(&mut self, depth: u32) -> Option<OpenCall> {
        if self.stack.last().is_some_and(|c| c.depth > depth) {
            return self.stack.pop();
        }
        None
    }

    /// Opens a call (after the unexited ones were taken).
    pub(crate) fn push(&mut self, depth: u32, ts: u64, name: u32, call: Option<u64>, args: &[u8]) {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(args);
        self.stack.push(OpenCall {
            depth,
            ts,
            name,
            call,
            args: buf,
            begun: false,
        });
    }

    /// The calls open now, outermost first.
    pub(crate) fn open_mut(&mut self) -> &mut [OpenCall] {
        &mut self.stack
    }

    /// The call an exit of `name` at `depth` ends (after the unexited ones
    /// were taken): removed; `None` if its entry is not in the trace.
    pub(crate) fn exit(&mut self, depth: u32, name: u32) -> Option<OpenCall> {
        match self.stack.last() {
            Some(c) if c.depth == depth && c.name == name => self.stack.pop(),
            _ => None,
        }
    }

    /// Gives a written call's buffer back.
    pub(crate) fn recycle(&mut self, c: OpenCall) {
        self.spare.push(c.args);
    }

    /// Keeps the return value of `name` (read just before its exit).
    pub(crate) fn set_ret(&mut self, name: u32, args: &[u8]) {
        let mut buf = match self.ret.take() {
            Some((_, b)) => b,
            None => self.spare.pop().unwrap_or_default(),
        };
        buf.clear();
        buf.extend_from_slice(args);
        self.ret = Some((name, buf));
    }

    /// Appends the return value kept for `name` to `out` (and forgets any
    /// kept value: it belongs to the exit that follows it). Whether there
    /// was one.
    pub(crate) fn take_ret(&mut self, name: u32, out: &mut Vec<u8>) -> bool {
        match self.ret.take() {
            Some((n, buf)) => {
                let hit = n == name;
                if hit {
                    out.extend_from_slice(&buf);
                }
                self.spare.push(buf);
                hit
            }
            None => false,
        }
    }

    /// The calls still open, outermost first (removed).
    pub(crate) fn drain(&mut self) -> Vec<OpenCall> {
        std::mem::take(&mut self.stack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a script of (entry?, depth, name) over a stack: what each step
    /// gave, as text.
    fn run(steps: &[(bool, u32, u32)]) -> Vec<String> {
        let mut s = CallStack::default();
        let mut out = Vec::new();
        for (t, &(entry, depth, name)) in steps.iter().enumerate() {
            let t = t as u64;
            if entry {
                while let Some(c) = s.unexited_before_entry(depth) {
                    out.push(format!("no exit {}@{}", c.name, c.ts));
                    s.recycle(c);
                }
                s.push(depth, t, name, None, &[]);
            } else {
                while let Some(c) = s.unexited_before_exit(depth) {
                    out.push(format!("no exit {}@{}", c.name, c.ts));
                    s.recycle(c);
                }
                match s.exit(depth, name) {
                    Some(c) => {
                        out.push(format!("slice {} {}..{t}", c.name, c.ts));
                        s.recycle(c);
                    }
                    None => out.push(format!("no entry {name}@{t}")),
                }
            }
        }
        for c in s.drain() {
            out.push(format!("open {}@{}", c.name, c.ts));
        }
        out
    }

    #[test]
    fn calls_pair_up_and_what_is_lost_is_said() {
        // (script, what it gives): the module docs' example and its edges.
        type Script = &'static [(bool, u32, u32)];
        let cases: &[(Script, &[&str])] = &[
            (
                &[
                    (true, 0, 1),
                    (true, 1, 2),
                    (false, 1, 2),
                    (true, 1, 3),
                    (true, 1, 4),
                    (false, 0, 1),
                    (false, 0, 5),
                ],
                &[
                    "slice 2 1..2",
                    "no exit 3@3",
                    "no exit 4@4",
                    "slice 1 0..5",
                    "no entry 5@6",
                ],
            ),
            // A deeper entry lost: the exit of its child still pairs.
            (
                &[(true, 0, 1), (true, 2, 2), (false, 2, 2), (false, 0, 1)],
                &["slice 2 1..2", "slice 1 0..3"],
            ),
            // An exit of another function at the same depth: no entry.
            (
                &[(true, 0, 1), (false, 0, 2)],
                &["no entry 2@1", "open 1@0"],
            ),
            // Exits only (the start overwritten).
            (
                &[(false, 1, 1), (false, 0, 2)],
                &["no entry 1@0", "no entry 2@1"],
            ),
            // Open at the end, outermost first.
            (&[(true, 0, 1), (true, 1, 2)], &["open 1@0", "open 2@1"]),
        ];
        for (script, want) in cases {
            assert_eq!(run(script), *want, "{script:?}");
        }
    }

    #[test]
    fn a_full_stack_gives_up_its_outermost_call() {
        let steps: Vec<(bool, u32, u32)> = (0..=MAX_OPEN as u32).map(|d| (true, d, d)).collect();
        let out = run(&steps);
        assert_eq!(out[0], "no exit 0@0");
        assert_eq!(out.len(), 1 + MAX_OPEN);
        assert_eq!(out[1], "open 1@1");
    }

    #[test]
    fn a_return_value_goes_with_its_own_exit_only() {
        let mut s = CallStack::default();
        let mut out = Vec::new();
        s.set_ret(7, b"ret");
        assert!(!s.take_ret(8, &mut out));
        assert!(out.is_empty());
        // Forgotten once an exit was read.
        assert!(!s.take_ret(7, &mut out));
        s.set_ret(7, b"ret");
        assert!(s.take_ret(7, &mut out));
        assert_eq!(out, b"ret");
    }
}
