//! `ztensor convert`: zTensor (every version), safetensors (single and sharded) and
//! TensorBuffers, in any direction we can represent.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, anyhow};
use ztensor_foreign::safetensors::SafetensorsSink;
use ztensor_io::{CopyOptions, Excluding, FileWriter, TensorSink, TensorSource};
use ztensor_par::ZtSink;
use ztensor_tensorbuffers::TbSink;

use super::Kind;
use super::repack::Bar;
use crate::{Encoding, Rejected, Run, Target};

/// One conversion.
pub struct Request<'a> {
    pub input: &'a Path,
    pub output: &'a Path,
    pub target: Target,
    pub drop_attributes: bool,
    /// Globs of object names to leave out.
    pub exclude: &'a [String],
    /// Carry safetensors tensors of dtypes zTensor lacks as bytes.
    pub carry_unknown: bool,
    pub encoding: &'a Encoding,
    pub run: &'a Run,
    /// Write a sharded checkpoint into the output directory, split so.
    pub sharded: Option<ztensor_shard_write::Split>,
    /// Remove the sharded checkpoint the output directory holds first, instead of refusing.
    pub force: bool,
}

/// The plan of a sharded conversion of `r` (the output a directory).
pub fn plan_of(
    r: &Request<'_>,
    split: ztensor_shard_write::Split,
    source: &dyn TensorSource,
) -> Result<ztensor_shard_write::Plan> {
    let Target::Zt(version) = r.target else {
        anyhow::bail!(
            "a directory output is a sharded zTensor checkpoint; {} is not zTensor",
            r.target
        )
    };
    let mut options = ztensor_shard_write::PlanOptions::new(version, &r.encoding.fresh());
    options.drop_attributes = r.drop_attributes;
    options.carry_unknown_dtypes = r.carry_unknown;
    let plan = ztensor_shard_write::plan(r.input, source, r.output, options, split, &|name| {
        excluded(r.exclude, name)
    })
    // The plan refuses shards and an index that would replace a file it reads.
    .map_err(|e| crate::reported("cannot plan", &e))?;
    Ok(plan)
}

/// What a conversion wrote.
#[derive(Debug)]
pub struct Converted {
    /// How many objects.
    pub objects: usize,
    /// For zTensor targets, the most bytes the engine held in flight.
    pub peak: Option<u64>,
    /// For a sharded output, the index written.
    pub index: Option<std::path::PathBuf>,
    /// For a zTensor file, what its writer was given.
    pub tally: Option<ztensor_io::Tally>,
    /// The decoded bytes written, for outputs without a tally.
    pub decoded: Option<u64>,
    /// For a sharded zTensor 2 output, what was written (the root and its shards).
    pub sharded_2: Option<ztensor_v2::sharded::ShardedSummary>,
    /// What the user is to be told besides: objects larger than `--shard-size`, attributes
    /// `--drop-attributes` dropped.
    pub notes: Vec<String>,
}

/// The objects of `plan` larger than `split` allows, each in a shard of its own: a note, or
/// none.
pub fn oversized(
    plan: &ztensor_shard_write::Plan,
    split: ztensor_shard_write::Split,
) -> Option<String> {
    let ztensor_shard_write::Split::Size(limit) = split else { return None };
    let big: Vec<String> = plan
        .units
        .iter()
        .filter(|u| u.bytes > limit && u.objects.len() == 1)
        .map(|u| format!("{} ({})", super::text::shown(&u.objects[0]), super::text::size(u.bytes)))
        .collect();
    if big.is_empty() {
        return None;
    }
    Some(format!(
        "{} larger than --shard-size {} and each in a shard of its own: {}",
        if big.len() == 1 {
            "1 object is".to_owned()
        } else {
            format!("{} objects are", big.len())
        },
        super::text::size_given(limit),
        listed(&big)
    ))
}

/// `items` joined by commas, the first 10, then how many more.
pub(super) fn listed(items: &[String]) -> String {
    let mut text = items.iter().take(10).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > 10 {
        text.push_str(&format!(" and {} more", items.len() - 10));
    }
    text
}

/// What `--drop-attributes` says when the output holds every attribute the input had.
const NOTHING_DROPPED: &str = "--drop-attributes: nothing was dropped";

