//! The hostile corpus (`fixtures/hostile/`): small files that try to make the tool spend what
//! they merely claim, panic, hang, or mislead a terminal. Each is valid as far as the framing
//! goes, so the commands get past opening and into the paths that read, decode and print.
//! `crates/ztensor-cli/tests/hostile.rs` runs every command on each under an address-space cap.

use anyhow::Result;
use ztensor_format::{Component, DType, Encoding, Format, Object, Value, Version};
use ztensor_io::{StoredComponent, WriteOptions, Writer};

/// One hostile file: its name, what it tries, and its bytes.
pub struct Hostile {
    pub name: &'static str,
    pub tries: &'static str,
    pub bytes: Vec<u8>,
}

fn writer() -> Result<Writer<Vec<u8>>> {
    Ok(Writer::new(Vec::new(), Version::V1_2)?)
}

fn finish(w: Writer<Vec<u8>>) -> Result<Vec<u8>> {
    Ok(w.finish()?.0)
}

fn zstd_component(stored: &[u8], decoded: u64) -> Component {
    let mut c = Component::new(DType::U8, 0, stored.len() as u64);
    c.encoding = Encoding::Zstd;
    c.uncompressed_length = Some(decoded);
    c
}

fn dense_stored(w: &mut Writer<Vec<u8>>, name: &str, c: Component, bytes: &[u8]) -> Result<()> {
    let shape = vec![c.uncompressed_length.unwrap_or(c.length)];
    let object = Object::new(name, shape, Format::Dense);
    w.add_stored(object, &[StoredComponent { role: "data", component: c, bytes }])?;
    Ok(())
}

pub fn all() -> Result<Vec<Hostile>> {
    let mut out = Vec::new();

    // A name at the documented maximum: a table cell of 65,536 characters.
    let mut w = writer()?;
    w.add_dense(&"n".repeat(65_536), &[2], DType::U8, &[1, 2], &WriteOptions::raw())?;
    out.push(Hostile {
        name: "long-name.zt",
        tries: "a 65,536-character name in every table (std's padding stops at 65,535)",
        bytes: finish(w)?,
    });

    // Names that would act on a terminal.
    let mut w = writer()?;
    for name in ["\u{1b}[2J\u{1b}[31mred", "two\nlines", "back\rwards", "x\u{202e}txt.exe"] {
        w.add_dense(name, &[1], DType::U8, &[7], &WriteOptions::raw())?;
    }
    out.push(Hostile {
        name: "terminal-names.zt",
        tries: "escape sequences, newlines, carriage returns and a bidi override in names",
        bytes: finish(w)?,
    });

    // A seek table that claims 4 GiB per 10-byte frame, and a manifest that agrees.
    let (z1, z2) = (
        ztensor_io::codec::zstd_encode(&[1; 10], 3)?,
        ztensor_io::codec::zstd_encode(&[2; 10], 3)?,
    );
    let mut stored = [z1.clone(), z2.clone()].concat();
    let sizes = [(u32::try_from(z1.len())?, u32::MAX), (u32::try_from(z2.len())?, u32::MAX)];
    stored.extend(ztensor_io::codec::seek_table(&sizes));
    let mut w = writer()?;
    dense_stored(&mut w, "claims", zstd_component(&stored, 2 * u64::from(u32::MAX)), &stored)?;
    out.push(Hostile {
        name: "seek-table-claims-8g.zt",
        tries: "a buffer sized by a seek table (8 GiB from 100 bytes)",
        bytes: finish(w)?,
    });

    // A real bomb: 3 GiB of zeros, honestly declared, in about 100 KB.
    let bomb_len: u64 = 3 << 30;
    let bomb = zstd_of_repeated(0, bomb_len, 1)?;
    let mut w = writer()?;
    dense_stored(&mut w, "zeros", zstd_component(&bomb, bomb_len), &bomb)?;
    out.push(Hostile {
        name: "zstd-bomb-3g.zt",
        tries: "3 GiB of honest zstd output from a small stream (the decode limit must fit the machine)",
        bytes: finish(w)?,
    });

    // Sixteen objects aliasing one 8 MiB zstd blob.
    let data = vec![5u8; 8 << 20];
    let blob = ztensor_io::codec::zstd_encode(&data, 3)?;
    let bytes = aliases(&blob, data.len() as u64, 16)?;
    out.push(Hostile {
        name: "aliases-16x8m.zt",
        tries: "16 objects sharing one zstd blob (every alias decodes it again)",
        bytes,
    });

    // Many unknown keys in one object map: quadratic to check one by one.
    let mut w = writer()?;
    w.add_dense("w", &[1], DType::U8, &[1], &WriteOptions::raw())?;
    let bytes = finish(w)?;
    let mut manifest = ztensor_format::Manifest::decode(
        ztensor_format::Container::V1,
        manifest_bytes(&bytes)?,
        &ztensor_format::Limits::default(),
    )?;
    manifest.extra = (0..20_000).map(|i| (format!("x-{i:05}"), Value::Integer(i))).collect();
    out.push(Hostile {
        name: "unknown-keys-20k.zt",
        tries: "20,000 unknown root keys",
        bytes: with_manifest(&bytes, &manifest)?,
    });

    // One object with 20,000 components.
    let mut w = writer()?;
    w.add_dense("base", &[1], DType::U8, &[1], &WriteOptions::raw())?;
    let c = w.manifest().object(0)?.components["data"].clone();
    let bytes = finish(w)?;
    let mut object = Object::new("many", vec![1], Format::Unknown("hostile.many".into()));
    for i in 0..20_000 {
        object.components.insert(format!("c{i:05}"), c.clone());
    }
    out.push(Hostile {
        name: "components-20k.zt",
        tries: "one object of 20,000 components (per-component lookups are quadratic)",
        bytes: with_more_objects(&bytes, vec![object])?,
    });

    // An append cut short, with no journal to say where it began.
    let mut w = writer()?;
    w.add_dense("genuine", &[4], DType::U8, &[1, 2, 3, 4], &WriteOptions::raw())?;
    let mut torn = finish(w)?;
    torn.extend(vec![0u8; 64 - torn.len() % 64]);
    torn.extend(b"appended blob bytes, then the process died");
    out.push(Hostile {
        name: "torn-append.zt",
        tries: "an append cut short with no journal (repair --scan is offered, nothing is trusted)",
        bytes: torn,
    });

    Ok(out)
}

