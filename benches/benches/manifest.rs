//! Opening a file's index: decode + validate a manifest, against a general-purpose CBOR decoder
//! (`ciborium` into its dynamic value) decoding the same bytes without any checks.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ztensor_benches::file_with_objects;
use ztensor_format::{Options, parse_file};

fn manifest(c: &mut Criterion) {
    let mut group = c.benchmark_group("open_index");
    group.sample_size(20);
    for n in [200usize, 100_000] {
        let (file, cbor) = file_with_objects(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("ztensor_parse_validate", n), &file, |b, file| {
            b.iter(|| parse_file(file, &Options::default()).expect("valid"))
        });
        group.bench_with_input(BenchmarkId::new("ciborium_value_decode", n), &cbor, |b, cbor| {
            b.iter(|| ciborium::from_reader::<ciborium::value::Value, _>(&cbor[..]).expect("valid"))
        });
    }
    group.finish();
}

criterion_group!(benches, manifest);
criterion_main!(benches);
