//! Shared inputs for the benchmarks: synthetic manifests and files of realistic shape.

use ztensor_format::{
    Component, Container, DType, Format, Manifest, Object, OffsetAllocator, Version,
};

/// A v1.2 file with `n` dense f32 objects named like a transformer checkpoint, with a data area
/// of zero-length placeholders (the manifest is what these benchmarks measure).
pub fn file_with_objects(n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut manifest = Manifest::new(Version::V1_2);
    let mut alloc = OffsetAllocator::new();
    for i in 0..n {
        let len = 64 * (1 + (i as u64 % 7));
        let offset = alloc.reserve(len).expect("small offsets");
        let name = format!("model.layers.{}.mlp.proj_{}.weight", i / 8, i % 8);
        manifest.objects.push(
            Object::new(name, vec![len / 4], Format::Dense)
                .with_component("data", Component::new(DType::F32, offset, len)),
        );
    }
    let cbor = manifest.encode().expect("encodable");
    let mut file = Container::V1.magic().to_vec();
    file.resize(usize::try_from(alloc.end()).expect("fits"), 0);
    file.extend_from_slice(&cbor);
    file.extend_from_slice(&Container::V1.encode_trailer(cbor.len() as u64));
    (file, cbor)
}
