//! Reading objects as files, against a real S3 server (moto's): every command reports an object
//! as it reports the same bytes on disk, and reads what it needs once, in a few requests.

use crate::moto;
use crate::remote::{s, transfer, ztensor_s3};
use crate::{stderr, stdout};

/// A safetensors file of `count` f32 tensors of `elements` values each (not all alike, so
/// zstd has work), named `t0000`, `t0001`, ...
fn many_tensors(count: usize, elements: usize) -> Vec<u8> {
    let mut header = String::from("{");
    for i in 0..count {
        let at = i * elements * 4;
        header.push_str(&format!(
            "\"t{i:04}\":{{\"dtype\":\"F32\",\"shape\":[{elements}],\"data_offsets\":[{at},{}]}},",
            at + elements * 4
        ));
    }
    header.pop();
    header.push('}');
    let mut header = header.into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    let mut x = 0x9e37_79b9_u32;
    for _ in 0..count * elements {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        file.extend_from_slice(&((x % 1000) as f32 * 0.25).to_le_bytes());
    }
    file
}

/// A URL is its file: `info`, `verify`, `ls`, `dump`, `id` and `cat` (text and JSON, `--strict`
/// too) print the same report for an object as for the same bytes on disk, names aside, for
/// zTensor 1.2 and zTensor 2; and `verify` reads the
/// object's bytes once, in a few large requests (it read each piece of each object in one of
/// its own, 714 requests for an 83 MB file).
#[test]
fn a_url_reports_as_its_file() {
    let Some(moto) = moto::start("a_url_reports_as_its_file") else { return };
    let dir = tempfile::tempdir().unwrap();
    moto.bucket("models");
    let st = dir.path().join("many.safetensors");
    std::fs::write(&st, many_tensors(300, 8192)).unwrap();
    let zt = dir.path().join("many.zt");
    let made = crate::ztensor(&[
        "convert",
        &s(&st),
        &s(&zt),
        "--zstd",
        "3",
        "--digest",
        "sha256",
        "--quiet",
    ]);
    assert!(made.status.success(), "{}", stderr(&made));
    let bytes = std::fs::read(&zt).unwrap();
    moto.put("models", "many.zt", &bytes);
    let zt2 = dir.path().join("many2.zt");
    let made = crate::ztensor(&["convert", &s(&zt), &s(&zt2), "--to", "2", "--quiet"]);
    assert!(made.status.success(), "{}", stderr(&made));
    moto.put("models", "many2.zt", &std::fs::read(&zt2).unwrap());
    let tb = dir.path().join("many.tb");
    let made = crate::ztensor(&["convert", &s(&st), &s(&tb), "--quiet"]);
    assert!(made.status.success(), "{}", stderr(&made));
    moto.put("models", "many.tb", &std::fs::read(&tb).unwrap());
    moto.put("models", "many.safetensors", &std::fs::read(&st).unwrap());
    for (url, local) in [
        ("s3://models/many.zt", s(&zt)),
        ("s3://models/many2.zt", s(&zt2)),
        ("s3://models/many.tb", s(&tb)),
        ("s3://models/many.safetensors", s(&st)),
    ] {
        for args in [
            &["info"][..],
            &["info", "--json"],
            &["info", "--strict"],
            &["verify"],
            &["verify", "--json"],
            &["verify", "--strict"],
            &["ls"],
            &["ls", "--json"],
            &["dump"],
            &["id"],
            &["id", "--json"],
            &["cat", "t0007", "-n", "5"],
        ] {
            let (path, rest) = args.split_at(1);
            let here = crate::ztensor(&[path, &[local.as_str()], rest].concat());
            let there = ztensor_s3(&moto, &[path, &[url], rest].concat());
            // The conformance dump judges a safetensors file as no zTensor container (status
            // 1, a verdict), an object of the same bytes alike.
            let judged = args[0] == "dump" && url.ends_with(".safetensors");
            assert!(here.status.success() || judged, "{args:?}: {}", stderr(&here));
            assert_eq!(here.status.code(), there.status.code(), "{url} {args:?}");
            let here = stdout(&here).replace(&local, "FILE");
            let there = stdout(&there).replace(url, "FILE");
            assert!(!here.is_empty(), "{args:?}");
            assert_eq!(here, there, "{url} {args:?}: the object's report is not the file's");
        }
    }
    let url = "s3://models/many.zt";
    let verified = ztensor_s3(&moto, &["verify", url]);
    let (requests, fetched) = transfer(&verified, url);
    let len = bytes.len() as u64;
    eprintln!("verify {url}: {requests} requests, {fetched} bytes for {len}");
    // The open, then the object in ranges of 8 MiB (the default), a few more where the plan's
    // ranges end short of a range's end.
    assert!(requests <= 1 + len.div_ceil(8 << 20) + 3, "{requests} requests for {len} bytes");
    assert!(fetched * 100 <= len * 105, "{fetched} bytes fetched for a {len}-byte object");
}

