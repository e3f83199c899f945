//! `ztensor convert`: zTensor (every version), safetensors (single and sharded) and
//! TensorBuffers, in any direction we can represent.

use std::path::Path;

use anyhow::{Result, anyhow};
use ztensor_io::{CopyOptions, Excluding, TensorSource};

use super::Kind;
use super::text::listed;
use crate::cli::{ConvertArgs, RepackArgs};
use crate::progress::Bar;
use crate::report::{Converted, Done};
use crate::{Encoding, Run, Target, output_lock};

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
    /// The zstd frame size for large components (`repack --chunk`); the engine's default
    /// without.
    pub chunk: Option<u64>,
    /// `repack`: a zTensor file to zTensor, named so in messages.
    pub repack: bool,
    /// The request as the registry checked it, whose rules the opened input is held to (what
    /// it may not be written over); `None` for a plan, whose outputs are checked as planned.
    pub checked: Option<&'a ztensor_registry::Conversion>,
}

impl Request<'_> {
    /// The output directory, for a sharded conversion.
    fn dir(&self) -> super::outdir::Dir<'_> {
        super::outdir::Dir { output: self.output, force: self.force }
    }

    /// What a failure is prefixed with.
    fn context(&self) -> String {
        match self.repack {
            true => format!("cannot repack {}", self.input.display()),
            false => format!("cannot convert {} to {}", self.input.display(), self.target),
        }
    }
}

/// `ztensor convert`: the request checked (the target by `--to` or the extension, a sharded
/// output, `-`, object storage, the output's lock), the conversion run, and what it wrote.
pub(crate) fn command(a: ConvertArgs) -> Result<Done> {
    a.run.check_memory(ztensor_io::codec::DEFAULT_ZSTD_CHUNK)?;
    // The registry's rules, which Python's `convert` is held to as well.
    let checked = ztensor_registry::Conversion::check(&ztensor_registry::Request {
        to: a.to,
        zstd: a.encoding.zstd,
        digest: a.encoding.digest.is_some(),
        shard_size: a.shard_size,
        force: a.force,
        ..ztensor_registry::Request::new(&a.input, &a.output, ztensor_registry::Spelling::Cli)
    })
    .map_err(|e| anyhow!("{e}"))?;
    let sharded = checked.sharding.map(split_of);
    let target = checked.target;
    // `-`: the file is made in a private directory, then copied to standard output.
    let staged = match super::stdout::is_stdout(&a.output) {
        true => Some(super::stdout::Staged::new(&format!("stdout.{}", target.extension()))?),
        false => None,
    };
    let output = staged.as_ref().map_or(a.output.as_path(), |s| s.path());
    let remote_out = crate::remote::url_of(output);
    // A file or object output is replaced whole; what it held is said, never dropped silently.
    let before = (staged.is_none() && sharded.is_none()).then(|| super::replace::held(output));
    let before = before.flatten();
    let _lock = match sharded {
        Some(_) => None,
        // An object is published whole by its upload's completion: no lock file.
        None if remote_out.is_some() => None,
        None => output_lock(&a.input, output, a.run.no_wait, a.run.quiet)?,
    };
    let request = Request {
        input: &a.input,
        output,
        target,
        drop_attributes: a.drop_attributes,
        exclude: &a.exclude,
        carry_unknown: a.carry_unknown_dtypes,
        encoding: &a.encoding,
        run: &a.run,
        sharded,
        force: a.force,
        chunk: None,
        repack: false,
        checked: Some(&checked),
    };
    let started = std::time::Instant::now();
    let mut converted = run(&request)?;
    if let Some(before) = before {
        // What the new object lacks is not read back from the bucket (the object opened
        // before is the one this process holds): the note names what was there.
        let after = remote_out.is_none().then(|| super::replace::held(output)).flatten();
        converted.notes.push(super::replace::replaced(output, &before, after.as_ref()));
    }
    if let Some(written) = converted.sharded_2 {
        return Ok(Done::Shards {
            directory: output.to_path_buf(),
            shards: written.shards.len(),
            index: written.root.clone(),
            format: "zTensor 2".to_owned(),
            objects: converted.objects,
            decoded: written.decoded,
            bytes: written.shards.iter().map(|(_, _, len)| len).sum::<u64>() + written.root_len,
            took: started.elapsed(),
            notes: converted.notes,
        });
    }
    if let Some(index_path) = converted.index {
        let (shards, bytes) = match converted.published {
            Some(published) => published,
            None => {
                let index = ztensor_shard::ShardIndex::read(&index_path)
                    .map_err(|e| crate::reported("", &e))?;
                (index.shards.len(), index.shards.values().map(|s| s.size).sum())
            }
        };
        return Ok(Done::Shards {
            directory: output.to_path_buf(),
            shards,
            index: index_path,
            format: target.to_string(),
            objects: converted.objects,
            decoded: converted.decoded.unwrap_or(0),
            bytes,
            took: started.elapsed(),
            notes: converted.notes,
        });
    }
    let file_len = match remote_out {
        Some(url) => crate::remote::uploaded(url).unwrap_or(0),
        None => std::fs::metadata(output).map(|m| m.len()).unwrap_or(0),
    };
    let took = started.elapsed();
    if let Some(staged) = staged {
        staged.deliver()?;
    }
    Ok(Done::Wrote {
        output: a.output,
        format: target.to_string(),
        converted,
        file_len,
        took,
        zstd: a.encoding.zstd.is_some(),
    })
}

