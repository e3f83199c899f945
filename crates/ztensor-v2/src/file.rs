//! A valid file's data: a part's stored and decoded bytes, its digest and the data rules of
//! its logical type and layout (`spec/ztensor-2.md` §3, §4.1, §5.2).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use ztensor_format::Limits;
use ztensor_io::ReadAt;

use crate::container::{Container, open};
use crate::error::{Error, Result, Rule};
use crate::manifest::{Dtype, Manifest, Object, Part, Shard};

mod check;

pub use check::DigestCheck;
use check::{Checked, Facts, Gather, verdict};

/// A zTensor 2 file whose container and manifest are valid, with the bytes to read its parts
/// from.
#[derive(Debug)]
pub struct File<S> {
    source: S,
    container: Container,
    /// The shards attached ([`File::open_sharded`]), by name: a file whose size and container
    /// were checked, or why none could be had.
    shards: BTreeMap<String, std::result::Result<S, String>>,
    /// Where the shards attached were found, when they were found by path.
    pub(crate) shard_paths: BTreeMap<String, std::path::PathBuf>,
    /// What reading and checking the file may cost ([`File::with_limits`]).
    limits: Limits,
    /// The blobs more than one part points at, found once.
    shared: OnceLock<HashSet<BlobKey>>,
    /// What checking each shared blob found, by blob: decoded and hashed once however many
    /// parts alias it. A slot is held while its blob is decoded, so aliases wait rather than
    /// decode it again.
    facts: Mutex<HashMap<BlobKey, Arc<Mutex<Option<Checked>>>>>,
    /// The verdict of the expansion budget on the file's checks, found once.
    budget: OnceLock<std::result::Result<u64, String>>,
}

/// A blob as parts point at it: the same key decodes to the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct BlobKey {
    shard: Option<crate::manifest::Shared>,
    blob: (u64, u64),
    encoding: Option<crate::manifest::Shared>,
    decoded_len: u64,
}

impl BlobKey {
    pub(crate) fn of(p: &Part) -> BlobKey {
        BlobKey {
            shard: p.shard.clone(),
            blob: p.blob,
            encoding: p.encoding.clone(),
            decoded_len: p.decoded_len(),
        }
    }
}

/// What [`File::check_part`] found: the part's decoded length, the SHA-256 of its decoded
/// bytes when asked for, and what its digest check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartCheck {
    /// How many bytes it decoded to.
    pub decoded_len: u64,
    /// The SHA-256 of the decoded bytes, when asked for.
    pub sha256: Option<[u8; 32]>,
    /// What the digest check found.
    pub digest: DigestCheck,
}

/// What a resolver found for one shard of the table.
#[derive(Debug)]
pub enum Located<S> {
    /// The shard's bytes (its size and container are checked next).
    At(S),
    /// No file for it, and why (where it was looked for): its parts cannot be read, the rest
    /// of the file can.
    Missing(String),
}

impl<S: ReadAt> File<S> {
    /// Opens `source`, validating its container and manifest ([`open`]).
    ///
    /// # Errors
    /// As [`open`].
    /// Its shards, if it has any, are not attached: their parts cannot be read
    /// ([`File::open_sharded`] attaches them).
    pub fn open(source: S, max_manifest: u64) -> Result<File<S>> {
        let container = open(&source, max_manifest)?;
        Ok(File {
            source,
            container,
            shards: BTreeMap::new(),
            shard_paths: BTreeMap::new(),
            limits: ztensor_io::machine_limits(),
            shared: OnceLock::new(),
            facts: Mutex::new(HashMap::new()),
            budget: OnceLock::new(),
        })
    }

    /// The same file, read and checked within `limits` instead of the defaults (the format's
    /// limits with the whole-decode limit fitted to this machine,
    /// [`ztensor_io::machine_limits`]): the expansion budget of its checks
    /// ([`File::check_expansion`]) and the largest part or CSR/COO object read whole.
    pub fn with_limits(mut self, limits: Limits) -> File<S> {
        self.limits = limits;
        self.budget = OnceLock::new();
        self
    }

