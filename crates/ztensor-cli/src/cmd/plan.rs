//! `ztensor plan`, `run` and `finalize`: a sharded conversion as units of work for a
//! scheduler, one unit run anywhere, and the index written once every unit is checked.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use super::convert::{Request, plan_of};
use crate::cli::PlanArgs;
use crate::progress::Bar;
use crate::report::Done;
use crate::{Run, Target, open_source_with, reported};

/// `ztensor plan`: the plan of a sharded conversion written to its file, which may be none of
/// the files it reads or writes.
pub(crate) fn plan(a: PlanArgs) -> Result<Done> {
    // The registry's rules for the conversion the plan is of; its output is a directory to be,
    // which need not exist yet (nor end in `/`).
    ztensor_registry::Conversion::check(&ztensor_registry::Request {
        to: Some(Target::Zt(a.to)),
        zstd: a.encoding.zstd,
        digest: a.encoding.digest.is_some(),
        shard_size: a.shard_size,
        ..ztensor_registry::Request::new(&a.input, &a.output, ztensor_registry::Spelling::Cli)
    })
    .map_err(|e| anyhow!("{e}"))?;
    let split = match a.shard_size {
        Some(size) => ztensor_shard_write::Split::Size(size.max(1)),
        None => ztensor_shard_write::Split::LikeInput,
    };
    let run = Run { threads: 0, memory: None, quiet: true, json: false, no_wait: false };
    let request = Request {
        input: &a.input,
        output: &a.output,
        target: Target::Zt(a.to),
        drop_attributes: a.drop_attributes,
        exclude: &a.exclude,
        carry_unknown: a.carry_unknown_dtypes,
        encoding: &a.encoding,
        run: &run,
        sharded: Some(split),
        force: false,
        chunk: None,
        repack: false,
        checked: None,
    };
    // Told once (a file it cannot read is worded as detection words it); the opener
    // takes the handle.
    super::detect(&a.input)?;
    let opened = crate::sources::open_told(&a.input, a.carry_unknown_dtypes, None)?;
    // Every object the input is read from (a sharded checkpoint's shards too).
    let mut inputs: Vec<PathBuf> = opened.files().to_vec();
    inputs.push(a.input.clone());
    let source = crate::sources::expansion_checked(&a.input, opened)?;
    let mut made = plan_of(&request, split, &*source, &inputs)?;
    // Objects read from a bucket, with their sizes, which `run` checks as it checks files'.
    for input in &inputs {
        if let Some(url) = crate::remote::url_of(input) {
            use ztensor_io::ReadAt;
            let size = crate::remote::object(url)?.len();
            made.inputs.push(ztensor_shard_write::InputFile { path: input.clone(), size });
        }
    }
    // Outputs in a bucket (and a plan there) are no object the plan reads.
    if let Some(url) = crate::remote::url_of(&made.output) {
        use ztensor_shard_write::Destination;
        let prefix = crate::remote::prefix(url, run.memory);
        let names = made.units.iter().map(|u| u.shard.as_str()).chain([made.index.as_str()]);
        crate::remote::not_over_inputs(&inputs, names.map(|n| prefix.locate(n)))?;
    }
    if let Some(url) = crate::remote::url_of(&a.plan) {
        crate::remote::not_over_inputs(&inputs, [url.to_owned()])?;
    }
    // A plan in a bucket: one object, which the plan's own names cannot be (they are under
    // the output prefix, and objects are no files).
    if let Some(url) = crate::remote::url_of(&a.plan) {
        let named = made.output.join(&made.index);
        let shards = made.units.iter().map(|u| made.output.join(&u.shard));
        if let Some(other) = shards.chain([named]).find(|p| p.as_path() == a.plan.as_path()) {
            return Err(anyhow!(
                "{url} is also {} of the plan (choose another -o)",
                other.display()
            ));
        }
        crate::remote::put(url, made.to_json().as_bytes())?;
        return Ok(planned(&made, split, a.plan));
    }
    // The plan file is neither a file the plan reads nor one it will write.
    if let Some(id) = ztensor_io::FileId::of_path(&a.plan).map_err(|e| anyhow!("{e}"))? {
        let named = made.inputs.iter().map(|f| f.path.clone()).chain(
            made.units
                .iter()
                .map(|u| made.output.join(&u.shard))
                .chain([made.output.join(&made.index)]),
        );
        for other in named {
            if ztensor_io::FileId::of_path(&other).ok().flatten() == Some(id) {
                return Err(anyhow!(
                    "{} is also {} of the plan; writing the plan there would replace it (choose \
                     another -o)",
                    a.plan.display(),
                    other.display()
                ));
            }
        }
    }
    let mut file = ztensor_io::AtomicFile::create(&a.plan).map_err(|e| anyhow!("{e}"))?;
    file.write_all(made.to_json().as_bytes())
        .with_context(|| format!("cannot write {}", a.plan.display()))?;
    file.persist().map_err(|e| anyhow!("{e}"))?;
    Ok(planned(&made, split, a.plan))
}

