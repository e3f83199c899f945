use super::*;

/// The naive gather: each element read where its index puts it.
#[allow(clippy::cast_possible_truncation)]
fn gathered(span: &[u8], size: usize, shape: &[u64], strides: &[u64]) -> Vec<u8> {
    let numel = shape.iter().product();
    let mut out = Vec::new();
    each_offset(shape, strides, numel, |at| {
        let at = at as usize * size;
        out.extend_from_slice(&span[at..at + size]);
        Ok(())
    })
    .unwrap();
    out
}

#[test]
#[allow(clippy::cast_possible_truncation)]
fn in_place_permutation_and_the_moving_window_equal_the_naive_gather() {
    // Views whose span holds each element once: transposes and axis permutations.
    let cases: &[(&[u64], &[u64])] = &[
        (&[3, 5], &[1, 3]),
        (&[4, 3, 2], &[1, 4, 12]),
        (&[2, 3, 4], &[12, 1, 3]),
        (&[7, 1, 6], &[1, 42, 7]),
        (&[1], &[1]),
    ];
    for &(shape, strides) in cases {
        for size in [1usize, 2, 4, 8] {
            let numel: u64 = shape.iter().product();
            let span: Vec<u8> = (0..numel as usize * size).map(|i| (i * 7 + 3) as u8).collect();
            let want = gathered(&span, size, shape, strides);
            let mut got = span.clone();
            permute_in_place(&mut got, size, shape, strides).unwrap();
            assert_eq!(got, want, "{shape:?} {strides:?} {size}");
            // The window, over a source holding the span after some other bytes.
            let source = [vec![9u8; 5], span.clone()].concat();
            let mut window = Window::new(5, span.len() as u64);
            let mut moved = Vec::new();
            each_offset(shape, strides, numel, |at| {
                moved.extend_from_slice(window.get(&&source[..], at * size as u64, size)?);
                Ok(())
            })
            .unwrap();
            assert_eq!(moved, want);
        }
    }
    // Not a permutation (an element twice): refused, not a wrong value.
    let mut data = vec![0u8; 4];
    assert!(permute_in_place(&mut data, 1, &[2, 2], &[1, 1]).is_err());
}

/// A zip archive of `members` (name, bytes, deflated?), as any zip writer lays it out.
fn zip(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
    members
        .iter()
        .fold(ztensor_testkit::Zip::new(), |z, &(name, data, deflate)| {
            z.member(name, data, deflate)
        })
        .finish()
}

fn int(v: u64) -> Vec<u8> {
    let mut b = vec![0x8a, 8];
    b.extend(v.to_le_bytes());
    b
}

fn text(s: &str) -> Vec<u8> {
    let mut b = vec![b'X'];
    b.extend(u32::try_from(s.len()).unwrap().to_le_bytes());
    b.extend(s.as_bytes());
    b
}

fn tuple(items: &[u64]) -> Vec<u8> {
    let mut b = vec![b'('];
    items.iter().for_each(|&i| b.extend(int(i)));
    b.push(b't');
    b
}

/// A state dict pickle of f32 views `(name, offset, shape, strides)` over storage "0".
fn state_dict(numel: u64, views: &[(&str, u64, &[u64], &[u64])]) -> Vec<u8> {
    let mut p = b"\x80\x02}(".to_vec();
    for &(name, offset, shape, strides) in views {
        p.extend(text(name));
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        p.extend(text("storage"));
        p.extend(b"ctorch\nFloatStorage\n");
        p.extend(text("0"));
        p.extend(text("cpu"));
        p.extend(int(numel));
        p.extend(b"tQ");
        p.extend(int(offset));
        p.extend(tuple(shape));
        p.extend(tuple(strides));
        p.extend(b"\x89ccollections\nOrderedDict\n)RtR");
    }
    p.extend(b"u.");
    p
}

