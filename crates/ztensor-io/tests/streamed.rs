//! Sparse objects streamed: generated CSR and COO tensors, sound and with every data rule
//! broken, in v0.1 single blobs (both byte orders) and 1.1/1.2 components, raw and zstd (1.1's
//! without a declared length, so that only the data can tell), with and without digests. Their streamed verdicts and bytes must be those of a whole read and check.

use ztensor_format::{
    ByteOrder, Component, DType, Digest, DigestAlgorithm, Format, Object, Options, Packing, Version,
};
use ztensor_io::codec::{Hasher, zstd_encode};
use ztensor_io::{Reader, StoredComponent, Writer};
use ztensor_testkit::Rng;

/// A CSR structure: row pointers and column indices, sorted within rows.
fn csr(rng: &mut Rng, rows: u64, cols: u64) -> (Vec<u64>, Vec<u64>) {
    let mut indptr = vec![0];
    let mut indices = Vec::new();
    for _ in 0..rows {
        let mut row: Vec<u64> = (0..cols).filter(|_| rng.chance(2)).collect();
        row.sort_unstable();
        indices.extend(row);
        indptr.push(indices.len() as u64);
    }
    (indptr, indices)
}

/// One of the faults the data rules catch, or none; applied to the structure before encoding.
fn break_csr(rng: &mut Rng, cols: u64, indptr: &mut [u64], indices: &mut [u64]) {
    match rng.below(8) {
        0 if !indices.is_empty() => {
            let i = rng.below(indices.len() as u64) as usize;
            indices[i] = cols + rng.below(3);
        }
        1 if indices.len() >= 2 => {
            let i = rng.below(indices.len() as u64 - 1) as usize;
            indices.swap(i, i + 1);
        }
        2 => indptr[0] = 1 + rng.below(2),
        3 if indptr.len() >= 3 => {
            let i = 1 + rng.below(indptr.len() as u64 - 2) as usize;
            indptr[i] = indptr[i - 1].saturating_sub(1) + indptr[indptr.len() - 1] + 1;
        }
        4 => {
            let last = indptr.len() - 1;
            indptr[last] += 1;
        }
        _ => {}
    }
}

fn le(values: &[u64], width: usize, big: bool) -> Vec<u8> {
    values
        .iter()
        .flat_map(|v| {
            let mut b = v.to_le_bytes()[..width].to_vec();
            if big {
                b.reverse();
            }
            b
        })
        .collect()
}

/// Stored bytes and their component: raw or zstd, with a digest (sometimes a wrong one).
fn stored(rng: &mut Rng, version: Version, dtype: DType, decoded: &[u8]) -> (Component, Vec<u8>) {
    let zstd = rng.chance(2);
    let bytes = if zstd { zstd_encode(decoded, 3).unwrap() } else { decoded.to_vec() };
    let mut c = Component::new(dtype, 0, bytes.len() as u64);
    if zstd {
        c.encoding = ztensor_format::Encoding::Zstd;
        if version == Version::V1_2 {
            c.uncompressed_length = Some(decoded.len() as u64);
        }
    }
    if version != Version::V0_1 && rng.chance(3) {
        let mut h = Hasher::new(&DigestAlgorithm::Crc32c).unwrap();
        h.update(&bytes);
        let mut d = h.finish();
        if rng.chance(4)
            && let Digest::Crc32c(v) = &mut d
        {
            *v ^= 1;
        }
        c.digest = Some(d);
    }
    (c, bytes)
}

const VALUE_TYPES: [DType; 5] = [DType::I16, DType::F32, DType::U8, DType::F64, DType::Bool];
const INDEX_TYPES: [DType; 6] =
    [DType::U64, DType::U8, DType::I32, DType::U16, DType::I16, DType::F32];

