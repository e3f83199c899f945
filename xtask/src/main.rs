//! `cargo xtask <task>`: the one entry point for people and CI.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

mod fuzz;
mod hostile;
mod oracle;

use fuzz::fuzz_smoke;

const TASKS: &[(&str, &str)] = &[
    (
        "ci",
        "everything CI runs, in its order: fmt, clippy, features, msrv, package, test, doc, \
         fixtures --check, \
         the conformance run of our reader, conformance-matrix --check, the reference adapters' \
         in-process check, 45 s of differential fuzzing (20 s on zTensor 2), fuzz-smoke 10 \
         (.ci/run installs what it needs, then runs this)",
    ),
    ("fmt", "cargo fmt --all --check"),
    ("clippy", "cargo clippy --workspace --all-targets -D warnings"),
    (
        "features",
        "cargo check of each crate with features, with none and with each feature alone, \
         and the tests of ztensor-io without its codecs and the registry without zip readers",
    ),
    (
        "test",
        "the whole test suite: cargo test --workspace, then the Python package built into \
         target/py-venv and its pytest suite",
    ),
    ("test-python", "only the Python part of `test`"),
    ("doc", "build the docs with warnings as errors"),
    (
        "man [DIR]",
        "build the CLI and write its manual pages (ztensor.1, ztensor-COMMAND.1) into DIR \
         (default: ~/.local/share/man/man1, where `man ztensor` finds them)",
    ),
    (
        "bench [NAME]",
        "the benchmark suite against safetensors and the machine's ceilings (table + \
         target/bench/report.json; ZT_BENCH_BYTES, ZT_BENCH_RUNS, ZT_BENCH_SMALL, ZT_BENCH_ONLY), \
         or one bench of benches/ by name (remote: object storage against local S3 servers, \
         moto and s3s-fs, ours vs boto3, requests and bytes per command; torch: \
         ztensor_rs.torch against safetensors.torch and PyTorch's DCP tools, arguments passed \
         on (--mib 1024 --runs 3); scaling: per-role CPU of repack/convert runs, serial \
         share, projected and measured speed-up; target/bench/scaling.json; with --simulate, the \
         engine at 1..256 simulated workers)",
    ),
    (
        "fuzz-smoke [SECONDS] [TARGET...]",
        "run every fuzz target (or those named) over its kept corpus (fuzz/corpus/), its \
         regressions and seeds from the fixtures, then for SECONDS each, with a 1 GiB malloc \
         limit (CI: 10 s each)",
    ),
    (
        "fuzz-campaign [--minutes M | --hours H] [--jobs J] [TARGET...]",
        "fuzz every target (or those named) for M minutes each (default 10) in J forked jobs \
         (default: the cores), merge what it found into the kept corpus, minimised \
         (fuzz/corpus/TARGET), and append a line per target to fuzz/CAMPAIGN.md: date, commit, \
         runs, runs a second, coverage, corpus size, findings",
    ),
    ("fixtures [--check]", "regenerate fixtures/examples, or check the committed files"),
    (
        "conformance-matrix [--check]",
        "grade every known implementation (ours, and the reference 0.1.0, 1.1.1 and 1.2.3 through \
         xtask/reference-adapter, built from crates.io) as reader and writer; write \
         crates/ztensor-conformance/MATRIX.md and matrix.json. --check grades ours only and fails \
         when its committed cells are stale",
    ),
    (
        "fuzz-references [SECONDS]",
        "fuzz each reference adapter (0.1.0, 1.1.1, 1.2.3) with `ztensor-conformance fuzz` for \
         SECONDS (default 120) on the versions it reads, from seed 0; keep the reduced findings \
         under crates/ztensor-conformance/findings/ and write them into MATRIX.md",
    ),
    (
        "freeze-producers",
        "add to fixtures/producers/ the reference writers' files for every recipe they can write \
         (and 1.2.3's append), with golden dumps and SHA-256; files already frozen are never \
         written again",
    ),
    (
        "v2-oracle [--freeze]",
        "grade the zTensor 2 writer and reader against the reference 2.1.1 \
         (xtask/reference-adapter/v2): every valid fixture converted, read, checked canonical, \
         identified and rewritten by the reference; write crates/ztensor-v2/ORACLE.md. --freeze \
         also writes the reference's files for a few fixtures to fixtures/producers/v2/",
    ),
    (
        "hostile-measure [DIR] [--bin PATH] [--corpus]",
        "generate the large hostile cases in DIR (or take fixtures/hostile with --corpus) and \
         print peak RSS and wall time per command",
    ),
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        print_help();
        return Ok(());
    };
    match task.as_str() {
        "ci" => ci(),
        "fixtures" => fixtures(args.iter().any(|a| a == "--check")),
        "conformance-matrix" => conformance_matrix(args.iter().any(|a| a == "--check")),
        "freeze-producers" => freeze_producers(),
        "fuzz-references" => {
            fuzz_references(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(120.0))
        }
        "v2-oracle" => oracle::v2_oracle(&project_root(), args.iter().any(|a| a == "--freeze")),
        "bench" => {
            // The suite's repack row runs the release binary as a user would.
            cargo(&["build", "--release", "-p", "ztensor-cli"], &[])?;
            let name = args.get(1).map_or("suite", String::as_str);
            if name == "remote" {
                // Object storage against a local S3 server: the CLI as a user runs it, boto3
                // as the peer, both from the test venv (`cargo xtask test` makes it).
                let python = project_root().join("target/py-venv/bin/python");
                // A second server that is not itself the bound (moto is one Python process):
                // s3s-fs, an S3 server in Rust from crates.io, installed under target/ once.
                let s3s = project_root().join("target/s3s");
                if !s3s.join("bin/s3s-fs").exists() {
                    let root = s3s.display().to_string();
                    let install = ["install", "s3s-fs@0.14.1", "--features", "binary", "--root"];
                    cargo(&[&install[..], &[root.as_str()]].concat(), &[])?;
                }
                let mut command = Command::new(&python);
                command.arg(project_root().join("benches/remote.py")).current_dir(project_root());
                return run(&mut command, "benches/remote.py");
            }
            if name == "torch" {
                // ztensor_rs.torch against PyTorch's own tools: the extension built in release
                // into the test venv (`cargo xtask test` makes it; a later `test` builds it
                // back in debug), then the bench script, which prints its table.
                let python = project_root().join("target/py-venv/bin/python");
                let manifest = project_root().join("crates/ztensor-py/Cargo.toml");
                let mut build = Command::new(&python);
                build
                    .args(["-m", "maturin", "develop", "-q", "--release", "--manifest-path"])
                    .arg(&manifest)
                    .env("VIRTUAL_ENV", project_root().join("target/py-venv"))
                    .current_dir(project_root());
                run(&mut build, "building the Python extension in release (maturin develop)")?;
                let mut command = Command::new(&python);
                command
                    .arg(project_root().join("crates/ztensor-py/bench/torch_bench.py"))
                    .args(&args[2..])
                    .current_dir(project_root());
                return run(&mut command, "crates/ztensor-py/bench/torch_bench.py");
            }
            if name == "difffuzz" {
                // The implementation it fuzzes: our own dump, as a user would run it.
                cargo(&["build", "--release", "-p", "ztensor-conformance"], &[])?;
            }
            // What follows the name goes to the bench (`bench scaling --simulate`).
            let mut command = vec!["bench", "-p", "ztensor-benches", "--bench", name, "--"];
            command.extend(args.iter().skip(2).map(String::as_str));
            cargo(&command, &[])
        }
        "fuzz-campaign" => fuzz::campaign(&args[1..]),
        "fuzz-smoke" => fuzz_smoke(
            args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30),
            args.get(2..).unwrap_or_default(),
        ),
        "hostile-measure" => hostile::hostile_measure(&args[1..]),
        "fmt" => fmt(),
        "clippy" => clippy(),
        "features" => features(),
        "man" => man(args.get(1).map(PathBuf::from)),
        "msrv" => msrv(),
        "deps" => deps(),
        "package" => package(args.iter().any(|a| a == "--verify")),
        "test" => test(),
        "test-python" => python_test(),
        "doc" => doc(),
        "help" | "--help" | "-h" => {
            print_help();
            Ok(())
        }
        other => {
            print_help();
            bail!("unknown task {other:?}")
        }
    }
}

