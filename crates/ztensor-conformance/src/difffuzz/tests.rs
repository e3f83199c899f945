use serde_json::json;
use ztensor_format::Version;

use super::classify::{first_difference, mask};
use super::ours::latitude;
use super::*;
use crate::writer_check::Target;

#[test]
fn a_recipe_makes_the_same_file_again_and_goes_through_json() {
    for seed in 0..200 {
        let recipe = Recipe::generate(seed, &[]);
        assert_eq!(recipe, Recipe::generate(seed, &[]));
        let again: Recipe = serde_json::from_value(serde_json::to_value(&recipe).unwrap()).unwrap();
        assert_eq!(again, recipe);
        assert_eq!(recipe.build().unwrap(), again.build().unwrap(), "seed {seed}");
    }
}

/// Any recipe builds (a case is never lost to the fuzzer's own fault), and what the specs
/// leave open is found on whatever it builds: changes on changes, up to eight at once.
#[test]
fn every_recipe_builds() {
    let mut rng = Rng::new(11);
    for seed in 0..3000 {
        let mut recipe = Recipe::generate(seed, &[]);
        for _ in 0..rng.below(6) {
            recipe.mutations.push(Mutation::random(&mut rng));
        }
        let file = recipe.build().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        if let Ok(reader) = ztensor_io::Reader::new(&file[..], &ztensor_dump::options()) {
            let _ = latitude(&reader, &file);
        }
    }
}

/// The in-process target's body holds on whatever bytes it is given, and its mutator
/// keeps to the length it is allowed.
#[test]
fn the_differential_body_and_its_mutator() {
    let mut rng = Rng::new(5);
    let mut data = Vec::new();
    for i in 0..1500u32 {
        let max = [16, 48, 60, 200][usize::try_from(i % 4).unwrap()];
        let len = Recipe::mutate_fuzz_bytes(&mut data, max, rng.u32());
        assert!(len <= max && len == data.len(), "{len} of at most {max}");
        crate::fuzz::differential(&data);
        if i % 50 == 0 {
            data.clear();
        }
    }
    // The records decode to every kind of change.
    let kinds: std::collections::BTreeSet<String> = (0..=255u8)
        .map(|op| {
            let m = Mutation::from_record(&[op, 1, 0, 0, 0, 3, 4]);
            format!("{m:?}").split_whitespace().next().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(kinds.len(), 14, "{kinds:?}");
}

/// Leading dimensions of 1 keep a dense object valid: files our strict reader accepts with
/// rank 8 come of it.
#[test]
fn higher_ranks_stay_valid() {
    let mut valid = 0;
    for seed in 0..100 {
        let recipe = Recipe {
            mutations: vec![Mutation::Rank { node: 0, rank: 8 }],
            ..Recipe::generate(seed, &[Target::Zt(Version::V1_2)])
        };
        let file = recipe.build().unwrap();
        let mut options = ztensor_format::Options::default();
        options.strict = true;
        if let Ok(reader) = ztensor_io::Reader::new(&file[..], &options)
            && reader.objects().any(|o| o.model().shape.len() == 8)
        {
            valid += 1;
        }
    }
    assert!(valid > 20, "{valid} valid rank-8 files of 100");
}

#[test]
fn versions_are_kept_to_those_asked_for() {
    for seed in 0..50 {
        let file =
            Recipe { mutations: vec![], ..Recipe::generate(seed, &[Target::Zt(Version::V0_1)]) }
                .build()
                .unwrap();
        assert_eq!(&file[..8], b"ZTEN0001");
    }
}

#[test]
fn each_tree_change_changes_the_manifest() {
    let base = Recipe { mutations: vec![], ..Recipe::generate(3, &[Target::Zt(Version::V1_2)]) };
    let plain = base.build().unwrap();
    let changes = [
        Mutation::Drop { node: 1 },
        Mutation::Duplicate { node: 1 },
        Mutation::Retype { node: 2, kind: 0 },
        Mutation::Int { node: 3, pick: 13 },
        Mutation::Text { node: 2, pick: 1 },
        Mutation::Key { node: 1, pick: 2 },
        Mutation::Nest { node: 2, depth: 3 },
        Mutation::Attributes { node: 0, seed: 9 },
        Mutation::Flip { region: Region::Data, at: 0, xor: 1 },
        Mutation::Truncate { at: 40 },
        Mutation::Size { delta: -1 },
        Mutation::Rank { node: 0, rank: 8 },
        Mutation::Alias { node: 0, other: 0 },
    ];
    for change in changes {
        let recipe = Recipe { mutations: vec![change.clone()], ..base.clone() };
        assert_ne!(recipe.build().unwrap(), plain, "{change:?}");
    }
}

#[test]
fn masking_and_first_differences() {
    assert_eq!(
        mask("exit status 101: panicked at src/x.rs:12:5"),
        "exit status #: panicked at src/x.rs:#:#"
    );
    assert_eq!(mask("expected blake3:5f3a9c01bb, u64 f16"), "expected blake#:#, u# f#");
    let a = json!({"objects": [{"shape": [2], "components": {"data": {"dtype": "f16"}}}]});
    let b = json!({"objects": [{"shape": [2], "components": {"data": {"dtype": "bf16"}}}]});
    assert_eq!(first_difference(&a, &b, "").as_deref(), Some("objects.components.data.dtype"));
    assert_eq!(first_difference(&a, &a, ""), None);
}
