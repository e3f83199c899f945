//! Per-component chains: the source digest over exactly the bytes read, hashed in order or
//! combined from shares, and the seek table of compressed frames.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use ztensor_format::{Digest, DigestAlgorithm, Error as FormatError, ErrorKind as Rule};
use ztensor_io::codec::{Combiner, Hasher, Share, seek_table};
use ztensor_io::{Error, Result};

use super::*;

/// Piece bytes that give their budget back when the last holder (the writing side, or the hash
/// chain) drops them. Raw pieces of data already in memory (slices, maps) are borrowed, not
/// copied.
pub(super) struct Tracked<'b> {
    pub(super) bytes: Cow<'b, [u8]>,
    pub(super) cost: u64,
    pub(super) budget: &'b Budget,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.budget.give(self.cost);
    }
}

/// A prepared piece: its stored bytes, its input length, and (for a component of one piece)
/// its digest.
pub(super) struct Prepared<'b> {
    pub(super) bytes: Arc<Tracked<'b>>,
    pub(super) input_len: u64,
    pub(super) digest: Option<ztensor_format::Digest>,
    /// Whether a component of one piece is stored raw although zstd was asked for, zstd not
    /// making it smaller ([`WriteOptions::stores_raw`]).
    pub(super) raw: bool,
}

/// What workers send the writing side: a piece (by sequence number), the digest of a
/// component of several pieces (by item), or the verdict on a raw source component's digest
/// (by item; `Digest(None)` when it matched, an error when not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Key {
    Piece(usize),
    Digest(usize),
    Source(usize),
}

pub(super) enum Payload<'b> {
    Piece(Prepared<'b>),
    Digest(Option<Digest>),
}

pub(super) type Message<'b> = (Key, Result<Payload<'b>>);

/// The digest of a component of several pieces, fed in order by whichever worker finishes the
/// next piece: one hasher per component, different components hashed at once. Where the
/// algorithm allows ([`Combiner`]: CRC-32C, and BLAKE3 over pieces of one power-of-two size),
/// each worker hashes its own piece and the chain only combines the shares, in order.
pub(super) struct Chain<'b> {
    pub(super) state: Mutex<ChainState<'b>>,
    pub(super) kernels: Kernels,
    pub(super) pieces: usize,
    pub(super) end: ChainEnd,
    /// For computing shares outside the lock; `None` to hash the pieces in order.
    pub(super) shares: Option<Combiner>,
}

/// An item's chain, if it has one: boxed, because a chain holds hash states (hundreds of bytes),
/// most items have none, and a file may hold millions of items.
pub(super) type MaybeChain<'b> = Option<Box<Chain<'b>>>;

/// What a chain hashes, and what it sends when it has hashed every piece.
pub(super) enum ChainEnd {
    /// The written bytes (and, for zstd of several frames, the seek table): `Key::Digest`.
    Output { zstd: bool },
    /// The source's stored bytes, as the workers read them: `Key::Source`, checked here.
    Source { expected: Digest },
}

pub(super) struct ChainState<'b> {
    pub(super) next: usize,
    pub(super) busy: bool,
    pub(super) hasher: Option<Hasher>,
    pub(super) pending: BTreeMap<usize, (Arc<Tracked<'b>>, u64)>,
    pub(super) frames: Vec<(u64, u64)>,
    /// The shares combined so far, and those that came before their turn (with their frame).
    pub(super) combiner: Option<Combiner>,
    pub(super) shared: BTreeMap<usize, (Share, (u64, u64))>,
}