fn print_help() {
    eprintln!("usage: cargo xtask <task>\n\ntasks:");
    for (name, what) in TASKS {
        eprintln!("  {name:<20} {what}");
    }
}

pub(crate) fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().map(PathBuf::from).unwrap_or_default()
}

pub(crate) fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(project_root())
        .status()
        .with_context(|| format!("running {cargo}"))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Everything CI runs, each step named as it starts with the seconds since the run began (so a
/// run's log says where its time went): the one definition `.ci/run` calls.
fn ci() -> Result<()> {
    let started = std::time::Instant::now();
    let step = |name: &str| eprintln!("== {name} (at {} s)", started.elapsed().as_secs());
    step("format");
    fmt()?;
    step("clippy");
    cargo(&["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"], &[])?;
    step("features");
    features()?;
    // The MSRV build has a target directory of its own (another compiler's artifacts), kept
    // for the next run while the disk has room.
    step("msrv");
    msrv()?;
    keep_while_room("target/msrv")?;
    step("package");
    package(false)?;
    step("test");
    test()?;
    step("doc");
    cargo(&["doc", "--workspace", "--no-deps", "--locked"], &[("RUSTDOCFLAGS", "-D warnings")])?;
    step("fixtures");
    fixtures(true)?;
    step("conformance");
    // Our reader, graded on the whole corpus as any implementation is.
    cargo(&["build", "-q", "--locked", "-p", "ztensor-cli"], &[])?;
    let junit = project_root().join("target/conformance-junit.xml");
    let mut command = Command::new(conformance_binary()?);
    command
        .args(["run", "--impl", "target/debug/ztensor dump --json", "--junit"])
        .arg(&junit)
        .current_dir(project_root());
    run(&mut command, "ztensor-conformance run")?;
    step("conformance matrix");
    conformance_matrix(true)?;
    step("reference adapters, in process");
    // Their `--fuzz-in-process` mode links this workspace's conformance crate: checked here, so
    // a change to the crate that breaks them is told (one target directory for the three).
    for (_, dir, _) in REFERENCES {
        let manifest = project_root().join(dir).join("Cargo.toml");
        cargo(
            &[
                "check",
                "-q",
                "--features",
                "in-process",
                "--manifest-path",
                manifest.to_str().context("path")?,
            ],
            &[("CARGO_TARGET_DIR", "target/adapter-check")],
        )?;
    }
    keep_while_room("target/adapter-check")?;
    step("differential fuzzing");
    // Our reader against itself through the persistent protocol for 30 s: any divergence
    // (a crash, a hang, a verdict or dump that changes between runs) fails CI. The seed moves
    // with the day, so each day's CI covers other cases; a finding names its seed.
    let day = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let binary = conformance_binary()?;
    let mut command = Command::new(&binary);
    command
        .args(["fuzz", "--impl"])
        .arg(format!("{binary} dump"))
        .args(["--seconds", "30", "--seed", &(day << 20).to_string()])
        .arg("--junit")
        .arg(project_root().join("target/difffuzz-junit.xml"))
        .current_dir(project_root());
    run(&mut command, "ztensor-conformance fuzz")?;
    // The same for zTensor 2, for 15 s.
    let mut command = Command::new(&binary);
    command
        .args(["fuzz", "--version", "2", "--impl"])
        .arg(format!("{binary} dump"))
        .args(["--seconds", "15", "--seed", &((day << 20) + 1).to_string()])
        .arg("--junit")
        .arg(project_root().join("target/difffuzz-2-junit.xml"))
        .current_dir(project_root());
    run(&mut command, "ztensor-conformance fuzz --version 2")?;
    step("fuzz smoke");
    fuzz_smoke(5, &[])?;
    eprintln!("== ok (in {} s)", started.elapsed().as_secs());
    Ok(())
}

/// The free space a side target directory is kept under: below it, CI machines' linkers have
/// died of a full disk.
const ROOM: u64 = 12 << 30;

/// Keeps one of the side target directories under the project root for the next run when the
/// disk it is on has [`ROOM`] left; removes it otherwise.
fn keep_while_room(relative: &str) -> Result<()> {
    let dir = project_root().join(relative);
    match free_space(&dir) {
        Some(free) if free >= ROOM => {
            eprintln!("keeping {relative}: {} GiB free", free >> 30);
            Ok(())
        }
        _ => remove_target_dir(relative),
    }
}

/// The bytes free on the file system holding `path` (`df -Pk`), or `None` when not told.
fn free_space(path: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    let available: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    available.checked_mul(1024)
}

/// Removes one of the side target directories under the project root, if it is there.
fn remove_target_dir(relative: &str) -> Result<()> {
    let dir = project_root().join(relative);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

fn fmt() -> Result<()> {
    cargo(&["fmt", "--all", "--check"], &[])
}

/// The crates whose formats are features, and those features.
const FEATURES: &[(&str, &[&str])] = &[
    ("ztensor-source", &["blake3", "mmap"]),
    ("ztensor-io", &["zstd", "blake3", "mmap"]),
    ("ztensor-foreign", &["safetensors", "numpy", "gguf", "torch"]),
    (
        "ztensor-registry",
        &[
            "safetensors",
            "numpy",
            "gguf",
            "torch",
            "tensorbuffers",
            "sharded",
            "v2",
            "write",
            "remote",
        ],
    ),
];

/// Each crate with features builds, clippy-clean (warnings as errors), with none of them and
/// with each alone. In the main target directory: clippy's lints go to the workspace's crates
/// alone, so the dependencies the `clippy` step checked are reused rather than built again.
fn features() -> Result<()> {
    for (krate, features) in FEATURES {
        let mut sets: Vec<Option<&str>> = vec![None];
        sets.extend(features.iter().copied().map(Some));
        for feature in sets {
            let mut args = vec!["clippy", "-q", "--locked", "-p", krate, "--no-default-features"];
            if let Some(feature) = feature {
                args.extend(["--features", feature]);
            }
            args.extend(["--", "-D", "warnings"]);
            cargo(&args, &[])?;
        }
    }
    // What a build without its optional parts does with content that needs them: ztensor-io
    // without its codecs, the registry without the zip formats' readers.
    for krate in ["ztensor-io", "ztensor-registry"] {
        let args = [
            "test",
            "-q",
            "--locked",
            "-p",
            krate,
            "--no-default-features",
            "--lib",
            "without_features",
        ];
        cargo(&args, &[])?;
    }
    Ok(())
}

/// Checks the workspace with the toolchain of the declared minimum Rust version. Where rustup
/// cannot install it (no network to its distribution server), says the version is unverified
/// rather than passing.
fn msrv() -> Result<()> {
    let manifest = std::fs::read_to_string(project_root().join("Cargo.toml"))?;
    let version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .context("no rust-version in the workspace manifest")?;
    // Bounded: a network that drops rustup's requests must not stall CI.
    let installed = Command::new("timeout")
        .args(["300", "rustup", "toolchain", "install", version])
        .args(["--profile", "minimal", "--no-self-update"])
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!("MSRV {version} UNVERIFIED: rustup could not install that toolchain here");
        return Ok(());
    }
    let dir = project_root().join("target/msrv");
    let mut command = Command::new("rustup");
    command
        .args(["run", version, "cargo", "check", "-q", "--workspace", "--locked"])
        .env("CARGO_TARGET_DIR", dir)
        // The toolchain's own cargo and rustc, not those of the cargo running xtask.
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .current_dir(project_root());
    run(&mut command, &format!("cargo check with Rust {version}"))?;
    eprintln!("MSRV {version} verified: the workspace builds with it");
    Ok(())
}

/// Prints how many distinct crates each publishable crate depends on (its normal dependency
/// tree), with every feature on, and for each crate with features, with none and each alone.
fn deps() -> Result<()> {
    let count = |args: &[&str]| -> Result<usize> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(&cargo)
            .args(["tree", "-q", "-e", "normal", "--prefix", "none"])
            .args(args)
            .current_dir(project_root())
            .output()
            .context("running cargo tree")?;
        if !out.status.success() {
            bail!("cargo tree {} failed", args.join(" "));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let crates: std::collections::BTreeSet<&str> =
            text.lines().map(|l| l.trim_end_matches(" (*)")).collect();
        Ok(crates.len().saturating_sub(1))
    };
    let publishable = [
        "ztensor-conformance",
        "ztensor-format",
        "ztensor-source",
        "ztensor-io",
        "ztensor-par",
        "ztensor-tensorbuffers",
        "ztensor-foreign",
        "ztensor-shard",
        "ztensor-shard-write",
        "ztensor-registry",
        "ztensor-v2",
        "ztensor-dump",
        "ztensor-cli",
    ];
    for krate in publishable {
        println!("{krate}: {}", count(&["-p", krate])?);
    }
    for (krate, features) in FEATURES {
        println!(
            "{krate} --no-default-features: {}",
            count(&["-p", krate, "--no-default-features"])?
        );
        for feature in *features {
            let n = count(&["-p", krate, "--no-default-features", "--features", feature])?;
            println!("{krate} --features {feature}: {n}");
        }
    }
    Ok(())
}

/// The workspace members that are not published (tools, test support, benchmarks, and the
/// Python extension module, which maturin builds and publishes).
const UNPUBLISHED: &[&str] =
    &["xtask", "xtask-gen", "ztensor-testkit", "ztensor-benches", "ztensor-py"];

/// `cargo package` of every publishable crate, in dependency order (unpublished workspace
/// crates resolved locally); `verify` also builds each from its archive.
fn package(verify: bool) -> Result<()> {
    let mut args = vec!["package", "--workspace", "--locked", "--allow-dirty"];
    for krate in UNPUBLISHED {
        args.extend(["--exclude", krate]);
    }
    if !verify {
        args.push("--no-verify");
    }
    cargo(&args, &[])
}

/// Builds the CLI and has it write its manual pages into `dir` (default
/// `~/.local/share/man/man1`, on `man`'s path for the user).
fn man(dir: Option<PathBuf>) -> Result<()> {
    let dir = match dir {
        Some(dir) => dir,
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set: name a directory")?;
            PathBuf::from(home).join(".local/share/man/man1")
        }
    };
    cargo(&["build", "-q", "--locked", "-p", "ztensor-cli"], &[])?;
    let binary = project_root().join("target/debug/ztensor");
    run(Command::new(binary).arg("manual").arg(&dir), "ztensor manual")?;
    eprintln!("manual pages written to {} (`man ztensor`, `man ztensor-convert`)", dir.display());
    Ok(())
}

