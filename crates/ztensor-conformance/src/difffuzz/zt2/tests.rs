use serde_json::Value as Json;
use ztensor_format::Version;

use super::super::mutate::{Mutation, Region};
use super::super::recipe::Recipe;
use super::super::rng::Rng;
use super::super::{Budget, Config, InProcess, OursInProcess, classify, ours_in_process};
use super::{BASES, Zt2};
use crate::implementation::Verdict;
use crate::writer_check::Target;

const ZT2: [Target; 1] = [Target::Zt2];

/// The 0.1/1.x cases of a seed are those made before zTensor 2 could be asked for: the first
/// 300 cases of the default versions and a 1.2 case, recipes and files, hashed as the code
/// before zTensor 2 cases made them.
#[test]
fn one_x_cases_are_those_of_before() {
    let mut all = Vec::new();
    for seed in 0..300 {
        let r = Recipe::generate(seed, &[]);
        all.extend(serde_json::to_vec(&r).unwrap());
        all.extend(r.build().unwrap());
    }
    let mut r = Recipe::generate(77, &[Target::Zt(Version::V1_2)]);
    all.extend(serde_json::to_vec(&r).unwrap());
    r.mutations.clear();
    all.extend(r.build().unwrap());
    assert_eq!(
        ztensor_io::codec::sha256_hex(&all),
        "5a9108f4601efe4ee852a6a9472dcd74fd2c09fd3cf8b8d769e6b29a154bac59"
    );
}

/// A zTensor 2 recipe makes the same file again, from itself and from its JSON.
#[test]
fn a_zt2_recipe_makes_the_same_file_again_and_goes_through_json() {
    let (mut bases, mut zstd) = (0, 0);
    for seed in 0..200 {
        let recipe = Recipe::generate(seed, &ZT2);
        assert_eq!(recipe, Recipe::generate(seed, &ZT2));
        let text = serde_json::to_string(&recipe).unwrap();
        assert!(text.contains("\"zt2\""), "{text}");
        let again: Recipe = serde_json::from_str(&text).unwrap();
        assert_eq!(again, recipe);
        let file = recipe.build().unwrap();
        assert_eq!(file, again.build().unwrap(), "seed {seed}");
        assert_eq!(file, recipe.build().unwrap(), "seed {seed}");
        let how = recipe.zt2.as_ref().unwrap();
        bases += usize::from(how.base.is_some());
        zstd += usize::from(how.zstd);
    }
    assert!(bases > 20 && zstd > 20, "{bases} from the corpus, {zstd} compressed");
    // Mixed with 1.x versions, each case is of one of them.
    let mixed = [Target::Zt(Version::V1_2), Target::Zt2];
    let kinds: Vec<bool> = (0..50).map(|s| Recipe::generate(s, &mixed).zt2.is_some()).collect();
    assert!(kinds.iter().any(|&k| k) && kinds.iter().any(|&k| !k));
}

/// Any zTensor 2 recipe builds, changes on changes, and our readers give a verdict on it.
#[test]
fn every_zt2_recipe_builds_and_is_judged() {
    let mut rng = Rng::new(12);
    let mut accepted = 0;
    for seed in 0..1500 {
        let mut recipe = Recipe::generate(seed, &ZT2);
        for _ in 0..rng.below(6) {
            recipe.mutations.push(super::random(&mut rng));
        }
        let file = recipe.build().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let ours = ours_in_process(&file).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // The lenient reader accepts whatever the strict one does.
        assert!(ours.lenient.1 || !ours.strict.1, "seed {seed}");
        accepted += usize::from(ours.lenient.1);
    }
    assert!(accepted > 100, "{accepted} of 1500 accepted");
}

