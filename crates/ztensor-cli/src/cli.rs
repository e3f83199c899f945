//! The command line: clap's definitions of the commands and their flags, and what the flags
//! mean for the libraries (write options, targets).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use ztensor_format::{DigestAlgorithm, Version};
use ztensor_io::DigestChoice;
pub(crate) use ztensor_registry::Target;

use crate::cmd;

/// What every reading command says of its input.
pub(crate) const READS: &str = "The file to read: zTensor (0.1, 1.1, 1.2 and 2), a \
     sharded zTensor or safetensors checkpoint (its index, or a zTensor 2 root), safetensors, TensorBuffers, NumPy .npy/.npz, GGUF, a PyTorch \
     checkpoint (.pt, .pth, .bin, .ckpt) or Distributed Checkpoint (its directory), recognised \
     by content; `-` reads standard input";

/// Inspect, verify, convert and repack tensor checkpoints on every core: zTensor 0.1, 1.1, 1.2
/// and 2, safetensors, TensorBuffers, NumPy, GGUF and PyTorch.
///
/// Reads (recognised by content, whatever the extension): zTensor 0.1/1.1/1.2 files and sharded
/// zTensor checkpoints (NAME.zt.index.json); zTensor 2 files and sharded models (their roots);
/// safetensors files and Hugging Face sharded checkpoints (*.safetensors.index.json);
/// TensorBuffers (.tb); NumPy .npy and .npz; GGUF (.gguf, quantized blocks kept exactly);
/// PyTorch checkpoints (torch.save zip or legacy: .pt, .pth, .bin, .ckpt; the pickle is read
/// by a machine that runs no code); PyTorch Distributed Checkpoints (the directory DCP saves,
/// or one ztensor_rs.torch.dcp saves: its whole tensors, chunks stitched). `-` reads standard
/// input.
///
/// Example: ztensor convert checkpoint-dir/ model.safetensors
///
/// Writes: zTensor 0.1/1.1/1.2 and 2 (one file, or a sharded checkpoint into a directory),
/// safetensors and TensorBuffers (`convert`); one tensor as NumPy .npy (`extract`).
///
/// Example: ztensor convert model.safetensors.index.json model.zt --zstd 3 --digest sha256
///
/// Example: ztensor convert model.pth model.zt
///
/// Example: ztensor convert model.gguf model.zt
///
/// Example: ztensor convert arrays.npz arrays.zt
///
/// Exit status: 0 on success; 1 when the data says no: a file breaks a rule of its format (the
/// message names the file, the object and the rule), content the target format cannot hold,
/// `verify` found a problem, or `diff` found a difference; 2 when the request fails: usage
/// errors, missing files or names, I/O errors.
#[derive(Debug, Parser)]
#[command(name = "ztensor", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Refuse an input whose objects decode to more than RATIO times its size (and more than
    /// 1 GiB): crafted files that expand a few bytes into gigabytes are refused before any
    /// work. Raise it for a file that is genuinely that compressible.
    #[arg(long, global = true, value_name = "RATIO", default_value_t = ztensor_format::Limits::DEFAULT.max_expansion)]
    pub(crate) max_expansion: u64,
    /// Print sizes as exact byte counts (and element counts whole) instead of human units
    /// (`83.1 MB`, decimal, as disks count).
    #[arg(long, global = true)]
    pub(crate) bytes: bool,
    /// The most bytes an input given as `-` may hold, e.g. 512MB or 64GiB: standard input is
    /// copied to a private temporary file first, and a longer one is refused (default: the
    /// machine's physical memory). Sizes here and in every SIZE option: a byte count, or K/KB,
    /// M/MB, G/GB, T/TB for powers of 1000 (as sizes are reported), KiB, MiB, GiB, TiB for
    /// powers of 1024.
    #[arg(long, global = true, value_parser = cmd::text::parse_size, value_name = "SIZE")]
    pub(crate) max_input: Option<u64>,
    /// For inputs in object storage (s3://, gs://, az://, http(s)://): send unsigned requests
    /// (a public bucket), as `aws s3 --no-sign-request`.
    #[arg(long, global = true)]
    pub(crate) no_sign_request: bool,
    /// The time one request to object storage may take, retries included, in seconds; past
    /// it the command fails naming the URL and the last error.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 120)]
    pub(crate) remote_timeout: u64,
    /// For inputs in object storage: the most ranged GETs of one object in flight at once.
    #[arg(long, global = true, value_name = "N", default_value_t = ztensor_remote::RemoteOptions::DEFAULT_CONCURRENCY)]
    pub(crate) remote_concurrency: usize,
    /// For inputs in object storage: the length of each ranged GET a large read is split
    /// into (at least 64KiB).
    #[arg(long, global = true, value_name = "SIZE", value_parser = cmd::text::parse_size, default_value = "8MiB")]
    pub(crate) remote_range_size: u64,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print what a file is, its attributes (a key to a line) and a table of its objects or
    /// tensors: shape, dtype, element count, stored and decoded size. Reads every input format
    /// (`ztensor --help` lists them).
    ///
    /// Example: ztensor info model.zt
    ///
    /// Example: ztensor info model.pth
    ///
    /// Example: ztensor info model.gguf --attributes
    Info {
        #[arg(help = READS)]
        file: PathBuf,
        /// Also enforce the strict-only rules (`ztensor rules` lists every rule).
        #[arg(long)]
        strict: bool,
        /// Print JSON instead of a table (every value whole, sizes exact).
        #[arg(long)]
        json: bool,
        /// Print every attribute value whole (long ones are otherwise cut to a line), and the
        /// attributes of each object or tensor that has its own.
        #[arg(long)]
        attributes: bool,
    },
    /// List object names, one per line, sorted; only those matching a pattern when patterns
    /// are given (`*` any run of characters, `?` one character, `[abc]`, `[a-z]`, `[!x]`).
    ///
    /// Example: ztensor ls model.zt 'layers.*.weight'
    ///
    /// Example: ztensor ls model.safetensors.index.json
    Ls {
        #[arg(help = READS)]
        file: PathBuf,
        /// Glob patterns; a name is listed when it matches any of them.
        patterns: Vec<String>,
        /// Print a JSON array instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Print the conformance dump (JSON, `ztensor-dump/1`) of a zTensor (0.1, 1.1, 1.2, 2) or
    /// TensorBuffers file: every object's decoded size and SHA-256. A rejected file prints the
    /// rule's identifier and exits with status 1.
    ///
    /// Example: ztensor dump --json fixtures/examples/tiny-v0.1.zt
    Dump {
        /// Print JSON (the only format; accepted for compatibility with the dump protocol).
        #[arg(long)]
        json: bool,
        /// The zTensor (any version) or TensorBuffers file to dump (`-` reads standard input).
        file: PathBuf,
    },
    /// Validate everything: the manifest, every digest, every sparse structure and bool byte.
    /// Exit status 0 only when the whole file is sound.
    ///
    /// Example: ztensor verify --strict --threads 4 model.zt
    ///
    /// Example: ztensor verify model.safetensors.index.json
    Verify {
        #[arg(help = READS)]
        file: PathBuf,
        /// Also enforce the strict-only rules (`ztensor rules` lists every rule).
        #[arg(long)]
        strict: bool,
        /// Worker threads (0, the default: one per core).
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        threads: usize,
        /// Print JSON: {"file", "sound", "objects", "problems", "digests"}.
        #[arg(long)]
        json: bool,
        /// No progress bar (there is none anyway when stderr is not a terminal).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Convert any input format to zTensor (0.1, 1.1, 1.2 or 2; one file or sharded),
    /// safetensors or TensorBuffers on every core, writing OUT atomically. Reads zTensor (0.1,
    /// 1.x and 2), sharded zTensor and safetensors checkpoints, safetensors, TensorBuffers, NumPy
    /// .npy/.npz, GGUF and PyTorch checkpoints (.pt, .pth, .bin, .ckpt), recognised by content.
    /// The target is --to, else OUT's extension (.zt: zTensor 1.2, .safetensors, .tb); any other
    /// extension, or none, is refused unless --to says what to write. OUT `-` writes the file
    /// to standard output (with --to; not a terminal).
    ///
    /// Example: ztensor convert model.safetensors.index.json model.zt --zstd 3 --digest sha256
    ///
    /// Example: ztensor convert model.pth model.zt
    ///
    /// Example: ztensor convert model.gguf model.zt --zstd 3
    ///
    /// Example: ztensor convert arrays.npz arrays.zt
    ///
    /// Example: ztensor convert model.zt model.safetensors
    ///
    /// Example: ztensor convert old.zt new.zt --to 1.1
    ///
    /// An OUT that ends in `/` (or is a directory) receives a sharded zTensor checkpoint: one
    /// shard per input shard (or per --shard-size), named like the input's with `.zt`, and
    /// NAME.zt.index.json, byte-identical to what `plan`, `run` and `finalize` write.
    ///
    /// Example: ztensor convert model.safetensors.index.json out/ --zstd 3
    ///
    /// IN and OUT may be objects in a bucket: s3://BUCKET/KEY, gs://BUCKET/KEY,
    /// az://CONTAINER/KEY (and IN https://HOST/PATH, read only); an OUT URL ending in `/` is a
    /// prefix that receives a sharded checkpoint. An object is read by ranges and written by a
    /// multipart upload that publishes nothing until it is complete. Credentials come from the
    /// environment as the clouds' own tools take them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL, AWS_PROFILE (~/.aws/credentials and
    /// ~/.aws/config), AWS_EC2_METADATA_DISABLED; GOOGLE_APPLICATION_CREDENTIALS;
    /// AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN. A
    /// public bucket: --no-sign-request.
    ///
    /// Example: ztensor convert s3://models/llama/model.safetensors model.zt
    ///
    /// Example: ztensor convert model.safetensors s3://models/llama/model.zt --zstd 3
    Convert(ConvertArgs),
    /// Print the content identity of any input: the zTensor 2 content digest (`zt.content/1`)
    /// of its objects (names, shapes, layouts, types, object attributes and each part's
    /// digest), whatever the file's placement, encoding, sharing or format. A zTensor 2 file's
    /// comes from its manifest; any other input's is the one its `convert --to 2` output has,
    /// so a 1.x file and its zTensor 2 conversion print the same line. File attributes are left
    /// out, as zTensor 2 defines the digest (§5.4): files that differ only in them print the
    /// same line. `ztensor diff` compares those too, and is what shows that nothing changed.
    ///
    /// Example: ztensor id model.zt
    ///
    /// Example: ztensor id model.zt model-v2.zt
    ///
    /// Example: ztensor id model.safetensors --algorithm xxh3
    Id {
        /// The inputs (any format `ztensor --help` lists; `-` reads standard input). With
        /// several, each line is the digest, two spaces and the file.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON: [{"file", "id"}], one entry per input.
        #[arg(long)]
        json: bool,
        /// The hash of the content value: sha256 (as the zTensor 2 reference prints) or xxh3.
        #[arg(long, value_enum, default_value = "sha256")]
        algorithm: IdArg,
    },
    /// Plan a sharded conversion as units of work for a scheduler, one per output shard: the
    /// same input and options always give the same plan. Run the units with `ztensor run`
    /// anywhere that sees the same paths, then `ztensor finalize`.
    ///
    /// Example: ztensor plan model.safetensors.index.json out/ --zstd 3 -o plan.json
    Plan(PlanArgs),
    /// Run one unit of a plan: write its shard (atomically) and a receipt. A unit already done
    /// is verified and skipped; two attempts of one unit may race safely.
    ///
    /// Example: ztensor run plan.json --unit 3
    ///
    /// Example: sbatch --array=0-7 --wrap 'ztensor run plan.json'   (K from SLURM_ARRAY_TASK_ID)
    #[command(name = "run")]
    RunUnit {
        /// The plan.
        plan: PathBuf,
        /// The unit; default $SLURM_ARRAY_TASK_ID, then $JOB_COMPLETION_INDEX (Kubernetes
        /// Indexed Jobs).
        #[arg(long)]
        unit: Option<usize>,
        #[command(flatten)]
        run: Run,
    },
    /// Check every unit's receipt and shard, and write the index. Refuses a partial set,
    /// naming the units missing.
    ///
    /// Example: ztensor finalize plan.json --deep
    Finalize {
        /// The plan.
        plan: PathBuf,
        /// Also hash every shard again and compare it with its receipt.
        #[arg(long)]
        deep: bool,
        /// Print the summary as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Repack a zTensor file on every core: any version in, any version out, zstd and digests
    /// computed in parallel. The output is byte-identical to what `convert` with the same
    /// settings writes, whatever the thread count.
    ///
    /// Example: ztensor repack model.zt model-z.zt --zstd 3 --digest sha256 --threads 8 --memory 2GiB
    Repack(RepackArgs),
    /// Append every object of SOURCE (any input format: `ztensor --help` lists them) to TARGET, a zTensor 1.x file, in place: new bytes go after the old end and
    /// the old bytes are never rewritten. Names already in TARGET are refused before anything is written.
    ///
    /// Crash-safe: until the append commits, TARGET reads as it was (a journal beside it,
    /// `.TARGET.zt-journal`, records where it ended). A failed append, a full disk, Ctrl-C or
    /// SIGTERM truncate it back to exactly its old bytes; after a kill or a power loss,
    /// `ztensor repair TARGET` (or the next append) does. One writer at a time: a second append,
    /// or a convert/repack/remove onto TARGET, waits for this one (or, with --no-wait, fails).
    ///
    /// Example: ztensor append model.zt --from extra.safetensors --zstd 3
    Append(AppendArgs),
    /// Write OUT with every object of FILE except the named ones (OUT may be FILE itself; it
    /// is replaced atomically).
    ///
    /// Example: ztensor remove model.zt optimizer.state lm_head.bias -o trimmed.zt
    Remove(RemoveArgs),
    /// Restore a zTensor file whose last append did not finish (the process was killed, the
    /// machine lost power) to its last complete state: the bytes the append wrote are truncated
    /// away, as the append's journal records. Needs no free space; a sound file is left alone,
    /// so running it twice is harmless. Exit status 0 when the file is sound afterwards.
    ///
    /// Example: ztensor repair model.zt
    Repair {
        /// The file to repair.
        file: PathBuf,
        /// For a file torn without a journal (by another program, or an older ztensor): truncate
        /// it to the last complete manifest found by scanning backwards. That manifest cannot be
        /// told from one carried inside the appended data; use this only on files you trust.
        #[arg(long)]
        scan: bool,
        /// Print what was done as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write one object as a NumPy .npy file. bf16, FP8 and the microscaling types (FP4, FP6,
    /// E8M0) are widened to f32 (exactly), complex types become complex64/complex128, sparse
    /// objects are written dense.
    ///
    /// Example: ztensor extract model.zt layers.0.weight -o weight.npy
    ///
    /// Example: ztensor extract model.pth encoder.embed.weight -o embed.npy
    Extract {
        #[arg(help = READS)]
        file: PathBuf,
        /// The object to extract.
        name: String,
        /// The .npy file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Refuse to densify sparse objects larger than this many bytes, e.g. 4GB or 4GiB.
        #[arg(long, value_parser = cmd::text::parse_size, default_value = "1GiB")]
        max_dense: u64,
        /// Print the summary as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Compare everything two files hold: file attributes (keys removed, added and changed),
    /// then objects by name: removed, added, and changed in format, shape, dtype, content
    /// (decoded bytes, whatever the encoding) or attributes. Exit status 1 when anything
    /// differs; encodings, digests and placement are no difference.
    ///
    /// Example: ztensor diff before.zt after.zt
    ///
    /// Example: ztensor diff model.safetensors.index.json model.zt
    ///
    /// Example: ztensor diff model.zt model.safetensors --ignore-attributes
    Diff {
        #[arg(help = READS)]
        a: PathBuf,
        #[arg(help = READS)]
        b: PathBuf,
        /// Print JSON: {"a", "b", "attributes" (file attribute keys that differ, each
        /// {"key", "a", "b"}, a side null where the key is missing), "attributes_compared",
        /// "added", "removed", "changed" (each {"name", "changes", "attributes"}), "same"}.
        #[arg(long)]
        json: bool,
        /// Leave attributes, the file's and each object's, out of the comparison: only names,
        /// formats, shapes, types and content count.
        #[arg(long)]
        ignore_attributes: bool,
    },
    /// Print the completion script of SHELL for this tool: its commands, options and, where an
    /// option takes one of a few values, those values. Load it from the shell's startup file.
    ///
    /// Example: ztensor completions bash > ~/.local/share/bash-completion/completions/ztensor
    ///
    /// Example: ztensor completions zsh > ~/.zfunc/_ztensor
    ///
    /// Example: ztensor completions fish > ~/.config/fish/completions/ztensor.fish
    Completions {
        /// The shell: bash, zsh, fish, powershell or elvish.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages (`ztensor.1` and one `ztensor-COMMAND.1` per command) into DIR,
    /// made from the same definitions as `--help` (`cargo xtask man` installs them).
    #[command(hide = true)]
    Manual {
        /// The directory to write them into (made if missing).
        dir: PathBuf,
    },
    /// List the rules files are checked against: identifier, layer, whether only --strict
    /// enforces it, and what it says. Errors name the rule they break by its identifier.
    ///
    /// Example: ztensor rules
    Rules {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print an object's values in C order (bf16, FP8, FP4, FP6 and E8M0 widened to f32; sparse
    /// objects densified), at most --limit of them.
    ///
    /// Example: ztensor cat model.zt layers.0.bias --limit 20
    ///
    /// Example: ztensor cat model.gguf token_embd.weight -n 8
    Cat {
        #[arg(help = READS)]
        file: PathBuf,
        /// The object to print.
        name: String,
        /// The most values to print (0 for all).
        #[arg(long, short = 'n', default_value_t = 100)]
        limit: usize,
        /// Print one JSON object: the name, NumPy dtype, shape, element count and how the
        /// values were made (widened, densified), the values (numbers exactly, booleans, [re, im] for complex,
        /// "NaN"/"inf" as strings) and how many were printed.
        #[arg(long)]
        json: bool,
    },
}

// The arguments of `convert`, given to its command as one value.
#[derive(Debug, Args)]
pub(crate) struct ConvertArgs {
    #[arg(help = READS)]
    pub(crate) input: PathBuf,
    /// The output file, or a directory (ending in `/`) for a sharded checkpoint.
    pub(crate) output: PathBuf,
    /// Split a sharded output into shards of at most SIZE decoded bytes (e.g. 5GB, 5
    /// billion bytes, or 4GiB, 4 × 2^30; an object larger than that gets a shard of its
    /// own), also for single-file inputs.
    #[arg(long, value_parser = cmd::text::parse_size, value_name = "SIZE")]
    pub(crate) shard_size: Option<u64>,
    /// With an output directory that holds a sharded checkpoint already (an index
    /// `*.zt.index.json`, the shards it lists, receipts of `run`, zTensor 2 roots and
    /// shards, or files at the names this conversion writes, as running it again finds),
    /// remove those before writing anything: the old checkpoint is gone even if the new
    /// one then fails. They are named in the summary; other files are left alone. Without
    /// it such a directory is refused.
    #[arg(long)]
    pub(crate) force: bool,
    /// What to write: zt (zTensor 1.2), 0.1, 1.1, 1.2, 2 (zTensor 2: canonical form, or
    /// with --zstd every part under zt.zstd-seekable/1), safetensors or tensorbuffers.
    #[arg(long, value_parser = parse_target)]
    pub(crate) to: Option<Target>,
    /// Discard attributes the target cannot hold (TensorBuffers holds none; safetensors
    /// only text → text file metadata; zTensor 0.1 no file attributes).
    #[arg(long)]
    pub(crate) drop_attributes: bool,
    /// Leave out the objects whose names match this glob (repeatable).
    #[arg(long, value_name = "GLOB")]
    pub(crate) exclude: Vec<String>,
    /// Carry safetensors tensors of dtypes zTensor 1.x has no type for (F4, F6_E2M3, F6_E3M2,
    /// F8_E8M0) as u8 bytes, their dtype and shape kept in the object attributes
    /// `safetensors.dtype` and `safetensors.shape`; converting back to safetensors restores
    /// them. Without it they keep their types (f4_e2m1, f6_e2m3, f6_e3m2, f8_e8m0), which
    /// zTensor 2 and safetensors hold and a zTensor 1.x target refuses (or leave them out with
    /// --exclude).
    #[arg(long)]
    pub(crate) carry_unknown_dtypes: bool,
    #[command(flatten)]
    pub(crate) encoding: Encoding,
    #[command(flatten)]
    pub(crate) run: Run,
}

// The arguments of `plan`, given to its command as one value.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// The input file (or sharded checkpoint index).
    pub(crate) input: PathBuf,
    /// The output directory.
    pub(crate) output: PathBuf,
    /// Where to write the plan.
    #[arg(short = 'o', long = "plan", value_name = "PLAN")]
    pub(crate) plan: PathBuf,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// The version to write.
    #[arg(long, value_parser = parse_version_arg, default_value = "1.2")]
    pub(crate) to: Version,
    /// Shards of at most SIZE decoded bytes instead of one per input shard (e.g. 5GB, 5
    /// billion bytes, or 4GiB, 4 × 2^30).
    #[arg(long, value_parser = cmd::text::parse_size, value_name = "SIZE")]
    pub(crate) shard_size: Option<u64>,
    /// Discard attributes the target cannot hold.
    #[arg(long)]
    pub(crate) drop_attributes: bool,
    /// Leave out the objects whose names match this glob (repeatable).
    #[arg(long, value_name = "GLOB")]
    pub(crate) exclude: Vec<String>,
    /// Carry safetensors tensors of dtypes zTensor lacks as bytes (see `convert`).
    #[arg(long)]
    pub(crate) carry_unknown_dtypes: bool,
    #[command(flatten)]
    pub(crate) encoding: Encoding,
}

// The arguments of `repack`, given to its command as one value.
#[derive(Debug, Args)]
pub(crate) struct RepackArgs {
    /// The zTensor file to read, any version (`-` reads standard input); other formats
    /// go through `convert`.
    pub(crate) input: PathBuf,
    /// The output file.
    pub(crate) output: PathBuf,
    /// The version to write.
    #[arg(long, value_parser = parse_version_arg, default_value = "1.2")]
    pub(crate) to: Version,
    #[command(flatten)]
    pub(crate) encoding: Encoding,
    #[command(flatten)]
    pub(crate) run: Run,
    /// zstd frame size for large components, from 4KiB to 1GiB (fixed, so output never
    /// depends on the thread count).
    #[arg(long, value_parser = cmd::text::parse_chunk, default_value = "4MiB")]
    pub(crate) chunk: u64,
    /// Leave out the file attributes and every object's attributes (zTensor 0.1 has no
    /// file attributes).
    #[arg(long)]
    pub(crate) drop_attributes: bool,
}

// The arguments of `append`, given to its command as one value.
#[derive(Debug, Args)]
pub(crate) struct AppendArgs {
    /// The zTensor 1.x file to add to.
    pub(crate) target: PathBuf,
    #[arg(long, help = READS)]
    pub(crate) from: PathBuf,
    #[command(flatten)]
    pub(crate) encoding: Encoding,
    #[command(flatten)]
    pub(crate) run: Run,
}

// The arguments of `remove`, given to its command as one value.
#[derive(Debug, Args)]
pub(crate) struct RemoveArgs {
    /// The zTensor file to copy from (`-` reads standard input).
    pub(crate) file: PathBuf,
    /// The objects to leave out.
    #[arg(required = true)]
    pub(crate) names: Vec<String>,
    /// The file to write.
    #[arg(short, long)]
    pub(crate) output: PathBuf,
    /// Fail at once, instead of waiting, when another process is writing OUT.
    #[arg(long)]
    pub(crate) no_wait: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Output encoding flags shared by the writing commands.
#[derive(Debug, Args)]
pub(crate) struct Encoding {
    /// Compress every component with zstd at this level (1-22); the default keeps each
    /// object's encoding (raw for foreign inputs).
    #[arg(long, value_name = "LEVEL", conflicts_with = "raw", value_parser = clap::value_parser!(i32).range(1..=22))]
    pub(crate) zstd: Option<i32>,
    /// Store every component uncompressed.
    #[arg(long)]
    pub(crate) raw: bool,
    /// With --zstd, compress every component even where zstd makes it larger. Without it, a
    /// component that fits one zstd frame and that zstd does not make smaller (a small or
    /// incompressible tensor) is stored raw, and the summary says how many were.
    #[arg(long, requires = "zstd")]
    pub(crate) zstd_always: bool,
    /// Digest every component with this algorithm (`none` drops digests; default: keep).
    #[arg(long, value_enum)]
    pub(crate) digest: Option<DigestArg>,
}

impl Cli {
    /// The command's `--memory`, when it has one and it was given.
    pub(crate) fn memory(&self) -> Option<u64> {
        match &self.command {
            Command::Convert(a) => a.run.memory,
            Command::RunUnit { run, .. } => run.memory,
            Command::Repack(a) => a.run.memory,
            Command::Append(a) => a.run.memory,
            _ => None,
        }
    }
}

/// Parallelism and progress flags shared by the long-running commands.
#[derive(Debug, Args)]
pub(crate) struct Run {
    /// Worker threads (0, the default: one per core).
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub(crate) threads: usize,
    /// Most bytes held in flight, e.g. 512MiB or 2GB (default: 64 MiB per thread, at most
    /// 512 MiB; at least 8 MiB). An output to object storage holds a quarter of it in parts
    /// being uploaded (at least one 8 MiB part; 64 MiB without --memory), and an input there
    /// a quarter in ranges fetched ahead of the reads (64 MiB at most).
    #[arg(long, value_parser = cmd::text::parse_size)]
    pub(crate) memory: Option<u64>,
    /// No progress bar and no summary line (errors are still reported).
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Print the summary as JSON (one object: what was written, its objects and sizes in
    /// bytes, the seconds taken, notes) instead of a line; no progress bar.
    #[arg(long)]
    pub(crate) json: bool,
    /// Fail at once, instead of waiting, when another process is writing the output.
    #[arg(long)]
    pub(crate) no_wait: bool,
}

impl Run {
    /// Refuses a `--memory` smaller than one piece of `piece` bytes needs in flight (it would
    /// not bound anything: the engine admits one piece whatever the budget).
    pub(crate) fn check_memory(&self, piece: u64) -> Result<()> {
        let least = ztensor_par::ParOptions::least_budget(piece);
        match self.memory {
            // In binary units, which the budget is a multiple of (`8MiB`).
            Some(memory) if memory < least => bail!(
                "--memory of {memory} bytes is less than one piece needs in flight ({} MiB: a \
                 {} MiB piece and its encoded output); give at least --memory {}MiB",
                least >> 20,
                least >> 21,
                least.div_ceil(1 << 20)
            ),
            _ => Ok(()),
        }
    }

    pub(crate) fn par(&self) -> ztensor_par::ParOptions {
        ztensor_par::ParOptions {
            threads: threads(self.threads),
            memory_budget: self.memory.unwrap_or(0),
        }
    }
}

/// `--threads`, capped at four per core: more only adds memory and switching, and a mistyped
/// count (100000) would exhaust the machine.
pub(crate) fn threads(requested: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let cap = cores.saturating_mul(4);
    if requested > cap {
        eprintln!("ztensor: --threads {requested} is more than 4 per core here; using {cap}");
        cap
    } else {
        requested
    }
}

impl Encoding {
    /// `--zstd LEVEL` / `--raw` / neither (keep each object's encoding).
    pub(crate) fn compression(&self) -> Option<ztensor_io::Compression> {
        match (self.zstd, self.raw) {
            (Some(level), _) => Some(ztensor_io::Compression::Zstd(level)),
            (None, true) => Some(ztensor_io::Compression::Raw),
            (None, false) => None,
        }
    }

    /// `--digest ALG|none` / absent (keep each component's digest).
    pub(crate) fn digest(&self) -> DigestChoice {
        match self.digest {
            None => DigestChoice::Keep,
            Some(DigestArg::None) => DigestChoice::Drop,
            Some(DigestArg::Crc32c) => DigestChoice::Set(DigestAlgorithm::Crc32c),
            Some(DigestArg::Sha256) => DigestChoice::Set(DigestAlgorithm::Sha256),
            Some(DigestArg::Blake3) => DigestChoice::Set(DigestAlgorithm::Blake3),
        }
    }

    pub(crate) fn copy(&self) -> ztensor_io::CopyOptions {
        ztensor_io::CopyOptions {
            compression: self.compression(),
            digest: self.digest(),
            raw_if_not_smaller: !self.zstd_always,
            ..Default::default()
        }
    }

    /// Write options for content that arrives without an encoding (foreign formats).
    pub(crate) fn fresh(&self) -> ztensor_io::WriteOptions {
        let digest = match self.digest() {
            DigestChoice::Set(a) => Some(a),
            _ => None,
        };
        ztensor_io::WriteOptions {
            compression: self.compression().unwrap_or_default(),
            digest,
            raw_if_not_smaller: !self.zstd_always,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum IdArg {
    Sha256,
    Xxh3,
}

impl From<IdArg> for ztensor_v2::IdAlgorithm {
    fn from(arg: IdArg) -> ztensor_v2::IdAlgorithm {
        match arg {
            IdArg::Sha256 => ztensor_v2::IdAlgorithm::Sha256,
            IdArg::Xxh3 => ztensor_v2::IdAlgorithm::Xxh3,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum DigestArg {
    None,
    Crc32c,
    Sha256,
    Blake3,
}

pub(crate) fn parse_version_arg(s: &str) -> Result<Version, String> {
    Version::from_short(s)
        .ok_or_else(|| format!("unknown version {s:?} (expected 0.1, 1.1 or 1.2)"))
}

pub(crate) fn parse_target(s: &str) -> Result<Target, String> {
    Target::from_name(s).map_err(|e| e.to_string())
}
