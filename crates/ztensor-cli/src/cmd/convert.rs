//! `ztensor convert`: zTensor (every version), safetensors (single and sharded) and
//! TensorBuffers, in any direction we can represent.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, anyhow};
use ztensor_foreign::safetensors::{ExportOptions, SafetensorsFile, source_tensors};
use ztensor_foreign::sharded::ShardedCheckpoint;
use ztensor_format::Version;
use ztensor_io::{FileSource, FileWriter, Reader};

use super::Kind;
use super::repack::Bar;
use crate::{Encoding, Rejected, Run, Target, foreign_error, open, tb_rejected, zt_error};

/// One conversion.
pub struct Request<'a> {
    pub input: &'a Path,
    pub output: &'a Path,
    pub target: Target,
    pub drop_attributes: bool,
    pub encoding: &'a Encoding,
    pub run: &'a Run,
}

/// Runs the conversion, returning how many objects were written.
pub fn run(r: &Request<'_>) -> Result<usize> {
    let context = format!("cannot convert {} to {}", r.input.display(), r.target);
    let kind = super::detect(r.input)?;
    // zTensor to zTensor may rewrite a file in place (as `repack` and `remove` do); anything
    // else would replace the user's file with another format.
    if !(kind == Kind::Zt && matches!(r.target, Target::Zt(_))) {
        super::not_over(r.input, r.output, &r.target.to_string())?;
    }
    match kind {
        Kind::Zt => {
            let reader = open(r.input, &ztensor_cli::options(false))?;
            from_zt(r, &reader, &context)?;
            Ok(reader.manifest().len())
        }
        Kind::TensorBuffers => from_tb(r, &context),
        Kind::Safetensors => {
            let file = SafetensorsFile::open(r.input).map_err(|e| foreign_error("", &e))?;
            let Target::Zt(version) = r.target else {
                return via_zt(r, &context);
            };
            let tensors = source_tensors(&file).map_err(|e| foreign_error(&context, &e))?;
            let bar = Bar::new(tensors.iter().map(|t| t.len).sum(), r.run.quiet);
            let mut writer = FileWriter::create(r.output, version).map_err(|e| anyhow!("{e}"))?;
            if !r.drop_attributes
                && let Some(a) = ztensor_foreign::safetensors::metadata_attributes(file.metadata())
            {
                set_metadata(&mut writer, version, a, &context)?;
            }
            let done = ztensor_par::write_from_source(
                file.source(),
                &tensors,
                &mut writer,
                &r.encoding.fresh(),
                &r.run.par(),
                &bar,
            );
            bar.finish();
            done.map_err(|e| zt_error(&context, &e))?;
            writer.finish().map_err(|e| anyhow!("{e}"))?;
            Ok(tensors.len())
        }
        Kind::ShardIndex => {
            let ckpt = ShardedCheckpoint::open(r.input).map_err(|e| foreign_error("", &e))?;
            for (shard, _) in ckpt.shards() {
                super::not_over(shard, r.output, &r.target.to_string())?;
            }
            let Target::Zt(version) = r.target else {
                return via_zt(r, &context);
            };
            let (count, bytes) = ckpt.totals();
            let bar = Bar::new(bytes, r.run.quiet);
            let mut writer = FileWriter::create(r.output, version).map_err(|e| anyhow!("{e}"))?;
            let ckpt = if r.drop_attributes { ckpt.without_metadata() } else { ckpt };
            let done = ckpt.to_ztensor(&mut writer, &r.encoding.fresh(), &r.run.par(), &bar);
            bar.finish();
            done.map_err(|e| foreign_error(&context, &e))?;
            writer.finish().map_err(|e| anyhow!("{e}"))?;
            Ok(count)
        }
    }
}

fn set_metadata(
    writer: &mut FileWriter,
    version: Version,
    attributes: ztensor_format::Value,
    context: &str,
) -> Result<()> {
    if version == Version::V0_1 {
        return Err(anyhow!(Rejected(format!(
            "{context}: __metadata__ cannot be kept, v0.1 has no file attributes \
             (--drop-attributes discards it)"
        ))));
    }
    writer.set_attributes(attributes).map_err(|e| zt_error(context, &e))
}

