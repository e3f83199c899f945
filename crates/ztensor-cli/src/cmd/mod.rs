//! The subcommands.

pub mod convert;
pub mod edit;
pub mod info;
pub mod look;
pub mod repack;
pub mod stdin;
pub mod tb;
pub mod text;

use std::path::Path;

use anyhow::{Context, Result};
use ztensor_io::{FileSource, ReadAt};

/// What kind of file an input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Zt,
    TensorBuffers,
    Safetensors,
    ShardIndex,
    /// A sharded zTensor checkpoint's index (`*.zt.index.json`).
    ZtIndex,
    /// A NumPy `.npy` array.
    Npy,
    /// A GGUF file (llama.cpp).
    Gguf,
    /// A NumPy `.npz` archive.
    Npz,
    /// A PyTorch checkpoint (`torch.save`, zip or legacy).
    Torch,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Zt => "a zTensor file",
            Kind::TensorBuffers => "a TensorBuffers file",
            Kind::Safetensors => "a safetensors file",
            Kind::ShardIndex => "a sharded safetensors checkpoint",
            Kind::ZtIndex => "a sharded zTensor checkpoint",
            Kind::Npy => "a NumPy .npy array",
            Kind::Gguf => "a GGUF file",
            Kind::Npz => "a NumPy .npz archive",
            Kind::Torch => "a PyTorch checkpoint",
        })
    }
}

