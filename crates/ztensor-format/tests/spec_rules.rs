//! `spec/rules.md` and `ErrorKind::ALL` list the same rules, with the same layer and enforcement.

use std::collections::BTreeMap;

use ztensor_format::{ErrorKind, Layer};

fn layer_name(layer: Layer) -> &'static str {
    match layer {
        Layer::File => "file",
        Layer::Object => "object",
        Layer::Data => "data",
        Layer::Decode => "decode",
        Layer::Write => "write",
    }
}

#[test]
fn rules_md_matches_error_kinds() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/rules.md");
    let text = std::fs::read_to_string(path).expect("spec/rules.md is readable");
    let mut documented = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let id = cells[1].trim_matches('`');
        assert!(
            documented.insert(id.to_owned(), (cells[3].to_owned(), cells[4].to_owned())).is_none(),
            "{id} twice"
        );
    }
    for &kind in ErrorKind::ALL {
        let Some((layer, enforced)) = documented.remove(kind.id()) else {
            panic!("rule {} is not in spec/rules.md", kind.id());
        };
        assert_eq!(layer, layer_name(kind.layer()), "layer of {}", kind.id());
        let expected = if kind.strict_only() { "strict" } else { "always" };
        assert_eq!(enforced, expected, "enforcement of {}", kind.id());
    }
    assert!(documented.is_empty(), "spec/rules.md lists unknown rules: {:?}", documented.keys());
}
