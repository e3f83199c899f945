//! The rules of a conversion request, the same for every front end: what is written (asked
//! for, or told by the output's name), which options apply to it, whether the output is a
//! sharded checkpoint, and which outputs would replace what is read.
//!
//! The command-line tool's `convert` and the Python package's `convert`, `save_file` and
//! `torch.save_file` check their requests here, so the same request gets the same refusal
//! from each, in each one's spelling of the option ([`Spelling`]):
//!
//! ```
//! use std::path::Path;
//! use ztensor_registry::{Conversion, Request, Rule, Spelling, Target};
//!
//! let ask = |spelling| Request {
//!     to: Some(Target::Zt2),
//!     ..Request::new(Path::new("in.safetensors"), Path::new("out.safetensors"), spelling)
//! };
//! let cli = Conversion::check(&ask(Spelling::Cli)).unwrap_err();
//! let python = Conversion::check(&ask(Spelling::Python)).unwrap_err();
//! assert_eq!(cli.rule(), Rule::NameSaysOtherwise);
//! assert_eq!(python.rule(), cli.rule());
//! assert!(cli.to_string().contains("--to"));
//! assert!(python.to_string().contains("to="));
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use ztensor_format::Version;

use crate::Kind;
use crate::write::{TARGET_NAMES, Target};

/// How a front end names its options, so a refusal names the one the user gave: the
/// command-line tool's `--zstd`, Python's `zstd=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Spelling {
    /// `--to`, `--zstd`, `--digest`, `--shard-size`, `--force`.
    Cli,
    /// `to=`, `zstd=`, `digest=`, `shard_size=`, `force=`: Python's `convert`.
    Python,
    /// `version=` for the target, the rest as [`Spelling::Python`]: Python's `save_file`.
    PythonSave,
}

/// An option of a conversion request, as [`Spelling`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    To,
    Zstd,
    Digest,
    ShardSize,
    Force,
}

impl Spelling {
    fn option(self, option: Opt) -> &'static str {
        match (self, option) {
            (Spelling::Cli, Opt::To) => "--to",
            (Spelling::Cli, Opt::Zstd) => "--zstd",
            (Spelling::Cli, Opt::Digest) => "--digest",
            (Spelling::Cli, Opt::ShardSize) => "--shard-size",
            (Spelling::Cli, Opt::Force) => "--force",
            (Spelling::Python, Opt::To) => "to=",
            (Spelling::PythonSave, Opt::To) => "version=",
            (Spelling::Python | Spelling::PythonSave, Opt::Zstd) => "zstd=",
            (Spelling::Python | Spelling::PythonSave, Opt::Digest) => "digest=",
            (Spelling::Python | Spelling::PythonSave, Opt::ShardSize) => "shard_size=",
            (Spelling::Python | Spelling::PythonSave, Opt::Force) => "force=",
        }
    }
}

/// Which rule a request broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// A zstd level outside 1..=22.
    ZstdLevel,
    /// No target could be told: a name no target has, or an output whose name says no
    /// format written (and nothing asked for).
    Target,
    /// The target asked for is not the format the output's name says (`x.safetensors` asked
    /// to hold zTensor 2).
    NameSaysOtherwise,
    /// zstd or digests asked of a target that stores raw bytes and no digests.
    RawTarget,
    /// Digests asked of zTensor 2, whose parts carry their own.
    DigestOfZt2,
    /// A shard size for an output that is not a directory.
    ShardSizeNeedsDirectory,
    /// `force` for an output that is not a directory (a file is replaced whole without it).
    ForceNeedsDirectory,
    /// A directory output (a sharded checkpoint) of a target that has none.
    DirectoryOfOtherFormat,
    /// The output is the input, or a file the input's content lies in.
    OverInput,
}

/// A conversion request refused: the rule and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    rule: Rule,
    message: String,
}

impl Refusal {
    fn new(rule: Rule, message: String) -> Refusal {
        Refusal { rule, message }
    }