/// A foreign input (safetensors, sharded, TensorBuffers) to another foreign target: through a
/// temporary zTensor 1.2 file beside the output, so each converter does one job and nothing is
/// held in memory whole.
fn via_zt(r: &Request<'_>, context: &str) -> Result<usize> {
    // Named after the output, so one a killed process left is removed by the next write there.
    let temp = ztensor_io::ScratchFile::beside(r.output).map_err(|e| anyhow!("{e}"))?;
    let raw = Encoding { zstd: None, raw: true, digest: None };
    let step =
        Request { output: temp.path(), target: Target::Zt(Version::V1_2), encoding: &raw, ..*r };
    run(&step)?;
    let reader = open(temp.path(), &ztensor_cli::options(false))?;
    from_zt(r, &reader, context)?;
    Ok(reader.manifest().len())
}

fn from_zt(r: &Request<'_>, reader: &Reader<FileSource>, context: &str) -> Result<()> {
    match r.target {
        Target::TensorBuffers => {
            let mut w = ztensor_tensorbuffers::create(r.output).map_err(|e| anyhow!("{e}"))?;
            ztensor_tensorbuffers::from_ztensor(reader, &mut w, r.drop_attributes).map_err(
                |e| {
                    let hint = if e.to_string().contains("attributes") {
                        " (--drop-attributes discards them)"
                    } else {
                        ""
                    };
                    let message = format!("{context}: {e}{hint}");
                    if e.kind() == ztensor_tensorbuffers::ErrorKind::Io {
                        anyhow!(message)
                    } else {
                        anyhow!(Rejected(message))
                    }
                },
            )?;
            w.persist().map_err(|e| anyhow!("{context}: {e}"))?;
        }
        Target::Safetensors => {
            let options = ExportOptions { drop_attributes: r.drop_attributes };
            ztensor_foreign::safetensors::export_file(reader, r.output, &options).map_err(|e| {
                let hint = if e.to_string().contains("drop attributes") {
                    " (--drop-attributes discards them)"
                } else {
                    ""
                };
                let base = foreign_error(context, &e);
                if base.downcast_ref::<Rejected>().is_some() {
                    anyhow!(Rejected(format!("{base}{hint}")))
                } else {
                    base
                }
            })?;
        }
        Target::Zt(to) => {
            // The parallel copy writes exactly what `copy_all` would, with a progress bar.
            let bar = Bar::new(super::repack::total_input(reader), r.run.quiet);
            let mut writer = FileWriter::create(r.output, to).map_err(|e| anyhow!("{e}"))?;
            let done =
                ztensor_par::repack(reader, &mut writer, &r.encoding.copy(), &r.run.par(), &bar);
            bar.finish();
            done.map_err(|e| zt_error(context, &e))?;
            writer.finish().map_err(|e| anyhow!("{e}"))?;
        }
    }
    Ok(())
}

fn from_tb(r: &Request<'_>, context: &str) -> Result<usize> {
    let tb = super::tb::open(r.input, false)?.map_err(|e| tb_rejected(r.input, &e))?;
    let cannot = |e: &dyn std::fmt::Display, broken: bool| {
        let message = format!("{context}: {e}");
        if broken { anyhow!(Rejected(message)) } else { anyhow!(message) }
    };
    match r.target {
        Target::TensorBuffers => {
            let mut w = ztensor_tensorbuffers::create(r.output).map_err(|e| cannot(&e, false))?;
            for t in tb.tensors() {
                let data = tb.data(&t.name).map_err(|e| cannot(&e, true))?;
                let shape: Vec<u64> = t.shape.iter().map(|&d| u64::from(d)).collect();
                w.add(&t.name, t.data_type, &shape, &data).map_err(|e| cannot(&e, true))?;
            }
            w.set_model(tb.metadata().model.clone());
            w.set_operations(tb.metadata().operations.clone());
            w.set_version(tb.metadata().version.clone());
            w.persist().map_err(|e| cannot(&e, false))?;
        }
        Target::Zt(version) => {
            let mut w = FileWriter::create(r.output, version).map_err(|e| anyhow!("{e}"))?;
            ztensor_tensorbuffers::to_ztensor(&tb, &mut w, &r.encoding.fresh()).map_err(|e| {
                cannot(&e, e.kind() == ztensor_tensorbuffers::ErrorKind::Unrepresentable)
            })?;
            w.finish().map_err(|e| anyhow!("{e}"))?;
        }
        Target::Safetensors => {
            drop(tb);
            return via_zt(r, context);
        }
    }
    Ok(tb.tensors().len())
}

