use super::*;

#[test]
fn combined_pieces_give_the_whole_digest() {
    let data: Vec<u8> =
        (0..70_000u32).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[1]).collect();
    for piece in [1024u64, 2048, 4096] {
        // Two pieces up to many, the last short or full.
        for len in [
            2 * piece,
            2 * piece - 1,
            piece + 1,
            3 * piece,
            5 * piece + 7,
            16 * piece,
            17 * piece - 3,
        ] {
            let bytes = &data[..usize::try_from(len).unwrap().min(data.len())];
            for algorithm in [DigestAlgorithm::Blake3, DigestAlgorithm::Crc32c] {
                let mut c = Combiner::new(&algorithm, piece).unwrap();
                let chunks: Vec<&[u8]> = bytes.chunks(usize::try_from(piece).unwrap()).collect();
                // Shares computed in reverse order, pushed in order.
                let mut shares: Vec<Share> =
                    chunks.iter().enumerate().rev().map(|(i, b)| c.share(i as u64, b)).collect();
                shares.reverse();
                for share in shares {
                    assert!(c.push(share));
                }
                assert!(c.tail(&[]));
                assert_eq!(
                    c.finish(),
                    digest_of(&algorithm, bytes),
                    "{algorithm:?} piece {piece} len {}",
                    bytes.len()
                );
            }
        }
    }
    // CRC-32C: any piece size, and bytes after the pieces.
    let mut c = Combiner::new(&DigestAlgorithm::Crc32c, 100).unwrap();
    for (i, b) in data[..1_050].chunks(100).enumerate() {
        let share = c.share(i as u64, b);
        assert!(c.push(share));
    }
    assert!(c.tail(&data[1_050..1_060]));
    assert_eq!(c.finish(), digest_of(&DigestAlgorithm::Crc32c, &data[..1_060]));
    // What cannot be combined is refused.
    assert!(Combiner::new(&DigestAlgorithm::Sha256, 4096).is_none());
    assert!(Combiner::new(&DigestAlgorithm::Blake3, 3000).is_none());
    assert!(Combiner::new(&DigestAlgorithm::Blake3, 512).is_none());
    let mut c = Combiner::new(&DigestAlgorithm::Blake3, 1024).unwrap();
    let short = c.share(0, &data[..10]);
    assert!(c.push(short));
    let after = c.share(1, &data[..1024]);
    assert!(!c.push(after), "nothing after a short piece");
    assert!(!c.tail(b"table"));
    assert_eq!(c.finish(), None, "one BLAKE3 piece is hashed whole, not combined");
    let mut c = Combiner::new(&DigestAlgorithm::Blake3, 1024).unwrap();
    assert!(!c.push(Share::Crc32c { crc: 0, len: 1 }));
}

/// The bytes of this thread's spare zstd context, if it keeps one.
#[cfg(feature = "zstd")]
fn spare() -> Option<usize> {
    let context = SPARE.with(std::cell::Cell::take);
    let size = context.as_ref().map(zstd::zstd_safe::DCtx::sizeof);
    SPARE.with(|s| s.set(context));
    size
}

#[cfg(feature = "zstd")]
#[test]
fn a_thread_keeps_one_small_zstd_context_and_each_decode_starts_clean() {
    std::thread::spawn(|| {
        let a: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        let b: Vec<u8> = (0..3000u32).map(|i| (i % 11) as u8).collect();
        let (za, zb) = (zstd_encode(&a, 3).unwrap(), zstd_encode(&b, 3).unwrap());
        assert_eq!(spare(), None, "a new thread has none");
        assert_eq!(zstd_decode(&za, Some(5000), 1 << 20).unwrap(), a);
        assert!(spare().is_some_and(|n| n <= Context::KEEP_AT_MOST), "kept after a decode");
        // A decode that stops mid-frame leaves nothing behind for the next one.
        assert!(zstd_decode(&za[..za.len() / 2], Some(5000), 1 << 20).is_err());
        let mut short = vec![0u8; 100];
        assert!(zstd_decode_into(&za, &mut short).is_err());
        assert_eq!(zstd_decode(&zb, Some(3000), 1 << 20).unwrap(), b);
        let mut out = vec![0u8; 5000];
        zstd_decode_into(&za, &mut out).unwrap();
        assert_eq!(out, a);
        // A frame with an 8 MiB window and no declared size grows the context past what is
        // kept: it is freed, not held by the thread.
        let big: Vec<u8> =
            (0..(8u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        encoder.window_log(23).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, &big).unwrap();
        let zbig = encoder.finish().unwrap();
        assert_eq!(zstd_decode(&zbig, None, 16 << 20).unwrap(), big);
        assert_eq!(spare(), None, "a grown context is not kept");
        assert_eq!(zstd_decode(&zb, Some(3000), 1 << 20).unwrap(), b);
        assert!(spare().is_some());
    })
    .join()
    .unwrap();
}

#[test]
fn decoding_into_a_slice_needs_exactly_its_size() {
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
    let z = zstd_encode(&data, 3).unwrap();
    let mut out = vec![0u8; 5000];
    zstd_decode_into(&z, &mut out).unwrap();
    assert_eq!(out, data);
    let short = zstd_decode_into(&z, &mut vec![0u8; 4999]).unwrap_err();
    assert_eq!(short.kind(), ErrorKind::DecodedSizeMismatch);
    let long = zstd_decode_into(&z, &mut vec![0u8; 5001]).unwrap_err();
    assert_eq!(long.kind(), ErrorKind::DecodedSizeMismatch);
    let mut broken = z.clone();
    let mid = broken.len() / 2;
    broken[mid] ^= 0xff;
    let e = zstd_decode_into(&broken, &mut out).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::DecodeFailed | ErrorKind::DecodedSizeMismatch));
}