    /// The rule broken.
    pub fn rule(&self) -> Rule {
        self.rule
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// How a sharded output is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharding {
    /// As the input is (a sharded input's shards kept; one shard otherwise).
    LikeInput,
    /// Shards of at most this many bytes (an object larger than that in a shard of its own).
    Size(u64),
}

/// A conversion as asked for, before it is checked: [`Request::new`] and what was asked,
/// by struct update.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// What is read: a path, `-`, or an object URL.
    pub input: &'a Path,
    /// What is written: a file, a directory (ending in `/`, or one that exists: a sharded
    /// checkpoint), `-`, or an object URL (or a prefix, ending in `/`).
    pub output: &'a Path,
    /// The target asked for, if any.
    pub to: Option<Target>,
    /// What is written when nothing is asked for and the output's name says no format:
    /// `None` refuses such an output (the command-line tool); a save to a name of no format
    /// writes zTensor 1.2 as it always has.
    pub unnamed: Option<Target>,
    /// The zstd level asked for, if any.
    pub zstd: Option<i32>,
    /// Whether digests were asked for.
    pub digest: bool,
    /// The shard size asked for, if any.
    pub shard_size: Option<u64>,
    /// Whether the output directory's checkpoint may be cleared first.
    pub force: bool,
    /// How the front end names its options.
    pub spelling: Spelling,
}

impl<'a> Request<'a> {
    /// A request to write `output` from `input` with nothing else asked.
    pub fn new(input: &'a Path, output: &'a Path, spelling: Spelling) -> Request<'a> {
        Request {
            input,
            output,
            to: None,
            unnamed: None,
            zstd: None,
            digest: false,
            shard_size: None,
            force: false,
            spelling,
        }
    }
}

/// A conversion request that passed the rules that need no input opened: what is written,
/// and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Conversion {
    /// What is read.
    pub input: PathBuf,
    /// What is written.
    pub output: PathBuf,
    /// What is written there.
    pub target: Target,
    /// How a sharded output is split; `None` for one file.
    pub sharding: Option<Sharding>,
}

impl Conversion {
    /// Checks `request`: the zstd level, the target (asked for, or told by the output's
    /// name, the two agreeing), the options that apply to it, and a directory output's.
    ///
    /// # Errors
    /// The first rule the request breaks, named in the request's [`Spelling`].
    pub fn check(request: &Request<'_>) -> Result<Conversion, Refusal> {
        let words = request.spelling;
        let output = request.output;
        if let Some(level) = request.zstd.filter(|l| !(1..=22).contains(l)) {
            return Err(Refusal::new(
                Rule::ZstdLevel,
                format!("{} {level}: a zstd level is between 1 and 22", words.option(Opt::Zstd)),
            ));
        }
        let directory = is_directory(output);
        let sharding = match (directory, request.shard_size) {
            (true, Some(size)) => Some(Sharding::Size(size.max(1))),
            (true, None) => Some(Sharding::LikeInput),
            (false, Some(_)) => {
                return Err(Refusal::new(
                    Rule::ShardSizeNeedsDirectory,
                    format!(
                        "{} writes a sharded checkpoint: give an output directory (ending in /), \
                         not {}",
                        words.option(Opt::ShardSize),
                        output.display()
                    ),
                ));
            }
            (false, None) => None,
        };
        if request.force && sharding.is_none() {
            return Err(Refusal::new(
                Rule::ForceNeedsDirectory,
                format!(
                    "{} clears an output directory that holds a checkpoint: a file output ({}) \
                     is replaced whole, atomically, without it",
                    words.option(Opt::Force),
                    output.display()
                ),
            ));
        }
        let target = match (request.to, sharding) {
            (Some(to), _) => {
                if sharding.is_none() {
                    name_agrees(output, to, words)?;
                }
                to
            }
            (None, Some(_)) => Target::Zt(Version::V1_2),
            (None, None) => match (Target::for_output(output, None), request.unnamed) {
                (Ok(target), _) => target,
                (Err(_), Some(unnamed)) if !names_a_target(output) => unnamed,
                (Err(e), _) => {
                    let message = e.to_string().replace("--to", words.option(Opt::To));
                    return Err(Refusal::new(Rule::Target, message));
                }
            },
        };
        if let Target::Safetensors | Target::TensorBuffers = target {
            let option = match (request.zstd, request.digest) {
                (Some(_), _) => Some(Opt::Zstd),
                (None, true) => Some(Opt::Digest),
                (None, false) => None,
            };
            if let Some(option) = option {
                return Err(Refusal::new(
                    Rule::RawTarget,
                    format!(
                        "{} does not apply to {target}, which stores raw bytes and no digests",
                        bare(words.option(option))
                    ),
                ));
            }
        }
        if target == Target::Zt2 && request.digest {
            return Err(Refusal::new(
                Rule::DigestOfZt2,
                format!(
                    "{} does not apply to zTensor 2, whose parts each carry an xxh3 digest (what \
                     its canonical form requires)",
                    bare(words.option(Opt::Digest))
                ),
            ));
        }
        if sharding.is_some() && !matches!(target, Target::Zt(_) | Target::Zt2) {
            return Err(Refusal::new(
                Rule::DirectoryOfOtherFormat,
                format!(
                    "a directory output is a sharded zTensor checkpoint; {target} is not zTensor \
                     (name a file to write {target})"
                ),
            ));
        }
        Ok(Conversion {
            input: request.input.to_path_buf(),
            output: output.to_path_buf(),
            target,
            sharding,
        })
    }

