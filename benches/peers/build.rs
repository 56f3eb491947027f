//! Builds the LTTng-UST tracepoint provider (`lttng/`) when
//! liblttng-ust-dev is installed (`pkg-config lttng-ust`), and says so with
//! the `lttng_ust` cfg; without it the LTTng rows print a notice.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(lttng_ust)");
    println!("cargo::rerun-if-changed=lttng/tp.h");
    println!("cargo::rerun-if-changed=lttng/tp.c");
    let libs = std::process::Command::new("pkg-config")
        .args(["--cflags", "--libs", "lttng-ust"])
        .output();
    let Some(out) = libs.ok().filter(|o| o.status.success()) else {
        println!(
            "cargo::warning=liblttng-ust-dev is not installed: the LTTng-UST rows are left out"
        );
        return;
    };
    let flags = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut build = cc::Build::new();
    build.file("lttng/tp.c").include("lttng").opt_level(2);
    for f in flags.split_whitespace() {
        if let Some(dir) = f.strip_prefix("-I") {
            build.include(dir);
        }
    }
    build.compile("tape_peers_lttng");
    for f in flags.split_whitespace() {
        if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo::rustc-link-lib={lib}");
        }
    }
    // The provider's tracepoints are found through the `__tracepoints_ptrs`
    // section (its `__start_`/`__stop_` symbols); rustc links with
    // `--gc-sections`, which drops that section unless told to keep the
    // sections those symbols name (without this, LTTng registers 0
    // tracepoints of the provider and records nothing).
    println!("cargo::rustc-link-arg-benches=-Wl,-z,nostart-stop-gc");
    println!("cargo::rustc-cfg=lttng_ust");
}