impl<'b> Chain<'b> {
    /// A chain over `pieces` pieces of `size` bytes (`exact`: every piece but the last is that
    /// long), hashing with `algorithm`; `None` for an algorithm this crate cannot compute.
    pub(super) fn new(
        algorithm: &DigestAlgorithm,
        pieces: usize,
        size: u64,
        exact: bool,
        end: ChainEnd,
        kernels: Kernels,
    ) -> Option<Chain<'b>> {
        let hasher = Hasher::new(algorithm)?;
        // BLAKE3 combines only pieces of exactly the power-of-two size, and at least two.
        let shares = Combiner::new(algorithm, size)
            .filter(|_| *algorithm == DigestAlgorithm::Crc32c || (exact && pieces > 1));
        let state = ChainState {
            next: 0,
            busy: false,
            hasher: Some(hasher),
            pending: BTreeMap::new(),
            frames: Vec::new(),
            combiner: shares.clone(),
            shared: BTreeMap::new(),
        };
        Some(Chain { state: Mutex::new(state), kernels, pieces, end, shares })
    }

    /// Adds piece `index`; hashes every piece that is now next in line, unless another worker
    /// is already doing so (or, with a combiner, hashes this piece here and combines the shares
    /// now in line). Sends the digest after the last piece.
    pub(super) fn push(
        &self,
        item: usize,
        index: usize,
        piece: Arc<Tracked<'b>>,
        input_len: u64,
        tx: &Sender<Message<'b>>,
    ) {
        let lock = || self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(shares) = &self.shares {
            self.kernels.digest_latency(input_len);
            let share = shares.share(index as u64, &piece.bytes);
            let frame = (piece.bytes.len() as u64, input_len);
            drop(piece);
            let mut state = lock();
            state.shared.insert(index, (share, frame));
            loop {
                let next = state.next;
                let Some((share, frame)) = state.shared.remove(&next) else { return };
                if let Some(c) = state.combiner.as_mut() {
                    c.push(share);
                }
                state.frames.push(frame);
                state.next += 1;
                if state.next == self.pieces {
                    let combiner = state.combiner.take();
                    self.send(item, &state.frames, Sum::Combined(combiner), tx);
                    return;
                }
            }
        }
        let mut state = lock();
        state.pending.insert(index, (piece, input_len));
        if state.busy {
            return;
        }
        state.busy = true;
        loop {
            let next = state.next;
            let Some((piece, input_len)) = state.pending.remove(&next) else {
                state.busy = false;
                return;
            };
            let mut hasher = state.hasher.take();
            drop(state);
            self.kernels.digest_latency(input_len);
            if let Some(h) = hasher.as_mut() {
                h.update(&piece.bytes);
            }
            let frame = (piece.bytes.len() as u64, input_len);
            drop(piece);
            state = lock();
            state.hasher = hasher;
            state.frames.push(frame);
            state.next += 1;
            if state.next == self.pieces {
                let hasher = state.hasher.take();
                self.send(item, &state.frames, Sum::Hashed(hasher), tx);
                state.busy = false;
                return;
            }
        }
    }

    /// Sends the chain's result: the output digest (with the seek table of `frames` hashed in,
    /// for zstd of several frames), or the verdict on the source digest.
    pub(super) fn send(
        &self,
        item: usize,
        frames: &[(u64, u64)],
        sum: Sum,
        tx: &Sender<Message<'b>>,
    ) {
        let table = match &self.end {
            ChainEnd::Output { zstd: true } if self.pieces > 1 => Some(table_of(frames)),
            _ => None,
        };
        let digest = (|| -> Result<Option<Digest>> {
            let table = table.transpose()?;
            let table = table.as_deref().unwrap_or_default();
            Ok(match sum {
                Sum::Hashed(mut hasher) => {
                    if let Some(h) = hasher.as_mut() {
                        h.update(table);
                    }
                    hasher.map(Hasher::finish)
                }
                Sum::Combined(combiner) => combiner.and_then(|mut c| {
                    // A table after BLAKE3 pieces cannot be combined (never planned so).
                    c.tail(table).then(|| c.finish()).flatten()
                }),
            })
        })();
        let message = match &self.end {
            ChainEnd::Output { .. } => (Key::Digest(item), digest.map(Payload::Digest)),
            ChainEnd::Source { expected } => {
                let verdict = match digest {
                    Ok(Some(actual)) if actual == *expected => Ok(Payload::Digest(None)),
                    Ok(actual) => Err(Error::from(source_mismatch(
                        expected,
                        actual.map_or("none".to_owned(), |a| a.to_string()),
                    ))),
                    Err(e) => Err(e),
                };
                (Key::Source(item), verdict)
            }
        };
        let _ = tx.send(message);
    }
}

/// How a chain summed its pieces.
pub(super) enum Sum {
    /// In order, by one hasher.
    Hashed(Option<Hasher>),
    /// By shares, combined in order.
    Combined(Option<Combiner>),
}

/// The seek table of frames of (compressed, decompressed) sizes.
pub(super) fn table_of(frames: &[(u64, u64)]) -> Result<Vec<u8>> {
    let sizes: Option<Vec<(u32, u32)>> = frames
        .iter()
        .map(|&(c, d)| Some((u32::try_from(c).ok()?, u32::try_from(d).ok()?)))
        .collect();
    let sizes = sizes.ok_or_else(|| {
        Error::from(FormatError::new(Rule::InvalidInput, "a frame larger than 4 GiB"))
    })?;
    Ok(seek_table(&sizes))
}
