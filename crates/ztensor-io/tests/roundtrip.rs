//! Zero-copy views on maps and slices, and many threads on one reader. Write → read identity
//! for every version, dtype, format, encoding and digest, through every kind of source, is
//! property-tested (and exhaustively tested) in `ztensor-conformance`, on its model generator.

use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{DigestCheck, FileSource, Reader, WriteOptions, Writer};

/// `n` little-endian u32 values from `seed`.
fn elements(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .flat_map(|i| (seed.wrapping_mul(0x9e37_79b9).wrapping_add(i * 7919) as u32).to_le_bytes())
        .collect()
}

#[test]
fn zero_copy_views_on_maps_and_slices() {
    let values = [1.5f32, -2.0, 3.25];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("v", &[3], DType::F32, &bytes, &WriteOptions::raw()).unwrap();
    w.add_dense("z", &[3], DType::F32, &bytes, &WriteOptions::zstd(3)).unwrap();
    let (file, _) = w.finish().unwrap();
    // A Vec's buffer is at least 8-aligned in practice, and blobs are 64-aligned within it.
    let reader = Reader::new(file.clone(), &Options::default()).unwrap();
    assert_eq!(reader.component("v", "data").and_then(|c| c.view::<f32>()).unwrap(), values);
    assert_eq!(
        reader.component("v", "data").and_then(|c| c.view::<u8>()).unwrap_err().to_string(),
        "no zero-copy view: f32 data cannot be viewed as u8"
    );
    assert!(matches!(
        reader.component("z", "data").and_then(|c| c.view::<f32>()).unwrap_err().kind(),
        ztensor_io::ErrorKind::View(_)
    ));
    assert_eq!(reader.component("z", "data").and_then(|c| c.read_as::<f32>()).unwrap(), values);
    // A file source has no memory to borrow from.
    let dir = ztensor_testkit::scratch("io-view");
    let path = dir.join("v.zt");
    std::fs::write(&path, &file).unwrap();
    let reader = Reader::new(
        FileSource::new(std::fs::File::open(&path).unwrap()).unwrap(),
        &Options::default(),
    )
    .unwrap();
    assert!(matches!(
        reader.component("v", "data").and_then(|c| c.view::<f32>()).unwrap_err().kind(),
        ztensor_io::ErrorKind::View(_)
    ));
    assert_eq!(reader.component("v", "data").and_then(|c| c.read_as::<f32>()).unwrap(), values);
}

#[test]
fn many_threads_read_one_reader() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let mut expected = Vec::new();
    for i in 0..32u64 {
        let data = elements(1000 + i as usize, i);
        let options = if i % 2 == 0 { WriteOptions::zstd(1) } else { WriteOptions::raw() };
        w.add_dense(
            &format!("t{i}"),
            &[1000 + i],
            DType::U32,
            &data,
            &options.with_digest(DigestAlgorithm::Crc32c),
        )
        .unwrap();
        expected.push(data);
    }
    let (file, _) = w.finish().unwrap();
    let dir = ztensor_testkit::scratch("io-threads");
    let path = dir.join("t.zt");
    std::fs::write(&path, &file).unwrap();
    let reader = Reader::open(&path).unwrap();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (reader, expected) = (&reader, &expected);
            scope.spawn(move || {
                for round in 0..4 {
                    for i in (0..32).map(|i| (i + t * 5 + round) % 32) {
                        let name = format!("t{i}");
                        assert_eq!(
                            reader
                                .component(&name, "data")
                                .and_then(|c| c.decoded())
                                .unwrap()
                                .as_ref(),
                            &expected[i][..]
                        );
                        assert!(matches!(
                            reader.component(&name, "data").and_then(|c| c.verify()).unwrap(),
                            DigestCheck::Verified(_)
                        ));
                    }
                }
            });
        }
    });
}
