//! A tracepoint registered at run time after the shared rings exist is in
//! their metadata template too (what `tape recover`, `record` and `pipe`
//! decode the rings with), so a recovery can read its events.

use tape::{FieldDesc, TracepointDesc};

tape::tracepoint! {
    pub fn linked(v: u64) = "reg2.linked";
}

fn templates(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            templates(&p, out);
        } else if p.file_name().is_some_and(|n| n == "metadata-template") {
            out.push(p);
        }
    }
}

#[test]
fn a_late_tracepoint_is_in_the_shared_rings_metadata() {
    let base = std::env::temp_dir().join(format!("tape-registered-shm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    // One test in this binary: no other thread reads the environment.
    std::env::set_var("TAPE_SHM_DIR", &base);
    let _g = tape::Config::new()
        .dir(base.join("traces"))
        .control(false)
        .shared_rings(true)
        .enable("reg2.linked")
        .init()
        .expect("init");
    _g.disarm();
    linked(1); // this thread's ring, shared: the template is written
    let mut found = Vec::new();
    templates(&base, &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    let before = std::fs::read_to_string(&found[0]).unwrap();
    assert!(before.contains("reg2.linked") && !before.contains("dyn2.late"));

    static FIELDS: [FieldDesc; 1] = [FieldDesc {
        name: "v",
        describe: <u64 as tape::Field>::describe,
    }];
    static DESC: TracepointDesc = TracepointDesc {
        name: "dyn2.late",
        file: file!(),
        line: line!(),
        module_path: module_path!(),
        fast_path: false,
        fields: &FIELDS,
        fixed_size: 8,
        format: None,
        class: None,
        loglevel: None,
        emf_uri: None,
    };
    let tp = tape::registry::register(&DESC).unwrap();
    let after = std::fs::read_to_string(&found[0]).unwrap();
    assert!(after.contains("dyn2.late"), "{after}");
    // Its id is the one the template gives it.
    let id = tp.id();
    let at = after.find("\"dyn2.late\"").unwrap();
    let class = &after[after[..at].rfind("event {").unwrap()..];
    let class = &class[..class.find("};").unwrap()];
    assert!(class.contains(&format!("id = {id};")), "{class}");

    let _ = std::fs::remove_dir_all(&base);
}