/// `len` bytes of `byte`, compressed at `level` as one stream fed a MiB at a time.
fn zstd_of_repeated(byte: u8, len: u64, level: i32) -> Result<Vec<u8>> {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), level)?;
    let block = vec![byte; 1 << 20];
    for _ in 0..(len >> 20) {
        std::io::Write::write_all(&mut encoder, &block)?;
    }
    Ok(encoder.finish()?)
}

/// A file of `count` objects `alias.NN` sharing one zstd `blob` that decodes to `len` bytes.
fn aliases(blob: &[u8], len: u64, count: usize) -> Result<Vec<u8>> {
    let mut w = writer()?;
    dense_stored(&mut w, "alias.00", zstd_component(blob, len), blob)?;
    let first = w.manifest().object(0)?.components["data"].clone();
    let others: Vec<Object> = (1..count)
        .map(|i| {
            let mut o = Object::new(format!("alias.{i:02}"), vec![len], Format::Dense);
            o.components.insert("data".into(), first.clone());
            o
        })
        .collect();
    with_more_objects(&finish(w)?, others)
}

/// The manifest bytes of a v1.x file.
fn manifest_bytes(file: &[u8]) -> Result<&[u8]> {
    let tail = &file[file.len() - 16..];
    let len = usize::try_from(u64::from_le_bytes(tail[..8].try_into()?))?;
    Ok(&file[file.len() - 16 - len..file.len() - 16])
}

/// `file` with its manifest replaced by `manifest` (blobs unchanged).
fn with_manifest(file: &[u8], manifest: &ztensor_format::Manifest) -> Result<Vec<u8>> {
    let old = manifest_bytes(file)?.len();
    let mut out = file[..file.len() - 16 - old].to_vec();
    let encoded = manifest.encode()?;
    out.extend(&encoded);
    out.extend(ztensor_format::Container::V1.encode_trailer(encoded.len() as u64));
    Ok(out)
}

/// `file` with `objects` added to its manifest (pointing at blobs it already has).
fn with_more_objects(file: &[u8], objects: Vec<Object>) -> Result<Vec<u8>> {
    let mut manifest = ztensor_format::Manifest::decode(
        ztensor_format::Container::V1,
        manifest_bytes(file)?,
        &ztensor_format::Limits::default(),
    )?;
    manifest.objects.extend(objects);
    with_manifest(file, &manifest)
}

/// The index: one entry per file, what it tries.
pub fn index(files: &[Hostile]) -> String {
    let mut out = String::from(
        "# Hostile inputs: every command must end cleanly (status 0, 1 or 2), within the\n\
         # address-space cap of crates/ztensor-cli/tests/hostile.rs. Generated by `cargo xtask fixtures`.\n",
    );
    for f in files {
        out.push_str(&format!(
            "\n[[file]]\nname = {:?}\ntries = {:?}\nbytes = {}\n",
            f.name,
            f.tries,
            f.bytes.len()
        ));
    }
    out
}

