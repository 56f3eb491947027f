//! A save that cannot be written returns a clear error naming the path,
//! leaves no half-written trace behind, and the program goes on: events
//! keep being recorded and the next save works.

mod common;

use std::path::Path;

tape::tracepoint! {
    pub fn tick(n: u64, text: &str) = "test.save.tick";
}

fn leftovers(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect()
        })
        .unwrap_or_default()
}

fn set_file_size_limit(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: valid rlimit pointer; ignoring SIGXFSZ makes an oversized
    // write fail with EFBIG instead of killing the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

/// All cases in one test: the file size limit is process-wide.
#[test]
fn failed_saves_are_clean_errors_and_the_program_goes_on() {
    let _g = tape::Config::new()
        .enable("test.save.*")
        .init()
        .expect("init");
    _g.disarm();
    let text = "x".repeat(100);
    for n in 0..1000 {
        tick(n, &text);
    }
    let base = common::trace_path("errors");
    std::fs::create_dir_all(&base).unwrap();

    // 1. The parent is a regular file.
    let file = base.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let e = tape::save_to(file.join("trace")).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Io);
    assert!(e.message().contains(&*file.to_string_lossy()), "{e}");

    // 2. A directory nobody may write, not even root.
    let e = tape::save_to("/proc/tape-trace").unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Io);
    assert!(e.message().contains("/proc"), "{e}");

    // 3. The target exists.
    let e = tape::save_to(&base).unwrap_err();
    assert_eq!(e.kind(), tape::ErrorKind::Io);
    assert!(e.message().contains("already exists"), "{e}");

    // 4. The disk fills up mid-save (a file size limit: writes past it fail
    //    with EFBIG, as they would with ENOSPC).
    let target = base.join("full");
    set_file_size_limit(4096);
    let e = tape::save_to(&target).unwrap_err();
    set_file_size_limit(libc::RLIM_INFINITY);
    assert_eq!(e.kind(), tape::ErrorKind::Io);
    assert!(e.message().contains(&*base.to_string_lossy()), "{e}");
    assert!(
        !target.exists(),
        "half a trace was left at {}",
        target.display()
    );
    assert_eq!(leftovers(&base), Vec::<String>::new());

    // The program goes on: more events, and a save that works.
    for n in 1000..1010 {
        tick(n, "after");
    }
    let ok = base.join("ok");
    tape::save_to(&ok).expect("save after failures");
    if let Some(out) = common::read_clean(common::Reader::Bt2, &ok) {
        let evs = common::events(&out);
        let last = evs
            .iter()
            .rfind(|e| e.name == "test.save.tick")
            .expect("events");
        assert_eq!(common::field_u64(&last.payload, "n"), 1009);
        assert_eq!(
            evs.iter().filter(|e| e.name == "test.save.tick").count(),
            1010
        );
    }
}
