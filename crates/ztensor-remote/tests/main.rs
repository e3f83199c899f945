//! Reads and writes against a real S3 server (moto's), started by the test.

// Test objects are small; their offsets always fit.
#![allow(clippy::cast_possible_truncation)]

mod hostile;
#[path = "support/liar.rs"]
mod liar;
#[path = "support/moto.rs"]
mod moto;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/remote.rs"]
mod remote;

use std::io::Write;

use remote::{options, options_at, pattern, read_back};

use ztensor_remote::{ErrorKind, Expected, Location, RemoteObject, RemoteOptions, RemoteUpload};
use ztensor_source::ReadAt;

/// Writes `bytes` at `url` (a signed PUT: moto lets no anonymous request replace an object).
fn put(moto: &moto::Moto, url: &str, bytes: &[u8]) {
    let mut up = RemoteUpload::create(&Location::parse(url).unwrap(), &options(moto)).unwrap();
    up.write_all(bytes).unwrap();
    up.finish().unwrap();
}

#[test]
fn ranged_reads_are_cached_at_both_ends_and_exact() {
    let Some(moto) = moto::start("ranged_reads_are_cached_at_both_ends_and_exact") else { return };
    moto.bucket("reads");
    let data = pattern(3 << 20, 7);
    put(&moto, "s3://reads/big.bin", &data);
    let at = Location::parse("s3://reads/big.bin").unwrap();
    let object = RemoteObject::open(&at, &options(&moto)).unwrap();
    assert_eq!(object.len(), data.len() as u64);
    assert!(object.e_tag().is_some());
    // The open: one request for the size, version and the last bytes.
    let opened = object.transfer();
    assert_eq!((opened.requests, opened.bytes), (1, ztensor_remote::SUFFIX_LEN));
    // Many small reads at the end cost nothing more; at the start, one block.
    let mut buf = [0u8; 100];
    for back in [8u64, 100, 4000, 150_000] {
        let at = data.len() as u64 - back;
        object.read_exact_at(at, &mut buf[..8]).unwrap();
        assert_eq!(&buf[..8], &data[at as usize..at as usize + 8]);
    }
    assert_eq!(object.transfer().requests, 1);
    for offset in [0u64, 8, 512, 60_000] {
        object.read_exact_at(offset, &mut buf).unwrap();
        assert_eq!(&buf[..], &data[offset as usize..offset as usize + 100]);
    }
    let small = object.transfer();
    assert_eq!(small.requests, 2, "{small:?}");
    assert!(small.bytes <= 256 << 10, "{small:?}");
    // A large read goes straight to the server, exact.
    let mut big = vec![0u8; 2 << 20];
    object.read_exact_at(500_000, &mut big).unwrap();
    assert!(big == data[500_000..500_000 + (2 << 20)]);
    // Past the end: an error, no request.
    let before = object.transfer().requests;
    let e = object.read_exact_at(data.len() as u64 - 4, &mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_eq!(object.transfer().requests, before);
}

#[test]
fn a_small_object_is_read_whole_by_the_open() {
    let Some(moto) = moto::start("a_small_object_is_read_whole_by_the_open") else { return };
    moto.bucket("small");
    let data = pattern(10_000, 3);
    put(&moto, "s3://small/s.bin", &data);
    let object =
        RemoteObject::open(&Location::parse("s3://small/s.bin").unwrap(), &options(&moto)).unwrap();
    let mut all = vec![0u8; data.len()];
    object.read_exact_at(0, &mut all).unwrap();
    assert_eq!(all, data);
    assert_eq!(object.transfer(), ztensor_remote::Transfer { requests: 1, bytes: 10_000 });
}

#[test]
fn missing_objects_and_buckets_are_named() {
    let Some(moto) = moto::start("missing_objects_and_buckets_are_named") else { return };
    moto.bucket("present");
    for url in ["s3://present/absent.zt", "s3://absent-bucket/model.zt"] {
        let e = RemoteObject::open(&Location::parse(url).unwrap(), &options(&moto)).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::NotFound, "{e}");
        assert!(e.to_string().starts_with(url), "{e}");
    }
}

