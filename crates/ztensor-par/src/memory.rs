//! Dense tensors in memory as a [`TensorSource`], so a list of tensors is written to any
//! format the way a file is converted: the Python package's `save_file` to a `.safetensors`
//! name goes through the same sink as `convert`.

use std::borrow::Cow;

use ztensor_format::{
    Attributes, Encoding, ErrorKind as Rule, Format, LogicalType, StorageType, role,
};
use ztensor_io::{
    ComponentData, ComponentInfo, Error, ObjectData, ObjectInfo, Result, TensorSource,
};

use crate::Tensor;

/// Dense tensors in memory, each one `data` component, in the order given, with the file's
/// attributes.
///
/// ```
/// use ztensor_format::DType;
/// use ztensor_io::TensorSource;
/// use ztensor_par::{InMemory, Tensor};
///
/// let bytes = 1.5f32.to_le_bytes();
/// let tensors = [Tensor::new("w", &[1], DType::F32, &bytes)];
/// let source = InMemory::new(&tensors, None).unwrap();
/// assert_eq!(source.len(), 1);
/// assert_eq!(&*source.read(0).unwrap().components["data"].bytes, &bytes);
///
/// // Bytes that do not fill the shape are refused.
/// let short = [Tensor::new("w", &[2], DType::F32, &bytes)];
/// assert!(InMemory::new(&short, None).is_err());
/// ```
#[derive(Debug)]
pub struct InMemory<'a> {
    tensors: &'a [Tensor<'a>],
    attributes: Option<Attributes>,
}

impl<'a> InMemory<'a> {
    /// `tensors` as a source, each checked to hold exactly `product(shape)` elements of its
    /// type.
    ///
    /// # Errors
    /// `shape_overflow` or `dense_size_mismatch`, naming the tensor.
    pub fn new(tensors: &'a [Tensor<'a>], attributes: Option<Attributes>) -> Result<InMemory<'a>> {
        for t in tensors {
            let expected = t
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .and_then(|n| ztensor_format::dense_len(t.dtype, t.logical_type.as_ref(), n))
                .ok_or_else(|| {
                    ztensor_format::Error::new(
                        Rule::ShapeOverflow,
                        format!("tensor {:?}: shape {:?} overflows", t.name, t.shape),
                    )
                })?;
            if expected != t.data.len() as u64 {
                return Err(Error::from(ztensor_format::Error::new(
                    Rule::DenseSizeMismatch,
                    format!(
                        "tensor {:?}: {} bytes for shape {:?} of {}, which takes {expected}",
                        t.name,
                        t.data.len(),
                        t.shape,
                        t.logical_type.as_ref().map_or(t.dtype.name(), LogicalType::name)
                    ),
                )));
            }
        }
        Ok(InMemory { tensors, attributes })
    }
}

impl TensorSource for InMemory<'_> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("tensors in memory")
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        self.attributes.as_ref().map(Cow::Borrowed)
    }

    fn len(&self) -> usize {
        self.tensors.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let t = self.tensors.get(index)?;
        let len = t.data.len() as u64;
        Some(ObjectInfo {
            name: Cow::Borrowed(t.name),
            shape: Cow::Borrowed(t.shape),
            format: Format::Dense,
            attributes: t.attributes.as_ref().map(Cow::Borrowed),
            components: vec![ComponentInfo {
                role: Cow::Borrowed(role::DATA),
                dtype: StorageType::from(t.dtype),
                logical_type: t.logical_type.clone(),
                decoded_len: Some(len),
                stored_len: len,
                offset: None,
                encoding: Encoding::Raw,
                digest: None,
            }],
            unsupported: None,
            location: None,
        })
    }

    fn read(&self, index: usize) -> Result<ObjectData<'_>> {
        let t =
            self.tensors.get(index).ok_or_else(|| Error::not_found(&format!("#{index}"), None))?;
        let data = ComponentData {
            dtype: t.dtype,
            logical_type: t.logical_type.clone(),
            bytes: Cow::Borrowed(t.data),
        };
        Ok(ObjectData {
            name: t.name.to_owned(),
            shape: t.shape.to_vec(),
            format: Format::Dense,
            attributes: t.attributes.as_ref().map(Cow::Borrowed),
            components: [(role::DATA.to_owned(), data)].into_iter().collect(),
        })
    }
}
