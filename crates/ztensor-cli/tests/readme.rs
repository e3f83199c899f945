//! README against the tool itself: the command table has a row for every subcommand and none
//! for a command that does not exist, and the `crates/ztensor-cli` row of the crate table names
//! them all (the subcommands come from `ztensor --help`, clap's list, so a new command cannot be
//! missed here); the quick start and tour print what the README shows, and the README stands
//! alone in a clone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{root, scratch, stderr, stdout, ztensor};

/// The subcommands `ztensor --help` lists, in its order (clap's own `help` left out).
pub(crate) fn commands() -> Vec<String> {
    let out = ztensor(&["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = stdout(&out);
    let listed = help
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("a Commands: section");
    let commands: Vec<String> = listed
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .map(str::to_owned)
        .collect();
    assert!(commands.len() >= 17, "{commands:?}");
    commands
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The commands README's command table has rows for: the first cell of each row after the
/// `| command | what it does |` header reads `` `ztensor NAME …` ``.
fn table(readme: &str) -> Vec<String> {
    let start = readme.find("\n| command | what it does |\n").expect("README's command table");
    readme[start + 1..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cell = row.trim_start_matches("| `ztensor ");
            assert_ne!(cell, row, "a command table row that is not a `ztensor` command: {row}");
            cell.split([' ', '`']).next().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn the_command_table_lists_every_command_and_no_other() {
    let commands = commands();
    let rows = table(&readme());
    let have: BTreeSet<&String> = commands.iter().collect();
    let listed: BTreeSet<&String> = rows.iter().collect();
    let missing: Vec<_> = have.difference(&listed).collect();
    assert!(missing.is_empty(), "README's command table has no row for {missing:?}");
    let unknown: Vec<_> = listed.difference(&have).collect();
    assert!(unknown.is_empty(), "README's command table lists {unknown:?}, not commands");
    assert_eq!(rows.len(), listed.len(), "a command with two rows: {rows:?}");
}

#[test]
fn the_cli_crate_row_names_every_command() {
    let readme = readme();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `crates/ztensor-cli` |"))
        .expect("README's row for crates/ztensor-cli");
    for command in commands() {
        assert!(
            row.contains(&format!("`{command}`")),
            "the crates/ztensor-cli row omits {command}"
        );
    }
}

/// ARCHITECTURE.md's crate graph is `cargo metadata`'s: each workspace crate's normal
/// dependencies on workspace crates, no more and no fewer (a new arrow is a change to the map).
#[test]
fn the_architecture_graph_is_the_workspace_graph() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let block = map
        .split("## Crate graph")
        .nth(1)
        .and_then(|rest| rest.split("```text\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("a text block under ## Crate graph");
    let mut drawn = std::collections::BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (from, to) = line.split_once("->").expect("`A -> B, C` lines");
        let to: BTreeSet<String> =
            to.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
        drawn.insert(from.trim().to_owned(), to);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let ours: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let short = |name: &str| name.trim_start_matches("ztensor-").to_owned();
    let mut actual = std::collections::BTreeMap::new();
    for p in packages {
        let name = p["name"].as_str().unwrap();
        // The crates the map draws: the published ones and Python's.
        if !name.starts_with("ztensor-") || name == "ztensor-testkit" {
            continue;
        }
        let deps: BTreeSet<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|d| ours.contains(d))
            .map(short)
            .collect();
        actual.insert(short(name), deps);
    }
    assert_eq!(drawn, actual, "ARCHITECTURE.md's crate graph against cargo metadata");
}

/// A line of the tool's output with what changes from run to run (seconds, the peak memory
/// measured) made constant.
fn steady(line: &str) -> String {
    let mut out = line.to_owned();
    if let Some(i) = out.find(" in ")
        && let Some(j) = out[i + 4..].find(" s").map(|j| i + 4 + j)
        && out[i + 4..j].chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        out.replace_range(i + 4..j, "T");
    }
    if let Some(i) = out.find(", peak memory ") {
        let from = i + ", peak memory ".len();
        let len = out[from..].find([',', '\n']).unwrap_or(out.len() - from);
        out.replace_range(from..from + len, "P");
    }
    out
}

#[test]
fn the_readme_quick_start_and_tour_print_what_the_readme_shows() {
    // Every `$ ` command of README.md's console blocks, in order, each block in a directory of
    // its own holding a copy of the bundled checkpoint (as the quick start and the tour make),
    // with the built `ztensor` first on PATH: each prints what the README shows under it. ZT_README_BLESS=1 writes what they
    // print into the README instead.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    // Each console block follows `cd "$(mktemp -d)" && cp -r …/checkpoint .`: a directory of
    // its own holding a copy of the bundled checkpoint.
    let fresh = |n: usize| {
        let d = scratch(&format!("readme-{n}"));
        let copy = std::process::Command::new("cp")
            .args(["-r", "fixtures/examples/checkpoint"])
            .arg(&d)
            .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .status()
            .unwrap();
        assert!(copy.success());
        d
    };
    let mut d = fresh(0);
    let bin = Path::new(env!("CARGO_BIN_EXE_ztensor")).parent().unwrap().to_owned();
    let search = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = |dir: &Path, command: &str| -> String {
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(dir)
            .env("PATH", &search)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let bless = std::env::var_os("ZT_README_BLESS").is_some();
    let mut blessed = String::new();
    let (mut in_console, mut commands, mut blocks) = (false, 0, 0);
    let mut lines = readme.lines().peekable();
    while let Some(line) = lines.next() {
        blessed.push_str(line);
        blessed.push('\n');
        if line == "```console" {
            in_console = true;
            blocks += 1;
            d = fresh(blocks);
            continue;
        }
        if !in_console {
            continue;
        }
        if line == "```" {
            in_console = false;
            continue;
        }
        let Some(command) = line.strip_prefix("$ ") else {
            panic!("console block line outside any command: {line:?}");
        };
        commands += 1;
        let mut shown = Vec::new();
        while let Some(next) = lines.peek() {
            if next.starts_with("$ ") || *next == "```" {
                break;
            }
            shown.push(lines.next().unwrap());
        }
        // A blank line between commands belongs to the block, not to the output.
        let blank_after = shown.last() == Some(&"");
        if blank_after {
            shown.pop();
        }
        let printed = run(&d, command);
        if bless {
            blessed.push_str(&printed);
            if blank_after {
                blessed.push('\n');
            }
            continue;
        }
        let want: Vec<String> = shown.iter().map(|l| steady(l)).collect();
        let got: Vec<String> = printed.lines().map(steady).collect();
        assert_eq!(got, want, "README: $ {command}");
    }
    assert!(commands >= 10, "only {commands} commands found in the README");
    if bless {
        std::fs::write(&path, blessed).unwrap();
    }
}

#[test]
fn the_readme_stands_alone_in_a_clone() {
    // Links into the project's private notes do not resolve in a clone; the install line and
    // the rule list an installed binary's user needs are there.
    let readme = std::fs::read_to_string("../../README.md").unwrap();
    assert!(!readme.contains("../shared"), "README links outside the repository");
    assert!(readme.contains("cargo install --locked --path crates/ztensor-cli"));
    assert!(readme.contains("ztensor rules"));
    for link in readme.split("](").skip(1).filter_map(|l| l.split(')').next()) {
        if link.starts_with("http") || link.starts_with('#') {
            continue;
        }
        assert!(std::path::Path::new("../..").join(link).exists(), "README links {link}");
    }
}
