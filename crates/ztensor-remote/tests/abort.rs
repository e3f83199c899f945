//! `abort_unfinished` aborts every upload of the process, so its test has a process of its own
//! (in `tests/main.rs` it would abort the other tests' uploads).

// Test objects are small; their offsets always fit.
#![allow(clippy::cast_possible_truncation)]

#[path = "support/moto.rs"]
mod moto;
// Not every helper is used by this binary.
#[allow(dead_code)]
#[path = "support/remote.rs"]
mod remote;

use std::io::Write;

use remote::{options, pattern, read_back};

use ztensor_remote::{ErrorKind, Location, RemoteUpload};

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
    // What the CLI's signal thread calls before it exits (no destructor runs after).
    assert_eq!(ztensor_remote::abort_unfinished(), Vec::<String>::new());
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
