//! Sparse tensors written: CSR and COO objects of any version (v0.1's single blob too).

use std::io::Write;

use ztensor_format::{Attributes, DType, ErrorKind as Rule, Format, Object, Packing, Version};
use ztensor_source::{Error, Result};

use super::{ComponentSpec, Coo, Csr, WriteOptions, Writer};

impl<W: Write> Writer<W> {
    /// Adds a CSR matrix (`shape` = `[rows, cols]`) with u64 indices.
    ///
    /// In v0.1 it is written as one blob (indptr, indices, values), the layout v0.1 readers
    /// expect.
    ///
    /// # Errors
    /// `sparse_rank`, `csr_indptr_count`, `sparse_nnz_mismatch`, and as [`Writer::add_object`].
    pub fn add_csr(
        &mut self,
        name: &str,
        shape: &[u64],
        csr: Csr<'_>,
        options: &WriteOptions,
    ) -> Result<()> {
        self.add_csr_object(name, shape, csr, None, options)
    }

    /// [`Writer::add_csr`] with object attributes (in v0.1, the tensor's custom fields).
    ///
    /// # Errors
    /// As [`Writer::add_csr`].
    pub fn add_csr_object(
        &mut self,
        name: &str,
        shape: &[u64],
        csr: Csr<'_>,
        attributes: Option<Attributes>,
        options: &WriteOptions,
    ) -> Result<()> {
        let Csr { dtype, values, indices, indptr } = csr;
        let [rows, _] = shape[..] else {
            return Err(Error::broken(Rule::SparseRank, "a CSR matrix has rank 2"));
        };
        if Some(indptr.len() as u64) != rows.checked_add(1) {
            return Err(Error::broken(Rule::CsrIndptrCount, "indptr must hold rows + 1 entries"));
        }
        if values.len() as u64 != indices.len() as u64 * dtype.size() {
            return Err(Error::broken(
                Rule::SparseNnzMismatch,
                "values and indices hold different counts",
            ));
        }
        let indices = le_u64(indices);
        let indptr = le_u64(indptr);
        if self.version() == Version::V0_1 {
            let packed = [&indptr[..], &indices[..], values].concat();
            return self.add_v0_sparse(
                name,
                shape,
                Format::SparseCsr,
                dtype,
                &packed,
                attributes,
                options,
            );
        }
        let specs = [
            ComponentSpec { role: "values", dtype, logical_type: None, data: values },
            ComponentSpec {
                role: "indices",
                dtype: DType::U64,
                logical_type: None,
                data: &indices,
            },
            ComponentSpec { role: "indptr", dtype: DType::U64, logical_type: None, data: &indptr },
        ];
        self.add_object(name, shape, Format::SparseCsr, attributes, &specs, options)
    }

    /// Adds a COO tensor with u64 coordinates in structure-of-arrays order (`coords[d * nnz + i]`).
    ///
    /// In v0.1 it is written as one blob of (coordinates, value) records.
    ///
    /// # Errors
    /// `sparse_rank`, `sparse_nnz_mismatch`, and as [`Writer::add_object`].
    pub fn add_coo(
        &mut self,
        name: &str,
        shape: &[u64],
        coo: Coo<'_>,
        options: &WriteOptions,
    ) -> Result<()> {
        self.add_coo_object(name, shape, coo, None, options)
    }

    /// [`Writer::add_coo`] with object attributes (in v0.1, the tensor's custom fields).
    ///
    /// # Errors
    /// As [`Writer::add_coo`].
    pub fn add_coo_object(
        &mut self,
        name: &str,
        shape: &[u64],
        coo: Coo<'_>,
        attributes: Option<Attributes>,
        options: &WriteOptions,
    ) -> Result<()> {
        let Coo { dtype, values, coords } = coo;
        let rank = shape.len();
        if rank == 0 {
            return Err(Error::broken(Rule::SparseRank, "a COO tensor has rank 1 or more"));
        }
        let width = usize::try_from(dtype.size()).unwrap_or(1);
        let nnz = values.len() / width;
        if !values.len().is_multiple_of(width) || Some(coords.len()) != nnz.checked_mul(rank) {
            return Err(Error::broken(
                Rule::SparseNnzMismatch,
                "coords must hold rank × nnz entries",
            ));
        }
        if self.version() == Version::V0_1 {
            let mut packed = Vec::with_capacity(nnz * (rank * 8 + width));
            for i in 0..nnz {
                for d in 0..rank {
                    packed.extend_from_slice(&coords[d * nnz + i].to_le_bytes());
                }
                packed.extend_from_slice(&values[i * width..(i + 1) * width]);
            }
            return self.add_v0_sparse(
                name,
                shape,
                Format::SparseCoo,
                dtype,
                &packed,
                attributes,
                options,
            );
        }
        let coords = le_u64(coords);
        let specs = [
            ComponentSpec { role: "values", dtype, logical_type: None, data: values },
            ComponentSpec { role: "coords", dtype: DType::U64, logical_type: None, data: &coords },
        ];
        self.add_object(name, shape, Format::SparseCoo, attributes, &specs, options)
    }

    #[allow(clippy::too_many_arguments)]
    fn add_v0_sparse(
        &mut self,
        name: &str,
        shape: &[u64],
        format: Format,
        dtype: DType,
        packed: &[u8],
        attributes: Option<Attributes>,
        options: &WriteOptions,
    ) -> Result<()> {
        self.check_name(name)?;
        let component = self.write_component(dtype, None, packed, options)?;
        let mut object =
            Object::new(name, shape.to_vec(), format).with_component("data", component);
        object.packing = Packing::V0Single;
        object.attributes = attributes.map(Box::new);
        self.push(object)
    }
}

/// Indices as the little-endian bytes a blob holds.
fn le_u64(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}
