//! Writing an object decoded into the 1.2 model with the writer version's own helpers.

use std::io::Write;

use ztensor_format::data::indices_to_u64;
use ztensor_format::{DType, Error as FormatError, ErrorKind as Rule, Format, Version};

use crate::reader::ObjectData;
use crate::writer::{ComponentSpec, Coo, Csr, WriteOptions, Writer};
use ztensor_source::{Error, Result};

fn u64_component(c: &crate::reader::ComponentData<'_>) -> Result<Vec<u64>> {
    Ok(indices_to_u64(c.dtype, &c.bytes)?)
}

fn le_bytes(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Whether sparse values go through the writer's CSR/COO helpers (which pack v0.1's single blob
/// and write u64 indices), rather than the general path that can carry a logical type; v0.1 has
/// no logical types at all.
fn sparse_helper_applies(
    target: Version,
    values: &crate::reader::ComponentData<'_>,
) -> Result<bool> {
    match (&values.logical_type, target) {
        (None, _) => Ok(true),
        (Some(t), Version::V0_1) => Err(FormatError::new(
            Rule::Unrepresentable,
            format!("v0.1 cannot express logical type {t}"),
        )
        .into()),
        (Some(_), _) => Ok(false),
    }
}

/// Writes an object decoded into the 1.2 model (from any [`TensorSource`](crate::TensorSource))
/// with the writer's version's helpers: v0.1 sparse tensors packed into their single blob, u64
/// indices where the helpers need them.
///
/// # Errors
/// `unrepresentable`, naming the object, for what the writer's version cannot express; the
/// writer's errors.
pub fn write_data<W: Write>(
    writer: &mut Writer<W>,
    data: &ObjectData<'_>,
    options: &WriteOptions,
) -> Result<()> {
    let target = writer.version();
    write_decoded(writer, data, target, options).map_err(|e| match e.format_error() {
        Some(f) if f.object().is_none() => Error::from(f.clone().in_object(&data.name)),
        _ => e,
    })
}

fn write_decoded<W: Write>(
    writer: &mut Writer<W>,
    data: &ObjectData<'_>,
    target: Version,
    options: &WriteOptions,
) -> Result<()> {
    let get = |role: &str| {
        data.components.get(role).ok_or_else(|| Error::not_found(&data.name, Some(role)))
    };
    match data.format {
        Format::SparseCsr if data.components.len() == 3 => {
            let values = get("values")?;
            let indices = u64_component(get("indices")?)?;
            let indptr = u64_component(get("indptr")?)?;
            if sparse_helper_applies(target, values)? {
                let csr = Csr {
                    dtype: values.dtype,
                    values: &values.bytes,
                    indices: &indices,
                    indptr: &indptr,
                };
                return writer.add_csr_object(
                    &data.name,
                    &data.shape,
                    csr,
                    data.attributes.as_deref().cloned(),
                    options,
                );
            }
            let (indices, indptr) = (le_bytes(&indices), le_bytes(&indptr));
            let specs = [
                ComponentSpec {
                    role: "values",
                    dtype: values.dtype,
                    logical_type: values.logical_type.as_ref(),
                    data: &values.bytes,
                },
                ComponentSpec {
                    role: "indices",
                    dtype: DType::U64,
                    logical_type: None,
                    data: &indices,
                },
                ComponentSpec {
                    role: "indptr",
                    dtype: DType::U64,
                    logical_type: None,
                    data: &indptr,
                },
            ];
            writer.add_object(
                &data.name,
                &data.shape,
                Format::SparseCsr,
                data.attributes.as_deref().cloned(),
                &specs,
                options,
            )
        }
        Format::SparseCoo if data.components.len() == 2 => {
            let values = get("values")?;
            let coords = u64_component(get("coords")?)?;
            if sparse_helper_applies(target, values)? {
                let coo = Coo { dtype: values.dtype, values: &values.bytes, coords: &coords };
                return writer.add_coo_object(
                    &data.name,
                    &data.shape,
                    coo,
                    data.attributes.as_deref().cloned(),
                    options,
                );
            }
            let coords = le_bytes(&coords);
            let specs = [
                ComponentSpec {
                    role: "values",
                    dtype: values.dtype,
                    logical_type: values.logical_type.as_ref(),
                    data: &values.bytes,
                },
                ComponentSpec {
                    role: "coords",
                    dtype: DType::U64,
                    logical_type: None,
                    data: &coords,
                },
            ];
            writer.add_object(
                &data.name,
                &data.shape,
                Format::SparseCoo,
                data.attributes.as_deref().cloned(),
                &specs,
                options,
            )
        }
        _ => {
            let specs: Vec<ComponentSpec<'_>> = data
                .components
                .iter()
                .map(|(role, c)| ComponentSpec {
                    role,
                    dtype: c.dtype,
                    logical_type: c.logical_type.as_ref(),
                    data: &c.bytes,
                })
                .collect();
            writer.add_object(
                &data.name,
                &data.shape,
                data.format.clone(),
                data.attributes.as_deref().cloned(),
                &specs,
                options,
            )
        }
    }
}
