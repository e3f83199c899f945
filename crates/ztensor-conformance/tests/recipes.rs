//! The CI recipes for other implementers (`examples/ci/`) run as written, with this project's
//! own reader in the place of theirs: every `ztensor-conformance` command in them exits 0 and
//! leaves the reports the recipe keeps.

use std::path::PathBuf;
use std::process::Command;

/// The `ztensor-conformance run` and `fuzz` commands of a recipe, continuation lines joined,
/// YAML list markers dropped.
fn commands(recipe: &str) -> Vec<String> {
    let mut joined = Vec::new();
    let mut pending = String::new();
    for line in recipe.lines() {
        let line = line.trim();
        let line = line.strip_prefix("- ").unwrap_or(line);
        let line = line.strip_prefix("run: ").unwrap_or(line);
        match line.strip_suffix('\\') {
            Some(start) => pending.push_str(start),
            None => {
                pending.push_str(line);
                joined.push(std::mem::take(&mut pending));
            }
        }
    }
    joined
        .into_iter()
        .filter(|l| {
            l.starts_with("ztensor-conformance run ") || l.starts_with("ztensor-conformance fuzz ")
        })
        .collect()
}

#[test]
fn the_ci_recipes_run_as_written() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_ztensor-conformance"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for recipe in ["github-actions.yml", "gitlab-ci.yml"] {
        let text = std::fs::read_to_string(root.join("examples/ci").join(recipe)).unwrap();
        let commands = commands(&text);
        assert_eq!(commands.len(), 2, "{recipe}: {commands:?}");
        let dir = tempfile::tempdir().unwrap();
        for command in &commands {
            // Two seconds of fuzzing where the recipe gives two minutes.
            if command.starts_with("ztensor-conformance fuzz ") {
                assert!(command.contains("--seconds 120"), "{recipe}: {command}");
            }
            let command = command.replace("--seconds 120", "--seconds 2");
            let out = Command::new("bash")
                .args(["-euc", &command])
                .env("PATH", &path)
                .env("READER", format!("{} dump", bin.display()))
                .env("GITHUB_RUN_NUMBER", "7")
                .env("CI_PIPELINE_IID", "7")
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{recipe}: `{command}` exited {}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for report in ["conformance.xml", "fuzz.xml"] {
            let xml = std::fs::read_to_string(dir.path().join(report)).unwrap();
            assert!(xml.contains("<testsuite") && !xml.contains("<failure"), "{recipe} {report}");
        }
    }
}