    /// Whether the output is the input, rewritten in place: a zTensor 0.1/1.x file written
    /// again as zTensor 0.1/1.x (published by a rename, as `repack` does), the only
    /// conversion allowed over its input.
    pub fn in_place(&self, input: Kind) -> bool {
        self.sharding.is_none()
            && input == Kind::Zt
            && matches!(self.target, Target::Zt(_))
            && same_file(&self.input, &self.output)
    }

    /// Checks the conversion against its input opened as `kind`, whose content also lies in
    /// `files` (a sharded checkpoint's shards, a zTensor 2 root's): a file output may not
    /// replace any of them, unless it is the input rewritten [in place](Conversion::in_place).
    /// (A sharded output's shards are checked when they are planned.)
    ///
    /// # Errors
    /// [`Rule::OverInput`], naming the output and the file it would replace.
    pub fn check_input(&self, kind: Kind, files: &[PathBuf]) -> Result<(), Refusal> {
        if self.sharding.is_some() || self.in_place(kind) {
            return Ok(());
        }
        let what = self.target.to_string();
        for read in std::iter::once(&self.input).chain(files) {
            not_over(read, &self.output, &what)?;
        }
        Ok(())
    }
}

/// Refuses writing `what` at `output` when it is `input` (any path or hard link to the same
/// file; any spelling of the same object's URL).
///
/// # Errors
/// [`Rule::OverInput`], naming both.
pub fn not_over(input: &Path, output: &Path, what: &str) -> Result<(), Refusal> {
    if same_file(input, output) {
        return Err(Refusal::new(
            Rule::OverInput,
            format!(
                "{} is also the input {}; writing {what} there would replace it (choose another \
                 output)",
                output.display(),
                input.display()
            ),
        ));
    }
    Ok(())
}

/// Whether `a` and `b` are the same file (the same device and inode: hard links and every
/// spelling of a path included) or, both URLs, the same object (its scheme, bucket and key).
/// Paths that do not exist are not the same as anything.
pub fn same_file(a: &Path, b: &Path) -> bool {
    fn url(p: &Path) -> Option<&str> {
        p.to_str().filter(|s| is_url(s))
    }
    match (url(a), url(b)) {
        (Some(a), Some(b)) => return same_object(a, b),
        (None, None) => {}
        _ => return false,
    }
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
}

/// Whether `path` is an object URL (`s3://`, `gs://`, `az://`, `http(s)://`, …).
fn is_url(path: &str) -> bool {
    #[cfg(feature = "remote")]
    {
        ztensor_remote::is_url(path)
    }
    #[cfg(not(feature = "remote"))]
    {
        path.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric())
        })
    }
}

/// Whether the URLs `a` and `b` name the same object, however spelt.
fn same_object(a: &str, b: &str) -> bool {
    #[cfg(feature = "remote")]
    {
        use ztensor_remote::Location;
        match (Location::parse(a), Location::parse(b)) {
            (Ok(a), Ok(b)) => {
                (a.scheme(), a.bucket(), a.key()) == (b.scheme(), b.bucket(), b.key())
            }
            _ => a == b,
        }
    }
    #[cfg(not(feature = "remote"))]
    {
        a == b
    }
}

/// Whether `output` is a directory: its name ends in `/`, or a directory is there.
fn is_directory(output: &Path) -> bool {
    output.as_os_str().to_string_lossy().ends_with('/') || output.is_dir()
}

/// Whether `output`'s name says a format written, or one read but not written (what an
/// `unnamed` default must not write under).
fn names_a_target(output: &Path) -> bool {
    output.extension().is_some_and(|e| {
        let e = e.to_string_lossy().to_ascii_lowercase();
        Target::for_output(Path::new(&format!("x.{e}")), None).is_ok()
            || crate::write::READ_NOT_WRITTEN.contains(&e.as_str())
    })
}

/// Refuses `to` for an output whose name says another format.
fn name_agrees(output: &Path, to: Target, words: Spelling) -> Result<(), Refusal> {
    let Ok(named) = Target::for_output(output, None) else { return Ok(()) };
    if named.extension() == to.extension() {
        return Ok(());
    }
    Err(Refusal::new(
        Rule::NameSaysOtherwise,
        format!(
            "{} is named as a {named_format} file, but {option}{to_name} asks for {to}: name it \
             .{ext}, or ask for {named_format} ({TARGET_NAMES})",
            output.display(),
            named_format = family(named),
            option = words.option(Opt::To),
            to_name = short_name(to, words),
            ext = to.extension(),
        ),
    ))
}

