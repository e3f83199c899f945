//! Resource limits and validation options: what a reader is willing to believe.

/// Upper bounds on what a file may make a reader do. Every field has a documented default, and
/// callers can tighten (or, knowingly, loosen) each one. Exceeding a limit is an error with its
/// own rule identifier, never a panic or an abort.
///
/// ```
/// use ztensor_format::Limits;
/// let mut limits = Limits::default();
/// limits.max_manifest_len = 16 << 20; // refuse manifests above 16 MiB
/// assert_eq!(limits.max_rank, 64);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest manifest accepted, in bytes. Default 1 GiB, the cap the v1.x specs mandate; it
    /// is applied to v0.1 too. Rule `manifest_too_large`.
    pub max_manifest_len: u64,
    /// Most objects (tensors) in one manifest. Default 10,000,000. Rule `too_many_objects`.
    pub max_objects: usize,
    /// Largest shape rank. Default 64. Rule `shape_rank`.
    pub max_rank: usize,
    /// Longest object name, in bytes. Default 65,536. Rule `name_too_long`.
    pub max_name_len: usize,
    /// Deepest CBOR nesting (arrays, maps and tags count one level each; the root is level 1).
    /// Default 64. Rule `cbor_depth`.
    pub max_cbor_depth: usize,
    /// Largest decoded (decompressed) size of one component, in bytes. Default 64 GiB. An
    /// object whose declared decoded size is larger is unsupported (rule `decoded_too_large`);
    /// a decoder must also stop when actual output passes it.
    pub max_decoded_len: u64,
    /// Largest component decoded whole into memory (a read that returns all its bytes at
    /// once), in bytes. Default 64 GiB. Readers that stream a component in pieces (verifying,
    /// dumping, copying, converting) are bounded by [`Limits::max_decoded_len`] alone, so a
    /// machine too small to hold a tensor can still check and convert it; a whole read of a
    /// larger one is refused (rule `decoded_too_large`) before anything is allocated. This is
    /// the limit to fit to a machine's memory.
    pub max_whole_len: u64,
    /// Most CBOR values a decoded manifest may hold (each array or map item, map key, tag and
    /// scalar counts one). A value decoded into a tree costs a few tens of bytes however few
    /// bytes it took in the file, so this bounds the memory a manifest's unknown keys (and, for
    /// layouts the direct decoders leave to the general one, its whole tree) can spend;
    /// attributes are kept in their encoding. Default 134,217,728
    /// (2²⁷, about 4 GiB of values). Rule `manifest_too_large`.
    pub max_manifest_values: u64,
    /// Most bytes all the objects of one input may decode to, as a multiple of the input's own
    /// size; inputs that decode to at most [`Limits::EXPANSION_FLOOR`] are never refused by it.
    /// Compression and views that share bytes (a PyTorch tensor expanded with stride 0, tied
    /// weights) multiply what a file yields; a real checkpoint yields a few times its size at
    /// most, a crafted one millions. Default 4,096. Rule `decoded_too_large`.
    pub max_expansion: u64,
}

impl Limits {
    /// The defaults listed on each field.
    pub const DEFAULT: Limits = Limits {
        max_manifest_len: 1 << 30,
        max_objects: 10_000_000,
        max_rank: 64,
        max_name_len: 65_536,
        max_cbor_depth: 64,
        max_decoded_len: 64 << 30,
        max_whole_len: 64 << 30,
        max_manifest_values: 1 << 27,
        max_expansion: 4096,
    };

    /// What one input may always decode to, whatever [`Limits::max_expansion`] says: 1 GiB.
    pub const EXPANSION_FLOOR: u64 = 1 << 30;

    /// The most bytes one component decoded whole may hold: the lesser of
    /// [`Limits::max_decoded_len`] and [`Limits::max_whole_len`].
    pub fn whole_decode_limit(&self) -> u64 {
        self.max_decoded_len.min(self.max_whole_len)
    }

    /// The most bytes an input of `input_len` bytes may decode to.
    pub fn max_expanded_len(&self, input_len: u64) -> u64 {
        input_len.saturating_mul(self.max_expansion).max(Limits::EXPANSION_FLOOR)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// How a manifest is validated: the limits, and whether strict-only rules apply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Options {
    /// Resource limits.
    pub limits: Limits,
    /// Enforce the rules `spec/rules.md` marks *strict*: rules the specs state but that files
    /// from real writers (or other valid uses) may break.
    pub strict: bool,
}

impl Options {
    /// Default limits, strict rules on.
    pub fn strict() -> Options {
        Options { limits: Limits::default(), strict: true }
    }
}
