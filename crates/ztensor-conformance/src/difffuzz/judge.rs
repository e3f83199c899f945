//! Asking an implementation about a case ([`Judge`]): as a reader through the protocol or in
//! this process, or as a writer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value as Json, json};

use super::classify::{Class, Divergence, classify, mask};
use super::ours::{InProcess, Ours, ours, ours_in_process};
use super::recipe::{Recipe, unhex};
use crate::implementation::{Implementation, Ran, Verdict};
use crate::model::Model;

/// What one case came to.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The file: the one read (reading), or the one written (writing; empty when none was).
    pub file: Vec<u8>,
    /// The implementation's verdict, as the report gives it.
    pub theirs: Json,
    /// Ours, as the report gives it: our strict and lenient verdicts (reading), the recipe
    /// the writer was given (writing).
    pub ours: Json,
    /// The writer recipe the implementation was given (writing).
    pub writer_recipe: Option<Json>,
    /// The divergence, if any, and what differed.
    pub divergence: Option<(Divergence, String)>,
}

/// One way of asking an implementation about cases: as a reader or as a writer.
pub(super) trait Judge {
    /// The verdicts on the case of `recipe`.
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged>;
    /// Whether files go to one `--serve` process, and the processes started.
    fn processes(&self) -> (bool, u64);
    /// Whether the implementation is called in this process.
    fn in_process(&self) -> bool {
        false
    }
    /// The implementation's violations of the `--serve` protocol so far.
    fn violations(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The implementation as a reader: each case's file is read by it and by ours.
pub(super) struct Reading {
    pub(super) implementation: Implementation,
    pub(super) dir: PathBuf,
    /// Cases read so far: each is written under a name of its own, so that an answer naming
    /// its file (`--serve`) can only name the one asked.
    pub(super) read: u64,
}

fn ours_json(ours: &Ours) -> Json {
    json!({
        "lenient": {"accepted": ours.lenient.1, "dump": ours.lenient.0},
        "strict": {"accepted": ours.strict.1, "dump": ours.strict.0},
        "latitude": ours.latitude,
    })
}

impl Judge for Reading {
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged> {
        let file = recipe.build()?;
        self.read += 1;
        let path = self.dir.join(format!("case-{}.zt", self.read));
        std::fs::write(&path, &file)?;
        let ours = ours(&path, &file);
        let theirs = self.implementation.read(&path);
        let _ = std::fs::remove_file(&path);
        Ok(read_judged(file, &ours?, &theirs))
    }

    fn processes(&self) -> (bool, u64) {
        (self.implementation.persistent(), self.implementation.processes())
    }

    fn violations(&self) -> Vec<String> {
        self.implementation.violations().to_vec()
    }
}

/// What a reader's verdict on `file` came to beside ours.
fn read_judged(file: Vec<u8>, ours: &Ours, theirs: &Verdict) -> Judged {
    Judged {
        divergence: classify(ours, theirs),
        theirs: verdict_json(theirs),
        ours: ours_json(ours),
        writer_recipe: None,
        file,
    }
}

/// An implementation read in this process: each case's bytes are given to it and to ours.
pub(super) struct InProcessReading<'a> {
    pub(super) implementation: &'a mut dyn InProcess,
}

impl Judge for InProcessReading<'_> {
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged> {
        let file = recipe.build()?;
        let ours = ours_in_process(&file)?;
        let call = std::panic::AssertUnwindSafe(|| self.implementation.read(&file));
        let theirs = std::panic::catch_unwind(call).unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            Verdict::Crash(format!("panicked: {message}"))
        });
        Ok(read_judged(file, &ours, &theirs))
    }

    fn processes(&self) -> (bool, u64) {
        (false, 0)
    }

    fn in_process(&self) -> bool {
        true
    }
}

/// The writer recipe (`ztensor-recipe/1`) of a case: the content of the model its generator
/// input makes (its changes are for readers), for any writer to write. For a zTensor 2 case,
/// a recipe of version `2`: the model's objects zTensor 2 can hold, with no digest asked for
/// (a zTensor 2 writer puts its own on every part), every one compressed or none.
///
/// # Errors
/// When the recipe's model hex is broken, or our writer refuses the generated model.
pub fn writer_recipe(recipe: &Recipe) -> Result<crate::writer_check::Recipe> {
    use crate::writer_check::{RecipeComponent, RecipeObject, Target};
    let model = match &recipe.zt2 {
        Some(_) => super::zt2::representable(&recipe.model)?,
        None => Model::from_bytes(&unhex(&recipe.model)?),
    };
    let (_, expect) = model.write().context("writing the generated model")?;
    let objects = model
        .objects
        .iter()
        .zip(expect)
        .map(|(spec, e)| RecipeObject {
            name: e.name,
            format: e.format.name().to_owned(),
            shape: e.shape,
            attributes: None,
            zstd: match &recipe.zt2 {
                Some(how) => how.zstd,
                None => !matches!(spec.options.compression, ztensor_io::Compression::Raw),
            },
            digest: if recipe.zt2.is_some() { None } else { e.digest },
            components: e
                .components
                .into_iter()
                .map(|(role, (dtype, logical_type, bytes))| RecipeComponent {
                    role,
                    dtype,
                    logical_type,
                    bytes,
                })
                .collect(),
        })
        .collect();
    Ok(crate::writer_check::Recipe {
        name: format!("fuzz-{}", recipe.seed),
        version: if recipe.zt2.is_some() { Target::Zt2 } else { Target::Zt(model.version) },
        covers: "a generated model".to_owned(),
        attributes: None,
        objects,
    })
}

