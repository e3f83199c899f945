//! Each command opens its input once: the file is told and read through one descriptor. The
//! kernel counts: an inotify watch on the input sees every `open` of it by the command's
//! process, whatever opened it (detection, the format's reader, a map).

use ztensor_testkit::Opens;

use super::{root, scratch, stderr, ztensor};

#[test]
fn every_command_opens_its_input_once() {
    let dir = scratch("opens");
    // Files other software wrote, copied so that no other test's reads are counted.
    let inputs = [
        ("producers/v1.2/reference-1.2.3/dense-dtypes.zt", "in.zt"),
        ("examples/tiny-v0.1.zt", "old.zt"),
        ("producers/v2/reference-2.1.1/examples-tiny-v1.2.zt", "two.zt"),
        ("external/tensorbuffers-sample.tb", "in.tb"),
        ("external/numpy/dense-f4.npy", "in.npy"),
        ("external/gguf/plain.gguf", "in.gguf"),
        ("external/pytorch/checkpoint.pt", "in.pt"),
    ];
    let mut files = Vec::new();
    for (from, to) in inputs {
        std::fs::copy(root().join("fixtures").join(from), dir.join(to)).unwrap();
        files.push(dir.join(to));
    }
    // And a safetensors file.
    let st = dir.join("in.safetensors");
    let out = ztensor(&["convert", files[0].to_str().unwrap(), st.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    files.push(st);

    let mut checked = 0;
    for (i, input) in files.iter().enumerate() {
        let file = input.to_str().unwrap();
        let out_zt = dir.join(format!("out{i}.zt"));
        let out_st = dir.join(format!("out{i}.safetensors"));
        let out_2 = dir.join(format!("out{i}-2.zt"));
        let shards = format!("{}/shards{i}/", dir.display());
        let repacked = dir.join(format!("repacked{i}.zt"));
        let mut commands: Vec<Vec<&str>> = vec![
            vec!["info", file],
            vec!["info", "--json", file],
            vec!["ls", file],
            vec!["verify", file],
            vec!["id", file],
            vec!["convert", file, out_zt.to_str().unwrap()],
            vec!["convert", file, out_2.to_str().unwrap(), "--to", "2"],
            vec!["convert", file, &shards, "--shard-size", "1k"],
        ];
        if input.extension().is_some_and(|e| e == "zt") && !file.ends_with("two.zt") {
            commands.push(vec!["repack", file, repacked.to_str().unwrap()]);
        }
        // safetensors cannot hold every dtype of every input: only the opens are counted.
        let lenient = vec!["convert", file, out_st.to_str().unwrap()];
        let watch = Opens::watch(input);
        for args in commands.iter().chain([&lenient]) {
            let out = ztensor(args);
            if args != &lenient {
                assert!(out.status.success(), "{args:?}: {}", stderr(&out));
            }
            assert_eq!(watch.take(), 1, "{args:?} opened {file} other than once");
            checked += 1;
        }
        // A failed command opens it once too: a name that is not there.
        let out = ztensor(&["cat", file, "no such tensor"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert_eq!(watch.take(), 1, "cat of a missing tensor opened {file} other than once");
        // The watch sees opens at all: the test's own counts as one.
        drop(std::fs::File::open(input).unwrap());
        assert_eq!(watch.take(), 1);
    }
    assert!(checked >= 9 * 8, "{checked} commands checked");
}
