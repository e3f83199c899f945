//! What only `verify --strict` asks of a file: the rules writers must keep and readers may
//! ignore, zeroed padding among them.

use super::{root, scratch, stderr, stdout, ztensor};

/// The committed files whose padding is 0xAA: sound to a lenient reader, a `padding_nonzero`
/// problem under --strict (1.1 and 1.2, whose writers must zero it), and sound under --strict
/// for 0.1, which leaves padding undefined.
#[test]
fn strict_verify_reads_the_padding_writers_must_zero() {
    for version in ["v1.1", "v1.2"] {
        let file =
            root().join(format!("fixtures/{version}/implementation-defined/nonzero-padding.zt"));
        let file = file.to_str().unwrap();
        let lenient = ztensor(&["verify", "-q", file]);
        assert!(lenient.status.success(), "{version}: {}{}", stdout(&lenient), stderr(&lenient));
        let strict = ztensor(&["verify", "-q", "--strict", file]);
        assert_eq!(strict.status.code(), Some(1), "{version}: {}", stderr(&strict));
        let text = stdout(&strict);
        assert!(text.contains("[padding_nonzero]") && text.contains("at byte "), "{text}");
        let json = ztensor(&["verify", "-q", "--strict", "--json", file]);
        let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(report["sound"], false);
        assert!(report["problems"][0].as_str().unwrap().contains("padding_nonzero"), "{report}");
    }
    let v0 = root().join("fixtures/v0.1/implementation-defined/nonzero-padding.zt");
    let v0 = ztensor(&["verify", "-q", "--strict", v0.to_str().unwrap()]);
    assert!(v0.status.success(), "{}{}", stdout(&v0), stderr(&v0));
}

/// What this tool writes keeps the rule: every version it writes, raw and zstd, is sound under
/// --strict (so the check has files to pass as well as files to fail).
#[test]
fn what_we_write_has_zeroed_padding() {
    let d = scratch("strict-padding");
    let input = root().join("fixtures/examples/tiny-v1.2.zt");
    for (name, args) in [
        ("a.zt", &["--to", "1.1"][..]),
        ("b.zt", &["--to", "1.2"][..]),
        ("c.zt", &["--to", "1.2", "--zstd", "3"][..]),
    ] {
        let out = d.join(name);
        let made = ztensor(
            &[&["convert", "-q", input.to_str().unwrap(), out.to_str().unwrap()][..], args]
                .concat(),
        );
        assert!(made.status.success(), "{}", stderr(&made));
        let checked = ztensor(&["verify", "-q", "--strict", out.to_str().unwrap()]);
        assert!(checked.status.success(), "{name}: {}{}", stdout(&checked), stderr(&checked));
    }
}