fn floats(t: &TorchFile<Vec<u8>>, name: &str) -> Vec<f32> {
    let data = t.read(t.find(name).unwrap()).unwrap();
    data.components["data"]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn views_read_the_elements_they_show_by_every_path() {
    let numel = 5_000_001u64;
    let storage: Vec<u8> = (0..numel).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let views: &[(&str, u64, &[u64], &[u64])] = &[
        // A size-1 dimension may carry any stride.
        ("odd", 1, &[2, 1], &[2, 1 << 62]),
        // A compact span: read once, then gathered.
        ("every_30th", 0, &[3], &[30]),
        ("transposed", 0, &[2, 2], &[1, 2]),
        // Three elements over 20 MB: each read where it lies.
        ("strewn", 0, &[3], &[2_500_000]),
        ("expand", 7, &[2, 3], &[0, 0]),
        // Every element of a 20 MB span once, reordered: permuted in place.
        ("transposed_large", 0, &[2000, 2500], &[1, 2000]),
        // Contiguous rows of a larger span: read a row at a time.
        ("rows", 0, &[1200, 2000], &[4000, 1]),
    ];
    let pickle = state_dict(numel, views);
    for deflate in [false, true] {
        let file = zip(&[
            ("archive/data.pkl", &pickle, false),
            ("archive/byteorder", b"little", false),
            ("archive/data/0", &storage, deflate),
        ]);
        let t = TorchFile::new(file, "x", 1 << 30).unwrap();
        assert_eq!(floats(&t, "odd"), [1.0, 3.0]);
        assert_eq!(floats(&t, "every_30th"), [0.0, 30.0, 60.0]);
        assert_eq!(floats(&t, "transposed"), [0.0, 2.0, 1.0, 3.0]);
        assert_eq!(floats(&t, "strewn"), [0.0, 2_500_000.0, 5_000_000.0]);
        assert_eq!(floats(&t, "expand"), [7.0; 6]);
        let want: Vec<f32> =
            (0..2000).flat_map(|i| (0..2500).map(move |j| (i + j * 2000) as f32)).collect();
        assert!(floats(&t, "transposed_large") == want);
        let want: Vec<f32> =
            (0..1200).flat_map(|i| (0..2000).map(move |j| (i * 4000 + j) as f32)).collect();
        assert!(floats(&t, "rows") == want);
    }
}

/// A few bytes expanded with stride 0 into gigabytes: admitted by the per-object limit
/// when that is large, refused by the input's expansion budget before anything is read.
#[test]
fn a_stride_zero_expansion_is_refused_by_the_expansion_budget() {
    let storage = [0u8; 16];
    let views: &[(&str, u64, &[u64], &[u64])] =
        &[("bomb", 0, &[1 << 16, 1 << 14], &[0, 0]), ("w", 0, &[4], &[1])];
    let file = zip(&[
        ("archive/data.pkl", &state_dict(4, views), false),
        ("archive/data/0", &storage, false),
    ]);
    let len = file.len() as u64;
    let t = TorchFile::new(file, "x", 1 << 40).unwrap();
    let limits = ztensor_format::Limits::default();
    let e = ztensor_io::check_expansion(&t, len, &limits).unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::DecodedTooLarge));
    assert!(e.to_string().contains("\"bomb\""), "{e}");
    // Without the bomb the same file is within budget.
    let file = zip(&[
        ("archive/data.pkl", &state_dict(4, &views[1..]), false),
        ("archive/data/0", &storage, false),
    ]);
    let len = file.len() as u64;
    let t = TorchFile::new(file, "x", 1 << 40).unwrap();
    assert_eq!(ztensor_io::check_expansion(&t, len, &limits).unwrap(), 16);
}

#[test]
fn views_that_claim_more_than_the_limit_or_their_storage_are_refused() {
    let storage = [0u8; 16];
    let refused = |views: &[(&str, u64, &[u64], &[u64])], limit| {
        let file = zip(&[
            ("archive/data.pkl", &state_dict(4, views), false),
            ("archive/data/0", &storage, false),
        ]);
        match TorchFile::new(file, "x", limit) {
            Err(e) => e.to_string(),
            Ok(t) => t.read(0).unwrap_err().to_string(),
        }
    };
    assert!(refused(&[("w", 0, &[1 << 40], &[0])], 1 << 30).contains("limit"));
    assert!(refused(&[("w", 1, &[4], &[1])], 1 << 30).contains("past its storage"));
    assert!(refused(&[("w", 0, &[2, 2], &[2, 2])], 1 << 30).contains("past its storage"));
}
