//! `abort_unfinished` aborts every upload of the process, so its test has a process of its own
//! (in `tests/main.rs` it would abort the other tests' uploads).

// Test objects are small; their offsets always fit.
#![allow(clippy::cast_possible_truncation)]

#[path = "support/moto.rs"]
mod moto;
#[path = "support/proxy.rs"]
mod proxy;
// Not every helper is used by this binary.
#[allow(dead_code)]
#[path = "support/remote.rs"]
mod remote;

use std::io::Write;

use remote::{options, options_at, pattern, read_back};

use ztensor_remote::{ErrorKind, Location, Provisional, RemoteUpload};

#[test]
fn a_signal_handler_aborts_every_running_upload() {
    let Some(moto) = moto::start("a_signal_handler_aborts_every_running_upload") else { return };
    moto.bucket("stopped");
    let part = pattern(ztensor_remote::PART_LEN + 1, 5);
    let mut ups: Vec<RemoteUpload> = ["a", "b"]
        .iter()
        .map(|key| {
            let at = Location::parse(&format!("s3://stopped/{key}.zt")).unwrap();
            let mut up = RemoteUpload::create(&at, &options(&moto)).unwrap();
            up.write_all(&part).unwrap();
            up
        })
        .collect();
    assert_eq!(moto.uploads("stopped").matches("<UploadId>").count(), 2);
    // Two more whose completing requests reach the server before the signal, their answers
    // slow to come back: one an object on its own, one held by a write (a shard).
    let proxy = proxy::start(moto.endpoint.trim_start_matches("http://"));
    proxy.inject(&[proxy::Fault::SlowCompletion, proxy::Fault::SlowCompletion]);
    let held = Provisional::new();
    let completing: Vec<_> = ["c", "d"]
        .iter()
        .map(|key| {
            let at = Location::parse(&format!("s3://stopped/{key}.zt")).unwrap();
            let opts = options_at(&proxy.endpoint);
            if *key == "c" {
                held.hold(&at, &opts);
            }
            let mut up = RemoteUpload::create(&at, &opts).unwrap();
            up.write_all(&part).unwrap();
            std::thread::spawn(move || up.finish().map(|_| ()).map_err(|e| e.to_string()))
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while proxy.applied.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(proxy.applied.lock().unwrap().len(), 2, "the completions were not sent");
    // Both reached the server and landed; their answers are on their way.
    std::thread::sleep(std::time::Duration::from_millis(proxy::SLOW_COMPLETION_MS / 3));
    // What the CLI's signal thread calls before it exits (no destructor runs after). The
    // uploads completing are not aborted (that abort would fail: they landed) but waited for;
    // the others are aborted.
    assert_eq!(ztensor_remote::abort_unfinished(), Vec::<String>::new());
    for thread in completing {
        assert_eq!(thread.join().unwrap(), Ok(()));
    }
    // The object on its own stands, whole; the held one was deleted once it had landed.
    assert!(read_back(&moto, "s3://stopped/d.zt") == Ok(part.clone()));
    assert_eq!(read_back(&moto, "s3://stopped/c.zt"), Err(ErrorKind::NotFound));
    drop(held);
    assert!(!moto.uploads("stopped").contains("<UploadId>"), "{}", moto.uploads("stopped"));
    // Nothing is left to abort, and the uploads themselves can no longer complete.
    assert!(ztensor_remote::abort_unfinished().is_empty());
    let last = ups.pop().unwrap();
    assert!(last.finish().is_err());
    drop(ups);
    for key in ["a", "b"] {
        let url = format!("s3://stopped/{key}.zt");
        assert_eq!(read_back(&moto, &url), Err(ErrorKind::NotFound));
    }
}
