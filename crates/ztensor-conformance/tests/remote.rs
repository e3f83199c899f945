//! The `remote` fuzz target's transport: scripted answers reach the object-storage client as a
//! server's would, so what the fuzzer writes is what the client reads.

use ztensor_remote::{Location, RemoteObject, RemoteOptions};
use ztensor_source::ReadAt;

/// One answer in the script's form: status index, header flags, each header (length byte,
/// value), body (two-byte length, bytes).
fn answer(status: u8, headers: &[(u8, &str)], body: &[u8]) -> Vec<u8> {
    let flags = headers.iter().fold(0u8, |f, (bit, _)| f | (1 << bit));
    let mut out = vec![status, flags];
    let mut sorted = headers.to_vec();
    sorted.sort_by_key(|(bit, _)| *bit);
    for (_, value) in sorted {
        out.push(u8::try_from(value.len()).unwrap());
        out.extend_from_slice(value.as_bytes());
    }
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_le_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn a_scripted_answer_is_read_as_a_servers() {
    let object: Vec<u8> = (0..100u8).collect();
    // 206 (index 1) with content-length, content-range, etag and last-modified.
    let script = answer(
        1,
        &[(0, "100"), (1, "bytes 0-99/100"), (2, "\"v1\""), (3, "Mon, 07 Dec 2026 00:00:00 GMT")],
        &object,
    );
    let scripted = ztensor_remote::script_answers(&script);
    let options = RemoteOptions {
        unsigned: true,
        settings: vec![
            ("aws_endpoint".to_owned(), "http://127.0.0.1:9".to_owned()),
            ("aws_region".to_owned(), "us-east-1".to_owned()),
        ],
        ..RemoteOptions::default()
    };
    let location = Location::parse("s3://fuzz/scripted.zt").unwrap();
    let opened = RemoteObject::open(&location, &options);
    // A second object: the script is spent, so it is not found (404).
    let missing = RemoteObject::open(&Location::parse("s3://fuzz/other.zt").unwrap(), &options);
    drop(scripted);
    let opened = opened.unwrap();
    assert_eq!(opened.len(), 100);
    let mut buf = [0u8; 20];
    opened.read_exact_at(40, &mut buf).unwrap();
    assert_eq!(&buf[..], &object[40..60]);
    let missing = missing.unwrap_err();
    assert_eq!(*missing.kind(), ztensor_remote::ErrorKind::NotFound, "{missing}");
    // The target's body returns on a whole script and on none.
    ztensor_conformance::fuzz::remote(&script);
    ztensor_conformance::fuzz::remote(b"");
}
