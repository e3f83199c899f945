//! Inputs and outputs in object storage, against a real S3 server (moto's, started here; see
//! `moto.rs` for when a test is skipped and when it fails without one).

use std::path::Path;
use std::process::{Command, Output};

use ztensor_remote::{Location, RemoteUpload};

use crate::moto::{self, Moto};
use crate::remote_support;
use crate::{stderr, stdout};

/// Runs `ztensor args` against `moto`, configured the AWS way from the environment, with the
/// transfer report on.
pub(crate) fn ztensor_at(moto: &Moto, secret: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_REGION", "us-east-1")
        .env("ZTENSOR_REMOTE_STATS", "1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .output()
        .expect("the ztensor binary runs")
}

pub(crate) fn ztensor_s3(moto: &Moto, args: &[&str]) -> Output {
    ztensor_at(moto, "testing", args)
}

/// Replaces the object at `url` with `bytes`, signed as a user of the bucket (moto lets no
/// anonymous request replace an object).
fn put_signed(moto: &Moto, url: &str, bytes: &[u8]) {
    use std::io::Write;
    let location = Location::parse(url).unwrap();
    let mut up = RemoteUpload::create(&location, &remote_support::options(moto)).unwrap();
    up.write_all(bytes).unwrap();
    up.finish().unwrap();
}

/// As [`ztensor_s3`], from the working directory `cwd` (another machine's, as far as paths
/// go).
fn ztensor_s3_in(moto: &Moto, cwd: &Path, args: &[&str]) -> Output {
    s3_command(moto, args).current_dir(cwd).output().expect("the ztensor binary runs")
}

/// The ztensor command with `args`, configured for `moto` (its endpoint and test
/// credentials, no profile), its output piped: for tests that start it and act meanwhile.
fn s3_command(moto: &Moto, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ztensor"));
    command
        .args(args)
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// The requests and bytes the report on standard error gives for `url`.
pub(crate) fn transfer(out: &Output, url: &str) -> (u64, u64) {
    let text = stderr(out);
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("ztensor: {url}: ")))
        .unwrap_or_else(|| panic!("no transfer report for {url}: {text}"));
    let numbers: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    (numbers[0], numbers[1])
}

/// A safetensors file of one 1 MiB f32 tensor and a few small ones: larger than the bytes an
/// open fetches, so counting them means something.
fn safetensors_fixture() -> Vec<u8> {
    let big = 256 * 1024;
    let header = format!(
        "{{\"big\":{{\"dtype\":\"F32\",\"shape\":[{big}],\"data_offsets\":[0,{}]}},\
         \"small\":{{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[{},{}]}}}}",
        big * 4,
        big * 4,
        big * 4 + 16
    );
    let mut header = header.into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.extend((0..big).flat_map(|i| (i as f32 * 0.5).to_le_bytes()));
    file.extend([1i32, 2, 3, 4].iter().flat_map(|v| v.to_le_bytes()));
    file
}

/// A bucket `models` holding `big.safetensors`, its zTensor 1.2 conversion `big.zt` and its
/// zTensor 2 conversion `big2.zt`, and the local copies.
pub(crate) fn stocked(moto: &Moto, dir: &Path) {
    moto.bucket("models");
    let st = safetensors_fixture();
    std::fs::write(dir.join("big.safetensors"), &st).unwrap();
    let zt = dir.join("big.zt");
    let made = crate::ztensor(&["convert", &s(&dir.join("big.safetensors")), &s(&zt)]);
    assert!(made.status.success(), "{}", stderr(&made));
    let zt2 = dir.join("big2.zt");
    let made = crate::ztensor(&["convert", &s(&zt), &s(&zt2), "--to", "2"]);
    assert!(made.status.success(), "{}", stderr(&made));
    moto.put("models", "big.safetensors", &st);
    moto.put("models", "big.zt", &std::fs::read(&zt).unwrap());
    moto.put("models", "big2.zt", &std::fs::read(&zt2).unwrap());
}