fn clippy() -> Result<()> {
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"], &[])
}

/// The Rust tests, with moto's S3 server (installed into `target/py-venv` with the Python test
/// requirements) required: the object-storage tests fail rather than skip without it.
fn test() -> Result<()> {
    let venv = python_venv()?;
    let moto = venv.join("bin/moto_server");
    let moto = moto.to_str().context("a venv path that is UTF-8")?;
    cargo(
        &["test", "--workspace"],
        &[("ZTENSOR_MOTO_SERVER", moto), ("ZTENSOR_REQUIRE_MOTO", "1")],
    )?;
    python_test()
}

/// `target/py-venv`, made on first use, with `crates/ztensor-py/requirements-test.txt`
/// installed. `PYTHON` names the interpreter to make it with (default `python3`).
fn python_venv() -> Result<PathBuf> {
    let root = project_root();
    let venv = root.join("target/py-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run(Command::new(&base).args(["-m", "venv"]).arg(&venv), "making target/py-venv")?;
    }
    let requirements = root.join("crates/ztensor-py/requirements-test.txt");
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(&requirements),
        "installing the Python test requirements",
    )?;
    Ok(venv)
}

/// Builds the Python package (`crates/ztensor-py`) into the virtual environment of
/// [`python_venv`] and runs its pytest suite.
fn python_test() -> Result<()> {
    let root = project_root();
    let venv = python_venv()?;
    let python = venv.join("bin/python");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv.join("bin")];
    paths.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(paths).context("PATH")?;
    run(
        Command::new(&python)
            .args(["-m", "maturin", "develop", "-q", "--manifest-path"])
            .arg(root.join("crates/ztensor-py/Cargo.toml"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path),
        "building the Python extension (maturin develop)",
    )?;
    let azurite = azurite()?;
    run(
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(root.join("crates/ztensor-py/tests"))
            .current_dir(&root)
            .env("ZTENSOR_AZURITE", &azurite)
            .env("ZTENSOR_REQUIRE_AZURITE", "1")
            // moto, Ray and the Kubernetes schema are test requirements: their tests fail
            // rather than skip without them.
            .env("ZTENSOR_REQUIRE_MOTO", "1"),
        "the Python tests",
    )
}

