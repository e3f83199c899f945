//! Every command on every file of the hostile corpus (`fixtures/hostile/`, the foreign
//! formats' `fixtures/external/*/hostile/`, and files crafted here at test time), each run in a
//! child process under an address-space cap (`prlimit --as`, 1 GiB and 4 GiB) and a time
//! limit: the outcome must be clean, status 0, 1 or 2, never a panic, an abort, a kill or a
//! hang.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The cap: what a real machine gives, far below what the files claim (8 GiB, 3 GiB).
const ADDRESS_SPACE: u64 = 4 << 30;
/// A small machine's cap: the decode limit fitted to it (half) admits objects that a read
/// needing two or three times their size could not hold.
const SMALL: u64 = 1 << 30;

/// A zip archive of `members` (name, bytes, deflated?), laid out as any zip writer does;
/// `shared` makes every entry after the first point at the first one's data.
fn zip(members: &[(&str, &[u8], bool)], shared: bool) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    let mut first_at = None;
    for &(name, data, deflate) in members {
        let stored = if deflate {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        } else {
            data.to_vec()
        };
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let method: u16 = if deflate { 8 } else { 0 };
        let fields = |v: &mut Vec<u8>| {
            v.extend(method.to_le_bytes());
            v.extend([0; 4]);
            v.extend(crc.sum().to_le_bytes());
            v.extend(u32::try_from(stored.len()).unwrap().to_le_bytes());
            v.extend(u32::try_from(data.len()).unwrap().to_le_bytes());
            v.extend(u16::try_from(name.len()).unwrap().to_le_bytes());
            v.extend(0u16.to_le_bytes());
        };
        let at = u32::try_from(out.len()).unwrap();
        let at = if shared { *first_at.get_or_insert(at) } else { at };
        if !shared || at == u32::try_from(out.len()).unwrap() {
            out.extend(b"PK\x03\x04\x14\x00\x00\x00");
            fields(&mut out);
            out.extend(name.as_bytes());
            out.extend(&stored);
        }
        central.extend(b"PK\x01\x02\x14\x00\x14\x00\x00\x00");
        fields(&mut central);
        central.extend([0; 10]);
        central.extend(at.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let cd_at = u32::try_from(out.len()).unwrap();
    let n = u16::try_from(members.len()).unwrap();
    out.extend(&central);
    out.extend(b"PK\x05\x06\x00\x00\x00\x00");
    out.extend(n.to_le_bytes());
    out.extend(n.to_le_bytes());
    out.extend(u32::try_from(central.len()).unwrap().to_le_bytes());
    out.extend(cd_at.to_le_bytes());
    out.extend([0, 0]);
    out
}

/// A `.npy` file: `header` (a dict literal), then `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend(u16::try_from(h.len()).unwrap().to_le_bytes());
    out.extend(h);
    out.extend(data);
    out
}

/// A PyTorch checkpoint (zip layout) of one f32 storage of `numel` zeros and the views
/// `(name, shape, strides)` over it.
fn torch(numel: u64, views: &[(&str, &[u64], &[u64])]) -> Vec<u8> {
    let int = |v: u64| [&[0x8a, 8][..], &v.to_le_bytes()].concat();
    let text = |s: &str| {
        [&[b'X'][..], &u32::try_from(s.len()).unwrap().to_le_bytes(), s.as_bytes()].concat()
    };
    let tuple = |items: &[u64]| {
        let mut b = vec![b'('];
        items.iter().for_each(|&i| b.extend(int(i)));
        b.push(b't');
        b
    };
    let mut p = b"\x80\x02}(".to_vec();
    for &(name, shape, strides) in views {
        p.extend(text(name));
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        p.extend(text("storage"));
        p.extend(b"ctorch\nFloatStorage\n");
        p.extend(text("0"));
        p.extend(text("cpu"));
        p.extend(int(numel));
        p.extend(b"tQ");
        p.extend(int(0));
        p.extend(tuple(shape));
        p.extend(tuple(strides));
        p.extend(b"\x89ccollections\nOrderedDict\n)RtR");
    }
    p.extend(b"u.");
    let storage = vec![0u8; usize::try_from(numel * 4).unwrap()];
    zip(
        &[
            ("archive/data.pkl", &p, false),
            ("archive/byteorder", b"little", false),
            ("archive/data/0", &storage, false),
        ],
        false,
    )
}

