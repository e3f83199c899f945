//! README's maps of the tool against the tool itself: the command table has a row for every
//! subcommand and none for a command that does not exist, and the `crates/ztensor-cli` row of
//! the crate table names them all. The subcommands come from `ztensor --help` (clap's list), so
//! a new command cannot be missed here.

use std::collections::BTreeSet;

use super::{root, stderr, stdout, ztensor};

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