/// How a target's family is called in a message about names.
fn family(target: Target) -> &'static str {
    match target {
        Target::Zt(_) | Target::Zt2 => "zTensor",
        Target::Safetensors => "safetensors",
        Target::TensorBuffers => "TensorBuffers",
    }
}

/// The name a target is asked for by, as the option is written (`--to 2`, `to="2"`).
fn short_name(target: Target, words: Spelling) -> String {
    let name = match target {
        Target::Zt(v) => v.to_string(),
        Target::Zt2 => "2".to_owned(),
        Target::Safetensors => "safetensors".to_owned(),
        Target::TensorBuffers => "tensorbuffers".to_owned(),
    };
    match words {
        Spelling::Cli => format!(" {name}"),
        Spelling::Python | Spelling::PythonSave => format!("\"{name}\""),
    }
}

/// An option's name alone (`--zstd`, `zstd`), as the subject of a sentence.
fn bare(option: &str) -> &str {
    option.trim_end_matches('=')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule `request` breaks, asked by each front end: the same rule from both, each
    /// message naming the option in its own spelling.
    fn refused(input: &Path, output: &Path, ask: impl Fn(&mut Request<'_>)) -> (Rule, String) {
        let mut outcomes = [Spelling::Cli, Spelling::Python].map(|spelling| {
            let mut request = Request::new(input, output, spelling);
            ask(&mut request);
            Conversion::check(&request).expect_err("refused")
        });
        let [cli, python] = &mut outcomes;
        assert_eq!(cli.rule(), python.rule(), "{cli} / {python}");
        (cli.rule(), cli.to_string())
    }

    #[test]
    fn each_rule_is_the_same_for_every_front_end() {
        let (input, file) = (Path::new("in.safetensors"), Path::new("out.safetensors"));
        let dir = Path::new("out/");
        type Ask<'r> = &'r dyn Fn(&mut Request<'_>);
        let cases: [(&Path, Rule, Ask<'_>, &str); 9] = [
            (file, Rule::ZstdLevel, &|r| r.zstd = Some(23), "between 1 and 22"),
            (Path::new("out"), Rule::Target, &|_| {}, "has no extension"),
            (Path::new("out.safetensor"), Rule::Target, &|_| {}, "did you mean .safetensors"),
            (
                file,
                Rule::NameSaysOtherwise,
                &|r| r.to = Some(Target::Zt2),
                "named as a safetensors",
            ),
            (file, Rule::RawTarget, &|r| r.zstd = Some(3), "zstd does not apply to safetensors"),
            (
                Path::new("o.zt"),
                Rule::DigestOfZt2,
                &|r| {
                    r.to = Some(Target::Zt2);
                    r.digest = true;
                },
                "zTensor 2",
            ),
            (file, Rule::ShardSizeNeedsDirectory, &|r| r.shard_size = Some(1), "sharded"),
            (file, Rule::ForceNeedsDirectory, &|r| r.force = true, "replaced whole"),
            (
                dir,
                Rule::DirectoryOfOtherFormat,
                &|r| r.to = Some(Target::Safetensors),
                "not zTensor",
            ),
        ];
        for (output, rule, ask, says) in cases {
            let (got, message) = refused(input, output, ask);
            assert_eq!(got, rule, "{}: {message}", output.display());
            assert!(message.contains(says), "{message:?} lacks {says:?}");
        }
    }

    #[test]
    fn options_are_named_as_each_front_end_spells_them() {
        let output = Path::new("o.safetensors");
        let message = |spelling| {
            let request =
                Request { zstd: Some(3), ..Request::new(Path::new("i"), output, spelling) };
            Conversion::check(&request).unwrap_err().to_string()
        };
        assert!(
            message(Spelling::Cli).starts_with("--zstd does not apply"),
            "{}",
            message(Spelling::Cli)
        );
        assert!(message(Spelling::Python).starts_with("zstd does not apply"));
        let named = |spelling| {
            let request =
                Request { to: Some(Target::Zt2), ..Request::new(Path::new("i"), output, spelling) };
            Conversion::check(&request).unwrap_err().to_string()
        };
        assert!(
            named(Spelling::Cli).contains("but --to 2 asks for zTensor 2"),
            "{}",
            named(Spelling::Cli)
        );
        assert!(named(Spelling::Python).contains("but to=\"2\" asks for zTensor 2"));
    }

    #[test]
    fn the_target_is_asked_for_or_named() {
        let target = |output: &str, to: Option<Target>, unnamed: Option<Target>| {
            let request = Request {
                to,
                unnamed,
                ..Request::new(Path::new("i.zt"), Path::new(output), Spelling::Python)
            };
            Conversion::check(&request).map(|c| c.target).map_err(|e| e.rule())
        };
        assert_eq!(target("o.safetensors", None, None), Ok(Target::Safetensors));
        assert_eq!(target("o.SafeTensors", None, None), Ok(Target::Safetensors));
        assert_eq!(target("o.zt", None, None), Ok(Target::Zt(Version::V1_2)));
        assert_eq!(target("o.zt", Some(Target::Zt2), None), Ok(Target::Zt2));
        assert_eq!(
            target("o.zt", Some(Target::Zt(Version::V0_1)), None),
            Ok(Target::Zt(Version::V0_1))
        );
        assert_eq!(target("o.tb", None, None), Ok(Target::TensorBuffers));
        // A name of no format written takes what is asked for, or a save's default; a name of
        // a format read but not written never gets zTensor.
        assert_eq!(target("o.bin", Some(Target::Zt2), None), Ok(Target::Zt2));
        assert_eq!(
            target("weights", None, Some(Target::Zt(Version::V1_2))),
            Ok(Target::Zt(Version::V1_2))
        );
        assert_eq!(target("o.pt", None, Some(Target::Zt(Version::V1_2))), Err(Rule::Target));
        assert_eq!(
            target("o.safetensors", None, Some(Target::Zt(Version::V1_2))),
            Ok(Target::Safetensors)
        );
        // A directory: zTensor 1.2 shards unless asked otherwise.
        let dir = Request::new(Path::new("i.zt"), Path::new("out/"), Spelling::Cli);
        let checked = Conversion::check(&dir).unwrap();
        assert_eq!(
            (checked.target, checked.sharding),
            (Target::Zt(Version::V1_2), Some(Sharding::LikeInput))
        );
        let sized = Request { shard_size: Some(0), ..dir };
        assert_eq!(Conversion::check(&sized).unwrap().sharding, Some(Sharding::Size(1)));
    }

    #[test]
    fn an_output_over_what_is_read_is_refused_but_a_zt_rewritten_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.zt");
        std::fs::write(&input, b"x").unwrap();
        let linked = dir.path().join("b.zt");
        std::fs::hard_link(&input, &linked).unwrap();
        let shard = dir.path().join("shard.zt");
        std::fs::write(&shard, b"y").unwrap();
        let check = |output: &Path, to: Target, kind: Kind, files: &[PathBuf]| {
            let request = Request { to: Some(to), ..Request::new(&input, output, Spelling::Cli) };
            Conversion::check(&request).unwrap().check_input(kind, files).map_err(|e| e.rule())
        };
        // The same file by another name (a hard link): the input replaced.
        assert_eq!(check(&linked, Target::Zt2, Kind::Zt, &[]), Err(Rule::OverInput));
        assert_eq!(check(&input, Target::Zt2, Kind::Zt, &[]), Err(Rule::OverInput));
        // zTensor rewritten as zTensor 0.1/1.x: in place, published by a rename.
        assert_eq!(check(&linked, Target::Zt(Version::V1_1), Kind::Zt, &[]), Ok(()));
        // ... but not when the input is another format under that name.
        assert_eq!(check(&linked, Target::Zt(Version::V1_2), Kind::Zt2, &[]), Err(Rule::OverInput));
        // A file the input's content lies in.
        let files = [shard.clone()];
        assert_eq!(check(&shard, Target::Zt2, Kind::ZtIndex, &files), Err(Rule::OverInput));
        assert_eq!(check(&dir.path().join("new.zt"), Target::Zt2, Kind::ZtIndex, &files), Ok(()));
    }

    #[test]
    fn urls_are_the_same_object_however_spelt() {
        let same = |a: &str, b: &str| same_file(Path::new(a), Path::new(b));
        assert!(same("s3://bucket/a/x.zt", "s3://bucket/a/x.zt"));
        assert!(!same("s3://bucket/a/x.zt", "s3://bucket/a/y.zt"));
        assert!(!same("s3://bucket/a/x.zt", "gs://bucket/a/x.zt"));
        // A URL and a path are never the same.
        assert!(!same("s3://bucket/x.zt", "x.zt"));
        // Paths that do not exist are the same as nothing.
        assert!(!same("/nonexistent/a", "/nonexistent/a"));
    }
}