/// `ztensor repack`: [`command`]'s conversion of a zTensor file to zTensor, under its own name
/// and with its own `--chunk`: one code path, so the bytes are those `convert` writes.
pub(crate) fn repack(a: RepackArgs) -> Result<Done> {
    let kind = super::detect(&a.input)?;
    if kind != Kind::Zt {
        anyhow::bail!("repack reads zTensor files; use `convert` for {kind}");
    }
    a.run.check_memory(a.chunk)?;
    let checked = ztensor_registry::Conversion::check(&ztensor_registry::Request {
        to: Some(Target::Zt(a.to)),
        zstd: a.encoding.zstd,
        digest: a.encoding.digest.is_some(),
        ..ztensor_registry::Request::new(&a.input, &a.output, ztensor_registry::Spelling::Cli)
    })
    .map_err(|e| anyhow!("{e}"))?;
    // Read before the output's lock is taken: nothing reads a file while holding its lock.
    let before = super::replace::held(&a.output);
    let _lock = output_lock(&a.input, &a.output, a.run.no_wait, a.run.quiet)?;
    let request = Request {
        input: &a.input,
        output: &a.output,
        target: Target::Zt(a.to),
        drop_attributes: a.drop_attributes,
        exclude: &[],
        carry_unknown: false,
        encoding: &a.encoding,
        run: &a.run,
        sharded: None,
        force: false,
        chunk: Some(a.chunk),
        repack: true,
        checked: Some(&checked),
    };
    let started = std::time::Instant::now();
    let mut converted = run(&request)?;
    if let Some(before) = before {
        converted.notes.push(super::replace::replaced(
            &a.output,
            &before,
            super::replace::held(&a.output).as_ref(),
        ));
    }
    Ok(Done::Wrote {
        file_len: std::fs::metadata(&a.output).map(|m| m.len()).unwrap_or(0),
        took: started.elapsed(),
        output: a.output,
        format: Target::Zt(a.to).to_string(),
        converted,
        zstd: a.encoding.zstd.is_some(),
    })
}

/// The split the registry's [`Sharding`](ztensor_registry::Sharding) names.
fn split_of(sharding: ztensor_registry::Sharding) -> ztensor_shard_write::Split {
    match sharding {
        ztensor_registry::Sharding::LikeInput => ztensor_shard_write::Split::LikeInput,
        ztensor_registry::Sharding::Size(size) => ztensor_shard_write::Split::Size(size),
    }
}