#[test]
fn an_object_replaced_while_read_is_refused() {
    let Some(moto) = moto::start("an_object_replaced_while_read_is_refused") else { return };
    moto.bucket("moving");
    put(&moto, "s3://moving/m.bin", &pattern(1 << 20, 1));
    let object =
        RemoteObject::open(&Location::parse("s3://moving/m.bin").unwrap(), &options(&moto))
            .unwrap();
    put(&moto, "s3://moving/m.bin", &pattern(1 << 20, 2));
    let mut buf = [0u8; 16];
    let e = object.read_exact_at(0, &mut buf).unwrap_err();
    let inner = e.get_ref().and_then(|e| e.downcast_ref::<ztensor_remote::Error>()).unwrap();
    assert_eq!(inner.kind(), &ErrorKind::Changed, "{e}");
    assert!(e.to_string().contains("s3://moving/m.bin"), "{e}");
}

#[test]
fn uploads_publish_on_finish_and_abort_without_it() {
    let Some(moto) = moto::start("uploads_publish_on_finish_and_abort_without_it") else { return };
    moto.bucket("out");
    // Small: one PUT at finish, nothing before.
    let small = pattern(1000, 9);
    let mut up =
        RemoteUpload::create(&Location::parse("s3://out/small.bin").unwrap(), &options(&moto))
            .unwrap();
    up.write_all(&small).unwrap();
    assert_eq!(up.transfer().requests, 0);
    assert_eq!(read_back(&moto, "s3://out/small.bin"), Err(ErrorKind::NotFound));
    assert_eq!(up.finish().unwrap().requests, 1);
    assert_eq!(read_back(&moto, "s3://out/small.bin"), Ok(small));
    // Large: a multipart upload of three parts, in writes that straddle them.
    let large = pattern(2 * ztensor_remote::PART_LEN + 12_345, 4);
    let mut up =
        RemoteUpload::create(&Location::parse("s3://out/large.bin").unwrap(), &options(&moto))
            .unwrap();
    for piece in large.chunks(1_000_003) {
        up.write_all(piece).unwrap();
    }
    assert_eq!(read_back(&moto, "s3://out/large.bin"), Err(ErrorKind::NotFound));
    up.finish().unwrap();
    assert!(read_back(&moto, "s3://out/large.bin") == Ok(large.clone()));
    // Dropped unfinished: aborted, no object, no upload left.
    let mut up =
        RemoteUpload::create(&Location::parse("s3://out/dropped.bin").unwrap(), &options(&moto))
            .unwrap();
    up.write_all(&large).unwrap();
    assert!(moto.uploads("out").contains("<UploadId>"), "{}", moto.uploads("out"));
    drop(up);
    assert_eq!(read_back(&moto, "s3://out/dropped.bin"), Err(ErrorKind::NotFound));
    assert!(!moto.uploads("out").contains("<UploadId>"), "{}", moto.uploads("out"));
}

#[test]
fn a_conditional_publish_never_replaces_what_another_writer_put() {
    let Some(moto) = moto::start("a_conditional_publish_never_replaces_what_another_writer_put")
    else {
        return;
    };
    moto.bucket("race");
    let at = Location::parse("s3://race/receipt.json").unwrap();
    let opts = options(&moto);
    let upload = |bytes: &[u8]| {
        let mut up = RemoteUpload::create(&at, &opts).unwrap();
        up.write_all(bytes).unwrap();
        up
    };
    // Nothing there: created.
    assert_eq!(ztensor_remote::seen(&at, &opts).unwrap(), Expected::Nothing);
    upload(b"first").finish_if(Expected::Nothing).unwrap();
    // A second writer that also saw nothing loses, and says so; the first's object stays.
    let e = upload(b"second").finish_if(Expected::Nothing).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Changed, "{e}");
    assert!(e.to_string().contains("another writer published there first"), "{e}");
    assert_eq!(read_back(&moto, "s3://race/receipt.json"), Ok(b"first".to_vec()));
    // Replacing what was seen works while it is still there, and not after it moved.
    let Expected::Object(first) = ztensor_remote::seen(&at, &opts).unwrap() else {
        panic!("no ETag")
    };
    upload(b"third").finish_if(Expected::Object(first.clone())).unwrap();
    assert_eq!(read_back(&moto, "s3://race/receipt.json"), Ok(b"third".to_vec()));
    let e = upload(b"fourth").finish_if(Expected::Object(first)).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Changed, "{e}");
    assert_eq!(read_back(&moto, "s3://race/receipt.json"), Ok(b"third".to_vec()));
    // A conditional write is of one part.
    let big = pattern(ztensor_remote::PART_LEN + 1, 3);
    let e = upload(&big).finish_if(Expected::Nothing).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Config, "{e}");
    assert!(!moto.uploads("race").contains("<UploadId>"), "{}", moto.uploads("race"));
}