/// Every conversion of an object reads what it needs once, whatever the output's format: at
/// most 1.05 times those bytes (a safetensors output fetched 1.2 times its input), in a few
/// large requests (it sent one for each tensor).
#[test]
fn a_conversion_fetches_its_input_once_whatever_the_target() {
    let Some(moto) = moto::start("a_conversion_fetches_its_input_once_whatever_the_target") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    moto.bucket("models");
    let st = dir.path().join("many.safetensors");
    std::fs::write(&st, many_tensors(200, 10_000)).unwrap();
    let zt = dir.path().join("many.zt");
    let made = crate::ztensor(&["convert", &s(&st), &s(&zt), "--digest", "sha256", "--quiet"]);
    assert!(made.status.success(), "{}", stderr(&made));
    let zt2 = dir.path().join("many2.zt");
    let made = crate::ztensor(&["convert", &s(&st), &s(&zt2), "--to", "2", "--quiet"]);
    assert!(made.status.success(), "{}", stderr(&made));
    for (name, path) in [("many.safetensors", &st), ("many.zt", &zt), ("many2.zt", &zt2)] {
        moto.put("models", name, &std::fs::read(path).unwrap());
    }
    for input in ["many.safetensors", "many.zt", "many2.zt"] {
        let url = format!("s3://models/{input}");
        let len = std::fs::metadata(dir.path().join(input)).unwrap().len();
        for output in ["out.safetensors", "out.zt", "out.tb", "out2.zt"] {
            let out = dir.path().join(output);
            let mut args = vec!["convert", url.as_str(), "--quiet"];
            let out = s(&out);
            args.insert(2, &out);
            if output == "out2.zt" {
                args.extend(["--to", "2"]);
            }
            let done = ztensor_s3(&moto, &args);
            assert!(done.status.success(), "{input} -> {output}: {}", stderr(&done));
            let (requests, fetched) = transfer(&done, &url);
            eprintln!("{input} -> {output}: {requests} requests, {fetched} bytes for {len}");
            // What it needs: the tensors' bytes and the end the open reads (a zTensor 2 file
            // places each tensor at a multiple of 64 KiB: the gaps are not needed).
            let needed = len.min(200 * 10_000 * 4 + ztensor_remote::SUFFIX_LEN);
            assert!(
                fetched * 100 <= needed * 105,
                "{input} -> {output}: {fetched} bytes fetched, {needed} needed"
            );
            // In ranges of 8 MiB where the tensors lie end to end; a request a tensor where
            // they lie apart (still at most one each).
            let most = if input == "many2.zt" { 1 + 200 } else { 1 + len.div_ceil(8 << 20) + 3 };
            assert!(requests <= most, "{input} -> {output}: {requests} requests");
        }
    }
}

/// A sharded checkpoint in a bucket is its directory: a zTensor checkpoint's index, a
/// Distributed Checkpoint torch saved as zTensor (its chunks made whole), and a sharded
/// zTensor 2 root, each with its shards the objects beside it, give the report their files
/// give (`verify` of a chunked checkpoint in a bucket checked its chunks as objects of their
/// own, where the same files were made whole).
#[test]
fn a_sharded_checkpoint_in_a_bucket_reports_as_its_directory() {
    let Some(moto) = moto::start("a_sharded_checkpoint_in_a_bucket_reports_as_its_directory")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    moto.bucket("models");
    let st = dir.path().join("many.safetensors");
    std::fs::write(&st, many_tensors(40, 8192)).unwrap();
    let options = ["--zstd", "3", "--digest", "sha256", "--shard-size", "512KiB", "--quiet"];
    let zt = dir.path().join("zt");
    let made =
        crate::ztensor(&[&["convert", &s(&st), &format!("{}/", s(&zt))][..], &options].concat());
    assert!(made.status.success(), "{}", stderr(&made));
    let zt2 = dir.path().join("zt2");
    let made = crate::ztensor(
        &[
            &["convert", &s(&st), &format!("{}/", s(&zt2)), "--to", "2", "--zstd", "3"][..],
            &options[4..],
        ]
        .concat(),
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let dcp = crate::root().join("fixtures/external/dcp/ztensor");
    let mut checkpoints = Vec::new();
    for (local, prefix) in [(zt.clone(), "zt"), (zt2.clone(), "zt2"), (dcp, "dcp")] {
        let mut names: Vec<String> = std::fs::read_dir(&local)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert!(names.len() > 2, "{names:?}: one shard, or none");
        for name in &names {
            moto.put(
                "models",
                &format!("{prefix}/{name}"),
                &std::fs::read(local.join(name)).unwrap(),
            );
        }
        // The file a user names: the index, or the zTensor 2 root (the one file not a shard).
        let entry = names
            .iter()
            .find(|n| n.ends_with(".zt.index.json"))
            .or_else(|| names.iter().find(|n| !n.contains("-of-")))
            .unwrap()
            .clone();
        checkpoints.push((local, prefix, entry));
    }
    for (local, prefix, entry) in &checkpoints {
        let file = s(&local.join(entry));
        let url = format!("s3://models/{prefix}/{entry}");
        let name = if *prefix == "dcp" { "model.embed" } else { "t0007" };
        for args in [
            &["info"][..],
            &["info", "--json"],
            &["verify"],
            &["verify", "--json"],
            &["ls"],
            &["ls", "--json"],
            &["cat", name, "-n", "5"],
        ] {
            let (command, rest) = args.split_at(1);
            let here = crate::ztensor(&[command, &[file.as_str()], rest].concat());
            let there = ztensor_s3(&moto, &[command, &[url.as_str()], rest].concat());
            assert!(here.status.success(), "{file} {args:?}: {}", stderr(&here));
            assert_eq!(
                here.status.code(),
                there.status.code(),
                "{url} {args:?}: {}",
                stderr(&there)
            );
            // Shards are named as they were found: beside the file, or the object.
            let here = stdout(&here).replace(&format!("{}/", s(local)), "DIR/");
            let there = stdout(&there).replace(&format!("s3://models/{prefix}/"), "DIR/");
            assert!(!here.is_empty(), "{args:?}");
            assert_eq!(here, there, "{url} {args:?}: the checkpoint's report is not its files'");
        }
    }
}
