use super::*;

fn chunk(offsets: &[u64], sizes: &[u64]) -> Chunk {
    Chunk { object: String::new(), offsets: offsets.to_vec(), sizes: sizes.to_vec() }
}

#[test]
fn a_grid_tiles_and_anything_else_is_named() {
    let grid = [
        chunk(&[0, 0], &[2, 3]),
        chunk(&[0, 3], &[2, 1]),
        chunk(&[2, 0], &[1, 3]),
        chunk(&[2, 3], &[1, 1]),
    ];
    tiles("t", &[3, 4], &grid).unwrap();
    let hole = &grid[..3];
    assert!(tiles("t", &[3, 4], hole).unwrap_err().message().contains("hole"));
    let overlap = [chunk(&[0, 0], &[2, 4]), chunk(&[1, 0], &[2, 4])];
    assert!(tiles("t", &[3, 4], &overlap).unwrap_err().message().contains("overlap"));
    let twice = [chunk(&[0, 0], &[3, 4]), chunk(&[0, 0], &[3, 4])];
    assert!(tiles("t", &[3, 4], &twice).unwrap_err().message().contains("overlap"));
    // Not a grid, but a partition: accepted; the same with an overlap is not.
    let rows = [chunk(&[0, 0], &[2, 4]), chunk(&[2, 0], &[1, 1]), chunk(&[2, 1], &[1, 3])];
    tiles("t", &[3, 4], &rows).unwrap();
    let crossed = [chunk(&[0, 0], &[2, 4]), chunk(&[1, 0], &[2, 1]), chunk(&[2, 1], &[1, 3])];
    assert!(tiles("t", &[3, 4], &crossed).unwrap_err().message().contains("overlap"));
    let short = [chunk(&[0], &[3])];
    assert!(
        tiles("t", &[4], &short).unwrap_err().message().contains("hole in dimension 0: 3 to 4")
    );
}

/// Chunks in memory, as a tensor source: each a dense u8 tensor.
struct Chunks(Vec<(String, Vec<u64>, Vec<u8>)>);

impl TensorSource for Chunks {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("chunks")
    }
    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        None
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (name, shape, bytes) = self.0.get(index)?;
        Some(ObjectInfo {
            name: Cow::Borrowed(name),
            shape: Cow::Borrowed(shape),
            format: Format::Dense,
            attributes: None,
            components: vec![ComponentInfo {
                role: Cow::Borrowed(ztensor_io::role::DATA),
                dtype: StorageType::Known(DType::U8),
                logical_type: None,
                decoded_len: Some(bytes.len() as u64),
                stored_len: bytes.len() as u64,
                offset: None,
                encoding: Encoding::Raw,
                digest: None,
            }],
            unsupported: None,
            location: None,
        })
    }
    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (name, shape, bytes) = &self.0[index];
        let data =
            ComponentData { dtype: DType::U8, logical_type: None, bytes: Cow::Borrowed(bytes) };
        Ok(ObjectData {
            name: name.clone(),
            shape: shape.clone(),
            format: Format::Dense,
            attributes: None,
            components: BTreeMap::from([(ztensor_io::role::DATA.to_owned(), data)]),
        })
    }
}

#[test]
fn a_tensor_split_by_rows_is_read_a_grid_row_at_a_time() {
    // A 4x3 tensor of u8 0..12: rows 0-1 in one chunk, rows 2-3 split by columns (no
    // grid: a partition all the same).
    let cut = |r: std::ops::Range<u64>, c: std::ops::Range<u64>| -> Vec<u8> {
        r.flat_map(|i| c.clone().map(move |j| u8::try_from(i * 3 + j).unwrap())).collect()
    };
    let inner = Chunks(vec![
        ("t@0,0".into(), vec![2, 3], cut(0..2, 0..3)),
        ("t@2,0".into(), vec![2, 2], cut(2..4, 0..2)),
        ("t@2,2".into(), vec![2, 1], cut(2..4, 2..3)),
    ]);
    let layout = Chunked {
        tensors: vec![ChunkedTensor {
            name: "t".into(),
            dtype: "uint8".into(),
            shape: vec![4, 3],
            chunks: vec![
                Chunk { object: "t@0,0".into(), offsets: vec![0, 0], sizes: vec![2, 3] },
                Chunk { object: "t@2,0".into(), offsets: vec![2, 0], sizes: vec![2, 2] },
                Chunk { object: "t@2,2".into(), offsets: vec![2, 2], sizes: vec![2, 1] },
            ],
        }],
        other: vec!["step".into()],
    };
    let whole = Stitched::new(inner, &layout).unwrap();
    let full: Vec<u8> = (0..12).collect();
    assert_eq!(whole.read(0).unwrap().components["data"].bytes.as_ref(), full.as_slice());
    assert!(whole.reads_in_pieces(0));
    // Handed over a grid row at a time: never more than half the tensor at once.
    let mut pieces = Vec::new();
    whole
        .read_pieces(0, usize::MAX, &mut |_, piece| {
            pieces.push(piece.to_vec());
            Ok(())
        })
        .unwrap();
    assert_eq!(pieces.iter().map(Vec::len).collect::<Vec<_>>(), [6, 6]);
    assert_eq!(pieces.concat(), full);
    assert_eq!(whole.left_out(), ["step"]);
}