pub(crate) fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn info_of_an_object_takes_few_requests_and_bytes() {
    let Some(moto) = moto::start("info_of_an_object_takes_few_requests_and_bytes") else { return };
    let dir = tempfile::tempdir().unwrap();
    stocked(&moto, dir.path());
    for (url, format) in [
        ("s3://models/big.zt", "version:    1.2"),
        ("s3://models/big.safetensors", "safetensors"),
        ("s3://models/big2.zt", "zTensor 2"),
    ] {
        let out = ztensor_s3(&moto, &["info", url]);
        assert!(out.status.success(), "{url}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(format) && text.contains("big"), "{url}: {text}");
        let (requests, bytes) = transfer(&out, url);
        eprintln!("info {url}: {requests} requests, {bytes} bytes");
        assert!(requests <= 3, "{url}: {requests} requests");
        assert!(bytes <= 256 << 10, "{url}: {bytes} bytes");
        // ls, verify and cat read it too.
        let listed = ztensor_s3(&moto, &["ls", url]);
        assert!(
            listed.status.success() && stdout(&listed).contains("small"),
            "{}",
            stderr(&listed)
        );
        let verified = ztensor_s3(&moto, &["verify", url]);
        assert!(verified.status.success(), "{}", stderr(&verified));
        let cat = ztensor_s3(&moto, &["cat", url, "small"]);
        assert!(cat.status.success(), "{}", stderr(&cat));
        assert!(stdout(&cat).contains("1 2\n3 4"), "{}", stdout(&cat));
    }
}

#[test]
fn convert_from_and_to_s3_matches_the_local_conversion() {
    let Some(moto) = moto::start("convert_from_and_to_s3_matches_the_local_conversion") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    stocked(&moto, dir.path());
    let local = dir.path().join("local.zt");
    let made = crate::ztensor(&["convert", &s(&dir.path().join("big.safetensors")), &s(&local)]);
    assert!(made.status.success(), "{}", stderr(&made));
    // From s3://: the same bytes, the input read about once.
    let fetched = dir.path().join("fetched.zt");
    let out = ztensor_s3(&moto, &["convert", "s3://models/big.safetensors", &s(&fetched)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read(&fetched).unwrap() == std::fs::read(&local).unwrap());
    let (_, bytes) = transfer(&out, "s3://models/big.safetensors");
    let input = safetensors_fixture().len() as u64;
    assert!(bytes * 100 <= input * 105, "{bytes} bytes fetched for a {input}-byte input");
    // To s3://, every target: the object holds the bytes the same conversion writes to a
    // local file (zTensor 2, placed by seeking, staged on the way), and reads back.
    let input = s(&dir.path().join("big.safetensors"));
    for (url, to) in [
        ("s3://models/out.zt", "1.2"),
        ("s3://models/out-11.zt", "1.1"),
        ("s3://models/out.safetensors", "safetensors"),
        ("s3://models/out.tb", "tensorbuffers"),
        ("s3://models/out2.zt", "2"),
    ] {
        let up = ztensor_s3(&moto, &["convert", &input, url, "--to", to]);
        assert!(up.status.success(), "{url}: {}", stderr(&up));
        assert!(
            stdout(&up).contains(url) && !stdout(&up).contains("note: replaced"),
            "{}",
            stdout(&up)
        );
        let here = dir.path().join(format!("here-{to}"));
        let made = crate::ztensor(&["convert", &input, &s(&here), "--to", to]);
        assert!(made.status.success(), "{}", stderr(&made));
        let object = crate::remote_support::read_back(&moto, url).unwrap();
        assert!(object == std::fs::read(&here).unwrap(), "{url}: not the local conversion's bytes");
        let back = dir.path().join(format!("back-{to}.zt"));
        let down = ztensor_s3(&moto, &["convert", url, &s(&back)]);
        assert!(down.status.success(), "{url}: {}", stderr(&down));
        let same = crate::ztensor(&["diff", &s(&back), &s(&local)]);
        assert!(same.status.success(), "{url}: {}{}", stdout(&same), stderr(&same));
    }
    assert!(!moto.uploads("models").contains("<UploadId>"), "{}", moto.uploads("models"));
    // An object replaced is named as a file replaced is (the first upload said nothing).
    let again = ztensor_s3(&moto, &["convert", &input, "s3://models/out.zt", "--zstd", "3"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let said = stdout(&again);
    assert!(said.contains("note: replaced s3://models/out.zt (zTensor 1.2"), "{said}");
}

#[test]
fn a_sharded_output_into_a_prefix_is_the_local_checkpoint_object_for_file() {
    let Some(moto) =
        moto::start("a_sharded_output_into_a_prefix_is_the_local_checkpoint_object_for_file")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    stocked(&moto, dir.path());
    let input = s(&dir.path().join("big.safetensors"));
    let local = dir.path().join("local");
    let args = ["--shard-size", "256KiB", "--zstd", "3"];
    let made =
        crate::ztensor(&[&["convert", &input, &format!("{}/", s(&local))][..], &args].concat());
    assert!(made.status.success(), "{}", stderr(&made));
    let up = ztensor_s3(&moto, &[&["convert", &input, "s3://models/ckpt/"][..], &args].concat());
    assert!(up.status.success(), "{}", stderr(&up));
    assert!(stdout(&up).contains("s3://models/ckpt"), "{}", stdout(&up));
    // Every file of the local checkpoint is an object under the prefix, byte for byte.
    let mut names: Vec<String> = std::fs::read_dir(&local)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    // From an object too: bucket to bucket, no local file.
    let across = ztensor_s3(
        &moto,
        &[&["convert", "s3://models/big.safetensors", "s3://models/across/"][..], &args].concat(),
    );
    assert!(across.status.success(), "{}", stderr(&across));
    for prefix in ["ckpt", "across"] {
        for name in &names {
            let url = format!("s3://models/{prefix}/{name}");
            let object = crate::remote_support::read_back(&moto, &url)
                .unwrap_or_else(|e| panic!("{url}: {e:?}"));
            assert!(object == std::fs::read(local.join(name)).unwrap(), "{url}");
        }
    }
    // A prefix that holds a checkpoint is refused (status 2), unless --force.
    let again = ztensor_s3(&moto, &[&["convert", &input, "s3://models/ckpt/"][..], &args].concat());
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    let forced = ztensor_s3(
        &moto,
        &[&["convert", &input, "s3://models/ckpt/", "--force"][..], &args].concat(),
    );
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(!moto.uploads("models").contains("<UploadId>"), "{}", moto.uploads("models"));
    // The checkpoint in the bucket reads as the local one: info, verify (every shard's digest),
    // and a conversion back to one file holding what the input holds.
    let index = "s3://models/ckpt/big.zt.index.json";
    let info = ztensor_s3(&moto, &["info", index]);
    assert!(info.status.success(), "{}", stderr(&info));
    assert!(stdout(&info).contains("sharded zTensor"), "{}", stdout(&info));
    let verified = ztensor_s3(&moto, &["verify", index]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
    let whole = dir.path().join("whole.zt");
    let back = ztensor_s3(&moto, &["convert", index, &s(&whole)]);
    assert!(back.status.success(), "{}", stderr(&back));
    let same = crate::ztensor(&["diff", &s(&whole), &input]);
    assert!(same.status.success(), "{}{}", stdout(&same), stderr(&same));
    // Writing over the input (its own prefix, even with --force), or a plan over it: refused,
    // the checkpoint left whole.
    let over = ztensor_s3(&moto, &["convert", index, "s3://models/ckpt/", "--force"]);
    assert_eq!(over.status.code(), Some(2), "{}", stderr(&over));
    assert!(stderr(&over).contains("is also the input"), "{}", stderr(&over));
    let plan_over = ztensor_s3(&moto, &["plan", index, "s3://models/other/", "-o", index]);
    assert_eq!(plan_over.status.code(), Some(2), "{}", stderr(&plan_over));
    assert!(stderr(&plan_over).contains("is also the input"), "{}", stderr(&plan_over));
    let still = ztensor_s3(&moto, &["verify", index]);
    assert!(still.status.success(), "{}{}", stdout(&still), stderr(&still));
    // A shard changed in the bucket (same size): verify names it, status 1.
    let first = names.iter().find(|n| n.ends_with(".zt") && *n != "big.zt.index.json").unwrap();
    let mut bytes = std::fs::read(local.join(first)).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0xff;
    put_signed(&moto, &format!("s3://models/ckpt/{first}"), &bytes);
    let broken = ztensor_s3(&moto, &["verify", index]);
    assert_eq!(broken.status.code(), Some(1), "{}{}", stdout(&broken), stderr(&broken));
    // A sharded zTensor 2 output into a prefix: the files a local directory gets.
    let local_2 = dir.path().join("local-2");
    let args_2 = ["--shard-size", "256KiB", "--to", "2"];
    let made =
        crate::ztensor(&[&["convert", &input, &format!("{}/", s(&local_2))][..], &args_2].concat());
    assert!(made.status.success(), "{}", stderr(&made));
    let up = ztensor_s3(&moto, &[&["convert", &input, "s3://models/two/"][..], &args_2].concat());
    assert!(up.status.success(), "{}", stderr(&up));
    assert!(stdout(&up).contains("s3://models/two/"), "{}", stdout(&up));
    let mut files_2 = 0;
    for entry in std::fs::read_dir(&local_2).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let url = format!("s3://models/two/{name}");
        let object = crate::remote_support::read_back(&moto, &url)
            .unwrap_or_else(|e| panic!("{url}: {e:?}"));
        assert!(object == std::fs::read(local_2.join(&name)).unwrap(), "{url}");
        files_2 += 1;
    }
    assert!(files_2 >= 3, "{files_2} files");
    // The sharded zTensor 2 root in the bucket reads with its shards beside it: verify checks
    // every shard whole, and a conversion back holds what the input holds.
    let root = "s3://models/two/big.zt";
    let verified = ztensor_s3(&moto, &["verify", root]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
    let whole_2 = dir.path().join("whole-2.zt");
    let back = ztensor_s3(&moto, &["convert", root, &s(&whole_2)]);
    assert!(back.status.success(), "{}", stderr(&back));
    let same = crate::ztensor(&["diff", &s(&whole_2), &input]);
    assert!(same.status.success(), "{}{}", stdout(&same), stderr(&same));
    // A sharded safetensors checkpoint in a bucket, its shards beside its index.
    let checkpoint =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/examples/checkpoint");
    for entry in std::fs::read_dir(&checkpoint).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        moto.put("models", &format!("hf/{name}"), &std::fs::read(entry.path()).unwrap());
    }
    let hf = "s3://models/hf/model.safetensors.index.json";
    let local_hf = s(&checkpoint.join("model.safetensors.index.json"));
    let from_hf = dir.path().join("hf.zt");
    let out = ztensor_s3(&moto, &["convert", hf, &s(&from_hf)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let same = crate::ztensor(&["diff", &s(&from_hf), &local_hf]);
    assert!(same.status.success(), "{}{}", stdout(&same), stderr(&same));
    // Request statistics count every object read: the index and each shard the reader opened
    // beside it, and their sum, which is at least every shard's bytes (all were converted).
    let mut shard_bytes = 0;
    for entry in std::fs::read_dir(&checkpoint).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let url = format!("s3://models/hf/{name}");
        let (requests, bytes) = transfer(&out, &url);
        assert!(requests >= 1 && bytes >= 1, "{url}: {requests} {bytes}");
        if name.ends_with(".safetensors") {
            shard_bytes += entry.metadata().unwrap().len();
        }
    }
    let total = stderr(&out)
        .lines()
        .find(|l| l.starts_with("ztensor: 3 objects read: "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no total: {}", stderr(&out)));
    let numbers: Vec<u64> = total.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(numbers[2] >= shard_bytes, "{total}: fewer than {shard_bytes} bytes");
    // A shard missing from the bucket: status 2, naming it.
    let shard = "s3://models/hf/model-00002-of-00002.safetensors";
    ztensor_remote::delete(&Location::parse(shard).unwrap(), &remote_support::options(&moto))
        .unwrap();
    let gone = ztensor_s3(&moto, &["info", hf]);
    assert_eq!(gone.status.code(), Some(2), "{}", stderr(&gone));
    assert!(stderr(&gone).contains("model-00002-of-00002.safetensors"), "{}", stderr(&gone));
}

#[test]
fn plan_run_and_finalize_through_a_bucket_with_no_shared_directory() {
    let Some(moto) = moto::start("plan_run_and_finalize_through_a_bucket_with_no_shared_directory")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    stocked(&moto, dir.path());
    let args = ["--shard-size", "256KiB", "--zstd", "3"];
    // The one-process local conversion, to compare with.
    let local = dir.path().join("local");
    let input = s(&dir.path().join("big.safetensors"));
    let made =
        crate::ztensor(&[&["convert", &input, &format!("{}/", s(&local))][..], &args].concat());
    assert!(made.status.success(), "{}", stderr(&made));
    // Input, plan and output in the bucket; each step from a working directory of its own.
    let plan = "s3://models/plans/big.json";
    let home = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let planned = ztensor_s3_in(
        &moto,
        &home("planner"),
        &[&["plan", "s3://models/big.safetensors", "s3://models/dist/", "-o", plan][..], &args]
            .concat(),
    );
    assert!(planned.status.success(), "{}", stderr(&planned));
    let units: usize = stdout(&planned)
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", stdout(&planned)));
    assert!(units >= 2, "{}", stdout(&planned));
    // Finalize before the units: refused, naming them, nothing written.
    let early = ztensor_s3_in(&moto, &home("early"), &["finalize", plan]);
    assert_eq!(early.status.code(), Some(2), "{}", stderr(&early));
    assert!(stderr(&early).contains("not done"), "{}", stderr(&early));
    for unit in (0..units).rev() {
        let k = unit.to_string();
        let ran =
            ztensor_s3_in(&moto, &home(&format!("worker-{unit}")), &["run", plan, "--unit", &k]);
        assert!(ran.status.success(), "unit {unit}: {}", stderr(&ran));
    }
    // A unit run again (a retried job) is verified and left alone.
    let again = ztensor_s3_in(&moto, &home("retry"), &["run", plan, "--unit", "0", "-q"]);
    assert!(again.status.success(), "{}", stderr(&again));
    // Two attempts of one unit at once (a job the scheduler started twice), its receipt
    // removed first: both write the shard's bytes, and the receipt goes up on condition
    // (nothing there), so exactly one says it wrote it; the other finds the first's receipt.
    let receipt = "s3://models/dist/.ztensor-receipts/unit-00001.json";
    crate::remote_support::delete(&moto, receipt);
    let racers: Vec<_> = (0..2)
        .map(|k| {
            s3_command(&moto, &["run", plan, "--unit", "1"])
                .current_dir(home(&format!("racer-{k}")))
                .spawn()
                .unwrap()
        })
        .collect();
    let said: Vec<String> = racers
        .into_iter()
        .map(|racer| {
            let out = racer.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            stdout(&out)
        })
        .collect();
    let wrote = said.iter().filter(|s| s.contains("wrote")).count();
    let found = said.iter().filter(|s| s.contains("already done")).count();
    assert_eq!((wrote, found), (1, 1), "{said:?}");
    let done = ztensor_s3_in(&moto, &home("finisher"), &["finalize", plan, "--deep"]);
    assert!(done.status.success(), "{}", stderr(&done));
    // The bucket holds the local checkpoint, object for file, receipts beside it.
    for entry in std::fs::read_dir(&local).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let url = format!("s3://models/dist/{name}");
        let object = crate::remote_support::read_back(&moto, &url)
            .unwrap_or_else(|e| panic!("{url}: {e:?}"));
        assert!(object == std::fs::read(local.join(&name)).unwrap(), "{url}");
    }
    let receipt = "s3://models/dist/.ztensor-receipts/unit-00000.json";
    assert!(crate::remote_support::read_back(&moto, receipt).is_ok(), "no {receipt}");
    assert!(!moto.uploads("models").contains("<UploadId>"), "{}", moto.uploads("models"));
}

/// The bucket recipe for Kubernetes runs as written: its container's command, given each
/// JOB_COMPLETION_INDEX, writes every unit of a plan it reads from the bucket.
#[test]
fn the_kubernetes_bucket_recipe_runs_every_unit() {
    let Some(moto) = moto::start("the_kubernetes_bucket_recipe_runs_every_unit") else {
        return;
    };
    let recipe = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/schedulers/k8s-indexed-job-bucket.yaml"),
    )
    .unwrap();
    let line = recipe.lines().find(|l| l.trim_start().starts_with("command:")).unwrap();
    let inner = line.split_once('[').unwrap().1.rsplit_once(']').unwrap().0;
    let command: Vec<String> =
        inner.split(',').map(|w| w.trim().trim_matches('"').to_owned()).collect();
    assert_eq!(command[..2], ["ztensor", "run"], "{line}");
    let plan = command[2].clone();
    assert!(plan.starts_with("s3://checkpoints/"), "{plan}");
    moto.bucket("checkpoints");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("model.safetensors"), safetensors_fixture()).unwrap();
    let planned = ztensor_s3_in(
        &moto,
        dir.path(),
        &["plan", "model.safetensors", "s3://checkpoints/llama-zt/", "--shard-size", "256KiB"]
            .iter()
            .copied()
            .chain(["-o", &plan])
            .collect::<Vec<_>>(),
    );
    assert!(planned.status.success(), "{}", stderr(&planned));
    let units: usize = stdout(&planned).split_whitespace().nth(1).unwrap().parse().unwrap();
    for unit in 0..units {
        let pod = dir.path().join(format!("pod-{unit}"));
        std::fs::create_dir_all(&pod).unwrap();
        let ran = Command::new(env!("CARGO_BIN_EXE_ztensor"))
            .args(&command[1..])
            .current_dir(&pod)
            .env("JOB_COMPLETION_INDEX", unit.to_string())
            .env("AWS_ENDPOINT_URL", &moto.endpoint)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_PROFILE")
            .output()
            .unwrap();
        assert!(ran.status.success(), "pod {unit}: {}", stderr(&ran));
    }
    let done = ztensor_s3_in(&moto, dir.path(), &["finalize", &plan]);
    assert!(done.status.success(), "{}", stderr(&done));
    let index = "s3://checkpoints/llama-zt/model.zt.index.json";
    let text = String::from_utf8(crate::remote_support::read_back(&moto, index).unwrap()).unwrap();
    assert!(text.contains("model-00001-of-"), "{text}");
}

#[test]
fn missing_objects_and_read_only_urls_are_refused_with_status_2() {
    let Some(moto) = moto::start("missing_objects_and_read_only_urls_are_refused_with_status_2")
    else {
        return;
    };
    moto.bucket("models");
    for url in ["s3://models/absent.zt", "s3://no-such-bucket/model.zt"] {
        for command in ["info", "ls", "verify"] {
            let out = ztensor_s3(&moto, &[command, url]);
            assert_eq!(out.status.code(), Some(2), "{command} {url}: {}", stderr(&out));
            assert!(stderr(&out).contains(url), "{}", stderr(&out));
            assert!(stderr(&out).contains("no such object or bucket"), "{}", stderr(&out));
        }
    }
    let local = "fixtures/examples/tiny-v1.2.zt";
    for (output, says) in
        [("https://127.0.0.1:9/out.zt", "read only"), ("s3:///out.zt", "no bucket")]
    {
        let out = ztensor_s3(&moto, &["convert", local, output, "--to", "2"]);
        assert_eq!(out.status.code(), Some(2), "{output}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{output}: {}", stderr(&out));
    }
    let out = ztensor_s3(&moto, &["info", "s3://models/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn sigint_and_sigterm_during_an_upload_abort_it_and_sigkill_publishes_nothing() {
    let Some(moto) =
        moto::start("sigint_and_sigterm_during_an_upload_abort_it_and_sigkill_publishes_nothing")
    else {
        return;
    };
    moto.bucket("models");
    // 1 GiB of f32: 128 parts of 8 MiB, interrupted mid-way (written in pieces, never held).
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("large.safetensors");
    let n: usize = 256 << 20;
    let header =
        format!("{{\"w\":{{\"dtype\":\"F32\",\"shape\":[{n}],\"data_offsets\":[0,{}]}}}}", n * 4);
    let mut header = header.into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        file.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
        file.write_all(&header).unwrap();
        let mut piece = Vec::with_capacity(4 << 20);
        for start in (0..n).step_by(1 << 20) {
            piece.clear();
            piece.extend((start..start + (1 << 20)).flat_map(|i| (i as u32).to_le_bytes()));
            file.write_all(&piece).unwrap();
        }
        file.flush().unwrap();
    }
    assert_eq!(std::fs::metadata(&input).unwrap().len(), (1 << 30) + 8 + header.len() as u64);
    for (signal, status) in [("INT", Some(130)), ("TERM", Some(143)), ("KILL", None)] {
        let url = format!("s3://models/interrupted-{signal}.zt");
        let child = s3_command(&moto, &["convert", &s(&input), &url, "--quiet"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Interrupted once the upload has begun (a part is up).
        let started = std::time::Instant::now();
        while !moto.uploads("models").contains("<UploadId>") {
            assert!(started.elapsed().as_secs() < 60, "no upload began");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), status, "{}", stderr(&out));
        if signal == "KILL" {
            // Nothing runs after SIGKILL: the parts stay (a bucket's lifecycle rule for
            // incomplete uploads removes them), and the object never appears.
            assert!(moto.uploads("models").contains("<UploadId>"), "{}", moto.uploads("models"));
        } else {
            let uploads = moto.uploads("models");
            assert!(!uploads.contains("<UploadId>"), "{uploads}\nztensor said: {}", stderr(&out));
        }
        let read = ztensor_s3(&moto, &["info", &url]);
        assert_eq!(read.status.code(), Some(2), "{url} exists: {}", stdout(&read));
    }
}

#[test]
fn an_interrupted_sharded_output_into_a_prefix_leaves_no_object() {
    let Some(moto) = moto::start("an_interrupted_sharded_output_into_a_prefix_leaves_no_object")
    else {
        return;
    };
    moto.bucket("models");
    // 12 tensors of 24 MiB: a shard each at 32 MiB a shard, published one by one.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("many.safetensors");
    let (count, n) = (12usize, 6usize << 20);
    let entries: Vec<String> = (0..count)
        .map(|k| {
            let (start, end) = (k * n * 4, (k + 1) * n * 4);
            format!(
                "\"t{k:02}\":{{\"dtype\":\"F32\",\"shape\":[{n}],\"data_offsets\":[{start},{end}]}}"
            )
        })
        .collect();
    let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        file.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
        file.write_all(&header).unwrap();
        for i in 0..count * n {
            file.write_all(&(i as u32).to_le_bytes()).unwrap();
        }
        file.flush().unwrap();
    }
    for (signal, status) in [("INT", 130), ("TERM", 143)] {
        let prefix = format!("sharded-{signal}/");
        let output = format!("s3://models/{prefix}");
        let args = ["convert", &s(&input), &output, "--shard-size", "32MiB", "--quiet"];
        let child = s3_command(&moto, &args).stdout(std::process::Stdio::null()).spawn().unwrap();
        // Interrupted once a shard is published, before the index.
        let started = std::time::Instant::now();
        while moto.keys("models", &prefix).is_empty() {
            assert!(started.elapsed().as_secs() < 60, "no shard was published");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(status), "{}", stderr(&out));
        let left = moto.keys("models", &prefix);
        assert!(left.is_empty(), "{left:?}\nztensor said: {}", stderr(&out));
        assert!(!moto.uploads("models").contains("<UploadId>"), "{}", moto.uploads("models"));
    }
    // Not interrupted: the whole checkpoint stands, index and every shard.
    let out = ztensor_s3(
        &moto,
        &["convert", &s(&input), "s3://models/sharded-whole/", "--shard-size", "32MiB", "-q"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let keys = moto.keys("models", "sharded-whole/");
    assert_eq!(keys.len(), count + 1, "{keys:?}");
    assert!(keys.iter().any(|k| k.ends_with(".index.json")), "{keys:?}");
}

#[test]
fn an_unreachable_endpoint_fails_within_the_time_bound() {
    // A port nothing listens on: every connection is refused, and retried until the bound.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["info", "s3://models/m.zt", "--remote-timeout", "3"])
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("s3://models/m.zt"), "{}", stderr(&out));
    assert!(took.as_secs() < 20, "took {took:?}: {}", stderr(&out));
    eprintln!("unreachable endpoint: {took:?}: {}", stderr(&out));
}
