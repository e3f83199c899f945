//! What this project's readers say of a case ([`Ours`]), which the zTensor 1.x and zTensor 2
//! judges both fill in.

use serde_json::Value as Json;

/// This project's verdicts on a file.
#[derive(Debug, Clone)]
pub struct Ours {
    /// The lenient reader's dump, and whether it accepted.
    pub lenient: (Json, bool),
    /// The strict reader's dump, and whether it accepted.
    pub strict: (Json, bool),
    /// What the file has that the specs leave to each reader (a digest other than SHA-256,
    /// aliasing, nonzero padding, ...), if anything: accepting or rejecting it is no
    /// divergence.
    pub latitude: Option<String>,
    /// Objects (by name) the spec lets readers read either way (zTensor 2: a part's digest of
    /// an algorithm it does not name, which a reader may refuse to read unverified; a profile
    /// the reference reads as an unknown layout): an accepting reader's dump of them is
    /// compared on their name, format, shape, attributes and types, not on whether it could
    /// read them nor on what it read.
    pub loose: Vec<String>,
}

/// Whether an accepted file's dump reports an object it could not read.
pub(super) fn object_errors(dump: &Json) -> bool {
    dump["objects"].as_array().is_some_and(|objects| objects.iter().any(|o| !o["error"].is_null()))
}
