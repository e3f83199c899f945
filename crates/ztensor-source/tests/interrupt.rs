//! `interrupt`: the one registry every writer of the process undoes through. In a process of
//! its own, as an interrupted process stops writing for good.

use std::io::Write;
use std::sync::Mutex;

use ztensor_source::AtomicFile;

/// The layers' undoing, in the order it ran.
static RAN: Mutex<Vec<&str>> = Mutex::new(Vec::new());

fn ran(what: &'static str) {
    RAN.lock().unwrap().push(what);
}

#[test]
fn temporaries_go_then_each_layer_undoes_once_in_the_order_added() {
    let d = ztensor_testkit::scratch("io-interrupt");
    let target = d.join("out.zt");
    std::fs::write(&target, b"the user's file").unwrap();
    let mut half = AtomicFile::create(&target).unwrap();
    half.write_all(b"half a new file").unwrap();
    ztensor_source::on_interrupt("shards", || {
        ran("shards");
        Vec::new()
    });
    ztensor_source::on_interrupt("uploads", || {
        ran("uploads");
        vec!["s3://bucket/x.zt".to_owned()]
    });
    // The same layer added again (each of its writes adds it as it begins): once.
    ztensor_source::on_interrupt("shards", || {
        ran("shards again");
        Vec::new()
    });
    assert_eq!(ztensor_source::interrupt(), ["s3://bucket/x.zt"]);
    assert_eq!(*RAN.lock().unwrap(), ["shards", "uploads"]);
    // The temporary file is gone, the target as it was; no write starts or finishes after.
    let names: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["out.zt"]);
    assert_eq!(std::fs::read(&target).unwrap(), b"the user's file");
    assert!(half.persist().is_err());
    assert!(AtomicFile::create(d.join("later.zt")).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"the user's file");
}