    /// The limits it is read within ([`File::with_limits`]).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The bytes its content lies in: the file's own, and those of the shards attached.
    pub fn input_len(&self) -> u64 {
        self.source.len().saturating_add(self.shards_len())
    }

    /// How many bytes checking every object ([`File::check_part`] on each part of a dense or
    /// other object, a whole read of each CSR or COO object) decodes: a blob that several
    /// parts share is decoded once, a CSR or COO object's parts each time, as its structure
    /// is checked on them.
    pub fn check_cost(&self) -> u64 {
        let Some(manifest) = self.manifest() else { return 0 };
        let mut seen = HashSet::new();
        let mut total = 0u64;
        for (_, o) in &manifest.objects {
            let whole = matches!(&*o.layout, "zt.sparse_csr/1" | "zt.sparse_coo/1");
            for (_, p) in &o.parts {
                if whole || seen.insert(BlobKey::of(p)) {
                    total = total.saturating_add(p.decoded_len());
                }
            }
        }
        total
    }

    /// Refuses the file when checking it ([`File::check_cost`]) decodes more than `limits`
    /// allow for its [`File::input_len`]
    /// ([`Limits::max_expanded_len`](ztensor_format::Limits::max_expanded_len)): counted on what
    /// the manifest declares, before anything is decoded. Returns the cost.
    ///
    /// # Errors
    /// [`ErrorKind::DecodedTooLarge`](ztensor_format::ErrorKind::DecodedTooLarge).
    pub fn check_expansion(&self, limits: &Limits) -> ztensor_io::Result<u64> {
        let (cost, input) = (self.check_cost(), self.input_len());
        let allowed = limits.max_expanded_len(input);
        if cost > allowed {
            return Err(ztensor_format::Error::new(
                ztensor_format::ErrorKind::DecodedTooLarge,
                format!(
                    "checking its objects decodes {cost} bytes, more than the {allowed} allowed \
                     ({} times the input's {input} bytes): a crafted expansion, or a limit to \
                     raise",
                    limits.max_expansion
                ),
            )
            .into());
        }
        Ok(cost)
    }

    /// [`File::check_expansion`] within its own limits, found once.
    pub(crate) fn within_budget(&self) -> ztensor_io::Result<()> {
        let verdict = self.budget.get_or_init(|| {
            self.check_expansion(&self.limits).map_err(|e| match e.format_error() {
                Some(f) => f.message().to_owned(),
                None => e.to_string(),
            })
        });
        match verdict {
            Ok(_) => Ok(()),
            Err(message) => Err(ztensor_format::Error::new(
                ztensor_format::ErrorKind::DecodedTooLarge,
                message.clone(),
            )
            .into()),
        }
    }

    /// Whether more than one part points at the blob `key`.
    fn is_shared(&self, key: &BlobKey) -> bool {
        self.shared
            .get_or_init(|| {
                let mut seen = HashSet::new();
                let mut shared = HashSet::new();
                for (_, o) in self.manifest().map(|m| m.objects.iter()).into_iter().flatten() {
                    for (_, p) in &o.parts {
                        let key = BlobKey::of(p);
                        if !seen.insert(key.clone()) {
                            shared.insert(key);
                        }
                    }
                }
                shared
            })
            .contains(key)
    }

