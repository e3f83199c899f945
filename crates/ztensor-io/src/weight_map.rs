//! The index of a sharded checkpoint: its `weight_map` of tensor names to shard file names, as
//! Hugging Face `*.safetensors.index.json` files and this project's `*.zt.index.json` files both
//! write it. Read here, below the crates of either format, so each reads it the same way.

use std::fmt;
use std::path::Path;

use serde::de::{Deserializer, MapAccess, Visitor};

/// An index's `weight_map` (tensor name → shard file name) as the list of its entries, in
/// file order, so duplicate keys are seen, not merged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WeightMap(pub Vec<(String, String)>);

impl<'de> serde::Deserialize<'de> for WeightMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<WeightMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WeightMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of tensor names to shard file names")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<WeightMap, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, String>()? {
                    entries.push(entry);
                }
                Ok(WeightMap(entries))
            }
        }
        d.deserialize_map(V)
    }
}

/// Whether an index's shard name is a plain file name, so the shard lies beside the index (no
/// directory part, not `.` or `..`).
pub fn is_plain_name(shard: &str) -> bool {
    Path::new(shard).file_name().is_some_and(|n| n == shard && shard != "." && shard != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_lie_beside_the_index() {
        for name in ["model-00001-of-00002.safetensors", "a.zt", "..x"] {
            assert!(is_plain_name(name), "{name}");
        }
        for name in ["", ".", "..", "../a.zt", "dir/a.zt", "/abs.zt", "a/"] {
            assert!(!is_plain_name(name), "{name}");
        }
    }
}
