use super::*;
use ztensor_io::{TensorSink, TensorSource};

/// Every tensor of the files other software wrote (NumPy, GGUF, PyTorch, safetensors),
/// read in pieces, is the bytes a whole read gives, or fails as it fails.
#[test]
fn pieces_are_the_whole_read_on_files_other_software_wrote() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("external"), root.join("examples")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                files.push(p);
            }
        }
    }
    let mut compared = 0;
    for file in &files {
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or_default();
        let source: Box<dyn TensorSource> = match ext {
            "npy" => match ztensor_foreign::npy_in::NpyFile::open(file) {
                Ok(f) => Box::new(f),
                Err(_) => continue,
            },
            "npz" => match ztensor_foreign::npz::NpzFile::open(file) {
                Ok(f) => Box::new(f),
                Err(_) => continue,
            },
            "gguf" => match ztensor_foreign::gguf::GgufFile::open(file) {
                Ok(f) => Box::new(f),
                Err(_) => continue,
            },
            "pt" => match ztensor_foreign::torch::TorchFile::open(file) {
                Ok(f) => Box::new(f),
                Err(_) => continue,
            },
            "safetensors" => match SafetensorsFile::open(file) {
                Ok(f) => Box::new(f),
                Err(_) => continue,
            },
            _ => continue,
        };
        for i in 0..source.len() {
            let whole = source.read(i);
            let mut pieces: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
            let streamed = source.read_pieces(i, 1000, &mut |role, bytes| {
                assert!(bytes.len() <= 1000);
                pieces.entry(role.to_owned()).or_default().extend_from_slice(bytes);
                Ok(())
            });
            match (&whole, &streamed) {
                (Ok(data), Ok(())) => {
                    for (role, c) in &data.components {
                        let got = pieces.get(role).map_or(&[][..], Vec::as_slice);
                        assert_eq!(got, &c.bytes[..], "{} #{i} {role}", file.display());
                    }
                    compared += 1;
                }
                (Err(_), Err(_)) => {}
                _ => panic!(
                    "{} #{i}: whole {:?}, pieces {:?}",
                    file.display(),
                    whole.err(),
                    streamed.err()
                ),
            }
        }
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn a_sink_refuses_what_it_cannot_hold_before_writing_anything() {
    // A packed FP4 tensor after a plain one: nothing at all is written, not the first half.
    let f32s: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let views = vec![
        ("a", TensorView::new(Dtype::F32, vec![2], &f32s).unwrap()),
        ("z", TensorView::new(Dtype::F4, vec![4], &[0x21, 0x43]).unwrap()),
    ];
    let st = safetensors::serialize(views, None).unwrap();
    let file = SafetensorsFile::new(&st[..]).unwrap();
    assert!(file.info(1).unwrap().unsupported.is_none());
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let par = ParOptions::with_threads(2);
    let err = ztensor_par::ZtSink::new(&mut w, WriteOptions::raw(), &par, &())
        .write_all(&file)
        .unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::Unrepresentable), "{err}");
    assert!(err.to_string().contains("write zTensor 2"), "{err}");
    assert!(w.manifest().is_empty());
    // Carried as bytes, both go in, and the export restores the original file exactly.
    let file = file.carry_unknown_dtypes(true);
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    assert_eq!(
        ztensor_par::ZtSink::new(&mut w, WriteOptions::zstd(1), &par, &())
            .write_all(&file)
            .unwrap(),
        2
    );
    let zt = w.finish().unwrap().0;
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let (result, back) = exported(&reader, false);
    result.unwrap();
    assert_eq!(back, st);
}
