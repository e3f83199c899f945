use super::*;
use ztensor_format::{DType, Options, Version};
use ztensor_io::Reader;

#[test]
fn frames_are_pieces_only_when_they_tile_alike() {
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 249) as u8).collect();
    let chunked = WriteOptions { chunk_size: Some(2048), ..WriteOptions::zstd(3) };
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("w", &[20_000], DType::U8, &data, &chunked).unwrap();
    w.add_dense("one", &[100], DType::U8, &data[..100], &chunked).unwrap();
    let file = w.finish().unwrap().0;
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let at = |name: &str| {
        let c = &reader.object(name).unwrap().model().components["data"];
        (c.offset, c.length)
    };
    let (offset, stored) = at("w");
    let source = &file[..];
    let frames = frames_as_pieces(&source, offset, stored, 20_000, &chunked).unwrap();
    assert_eq!(frames.len(), 10);
    assert_eq!(frames.iter().map(|f| f.decompressed).sum::<u64>(), 20_000);
    // Other pieces than the frames, another declared length, or one frame: a stream.
    let other = WriteOptions { chunk_size: Some(4096), ..WriteOptions::zstd(3) };
    assert!(frames_as_pieces(&source, offset, stored, 20_000, &other).is_none());
    assert!(frames_as_pieces(&source, offset, stored, 19_999, &chunked).is_none());
    let (offset, stored) = at("one");
    assert!(frames_as_pieces(&source, offset, stored, 100, &chunked).is_none());
    // A table past the component's start, or cut short: a stream, not an error.
    assert!(frames_as_pieces(&source, offset, 5, 100, &chunked).is_none());
    // One piece: one "frame" of every stored byte; a claim past what they decode to: none.
    let whole = whole_as_piece(stored, 100, &chunked).unwrap();
    assert_eq!((whole.len(), whole[0].compressed, whole[0].decompressed), (1, stored, 100));
    assert!(whole_as_piece(stored, 100_000, &chunked).is_none());
    assert!(
        whole_as_piece(10, ztensor_io::codec::zstd_max_decoded(10) + 1, &WriteOptions::zstd(1))
            .is_none()
    );
}
