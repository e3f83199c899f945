//! Compares ways of reading a whole file into fresh owned buffers: `readpaths FILE [PIECE_MIB]`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("a file");
    let piece: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(4) << 20;
    let file = File::open(&path).expect("open");
    let len = usize::try_from(file.metadata().expect("stat").len()).expect("fits");
    for round in 0..3 {
        let t = Instant::now();
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, 0).expect("pread");
        let pread1 = t.elapsed();
        drop(buf);

        let t = Instant::now();
        let mut buf = vec![0u8; len];
        std::thread::scope(|s| {
            for (i, chunk) in buf.chunks_mut(len.div_ceil(2)).enumerate() {
                let file = &file;
                s.spawn(move || {
                    for (j, p) in chunk.chunks_mut(piece).enumerate() {
                        file.read_exact_at(p, (i * len.div_ceil(2) + j * piece) as u64)
                            .expect("pread");
                    }
                });
            }
        });
        let pread2 = t.elapsed();
        drop(buf);

        // SAFETY: the file is not modified while mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
        let t = Instant::now();
        let v = map.to_vec();
        let mmap1 = t.elapsed();
        drop(v);
        drop(map);

        // SAFETY: as above.
        let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
        let t = Instant::now();
        let mut buf = vec![0u8; len];
        std::thread::scope(|s| {
            for (dst, src) in buf.chunks_mut(len.div_ceil(2)).zip(map.chunks(len.div_ceil(2))) {
                s.spawn(move || dst.copy_from_slice(src));
            }
        });
        let mmap2 = t.elapsed();
        drop(buf);
        drop(map);
        println!(
            "round {round}: pread 1T {pread1:?}  pread 2T {pread2:?}  mmap+copy 1T {mmap1:?}  mmap+copy 2T {mmap2:?}"
        );
    }
}
