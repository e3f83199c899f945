//! `cargo xtask hostile-measure`: peak memory and time of the CLI on the large hostile cases.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::{cargo, project_root};

/// Runs the release CLI (or `--bin PATH`, e.g. an older build) on each large hostile case under
/// `/usr/bin/time` and prints a Markdown table of peak RSS and wall time per command.
pub(crate) fn hostile_measure(args: &[String]) -> Result<()> {
    let mut dir = project_root().join("target/hostile-large");
    let mut bin = None;
    let mut corpus = false;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--bin" => bin = Some(PathBuf::from(rest.next().context("--bin needs a path")?)),
            "--corpus" => corpus = true,
            other => dir = PathBuf::from(other),
        }
    }
    let bin = match bin {
        Some(bin) => bin,
        None => {
            cargo(&["build", "--release", "-p", "ztensor-cli"], &[])?;
            project_root().join("target/release/ztensor")
        }
    };
    let large = [
        "objects-1m.zt",
        "attribute-array-20m.zt",
        "aliases-16x1g.zt",
        "csr-v0.1-1g.zt",
        "zstd-6g-v1.1.zt",
        "aliases-20k-x16m.zt",
    ]
    .into_iter()
    .chain(["tensors-1m.safetensors"])
    .map(str::to_owned);
    let names: Vec<String> = if corpus {
        // The committed corpus, measured where it lies.
        dir = project_root().join("fixtures/hostile");
        let mut names: Vec<String> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".zt"))
            .collect();
        names.sort();
        names
    } else {
        large.collect()
    };
    std::fs::create_dir_all(&dir)?;
    if !corpus && names.iter().any(|n| !dir.join(n).exists()) {
        eprintln!("generating the large hostile cases in {}", dir.display());
        let dir = dir.to_string_lossy().into_owned();
        cargo(&["run", "-q", "--release", "-p", "xtask-gen", "--", "hostile-large", &dir], &[])?;
    }
    let scratch = project_root().join("target/hostile-measure-out");
    std::fs::create_dir_all(&scratch)?;
    let out = |n: &str| scratch.join(n).to_string_lossy().into_owned();
    // The hostile-input budget: max(256 MB, 4 × the file + 128 MB) and 10 s.
    let budget_mb = |len: u64| (256.0f64).max((4 * len) as f64 / 1048576.0 + 128.0);
    println!("| file | bytes | command | status | peak RSS MB | budget MB | wall s | within |");
    println!("|---|---:|---|---:|---:|---:|---:|---|");
    for name in &names {
        let file = dir.join(name);
        let f = file.to_string_lossy().into_owned();
        let mut commands: Vec<Vec<String>> = vec![
            vec!["info".into(), f.clone()],
            vec!["ls".into(), f.clone()],
            vec!["verify".into(), f.clone()],
            vec!["convert".into(), f.clone(), out("c.zt")],
        ];
        if name.ends_with(".zt") {
            commands.push(vec!["dump".into(), "--json".into(), f.clone()]);
            commands.push(vec!["convert".into(), f.clone(), out("c.safetensors")]);
            commands.push(vec![
                "repack".into(),
                f.clone(),
                out("r.zt"),
                "--zstd".into(),
                "3".into(),
            ]);
        }
        for command in commands {
            let run = Command::new("/usr/bin/time")
                .args(["-f", "%M %e"])
                .arg(&bin)
                .args(&command)
                .stdout(std::process::Stdio::null())
                .output()
                .context("running /usr/bin/time")?;
            let stderr = String::from_utf8_lossy(&run.stderr);
            let last = stderr.lines().last().unwrap_or_default();
            let mut fields = last.split_whitespace();
            let rss_kb: f64 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
            let wall: f64 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
            let status = run.status.code().map_or("signal".to_owned(), |c| c.to_string());
            let prefix = format!("{}/", scratch.display());
            let shown = command.join(" ").replace(&f, "FILE").replace(&prefix, "");
            let len = std::fs::metadata(&file)?.len();
            let (rss_mb, budget) = (rss_kb / 1024.0, budget_mb(len));
            let within = if rss_mb <= budget && wall <= 10.0 { "yes" } else { "NO" };
            println!(
                "| {name} | {len} | {shown} | {status} | {rss_mb:.0} | {budget:.0} | {wall:.2} | \
                 {within} |"
            );
        }
    }
    std::fs::remove_dir_all(&scratch)?;
    Ok(())
}
