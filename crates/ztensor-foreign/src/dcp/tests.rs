use super::*;

/// Writes pickles of DCP's records opcode by opcode (protocol 2), as DCP's own would be
/// built, so a test can share values between records as a hostile writer would.
struct Writer(Vec<u8>);

const MD: &str = "torch.distributed.checkpoint.metadata";
const FS: &str = "torch.distributed.checkpoint.filesystem";

impl Writer {
    fn new() -> Writer {
        Writer(vec![0x80, 2])
    }
    fn str(&mut self, s: &str) -> &mut Writer {
        self.0.push(b'X');
        self.0.extend(u32::try_from(s.len()).unwrap().to_le_bytes());
        self.0.extend(s.as_bytes());
        self
    }
    fn int(&mut self, v: i32) -> &mut Writer {
        self.0.push(b'J');
        self.0.extend(v.to_le_bytes());
        self
    }
    fn op(&mut self, ops: &[u8]) -> &mut Writer {
        self.0.extend_from_slice(ops);
        self
    }
    /// `PUT key` of the top of the stack.
    fn put(&mut self, key: u32) -> &mut Writer {
        self.0.push(b'r');
        self.0.extend(key.to_le_bytes());
        self
    }
    /// `GET key`.
    fn get(&mut self, key: u32) -> &mut Writer {
        self.0.push(b'j');
        self.0.extend(key.to_le_bytes());
        self
    }
    /// An empty record of `module.class` on the stack (its state follows, then `BUILD`).
    fn record(&mut self, module: &str, class: &str) -> &mut Writer {
        self.0.push(b'c');
        self.0.extend(format!("{module}\n{class}\n").as_bytes());
        self.op(b")\x81")
    }
}

/// A `.metadata` of one tensor entry per name in `entries` (each written by `entry`) and
/// one storage record per chunk (each written by `storage`).
fn metadata(
    prelude: impl FnOnce(&mut Writer),
    entries: usize,
    mut entry: impl FnMut(&mut Writer, usize),
    storages: usize,
    mut storage: impl FnMut(&mut Writer, usize),
) -> Vec<u8> {
    let mut w = Writer::new();
    prelude(&mut w);
    w.record(MD, "Metadata").op(b"}(").str("state_dict_metadata").op(b"}");
    for i in 0..entries {
        w.op(b"(").str(&format!("t{i}"));
        entry(&mut w, i);
        w.op(b"u");
    }
    w.str("storage_data").op(b"}");
    for i in 0..storages {
        w.op(b"(");
        storage(&mut w, i);
        w.op(b"u");
    }
    w.op(b"ub.");
    w.0
}

/// A `TensorStorageMetadata` of a float32 `[4]` tensor whose one chunk's offsets are
/// written by `offsets`.
fn tensor(w: &mut Writer, offsets: impl FnOnce(&mut Writer)) {
    w.record(MD, "TensorStorageMetadata").op(b"}(").str("properties");
    w.record(MD, "TensorProperties").op(b"ctorch\nfloat32\n\x85b");
    w.str("size").op(b"(").int(4).op(b"t").str("chunks").op(b"(");
    w.record(MD, "ChunkStorageMetadata").op(b"}(").str("offsets");
    offsets(w);
    w.str("sizes").op(b"(").int(4).op(b"tub");
    w.op(b"lub");
}

/// A `MetadataIndex` → `_StorageInfo` pair for tensor `i`, its file name written by `file`.
fn stored(w: &mut Writer, i: usize, file: impl FnOnce(&mut Writer)) {
    w.record(MD, "MetadataIndex").op(b"}(").str("fqn").str(&format!("t{i}"));
    w.str("offset").op(b"(").int(0).op(b"t").str("index").int(0).op(b"ub");
    w.record(FS, "_StorageInfo").op(b"}(").str("relative_path");
    file(w);
    w.str("offset").int(0).str("length").int(16).op(b"ub");
}

#[test]
fn written_records_read_as_dcp_writes_them() {
    // The writer above is right: a checkpoint of three plain tensors reads back.
    let bytes = metadata(
        |_| {},
        3,
        |w, _| {
            tensor(w, |w| {
                w.op(b"(").int(0).op(b"t");
            })
        },
        3,
        |w, i| {
            stored(w, i, |w| {
                w.str("__0_0.distcp");
            })
        },
    );
    let layout = read_layout(&bytes).unwrap();
    assert_eq!(layout.tensors.len(), 3);
    assert_eq!(layout.tensors[2].chunks[0].file, "__0_0.distcp");
    assert_eq!(layout.tensors[2].shape, [4]);
}

