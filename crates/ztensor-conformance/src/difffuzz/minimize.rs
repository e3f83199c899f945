//! Reducing a divergent case while it keeps its divergence.

use std::time::Instant;

use anyhow::Result;

use super::classify::Divergence;
use super::judge::Judge;
use super::mutate::Mutation;
use super::recipe::{Recipe, hex, unhex};
use super::zt2::Zt2;

/// Reduces `recipe` while it keeps `divergence`: fewer mutations, fewer objects, generator
/// bytes set to zero (smaller shapes and ranks, first choices), then byte changes made
/// single bits; at most `calls` implementation calls and `seconds`.
pub(super) fn minimize(
    judge: &mut dyn Judge,
    recipe: &Recipe,
    divergence: &Divergence,
    (calls, seconds): (u32, f64),
) -> Result<Recipe> {
    let mut best = recipe.clone();
    let mut left = calls;
    let started = Instant::now();
    let mut keeps = |candidate: &Recipe, left: &mut u32| -> Result<bool> {
        let stopping = crate::implementation::stopping;
        if *left == 0 || started.elapsed().as_secs_f64() > seconds || stopping() {
            return Ok(false);
        }
        *left -= 1;
        let judged = judge.judge(candidate);
        // A verdict given while a signal stops the run is not the implementation's.
        if stopping() {
            return Ok(false);
        }
        Ok(judged?.divergence.is_some_and(|(d, _)| d == *divergence))
    };
    // Mutations, last first.
    let mut i = best.mutations.len();
    while i > 0 {
        i -= 1;
        let mut candidate = best.clone();
        candidate.mutations.remove(i);
        if keeps(&candidate, &mut left)? {
            best = candidate;
        }
    }
    // zTensor 2: raw parts rather than compressed ones, then the least alignment.
    if let Some(how) = best.zt2.clone() {
        let raw = Zt2 { zstd: false, ..how.clone() };
        let least = Zt2 { alignment: 4096, ..raw.clone() };
        for simpler in [raw, least] {
            if best.zt2.as_ref() != Some(&simpler) {
                let candidate = Recipe { zt2: Some(simpler), ..best.clone() };
                if keeps(&candidate, &mut left)? {
                    best = candidate;
                }
            }
        }
    }
    // A zTensor 2 case that starts from a corpus file has no model to reduce.
    let from_model = best.zt2.as_ref().is_none_or(|how| how.base.is_none());
    // Fewer objects: the generator's second byte is the count.
    let mut model = unhex(&best.model)?;
    while from_model && model.get(1).is_some_and(|&c| c % 9 > 1) {
        let mut smaller = model.clone();
        smaller[1] = model[1] % 9 - 1;
        let candidate = Recipe { model: hex(&smaller), ..best.clone() };
        if !keeps(&candidate, &mut left)? {
            break;
        }
        model = smaller;
        best = candidate;
    }
    // Each later byte zero (the first is the version).
    for at in 2..model.len() {
        if model[at] == 0 || !from_model {
            continue;
        }
        let mut smaller = model.clone();
        smaller[at] = 0;
        let candidate = Recipe { model: hex(&smaller), ..best.clone() };
        if keeps(&candidate, &mut left)? {
            model = smaller;
            best = candidate;
        }
    }
    // Byte changes: the lowest bit that keeps it.
    for i in 0..best.mutations.len() {
        let (Mutation::Flip { xor, .. } | Mutation::Blob { xor, .. }) = best.mutations[i] else {
            continue;
        };
        if xor.count_ones() > 1 {
            for bit in 0..8 {
                let one = 1u8 << bit;
                if xor & one == 0 {
                    continue;
                }
                let mut candidate = best.clone();
                if let Mutation::Flip { xor, .. } | Mutation::Blob { xor, .. } =
                    &mut candidate.mutations[i]
                {
                    *xor = one;
                }
                if keeps(&candidate, &mut left)? {
                    best = candidate;
                    break;
                }
            }
        }
    }
    Ok(best)
}
