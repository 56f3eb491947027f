//! The disabled-cost contract, checked on the machine code: a disabled
//! tracepoint costs one load of its state word, a test and a branch, with
//! everything that records out of line.
//!
//! `examples/disabled_cost.rs` (built by `cargo test` beside this test, in
//! the same profile) has a disabled tracepoint in a loop and one in a
//! function of its own. This test disassembles them with `objdump`, follows
//! the path a disabled hit takes (the state word's sign bit, ACTIVE, clear)
//! and fails unless
//!
//! * the loop's iteration is the state load, its test and its branch plus
//!   the loop's own counter instructions (register-only);
//! * the function is, from entry to `ret`, the load, the test, the branch
//!   and register moves: no prologue (push, stack adjustment), no call, no
//!   memory access but the load;
//! * neither function holds recording code: no clock read (`rdtsc`), no
//!   thread-local access (`fs:`), and the enabled branch reaches the
//!   tracepoint's out-of-line `__record`.
//!
//! x86_64 only (the contract is checked where CI runs); unoptimised builds
//! are skipped with a notice, since the contract is about optimised code.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One disassembled instruction.
#[derive(Clone, Debug)]
struct Insn {
    addr: u64,
    mnemonic: String,
    operands: String,
    /// objdump's `# addr <symbol>` comment, if any.
    comment: String,
}

impl Insn {
    fn text(&self) -> String {
        format!(
            "{:x}: {} {} {}",
            self.addr, self.mnemonic, self.operands, self.comment
        )
    }
    fn is_jump(&self) -> bool {
        self.mnemonic.starts_with('j')
    }
    fn is_conditional(&self) -> bool {
        self.is_jump() && self.mnemonic != "jmp"
    }
    /// The target of a direct jump.
    fn target(&self) -> Option<u64> {
        let t = self.operands.split_whitespace().next()?;
        u64::from_str_radix(t, 16).ok()
    }
    fn touches_memory(&self) -> bool {
        self.operands.contains('[') && self.mnemonic != "lea" && self.mnemonic != "nop"
    }
}

/// The functions named in `names`, from `objdump -d` in Intel syntax.
fn disassemble(binary: &Path, names: &[&str]) -> BTreeMap<String, Vec<Insn>> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-M", "intel"])
        .arg(binary)
        .output()
        .expect("run objdump");
    assert!(
        out.status.success(),
        "objdump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut funcs = BTreeMap::new();
    let mut current: Option<(String, Vec<Insn>)> = None;
    for line in text.lines() {
        if let Some(name) = line
            .strip_suffix(">:")
            .and_then(|l| l.split_once(" <"))
            .map(|x| x.1)
        {
            if let Some((n, v)) = current.take() {
                funcs.insert(n, v);
            }
            if names.contains(&name) {
                current = Some((name.to_owned(), Vec::new()));
            }
            continue;
        }
        let Some((_, body)) = current.as_mut() else {
            continue;
        };
        let Some((addr, rest)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let (code, comment) = match rest.split_once('#') {
            Some((c, m)) => (c, m.trim()),
            None => (rest, ""),
        };
        let code = code.trim();
        let (mnemonic, operands) = code.split_once(char::is_whitespace).unwrap_or((code, ""));
        body.push(Insn {
            addr,
            mnemonic: mnemonic.to_owned(),
            operands: operands.trim().to_owned(),
            comment: comment.to_owned(),
        });
    }
    if let Some((n, v)) = current {
        funcs.insert(n, v);
    }
    funcs
}

/// How a function's disabled path runs: the instructions of the load's
/// test and branch identified, and the successors of each instruction
/// when the state word's sign bit is clear.
struct Flow<'a> {
    insns: &'a [Insn],
    index: BTreeMap<u64, usize>,
    load: usize,
    branch: usize,
    taken_when_disabled: bool,
}

impl<'a> Flow<'a> {
    fn new(name: &str, insns: &'a [Insn]) -> Flow<'a> {
        let index = insns.iter().enumerate().map(|(i, x)| (x.addr, i)).collect();
        let loads: Vec<usize> = (0..insns.len())
            .filter(|&i| insns[i].comment.contains("TRACEPOINT") && insns[i].touches_memory())
            .collect();
        assert_eq!(
            loads.len(),
            1,
            "{name}: expected one access to a TRACEPOINT state word, found {}",
            listing(insns, &loads)
        );
        let load = loads[0];
        let branch = (load + 1..insns.len())
            .find(|&i| insns[i].is_conditional())
            .unwrap_or_else(|| panic!("{name}: no branch after the state load"));
        // `test reg, reg; js/jns` or `cmp [word], 0; jl/jge/js/jns`: the
        // branch on the sign (ACTIVE, bit 63).
        let m = insns[branch].mnemonic.as_str();
        let taken_when_disabled = match m {
            "jns" | "jge" => true,
            "js" | "jl" => false,
            other => panic!("{name}: the state word's branch is `{other}`, not a sign test"),
        };
        Flow {
            insns,
            index,
            load,
            branch,
            taken_when_disabled,
        }
    }

    /// Successors of instruction `i` on the disabled path.
    fn next(&self, i: usize) -> Vec<usize> {
        let x = &self.insns[i];
        if x.mnemonic == "ret" {
            return vec![];
        }
        let target = x.target().and_then(|t| self.index.get(&t).copied());
        if i == self.branch {
            return if self.taken_when_disabled {
                target.into_iter().collect()
            } else {
                vec![i + 1]
            };
        }
        if x.mnemonic == "jmp" {
            return target.into_iter().collect();
        }
        if x.is_conditional() {
            return target.into_iter().chain([i + 1]).collect();
        }
        vec![i + 1]
    }

    /// Every instruction reachable from `from` on the disabled path.
    fn reachable(&self, from: usize, stop_at_load: bool) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(i) = todo.pop() {
            if i >= self.insns.len() || !seen.insert(i) {
                continue;
            }
            if stop_at_load && i == self.load && i != from {
                continue;
            }
            todo.extend(self.next(i));
        }
        seen
    }
}

