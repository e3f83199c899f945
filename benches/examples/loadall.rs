//! Reads every tensor of a file into owned buffers, one thread then all: `loadall FILE`.

use std::time::Instant;

use ztensor_par::{ParOptions, load_all};

fn main() {
    let path = std::env::args().nth(1).expect("a file");
    let reader = ztensor_io::Reader::open(&path).expect("open");
    for round in 0..3 {
        let t = Instant::now();
        for o in reader.manifest().objects() {
            std::hint::black_box(
                reader
                    .component(o.name(), "data")
                    .and_then(|c| c.decoded())
                    .expect("read")
                    .into_owned(),
            );
        }
        let one = t.elapsed();
        let t = Instant::now();
        std::hint::black_box(load_all(&reader, &ParOptions::with_threads(2)).expect("load"));
        let all = t.elapsed();
        println!("round {round}: 1 thread {one:?}  load_all(2) {all:?}");
    }
}