/// The plan of a sharded conversion of `r` (the output a directory), `files` every file the
/// input is read from (as its opener found them).
pub fn plan_of(
    r: &Request<'_>,
    split: ztensor_shard_write::Split,
    source: &dyn TensorSource,
    files: &[std::path::PathBuf],
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
    let mut plan = ztensor_shard_write::plan(r.input, source, r.output, options, split, &|name| {
        excluded(r.exclude, name)
    })
    // The plan refuses shards and an index that would replace a file it reads.
    .map_err(|e| crate::reported("cannot plan", &e))?;
    // The files the plan found by its objects' locations, and any other the input is read
    // from (a checkpoint read stitched names no shard per object): each is checked for change
    // before a unit runs, and none may be an output.
    let mut added = false;
    for file in files.iter().filter(|f| crate::remote::url_of(f).is_none()) {
        if plan.inputs.iter().any(|i| i.path == *file || ztensor_source::same_file(&i.path, file)) {
            continue;
        }
        let size = std::fs::metadata(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?
            .len();
        plan.inputs.push(ztensor_shard_write::InputFile { path: file.clone(), size });
        added = true;
    }
    if added {
        plan.check_not_over_inputs().map_err(|e| crate::reported("cannot plan", &e))?;
    }
    Ok(plan)
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
        super::text::listed(&big)
    ))
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
    // Told once (a file it cannot read is worded as detection words it); the opener
    // takes the handle.
    super::detect(r.input)?;
    let opened = crate::sources::open_told(r.input, r.carry_unknown, Some(r.target))?;
    // Every object the input is read from (a sharded checkpoint's shards too).
    let mut inputs: Vec<std::path::PathBuf> = opened.files().to_vec();
    inputs.push(r.input.to_path_buf());
    let source = crate::sources::expansion_checked(r.input, opened)?;
    let plan = plan_of(r, split, &*source, &inputs)?;
    let prefix = crate::remote::url_of(r.output)
        .map(|url| crate::remote::prefix(url, r.run.memory).all_or_nothing());
    if let Some(prefix) = &prefix {
        use ztensor_shard_write::Destination;
        let names = plan.units.iter().map(|u| u.shard.as_str()).chain([plan.index.as_str()]);
        crate::remote::not_over_inputs(&inputs, names.map(|n| prefix.locate(n)))?;
    }
    let cleared = match &prefix {
        Some(prefix) => crate::remote::check_free(prefix, &plan.index, r.force)?,
        None => super::outdir::clear(&r.dir(), &plan)?,
    };
    let bar = Bar::new(plan.units.iter().map(|u| u.bytes).sum(), r.run.quiet);
    let par = r.run.par();
    let done = match &prefix {
        Some(prefix) => ztensor_shard_write::write_all(&plan, &*source, &par, &bar, prefix),
        None => {
            let dir = ztensor_shard_write::Directory::new(&plan.output).all_or_nothing();
            ztensor_shard_write::write_all(&plan, &*source, &par, &bar, &dir)
        }
    };
    bar.finish();
    let done = done.map_err(|e| crate::refusal(context, &e))?;
    // Where the index went (a URL as the plan keeps it; a path as the user gave it).
    let index = plan.output.join(&plan.index);
    let published = prefix.is_some().then_some((done.shards, done.bytes));
    let objects = plan.units.iter().map(|u| u.objects.len()).sum();
    let decoded = plan.units.iter().map(|u| u.bytes).sum();
    let notes =
        cleared.into_iter().chain(oversized(&plan, split)).chain(left_out(&*source)).collect();
    Ok(Converted {
        objects,
        peak: None,
        index: Some(index),
        published,
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
    let opened = crate::sources::open_told(r.input, r.carry_unknown, Some(r.target))?;
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
    if let Some(url) = crate::remote::url_of(r.output) {
        return sharded_2_to_prefix(r, (source, &groups, &inputs), &stem, url, context);
    }
    let root = r.output.join(format!("{stem}.zt"));
    for path in ztensor_v2::sharded::sharded_paths(&root, groups.len()) {
        for input in &inputs {
            super::not_over(input, &path, "a zTensor 2 shard")?;
        }
    }
    let cleared = super::outdir::clear_2(&r.dir(), &inputs)?;
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
        published: None,
        decoded: Some(summary.decoded),
        sharded_2: Some(summary),
        tally: None,
        notes,
    })
}

/// A sharded zTensor 2 output into a prefix in object storage: written (placed by seeking)
/// into a private temporary directory, then each shard uploaded and published, the root last
/// (a failure removes the shards published). The objects are the files a local directory gets.
fn sharded_2_to_prefix(
    r: &Request<'_>,
    (source, groups, inputs): (&dyn TensorSource, &[Vec<usize>], &[std::path::PathBuf]),
    stem: &str,
    url: &str,
    context: &str,
) -> Result<Converted> {
    use ztensor_shard_write::Destination;
    // A signal while the shards are published deletes those published, as `sharded` does.
    let prefix = crate::remote::prefix(url, r.run.memory).all_or_nothing();
    let root_name = format!("{stem}.zt");
    let names: Vec<String> =
        ztensor_v2::sharded::sharded_paths(Path::new(&root_name), groups.len())
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(|n| prefix.locate(n)))
            .collect();
    crate::remote::not_over_inputs(inputs, names)?;
    let cleared = crate::remote::check_free(&prefix, &root_name, r.force)?;
    // A private directory (0700, a name no one can guess), and in it the output's, which an
    // interrupt takes back as it takes back a local output's files.
    let staging = tempfile::Builder::new()
        .prefix(".ztensor-staging-")
        .tempdir()
        .map_err(|e| anyhow!("cannot make a staging directory: {e}"))?;
    let dir = staging.path().join("out");
    let guard = ztensor_shard_write::OutputGuard::create(&dir)
        .map_err(|e| anyhow!("cannot make a staging directory: {e}"))?;
    let root = dir.join(&root_name);
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
    let summary = ztensor_v2::sharded::write_sharded(source, &root, groups, &options);
    bar.finish();
    let mut summary = summary.map_err(|e| crate::refusal(context, &e))?;
    let mut notes: Vec<String> = cleared.into_iter().collect();
    if r.drop_attributes {
        notes.push(dropped(source, &root)?);
    }
    // The shards first, the root (which names them) last.
    let mut files: Vec<(String, std::path::PathBuf)> = summary
        .shards
        .iter()
        .filter_map(|(_, path, _)| Some((path.file_name()?.to_str()?.to_owned(), path.clone())))
        .collect();
    files.push((root_name.clone(), root.clone()));
    ztensor_shard_write::publish_files(&prefix, &files).map_err(|e| crate::refusal(context, &e))?;
    // The staged files go with the guard (never kept), the directory with `staging`.
    drop(guard);
    summary.root = std::path::PathBuf::from(prefix.locate(&root_name));
    for (_, path, _) in &mut summary.shards {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        *path = std::path::PathBuf::from(prefix.locate(&name));
    }
    Ok(Converted {
        objects: summary.objects,
        peak: None,
        index: None,
        published: None,
        decoded: Some(summary.decoded),
        sharded_2: Some(summary),
        tally: None,
        notes,
    })
}