/// Whether `a` and `b` name the same existing file, whatever the spelling or link.
pub fn same_file(a: &Path, b: &Path) -> bool {
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

/// Refuses to write `output` over `input` (a request that would replace the user's file with
/// something else: another format, an extracted array).
pub fn not_over(input: &Path, output: &Path, what: &str) -> Result<()> {
    if same_file(input, output) {
        anyhow::bail!(
            "{} is also the input {}; writing {what} there would replace it (choose another output)",
            output.display(),
            input.display()
        );
    }
    Ok(())
}

/// Recognises a file by content: a zTensor magic, `TBS1` at either end, a safetensors header;
/// a `*.safetensors.index.json` name means a sharded checkpoint. A file recognised by none
/// (a damaged one) is judged by its extension, so errors name the rules of the format the user
/// meant, and is zTensor otherwise.
pub fn detect(path: &Path) -> Result<Kind> {
    if ztensor_foreign::sharded::is_index(path) {
        return Ok(Kind::ShardIndex);
    }
    if ztensor_shard::is_index(path) {
        return Ok(Kind::ZtIndex);
    }
    if path.is_dir() {
        anyhow::bail!("{}", directory_hint(path));
    }
    let context = || format!("cannot open {}", path.display());
    let file = ztensor_io::open_input(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let source = FileSource::new(file).with_context(context)?;
    let mut head = vec![0u8; usize::try_from(source.len().min(512)).unwrap_or(0)];
    source.read_exact_at(0, &mut head).with_context(context)?;
    if head.starts_with(b"ZTEN") {
        return Ok(Kind::Zt);
    }
    if ztensor_foreign::npy_in::looks_like_npy(&head) {
        return Ok(Kind::Npy);
    }
    if ztensor_foreign::gguf::looks_like_gguf(&head) {
        return Ok(Kind::Gguf);
    }
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    if ztensor_foreign::npz::looks_like_zip(&head) {
        if ztensor_foreign::npz::is_npz(&source) {
            return Ok(Kind::Npz);
        }
        if ztensor_foreign::torch::is_torch(&source) {
            return Ok(Kind::Torch);
        }
        // A damaged archive is judged by the format its name says, so the error gives the
        // reason (a TorchScript archive named .pt is named as one there too).
        match extension.as_deref() {
            Some("npz") => return Ok(Kind::Npz),
            Some("pt" | "pth" | "bin" | "ckpt") => return Ok(Kind::Torch),
            _ => {}
        }
    }
    if ztensor_foreign::torch::looks_like_legacy(&head) {
        return Ok(Kind::Torch);
    }
    if tb::detect(path).with_context(context)? {
        return Ok(Kind::TensorBuffers);
    }
    if ztensor_foreign::safetensors::looks_like_safetensors(&head, source.len())
        || extension.as_deref() == Some("safetensors")
    {
        return Ok(Kind::Safetensors);
    }
    // Formats this tool does not read are named and refused as a request it cannot serve,
    // whatever the file is called (the reference 2.x writes `.zt` files too). A file named like
    // a zTensor file is otherwise judged as one: a damaged one gets its rule.
    let refuse = |what: &str| {
        anyhow::anyhow!(
            "{}: this is {what}, which ztensor does not read; it reads {ACCEPTED}",
            path.display()
        )
    };
    if let Some(what) = recognise(&head).filter(|_| !is_text(&head)) {
        return Err(refuse(what));
    }
    if extension.as_deref() != Some("zt") {
        return Err(refuse(recognise(&head).unwrap_or("a file in no format ztensor knows")));
    }
    Ok(Kind::Zt)
}

/// What the tool reads, for messages.
pub const ACCEPTED: &str = "zTensor 0.1, 1.1 and 1.2 files (.zt), safetensors files, sharded \
    safetensors checkpoints (through their model.safetensors.index.json), sharded zTensor \
    checkpoints (NAME.zt.index.json), TensorBuffers files (.tb), NumPy .npy and .npz files, GGUF \
    files and PyTorch checkpoints (torch.save)";

/// Names the formats people bring that this tool does not read (yet), by their first bytes.
pub fn recognise(head: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (
            b"\x89ZT2\r\n\x1a\n",
            "a zTensor 2 file (the reference implementation's 2.x container, not zTensor 0.1/1.x)",
        ),
        (b"\x93NUMPY", "a NumPy .npy array"),
        (b"GGUF", "a GGUF file (llama.cpp)"),
        (
            b"PK\x03\x04",
            "a zip archive that is neither a PyTorch checkpoint nor a NumPy .npz (a TorchScript \
             archive or a damaged checkpoint, for instance)",
        ),
        (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
        (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
        (b"\x1f\x8b", "a gzip-compressed file"),
    ];
    if let Some((_, what)) = SIGNATURES.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(what);
    }
    // Pickle protocol 2..5 starts with PROTO (a legacy torch.save file is detected before).
    if let [0x80, 2..=5, ..] = head {
        return Some("a Python pickle that is not a PyTorch checkpoint");
    }
    if !is_text(head) {
        return None;
    }
    Some(match head.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => "JSON text",
        _ => "a text file",
    })
}

/// Whether `head` reads as text: UTF-8 (a character cut at the end allowed) without control
/// characters other than whitespace.
fn is_text(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return false,
    };
    !valid.is_empty() && valid.chars().all(|c| !c.is_control() || c.is_whitespace())
}

/// What to say about a directory given where a file was expected: the checkpoint index or
/// the tensor files it holds, when it has them.
fn directory_hint(dir: &Path) -> String {
    let mut candidates: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.ends_with(".safetensors.index.json")
                || n.ends_with(".safetensors")
                || n.ends_with(".zt")
                || n.ends_with(".tb")
        })
        .collect();
    candidates.sort();
    let index: Vec<&String> =
        candidates.iter().filter(|n| n.ends_with(".safetensors.index.json")).collect();
    let shown = |n: &String| dir.join(n).display().to_string();
    match (index.as_slice(), candidates.as_slice()) {
        ([one], _) => format!(
            "{} is a directory; for the sharded checkpoint in it, pass its index: {}",
            dir.display(),
            shown(one)
        ),
        (_, []) => format!("{} is a directory, not a file ztensor reads", dir.display()),
        _ => format!(
            "{} is a directory; pass one of its files: {}",
            dir.display(),
            candidates.iter().take(8).map(shown).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The decoded bytes of a tensor as its source describes it (its stored bytes where the
/// decoded length is not known without decoding): what progress counts for it.
pub fn decoded_of(o: &ztensor_io::ObjectInfo<'_>) -> u64 {
    o.components.iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)).sum()
}
