//! Integration tests of ztensor-foreign. safetensors files are written and read back by the
//! `safetensors` crate, independently of this crate's parser and writer.

// Test data is small; lengths always fit.
#![allow(clippy::cast_possible_truncation)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use ztensor_foreign::ErrorKind;
use ztensor_foreign::safetensors::{SafetensorsFile, SafetensorsSink};
use ztensor_format::{DType, LogicalType, Options, Version};
use ztensor_io::{Chunked, Reader, WriteOptions, Writer};
use ztensor_par::ParOptions;

/// A test tensor: name, dtype, shape, bytes.
type Spec = (String, Dtype, Vec<usize>, Vec<u8>);

/// A case of a table: what, how to build the checkpoint, expected kind, expected message.
type Case<'a> = (&'a str, Box<dyn Fn(&Path) -> PathBuf>, ErrorKind, &'a str);

fn dir(name: &str) -> ztensor_testkit::Scratch {
    ztensor_testkit::scratch(&format!("foreign-{name}"))
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed)).collect()
}

/// Every safetensors dtype zTensor can hold: (name, dtype, shape, element bytes).
fn every_dtype() -> Vec<Spec> {
    let dtypes = [
        (Dtype::BOOL, 1),
        (Dtype::U8, 1),
        (Dtype::I8, 1),
        (Dtype::U16, 2),
        (Dtype::I16, 2),
        (Dtype::U32, 4),
        (Dtype::I32, 4),
        (Dtype::U64, 8),
        (Dtype::I64, 8),
        (Dtype::F16, 2),
        (Dtype::BF16, 2),
        (Dtype::F32, 4),
        (Dtype::F64, 8),
        (Dtype::F8_E4M3, 1),
        (Dtype::F8_E5M2, 1),
        (Dtype::F8_E4M3FNUZ, 1),
        (Dtype::F8_E5M2FNUZ, 1),
        (Dtype::C64, 8),
    ];
    dtypes
        .iter()
        .enumerate()
        .map(|(i, &(dtype, size))| {
            let shape = vec![2, 3];
            let mut data = bytes(6 * size, i as u8);
            if dtype == Dtype::BOOL {
                data.iter_mut().for_each(|b| *b &= 1);
            }
            (format!("t{i:02}.{dtype}"), dtype, shape, data)
        })
        .collect()
}

/// A safetensors file written by the `safetensors` crate.
fn safetensors_file(tensors: &[Spec], metadata: Option<HashMap<String, String>>) -> Vec<u8> {
    let views: Vec<(&str, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, metadata).unwrap()
}

/// Every tensor of `source` into `w` through the zTensor sink, on `threads` threads.
fn sink(
    source: &dyn ztensor_io::TensorSource,
    w: &mut Writer<Vec<u8>>,
    options: &WriteOptions,
    threads: usize,
) -> Result<(), ztensor_io::Error> {
    use ztensor_io::TensorSink;
    let par = ParOptions::with_threads(threads);
    ztensor_par::ZtSink::new(w, options.clone(), &par, &()).write_all(source)?;
    Ok(())
}

/// `source` exported through the safetensors sink into memory: how it went (the bytes written),
/// and what was written.
fn exported(
    source: &dyn ztensor_io::TensorSource,
    drop_attributes: bool,
) -> (Result<u64, ztensor_foreign::Error>, Vec<u8>) {
    use ztensor_io::TensorSink;
    let mut sink = SafetensorsSink::to_writer(Vec::new()).drop_attributes(drop_attributes);
    let result = sink.write_all(source).map(|_| sink.written());
    (result, sink.into_inner().unwrap())
}

fn to_zt(st: &[u8], version: Version, options: &WriteOptions, threads: usize) -> Vec<u8> {
    let file = SafetensorsFile::new(st).unwrap();
    let mut w = Writer::new(Vec::new(), version).unwrap();
    sink(&file, &mut w, options, threads).unwrap();
    w.finish().unwrap().0
}

mod import;

mod export;

mod sharded;

mod npy;

mod sources;

mod numpy_in;

mod gguf_in;

mod npz_in;

mod torch_in;