/// A 4x6 tensor of u8 0..24 in two chunks of three columns each, the second chunk's bytes
/// given as `second` (its shape says 4x3).
fn by_columns(second: Vec<u8>) -> Stitched<Chunks> {
    let cut = |c: std::ops::Range<u64>| -> Vec<u8> {
        (0..4u64).flat_map(|i| c.clone().map(move |j| u8::try_from(i * 6 + j).unwrap())).collect()
    };
    let inner =
        Chunks(vec![("t@0,0".into(), vec![4, 3], cut(0..3)), ("t@0,3".into(), vec![4, 3], second)]);
    let layout = Chunked {
        tensors: vec![ChunkedTensor {
            name: "t".into(),
            dtype: "uint8".into(),
            shape: vec![4, 6],
            chunks: vec![
                Chunk { object: "t@0,0".into(), offsets: vec![0, 0], sizes: vec![4, 3] },
                Chunk { object: "t@0,3".into(), offsets: vec![0, 3], sizes: vec![4, 3] },
            ],
        }],
        other: vec![],
    };
    Stitched::new(inner, &layout).unwrap()
}

fn pieces(whole: &Stitched<Chunks>, piece: usize) -> ztensor_io::Result<Vec<Vec<u8>>> {
    let mut pieces = Vec::new();
    whole.read_pieces(0, piece, &mut |_, p| {
        pieces.push(p.to_vec());
        Ok(())
    })?;
    Ok(pieces)
}

#[test]
fn a_tensor_split_by_columns_is_handed_over_a_few_rows_at_a_time() {
    let second: Vec<u8> = (0..4u8).flat_map(|i| (3..6u8).map(move |j| i * 6 + j)).collect();
    let whole = by_columns(second);
    let full: Vec<u8> = (0..24).collect();
    assert_eq!(whole.read(0).unwrap().components["data"].bytes.as_ref(), full.as_slice());
    assert!(whole.reads_in_pieces(0));
    // A row (6 bytes) at a time, then two rows (12 bytes) at a time: never the tensor.
    let rows = pieces(&whole, 6).unwrap();
    assert_eq!(rows.iter().map(Vec::len).collect::<Vec<_>>(), [6, 6, 6, 6]);
    assert_eq!(rows.concat(), full);
    let pairs = pieces(&whole, 13).unwrap();
    assert_eq!(pairs.iter().map(Vec::len).collect::<Vec<_>>(), [12, 12]);
    assert_eq!(pairs.concat(), full);
    // A piece larger than the tensor: one piece, stitched as before.
    assert_eq!(pieces(&whole, 1 << 20).unwrap(), [full]);
    // A failing consumer stops the readers and gives its own error.
    let mut taken = 0;
    let stopped = whole.read_pieces(0, 6, &mut |_, _| {
        taken += 1;
        if taken == 2 { Err(ztensor_io::Error::failed("full disk")) } else { Ok(()) }
    });
    assert!(stopped.unwrap_err().to_string().contains("full disk"));
}

#[test]
fn a_streamed_chunk_of_other_than_its_shape_is_named() {
    let short = by_columns(vec![0; 9]);
    let e = pieces(&short, 6).unwrap_err().to_string();
    assert!(e.contains("\"t@0,3\" ended before the bytes of its shape"), "{e}");
    let long = by_columns(vec![0; 15]);
    let e = pieces(&long, 6).unwrap_err().to_string();
    assert!(e.contains("\"t@0,3\" holds more than the bytes of its shape"), "{e}");
}

