//! What the checks of a part learn from its decoded bytes as they pass, and the verdict on
//! the part: its logical type's rules, then its digest.

use crate::error::{Error, Result, Rule};
use crate::manifest::{Object, Part};

/// What checking a part's digest found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestCheck {
    /// The digest matches the decoded bytes.
    Verified,
    /// The part has no digest.
    Absent,
    /// The digest's algorithm is not one this reader computes (named).
    Unverifiable(String),
}

/// What decoding a shared blob found: its facts, or the rule its stream broke (with the
/// message and the part that found it).
pub(super) type Checked = std::result::Result<Facts, (Rule, String)>;

/// What the checks of a part need to know of its decoded bytes, gathered as they pass.
#[derive(Debug, Clone)]
pub(super) struct Facts {
    pub(super) len: u64,
    pub(super) xxh3: u64,
    pub(super) sha256: Option<[u8; 32]>,
    /// The first byte above 1 and where it is (the `bool` rule).
    pub(super) above_one: Option<(u64, u8)>,
    /// The last byte (the `f4_e2m1` rule).
    pub(super) last: Option<u8>,
}

/// Gathers [`Facts`] from the decoded bytes, piece by piece.
pub(super) struct Gather {
    pub(super) xxh3: Option<Box<xxhash_rust::xxh3::Xxh3>>,
    pub(super) sha256: Option<sha2::Sha256>,
    pub(super) facts: Facts,
}

impl Gather {
    pub(super) fn new(xxh3: bool, sha256: bool) -> Gather {
        use sha2::Digest as _;
        Gather {
            xxh3: xxh3.then(Box::default),
            sha256: sha256.then(sha2::Sha256::new),
            facts: Facts { len: 0, xxh3: 0, sha256: None, above_one: None, last: None },
        }
    }

    pub(super) fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        let f = &mut self.facts;
        if f.above_one.is_none()
            && let Some(i) = bytes.iter().position(|&b| b > 1)
        {
            f.above_one = Some((f.len + i as u64, bytes[i]));
        }
        if let Some(h) = &mut self.xxh3 {
            h.update(bytes);
        }
        if let Some(h) = &mut self.sha256 {
            h.update(bytes);
        }
        f.len += bytes.len() as u64;
        f.last = bytes.last().copied().or(f.last);
    }

    pub(super) fn finish(self) -> Facts {
        use sha2::Digest as _;
        let mut facts = self.facts;
        facts.xxh3 = self.xxh3.map_or(0, |h| h.digest());
        facts.sha256 = self.sha256.map(|h| h.finalize().into());
        facts
    }
}

/// The verdict on part `p` (`name`/`part`, of `object`) from the facts of its decoded bytes:
/// its logical type's rules, then its digest.
pub(super) fn verdict(
    name: &str,
    part: &str,
    object: &Object,
    p: &Part,
    facts: &Facts,
) -> Result<DigestCheck> {
    if p.logical.as_deref() == Some("bool")
        && let Some((at, byte)) = facts.above_one
    {
        return Err(Error::rule(
            Rule::LayoutData,
            format!("{name:?}/{part}: bool byte {at} is {byte:#04x}"),
        ));
    }
    logical_rules(object, p, facts.last).map_err(|e| e.within(&format!("{name:?}/{part}")))?;
    let Some(digest) = &p.digest else { return Ok(DigestCheck::Absent) };
    let actual = match digest.split_once(':').map(|d| d.0) {
        Some("xxh3") => format!("xxh3:{:016x}", facts.xxh3),
        Some("sha256") => match &facts.sha256 {
            Some(h) => format!("sha256:{}", ztensor_format::to_hex(&h[..])),
            None => return Ok(DigestCheck::Unverifiable(digest.to_string())),
        },
        _ => return Ok(DigestCheck::Unverifiable(digest.to_string())),
    };
    if *actual != **digest {
        return Err(Error::rule(
            Rule::Digest,
            format!("{name:?}/{part}: the digest says {digest}, the bytes give {actual}"),
        ));
    }
    Ok(DigestCheck::Verified)
}

/// The content rules of a part's logical type that need the whole part: an odd count of
/// `f4_e2m1` values leaves the last byte's high nibble 0 (`last`: the last decoded byte). The
/// `bool` rule is checked as the bytes pass.
pub(super) fn logical_rules(object: &Object, part: &Part, last: Option<u8>) -> Result<()> {
    match part.logical.as_deref() {
        Some("f4_e2m1") if &*object.layout == "dense" => {
            let odd = crate::manifest::elements(&object.shape).is_some_and(|n| n % 2 == 1);
            match last {
                Some(last) if odd && last >> 4 != 0 => Err(Error::rule(
                    Rule::LayoutData,
                    "an odd count of f4_e2m1 values leaves the last high nibble non-zero",
                )),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}