    /// Opens `source` as [`File::open`] does, then each shard its table lists, in name order:
    /// `locate` finds its bytes, which must be exactly the size the table says and a valid
    /// container (its own manifest, if it has one, validated too), or the file is refused with
    /// `shard_identity`. A shard `locate` cannot find leaves its parts unreadable
    /// (`Unsupported`, saying why) and the rest of the file readable. Whole-file digests are
    /// checked by [`File::verify_shards`].
    ///
    /// # Errors
    /// As [`File::open`]; `shard_identity`; `locate`'s errors.
    pub fn open_sharded(
        source: S,
        max_manifest: u64,
        locate: &mut dyn FnMut(&str, &Shard) -> Result<Located<S>>,
    ) -> Result<File<S>> {
        let mut file = File::open(source, max_manifest)?;
        let table = file.manifest().map(|m| m.shards.clone()).unwrap_or_default();
        for (name, shard) in &table {
            let found = match locate(name, shard)? {
                Located::At(bytes) => {
                    if bytes.len() != shard.size {
                        return Err(Error::rule(
                            Rule::ShardIdentity,
                            format!(
                                "shard {name:?} is {} bytes; the table says {}",
                                bytes.len(),
                                shard.size
                            ),
                        ));
                    }
                    open(&bytes, max_manifest).map_err(|e| match e.kind() {
                        // A read that failed says nothing of what the shard is.
                        crate::ErrorKind::Io(_) => e.within(&format!("shard {name:?}")),
                        _ => Error::rule(
                            Rule::ShardIdentity,
                            format!("shard {name:?} is not a valid zTensor 2 container: {e}"),
                        ),
                    })?;
                    Ok(bytes)
                }
                Located::Missing(why) => Err(why),
            };
            file.shards.insert(name.clone(), found);
        }
        Ok(file)
    }

    /// Checks every shard's whole-file digest against the table, in name order, saying what
    /// each check found (`Unverifiable` for an algorithm this crate does not compute).
    ///
    /// # Errors
    /// `shard_identity` for a digest that differs; `Unsupported` for a shard not attached
    /// (missing, or the file opened with [`File::open`]); I/O errors.
    pub fn verify_shards(&self) -> Result<Vec<(String, DigestCheck)>> {
        let Some(manifest) = self.manifest() else { return Ok(Vec::new()) };
        let mut checks = Vec::with_capacity(manifest.shards.len());
        for (name, shard) in &manifest.shards {
            let bytes = match self.shards.get(name) {
                Some(Ok(bytes)) => bytes,
                Some(Err(why)) => {
                    return Err(Error::unsupported(format!("shard {name:?} is missing: {why}")));
                }
                None => {
                    return Err(Error::unsupported(format!(
                        "shard {name:?} is not attached (open the file with its shards)"
                    )));
                }
            };
            let algorithm = shard.digest.split_once(':').map_or("", |d| d.0);
            let check = match crate::shards::whole_digest(bytes, algorithm)? {
                None => DigestCheck::Unverifiable(shard.digest.clone()),
                Some(actual) if actual == shard.digest => DigestCheck::Verified,
                Some(actual) => {
                    return Err(Error::rule(
                        Rule::ShardIdentity,
                        format!(
                            "shard {name:?}: the table's digest is {}, the file's is {actual}",
                            shard.digest
                        ),
                    ));
                }
            };
            checks.push((name.clone(), check));
        }
        Ok(checks)
    }

    /// The shards attached by path ([`File::open_path`]), by name: where each was found.
    pub fn shard_paths(&self) -> impl Iterator<Item = (&str, &std::path::Path)> {
        self.shard_paths.iter().map(|(n, p)| (n.as_str(), p.as_path()))
    }

    /// Records where the shards a caller's locator found lie (for
    /// [`File::open_sharded`], whose locator knows: objects beside a root in a bucket, say),
    /// as [`File::shard_paths`] then tells them.
    pub fn set_shard_paths(&mut self, paths: BTreeMap<String, std::path::PathBuf>) {
        self.shard_paths = paths;
    }

    /// The total size of the shards attached (what the file's content lies in besides its own
    /// bytes): only those found, whose sizes were checked, never what a table merely claims.
    pub fn shards_len(&self) -> u64 {
        self.shards
            .values()
            .filter_map(|s| s.as_ref().ok())
            .map(ReadAt::len)
            .fold(0, u64::saturating_add)
    }

