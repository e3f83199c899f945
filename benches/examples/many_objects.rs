//! Writes the many-objects inputs of the memory measurements: `many_objects DIR [N]` makes
//! `DIR/many.zt` (N empty f32 tensors `t0000000`, … in zTensor 1.2) and `DIR/many.safetensors`
//! (the same tensors), N = 1,000,000 by default: a checkpoint of many small tensors (an MoE
//! model's experts) with nothing to hold but its manifest.

use std::io::Write as _;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("an output directory"));
    let n: usize = args.next().map_or(1_000_000, |a| a.parse().expect("a count"));
    std::fs::create_dir_all(&dir).expect("output directory");

    let options = ztensor_io::WriteOptions::raw();
    let mut w = ztensor_io::FileWriter::create(dir.join("many.zt"), ztensor_format::Version::V1_2)
        .expect("create many.zt");
    for i in 0..n {
        w.add_dense(&format!("t{i:07}"), &[0], ztensor_format::DType::F32, &[], &options)
            .expect("add");
    }
    w.finish().expect("finish many.zt");

    // safetensors: an 8-byte header length, the JSON header, and no data.
    let mut header = String::from("{");
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        header
            .push_str(&format!(r#""t{i:07}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}"#));
    }
    header.push('}');
    let mut out = std::fs::File::create(dir.join("many.safetensors")).expect("create");
    out.write_all(&(header.len() as u64).to_le_bytes()).expect("write");
    out.write_all(header.as_bytes()).expect("write");
}
