//! The table: every format read ([`FORMATS`]), with the rule that recognises it, and the
//! formats recognised but not read ([`NOT_READ`]).

use std::fmt;

/// A format this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A zTensor file, version 0.1, 1.1 or 1.2.
    Zt,
    /// A sharded zTensor checkpoint, through its `NAME.zt.index.json`.
    ZtIndex,
    /// A safetensors file.
    Safetensors,
    /// A Hugging Face sharded safetensors checkpoint, through its
    /// `*.safetensors.index.json`.
    SafetensorsIndex,
    /// A TensorBuffers file.
    TensorBuffers,
    /// A NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive.
    Npz,
    /// A GGUF file (llama.cpp).
    Gguf,
    /// A PyTorch checkpoint (`torch.save`, zip or legacy).
    Torch,
    /// A zTensor 2 file (the reference implementation's current generation, "Draft 4").
    Zt2,
    /// A PyTorch Distributed Checkpoint as DCP's `FileSystemWriter` saves it: a directory of
    /// `.metadata` and `*.distcp` data files, read as its whole tensors.
    Dcp,
    /// The safetensors shards a Distributed Checkpoint saves through DCP's
    /// `HuggingFaceStorageWriter` (`save_distributed`): a directory of
    /// `shard-RRRRR-model-IIIII-of-NNNNN.safetensors` files, each rank's chunks placed by
    /// `DCP_SHARDING_INFO`, read as its whole tensors.
    DcpSafetensors,
}

/// A row of [`FORMATS`].
#[derive(Debug, Clone, Copy)]
pub struct Format {
    /// Which format.
    pub kind: Kind,
    /// Its short identifier (as `info --json` reports it).
    pub id: &'static str,
    /// What it is, for a sentence: `a safetensors file`.
    pub description: &'static str,
    /// What files of it are, for a list of what is read: `safetensors files`.
    pub plural: &'static str,
    /// How it is recognised.
    pub rule: &'static str,
    /// The cargo feature of this crate that reads it (`""`: always).
    pub feature: &'static str,
    /// Its usual file extensions, lowercase, without the dot.
    pub extensions: &'static [&'static str],
    /// Whether this build reads it.
    pub enabled: bool,
}

