//! An object decoded into the 1.2 object model, as every tensor source gives it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ztensor_format::{Attributes, DType, Format, LogicalType};

/// A component decoded into the 1.2 object model: little-endian elements of `dtype`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentData<'a> {
    /// The storage type.
    pub dtype: DType,
    /// The logical type, if any.
    pub logical_type: Option<LogicalType>,
    /// The decoded bytes (borrowed from a map or slice when no decoding was needed).
    pub bytes: Cow<'a, [u8]>,
}

/// An object decoded into the 1.2 object model (v0.1 sparse tensors unpacked into separate
/// components, big-endian data swapped).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectData<'a> {
    /// The object's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its format.
    pub format: Format,
    /// Its attributes, borrowed from the manifest (a decoded manifest's attributes can be
    /// large; reading an object does not copy them).
    pub attributes: Option<Cow<'a, Attributes>>,
    /// The decoded components by role.
    pub components: BTreeMap<String, ComponentData<'a>>,
}

impl ObjectData<'_> {
    /// Copies borrowed bytes so the data outlives the reader.
    pub fn into_owned(self) -> ObjectData<'static> {
        ObjectData {
            name: self.name,
            shape: self.shape,
            format: self.format,
            attributes: self.attributes.map(|a| Cow::Owned(a.into_owned())),
            components: self
                .components
                .into_iter()
                .map(|(role, c)| {
                    let bytes = Cow::Owned(c.bytes.into_owned());
                    (role, ComponentData { dtype: c.dtype, logical_type: c.logical_type, bytes })
                })
                .collect(),
        }
    }
}
