//! Times each phase of opening an index (CBOR decode, schema, validation) on 100,000 objects.

use std::time::Instant;

use ztensor_benches::file_with_objects;
use ztensor_format::{Container, Limits, Manifest, Options, cbor, parse_file};

fn main() {
    let (file, manifest) =
        file_with_objects(std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000));
    let t = Instant::now();
    let peer = ciborium::from_reader::<ciborium::value::Value, _>(&manifest[..]).expect("valid");
    let peer_time = t.elapsed();
    drop(peer);
    let t = Instant::now();
    let value = cbor::decode(&manifest, 64).expect("valid");
    let cbor_time = t.elapsed();
    drop(value);
    let t = Instant::now();
    let m = Manifest::decode(Container::V1, &manifest, &Limits::default()).expect("valid");
    let decode_time = t.elapsed();
    drop(m);
    let t = Instant::now();
    let v = parse_file(&file, &Options::default()).expect("valid");
    let total = t.elapsed();
    let t = Instant::now();
    drop(v);
    let drop_time = t.elapsed();
    println!(
        "ciborium {peer_time:?}  cbor {cbor_time:?}  cbor+schema {decode_time:?}  parse+validate {total:?}  drop {drop_time:?}"
    );
}
