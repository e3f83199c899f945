//! Any bytes into the TensorBuffers reader: open (strict and not), read every tensor, and when
//! the file is accepted, re-encode its metadata and check it decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ztensor_tensorbuffers::{ReadOptions, TbReader, decode_metadata, encode_metadata};

fuzz_target!(|data: &[u8]| {
    for options in [ReadOptions::default(), ReadOptions::strict()] {
        let Ok(reader) = TbReader::new(data, &options) else { continue };
        for t in reader.tensors() {
            let _ = reader.data(&t.name);
        }
        let again = encode_metadata(reader.metadata());
        let decoded = decode_metadata(&again, 1 << 20).expect("our own metadata verifies");
        assert_eq!(&decoded, reader.metadata());
    }
});