#[test]
fn in_order_reads_are_fetched_ahead_and_no_byte_twice() {
    let Some(moto) = moto::start("in_order_reads_are_fetched_ahead_and_no_byte_twice") else {
        return;
    };
    moto.bucket("ahead");
    // Twelve 2 MiB "tensors" (and the suffix the open holds), read in ranges of 1 MiB, at
    // most 4 MiB ahead.
    let piece = 2usize << 20;
    let data = pattern(12 * piece, 3);
    put(&moto, "s3://ahead/a.bin", &data);
    let at = Location::parse("s3://ahead/a.bin").unwrap();
    let opts = RemoteOptions { range_len: 1 << 20, read_ahead: 4 << 20, ..options(&moto) };
    let suffix = ztensor_remote::SUFFIX_LEN;
    let read = |object: &RemoteObject, k: usize| {
        let mut buf = vec![0u8; piece];
        object.read_exact_at((k * piece) as u64, &mut buf).unwrap();
        assert!(buf == data[k * piece..(k + 1) * piece], "tensor {k}");
    };
    // Every tensor in order: each byte fetched once, and the next ranges fetched before they
    // are asked for (the counters grow past what was read).
    let object = RemoteObject::open(&at, &opts).unwrap();
    let mut ahead_seen = false;
    for k in 0..12 {
        read(&object, k);
        let asked = ((k + 1) * piece) as u64 + suffix;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while (1..10).contains(&k)
            && object.transfer().bytes <= asked
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        ahead_seen |= object.transfer().bytes > asked;
        assert!(object.transfer().bytes <= asked + (4 << 20), "tensor {k}: past the read-ahead");
    }
    assert!(ahead_seen, "nothing was fetched ahead");
    assert_eq!(object.transfer().bytes, data.len() as u64, "a byte fetched twice");
    // One tensor alone: nothing fetched ahead of it.
    let object = RemoteObject::open(&at, &opts).unwrap();
    read(&object, 5);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(object.transfer().bytes, piece as u64 + suffix);
    // In order, then a jump: what was fetched ahead and not read is at most the read-ahead.
    let object = RemoteObject::open(&at, &opts).unwrap();
    for k in [0, 1, 2, 9] {
        read(&object, k);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(object.transfer().bytes <= (4 * piece) as u64 + suffix + (4 << 20));
    // No read-ahead asked: the reads alone.
    let none = RemoteOptions { read_ahead: 0, ..opts.clone() };
    let object = RemoteObject::open(&at, &none).unwrap();
    for k in 0..4 {
        read(&object, k);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(object.transfer().bytes, (4 * piece) as u64 + suffix);
}

#[test]
fn a_plan_is_fetched_ahead_in_its_order_and_no_byte_twice() {
    let Some(moto) = moto::start("a_plan_is_fetched_ahead_in_its_order_and_no_byte_twice") else {
        return;
    };
    moto.bucket("plan");
    // Twelve 2 MiB "tensors", planned out of the order they lie in, fetched in ranges of 1 MiB
    // and at most 4 MiB ahead.
    let piece = 2usize << 20;
    let data = pattern(12 * piece, 5);
    put(&moto, "s3://plan/p.bin", &data);
    let at = Location::parse("s3://plan/p.bin").unwrap();
    let opts = RemoteOptions { range_len: 1 << 20, read_ahead: 4 << 20, ..options(&moto) };
    let suffix = ztensor_remote::SUFFIX_LEN;
    let order = [5usize, 0, 9, 2, 11, 1, 7, 4, 10, 3, 8, 6];
    let plan: Vec<_> =
        order.iter().map(|&k| (k * piece) as u64..((k + 1) * piece) as u64).collect();
    let read = |object: &RemoteObject, k: usize| {
        let mut buf = vec![0u8; piece];
        object.read_exact_at((k * piece) as u64, &mut buf).map(|()| buf)
    };
    let settled = |object: &RemoteObject, bytes: u64| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while object.transfer().bytes < bytes && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        object.transfer().bytes
    };

    // Told the plan, the object fetches its first 4 MiB (tensors 5 and 0) before any read, and
    // no more. They are held: read after the object is replaced on the server, they are the
    // bytes first seen, while tensor 9, not fetched yet, is refused as changed.
    let object = RemoteObject::open(&at, &opts).unwrap();
    object.will_need(&plan);
    assert_eq!(settled(&object, suffix + (4 << 20)), suffix + (4 << 20));
    put(&moto, "s3://plan/p.bin", &pattern(12 * piece, 6));
    for k in [5, 0] {
        let got = read(&object, k).unwrap();
        assert!(got == data[k * piece..(k + 1) * piece], "tensor {k}");
    }
    let e = read(&object, 9).unwrap_err();
    assert!(e.to_string().contains("changed"), "{e}");
    put(&moto, "s3://plan/p.bin", &data);

    // Read in the plan's order: right, and each byte fetched once.
    let object = RemoteObject::open(&at, &opts).unwrap();
    object.will_need(&plan);
    for &k in &order {
        let got = read(&object, k).unwrap();
        assert!(got == data[k * piece..(k + 1) * piece], "tensor {k}");
    }
    assert_eq!(settled(&object, data.len() as u64), data.len() as u64, "a byte fetched twice");

    // A reader ahead of the read-ahead (tensors 6.. first) reads those itself; what the plan
    // held before them is still used, and nothing is fetched twice.
    let object = RemoteObject::open(&at, &opts).unwrap();
    let in_place: Vec<_> = (0..12).map(|k| (k * piece) as u64..((k + 1) * piece) as u64).collect();
    object.will_need(&in_place);
    settled(&object, suffix + (4 << 20));
    for k in (6..12).chain(0..6) {
        let got = read(&object, k).unwrap();
        assert!(got == data[k * piece..(k + 1) * piece], "tensor {k}");
    }
    assert_eq!(settled(&object, data.len() as u64), data.len() as u64, "a byte fetched twice");

    // A range named twice (objects sharing a blob, which a copy reads once): the plan keeps
    // its first place only. Read there, it does not make the plan skip what lies between
    // (tensor 9, fetched ahead once tensors 0 and 5 are read, then tensor 2).
    let object = RemoteObject::open(&at, &opts).unwrap();
    let twice = [&plan[1], &plan[0], &plan[2], &plan[1], &plan[3]];
    object.will_need(&twice.map(Clone::clone));
    settled(&object, suffix + (4 << 20));
    for k in [0, 5] {
        let got = read(&object, k).unwrap();
        assert!(got == data[k * piece..(k + 1) * piece], "tensor {k}");
    }
    assert_eq!(settled(&object, suffix + (8 << 20)), suffix + (8 << 20));
    for k in [9, 2] {
        let got = read(&object, k).unwrap();
        assert!(got == data[k * piece..(k + 1) * piece], "tensor {k}");
    }
    assert_eq!(settled(&object, suffix + (8 << 20)), suffix + (8 << 20), "a byte fetched twice");

    // Small tensors with padding between them, read one by one: the plan fetches them
    // together, in a few requests (not one per read), each byte of them once.
    let object = RemoteObject::open(&at, &opts).unwrap();
    let small: Vec<_> = (0..200u64).map(|k| k * 10_304..k * 10_304 + 10_240).collect();
    let opened = object.transfer();
    object.will_need(&small);
    for r in &small {
        let mut buf = vec![0u8; 10_240];
        object.read_exact_at(r.start, &mut buf).unwrap();
        assert!(buf == data[r.start as usize..r.end as usize], "{r:?}");
    }
    let spent = object.transfer();
    let span = small.last().unwrap().end;
    assert!(spent.requests - opened.requests <= 40, "{} requests", spent.requests);
    assert!(spent.bytes - suffix <= span, "{} bytes for a span of {span}", spent.bytes);

    // No read-ahead asked: the plan fetches nothing.
    let none = RemoteOptions { read_ahead: 0, ..opts.clone() };
    let object = RemoteObject::open(&at, &none).unwrap();
    object.will_need(&plan);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(object.transfer().bytes, suffix);
}

#[test]
fn bytes_fetched_ahead_are_handed_on_as_they_arrived() {
    let Some(moto) = moto::start("bytes_fetched_ahead_are_handed_on_as_they_arrived") else {
        return;
    };
    moto.bucket("each");
    let data = pattern(12 << 20, 8);
    put(&moto, "s3://each/e.bin", &data);
    let at = Location::parse("s3://each/e.bin").unwrap();
    let opts = RemoteOptions { range_len: 1 << 20, read_ahead: 4 << 20, ..options(&moto) };
    let len = data.len() as u64;
    // Twelve 1 MiB tensors, in the order they lie in.
    let plan: Vec<_> = (0..12u64).map(|k| k << 20..(k + 1) << 20).collect();
    // Handed on by `read_each_at`: the bytes, and how many of them came through the scratch
    // (copied) rather than from what the object holds.
    let each = |object: &RemoteObject, offset: u64, n: u64| {
        let mut scratch = vec![0u8; 256 << 10];
        let ours = scratch.as_ptr_range();
        let ours = ours.start as usize..ours.end as usize;
        let (mut bytes, mut copied) = (Vec::new(), 0);
        object
            .read_each_at(offset, n, &mut scratch, &mut |slice| {
                if ours.contains(&(slice.as_ptr() as usize)) {
                    copied += slice.len();
                }
                bytes.extend_from_slice(slice);
                Ok(())
            })
            .unwrap();
        (bytes, copied)
    };

    // The whole object read as planned: every byte right, none copied through the scratch
    // (the plan's ranges are fetched ahead, the suffix is held), each fetched once.
    let object = RemoteObject::open(&at, &opts).unwrap();
    object.will_need(&plan);
    let (bytes, copied) = each(&object, 0, len);
    assert!(bytes == data, "the bytes handed on differ");
    assert_eq!(copied, 0, "bytes fetched ahead were copied");
    assert_eq!(object.transfer().bytes, len, "a byte fetched twice");

    // A small read with no plan: read through the scratch, right.
    let object = RemoteObject::open(&at, &opts).unwrap();
    let (bytes, copied) = each(&object, 5_000_000, 1_000);
    assert!(bytes == data[5_000_000..5_001_000]);
    assert_eq!(copied, 1_000);
    // A read in order with no plan: right, whatever the stream read-ahead hands on.
    let (bytes, _) = each(&object, 1 << 20, 6 << 20);
    assert!(bytes == data[1 << 20..7 << 20]);

    // Past the end: refused, nothing handed on. An error of `each` stops the read.
    let mut calls = 0;
    let e = object
        .read_each_at(len - 1, 2, &mut [0u8; 64], &mut |_| {
            calls += 1;
            Ok(())
        })
        .unwrap_err();
    assert_eq!((e.kind(), calls), (std::io::ErrorKind::UnexpectedEof, 0));
    let object = RemoteObject::open(&at, &opts).unwrap();
    object.will_need(&plan);
    let e = object
        .read_each_at(0, len, &mut vec![0u8; 256 << 10], &mut |_| {
            calls += 1;
            if calls == 2 { Err(std::io::Error::other("the disk is full")) } else { Ok(()) }
        })
        .unwrap_err();
    assert_eq!((e.to_string().as_str(), calls), ("the disk is full", 2));
}

#[test]
fn gs_urls_are_read_unsigned_when_asked() {
    // `unsigned` (the CLI's --no-sign-request) reaches the GCS client too: without it the
    // client looks for credentials (Google's metadata server) and the open fails. moto stands
    // in for the server: a ranged read in GCS's XML API is a plain GET, as in S3's.
    let Some(moto) = moto::start("gs_urls_are_read_unsigned_when_asked") else {
        return;
    };
    moto.bucket("gcs");
    let data = pattern(700 << 10, 3);
    // Readable by anyone, as a public bucket's objects are.
    let public = [("x-amz-acl", "public-read")];
    let (status, body) = moto.request_with("PUT", "/gcs/m.bin", &public, &data);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let at = Location::parse("gs://gcs/m.bin").unwrap();
    let opts = RemoteOptions {
        unsigned: true,
        settings: vec![("google_base_url".into(), moto.endpoint.clone())],
        ..RemoteOptions::default()
    };
    let object = RemoteObject::open(&at, &opts).unwrap();
    let mut all = vec![0u8; data.len()];
    object.read_exact_at(0, &mut all).unwrap();
    assert!(all == data, "the object read differs");
    assert!(object.e_tag().is_some(), "reads are pinned to the version first seen");
}

#[test]
fn http_is_read_only() {
    let at = Location::parse("http://127.0.0.1:9/m.zt").unwrap();
    let e = RemoteUpload::create(&at, &RemoteOptions::default()).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ReadOnly);
}