#[test]
fn chunks_are_placed_where_their_offsets_say() {
    // A 3x4 tensor of u8 0..12, in the four chunks of the grid above.
    let full: Vec<u8> = (0..12).collect();
    let cut = |r: std::ops::Range<usize>, c: std::ops::Range<usize>| -> Vec<u8> {
        r.flat_map(|i| c.clone().map(move |j| u8::try_from(i * 4 + j).unwrap())).collect()
    };
    let mut out = vec![0u8; 12];
    place(&mut out, &[3, 4], 1, &[0, 0], &[2, 3], &cut(0..2, 0..3));
    place(&mut out, &[3, 4], 1, &[0, 3], &[2, 1], &cut(0..2, 3..4));
    place(&mut out, &[3, 4], 1, &[2, 0], &[1, 3], &cut(2..3, 0..3));
    place(&mut out, &[3, 4], 1, &[2, 3], &[1, 1], &cut(2..3, 3..4));
    assert_eq!(out, full);
    let mut scalar = vec![0u8; 4];
    place(&mut scalar, &[], 4, &[], &[], &[1, 2, 3, 4]);
    assert_eq!(scalar, [1, 2, 3, 4]);
}

/// A chunk for [`in_rows`]: its offsets, its sizes (its shape) and its bytes.
type Piece = (Vec<u64>, Vec<u64>, Vec<u8>);

/// A tensor of `shape` whose one dimension `chunks` split in order (each chunk's bytes as
/// given, its shape as stated).
fn in_rows(shape: &[u64], chunks: Vec<Piece>) -> Stitched<Chunks> {
    let named: Vec<(String, Piece)> = chunks
        .into_iter()
        .map(|(offsets, sizes, bytes)| (format!("t@{offsets:?}"), (offsets, sizes, bytes)))
        .collect();
    let inner =
        Chunks(named.iter().map(|(n, (_, s, b))| (n.clone(), s.clone(), b.clone())).collect());
    let layout = Chunked {
        tensors: vec![ChunkedTensor {
            name: "t".into(),
            dtype: "uint8".into(),
            shape: shape.to_vec(),
            chunks: named
                .iter()
                .map(|(n, (o, s, _))| Chunk {
                    object: n.clone(),
                    offsets: o.clone(),
                    sizes: s.clone(),
                })
                .collect(),
        }],
        other: vec![],
    };
    Stitched::new(inner, &layout).unwrap()
}

#[test]
fn a_grid_row_that_is_one_chunk_streams_from_it() {
    // Rank 1, in chunks of 3 and 2: handed over from each chunk in pieces of at most 2.
    let whole =
        in_rows(&[5], vec![(vec![0], vec![3], vec![0, 1, 2]), (vec![3], vec![2], vec![3, 4])]);
    assert!(whole.reads_in_pieces(0));
    let got = pieces(&whole, 2).unwrap();
    assert!(got.iter().all(|p| p.len() <= 2), "{got:?}");
    assert_eq!(got.concat(), [0, 1, 2, 3, 4]);
    // A tensor of no dimensions: its one chunk is all of it.
    let scalar = in_rows(&[], vec![(vec![], vec![], vec![9])]);
    assert!(scalar.reads_in_pieces(0));
    assert_eq!(pieces(&scalar, 4).unwrap().concat(), [9]);
    // A chunk whose bytes are not those of its shape is named, short or long.
    let short = in_rows(
        &[4, 2],
        vec![(vec![0, 0], vec![2, 2], vec![0; 3]), (vec![2, 0], vec![2, 2], vec![0; 4])],
    );
    let e = pieces(&short, 64).unwrap_err().to_string();
    assert!(e.contains("chunk \"t@[0, 0]\" ended before the bytes of its shape"), "{e}");
    let long = in_rows(
        &[4, 2],
        vec![(vec![0, 0], vec![2, 2], vec![0; 4]), (vec![2, 0], vec![2, 2], vec![0; 5])],
    );
    let e = pieces(&long, 64).unwrap_err().to_string();
    assert!(e.contains("chunk \"t@[2, 0]\" holds more than the bytes of its shape"), "{e}");
}
