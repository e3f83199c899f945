//! Our own writer of recipes: what `ztensor-conformance write` runs.

use std::path::Path;

use anyhow::{Context, Result, bail};
use ztensor_format::{Format, Options, Version};
use ztensor_io::{ComponentSpec, Coo, Csr, Reader, WriteOptions};

use super::recipe::*;

/// Our writer's side of the protocol: writes `recipe` with this project's writer. `Ok(false)`
/// for a recipe it cannot write (the writer's `unrepresentable`: what the version cannot
/// express).
///
/// # Errors
/// The writer's other errors.
pub fn write(recipe: &Recipe, out: &Path) -> Result<bool> {
    if recipe.version == Target::Zt2 {
        return write_zt2(recipe, out);
    }
    match write_inner(recipe, out) {
        Err(e)
            if e.downcast_ref::<ztensor_io::Error>().and_then(ztensor_io::Error::rule)
                == Some(ztensor_format::ErrorKind::Unrepresentable) =>
        {
            Ok(false)
        }
        other => other.map(|()| true),
    }
}

/// zTensor 2: the recipe's content held as 1.2 in memory, then written by the zTensor 2 sink
/// (canonical, or every part `zt.zstd-seekable/1` when the recipe's objects are compressed).
/// `Ok(false)` for a recipe zTensor 2 cannot hold, or one mixing raw and compressed objects
/// (this writer encodes every part of a file alike).
pub(super) fn write_zt2(recipe: &Recipe, out: &Path) -> Result<bool> {
    let zstd = recipe.objects.iter().any(|o| o.zstd);
    if recipe.objects.iter().any(|o| o.zstd != zstd) {
        return Ok(false);
    }
    let one = Recipe {
        name: recipe.name.clone(),
        version: Target::Zt(Version::V1_2),
        covers: recipe.covers.clone(),
        attributes: recipe.attributes.clone(),
        objects: recipe.objects.iter().map(|o| RecipeObject { zstd: false, ..o.clone() }).collect(),
    };
    let mut w = ztensor_io::Writer::new(Vec::new(), Version::V1_2)?;
    add_objects(&mut w, &one)?;
    let held = Reader::new(w.finish()?.0, &Options::default())?;
    let options = ztensor_v2::WriteOptions::default().zstd(zstd.then_some(3));
    let mut sink = ztensor_v2::Zt2Sink::new(out).with_options(options);
    match ztensor_io::TensorSink::write_all(&mut sink, &held) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ztensor_v2::ErrorKind::Unrepresentable) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn write_inner(recipe: &Recipe, out: &Path) -> Result<()> {
    let Target::Zt(version) = recipe.version else { bail!("not a zTensor 1.x recipe") };
    let mut w = ztensor_io::FileWriter::create(out, version)?;
    add_objects(w.writer_mut(), recipe)?;
    w.finish()?;
    Ok(())
}

/// Adds `recipe`'s attributes and objects to `w`.
pub(super) fn add_objects<W: std::io::Write>(
    w: &mut ztensor_io::Writer<W>,
    recipe: &Recipe,
) -> Result<()> {
    if let Some(attributes) = &recipe.attributes {
        w.set_attributes(ztensor_format::Attributes::try_from(to_value(attributes)?)?)?;
    }
    for o in &recipe.objects {
        let mut options = if o.zstd { WriteOptions::zstd(3) } else { WriteOptions::raw() };
        options.digest.clone_from(&o.digest);
        let role = |r: &str| o.components.iter().find(|c| c.role == r);
        let attributes = o.attributes.as_ref().map(to_value).transpose()?;
        let attributes = attributes.map(ztensor_format::Attributes::try_from).transpose()?;
        let sparse_helper =
            recipe.version == Target::Zt(Version::V0_1) && o.format.starts_with("sparse_");
        match (o.format.as_str(), role("values")) {
            ("sparse_csr", Some(values)) if sparse_helper => {
                let indices = u64s(&role("indices").context("indices")?.bytes);
                let indptr = u64s(&role("indptr").context("indptr")?.bytes);
                let csr = Csr {
                    dtype: values.dtype,
                    values: &values.bytes,
                    indices: &indices,
                    indptr: &indptr,
                };
                w.add_csr(&o.name, &o.shape, csr, &options)?;
            }
            ("sparse_coo", Some(values)) if sparse_helper => {
                let coords = u64s(&role("coords").context("coords")?.bytes);
                let coo = Coo { dtype: values.dtype, values: &values.bytes, coords: &coords };
                w.add_coo(&o.name, &o.shape, coo, &options)?;
            }
            _ => {
                let specs: Vec<ComponentSpec<'_>> = o
                    .components
                    .iter()
                    .map(|c| ComponentSpec {
                        role: &c.role,
                        dtype: c.dtype,
                        logical_type: c.logical_type.as_ref(),
                        data: &c.bytes,
                    })
                    .collect();
                let format = Format::from_name(&o.format);
                w.add_object(&o.name, &o.shape, format, attributes, &specs, &options)?;
            }
        }
    }
    Ok(())
}
