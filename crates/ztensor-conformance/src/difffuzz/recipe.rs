//! A case as data ([`Recipe`]): the generator's input and the changes, from which the file is
//! made again byte for byte; and the form the `differential` fuzz target gives it.

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use ztensor_format::Version;

pub(super) use super::hex::{hex, unhex};
use super::mutate::{Mutation, Region, apply_bytes, rewrite_manifest};
use super::rng::Rng;
use super::zt2::{self, Zt2};
use crate::model::Model;
use crate::writer_check::Target;

/// A case: the generator's input bytes and the changes made to the file it writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipe {
    /// The seed the case was made from (`--seed SEED --runs 1` makes it again, with the same
    /// `--version`s).
    pub seed: u64,
    /// The generator's input, hex ([`Model::from_bytes`]).
    pub model: String,
    /// The changes, in order.
    pub mutations: Vec<Mutation>,
    /// For a zTensor 2 case, how its file is made before the changes ([`Zt2`]); absent for a
    /// 0.1/1.x case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zt2: Option<Zt2>,
}

/// The versions cases have when none are asked for: zTensor 0.1, 1.1 and 1.2 (zTensor 2 only
/// when asked for, [`Target::Zt2`]).
pub const VERSIONS: [Version; 3] = [Version::V0_1, Version::V1_1, Version::V1_2];

/// [`VERSIONS`] as targets.
const DEFAULT: [Target; 3] =
    [Target::Zt(Version::V0_1), Target::Zt(Version::V1_1), Target::Zt(Version::V1_2)];

impl Recipe {
    /// The case of `seed`, of one of `versions` ([`VERSIONS`] when empty). The cases of 0.1
    /// and 1.x are those of the releases before zTensor 2 could be asked for.
    pub fn generate(seed: u64, versions: &[Target]) -> Recipe {
        let mut rng = Rng::new(seed);
        let versions = if versions.is_empty() { &DEFAULT[..] } else { versions };
        let version = versions[usize::try_from(rng.below(versions.len() as u64)).unwrap_or(0)];
        let Target::Zt(version) = version else {
            let (model, mutations, how) = zt2::generate(rng);
            return Recipe { seed, model, mutations, zt2: Some(how) };
        };
        let mut model = vec![0u8; 48];
        for b in &mut model {
            #[allow(clippy::cast_possible_truncation)]
            let random = rng.next_u64() as u8;
            *b = random;
        }
        // The generator picks the version by the first byte (modulo 3), and the count by the
        // second (modulo 9): up to three objects keeps files small and fast.
        #[allow(clippy::cast_possible_truncation)]
        let index = VERSIONS.iter().position(|&v| v == version).unwrap_or(0) as u8;
        model[0] = index;
        #[allow(clippy::cast_possible_truncation)]
        let count = 1 + rng.below(3) as u8;
        model[1] = count;
        let changes = match rng.below(8) {
            0 | 1 => 0,
            2..=5 => 1,
            6 => 2,
            _ => 3,
        };
        let mut mutations: Vec<Mutation> =
            (0..changes).map(|_| Mutation::random(&mut rng)).collect();
        if changes == 0 {
            // Valid files of what the generator alone does not make: ranks 4 to 8, file and
            // object attributes of every kind.
            #[allow(clippy::cast_possible_truncation)]
            let rank = 4 + rng.below(5) as u8;
            if rng.below(2) == 0 {
                mutations.push(Mutation::Rank { node: rng.u32(), rank });
            }
            if rng.below(2) == 0 {
                mutations.push(Mutation::Attributes { node: 0, seed: rng.u32() });
            }
        }
        Recipe { seed, model: hex(&model), mutations, zt2: None }
    }

    /// The file the recipe makes.
    ///
    /// # Errors
    /// When the recipe's model hex is broken (a recipe read from a file), or the generator's
    /// model is refused by the writer (a bug of this project); for zTensor 2, a `base` that is
    /// not in the embedded corpus.
    pub fn build(&self) -> Result<Vec<u8>> {
        if let Some(how) = &self.zt2 {
            return zt2::build(&self.model, &self.mutations, how);
        }
        let model = Model::from_bytes(&unhex(&self.model)?);
        let (mut file, _) = model.write().context("writing the generated model")?;
        let (tree, bytes): (Vec<&Mutation>, Vec<&Mutation>) =
            self.mutations.iter().partition(|m| m.on_tree());
        if !tree.is_empty() {
            file = rewrite_manifest(&file, &tree)?;
        }
        for m in bytes {
            apply_bytes(&mut file, m);
        }
        Ok(file)
    }
}