/// Unchanged, a case is a valid file: the generator's model (every object of it zTensor 2
/// can hold), compressed or not, at any alignment, or a corpus file placed again.
#[test]
fn unchanged_cases_are_valid() {
    let mut compressed = 0;
    for seed in 0..150 {
        let recipe = Recipe { mutations: vec![], ..Recipe::generate(seed, &ZT2) };
        let file = recipe.build().unwrap();
        let ours = ours_in_process(&file).unwrap();
        assert!(ours.lenient.1, "seed {seed}: {}", ours.lenient.0);
        let how = recipe.zt2.as_ref().unwrap();
        if how.base.is_none() {
            assert!(ours.latitude.is_none(), "seed {seed}: {:?} {}", ours.latitude, ours.lenient.0);
            assert!(!ours.lenient.0["objects"].as_array().unwrap().is_empty(), "seed {seed}");
            let file = ztensor_v2::File::open(&file[..], 1 << 30).unwrap();
            let parts = file.manifest().unwrap().objects.iter().flat_map(|(_, o)| o.parts.iter());
            let encoded = parts.filter(|(_, p)| p.encoding.is_some()).count();
            assert_eq!(encoded > 0, how.zstd, "seed {seed}");
            compressed += usize::from(encoded > 0);
        }
    }
    assert!(compressed > 5, "{compressed}");
    // Every corpus file a case may start from, placed again.
    for (i, base) in BASES.iter().enumerate() {
        for zstd in [false, true] {
            let how = Zt2 { base: Some((*base).to_owned()), zstd, alignment: 8192 };
            let recipe =
                Recipe { seed: i as u64, model: "02".into(), mutations: vec![], zt2: Some(how) };
            let ours = ours_in_process(&recipe.build().unwrap()).unwrap();
            assert!(ours.lenient.1, "{base}: {}", ours.lenient.0);
        }
    }
}

/// Each kind of change changes the file (each on a file where it has something to change).
#[test]
fn each_zt2_change_changes_the_file() {
    let plain = Recipe { mutations: vec![], ..Recipe::generate(1, &ZT2) };
    let plain = Recipe { zt2: Some(Zt2 { base: None, zstd: false, alignment: 4096 }), ..plain };
    let unchanged = plain.build().unwrap();
    let changes = [
        Mutation::Drop { node: 1 },
        Mutation::Duplicate { node: 1 },
        Mutation::Retype { node: 2, kind: 0 },
        Mutation::Int { node: 3, pick: 13 },
        Mutation::Text { node: 2, pick: 1 },
        Mutation::Key { node: 1, pick: 2 },
        Mutation::Nest { node: 2, depth: 3 },
        Mutation::Attributes { node: 0, seed: 9 },
        Mutation::Rank { node: 0, rank: 8 },
        Mutation::Alias { node: 0, other: 0 },
        Mutation::Flip { region: Region::Data, at: 0, xor: 1 },
        Mutation::Flip { region: Region::Manifest, at: 3, xor: 4 },
        Mutation::Flip { region: Region::Trailer, at: 24, xor: 1 },
        Mutation::Truncate { at: 40 },
        Mutation::Size { delta: -1 },
        Mutation::Vocab { node: 0, pick: 1 },
        Mutation::Place { node: 0, pick: 3 },
        Mutation::Shard { node: 0, pick: 0 },
        Mutation::Reorder { node: 2, other: 1 },
        Mutation::Head { node: 2, pick: 0 },
        Mutation::Blob { node: 0, at: 0, xor: 1 },
    ];
    let mut readers = Vec::new();
    for change in changes {
        let recipe = Recipe { mutations: vec![change.clone()], ..plain.clone() };
        let file = recipe.build().unwrap();
        assert_ne!(file, unchanged, "{change:?}");
        readers.push((change, ours_in_process(&file).unwrap()));
    }
    // The manifest's bytes changed are framed again: its hash is right, the CBOR is not.
    let flipped = &readers
        .iter()
        .find(|(c, _)| matches!(c, Mutation::Flip { region: Region::Manifest, .. }))
        .unwrap()
        .1;
    assert_ne!(flipped.lenient.0["error"]["kind"], "manifest_hash", "{}", flipped.lenient.0);
    let kind = |m: &Mutation| {
        let ours = &readers.iter().find(|(c, _)| c == m).unwrap().1;
        ours.lenient.0["error"]["kind"].as_str().unwrap_or("accepted").to_owned()
    };
    assert_eq!(kind(&Mutation::Reorder { node: 2, other: 1 }), "cbor_determinism");
    assert_eq!(kind(&Mutation::Head { node: 2, pick: 0 }), "cbor_determinism");
    assert_eq!(kind(&Mutation::Place { node: 0, pick: 3 }), "blob_alignment");
    assert_eq!(kind(&Mutation::Flip { region: Region::Trailer, at: 24, xor: 1 }), "version");
    // A shard table whose shard is not there: the file opens, that object cannot be read.
    let shard = &readers.iter().find(|(c, _)| matches!(c, Mutation::Shard { .. })).unwrap().1;
    assert!(shard.lenient.1 && shard.latitude.is_some(), "{}", shard.lenient.0);
}