/// `info` on a safetensors file or sharded checkpoint.
pub fn foreign_info(out: &mut impl Write, path: &Path, kind: Kind, json: bool) -> Result<()> {
    type Row = (String, String, Vec<u64>, u64, Option<String>);
    let rows_of = |shard: &Path, file: &SafetensorsFile<FileSource>| -> Vec<Row> {
        let shard_name = shard.file_name().map(|n| n.to_string_lossy().into_owned());
        file.tensors()
            .iter()
            .map(|t| {
                (t.name.clone(), t.dtype.to_string(), t.shape.clone(), t.len, shard_name.clone())
            })
            .collect()
    };
    let (mut rows, metadata, shards) = match kind {
        Kind::Safetensors => {
            let file = SafetensorsFile::open(path).map_err(|e| foreign_error("", &e))?;
            (rows_of(path, &file), file.metadata().clone(), 1)
        }
        _ => {
            let ckpt = ShardedCheckpoint::open(path).map_err(|e| foreign_error("", &e))?;
            let rows = ckpt.shards().iter().flat_map(|(p, f)| rows_of(p, f)).collect();
            (rows, ckpt.metadata().clone(), ckpt.shards().len())
        }
    };
    rows.sort();
    if json {
        let tensors: Vec<_> = rows
            .iter()
            .map(|(n, d, s, l, f)| serde_json::json!({"name": n, "dtype": d, "shape": s, "bytes": l, "shard": f}))
            .collect();
        let report = serde_json::json!({
            "file": path.display().to_string(),
            "format": if kind == Kind::Safetensors { "safetensors" } else { "safetensors-sharded" },
            "metadata": metadata,
            "tensors": tensors,
        });
        writeln!(out, "{report:#}")?;
        return Ok(());
    }
    writeln!(out, "file:       {}", path.display())?;
    writeln!(
        out,
        "format:     {}",
        if kind == Kind::Safetensors {
            "safetensors".to_owned()
        } else {
            format!("sharded safetensors ({shards} shards)")
        }
    )?;
    writeln!(out, "tensors:    {}", rows.len())?;
    let m: Vec<String> = metadata.iter().map(|(k, v)| format!("{k:?}: {v:?}")).collect();
    writeln!(
        out,
        "metadata:   {}",
        if m.is_empty() { "none".to_owned() } else { format!("{{{}}}", m.join(", ")) }
    )?;
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, dtype, shape, len, _)| {
            let name = super::text::shown(name).into_owned();
            vec![name, dtype.clone(), format!("{shape:?}"), len.to_string()]
        })
        .collect();
    writeln!(out)?;
    // DTYPE and SHAPE keep their customary widths (11 and 16) unless a cell needs more.
    super::text::table(out, &["NAME", "DTYPE      ", "SHAPE           ", "BYTES"], &table)?;
    writeln!(out)?;
    writeln!(out, "total: {} bytes of tensor data", rows.iter().map(|r| r.3).sum::<u64>())?;
    Ok(())
}

/// `verify` on a safetensors file or sharded checkpoint: the header (and the index, and its
/// agreement with the shards) are validated on open, and every dtype must have a zTensor type.
/// safetensors carries no digests, so there is nothing more to check in the data.
pub fn foreign_verify(
    out: &mut impl Write,
    path: &Path,
    kind: Kind,
) -> Result<std::process::ExitCode> {
    let (count, bytes) = match kind {
        Kind::Safetensors => {
            let file = SafetensorsFile::open(path).map_err(|e| foreign_error("", &e))?;
            source_tensors(&file).map_err(|e| foreign_error(&path.display().to_string(), &e))?;
            (file.tensors().len(), file.tensors().iter().map(|t| t.len).sum::<u64>())
        }
        _ => {
            let ckpt = ShardedCheckpoint::open(path).map_err(|e| foreign_error("", &e))?;
            for (p, f) in ckpt.shards() {
                source_tensors(f).map_err(|e| foreign_error(&p.display().to_string(), &e))?;
            }
            ckpt.totals()
        }
    };
    writeln!(out, "{}: sound ({kind}: {count} tensors, {bytes} bytes)", path.display())?;
    Ok(std::process::ExitCode::SUCCESS)
}