/// What `plan` tells of the plan `made`, written to `plan`.
fn planned(
    made: &ztensor_shard_write::Plan,
    split: ztensor_shard_write::Split,
    plan: std::path::PathBuf,
) -> Done {
    Done::Planned {
        units: made.units.len(),
        objects: made.units.iter().map(|u| u.objects.len()).sum(),
        decoded: made.units.iter().map(|u| u.bytes).sum(),
        note: super::convert::oversized(made, split),
        plan,
    }
}

/// The plan at `path`: a file, or an object in a bucket.
fn read_plan(path: &Path) -> Result<ztensor_shard_write::Plan> {
    ztensor_registry::plans::read_plan(path, &storage(None)).map_err(|e| reported("", &e))
}

/// How plans, inputs and outputs in object storage are reached, uploads holding at most a
/// quarter of `memory`.
fn storage(memory: Option<u64>) -> ztensor_registry::plans::Storage {
    ztensor_registry::plans::Storage::new(crate::remote::options(memory))
}

/// `ztensor run PLAN`: one unit (given, or the scheduler's) written, or found done and
/// verified.
pub(crate) fn run_unit(path: &Path, unit: Option<usize>, run: &Run) -> Result<Done> {
    run.check_memory(ztensor_io::codec::DEFAULT_ZSTD_CHUNK)?;
    let plan = read_plan(path)?;
    let unit = match unit {
        Some(k) => k,
        None => unit_from_environment()?,
    };
    let storage = storage(run.memory);
    // Objects read from a bucket: the sizes they had when the plan was made, before the
    // input is opened (files are checked so by the unit writer).
    ztensor_registry::plans::check_remote_inputs(&plan, &storage)
        .map_err(|e| anyhow!("{}", e.message()))?;
    let source = open_source_with(&plan.input, plan.options.carry_unknown_dtypes)?;
    let total = plan.units.get(unit).map_or(0, |u| u.bytes);
    let bar = Bar::new(total, run.quiet);
    let started = std::time::Instant::now();
    let par = run.par();
    let done = ztensor_registry::plans::run_unit(&plan, unit, &*source, (&par, &bar), &storage);
    bar.finish();
    let context = format!("unit {unit} of {}", path.display());
    let outcome = done.map_err(|e| crate::refusal(&context, &e))?;
    let r = outcome.receipt();
    Ok(Done::Unit {
        unit,
        fresh: matches!(outcome, ztensor_shard_write::Outcome::Written(_)),
        shard: plan.output.join(&r.shard),
        objects: r.objects,
        size: r.size,
        digest: r.digest.clone(),
        took: started.elapsed(),
    })
}

/// `ztensor finalize PLAN`: every unit's receipt and shard checked, the index written.
pub(crate) fn finalize(path: &Path, deep: bool) -> Result<Done> {
    let plan = read_plan(path)?;
    ztensor_registry::plans::finalize(&plan, deep, &storage(None))
        .map_err(|e| reported(&format!("cannot finalize {}", path.display()), &e))?;
    // Where the index went (a URL as the plan keeps it; a path as the user gave it).
    let index = plan.output.join(&plan.index);
    Ok(Done::Finalized {
        index,
        shards: plan.units.len(),
        objects: plan.units.iter().map(|u| u.objects.len()).sum(),
    })
}

/// The unit a scheduler gave this process: `SLURM_ARRAY_TASK_ID`, else
/// `JOB_COMPLETION_INDEX` (Kubernetes Indexed Jobs).
fn unit_from_environment() -> Result<usize> {
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(value) = std::env::var(var) {
            return value
                .trim()
                .parse()
                .map_err(|_| anyhow!("{var}={value:?} is not a unit number"));
        }
    }
    Err(anyhow!(
        "which unit? give --unit K, or run under a Slurm array (SLURM_ARRAY_TASK_ID) or a \
         Kubernetes Indexed Job (JOB_COMPLETION_INDEX)"
    ))
}