#[test]
fn slow_down_answers_are_retried_and_cut_bodies_resumed() {
    let Some(moto) = moto::start("slow_down_answers_are_retried_and_cut_bodies_resumed") else {
        return;
    };
    moto.bucket("faults");
    let data = pattern(4 << 20, 11);
    put(&moto, "s3://faults/f.bin", &data);
    let proxy = proxy::start(moto.endpoint.trim_start_matches("http://"));
    let at = Location::parse("s3://faults/f.bin").unwrap();
    let object = RemoteObject::open(&at, &options_at(&proxy.endpoint)).unwrap();
    let opened = object.transfer().requests;
    // Two 503 SlowDown answers, then the read goes through: three requests for it.
    proxy.inject(&[proxy::Fault::SlowDown, proxy::Fault::SlowDown]);
    let mut buf = vec![0u8; 2 << 20];
    object.read_exact_at(100, &mut buf).unwrap();
    assert!(buf == data[100..100 + (2 << 20)]);
    assert_eq!(object.transfer().requests - opened, 3);
    // A body cut mid-way: resumed from where it stopped, the bytes exact, one request more.
    proxy.inject(&[proxy::Fault::CutBody]);
    let before = object.transfer();
    object.read_exact_at(2 << 20, &mut buf[..1 << 20]).unwrap();
    assert!(buf[..1 << 20] == data[2 << 20..3 << 20]);
    let after = object.transfer();
    assert_eq!(after.requests - before.requests, 2);
    assert_eq!(
        *proxy.applied.lock().unwrap(),
        [proxy::Fault::SlowDown, proxy::Fault::SlowDown, proxy::Fault::CutBody]
    );
}