#[test]
fn a_shared_tuple_is_not_copied_into_every_record() {
    // One 100,000-int tuple, memoized, as the offsets of 20,000 chunks: 2 billion ints if
    // each record copied it. Offsets are one per dimension, so it is refused at once.
    let prelude = |w: &mut Writer| {
        w.op(b"(");
        for i in 0..100_000 {
            w.int(i);
        }
        w.op(b"t").put(0).op(b"0");
    };
    let bytes = metadata(
        prelude,
        20_000,
        |w, _| {
            tensor(w, |w| {
                w.get(0);
            })
        },
        20_000,
        |w, i| {
            stored(w, i, |w| {
                w.str("f");
            })
        },
    );
    let started = std::time::Instant::now();
    let e = read_layout(&bytes).unwrap_err().to_string();
    assert!(e.contains("of 100000 dimensions"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn a_shared_path_is_paid_for_at_each_copy() {
    // A 1 MiB file name, memoized, named by 20,000 storage records: 20 GB if each record
    // copied it freely. Each copy is charged to the pickle's budget, which refuses.
    let long = "p".repeat(1 << 20);
    let prelude = |w: &mut Writer| {
        w.str(&long).put(0).op(b"0");
    };
    let bytes = metadata(
        prelude,
        20_000,
        |w, _| {
            tensor(w, |w| {
                w.op(b"(").int(0).op(b"t");
            })
        },
        20_000,
        |w, i| {
            stored(w, i, |w| {
                w.get(0);
            })
        },
    );
    let e = read_layout(&bytes).unwrap_err().to_string();
    assert!(e.contains("far more than its size explains"), "{e}");
}

#[test]
fn fields_of_a_large_shared_state_are_found_without_a_scan() {
    // 100,000 records whose state is one memoized dict of 200,000 keys, the fields DCP
    // reads last: a scan per field per record would compare 60 billion keys.
    let prelude = |w: &mut Writer| {
        w.op(b"}").put(0).op(b"(");
        for i in 0..200_000 {
            w.str(&format!("k{i}")).op(b"N");
        }
        w.str("properties");
        w.record(MD, "TensorProperties").op(b"ctorch\nfloat32\n\x85b");
        w.str("size").op(b")").str("chunks").op(b"]").op(b"u0");
    };
    let entry = |w: &mut Writer, _| {
        w.record(MD, "TensorStorageMetadata").get(0).op(b"b");
    };
    let bytes = metadata(prelude, 100_000, entry, 0, |_, _| {});
    let started = std::time::Instant::now();
    let layout = read_layout(&bytes).unwrap();
    assert_eq!(layout.tensors.len(), 100_000);
    assert!(layout.tensors.iter().all(|t| t.chunks.is_empty() && t.shape.is_empty()));
    // Linear: well under a second in a release build; the bound only catches a scan.
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
}

#[test]
fn a_compressed_chunk_decodes_no_further_than_it_declares() {
    // A chunk declared float32 [4] (16 bytes) whose archive decodes to 64 MiB: refused once
    // past its declared size and the archive's framing, not at the machine's limit.
    let bomb = ztensor_io::codec::zstd_encode(&vec![0u8; 64 << 20], 3).unwrap();
    let chunk = DcpChunk {
        offsets: vec![0],
        sizes: vec![4],
        file: "__0_0.distcp".into(),
        offset: 0,
        length: bomb.len() as u64,
        zstd: true,
    };
    let layout = DcpLayout {
        tensors: vec![DcpTensor {
            name: "w".into(),
            dtype: "float32".into(),
            shape: vec![4],
            chunks: vec![chunk],
        }],
        other: Vec::new(),
    };
    let chunks = DcpChunks::open(&layout, |_| Ok(bomb.clone())).unwrap();
    assert_eq!(chunks.info(0).unwrap().components[0].decoded_len, Some(16));
    let Err(e) = chunks.read(0) else { panic!("a 64 MiB archive read for 16 bytes") };
    let text = e.to_string();
    assert!(text.contains(&format!("{}", 16 + ARCHIVE_FRAMING)), "{text}");
    // Complex chunks declare twice their storage dtype's elements.
    let complex = declared_len(
        &[3],
        ztensor_format::DType::F32,
        Some(&ztensor_format::LogicalType::Complex64),
    );
    assert_eq!(complex, Some(24));
    assert_eq!(declared_len(&[u64::MAX, 2], ztensor_format::DType::U8, None), None);
}

#[test]
fn a_flood_of_containers_is_refused_by_its_bytes() {
    // 12 MB of EMPTY_DICT: ~860 MB of values if counted by items; refused by bytes.
    let mut bytes = vec![0x80, 2];
    bytes.resize(12_000_000, b'}');
    bytes.push(b'.');
    let e = read_layout(&bytes).unwrap_err().to_string();
    assert!(e.contains("far more than its size explains"), "{e}");
}