/// Files made here, at test time: what the committed corpus cannot hold for its size, or
/// what needs no generator of its own.
fn crafted(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut put = |name: &str, bytes: Vec<u8>| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        files.push(path);
    };
    // A 1 MB deflated archive of a 256 MiB Fortran-ordered array: admitted under the small
    // cap's decode limit, and read in its size once.
    let side = 8192u64;
    let mut data = vec![0u8; usize::try_from(side * side * 4).unwrap()];
    for (i, b) in data.iter_mut().enumerate().step_by(4099) {
        *b = (i % 251) as u8;
    }
    let header = format!("{{'descr': '<f4', 'fortran_order': True, 'shape': ({side}, {side}), }}");
    put("fortran-256m.npz", zip(&[("w.npy", &npy(&header, &data), true)], false));
    drop(data);
    // Eight entries sharing one 32 MiB deflated stream.
    let zeros =
        npy("{'descr': '<u1', 'fortran_order': False, 'shape': (33554432,), }", &vec![0; 32 << 20]);
    let names: Vec<String> = (0..8).map(|i| format!("a{i}.npy")).collect();
    let members: Vec<(&str, &[u8], bool)> =
        names.iter().map(|n| (n.as_str(), &zeros[..], true)).collect();
    put("shared-stream.npz", zip(&members, true));
    // Sixteen bytes expanded with stride 0 into 3 GiB.
    put("expand-3g.pt", torch(4, &[("bomb", &[49152, 16384], &[0, 0]), ("w", &[4], &[1])]));
    files
}

fn corpus() -> Vec<PathBuf> {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures.join("hostile"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "zt"))
        .collect();
    for format in std::fs::read_dir(fixtures.join("external")).unwrap() {
        let hostile = format.unwrap().path().join("hostile");
        if hostile.is_dir() {
            files.extend(std::fs::read_dir(hostile).unwrap().map(|e| e.unwrap().path()));
        }
    }
    files.sort();
    files
}

/// The first object name, when the file lists.
fn first_name(file: &Path) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["ls", "--json", file.to_str()?])
        .output()
        .ok()?;
    let mut names: Vec<String> = serde_json::from_slice(&out.stdout).ok()?;
    names.sort();
    names.into_iter().next()
}

fn capped(args: &[&str]) -> (Option<i32>, String, Duration) {
    capped_at(ADDRESS_SPACE, args)
}

fn capped_at(cap: u64, args: &[&str]) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = Command::new("prlimit")
        .arg(format!("--as={cap}"))
        .args(["--", "timeout", "-s", "KILL", "120", env!("CARGO_BIN_EXE_ztensor")])
        .args(args)
        .output()
        .unwrap();
    // What the command said, on stderr and (for verify's report) stdout.
    let said = [&out.stderr[..], &out.stdout[..]].concat();
    (out.status.code(), String::from_utf8_lossy(&said).into_owned(), started.elapsed())
}