#[test]
fn large_reads_go_as_parallel_ranges_within_the_concurrency() {
    let Some(moto) = moto::start("large_reads_go_as_parallel_ranges_within_the_concurrency") else {
        return;
    };
    moto.bucket("ranges");
    let data = pattern((6 << 20) + 123, 5);
    put(&moto, "s3://ranges/r.bin", &data);
    let proxy = proxy::start(moto.endpoint.trim_start_matches("http://"));
    // A slow server: each ranged GET waits 150 ms, so requests that may overlap do.
    proxy.ranges.delay_ms.store(150, std::sync::atomic::Ordering::SeqCst);
    let at = Location::parse("s3://ranges/r.bin").unwrap();
    let options =
        RemoteOptions { concurrency: 3, range_len: 1 << 20, ..options_at(&proxy.endpoint) };
    let object = RemoteObject::open(&at, &options).unwrap();
    let opened = object.transfer().requests;
    // 5 MiB + 100 bytes: six ranges of at most 1 MiB, at most three at once, each byte exact.
    let len = (5 << 20) + 100;
    let mut buf = vec![0u8; len];
    object.read_exact_at(10, &mut buf).unwrap();
    assert!(buf == data[10..10 + len]);
    assert_eq!(object.transfer().requests - opened, 6);
    let most = proxy.ranges.most_in_flight.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(most, 3, "ranged GETs in flight at once");
    // Two threads reading at once share the object's three: never more in flight.
    proxy.ranges.most_in_flight.store(0, std::sync::atomic::Ordering::SeqCst);
    std::thread::scope(|s| {
        for offset in [0usize, 3 << 20] {
            let (object, data) = (&object, &data);
            s.spawn(move || {
                let mut buf = vec![0u8; 3 << 20];
                object.read_exact_at(offset as u64, &mut buf).unwrap();
                assert!(buf == data[offset..offset + (3 << 20)]);
            });
        }
    });
    let most = proxy.ranges.most_in_flight.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(most, 3, "ranged GETs in flight at once, two readers");
    // Each byte asked for went over the wire once: the open's suffix, the first read, and the
    // two readers' (the second's end came from the suffix the open holds).
    let suffix = ztensor_remote::SUFFIX_LEN;
    let suffix_start = data.len() as u64 - suffix;
    let expected = suffix + len as u64 + (3 << 20) + (suffix_start - (3 << 20));
    assert_eq!(object.transfer().bytes, expected);
}