    /// Why the bytes of shard `shard` cannot be had (`None` when they can).
    pub(crate) fn shard_missing(&self, shard: &str) -> Option<String> {
        match self.shards.get(shard) {
            Some(Ok(_)) => None,
            Some(Err(why)) => Some(format!("its shard {shard:?} is missing: {why}")),
            None => {
                Some(format!("its shard {shard:?} is not attached (open the file with its shards)"))
            }
        }
    }

    /// The bytes part `p` (`name`/`part`) lies in: this file's, or its shard's.
    pub(crate) fn bytes_of(&self, name: &str, part: &str, p: &Part) -> Result<&S> {
        let Some(shard) = &p.shard else { return Ok(&self.source) };
        match self.shards.get(&**shard) {
            Some(Ok(bytes)) => Ok(bytes),
            Some(Err(why)) => Err(Error::unsupported(format!(
                "{name:?}/{part}: its bytes are in shard {shard:?}, which is missing: {why}"
            ))),
            None => Err(Error::unsupported(format!(
                "{name:?}/{part}: its bytes are in shard {shard:?}, which is not attached \
                 (open the file with its shards)"
            ))),
        }
    }

    /// The footer and manifest.
    pub fn container(&self) -> &Container {
        &self.container
    }

    /// The manifest, `None` for a data shard.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.container.manifest.as_ref()
    }

    /// Object `name` and its part `part`.
    ///
    /// # Errors
    /// `Unsupported` naming what is not there.
    pub fn part(&self, name: &str, part: &str) -> Result<(&Object, &Part)> {
        let object = self
            .manifest()
            .and_then(|m| m.objects.get(name))
            .ok_or_else(|| Error::unsupported(format!("no object {name:?}")))?;
        let p = object
            .parts
            .get(part)
            .ok_or_else(|| Error::unsupported(format!("object {name:?} has no part {part:?}")))?;
        Ok((object, p))
    }

    /// The part's stored bytes, as they lie in this file.
    ///
    /// # Errors
    /// `Unsupported` for a part in a shard not attached; I/O errors.
    pub fn stored(&self, name: &str, part: &str) -> Result<Vec<u8>> {
        let (_, p) = self.part(name, part)?;
        let source = self.bytes_of(name, part, p)?;
        let (offset, len) = p.blob;
        let mut bytes =
            ztensor_io::try_zeroed(len, "a part").map_err(|e| Error::io("reading a part", e))?;
        source.read_exact_at(offset, &mut bytes).map_err(|e| Error::io("reading a part", e))?;
        Ok(bytes)
    }

    /// The part's decoded bytes: the stored ones for a raw part, decoded for
    /// `zt.zstd-seekable/1`, exactly `decoded_length` of them. Neither its digest nor its
    /// logical type's rules are checked: [`File::verified`] checks both.
    ///
    /// # Errors
    /// `Unsupported` for an encoding this reader does not know; `encoding` for a stream that
    /// breaks its encoding's rules; as [`File::stored`].
    pub fn decoded(&self, name: &str, part: &str) -> Result<Vec<u8>> {
        let (_, p) = self.part(name, part)?;
        self.before_whole(name, part, p)?;
        let mut bytes = ztensor_io::try_with_capacity(p.decoded_len(), "a decoded part")
            .map_err(|e| Error::io("decoding a part", e))?;
        self.stream(name, part, 4 << 20, &mut |piece| {
            bytes.extend_from_slice(piece);
            Ok(())
        })?;
        Ok(bytes)
    }

    /// What must hold before part `p` is decoded whole: it lies in this file, its encoding is
    /// one this reader decodes and, for `zt.zstd-seekable/1`, its seek table is sound, so that
    /// nothing is allocated for a length the file merely claims.
    fn before_whole(
        &self,
        name: &str,
        part: &str,
        p: &Part,
    ) -> Result<Option<crate::seekable::SeekTable>> {
        let source = self.bytes_of(name, part, p)?;
        match p.encoding.as_deref() {
            None => Ok(None),
            Some(crate::seekable::ID) => {
                self.within_whole_limit(name, part, p)?;
                let (offset, len) = p.blob;
                crate::seekable::seek_table(source, offset, len, p.decoded_len())
                    .map(Some)
                    .map_err(|e| e.within(&format!("{name:?}/{part}")))
            }
            Some(other) => Err(Error::unsupported(format!(
                "{name:?}/{part}: encoding {other:?} is not one this reader decodes"
            ))),
        }
    }

    /// Reads and checks the seek table of a `zt.zstd-seekable/1` part, and nothing else of it.
    pub(crate) fn seek_table(&self, name: &str, part: &str) -> Result<crate::seekable::SeekTable> {
        let (_, p) = self.part(name, part)?;
        let source = self.bytes_of(name, part, p)?;
        let (offset, len) = p.blob;
        crate::seekable::seek_table(source, offset, len, p.decoded_len())
            .map_err(|e| e.within(&format!("{name:?}/{part}")))
    }

    /// The part's decoded bytes in pieces of at most `piece` bytes, unchecked: raw bytes read
    /// piece by piece, a `zt.zstd-seekable/1` stream frame by frame (its seek table checked
    /// first). A few pieces are held, whatever the part's size.
    fn stream(
        &self,
        name: &str,
        part: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let (_, p) = self.part(name, part)?;
        let source = self.bytes_of(name, part, p)?;
        let (offset, len) = p.blob;
        match p.encoding.as_deref() {
            None => {
                let piece = piece.clamp(1, 64 << 20) as u64;
                let mut buf = ztensor_io::try_zeroed(piece.min(len), "a piece of a part")
                    .map_err(|e| Error::io("reading a part", e))?;
                let mut at = 0;
                while at < len {
                    let n = (len - at).min(piece);
                    // At most `piece`, which is a usize.
                    #[allow(clippy::cast_possible_truncation)]
                    let chunk = &mut buf[..n as usize];
                    source
                        .read_exact_at(offset + at, chunk)
                        .map_err(|e| Error::io("reading a part", e))?;
                    each(chunk)?;
                    at += n;
                }
                Ok(())
            }
            Some(crate::seekable::ID) => {
                let within = |e: Error| e.within(&format!("{name:?}/{part}"));
                let table = crate::seekable::seek_table(source, offset, len, p.decoded_len())
                    .map_err(within)?;
                crate::seekable::decode(source, offset, &table, each).map_err(within)
            }
            Some(other) => Err(Error::unsupported(format!(
                "{name:?}/{part}: encoding {other:?} is not one this reader decodes"
            ))),
        }
    }

    /// Checks the part's digest against its decoded bytes, and the content rules of its
    /// logical type (`bool` bytes are 0 or 1; an odd count of `f4_e2m1` leaves the last high
    /// nibble 0), streaming it (a few pieces held, whatever its size).
    ///
    /// # Errors
    /// `digest`, `layout_data`; as [`File::decoded`].
    pub fn verify(&self, name: &str, part: &str) -> Result<DigestCheck> {
        self.check_part(name, part, false).map(|c| c.digest)
    }

    /// Checks the part as [`File::verify`] does, saying how many bytes it decoded to and, with
    /// `sha256`, their SHA-256. A blob that several parts point at (the same shard, offset,
    /// length and encoding) is decoded and hashed once: each alias gets its own verdict (its
    /// digest, its logical type's rules) from what that one pass found.
    ///
    /// # Errors
    /// As [`File::verify`].
    pub fn check_part(&self, name: &str, part: &str, sha256: bool) -> Result<PartCheck> {
        let (object, p) = self.part(name, part)?;
        let sha256 = sha256 || p.digest.as_deref().is_some_and(|d| d.starts_with("sha256:"));
        let key = BlobKey::of(p);
        let facts = if self.is_shared(&key) {
            self.shared_facts(name, part, key, sha256)?
        } else {
            self.gather(name, part, sha256)?
        };
        let digest = verdict(name, part, object, p, &facts)?;
        Ok(PartCheck { decoded_len: facts.len, sha256: facts.sha256, digest })
    }

    /// The facts of the part's decoded bytes, streamed (a few pieces held).
    fn gather(&self, name: &str, part: &str, sha256: bool) -> Result<Facts> {
        let mut gather = Gather::new(true, sha256);
        self.stream(name, part, 4 << 20, &mut |bytes| {
            gather.update(bytes);
            Ok(())
        })?;
        Ok(gather.finish())
    }

    /// The facts of shared blob `key` (that part `name`/`part` points at): found by the first
    /// part that asks, kept for the others. A read that failed (I/O) is not kept.
    fn shared_facts(&self, name: &str, part: &str, key: BlobKey, sha256: bool) -> Result<Facts> {
        let slot = {
            let mut facts = self.facts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(facts.entry(key).or_default())
        };
        let mut slot = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*slot {
            Some(Ok(facts)) if !sha256 || facts.sha256.is_some() => return Ok(facts.clone()),
            Some(Err((rule, message))) => {
                return Err(Error::rule(
                    *rule,
                    format!("{name:?}/{part}: its blob, shared with {message}"),
                ));
            }
            _ => {}
        }
        match self.gather(name, part, sha256) {
            Ok(facts) => {
                *slot = Some(Ok(facts.clone()));
                Ok(facts)
            }
            Err(e) => {
                if let Some(rule) = e.broken() {
                    let text = e.to_string();
                    let text = text.strip_suffix(&format!(" [{rule}]")).unwrap_or(&text);
                    *slot = Some(Err((rule, text.to_owned())));
                }
                Err(e)
            }
        }
    }

    /// The part's decoded bytes once [`File::verify`] has checked them, with what the digest
    /// check found.
    ///
    /// # Errors
    /// As [`File::verify`].
    pub fn verified(&self, name: &str, part: &str) -> Result<(Vec<u8>, DigestCheck)> {
        let (_, p) = self.part(name, part)?;
        // The shard, the encoding and a seek table are checked before the buffer is had; the
        // bytes then go straight into it (a raw part read at once, a seekable one's frames
        // decoded in parallel, each into its place) and are checked in place.
        let table = self.before_whole(name, part, p)?;
        let source = self.bytes_of(name, part, p)?;
        let offset = p.blob.0;
        let mut bytes = ztensor_io::try_zeroed(p.decoded_len(), "a decoded part")
            .map_err(|e| Error::io("reading a part", e))?;
        let check = match &table {
            Some(table) => {
                crate::seekable::decode_into(source, offset, table, &mut bytes)
                    .map_err(|e| e.within(&format!("{name:?}/{part}")))?;
                self.checked(name, part, &mut |f| bytes.chunks(4 << 20).try_for_each(f))?
            }
            // A raw part is copied and checked a piece at a time.
            None => self.checked(name, part, &mut |f| {
                let mut at = offset;
                for piece in bytes.chunks_mut(4 << 20) {
                    source.read_exact_at(at, piece).map_err(|e| Error::io("reading a part", e))?;
                    at += piece.len() as u64;
                    f(piece)?;
                }
                Ok(())
            })?,
        };
        Ok((bytes, check))
    }

    /// The part's decoded bytes in pieces of at most `piece` bytes (see [`File::verify`]), its
    /// digest and its logical type's rules checked as they pass; the verdict comes when the
    /// last piece has: a caller must not publish what it was given before this returns.
    ///
    /// # Errors
    /// As [`File::verify`], and `each`'s errors.
    pub fn read_part(
        &self,
        name: &str,
        part: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<DigestCheck> {
        self.checked(name, part, &mut |f| {
            self.stream(name, part, piece, &mut |bytes| {
                f(bytes)?;
                each(bytes)
            })
        })
    }

    /// The digest and logical-type checks of part `part` on the decoded bytes `feed` hands to
    /// its argument, piece by piece.
    fn checked(
        &self,
        name: &str,
        part: &str,
        feed: &mut crate::write::Fill<'_>,
    ) -> Result<DigestCheck> {
        let (object, p) = self.part(name, part)?;
        let algorithm = p.digest.as_deref().and_then(|d| d.split_once(':')).map(|d| d.0);
        let mut gather = Gather::new(algorithm == Some("xxh3"), algorithm == Some("sha256"));
        let bools = p.logical.as_deref() == Some("bool");
        feed(&mut |bytes| {
            gather.update(bytes);
            // A `bool` byte above 1 stops the read at once.
            match gather.facts.above_one {
                Some((at, byte)) if bools => Err(Error::rule(
                    Rule::LayoutData,
                    format!("{name:?}/{part}: bool byte {at} is {byte:#04x}"),
                )),
                _ => Ok(()),
            }
        })?;
        verdict(name, part, object, p, &gather.finish())
    }

    /// A CSR object's data (`zt.sparse_csr/1`): its row pointers and column indices checked
    /// (`indptr` starts at 0, never decreases and ends at the count of values; each row's
    /// indices increase strictly and stay below the column count). Returns the row pointers
    /// and indices, widened.
    ///
    /// # Errors
    /// `layout_data`; `Unsupported` for an object of another layout; as [`File::decoded`].
    pub fn csr(&self, name: &str) -> Result<(Vec<u64>, Vec<u64>)> {
        let (object, _) = self.part(name, "indptr")?;
        if &*object.layout != "zt.sparse_csr/1" {
            return Err(Error::unsupported(format!("{name:?} is not a CSR object")));
        }
        let widen = |bytes: Vec<u8>, dtype: Dtype| -> Vec<u64> {
            match dtype {
                Dtype::U32 => bytes
                    .chunks_exact(4)
                    .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect(),
                _ => bytes
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            }
        };
        let dtype = object.parts["indptr"].dtype;
        let indptr = widen(self.decoded(name, "indptr")?, dtype);
        let indices = widen(self.decoded(name, "indices")?, dtype);
        let bad = |m: String| Error::rule(Rule::LayoutData, format!("{name:?}: {m}"));
        let columns = object.shape[1];
        if indptr.first() != Some(&0) {
            return Err(bad("indptr does not start at 0".into()));
        }
        for (row, pair) in indptr.windows(2).enumerate() {
            let (start, end) = (pair[0], pair[1]);
            if end < start || end > indices.len() as u64 {
                return Err(bad(format!("indptr decreases or passes the indices at row {row}")));
            }
            let cols =
                &indices[usize::try_from(start).unwrap_or(0)..usize::try_from(end).unwrap_or(0)];
            if let Some(c) = cols.iter().find(|&&c| c >= columns) {
                return Err(bad(format!("column {c} of row {row} is not below {columns}")));
            }
            if cols.windows(2).any(|w| w[1] <= w[0]) {
                return Err(bad(format!("the columns of row {row} do not increase strictly")));
            }
        }
        if indptr.last() != Some(&(indices.len() as u64)) {
            return Err(bad("indptr does not end at the count of values".into()));
        }
        Ok((indptr, indices))
    }
}

impl<S: ReadAt> File<S> {
    /// Whether part `p` may be decoded whole: what an encoded part claims to decode to is held
    /// only within the whole-decode limit (a seek table of a few hundred KiB can claim a
    /// terabyte; such a part is read in pieces instead).
    fn within_whole_limit(&self, name: &str, part: &str, p: &Part) -> Result<()> {
        let limit = self.limits.whole_decode_limit();
        if p.encoding.is_some() && p.decoded_len() > limit {
            return Err(Error::unsupported(format!(
                "{name:?}/{part}: {} decoded bytes is above the {limit} read whole; read it in \
                 pieces",
                p.decoded_len()
            )));
        }
        Ok(())
    }
}