/// What `--drop-attributes` dropped, found by reading the output back and comparing its
/// attributes with the input's: the file's keys that are gone, and the keys of objects' own
/// attributes that are gone (with how many objects lost some).
pub fn dropped(input: &dyn TensorSource, output: &Path) -> Result<String> {
    let written = crate::open_source(output)?;
    let keys = |a: Option<&ztensor_format::Attributes>| -> std::collections::BTreeSet<String> {
        a.map(|a| {
            a.entries()
                .map(|(k, _)| {
                    k.as_text().map_or_else(
                        || super::text::json_line(k),
                        |t| super::text::shown(t).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let before = input.try_attributes().map_err(|e| anyhow!("{e}"))?;
    let after = written.try_attributes().map_err(|e| anyhow!("{e}"))?;
    let file: Vec<String> =
        keys(before.as_deref()).difference(&keys(after.as_deref())).cloned().collect();
    let mut by_name = std::collections::HashMap::new();
    for i in 0..written.len() {
        if let Some(o) = written.info(i) {
            by_name.insert(o.name.into_owned(), keys(o.attributes.as_deref()));
        }
    }
    let (mut objects, mut object_keys) = (0usize, std::collections::BTreeSet::new());
    for i in 0..input.len() {
        let Some(o) = input.info(i) else { continue };
        let Some(kept) = by_name.get(o.name.as_ref()) else { continue };
        let gone: Vec<String> = keys(o.attributes.as_deref()).difference(kept).cloned().collect();
        if !gone.is_empty() {
            objects += 1;
            object_keys.extend(gone);
        }
    }
    if file.is_empty() && objects == 0 {
        return Ok(NOTHING_DROPPED.to_owned());
    }
    let mut parts = Vec::new();
    if !file.is_empty() {
        parts.push(format!("the file's {}", listed(&file)));
    }
    if objects > 0 {
        let keys: Vec<String> = object_keys.into_iter().collect();
        parts.push(format!(
            "{} of {} ({})",
            if keys.len() == 1 { "the attribute" } else { "the attributes" },
            super::text::plural(objects, "object"),
            listed(&keys)
        ));
    }
    Ok(format!("--drop-attributes dropped {}", parts.join("; ")))
}

/// `convert IN OUTDIR/`: every shard and the index, in this process.
fn sharded(r: &Request<'_>, split: ztensor_shard_write::Split, context: &str) -> Result<Converted> {
    if r.target == Target::Zt2 {
        return sharded_2(r, split, context);
    }
    let source = crate::open_source_with(r.input, r.carry_unknown)?;
    let plan = plan_of(r, split, &*source)?;
    let cleared = super::outdir::clear(r, &plan)?;
    let bar = Bar::new(plan.units.iter().map(|u| u.bytes).sum(), r.run.quiet);
    let done = ztensor_shard_write::write_all(&plan, &*source, &r.run.par(), &bar);
    bar.finish();
    let index = done.map_err(|e| crate::refusal(context, &e))?;
    let objects = plan.units.iter().map(|u| u.objects.len()).sum();
    let decoded = plan.units.iter().map(|u| u.bytes).sum();
    let notes = cleared.into_iter().chain(oversized(&plan, split)).collect();
    Ok(Converted {
        objects,
        peak: None,
        index: Some(index),
        sharded_2: None,
        tally: None,
        decoded: Some(decoded),
        notes,
    })
}

/// A sharded zTensor 2 output: in the output directory, a root named after the input
/// (`model.zt`) with its shard table, and the shards at their positional names
/// (`model-00001-of-00003.zt`), each a canonical file of its own. `--shard-size` splits the
/// objects in name order; without it, a sharded zTensor or safetensors checkpoint's shards
/// are kept as they are, and any other input's objects (a zTensor 2 root's too) go in one
/// shard.
fn sharded_2(
    r: &Request<'_>,
    split: ztensor_shard_write::Split,
    context: &str,
) -> Result<Converted> {
    let kind = super::detect(r.input)?;
    let opened = crate::sources::open_kind(r.input, kind, r.carry_unknown)?;
    // Every file the input is read from: none may be replaced by the output.
    let mut inputs: Vec<std::path::PathBuf> = opened.files().to_vec();
    inputs.push(r.input.to_path_buf());
    let opened = crate::sources::expansion_checked(r.input, opened)?;
    let filtered = Excluding::new(&*opened, |name| excluded(r.exclude, name));
    let source: &dyn TensorSource = &filtered;
    let groups = match split {
        ztensor_shard_write::Split::Size(limit) => {
            ztensor_v2::sharded::split_by_size(source, limit)
        }
        // A single file's objects, in one shard.
        // A sharded checkpoint's own shards, each one's objects (those not excluded) in one;
        // a single file's objects in one shard.
        ztensor_shard_write::Split::LikeInput
            if matches!(kind, Kind::ZtIndex | Kind::SafetensorsIndex) =>
        {
            // Each object's location is its shard's file name.
            let shards = &inputs[..inputs.len() - 1];
            let at: std::collections::HashMap<&str, usize> = shards
                .iter()
                .enumerate()
                .filter_map(|(k, p)| Some((p.file_name()?.to_str()?, k)))
                .collect();
            let mut groups = vec![Vec::new(); shards.len()];
            for i in 0..source.len() {
                let info = source.info(i);
                let shard = info.as_ref().and_then(|o| at.get(o.location.as_deref()?));
                let Some(&k) = shard else {
                    anyhow::bail!(
                        "{}: object {i} lies in no shard the index lists",
                        r.input.display()
                    )
                };
                groups[k].push(i);
            }
            groups
        }
        ztensor_shard_write::Split::LikeInput => vec![(0..source.len()).collect()],
    };
    let stem = ztensor_shard_write::output_stem(r.input);
    let root = r.output.join(format!("{stem}.zt"));
    for path in ztensor_v2::sharded::sharded_paths(&root, groups.len()) {
        for input in &inputs {
            super::not_over(input, &path, "a zTensor 2 shard")?;
        }
    }
    let cleared = super::outdir::clear_2(r, &inputs)?;
    // A failed or interrupted write takes back what it made: its files and the directory.
    let guard = ztensor_shard_write::OutputGuard::create(r.output)
        .map_err(|e| anyhow!("cannot create {}: {e}", r.output.display()))?;
    for path in ztensor_v2::sharded::sharded_paths(&root, groups.len()) {
        if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
            guard.adding(name);
        }
    }
    let total = (0..source.len()).filter_map(|i| source.info(i)).map(|o| super::decoded_of(&o));
    let bar = std::sync::Arc::new(Bar::new(total.sum(), r.run.quiet));
    let tick = std::sync::Arc::clone(&bar);
    let options = ztensor_v2::WriteOptions::default()
        .drop_attributes(r.drop_attributes)
        .zstd(r.encoding.zstd)
        .par(r.run.par())
        .progress(std::sync::Arc::new(move |n| ztensor_par::Progress::bytes_done(&*tick, n)));
    let summary = ztensor_v2::sharded::write_sharded(source, &root, &groups, &options);
    bar.finish();
    let summary = summary.map_err(|e| crate::refusal(context, &e))?;
    guard.keep();
    let mut notes: Vec<String> = cleared.into_iter().collect();
    if r.drop_attributes {
        notes.push(dropped(source, &root)?);
    }
    Ok(Converted {
        objects: summary.objects,
        peak: None,
        index: None,
        decoded: Some(summary.decoded),
        sharded_2: Some(summary),
        tally: None,
        notes,
    })
}

/// Writes `source` through the engine into `writer` (a file's or an upload's), returning the
/// writer, the most bytes held in flight and what the writer was given.
fn zt_into<W: Write, M: std::borrow::BorrowMut<ztensor_io::Writer<W>>>(
    r: &Request<'_>,
    source: &dyn TensorSource,
    mut writer: M,
    context: &str,
) -> Result<(M, (u64, ztensor_io::Tally))> {
    let total = (0..source.len()).filter_map(|i| source.info(i)).map(|o| super::decoded_of(&o));
    let bar = Bar::new(total.sum(), r.run.quiet);
    let par = r.run.par();
    let copy = CopyOptions { drop_attributes: r.drop_attributes, ..r.encoding.copy() };
    let mut sink = ZtSink::new(writer.borrow_mut(), r.encoding.fresh(), &par, &bar)
        .drop_attributes(r.drop_attributes)
        .copying(copy);
    let done = sink.write_all(source);
    bar.finish();
    done.map_err(|e| crate::refusal(context, &e))?;
    let peak = sink.stats().peak_in_flight;
    drop(sink);
    let tally = writer.borrow().tally();
    Ok((writer, (peak, tally)))
}

/// Runs the conversion, returning what it wrote. Every input is read through the
/// tensor-source interface and every output written through a sink; the zTensor sink carries
/// the objects of a zTensor input as `repack` does (stored bytes copied as they are where the
/// target holds them and no re-encoding is asked for).
pub fn run(r: &Request<'_>) -> Result<Converted> {
    let context = format!("cannot convert {} to {}", r.input.display(), r.target);
    if let Some(split) = r.sharded {
        return sharded(r, split, &context);
    }
    // zTensor to zTensor may rewrite a file in place (as `repack` and `remove` do: the output
    // is published by a rename, and nothing decodes more than the input holds); anything else
    // would replace the user's file (or a shard of it) with another format.
    let opened = match (super::detect(r.input)?, r.target) {
        (Kind::Zt, Target::Zt(_)) => crate::sources::open_any(r.input, r.carry_unknown)?.1,
        _ => crate::open_source_for(r.input, r.output, &r.target.to_string(), r.carry_unknown)?,
    };
    let filtered = Excluding::new(&*opened, |name| excluded(r.exclude, name));
    let source: &dyn TensorSource = &filtered;
    let mut peak = None;
    let mut tally = None;
    let remote_out = crate::remote::url_of(r.output);
    if remote_out.is_some() && !matches!(r.target, Target::Zt(_) | Target::Safetensors) {
        return Err(anyhow!(
            "{}: {} is not written to object storage yet (zTensor 1.x and safetensors are); \
             write a local file",
            r.output.display(),
            r.target
        ));
    }
    match r.target {
        Target::Zt(version) => {
            let (made_peak, made_tally) = match remote_out {
                Some(url) => {
                    let writer = ztensor_io::Writer::new(crate::remote::upload(url)?, version)
                        .map_err(|e| anyhow!("{e}"))?;
                    let (writer, made) = zt_into(r, source, writer, &context)?;
                    let (upload, _) = writer.finish().map_err(|e| anyhow!("{e}"))?;
                    crate::remote::publish(url, upload)?;
                    made
                }
                None => {
                    let mut writer =
                        FileWriter::create(r.output, version).map_err(|e| anyhow!("{e}"))?;
                    let (_, made) = zt_into(r, source, writer.writer_mut(), &context)?;
                    writer.finish().map_err(|e| anyhow!("{e}"))?;
                    made
                }
            };
            peak = Some(made_peak);
            tally = Some(made_tally);
        }
        Target::Zt2 => {
            let total =
                (0..source.len()).filter_map(|i| source.info(i)).map(|o| super::decoded_of(&o));
            let bar = std::sync::Arc::new(Bar::new(total.sum(), r.run.quiet));
            let tick = std::sync::Arc::clone(&bar);
            let options = ztensor_v2::WriteOptions::default()
                .drop_attributes(r.drop_attributes)
                .zstd(r.encoding.zstd)
                .par(r.run.par())
                .progress(std::sync::Arc::new(move |n| {
                    ztensor_par::Progress::bytes_done(&*tick, n);
                }));
            let done = ztensor_v2::Zt2Sink::new(r.output).with_options(options).write_all(source);
            bar.finish();
            done.map_err(|e| crate::refusal(&context, &e))?;
        }
        Target::Safetensors => match remote_out {
            Some(url) => {
                let mut sink = SafetensorsSink::to_writer(crate::remote::upload(url)?)
                    .drop_attributes(r.drop_attributes);
                sink.write_all(source).map_err(|e| crate::refusal(&context, &e))?;
                if let Some(upload) = sink.into_inner() {
                    crate::remote::publish(url, upload)?;
                }
            }
            None => {
                SafetensorsSink::new(r.output)
                    .drop_attributes(r.drop_attributes)
                    .write_all(source)
                    .map_err(|e| crate::refusal(&context, &e))?;
            }
        },
        Target::TensorBuffers => {
            TbSink::new(r.output)
                .drop_attributes(r.drop_attributes)
                .write_all(source)
                .map_err(|e| crate::refusal(&context, &e))?;
        }
    }
    // safetensors and TensorBuffers hold tensors raw: what was read is what was written.
    let decoded = (0..source.len())
        .filter_map(|i| source.info(i))
        .flat_map(|o| o.components.into_iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)))
        .sum();
    let notes = if r.drop_attributes { vec![dropped(source, r.output)?] } else { Vec::new() };
    Ok(Converted {
        objects: source.len(),
        peak,
        index: None,
        sharded_2: None,
        tally,
        decoded: Some(decoded),
        notes,
    })
}

/// Whether `name` matches one of the `--exclude` globs.
fn excluded(globs: &[String], name: &str) -> bool {
    globs.iter().any(|g| super::look::glob(g, name))
}

/// `error` with the flag that gets past what the target could not hold, by what the library
/// said it refused (`refused`, from the error's type, never its text): `--drop-attributes` for
/// attributes, `--carry-unknown-dtypes` and `--exclude` for tensors of dtypes zTensor lacks.
pub fn hinted(error: anyhow::Error, refused: Option<ztensor_format::Refused>) -> anyhow::Error {
    use ztensor_format::Refused;
    let hint = match refused {
        Some(Refused::FileAttributes | Refused::ObjectAttributes) => {
            "(--drop-attributes discards them)"
        }
        Some(Refused::Dtype) => {
            "(--carry-unknown-dtypes carries such tensors as bytes; --exclude NAME leaves one out)"
        }
        _ => return error,
    };
    let message = format!("{error:#} {hint}");
    if error.downcast_ref::<Rejected>().is_some() {
        anyhow!(Rejected(message))
    } else {
        anyhow!(message)
    }
}

/// `info` on a file of another format (safetensors, a sharded checkpoint, TensorBuffers), read
/// through the tensor-source interface: what it is, its attributes (safetensors `__metadata__`,
/// the TensorBuffers metadata zTensor keeps as `tensorbuffers.*`), and a table of its tensors.
pub fn source_info(
    out: &mut impl Write,
    path: &Path,
    kind: Kind,
    source: &dyn TensorSource,
    json: bool,
    full: bool,
) -> Result<()> {
    // The tensors by name, their names borrowed from the source where it can: each row is
    // made from the source when it is shown, not held (a checkpoint may have a million).
    let mut order: Vec<(std::borrow::Cow<'_, str>, usize)> =
        (0..source.len()).filter_map(|i| source.info(i).map(|o| (o.name, i))).collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let dtype_of = tensor_dtype;
    let infos = || order.iter().filter_map(|&(_, i)| source.info(i));
    let attributes =
        source.try_attributes().map_err(|e| crate::reported(&path.display().to_string(), &e))?;
    if json {
        // Each tensor's entry is made as it is written.
        type Infos<'t, 'a> = Box<dyn Iterator<Item = ztensor_io::ObjectInfo<'a>> + 't>;
        struct Tensors<'t, 'a>(&'t dyn Fn() -> Infos<'t, 'a>);
        impl serde::Serialize for Tensors<'_, '_> {
            fn serialize<Z: serde::Serializer>(&self, to: Z) -> Result<Z::Ok, Z::Error> {
                #[derive(serde::Serialize)]
                struct Entry<'e> {
                    name: &'e str,
                    dtype: String,
                    shape: &'e [u64],
                    elements: u64,
                    bytes: u64,
                    stored: u64,
                    decoded: Option<u64>,
                    shard: Option<&'e str>,
                }
                to.collect_seq((self.0)().map(|o| {
                    serde_json::to_value(Entry {
                        name: &o.name,
                        dtype: tensor_dtype(&o),
                        shape: &o.shape,
                        elements: super::info::element_count(&o.shape),
                        bytes: o.stored_len(),
                        stored: o.stored_len(),
                        decoded: o
                            .components
                            .iter()
                            .try_fold(0u64, |sum, c| Some(sum + c.decoded_len?)),
                        shard: o.location.as_deref(),
                    })
                    .unwrap_or_default()
                }))
            }
        }
        let boxed = || -> Infos<'_, '_> { Box::new(infos()) };
        let tensors = Tensors(&boxed);
        let format = kind.format().id;
        // Written as it is serialized: attributes of millions of values are not copied into
        // a JSON value first.
        #[derive(serde::Serialize)]
        struct Report<'a> {
            file: String,
            format: &'a str,
            description: std::borrow::Cow<'a, str>,
            attributes: Option<ztensor_dump::JsonOf<'a>>,
            tensors: Tensors<'a, 'a>,
        }
        let report = Report {
            file: super::stdin::name(path),
            format,
            description: source.format_name(),
            attributes: attributes.as_deref().map(|a| ztensor_dump::JsonOf(a.root())),
            tensors,
        };
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    use super::text::{count, shown, size, size_cell};
    writeln!(out, "file:       {}", super::stdin::shown(path))?;
    writeln!(out, "format:     {}", shown(&source.format_name()))?;
    writeln!(out, "tensors:    {}", order.len())?;
    super::text::attribute_lines(out, "attributes:", attributes.as_deref(), full)?;
    let sharded = infos().any(|o| o.location.is_some());
    let (mut stored, mut decoded, mut elements, mut with_attributes) = (0u64, 0u64, 0u64, 0usize);
    let mut rows = |each: &mut super::text::RowSink<'_>| -> std::io::Result<()> {
        (stored, decoded, elements, with_attributes) = (0, 0, 0, 0);
        for o in infos() {
            let n = super::info::element_count(&o.shape);
            let decoded_len =
                o.components.iter().try_fold(0u64, |sum, c| Some(sum + c.decoded_len?));
            stored = stored.saturating_add(o.stored_len());
            decoded = decoded.saturating_add(decoded_len.unwrap_or(0));
            elements = elements.saturating_add(n);
            with_attributes += usize::from(o.attributes.is_some());
            let mut row = vec![
                shown(&o.name).into_owned(),
                dtype_of(&o),
                format!("{:?}", o.shape),
                n.to_string(),
                size_cell(o.stored_len()),
                decoded_len.map_or_else(|| "?".into(), size_cell),
            ];
            if sharded {
                row.push(shown(o.location.as_deref().unwrap_or_default()).into_owned());
            }
            each(&row)?;
        }
        Ok(())
    };
    writeln!(out)?;
    // DTYPE and SHAPE keep their customary widths (11 and 16) unless a cell needs more.
    let mut header =
        vec!["NAME", "DTYPE      ", "SHAPE           ", "ELEMENTS", "STORED", "DECODED"];
    if sharded {
        header.push("SHARD");
    }
    super::text::table_of(out, &header, &mut rows)?;
    writeln!(out)?;
    writeln!(
        out,
        "total: {}, {} elements, {} stored, {} decoded",
        super::text::plural(order.len(), "tensor"),
        count(elements),
        size(stored),
        size(decoded)
    )?;
    super::text::own_attributes(out, with_attributes, "tensor", full, &mut |each| {
        for o in infos() {
            if let Some(a) = o.attributes.as_deref() {
                each(&o.name, a)?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// A tensor's dtype as `info` shows it: each component's, with its logical type.
fn tensor_dtype(o: &ztensor_io::ObjectInfo<'_>) -> String {
    o.components
        .iter()
        .map(|c| match &c.logical_type {
            Some(t) => format!("{}:{t}", c.dtype),
            None => c.dtype.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `verify` on a file of another format (safetensors, a sharded checkpoint, TensorBuffers),
/// through the tensor-source interface on all threads: the header (and the index, and its
/// agreement with the shards) are validated on open, then every tensor is read. Tensors of
/// dtypes zTensor has no type for are valid: they are named in a note, with the ways to convert
/// such a file.
pub fn foreign_verify(
    out: &mut impl Write,
    path: &Path,
    kind: Kind,
    strict: bool,
    threads: usize,
    json: bool,
    quiet: bool,
) -> Result<std::process::ExitCode> {
    // A sharded zTensor checkpoint's index records each shard's digest: every byte is checked.
    let mut shard_problem = None;
    let local = crate::remote::url_of(path).is_none();
    let source: Box<dyn TensorSource> = match kind {
        Kind::TensorBuffers if local => Box::new(
            super::tb::open(path, strict)?
                .map_err(|e| crate::reported(&crate::shown_path(path), &e))?,
        ),
        Kind::ZtIndex => {
            let options = ztensor_registry::OpenOptions {
                options: ztensor_cli::options(strict),
                ..Default::default()
            };
            let ckpt = ztensor_registry::open_zt_index(path, &options)
                .map_err(|e| crate::open_error(path, &options.options, e))?;
            shard_problem = ckpt.verify_digests().err().map(|e| e.message().to_owned());
            Box::new(ckpt)
        }
        // A zTensor 2 root's table records each shard's size and digest: every byte of each
        // shard is checked, not only the parts the root points at.
        Kind::Zt2 if local => {
            let file = crate::sources::open_zt2_file(path)?;
            shard_problem = file.verify_shards().err().map(|e| e.to_string());
            Box::new(file)
        }
        _ => crate::open_source(path)?,
    };
    let source = &*source;
    let bytes: u64 = (0..source.len()).filter_map(|i| source.info(i)).map(|o| o.stored_len()).sum();
    let decoded: u64 = (0..source.len())
        .filter_map(|i| source.info(i))
        .flat_map(|o| o.components.into_iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)))
        .sum();
    let bar = Bar::new(bytes, quiet);
    let par = ztensor_par::ParOptions::with_threads(threads);
    let verdicts = ztensor_par::verify_source(source, &par, &bar);
    bar.finish();
    let verdicts = verdicts.map_err(|e| anyhow!("{e}"))?;
    let mut problems: Vec<String> = shard_problem.into_iter().collect();
    let mut unknown = Vec::new();
    // Objects that cannot be read here for another reason (an encoding not known, a shard
    // not found): the name and why.
    let mut unreadable = Vec::new();
    for (i, verdict) in verdicts.iter().enumerate() {
        let name = || source.name(i).map_or_else(|| format!("#{i}"), std::borrow::Cow::into_owned);
        match verdict {
            Ok(()) => {}
            Err(e)
                if matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_))
                    && e.format_error().map(ztensor_format::Error::kind)
                        != Some(ztensor_format::ErrorKind::DtypeUnknown) =>
            {
                let why =
                    e.format_error().map_or_else(|| e.to_string(), |f| f.message().to_owned());
                unreadable.push(format!("{} ({why})", super::text::shown(&name())));
            }
            Err(e) if matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_)) => {
                let dtype = source
                    .info(i)
                    .and_then(|o| o.components.first().map(|c| c.dtype.to_string()))
                    .unwrap_or_default();
                unknown.push(format!("{} ({dtype})", super::text::shown(&name())));
            }
            // A failed read is a failed request (status 2), not a problem of the file.
            Err(e) if e.rule().is_none() => {
                return Err(anyhow!(
                    "{}: object {:?}: {e}",
                    path.display(),
                    super::text::shown(&name())
                ));
            }
            // The error names its object already when the source put it there.
            Err(e) if e.format_error().is_some_and(|f| f.object().is_some()) => {
                problems.push(e.to_string());
            }
            Err(e) => problems.push(format!("object {:?}: {e}", super::text::shown(&name()))),
        }
    }
    // What could not be checked is not called sound: its bytes were never looked at.
    let sound = problems.is_empty() && unreadable.is_empty();
    if json {
        let report = serde_json::json!({
            "file": super::stdin::name(path),
            "format": source.format_name(),
            "sound": sound,
            "objects": verdicts.len(),
            "decoded": decoded,
            "problems": problems,
            "unsupported": unknown,
            "unreadable": unreadable,
        });
        writeln!(out, "{report:#}")?;
    } else {
        for p in &problems {
            writeln!(out, "{p}")?;
        }
        let tensors = super::text::plural(verdicts.len(), "tensor");
        let bytes = format!("{} decoded", super::text::size(decoded));
        if sound {
            writeln!(out, "{}: sound ({kind}: {tensors}, {bytes})", super::stdin::shown(path))?;
        } else if problems.is_empty() {
            writeln!(
                out,
                "{}: not verified, {} unchecked ({kind}: {tensors}, {bytes})",
                super::stdin::shown(path),
                super::text::plural(unreadable.len(), "tensor")
            )?;
        } else {
            writeln!(
                out,
                "{}: {} ({kind}: {tensors}, {bytes})",
                super::stdin::shown(path),
                super::text::plural(problems.len(), "problem")
            )?;
        }
        if !unknown.is_empty() {
            writeln!(
                out,
                "note: {} of a dtype zTensor has no type for: {}. `convert \
                 --carry-unknown-dtypes` carries them as bytes (their dtype and shape kept as \
                 attributes, restored when converted back to safetensors); `convert --exclude \
                 NAME` leaves them out",
                if unknown.len() == 1 {
                    "1 tensor is".to_owned()
                } else {
                    format!("{} tensors are", unknown.len())
                },
                listed(&unknown)
            )?;
        }
        if !unreadable.is_empty() {
            writeln!(
                out,
                "note: {} cannot be read here: {}",
                super::text::plural(unreadable.len(), "tensor"),
                listed(&unreadable)
            )?;
        }
    }
    Ok(if sound { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) })
}
