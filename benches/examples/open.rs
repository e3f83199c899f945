//! Opens a file repeatedly (for profiling `Reader::open`): `open FILE [TIMES]`.

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a file");
    let times: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let t = Instant::now();
    for _ in 0..times {
        let reader = ztensor_io::Reader::open(&path).expect("open");
        std::hint::black_box(reader.manifest().len());
    }
    println!("{:?} per open", t.elapsed() / times);
}
