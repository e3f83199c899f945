use std::collections::BTreeSet;
use std::io::Cursor;
use std::sync::atomic::{AtomicBool, Ordering};

use ztensor_format::{DType, Version};
use ztensor_io::TensorSink;

use super::*;

/// The names of this process's threads that are compression workers (`zt-work-{i}`), as
/// the kernel lists them now.
fn workers() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let comm = |t: std::fs::DirEntry| std::fs::read_to_string(t.path().join("comm")).ok();
    let names = tasks.flatten().filter_map(comm).map(|c| c.trim_end().to_owned());
    names.filter(|c| c.starts_with("zt-work-")).collect()
}

/// A zstd write runs on exactly the workers its `ParOptions` ask for, both the parts
/// compressed ahead and the one streamed through the encoder at its turn (none on the
/// caller's pool, none on a pool sized from it), and the bytes do not depend on how many.
/// No other test of this binary starts `zt-work-` threads.
#[test]
fn a_zstd_write_runs_on_exactly_the_threads_asked_for() {
    let mut w = ztensor_io::Writer::new(Vec::new(), Version::V1_2).unwrap();
    let raw = ztensor_io::WriteOptions::raw();
    // Four parts of 4 MiB, compressed ahead; one of 24 MiB, over the 8 MiB a budget of
    // 16 MiB lets ahead, streamed when its turn comes.
    for (name, mib) in [("a", 4u32), ("b", 4), ("c", 24), ("d", 4), ("e", 4)] {
        let len = mib << 18;
        let data: Vec<u8> = (0..len).flat_map(|i| (i / 7).to_le_bytes()).collect();
        w.add_dense(name, &[u64::from(len)], DType::U32, &data, &raw).unwrap();
    }
    let source = ztensor_io::Reader::new(w.finish().unwrap().0, &Default::default()).unwrap();
    let mut written = Vec::new();
    for threads in [1, 3] {
        let par = ParOptions { threads, memory_budget: 16 << 20 };
        let options = WriteOptions::default().zstd(Some(1)).par(par);
        let done = AtomicBool::new(false);
        let (bytes, peak, seen) = std::thread::scope(|s| {
            let writing = s.spawn(|| {
                let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new())).with_options(options);
                let wrote = sink.write_all(&source);
                done.store(true, Ordering::SeqCst);
                wrote.unwrap();
                sink.into_inner().unwrap().into_inner()
            });
            let (mut peak, mut seen) = (0, BTreeSet::new());
            while !done.load(Ordering::SeqCst) {
                let now = workers();
                peak = peak.max(now.len());
                seen.extend(now);
            }
            (writing.join().unwrap(), peak, seen)
        });
        let expected: BTreeSet<String> = (0..threads).map(|i| format!("zt-work-{i}")).collect();
        assert_eq!(peak, threads, "workers at once, asked for {threads}");
        assert_eq!(seen, expected, "asked for {threads}");
        // A pool's threads end once it is dropped, though not before the drop returns.
        let gone = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !workers().is_empty() && std::time::Instant::now() < gone {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(workers().is_empty(), "the workers end after the write");
        written.push(bytes);
    }
    assert!(written[0] == written[1], "the file depends on the thread count");
}