/// Our zTensor 2 reader in this process, through 7-byte reads, against our verdicts: nothing.
#[test]
fn our_zt2_reader_against_itself_gives_nothing() {
    for chunk in [None, Some(7)] {
        let mut config = Config::new("ours, in process");
        config.budget = Budget::Runs(200);
        config.versions = ZT2.to_vec();
        config.seed = 40;
        let report =
            super::super::run_in_process(&config, &mut OursInProcess { chunk }, |_, _| {}).unwrap();
        assert!(report.findings.is_empty(), "{}", super::super::table(&report));
        assert_eq!(report.cases, 200);
    }
}

/// Our reader with planted zTensor 2 bugs: a panic on a part whose digest is SHA-256 (only a
/// changed digest makes one), files with keys out of deterministic order accepted (as
/// nothing), and `u16` parts reported as `i16`.
struct Planted(OursInProcess);

impl InProcess for Planted {
    fn read(&mut self, bytes: &[u8]) -> Verdict {
        if let Ok(file) = ztensor_v2::File::open(bytes, 1 << 30)
            && let Some(m) = file.manifest()
        {
            let sha = m
                .objects
                .iter()
                .flat_map(|(_, o)| o.parts.iter())
                .any(|(_, p)| p.digest.as_deref().is_some_and(|d| d.starts_with("sha256:")));
            assert!(!sha, "a planted panic");
        }
        match self.0.read(bytes) {
            Verdict::Rejected(dump) if dump["error"]["kind"] == "cbor_determinism" => {
                Verdict::Accepted(serde_json::json!({
                    "dump": "ztensor-dump/1", "container": "zt-2", "version": "2",
                    "attributes": null, "objects": []
                }))
            }
            Verdict::Accepted(mut dump) => {
                for o in dump["objects"].as_array_mut().into_iter().flatten() {
                    for (_, c) in o["components"].as_object_mut().into_iter().flatten() {
                        if c["dtype"] == "u16" {
                            c["dtype"] = Json::from("i16");
                        }
                    }
                }
                Verdict::Accepted(dump)
            }
            other => other,
        }
    }
}

/// The planted bugs are found within 800 cases, each reduced to the change that sets it off.
#[test]
fn the_planted_zt2_bugs_are_found() {
    let mut config = Config::new("planted zTensor 2, in process");
    config.budget = Budget::Runs(800);
    config.versions = ZT2.to_vec();
    config.minimize_seconds = 10.0;
    let report = super::super::run_in_process(
        &config,
        &mut Planted(OursInProcess { chunk: None }),
        |_, _| {},
    )
    .unwrap();
    let json = super::super::to_json(&report);
    for class in ["crash", "accepts-invalid", "misreads"] {
        assert!(json["by_class"][class].as_u64().unwrap() >= 1, "{class} not found: {json}");
    }
    assert_eq!(json["by_class"]["rejects-valid"], 0, "{json}");
    for f in &report.findings {
        // Each reduced case is made again byte for byte from its recipe.
        assert_eq!(f.recipe.build().unwrap(), f.judged.file);
        match f.divergence.class.name() {
            "crash" => {
                assert!(f.detail.contains("a planted panic"), "{}", f.detail);
                assert!(
                    f.recipe.mutations.iter().any(|m| matches!(m, Mutation::Vocab { .. })),
                    "{:?}",
                    f.recipe
                );
            }
            "accepts-invalid" => assert_eq!(f.divergence.key, "cbor_determinism"),
            "misreads" => assert!(f.divergence.key.ends_with(".dtype"), "{}", f.divergence.key),
            other => panic!("{other}: {}", f.detail),
        }
    }
    // The first case of each: the regenerate line names the version.
    let regenerate = json["findings"][0]["regenerate"].as_str().unwrap();
    assert!(regenerate.ends_with("--version 2"), "{regenerate}");
}

/// The differential verdicts on a zTensor 2 case do not depend on how the bytes are read.
#[test]
fn classify_agrees_with_itself_through_small_reads() {
    for seed in 0..300 {
        let file = Recipe::generate(seed, &ZT2).build().unwrap();
        let ours = ours_in_process(&file).unwrap();
        let theirs = OursInProcess { chunk: Some(61) }.read(&file);
        assert!(classify(&ours, &theirs).is_none(), "seed {seed}");
    }
}