fn listing(insns: &[Insn], idx: &[usize]) -> String {
    let lines: Vec<String> = idx.iter().map(|&i| insns[i].text()).collect();
    format!("{} instruction(s):\n  {}", idx.len(), lines.join("\n  "))
}

/// The tracepoint's own instructions on a path: the load, its test (the
/// instruction before the branch, unless the load compares) and the branch.
fn own(flow: &Flow<'_>) -> BTreeSet<usize> {
    let mut s = BTreeSet::from([flow.load, flow.branch]);
    if flow.branch > flow.load + 1 {
        s.insert(flow.branch - 1);
    }
    s
}

/// Fails on anything but register work in `path` besides the tracepoint's
/// own instructions.
fn check_register_only(name: &str, flow: &Flow<'_>, path: &BTreeSet<usize>, allowed: &[&str]) {
    let mine = own(flow);
    let (load, next) = (&flow.insns[flow.load], &flow.insns[flow.load + 1]);
    assert!(
        (flow.branch == flow.load + 1 && load.mnemonic == "cmp")
            || (flow.branch == flow.load + 2
                && load.mnemonic == "mov"
                && matches!(next.mnemonic.as_str(), "test" | "cmp")),
        "{name}: the state load is not followed by one test and the branch:\n{}",
        listing(flow.insns, &(flow.load..=flow.branch).collect::<Vec<_>>())
    );
    let bad: Vec<usize> = path
        .iter()
        .copied()
        .filter(|i| !mine.contains(i))
        .filter(|&i| {
            let x = &flow.insns[i];
            x.touches_memory() || !allowed.contains(&x.mnemonic.as_str())
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{name}: the disabled path does more than load, test and branch:\n{}\nwhole path: {}",
        listing(flow.insns, &bad),
        listing(flow.insns, &path.iter().copied().collect::<Vec<_>>())
    );
}

fn check_out_of_line(name: &str, insns: &[Insn]) {
    let inline: Vec<usize> = (0..insns.len())
        .filter(|&i| insns[i].mnemonic == "rdtsc" || insns[i].operands.contains("fs:"))
        .collect();
    assert!(
        inline.is_empty(),
        "{name}: recording code is inlined at the site:\n{}",
        listing(insns, &inline)
    );
    assert!(
        insns
            .iter()
            .any(|x| (x.mnemonic == "call" || x.is_jump()) && x.operands.contains("__record")),
        "{name}: no call to the tracepoint's out-of-line __record"
    );
}

/// The example binary `cargo test` built beside this test.
fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    if profile.file_name().is_some_and(|p| p == "debug") {
        common::skipped::skipped(
            "the disabled-cost contract (an unoptimised build: the contract is about optimised \
             code)",
            "run the tests with --profile opt",
        );
        return None;
    }
    let p = profile.join("examples").join("disabled_cost");
    assert!(
        p.exists(),
        "{} is missing: `cargo test` builds the examples before the tests",
        p.display()
    );
    Some(p)
}

fn objdump_available() -> bool {
    if Command::new("objdump").arg("--version").output().is_ok() {
        return true;
    }
    common::skipped::required(
        "the disabled-cost contract (objdump disassembles it)",
        "apt-get install binutils",
    );
    false
}

/// Register-only instructions a loop or a function may add around the
/// site: moves between registers (argument set-up hoisted above the
/// branch), the loop counter, `ret`.
const LOOP_WORK: &[&str] = &[
    "mov", "inc", "add", "sub", "dec", "cmp", "lea", "je", "jne", "jb", "jae", "jmp", "nop",
];

#[test]
#[cfg(target_arch = "x86_64")]
fn a_disabled_tracepoint_is_one_load_a_test_and_a_branch() {
    if !objdump_available() {
        return;
    }
    let Some(binary) = example() else { return };
    let funcs = disassemble(&binary, &["tape_contract_loop", "tape_contract_once"]);

    let insns = &funcs["tape_contract_loop"];
    let flow = Flow::new("tape_contract_loop", insns);
    let from_load = flow.reachable(flow.load, true);
    // The iteration: what lies on a path from the load back to it.
    let iteration: BTreeSet<usize> = from_load
        .iter()
        .copied()
        .filter(|&i| i == flow.load || flow.reachable(i, true).contains(&flow.load))
        .collect();
    assert!(
        iteration.len() > 3,
        "tape_contract_loop: the disabled path does not loop back to the load: {}",
        listing(insns, &from_load.iter().copied().collect::<Vec<_>>())
    );
    check_register_only("tape_contract_loop", &flow, &iteration, LOOP_WORK);
    check_out_of_line("tape_contract_loop", insns);

    let insns = &funcs["tape_contract_once"];
    let flow = Flow::new("tape_contract_once", insns);
    let whole = flow.reachable(0, false);
    check_register_only("tape_contract_once", &flow, &whole, &["mov", "ret", "nop"]);
    check_out_of_line("tape_contract_once", insns);
    let n = whole.len();
    let moves = whole
        .iter()
        .filter(|&&i| insns[i].mnemonic == "mov" && i != flow.load)
        .count();
    println!(
        "tape_contract_once, disabled: {n} instructions from entry to ret: load, test, branch, \
         ret and {moves} register move(s)"
    );
}