#[test]
fn a_server_too_slow_for_the_time_bound_fails_naming_the_url() {
    let Some(moto) = moto::start("a_server_too_slow_for_the_time_bound_fails_naming_the_url")
    else {
        return;
    };
    moto.bucket("slow");
    let data = pattern(3 << 20, 9);
    put(&moto, "s3://slow/s.bin", &data);
    let proxy = proxy::start(moto.endpoint.trim_start_matches("http://"));
    let at = Location::parse("s3://slow/s.bin").unwrap();
    let bound = std::time::Duration::from_secs(1);
    let options = RemoteOptions { timeout: bound, ..options_at(&proxy.endpoint) };
    let object = RemoteObject::open(&at, &options).unwrap();
    // Slower than the bound: each ranged GET waits 3 s before the server sees it.
    proxy.ranges.delay_ms.store(3000, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    let mut buf = vec![0u8; 2 << 20];
    let e = object.read_exact_at(0, &mut buf).unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    let text = e.to_string();
    assert!(text.contains("s3://slow/s.bin") && text.contains("within 1 s"), "{text}");
    assert!(took < bound * 3, "took {took:?}");
    // A server slow but within the bound is waited for: the bytes exact.
    proxy.ranges.delay_ms.store(300, std::sync::atomic::Ordering::SeqCst);
    object.read_exact_at(0, &mut buf).unwrap();
    assert!(buf == data[..2 << 20]);
}

#[test]
fn an_upload_holds_at_most_its_parts_in_flight() {
    let Some(moto) = moto::start("an_upload_holds_at_most_its_parts_in_flight") else { return };
    moto.bucket("parts");
    let proxy = proxy::start(moto.endpoint.trim_start_matches("http://"));
    // Each part waits 200 ms at the proxy, so parts that may overlap do.
    proxy.parts.delay_ms.store(200, std::sync::atomic::Ordering::SeqCst);
    let data = pattern(7 * ztensor_remote::PART_LEN + 1000, 3);
    for most in [1usize, 3] {
        proxy.parts.most_in_flight.store(0, std::sync::atomic::Ordering::SeqCst);
        let url = format!("s3://parts/p{most}.bin");
        let options = RemoteOptions { upload_parts: most, ..options_at(&proxy.endpoint) };
        let mut up = RemoteUpload::create(&Location::parse(&url).unwrap(), &options).unwrap();
        up.write_all(&data).unwrap();
        up.finish().unwrap();
        let seen = proxy.parts.most_in_flight.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(seen, most, "parts in flight at once");
        assert!(read_back(&moto, &url).unwrap() == data);
    }
}

#[test]
fn a_lost_answer_to_the_completion_still_reports_success() {
    let Some(moto) = moto::start("a_lost_answer_to_the_completion_still_reports_success") else {
        return;
    };
    moto.bucket("lost");
    let proxy = proxy::start(moto.endpoint.trim_start_matches("http://"));
    let data = pattern(ztensor_remote::PART_LEN + 4321, 8);
    let at = Location::parse("s3://lost/l.bin").unwrap();
    let mut up = RemoteUpload::create(&at, &options_at(&proxy.endpoint)).unwrap();
    up.write_all(&data).unwrap();
    proxy.inject(&[proxy::Fault::DropCompletion]);
    up.finish().unwrap();
    assert_eq!(*proxy.applied.lock().unwrap(), [proxy::Fault::DropCompletion]);
    assert!(read_back(&moto, "s3://lost/l.bin") == Ok(data));
    assert!(!moto.uploads("lost").contains("<UploadId>"), "{}", moto.uploads("lost"));
}