/// Azurite's blob server (Microsoft's Azure Storage emulator, from the npm registry), installed
/// into `target/azurite` on first use: the Azure tests run against it, and fail without it.
fn azurite() -> Result<PathBuf> {
    let prefix = project_root().join("target/azurite");
    let server = prefix.join("node_modules/.bin/azurite-blob");
    if !server.exists() {
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
                .arg(&prefix)
                .arg("azurite@3"),
            "installing Azurite (npm install azurite) for the Azure tests",
        )?;
    }
    Ok(server)
}

/// Runs `command`, failing with `what` when it does not succeed.
fn run(command: &mut Command, what: &str) -> Result<()> {
    eprintln!("$ {what}");
    let status = command.status().with_context(|| format!("{what}: cannot start"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

fn doc() -> Result<()> {
    cargo(&["doc", "--workspace", "--no-deps"], &[("RUSTDOCFLAGS", "-D warnings")])
}

/// Writes every generated fixture, or with `check` compares them to the committed files: the
/// generator is its own package (`xtask/gen`), so the light tasks build nothing of the workspace.
fn fixtures(check: bool) -> Result<()> {
    let mut args = vec!["run", "-q", "-p", "xtask-gen", "--", "fixtures"];
    if check {
        args.push("--check");
    }
    cargo(&args, &[])
}

/// Fuzzes each reference adapter through the persistent protocol on the versions it reads
/// and writes the reduced findings into the matrix.
fn fuzz_references(seconds: f64) -> Result<()> {
    let binary = conformance_binary()?;
    let crate_dir = project_root().join("crates/ztensor-conformance");
    let mut adapters = reference_adapters()?;
    adapters.push(("2.1.1".to_owned(), oracle::v2_adapter(&project_root())?));
    for (version, adapter) in adapters {
        let reads: &[&str] = match version.as_str() {
            "0.1.0" => &["0.1"],
            "1.1.1" => &["1.1"],
            "2.1.1" => &["2"],
            _ => &["0.1", "1.1", "1.2"],
        };
        // Paths from the project's root, so the committed findings name no machine's.
        let root = project_root();
        let adapter = Path::new(&adapter)
            .strip_prefix(&root)
            .map_or_else(|_| adapter.clone(), |p| p.display().to_string());
        let out = format!("crates/ztensor-conformance/findings/reference-{version}");
        let mut command = Command::new(&binary);
        command
            .args([
                "fuzz",
                "--impl",
                &adapter,
                "--seed",
                "0",
                "--force",
                "--minimize-seconds",
                "20",
            ])
            .args(["--seconds", &seconds.to_string(), "--out", &out])
            .current_dir(&root);
        for v in reads {
            command.args(["--version", v]);
        }
        if version == "2.1.1" {
            // Its adapter reads one file per process (no `--serve`).
            command.arg("--process-per-file");
        }
        eprintln!("$ ztensor-conformance fuzz --impl {adapter} ({seconds} s)");
        // 1 is "something diverged": the findings are what this task is for.
        let status = command.status().context("ztensor-conformance fuzz")?;
        if !matches!(status.code(), Some(0 | 1)) {
            bail!("fuzzing reference {version} failed ({status})");
        }
    }
    let mut command = Command::new(&binary);
    command.args(["matrix"]).arg(&crate_dir).arg("--findings");
    run(&mut command, "ztensor-conformance matrix --findings")
}

/// The reference adapters: (version, adapter directory, binary name).
const REFERENCES: &[(&str, &str, &str)] = &[
    ("0.1.0", "xtask/reference-adapter/v0", "reference-dump-v0"),
    ("1.1.1", "xtask/reference-adapter/v11", "reference-dump-v11"),
    ("1.2.3", "xtask/reference-adapter/v1", "reference-dump-v1"),
];

/// Builds the reference adapters (separate Cargo projects; crates.io `ztensor` at each
/// version) and returns (version, binary path).
fn reference_adapters() -> Result<Vec<(String, String)>> {
    let root = project_root();
    let mut built = Vec::new();
    for (version, dir, bin) in REFERENCES {
        let manifest = root.join(dir).join("Cargo.toml");
        cargo(
            &["build", "-q", "--release", "--manifest-path", manifest.to_str().context("path")?],
            &[],
        )?;
        let path = root.join(dir).join("target/release").join(bin);
        built.push(((*version).to_owned(), path.to_str().context("path")?.to_owned()));
    }
    Ok(built)
}

/// The conformance binary, built.
fn conformance_binary() -> Result<String> {
    cargo(&["build", "-q", "-p", "ztensor-conformance"], &[])?;
    let path = project_root().join("target/debug/ztensor-conformance");
    Ok(path.to_str().context("path")?.to_owned())
}

fn conformance_matrix(check: bool) -> Result<()> {
    let binary = conformance_binary()?;
    let out = project_root().join("crates/ztensor-conformance");
    let mut command = Command::new(&binary);
    command.arg("matrix").arg(&out);
    if check {
        command.arg("--check");
    } else {
        for (version, path) in reference_adapters()? {
            command.arg("--reference").arg(format!("{version}={path}"));
        }
        // The zTensor 2 reference reads its own generation only.
        let v2 = project_root().join("xtask/reference-adapter/v2");
        let manifest = v2.join("Cargo.toml");
        cargo(
            &["build", "-q", "--release", "--manifest-path", manifest.to_str().context("path")?],
            &[],
        )?;
        let path = v2.join("target/release/reference-dump-v2");
        command.arg("--reference").arg(format!("2.1.1={}", path.to_str().context("path")?));
    }
    run(&mut command, "ztensor-conformance matrix")
}

fn freeze_producers() -> Result<()> {
    let binary = conformance_binary()?;
    let mut command = Command::new(&binary);
    command.arg("freeze").arg(project_root().join("fixtures/producers"));
    for (version, path) in reference_adapters()? {
        command
            .arg("--producer")
            .arg(format!("reference-{version}=ztensor {version} (crates.io)={path}"));
    }
    run(&mut command, "ztensor-conformance freeze")
}