/// One generated object written into its own file; `None` when the writer refuses it (a raw
/// v0.1 blob whose size fits no structure breaks a manifest rule, checked before any data).
fn file(rng: &mut Rng, version: Version) -> Option<Vec<u8>> {
    let mut w = Writer::new(Vec::new(), version).unwrap();
    let coo = rng.chance(2);
    let rows = rng.below(5);
    let cols = 1 + rng.below(5);
    let value = VALUE_TYPES[rng.below(VALUE_TYPES.len() as u64) as usize];
    let vsize = value.size() as usize;
    let value_of = |rng: &mut Rng| {
        let mut b = vec![0u8; vsize];
        b[0] = if value == DType::Bool {
            u8::from(rng.chance(2)) + u8::from(rng.chance(12)) * 7
        } else {
            rng.next_u64() as u8
        };
        b
    };
    if version == Version::V0_1 {
        let big = rng.chance(2);
        let mut blob = Vec::new();
        let (object, shape);
        if coo {
            let rank = 1 + rng.below(3) as usize;
            shape = (0..rank).map(|_| 1 + rng.below(4)).collect::<Vec<u64>>();
            for _ in 0..rng.below(6) {
                for &dim in &shape {
                    let c = if rng.chance(10) { dim + rng.below(2) } else { rng.below(dim) };
                    blob.extend(le(&[c], 8, big));
                }
                let mut v = value_of(rng);
                if big {
                    v.reverse();
                }
                blob.extend(v);
            }
            object = Format::SparseCoo;
        } else {
            shape = vec![rows, cols];
            let (mut indptr, mut indices) = csr(rng, rows, cols);
            break_csr(rng, cols, &mut indptr, &mut indices);
            blob.extend(le(&indptr, 8, big));
            blob.extend(le(&indices, 8, big));
            for _ in 0..indices.len() {
                blob.extend(value_of(rng));
            }
            object = Format::SparseCsr;
        }
        if rng.chance(8) {
            blob.truncate(blob.len().saturating_sub(1 + rng.below(9) as usize));
        }
        let mut o = Object::new("s", shape, object);
        o.packing = Packing::V0Single;
        let (mut c, bytes) = stored(rng, version, value, &blob);
        if big {
            c.set_byte_order(ByteOrder::Big);
        }
        w.add_stored(o, &[StoredComponent { role: "data", component: c, bytes: &bytes }]).ok()?;
        return Some(w.finish().unwrap().0);
    }
    let index = |rng: &mut Rng| {
        if rng.chance(3) {
            INDEX_TYPES[rng.below(INDEX_TYPES.len() as u64) as usize]
        } else {
            DType::U64
        }
    };
    let mut parts: Vec<(&str, DType, Vec<u8>)> = Vec::new();
    let (format, shape, nnz);
    if coo {
        let rank = 1 + rng.below(3) as usize;
        shape = (0..rank).map(|_| 1 + rng.below(4)).collect::<Vec<u64>>();
        let n = rng.below(6) as usize;
        let mut coords = vec![0u64; rank * n];
        for (d, &dim) in shape.iter().enumerate() {
            for i in 0..n {
                coords[d * n + i] =
                    if rng.chance(10) { dim + rng.below(2) } else { rng.below(dim) };
            }
        }
        if rng.chance(8) {
            coords.pop();
        }
        let t = index(rng);
        let mut bytes = le(&coords, t.size() as usize, false);
        if t.is_integer() && rng.chance(6) && !bytes.is_empty() {
            let at = bytes.len() - 1;
            bytes[at] |= 0x80;
        }
        parts.push(("coords", t, bytes));
        (format, nnz) = (Format::SparseCoo, n);
    } else {
        shape = vec![rows, cols];
        let (mut indptr, mut indices) = csr(rng, rows, cols);
        break_csr(rng, cols, &mut indptr, &mut indices);
        if rng.chance(10) {
            indptr.pop();
        }
        let (ti, tp) = (index(rng), index(rng));
        let mut ib = le(&indices, ti.size() as usize, false);
        if rng.chance(10) {
            ib.push(0);
        }
        let w = ti.size() as usize;
        if ti.is_integer() && rng.chance(8) && ib.len() >= w {
            ib[w - 1] |= 0x80;
        }
        parts.push(("indices", ti, ib));
        parts.push(("indptr", tp, le(&indptr, tp.size() as usize, false)));
        (format, nnz) = (Format::SparseCsr, indices.len());
    }
    let n = if rng.chance(10) { nnz + 1 } else { nnz };
    let values: Vec<u8> = (0..n).flat_map(|_| value_of(rng)).collect();
    parts.push(("values", value, values));
    let stored: Vec<(&str, Component, Vec<u8>)> = parts
        .into_iter()
        .map(|(role, dtype, decoded)| {
            let (c, bytes) = stored(rng, version, dtype, &decoded);
            (role, c, bytes)
        })
        .collect();
    let components: Vec<StoredComponent<'_>> = stored
        .iter()
        .map(|(role, c, bytes)| StoredComponent { role, component: c.clone(), bytes })
        .collect();
    w.add_stored(Object::new("s", shape, format), &components).ok()?;
    Some(w.finish().unwrap().0)
}