/// The bytes of one [`Mutation`] in [`Recipe::from_fuzz_bytes`]: an operation byte, a `u32`
/// node or position, two parameter bytes.
const RECORD: usize = 7;

/// The generator's input in [`Recipe::from_fuzz_bytes`].
const MODEL: usize = 48;

impl Mutation {
    /// The change a 7-byte record describes (every record describes one).
    pub fn from_record(r: &[u8; RECORD]) -> Mutation {
        let node = u32::from_le_bytes([r[1], r[2], r[3], r[4]]);
        let (a, b) = (r[5], r[6]);
        match r[0] % 14 {
            0 => Mutation::Drop { node },
            1 => Mutation::Duplicate { node },
            2 => Mutation::Retype { node, kind: a },
            3 => Mutation::Int { node, pick: a },
            4 => Mutation::Text { node, pick: a },
            5 => Mutation::Key { node, pick: a },
            6 => Mutation::Swap { node, other: u32::from(a) },
            7 => Mutation::Nest { node, depth: 1 + a % 40 },
            8 => Mutation::Attributes { node, seed: u32::from_le_bytes([a, b, r[1], r[2]]) },
            9 => {
                let region = [Region::Header, Region::Data, Region::Manifest, Region::Trailer]
                    [usize::from(b % 4)];
                Mutation::Flip { region, at: node, xor: a.max(1) }
            }
            10 => Mutation::Truncate { at: node },
            11 => Mutation::Rank { node, rank: 4 + a % 5 },
            12 => Mutation::Alias { node, other: u32::from(a) },
            #[allow(clippy::cast_possible_wrap)]
            _ => Mutation::Size { delta: a as i8 },
        }
    }
}

impl Recipe {
    /// The recipe fuzzer bytes describe: the generator's input (48 bytes, zeros where short),
    /// then up to eight 7-byte change records. Every input is a recipe, and
    /// [`Recipe::mutate_fuzz_bytes`] changes them as structure, not as noise.
    pub fn from_fuzz_bytes(data: &[u8]) -> Recipe {
        let mut model = data.get(..MODEL).unwrap_or(data).to_vec();
        model.resize(MODEL, 0);
        let mutations = data
            .get(MODEL..)
            .unwrap_or_default()
            .chunks_exact(RECORD)
            .take(8)
            .map(|r| Mutation::from_record(r.try_into().unwrap_or(&[0; RECORD])))
            .collect();
        Recipe { seed: 0, model: hex(&model), mutations, zt2: None }
    }

    /// A structure-aware change to fuzzer bytes (for libFuzzer's custom mutator): a record
    /// added, dropped or rewritten, or a generator choice changed; the new length, at most
    /// `max`.
    pub fn mutate_fuzz_bytes(data: &mut Vec<u8>, max: usize, seed: u32) -> usize {
        let mut rng = Rng::new(u64::from(seed));
        if data.len() < MODEL {
            data.resize(MODEL, 0);
        }
        let records = (data.len() - MODEL) / RECORD;
        data.truncate(MODEL + records * RECORD);
        let mut record = [0u8; RECORD];
        for b in &mut record {
            #[allow(clippy::cast_possible_truncation)]
            let random = rng.next_u64() as u8;
            *b = random;
        }
        let at = |rng: &mut Rng, n: usize| usize::try_from(rng.below(n as u64)).unwrap_or(0);
        match rng.below(4) {
            0 if records < 8 && data.len() + RECORD <= max => data.extend_from_slice(&record),
            1 if records > 0 => {
                let i = MODEL + at(&mut rng, records) * RECORD;
                data.drain(i..i + RECORD);
            }
            2 if records > 0 => {
                let i = MODEL + at(&mut rng, records) * RECORD;
                data[i..i + RECORD].copy_from_slice(&record);
            }
            _ => {
                let i = at(&mut rng, MODEL);
                data[i] = record[0];
            }
        }
        data.truncate(max);
        data.len()
    }
}