/// The large hostile cases: too big to commit, generated where they are measured
/// (`cargo xtask hostile-measure`). Each stays within the default limits, so a reader must take
/// it, and tries to make the tool spend far more than the file's size.
pub fn large() -> Result<Vec<Hostile>> {
    let mut out = Vec::new();

    // A million empty objects: the per-object cost of a decoded manifest.
    let mut w = writer()?;
    for i in 0..1_000_000 {
        w.add_dense(&format!("o{i:07}"), &[0], DType::U8, &[], &WriteOptions::raw())?;
    }
    out.push(Hostile {
        name: "objects-1m.zt",
        tries: "1,000,000 empty objects (the manifest's cost per object)",
        bytes: finish(w)?,
    });

    // One attribute array of 20 million one-byte integers.
    let mut w = writer()?;
    w.add_dense("w", &[1], DType::U8, &[1], &WriteOptions::raw())?;
    let bytes = finish(w)?;
    let mut manifest = ztensor_format::Manifest::decode(
        ztensor_format::Container::V1,
        manifest_bytes(&bytes)?,
        &ztensor_format::Limits::default(),
    )?;
    let array = Value::Array(vec![Value::Integer(0); 20_000_000]);
    manifest.objects[0].attributes = Some(Box::new(ztensor_format::Attributes::try_from(
        Value::Map(vec![(Value::Text("big".into()), array)]),
    )?));
    out.push(Hostile {
        name: "attribute-array-20m.zt",
        tries: "an attribute array of 20,000,000 one-byte items (the cost per value)",
        bytes: with_manifest(&bytes, &manifest)?,
    });

    // Sixteen objects aliasing one 1 GiB zstd blob.
    let len: u64 = 1 << 30;
    let bytes = aliases(&zstd_of_repeated(3, len, 3)?, len, 16)?;
    out.push(Hostile {
        name: "aliases-16x1g.zt",
        tries: "16 objects sharing one 1 GiB zstd blob (decoded once, not 16 times)",
        bytes,
    });

    // A v0.1 single-blob CSR matrix whose zstd blob decodes to 1 GiB: 2^27 row pointers, all
    // zero (every row empty), with no size stated.
    let len: u64 = 1 << 30;
    let blob = zstd_of_repeated(0, len, 3)?;
    let mut c = Component::new(DType::F32, 0, blob.len() as u64);
    c.encoding = Encoding::Zstd;
    let mut object = Object::new("m", vec![len / 8 - 1, 4], Format::SparseCsr);
    object.packing = ztensor_format::Packing::V0Single;
    let mut w = Writer::new(Vec::new(), Version::V0_1)?;
    w.add_stored(object, &[StoredComponent { role: "data", component: c, bytes: &blob }])?;
    out.push(Hostile {
        name: "csr-v0.1-1g.zt",
        tries: "a v0.1 CSR blob decoding to 1 GiB (read in pieces, each part where it lies)",
        bytes: finish(w)?,
    });

    // 20,000 objects sharing one 16 MiB zstd blob: 320 GB if every alias were decoded, copied
    // or written out on its own.
    let data = vec![0u8; 16 << 20];
    let blob = ztensor_io::codec::zstd_encode(&data, 3)?;
    let bytes = aliases(&blob, data.len() as u64, 20_000)?;
    out.push(Hostile {
        name: "aliases-20k-x16m.zt",
        tries: "20,000 objects sharing one 16 MiB zstd blob (copies keep it shared, reads \
                decode it once, targets that cannot share it are refused by what they would \
                write)",
        bytes,
    });

    // A v1.1 zstd component of 6 GiB: 1.1 has no field for the decoded size, so only the
    // shape says it.
    let len: u64 = 6 << 30;
    let blob = zstd_of_repeated(0, len, 3)?;
    let mut c = Component::new(DType::U8, 0, blob.len() as u64);
    c.encoding = Encoding::Zstd;
    let mut w = Writer::new(Vec::new(), Version::V1_1)?;
    w.add_stored(
        Object::new("w", vec![len], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &blob }],
    )?;
    out.push(Hostile {
        name: "zstd-6g-v1.1.zt",
        tries: "a zTensor 1.1 zstd component of 6 GiB, its decoded size said by the shape alone",
        bytes: finish(w)?,
    });

    // safetensors with a million empty tensors.
    let mut header = String::from("{");
    for i in 0..1_000_000 {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"t{i:07}\":{{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}"
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    out.push(Hostile {
        name: "tensors-1m.safetensors",
        tries: "a safetensors header of 1,000,000 empty tensors",
        bytes,
    });
    Ok(out)
}
