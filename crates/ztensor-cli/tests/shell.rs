//! What a shell user expects of the tool: completion scripts and manual pages, both made from
//! the parser's own definitions, so every command `--help` lists is in them; help with an
//! example for every command, naming every format read and written.

use super::readme::commands;
use super::tools::ok;
use super::{scratch, stderr, stdout, ztensor};

#[test]
fn every_shell_gets_a_completion_script_naming_every_command() {
    let commands = commands();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = ztensor(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for command in &commands {
            assert!(script.contains(command.as_str()), "{shell}: no {command}");
        }
        // Options as each shell writes them (fish: `-l zstd`).
        assert!(script.contains("zstd") && script.contains("shard-size"), "{shell}");
    }
    let out = ztensor(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// The bash script loads in bash and registers completion for `ztensor`, and completing
/// `ztensor conv` offers `convert`.
#[test]
fn the_bash_script_completes_commands_in_bash() {
    if std::process::Command::new("bash").arg("--version").output().is_err() {
        panic!("bash is needed for this test (it is on every CI machine)");
    }
    let d = scratch("completions");
    let path = d.join("ztensor.bash");
    std::fs::write(&path, stdout(&ztensor(&["completions", "bash"]))).unwrap();
    let script = format!(
        "source '{}'; complete -p ztensor; COMP_WORDS=(ztensor conv); COMP_CWORD=1; \
         COMP_LINE='ztensor conv'; COMP_POINT=12; _ztensor ztensor conv ztensor; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = std::process::Command::new("bash").arg("-c").arg(&script).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    assert!(printed.contains("-F _ztensor ztensor"), "{printed}");
    assert!(printed.lines().any(|l| l == "convert"), "{printed}");
}

#[test]
fn the_manual_has_a_page_for_the_tool_and_each_command() {
    let d = scratch("manual");
    let dir = d.join("man1");
    let out = ztensor(&["manual", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut expected: Vec<String> = commands()
        .iter()
        .map(|c| format!("ztensor-{c}.1"))
        .chain(["ztensor.1".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(pages, expected);
    for page in &pages {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.starts_with(".ie") || text.contains("\n.TH "), "{page}: not a man page");
        assert!(text.contains(env!("CARGO_PKG_VERSION")), "{page}: no version");
    }
    let convert = std::fs::read_to_string(dir.join("ztensor-convert.1")).unwrap();
    assert!(convert.contains("shard\\-size") && convert.contains("s3://"), "{convert}");
}

#[test]
fn every_command_has_an_example_in_its_help() {
    // The commands as the tool lists them, so a new one cannot be missed here; README's rows
    // for them are checked in `readme.rs`.
    for command in super::readme::commands() {
        let help = ok(&[&command, "--help"]);
        assert!(help.contains("Example: ztensor "), "{command}: {help}");
    }
    let help = ok(&["--help"]);
    assert!(help.contains("Exit status: 0 on success; 1 when the data says no"), "{help}");
}

#[test]
fn help_names_every_format_the_tool_reads_and_writes() {
    let reads = [
        "zTensor",
        "zTensor 2",
        "safetensors",
        "TensorBuffers",
        ".npy",
        ".npz",
        "GGUF",
        "PyTorch",
        ".pth",
    ];
    for command in [
        &["--help"][..],
        &["convert", "--help"],
        &["info", "--help"],
        &["ls", "--help"],
        &["verify", "--help"],
        &["extract", "--help"],
        &["diff", "--help"],
        &["cat", "--help"],
        &["append", "--help"],
    ] {
        let help = ok(command);
        for format in reads {
            assert!(help.contains(format), "{command:?} does not name {format}");
        }
    }
    // What is written, and an example for each family of input.
    for command in [&["--help"][..], &["convert", "--help"]] {
        let help = ok(command);
        assert!(help.contains(".safetensors") && help.contains("TensorBuffers"), "{help}");
        for example in [
            "Example: ztensor convert model.safetensors.index.json model.zt",
            "Example: ztensor convert model.pth model.zt",
            "Example: ztensor convert model.gguf model.zt",
            "Example: ztensor convert arrays.npz arrays.zt",
        ] {
            assert!(help.contains(example), "{command:?} lacks {example:?}");
        }
    }
}
