//! Integration tests of ztensor-tensorbuffers.

// Test files are small; their lengths always fit.
#![allow(clippy::cast_possible_truncation)]

/// The shared sample, byte-exact writing, round trips through zTensor.
mod sample;

/// Every object of `source` as TensorBuffers bytes, through the TensorBuffers sink.
fn to_tb(
    source: &dyn ztensor_io::TensorSource,
    drop_attributes: bool,
) -> Result<Vec<u8>, ztensor_tensorbuffers::Error> {
    use ztensor_io::TensorSink;
    let mut sink =
        ztensor_tensorbuffers::TbSink::to_writer(Vec::new()).drop_attributes(drop_attributes);
    sink.write_all(source)?;
    Ok(sink.into_inner().expect("a writer after a write that ended well"))
}

/// Every tensor of `source` into `writer`, through the zTensor sink (on two threads).
fn to_zt<W: std::io::Write>(
    source: &dyn ztensor_io::TensorSource,
    writer: &mut ztensor_io::Writer<W>,
    options: ztensor_io::WriteOptions,
) -> Result<(), ztensor_io::Error> {
    use ztensor_io::TensorSink;
    let par = ztensor_par::ParOptions::with_threads(2);
    ztensor_par::ZtSink::new(writer, options, &par, &()).write_all(source)?;
    Ok(())
}

/// Every rejection the facts document lists.
mod reject;

/// `spec/tensorbuffers.md` and `ErrorKind::ALL` agree.
mod spec {
    #[test]
    fn spec_lists_every_kind() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../spec/tensorbuffers.md"
        ))
        .unwrap();
        let documented: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("| `tb_"))
            .map(|l| l.split('`').nth(1).unwrap())
            .collect();
        let kinds: Vec<&str> =
            ztensor_tensorbuffers::ErrorKind::ALL.iter().map(|k| k.id()).collect();
        assert_eq!(documented, kinds);
    }
}