/// The bytes of a written file kept with a finding when it is larger than its recipe can need.
const KEPT_OF_TOO_LARGE: u64 = 1 << 20;

/// The first `n` bytes of `file` (none when it cannot be read).
fn head(file: &Path, n: u64) -> Vec<u8> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(file) {
        let _ = f.take(n).read_to_end(&mut bytes);
    }
    bytes
}

/// The implementation as a writer (the writer protocol, `COMMAND RECIPE OUT`): each case's
/// content is given it as a recipe, and what it writes is graded by the writer check.
pub(super) struct Writing {
    program: String,
    args: Vec<String>,
    timeout: Duration,
    dir: PathBuf,
    pub(super) started: u64,
}

impl Writing {
    pub(super) fn new(command: &str, timeout: Duration, dir: &Path) -> Result<Writing> {
        let mut words = command.split_whitespace().map(str::to_owned);
        let Some(program) = words.next() else { bail!("empty --impl command") };
        Ok(Writing { program, args: words.collect(), timeout, dir: dir.to_owned(), started: 0 })
    }
}

impl Judge for Writing {
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged> {
        let given = writer_recipe(recipe)?;
        let recipe_json = given.to_json();
        let recipe_path = self.dir.join("recipe.json");
        std::fs::write(&recipe_path, serde_json::to_string_pretty(&recipe_json)? + "\n")?;
        let out = self.dir.join("written.zt");
        let _ = std::fs::remove_file(&out);
        self.started += 1;
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args).arg(&recipe_path).arg(&out);
        let ended = crate::implementation::run_to_end(
            &mut command,
            self.timeout,
            crate::implementation::MESSAGES_LIMIT,
        )
        .with_context(|| format!("cannot run {:?}", self.program))?;
        // What it wrote, unless it is larger than this recipe can need: then only its first
        // bytes are kept with the finding.
        let (written, too_large) = match crate::writer_check::read_written(&given, &out) {
            Ok(Ok(bytes)) => (bytes, None),
            Ok(Err(why)) => (head(&out, KEPT_OF_TOO_LARGE), Some(why)),
            Err(_) => (Vec::new(), None),
        };
        let judged = |theirs: Json, divergence| Judged {
            file: written.clone(),
            theirs,
            ours: json!({"recipe": recipe_json}),
            writer_recipe: Some(recipe_json.clone()),
            divergence,
        };
        let (status, stderr) = match ended {
            Ran::Ended(status, _, stderr) => (status, stderr),
            Ran::Hang => {
                let d =
                    (Divergence { class: Class::Hang, key: "hang".to_owned() }, "no answer".into());
                return Ok(judged(json!({"verdict": "hang"}), Some(d)));
            }
            Ran::Flooded(limit) => {
                let why = format!("printed more than {limit} bytes on stdout");
                let d = (Divergence { class: Class::Crash, key: mask(&why) }, why.clone());
                return Ok(judged(json!({"verdict": "crash", "why": why}), Some(d)));
            }
        };
        let stderr = String::from_utf8_lossy(&stderr);
        let said = stderr.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        if status.code() == Some(0)
            && let Some(why) = too_large
        {
            let key = "wrote more than the recipe can need".to_owned();
            let d = (Divergence { class: Class::WritesInvalid, key }, why);
            let kept = written.len();
            return Ok(judged(json!({"verdict": "written", "check": d.1, "kept": kept}), Some(d)));
        }
        Ok(match status.code() {
            Some(0) if out.exists() => match crate::writer_check::check(&given, &written) {
                Ok(()) => judged(json!({"verdict": "written"}), None),
                Err(why) => {
                    // Told apart by what the check says, names, numbers and the details in
                    // parentheses left out.
                    let key: String = why
                        .split(" (")
                        .next()
                        .unwrap_or_default()
                        .split('"')
                        .enumerate()
                        .map(|(i, part)| if i % 2 == 1 { "…" } else { part })
                        .collect();
                    let d = (Divergence { class: Class::WritesInvalid, key: mask(&key) }, why);
                    judged(json!({"verdict": "written", "check": d.1}), Some(d))
                }
            },
            Some(crate::writer_check::UNSUPPORTED) => {
                judged(json!({"verdict": "unsupported", "why": said}), None)
            }
            _ => {
                let ended =
                    match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                        (Some(0), _) => "exit status 0 without writing the file".to_owned(),
                        (Some(code), _) => format!("exit status {code}"),
                        (None, Some(signal)) => format!("killed by signal {signal}"),
                        (None, None) => "ended without a status".to_owned(),
                    };
                let why = if said.is_empty() { ended.clone() } else { format!("{ended}: {said}") };
                let d = (Divergence { class: Class::Crash, key: mask(&ended) }, why.clone());
                judged(json!({"verdict": "crash", "why": why}), Some(d))
            }
        })
    }

    fn processes(&self) -> (bool, u64) {
        (false, self.started)
    }
}

fn verdict_json(v: &Verdict) -> Json {
    match v {
        Verdict::Accepted(dump) => json!({"verdict": "accepted", "dump": dump}),
        Verdict::Rejected(dump) => json!({"verdict": "rejected", "dump": dump}),
        Verdict::Crash(why) => json!({"verdict": "crash", "why": why}),
        Verdict::Hang => json!({"verdict": "hang"}),
    }
}