#[test]
fn generated_sparse_objects_stream_to_the_whole_verdict() {
    let mut rng = Rng::new(0x5eed_cafe);
    let (mut sound, mut faulty) = (0, 0);
    for round in 0..4500 {
        let version = [Version::V0_1, Version::V1_1, Version::V1_2][round % 3];
        let Some(file) = file(&mut rng, version) else { continue };
        for strict in [false, true] {
            let mut options = Options::default();
            options.strict = strict;
            let reader = Reader::new(&file[..], &options).unwrap();
            let o = reader.object("s").unwrap();
            let whole = o.read_verified().and_then(|data| o.check(&data).map(|()| data));
            let mut pieces: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
            let streamed = o.read_pieces(64, |role, bytes| {
                pieces.entry(role.to_owned()).or_default().extend_from_slice(bytes);
                Ok(())
            });
            let at = format!("round {round} {version} strict={strict}");
            match whole {
                Ok(data) => {
                    assert_eq!(o.verify().map_err(|e| e.to_string()), Ok(()), "{at}");
                    let decoded = streamed.unwrap_or_else(|e| panic!("{at}: {e}"));
                    // What it says each part decoded to is what the whole read gives.
                    let said: Vec<(&str, DType, u64)> =
                        decoded.iter().map(|d| (d.role.as_str(), d.dtype, d.len)).collect();
                    let whole: Vec<(&str, DType, u64)> = data
                        .components
                        .iter()
                        .map(|(r, c)| (r.as_str(), c.dtype, c.bytes.len() as u64))
                        .collect();
                    assert_eq!(said, whole, "{at}");
                    for (role, c) in &data.components {
                        let got = pieces.get(role).map_or(&[][..], Vec::as_slice);
                        assert_eq!(got, &c.bytes[..], "{at} {role}");
                    }
                    sound += 1;
                }
                Err(e) => {
                    let want = Err(e.to_string());
                    assert_eq!(o.verify().map_err(|e| e.to_string()), want, "{at}");
                    assert_eq!(streamed.map(drop).map_err(|e| e.to_string()), want, "{at}");
                    faulty += 1;
                }
            }
        }
    }
    assert!(sound > 1000 && faulty > 1000, "{sound} sound, {faulty} faulty");
}

