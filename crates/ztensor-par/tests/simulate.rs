use ztensor_format::{DigestAlgorithm, Options};
use ztensor_io::Reader;
use ztensor_par::ParOptions;
use ztensor_par::simulate::{Simulation, Workload, run};

#[test]
fn simulated_runs_write_the_same_file_at_every_worker_count() {
    let d = ztensor_testkit::scratch("sim-same");
    // Multi-piece tensors (a hash chain each) and a last piece shorter than the others.
    let work =
        Workload { tensors: 5, tensor_len: (9 << 20) + 100, digest: Some(DigestAlgorithm::Sha256) };
    let sim = Simulation { compress_ns_per_byte: 0.01, digest_ns_per_byte: 0.005 };
    let mut files = Vec::new();
    for workers in [1, 3, 32] {
        let path = d.join(format!("w{workers}.zt"));
        let outcome = run(&work, sim, &ParOptions::with_threads(workers), &path).unwrap();
        assert_eq!(outcome.pieces, 15, "3 pieces of 4 MiB per tensor");
        assert!(outcome.wall >= outcome.ideal, "{outcome:?}");
        assert!(outcome.peak_in_flight > 0);
        files.push(std::fs::read(&path).unwrap());
    }
    assert!(files.windows(2).all(|w| w[0] == w[1]), "output depends on the worker count");
    // A valid file of the workload's tensors, each digested.
    let reader = Reader::new(&files[0][..], &Options::default()).unwrap();
    assert_eq!(reader.manifest().len(), 5);
    for o in reader.manifest().objects() {
        assert_eq!(o.object().shape, [(9 << 20) + 100]);
        assert!(o.object().components["data"].digest.is_some());
    }
}

#[test]
fn many_simulated_workers_overlap_their_latencies() {
    // 64 pieces of 20 ms each: one worker needs 1.28 s, 64 workers ideally 20 ms. Asserting
    // only what holds on any loaded machine: far faster than one worker could be.
    let d = ztensor_testkit::scratch("sim-overlap");
    let work = Workload { tensors: 16, tensor_len: 16 << 20, digest: None };
    let ns = 20e6 / f64::from(4u32 << 20);
    let sim = Simulation { compress_ns_per_byte: ns, digest_ns_per_byte: 0.0 };
    let outcome = run(&work, sim, &ParOptions::with_threads(64), &d.join("o.zt")).unwrap();
    assert_eq!(outcome.pieces, 64);
    assert!(outcome.wall.as_millis() < 640, "{outcome:?}");
}