#[test]
fn every_command_ends_cleanly_on_every_hostile_file() {
    let mut files = corpus();
    assert!(files.len() >= 8 + 14, "{files:?}");
    let scratch = std::env::temp_dir().join(format!("ztensor-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let made = scratch.join("crafted");
    std::fs::create_dir_all(&made).unwrap();
    files.extend(crafted(&made));
    let out = |name: &str| scratch.join(name).to_str().unwrap().to_owned();
    let mut runs = 0;
    for file in &files {
        let f = file.to_str().unwrap();
        let name = first_name(file);
        let mut commands: Vec<Vec<String>> = vec![
            vec!["info".into(), f.into()],
            vec!["info".into(), "--json".into(), f.into()],
            vec!["ls".into(), f.into()],
            vec!["dump".into(), "--json".into(), f.into()],
            vec!["verify".into(), f.into()],
            vec!["verify".into(), "--threads".into(), "100000".into(), f.into()],
            vec!["convert".into(), f.into(), out("c.zt"), "--zstd".into(), "1".into()],
            vec!["convert".into(), f.into(), out("c.safetensors")],
            vec!["convert".into(), f.into(), out("c.tb")],
            vec!["repack".into(), f.into(), out("r.zt"), "--digest".into(), "blake3".into()],
            vec!["diff".into(), f.into(), f.into()],
        ];
        if let Some(n) = &name {
            commands.push(vec!["cat".into(), f.into(), n.clone()]);
            commands.push(vec!["extract".into(), f.into(), n.clone(), "-o".into(), out("e.npy")]);
        }
        for args in &commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            for cap in [SMALL, ADDRESS_SPACE] {
                let (code, stderr, took) = capped_at(cap, &args);
                runs += 1;
                let what =
                    format!("{args:?} under {} MiB ({:.1} s)", cap >> 20, took.as_secs_f64());
                assert!(matches!(code, Some(0..=2)), "{what}: status {code:?}\n{stderr}");
                assert!(!stderr.contains("panicked"), "{what}: {stderr}");
                assert!(!stderr.contains("memory allocation"), "{what}: {stderr}");
            }
        }
    }
    // A repair of the torn file offers the scan and changes nothing.
    let torn = scratch.join("torn.zt");
    std::fs::copy(files.iter().find(|f| f.ends_with("torn-append.zt")).unwrap(), &torn).unwrap();
    let before = std::fs::read(&torn).unwrap();
    let (code, stderr, _) = capped(&["repair", torn.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("repair --scan"), "{stderr}");
    assert_eq!(std::fs::read(&torn).unwrap(), before);
    eprintln!("{runs} capped runs on {} hostile files", files.len());
    // What the crafted files must give: the large array is read under the small cap, the
    // shared stream and the expansion refused as data faults.
    let f = |name: &str| made.join(name).to_str().unwrap().to_owned();
    let (code, said, _) = capped_at(SMALL, &["verify", &f("fortran-256m.npz")]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said, _) = capped_at(SMALL, &["verify", &f("shared-stream.npz")]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("overlap"), "{said}");
    let (code, said, _) = capped_at(SMALL, &["convert", &f("expand-3g.pt"), &out("x.zt")]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("--max-expansion"), "{said}");
    assert!(!scratch.join("x.zt").exists());
    // zTensor 2: the 1 GiB stream verifies and dumps under the small cap; the CSR that points
    // past its indices, the missing shards and the lying seek table are problems (status 1).
    let v2 = |name: &str| {
        files
            .iter()
            .find(|f| f.ends_with(format!("ztensor2/hostile/{name}")))
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    for command in ["verify", "dump"] {
        let (code, said, _) = capped_at(SMALL, &[command, &v2("seekable-1g.zt")]);
        assert_eq!(code, Some(0), "{command}: {said}");
    }
    for (name, says) in [
        ("csr-indptr-claims-2e40.zt", "csr_indptr_invalid"),
        ("shards-1000-missing.zt", "missing"),
        ("seek-table-claims-1t.zt", "a frame of 4294967295 decoded bytes"),
    ] {
        let (code, said, _) = capped_at(SMALL, &["verify", &v2(name)]);
        assert_eq!(code, Some(1), "{name}: {said}");
        assert!(said.contains(says), "{name}: {said}");
    }
    std::fs::remove_dir_all(&scratch).unwrap();
}

#[test]
fn the_3_gib_stream_is_streamed_and_only_whole_reads_are_refused() {
    // 98 KB that decode to 3 GiB of zeros. Commands that stream a component hold pieces, so
    // under a cap of 1 GiB they read it all; a read that would hold it whole is refused by the
    // limit of whole decodes, before anything is allocated.
    let bomb = corpus().into_iter().find(|f| f.ends_with("zstd-bomb-3g.zt")).unwrap();
    let b = bomb.to_str().unwrap();
    let (code, said, _) = capped_at(SMALL, &["verify", b]);
    assert_eq!(code, Some(0), "{said}");
    // The dump hashes every decoded byte: held to the expansion budget as other commands,
    // it refuses the bomb at the default ratio, and streams it when the ratio admits it.
    let (code, said, _) = capped_at(SMALL, &["dump", "--json", b]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("\"kind\":\"decoded_too_large\""), "{said}");
    let (code, said, _) = capped_at(SMALL, &["dump", "--json", b, "--max-expansion", "100000"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("\"decoded_length\":3221225472"), "{said}");
    let mut options = ztensor_format::Options::default();
    options.limits.max_whole_len = 1 << 30;
    let reader = ztensor_io::Reader::open_with(&bomb, &options).unwrap();
    let e = reader.read_object("zeros").unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::DecodedTooLarge), "{e}");
}

/// Names that come from a file reach the terminal escaped wherever they are printed: a pickle
/// global in a refusal, a shard name in `info`'s SHARD column and in errors.
#[test]
fn names_from_files_reach_the_terminal_escaped_everywhere() {
    let dir = std::env::temp_dir().join(format!("ztensor-escapes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let run =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_ztensor")).args(args).output().unwrap();
    let pickle = b"\x80\x02cos\x1b[2J\xe2\x80\xae\nsystem\n)R.";
    let pt = dir.join("calls.pt");
    std::fs::write(&pt, zip(&[("archive/data.pkl", pickle, false)], false)).unwrap();
    let out = run(&["info", pt.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(!said.contains('\u{1b}') && !said.contains('\u{202e}'), "{said:?}");
    assert!(said.contains("\\u001b[2J"), "{said}");
    // A sharded safetensors checkpoint whose shard name carries an escape sequence.
    let shard = "s\u{1b}]0;owned\u{7}.safetensors";
    let header = br#"{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#;
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend(header);
    st.extend([1, 2]);
    std::fs::write(dir.join(shard), &st).unwrap();
    let index = dir.join("model.safetensors.index.json");
    let text = serde_json::json!({"weight_map": {"w": shard}}).to_string();
    std::fs::write(&index, text).unwrap();
    let out = run(&["info", index.to_str().unwrap()]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!shown.contains('\u{1b}') && !shown.contains('\u{7}'), "{shown:?}");
    assert!(shown.contains("\\u001b]0;owned"), "{shown}");
    // And in an error naming it: the shard gone.
    std::fs::remove_file(dir.join(shard)).unwrap();
    let out = run(&["info", index.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(!said.contains('\u{1b}') && !said.contains('\u{7}'), "{said:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn names_reach_the_terminal_escaped_and_json_exact() {
    let file = corpus().into_iter().find(|f| f.ends_with("terminal-names.zt")).unwrap();
    let run =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_ztensor")).args(args).output().unwrap();
    let f = file.to_str().unwrap();
    for args in [vec!["ls", f], vec!["info", f]] {
        let out = run(&args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{202e}'));
        assert!(text.contains("two\\nlines"), "{text}");
    }
    let out = run(&["ls", "--json", f]);
    let names: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(names.contains(&"two\nlines".to_owned()), "{names:?}");
}

#[test]
fn the_object_limit_fits_the_address_space() {
    // 70,000 empty objects: accepted where memory allows, refused (not aborted) under a cap
    // whose half holds only 2^16 objects at ztensor_io::OBJECT_COST each.
    let dir = std::env::temp_dir().join(format!("ztensor-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("many.zt");
    let mut w = ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    for i in 0..70_000 {
        w.add_dense(&format!("o{i}"), &[0], ztensor_format::DType::U8, &[], &Default::default())
            .unwrap();
    }
    std::fs::write(&file, w.finish().unwrap().0).unwrap();
    let f = file.to_str().unwrap();
    let free = Command::new(env!("CARGO_BIN_EXE_ztensor")).args(["info", f]).output().unwrap();
    assert!(free.status.success(), "{}", String::from_utf8_lossy(&free.stderr));
    let cap = 128u64 << 20;
    assert!(cap / 2 / ztensor_io::OBJECT_COST <= 1 << 16);
    let out = Command::new("prlimit")
        .arg(format!("--as={cap}"))
        .args(["--", env!("CARGO_BIN_EXE_ztensor"), "info", f])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("too_many_objects"), "{said}");
    assert!(said.contains("lowered to fit this machine"), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A zstd frame decoding to `len` zero bytes (a multiple of 128 KiB) as RLE blocks, the form
/// an encoder gives a run: 4 bytes per 128 KiB, so 1 GiB takes 32 KiB.
pub(crate) fn zstd_zeros(len: u64) -> Vec<u8> {
    const BLOCK: u64 = 128 << 10;
    assert_eq!(len % BLOCK, 0);
    let mut out = 0xFD2F_B528u32.to_le_bytes().to_vec();
    // Frame header: an 8-byte content size, a 128 KiB window (log 17 = 10 + 7).
    out.push(0b1100_0000);
    out.push(7 << 3);
    out.extend_from_slice(&len.to_le_bytes());
    let blocks = len / BLOCK;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        // Last flag, type 1 (RLE), and the run's length; then the byte repeated.
        let header = last | (1 << 1) | (u32::try_from(BLOCK).unwrap() << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0);
    }
    out
}

#[test]
fn a_1_gib_zstd_tensor_streams_under_a_1_gib_cap() {
    use ztensor_format::{Component, DType, Encoding, Format, Object, Version};
    const LEN: u64 = 1 << 30;
    let scratch = std::env::temp_dir().join(format!("ztensor-stream-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let file = scratch.join("zeros-1g.zt");
    let stored = zstd_zeros(LEN);
    let mut component = Component::new(DType::U8, 0, stored.len() as u64);
    component.encoding = Encoding::Zstd;
    component.uncompressed_length = Some(LEN);
    let mut w = ztensor_io::Writer::new(Vec::new(), Version::V1_2).unwrap();
    let object = Object::new("zeros", vec![LEN], Format::Dense);
    let stored_component = ztensor_io::StoredComponent { role: "data", component, bytes: &stored };
    w.add_stored(object, &[stored_component]).unwrap();
    std::fs::write(&file, w.finish().unwrap().0).unwrap();
    let f = file.to_str().unwrap();
    let out = |name: &str| scratch.join(name).to_str().unwrap().to_owned();
    // Under an address-space cap of 1 GiB nothing may hold the decoded tensor: each command
    // streams it (a whole-tensor read would fail to allocate and exit 1).
    let (code, said, _) = capped_at(SMALL, &["verify", f]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said, _) = capped_at(SMALL, &["dump", "--json", f]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("\"decoded_length\":1073741824"), "{said}");
    let (code, said, _) = capped_at(SMALL, &["repack", f, &out("r.zt"), "--zstd", "1"]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said, _) = capped_at(SMALL, &["diff", f, &out("r.zt")]);
    assert_eq!(code, Some(0), "repacked content differs: {said}");
    std::fs::remove_dir_all(&scratch).unwrap();
}

/// A zTensor 2 manifest whose `objects` map claims 16 M entries (its 32 MB of zeros could hold
/// that many two-byte items): the one-pass parser reserves what the bytes can hold, not what
/// the count claims (16 M slots would be 1.5 GB, past the small cap), and the file is refused
/// for the rule it breaks first, its hash, not aborted.
#[test]
fn a_claimed_object_count_reserves_no_more_than_the_bytes_hold() {
    let dir = std::env::temp_dir().join(format!("ztensor-count-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("count.zt");
    let mut manifest = vec![0xa1, 0x67];
    manifest.extend_from_slice(b"objects");
    manifest.extend_from_slice(&[0xba, 0x01, 0x00, 0x00, 0x00]);
    manifest.resize(manifest.len() + (32 << 20), 0);
    let mut file = b"\x89ZT2\r\n\x1a\n".to_vec();
    file.resize(4096, 0);
    file.extend_from_slice(&manifest);
    for field in [4096u64, manifest.len() as u64, 0] {
        file.extend_from_slice(&field.to_le_bytes());
    }
    file.extend_from_slice(&2u32.to_le_bytes());
    file.extend_from_slice(&0u32.to_le_bytes());
    file.extend_from_slice(b"\x89ZT2\r\n\x1a\n");
    std::fs::write(&path, file).unwrap();
    let (status, said, _) = capped_at(SMALL, &["info", path.to_str().unwrap()]);
    assert_eq!(status, Some(1), "{said}");
    assert!(said.contains("manifest_hash"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Twenty thousand objects that each name one 16 MiB blob (a 17 MB file standing for 320 GB):
/// commands that read check the blob once; zTensor-to-zTensor copies keep the sharing (the
/// output is the input's size); and what would write or hash every alias in full (another
/// format, zTensor 2, the content identity of a file other than zTensor 2, `diff`) is refused by
/// the expansion budget, which counts what a command takes, before it starts.
#[test]
fn twenty_thousand_aliases_of_one_blob_are_read_once_and_refused_where_copied() {
    use ztensor_format::{Component, DType, Format, Manifest, Object, Version};
    const BLOB: u64 = 16 << 20;
    let dir = std::env::temp_dir().join(format!("ztensor-aliases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let blob: Vec<u8> = (0..BLOB).map(|i| (i % 251) as u8).collect();
    let mut manifest = Manifest::new(Version::V1_2);
    manifest.objects = (0..20_000)
        .map(|i| {
            Object::new(format!("a{i:05}"), vec![BLOB], Format::Dense)
                .with_component("data", Component::new(DType::U8, 64, BLOB))
        })
        .collect();
    let file = dir.join("aliases-20k-x16m.zt");
    std::fs::write(&file, crate::budgets::assemble(&manifest, &[(64, &blob)])).unwrap();
    drop((manifest, blob));
    let len = std::fs::metadata(&file).unwrap().len();
    let f = file.to_str().unwrap();
    let out = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    for args in [
        vec!["info", f],
        vec!["verify", f],
        vec!["dump", "--json", f],
        vec!["convert", f, &out("c.zt")],
        vec!["repack", f, &out("r.zt")],
        vec!["remove", f, "a00001", "-o", &out("removed.zt")],
    ] {
        let (code, said, took) = capped_at(SMALL, &args);
        assert_eq!(code, Some(0), "{args:?} ({:.1} s): {said}", took.as_secs_f64());
    }
    for copy in ["c.zt", "r.zt", "removed.zt"] {
        let copied = std::fs::metadata(dir.join(copy)).unwrap().len();
        assert!(copied <= len, "{copy}: {copied} bytes from {len}");
        std::fs::remove_file(dir.join(copy)).unwrap();
    }
    for args in [
        vec!["convert", f, &out("c2.zt"), "--to", "2"],
        vec!["convert", f, &out("c.safetensors")],
        vec!["convert", f, &out("c.tb")],
        vec!["id", f],
        vec!["diff", f, f],
    ] {
        let (code, said, took) = capped_at(SMALL, &args);
        let what = format!("{args:?} ({:.1} s)", took.as_secs_f64());
        assert_eq!(code, Some(1), "{what}: {said}");
        assert!(said.contains("decoded_too_large"), "{what}: {said}");
        assert_eq!(said.matches(f).count(), 1, "{what} names the file once: {said}");
    }
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["aliases-20k-x16m.zt"], "refused writes leave nothing behind");
    std::fs::remove_dir_all(&dir).unwrap();
}