/// Written part by part, a sound object gives the very bytes the whole-object path gives, in
/// 0.1, 1.1 and 1.2, raw and in zstd frames (small ones, so that components span several and get a
/// seek table), with and without a digest; one that breaks a rule is refused, as the whole
/// path refuses it once it checks.
#[test]
fn objects_written_part_by_part_are_the_whole_writes() {
    use ztensor_io::{TensorSource, WriteOptions, write_data, write_source_object};
    let mut rng = Rng::new(0xb1e55ed);
    let (mut same, mut refused, mut v0_csr) = (0, 0, 0);
    for round in 0..1500 {
        let version = [Version::V0_1, Version::V1_1, Version::V1_2][round % 3];
        let Some(file) = file(&mut rng, version) else { continue };
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let target = [Version::V0_1, Version::V1_1, Version::V1_2][round / 3 % 3];
        let mut options = match round % 3 {
            0 => WriteOptions::raw(),
            _ => WriteOptions { chunk_size: Some(16 + rng.below(40)), ..WriteOptions::zstd(3) },
        };
        if rng.chance(2) {
            options = options.with_digest(DigestAlgorithm::Blake3);
        }
        let whole = (|| {
            let data = reader.read(0)?;
            reader.check(0, &data)?;
            let mut w = Writer::new(Vec::new(), target)?;
            write_data(&mut w, &data, &options)?;
            Ok::<_, ztensor_io::Error>(w.finish()?.0)
        })();
        let streamed = (|| {
            let mut w = Writer::new(Vec::new(), target)?;
            let held = write_source_object(&mut w, &reader, 0, None, &options)?;
            // Into 0.1 a COO tensor's records interleave values and coordinates: packed whole.
            if target != Version::V0_1 || reader.info(0).unwrap().format != Format::SparseCoo {
                assert_eq!(held.whole, 0, "round {round}: streamed, nothing held whole");
            }
            Ok::<_, ztensor_io::Error>(w.finish()?.0)
        })();
        match (whole, streamed) {
            (Ok(a), Ok(b)) => {
                assert!(a == b, "round {round} {version} -> {target}: the bytes differ");
                same += 1;
                let csr = reader.info(0).unwrap().format == Format::SparseCsr;
                v0_csr += usize::from(target == Version::V0_1 && csr);
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.rule(), b.rule(), "round {round}: {a} / {b}");
                refused += 1;
            }
            (a, b) => panic!("round {round}: whole {:?}, streamed {:?}", a.err(), b.err()),
        }
    }
    assert!(same > 400 && refused > 100, "{same} the same, {refused} refused");
    assert!(v0_csr > 50, "{v0_csr} CSR matrices streamed into 0.1");
}

/// On every object of every fixture, a copy re-encoded part by part (`copy_object`) is the
/// copy the whole-object path writes, byte for byte, or both refuse with the same rule.
#[test]
fn fixture_objects_copied_part_by_part_are_the_whole_copies() {
    use ztensor_io::{Compression, CopyOptions, DigestChoice, copy_object, write_data};
    let mut compared = 0;
    for (n, path) in crate::handles::fixture_files().iter().enumerate() {
        let Ok(reader) = Reader::open(path) else { continue };
        let target = [Version::V0_1, Version::V1_1, Version::V1_2][n % 3];
        let copy = CopyOptions {
            compression: Some([Compression::Raw, Compression::Zstd(1)][n / 3 % 2]),
            digest: DigestChoice::Set(DigestAlgorithm::Crc32c),
            chunk_size: Some(1 << 10),
            ..CopyOptions::default()
        };
        for o in reader.objects() {
            // Small objects only (the hostile ones decode to gigabytes in 1 KiB frames); those
            // whose size only decoding tells are in the generated test above.
            let decoded: Option<u64> = o.entry().decoded_lens().map(|(_, n)| n).sum();
            if decoded.is_none_or(|n| n > 1 << 20) {
                continue;
            }
            let options = ztensor_io::low_level::write_options_for(o.model(), &copy);
            let whole = (|| {
                let data = o.read_verified()?;
                o.check(&data)?;
                let mut w = Writer::new(Vec::new(), target)?;
                write_data(&mut w, &data, &options)?;
                Ok::<_, ztensor_io::Error>(w.finish()?.0)
            })();
            let parts = (|| {
                let mut w = Writer::new(Vec::new(), target)?;
                copy_object(o, &mut w, &copy)?;
                Ok::<_, ztensor_io::Error>(w.finish()?.0)
            })();
            let at = format!("{} {:?} -> {target}", path.display(), o.name());
            match (whole, parts) {
                (Ok(a), Ok(b)) => {
                    assert!(a == b, "{at}: the bytes differ");
                    compared += 1;
                }
                (Err(a), Err(b)) => assert_eq!(a.rule(), b.rule(), "{at}: {a} / {b}"),
                (a, b) => panic!("{at}: whole {:?}, part by part {:?}", a.err(), b.err()),
            }
        }
    }
    assert!(compared > 400, "{compared}");
}