#[test]
fn zstd_sizes_are_exact() {
    let data = vec![7u8; 1000];
    let z = zstd_encode(&data, 3).unwrap();
    assert_eq!(zstd_decode(&z, Some(1000), 1 << 20).unwrap(), data);
    assert_eq!(zstd_decode(&z, None, 1 << 20).unwrap(), data);
    assert_eq!(
        zstd_decode(&z, Some(999), 1 << 20).unwrap_err().kind(),
        ErrorKind::DecodedSizeMismatch
    );
    assert_eq!(
        zstd_decode(&z, Some(1001), 1 << 20).unwrap_err().kind(),
        ErrorKind::DecodedSizeMismatch
    );
    assert_eq!(zstd_decode(&z, None, 999).unwrap_err().kind(), ErrorKind::DecodedTooLarge);
    assert_eq!(zstd_decode(&z, Some(1000), 999).unwrap_err().kind(), ErrorKind::DecodedTooLarge);
    assert_eq!(
        zstd_decode(&z[..z.len() - 1], Some(1000), 1 << 20).unwrap_err().kind(),
        ErrorKind::DecodeFailed
    );
    assert_eq!(
        zstd_decode(b"not zstd", None, 1 << 20).unwrap_err().kind(),
        ErrorKind::DecodeFailed
    );
    // A sequence of frames is one stream.
    let two =
        [zstd_encode(&data[..400], 1).unwrap(), zstd_encode(&data[400..], 1).unwrap()].concat();
    assert_eq!(zstd_decode(&two, Some(1000), 1 << 20).unwrap(), data);
}

#[test]
fn chunked_frames_and_seek_table() {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(zstd_encode_chunked(&data, 3, 10_000).unwrap(), zstd_encode(&data, 3).unwrap());
    let z = zstd_encode_chunked(&data, 3, 4096).unwrap();
    // Ordinary decoding reads all frames and skips the table.
    assert_eq!(zstd_decode(&z, Some(10_000), 1 << 20).unwrap(), data);
    let frames = parse_seek_table(&z).unwrap();
    assert_eq!(frames.iter().map(|f| f.decompressed).collect::<Vec<_>>(), [4096, 4096, 1808]);
    for f in &frames {
        let (start, end) =
            (usize::try_from(f.offset).unwrap(), usize::try_from(f.offset + f.compressed).unwrap());
        let piece = &z[start..end];
        assert_eq!(
            zstd_decode(piece, Some(f.decompressed), 1 << 20).unwrap().len() as u64,
            f.decompressed
        );
    }
    assert_eq!(parse_seek_table(&zstd_encode(&data, 3).unwrap()), None);
    // A table whose frames do not tile the bytes is ignored.
    let mut bad = z.clone();
    bad.insert(0, 0);
    assert_eq!(parse_seek_table(&bad), None);
    assert!(zstd_encode_chunked(&data, 3, 0).is_err());
}

#[test]
fn known_digests() {
    // Check values from the algorithms' published test vectors.
    assert_eq!(
        digest_of(&DigestAlgorithm::Crc32c, b"123456789"),
        Some(Digest::Crc32c(0xe306_9283))
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let Some(Digest::Blake3(b)) = digest_of(&DigestAlgorithm::Blake3, b"") else {
        panic!("blake3")
    };
    assert_eq!(
        ztensor_format::to_hex(&b[..]),
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    );
    assert_eq!(digest_of(&DigestAlgorithm::Unknown("xxh3".into()), b""), None);
}
