//! How a verdict is told from ours: the divergence classes, and what tells two apart.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::ours::Ours;
use crate::implementation::Verdict;
use crate::runner::{difference, projection};

/// A divergence's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Another exit status, a signal, or output that is not a dump.
    Crash,
    /// No answer within the timeout.
    Hang,
    /// Accepted a file both of this project's readers reject.
    AcceptsInvalid,
    /// Rejected a file this project's strict reader accepts.
    RejectsValid,
    /// Both accept, and the content differs.
    Misreads,
    /// A writer wrote a file that breaks a rule or holds other content than it was given.
    WritesInvalid,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 6] = [
        Class::Crash,
        Class::Hang,
        Class::AcceptsInvalid,
        Class::RejectsValid,
        Class::Misreads,
        Class::WritesInvalid,
    ];

    /// The class's name (`accepts-invalid`): directory and report name.
    pub fn name(self) -> &'static str {
        match self {
            Class::Crash => "crash",
            Class::Hang => "hang",
            Class::AcceptsInvalid => "accepts-invalid",
            Class::RejectsValid => "rejects-valid",
            Class::Misreads => "misreads",
            Class::WritesInvalid => "writes-invalid",
        }
    }
}

/// A divergence: its class and what told it apart (the first difference, the rule, the
/// exit), which deduplicates findings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Divergence {
    /// The class.
    pub class: Class,
    /// What told it apart, with numbers and hashes left out.
    pub key: String,
}

/// The first place two JSON values differ, as a path with array positions left out
/// (`objects.components.data.dtype`).
pub(super) fn first_difference(a: &Json, b: &Json, path: &str) -> Option<String> {
    match (a, b) {
        // What differs inside attributes is one difference, whichever key it is.
        _ if path.ends_with("attributes") && a != b => Some(path.to_owned()),
        (Json::Object(x), Json::Object(y)) => {
            for (k, v) in x {
                let child = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                if let Some(d) = first_difference(v, y.get(k).unwrap_or(&Json::Null), &child) {
                    return Some(d);
                }
            }
            y.keys().find(|k| !x.contains_key(*k)).map(|k| format!("{path}.{k}"))
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).find_map(|(v, w)| first_difference(v, w, path))
        }
        (Json::Array(_), Json::Array(_)) => Some(format!("{path} (count)")),
        _ if a == b => None,
        _ => Some(path.to_owned()),
    }
}

/// Classifies the implementation's verdict against ours; `None` when they agree (or differ
/// only where the specs let readers differ).
pub fn classify(ours: &Ours, theirs: &Verdict) -> Option<(Divergence, String)> {
    let divergence =
        |class, key: String, detail: String| Some((Divergence { class, key: mask(&key) }, detail));
    let (lenient, lenient_ok) = &ours.lenient;
    let (strict, strict_ok) = &ours.strict;
    match theirs {
        // A crash is told apart by how it ended and, for a panic, where.
        Verdict::Crash(why) => {
            // The panic's source file by its last two components (no line, no toolchain hash).
            let place = why.split_once("panicked at ").map(|(_, at)| {
                let path = at.split(':').next().unwrap_or_default();
                let parts: Vec<&str> = path.rsplit('/').take(2).collect();
                parts.into_iter().rev().collect::<Vec<_>>().join("/")
            });
            let ended = why.split(':').next().unwrap_or_default();
            let key = place.map_or_else(|| ended.to_owned(), |p| format!("{ended}: panic at {p}"));
            divergence(Class::Crash, key, why.clone())
        }
        Verdict::Hang => divergence(Class::Hang, "hang".to_owned(), "no answer".to_owned()),
        Verdict::Accepted(dump) => {
            if !lenient_ok && !strict_ok {
                let rule = strict["error"]["kind"].as_str().unwrap_or("rejected").to_owned();
                let message = strict["error"]["message"].as_str().unwrap_or("").to_owned();
                return divergence(
                    Class::AcceptsInvalid,
                    rule.clone(),
                    format!("accepted a file that breaks {rule}: {message}"),
                );
            }
            let (mut a, mut b) = (projection(lenient), projection(dump));
            if !ours.loose.is_empty() {
                loosen(&mut a, &ours.loose);
                loosen(&mut b, &ours.loose);
            }
            if a == b {
                return None;
            }
            let key = first_difference(&a, &b, "").unwrap_or_else(|| "content".to_owned());
            divergence(Class::Misreads, key, difference(&a, &b))
        }
        Verdict::Rejected(dump) => {
            if !strict_ok || ours.latitude.is_some() {
                return None;
            }
            let kind = dump["error"]["kind"].as_str().unwrap_or("rejected").to_owned();
            let message = dump["error"]["message"].as_str().unwrap_or("").to_owned();
            divergence(Class::RejectsValid, kind, format!("rejected a valid file: {message}"))
        }
    }
}

/// A projection with the objects named in `loose` left without what readers may differ on:
/// whether each could be read, and each component's decoded length and SHA-256.
fn loosen(projection: &mut Json, loose: &[String]) {
    for o in projection["objects"].as_array_mut().into_iter().flatten() {
        if !o["name"].as_str().is_some_and(|n| loose.iter().any(|l| l == n)) {
            continue;
        }
        o["error"] = Json::Null;
        for (_, c) in o["components"].as_object_mut().into_iter().flatten() {
            c["decoded_length"] = Json::Null;
            c["sha256"] = Json::Null;
        }
    }
}

/// A key with its numbers and hex strings (digests, hashes) left out, so that findings
/// differing only in those are one.
pub(super) fn mask(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex = word.len() >= 8 && word.chars().all(|c| c.is_ascii_hexdigit());
        if hex || (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit())) {
            out.push('#');
        } else {
            for c in word.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !out.ends_with('#') {
                    out.push('#');
                }
            }
        }
        word.clear();
    };
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out.chars().take(160).collect()
}