/// Runs the conversion, returning what it wrote. Every input is read through the
/// tensor-source interface and every output written through a sink; the zTensor sink carries
/// the objects of a zTensor input as `repack` does (stored bytes copied as they are where the
/// target holds them and no re-encoding is asked for).
pub fn run(r: &Request<'_>) -> Result<Converted> {
    let context = r.context();
    if let Some(split) = r.sharded {
        return sharded(r, split, &context);
    }
    // zTensor to zTensor may rewrite a file in place (as `repack` and `remove` do: the output
    // is published by a rename, and nothing decodes more than the input holds); anything else
    // would replace the user's file (or a shard of it) with another format.
    let kind = super::detect(r.input)?;
    let opened = crate::sources::open_told(r.input, r.carry_unknown, Some(r.target))?;
    if let Some(checked) = r.checked {
        checked.check_input(kind, opened.files()).map_err(|e| anyhow!("{e}"))?;
    }
    let opened = match (kind, r.target) {
        (Kind::Zt, Target::Zt(_)) => opened.into_source(),
        _ => crate::sources::expansion_checked(r.input, opened)?,
    };
    let filtered = Excluding::new(&*opened, |name| excluded(r.exclude, name));
    let source: &dyn TensorSource = &filtered;
    let remote_out = crate::remote::url_of(r.output);
    let total = (0..source.len()).filter_map(|i| source.info(i)).map(|o| super::decoded_of(&o));
    let bar = std::sync::Arc::new(Bar::new(total.sum(), r.run.quiet));
    let mut options = ztensor_registry::WriteOptions::new(r.target, r.encoding.zstd)
        .drop_attributes(r.drop_attributes)
        .par(r.run.par());
    options.fresh = r.encoding.fresh();
    options.copy = CopyOptions { drop_attributes: r.drop_attributes, ..r.encoding.copy() };
    if r.chunk.is_some() {
        options.copy.chunk_size = r.chunk;
    }
    options.progress = bar.clone();
    let written = match remote_out {
        Some(url) => {
            let upload = crate::remote::upload(url, r.run.memory)?;
            let made = ztensor_registry::write_to(source, upload, &options);
            bar.finish();
            let (upload, written) = made.map_err(|e| crate::refusal(&context, &e))?;
            crate::remote::publish(url, upload)?;
            written
        }
        None => {
            let made = ztensor_registry::write_file(source, r.output, &options);
            bar.finish();
            made.map_err(|e| crate::refusal(&context, &e))?
        }
    };
    // safetensors and TensorBuffers hold tensors raw: what was read is what was written.
    let decoded = (0..source.len())
        .filter_map(|i| source.info(i))
        .flat_map(|o| o.components.into_iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)))
        .sum();
    let mut notes = if r.drop_attributes { vec![dropped(source, r.output)?] } else { Vec::new() };
    notes.extend(left_out(source));
    Ok(Converted {
        objects: source.len(),
        peak: written.peak_in_flight,
        index: None,
        published: None,
        sharded_2: None,
        tally: written.tally,
        decoded: Some(decoded),
        notes,
    })
}

/// What the input held that is not a tensor and so was not written (a Distributed
/// Checkpoint's step count, a scheduler's state), named.
fn left_out(source: &dyn TensorSource) -> Option<String> {
    let names = source.left_out();
    if names.is_empty() {
        return None;
    }
    let shown: Vec<String> = names.iter().map(|n| format!("{:?}", super::text::shown(n))).collect();
    Some(format!(
        "note: left out {} of the input that {}: {}",
        super::text::plural(names.len(), "entry"),
        if names.len() == 1 { "is not a tensor" } else { "are not tensors" },
        shown.join(", ")
    ))
}

/// Whether `name` matches one of the `--exclude` globs.
fn excluded(globs: &[String], name: &str) -> bool {
    globs.iter().any(|g| super::look::glob(g, name))
}
