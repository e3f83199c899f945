//! Attribute values between CBOR and Python data, and the names of storage types and
//! encodings.

use pyo3::exceptions::PyValueError;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};
use ztensor_format::attributes::Item as Cbor;
use ztensor_format::{Attributes, Encoding, StorageType, Value, ValueRef};

use pyo3::prelude::*;

/// A CBOR value as Python data: text as `str`, integers as `int`, byte strings as `bytes`,
/// arrays as `list`, maps as `dict` (keys converted the same way; a key Python cannot hash,
/// such as a list, becomes a tuple), tags as their content.
pub(crate) fn to_python<'py>(py: Python<'py>, value: ValueRef<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value.item() {
        Cbor::Integer(i) => i.into_pyobject(py)?.into_any(),
        Cbor::Bytes(b) => PyBytes::new(py, b).into_any(),
        Cbor::Text(t) => PyString::new(py, t).into_any(),
        Cbor::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Cbor::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                let mut key = to_python(py, k)?;
                if let Ok(list) = key.cast::<PyList>() {
                    key = PyTuple::new(py, list.iter())?.into_any();
                }
                dict.set_item(key, to_python(py, v)?)?;
            }
            dict.into_any()
        }
        Cbor::Tag(_, inner) => to_python(py, inner)?,
        Cbor::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Cbor::Null | Cbor::Undefined => py.None().into_bound(py),
        Cbor::Simple(s) => s.into_pyobject(py)?.into_any(),
        Cbor::Float(f) => PyFloat::new(py, f).into_any(),
    })
}

/// Python data as attributes: a `dict` converted as [`from_python`] converts it.
pub(crate) fn attributes_from_python(value: &Bound<'_, PyAny>) -> PyResult<Attributes> {
    if !value.is_instance_of::<PyDict>() {
        return Err(PyValueError::new_err(format!(
            "attributes must be a dict, not {}",
            value.get_type().name()?
        )));
    }
    Attributes::try_from(from_python(value, 0)?)
        .map_err(|e| PyValueError::new_err(format!("attributes: {}", e.message())))
}

/// Python data as a CBOR value: the inverse of [`to_python`] for `str`, `int`, `float`,
/// `bool`, `None`, `bytes`, lists, tuples and dicts.
pub(crate) fn from_python(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > 64 {
        return Err(PyValueError::new_err("attributes nested more than 64 deep"));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        let i: i128 = value
            .extract()
            .map_err(|_| PyValueError::new_err("an integer attribute outside -2^64 ..= 2^64-1"))?;
        return Ok(Value::Integer(i));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::Text(s.to_str()?.to_owned()));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    if let Ok(d) = value.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            entries.push((from_python(&k, depth + 1)?, from_python(&v, depth + 1)?));
        }
        return Ok(Value::Map(entries));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in value.try_iter()? {
            items.push(from_python(&item?, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    Err(PyValueError::new_err(format!(
        "an attribute of type {} (attributes hold str, int, float, bool, None, bytes, lists and dicts)",
        value.get_type().name()?
    )))
}

pub(crate) fn storage_name(t: &StorageType) -> &str {
    match t {
        StorageType::Known(d) => d.name(),
        StorageType::Unknown(s) => s,
    }
}

pub(crate) fn encoding_name(e: &Encoding) -> &str {
    e.name()
}