/// Every format read.
pub const FORMATS: &[Format] = &[
    Format {
        kind: Kind::Zt,
        id: "ztensor",
        description: "a zTensor file",
        plural: "zTensor 0.1, 1.1 and 1.2 files (.zt)",
        rule: "ZTEN0001 or ZTEN1000 at the start, or a v1 footer (ZTEN1000) at the end",
        feature: "",
        extensions: &["zt"],
        enabled: true,
    },
    Format {
        kind: Kind::Zt2,
        id: "ztensor2",
        description: "a zTensor 2 file",
        plural: "zTensor 2 files",
        rule: "\\x89ZT2\\r\\n\\x1a\\n at the start",
        feature: "v2",
        // `.zt` is zTensor 0.1/1.x's too: told apart by content only.
        extensions: &[],
        enabled: cfg!(feature = "v2"),
    },
    Format {
        kind: Kind::Safetensors,
        id: "safetensors",
        description: "a safetensors file",
        plural: "safetensors files",
        rule: "a little-endian header length then a JSON object that fits the file",
        feature: "safetensors",
        extensions: &["safetensors"],
        enabled: cfg!(feature = "safetensors"),
    },
    Format {
        kind: Kind::SafetensorsIndex,
        id: "safetensors-sharded",
        description: "a sharded safetensors checkpoint",
        plural: "sharded safetensors checkpoints (through their model.safetensors.index.json)",
        rule: "a file named *.safetensors.index.json",
        feature: "safetensors",
        extensions: &["json"],
        enabled: cfg!(feature = "safetensors"),
    },
    Format {
        kind: Kind::ZtIndex,
        id: "ztensor-sharded",
        description: "a sharded zTensor checkpoint",
        plural: "sharded zTensor checkpoints (NAME.zt.index.json)",
        rule: "a file named *.zt.index.json",
        feature: "sharded",
        extensions: &["json"],
        enabled: cfg!(feature = "sharded"),
    },
    Format {
        kind: Kind::TensorBuffers,
        id: "tensorbuffers",
        description: "a TensorBuffers file",
        plural: "TensorBuffers files (.tb)",
        rule: "TBS1 at the start or at the end",
        feature: "tensorbuffers",
        extensions: &["tb"],
        enabled: cfg!(feature = "tensorbuffers"),
    },
    Format {
        kind: Kind::Npy,
        id: "npy",
        description: "a NumPy .npy array",
        plural: "NumPy .npy files",
        rule: "\\x93NUMPY at the start",
        feature: "numpy",
        extensions: &["npy"],
        enabled: cfg!(feature = "numpy"),
    },
    Format {
        kind: Kind::Npz,
        id: "npz",
        description: "a NumPy .npz archive",
        plural: "NumPy .npz files",
        rule: "a zip archive of .npy members only",
        feature: "numpy",
        extensions: &["npz"],
        enabled: cfg!(feature = "numpy"),
    },
    Format {
        kind: Kind::Gguf,
        id: "gguf",
        description: "a GGUF file",
        plural: "GGUF files",
        rule: "GGUF at the start",
        feature: "gguf",
        extensions: &["gguf"],
        enabled: cfg!(feature = "gguf"),
    },
    Format {
        kind: Kind::Torch,
        id: "pytorch",
        description: "a PyTorch checkpoint",
        plural: "PyTorch checkpoints (torch.save)",
        rule: "a zip archive with NAME/data.pkl, or a pickle of torch's magic number",
        feature: "torch",
        extensions: &["pt", "pth", "bin", "ckpt"],
        enabled: cfg!(feature = "torch"),
    },
    Format {
        kind: Kind::Dcp,
        id: "pytorch-dcp",
        description: "a PyTorch Distributed Checkpoint",
        plural: "PyTorch Distributed Checkpoints (the directory DCP's FileSystemWriter saves)",
        rule: "a directory holding .metadata (or that file named)",
        feature: "torch",
        extensions: &[],
        enabled: cfg!(all(feature = "torch", feature = "sharded")),
    },
    Format {
        kind: Kind::DcpSafetensors,
        id: "pytorch-dcp-safetensors",
        description: "a Distributed Checkpoint's safetensors shards",
        plural: "Distributed Checkpoints saved as safetensors shards (the directory DCP's \
                 HuggingFaceStorageWriter saves)",
        rule: "a directory holding shard-NNNNN-model-NNNNN-of-NNNNN.safetensors files",
        feature: "safetensors",
        extensions: &[],
        enabled: cfg!(all(feature = "safetensors", feature = "sharded")),
    },
];

/// Formats people bring that are recognised and named, not read: each one's first bytes and
/// what it is.
pub const NOT_READ: &[(&[u8], &str)] = &[
    (
        b"PK\x03\x04",
        "a zip archive that is neither a PyTorch checkpoint nor a NumPy .npz (a TorchScript \
         archive or a damaged checkpoint, for instance)",
    ),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"\x1f\x8b", "a gzip-compressed file"),
];
impl Kind {
    /// Its row of [`FORMATS`].
    pub fn format(self) -> &'static Format {
        FORMATS.iter().find(|f| f.kind == self).expect("every kind has a row")
    }

    /// Whether this build reads it.
    pub fn enabled(self) -> bool {
        self.format().enabled
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.format().description)
    }
}

/// What this build reads, for messages: every enabled format's description.
pub fn accepted() -> String {
    let list: Vec<&str> = FORMATS.iter().filter(|f| f.enabled).map(|f| f.plural).collect();
    match list.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "nothing".to_owned(),
    }
}
