//! A response's body as it arrives (its chunks, never copied into one buffer), where a large
//! read's bytes go, and reading bodies within what was asked for.

use super::*;

/// A range fetched ahead: its bytes, or why they could not be had, once they are there.
pub(super) type Pending =
    futures_util::future::Shared<futures_util::future::BoxFuture<'static, Result<Chunks, Error>>>;

/// A body as it arrived: its chunks, in order, never copied into one buffer (the bytes are
/// copied once, into the reader's).
#[derive(Debug, Clone)]
pub(super) struct Chunks(pub(super) Arc<[Bytes]>);

impl Chunks {
    pub(super) fn len(&self) -> u64 {
        self.0.iter().map(|c| c.len() as u64).sum()
    }

    /// The slices that hold `len` bytes from `at`, in order (fewer bytes when the chunks end
    /// first).
    pub(super) fn slices(&self, mut at: u64, len: u64) -> impl Iterator<Item = &[u8]> {
        let mut left = len;
        self.0.iter().filter_map(move |chunk| {
            let n = chunk.len() as u64;
            if left == 0 || at >= n {
                at = at.saturating_sub(n);
                return None;
            }
            let take = (n - at).min(left);
            let slice = &chunk[to_usize(at)..to_usize(at + take)];
            (at, left) = (0, left - take);
            Some(slice)
        })
    }

    /// Fills `dest` with the bytes from `at`; false when they do not reach that far.
    #[cfg(test)]
    pub(super) fn copy_to(&self, at: u64, dest: &mut [u8]) -> bool {
        let mut filled = 0;
        for slice in self.slices(at, dest.len() as u64) {
            dest[filled..filled + slice.len()].copy_from_slice(slice);
            filled += slice.len();
        }
        filled == dest.len()
    }
}

/// Where a large read's bytes go.
pub(super) enum Out<'a> {
    /// Into a buffer as long as the read.
    Into(&'a mut [u8]),
    /// Handed on in order ([`ReadAt::read_each_at`]): what is held (fetched ahead, the
    /// suffix, a cached block) as it is; what must be fetched now, into `scratch` a piece at
    /// a time.
    Each { scratch: &'a mut [u8], each: &'a mut dyn FnMut(&[u8]) -> std::io::Result<()> },
}

impl Out<'_> {
    /// `bytes`, which lie `at` bytes into the read.
    pub(super) fn held(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Into(buf) => {
                let dest = buf.get_mut(to_usize(at)..).and_then(|d| d.get_mut(..bytes.len()));
                dest.ok_or(std::io::ErrorKind::UnexpectedEof)?.copy_from_slice(bytes);
                Ok(())
            }
            Out::Each { each, .. } => each(bytes),
        }
    }

    /// `len` bytes of `chunks` from `from`, which lie `at` bytes into the read; false when the
    /// chunks end first.
    pub(super) fn chunks(
        &mut self,
        mut at: u64,
        chunks: &Chunks,
        from: u64,
        len: u64,
    ) -> std::io::Result<bool> {
        let mut given = 0;
        for slice in chunks.slices(from, len) {
            self.held(at, slice)?;
            at += slice.len() as u64;
            given += slice.len() as u64;
        }
        Ok(given == len)
    }
}

/// The body of `got`, read to its end (`object_store` resumes a body cut mid-way from the
/// byte where it stopped, pinned to the same ETag), counted.
pub(super) async fn body(
    shown: &str,
    what: &str,
    got: GetResult,
    counters: &Counters,
) -> Result<Bytes, Error> {
    let len = got.range.end - got.range.start;
    let mut stream = got.into_stream();
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(DIRECT_LEN * 64));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::from_store(what, shown, e))?;
        counters.add_bytes(chunk.len());
        if out.len() as u64 + chunk.len() as u64 > len {
            return Err(Error::new(
                ErrorKind::Request,
                shown,
                format!("{what}: the server sent more than the {len} bytes asked"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// The body of `got` as it arrives, its chunks kept as they are (resumed as [`body`] is),
/// counted.
pub(super) async fn body_chunks(
    shown: &str,
    got: GetResult,
    counters: &Counters,
) -> Result<Chunks, Error> {
    let len = got.range.end - got.range.start;
    let mut stream = got.into_stream();
    let (mut chunks, mut total) = (Vec::new(), 0u64);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::from_store("reading ahead", shown, e))?;
        counters.add_bytes(chunk.len());
        total += chunk.len() as u64;
        if total > len {
            return Err(Error::new(
                ErrorKind::Request,
                shown,
                format!("reading ahead: the server sent more than the {len} bytes asked"),
            ));
        }
        chunks.push(chunk);
    }
    Ok(Chunks(chunks.into()))
}

/// The body of `got` written into `dest`, which is exactly as long as the range asked for
/// (resumed as [`body`] is), counted.
pub(super) async fn body_into(
    shown: &str,
    what: &str,
    got: GetResult,
    dest: &mut [u8],
    counters: &Counters,
) -> Result<(), Error> {
    let want = dest.len();
    let short = |n: usize| {
        Error::new(
            ErrorKind::Request,
            shown,
            format!("{what}: the server sent {n} bytes, not the {want} asked"),
        )
    };
    if got.range.end - got.range.start != dest.len() as u64 {
        let n = usize::try_from(got.range.end - got.range.start).unwrap_or(usize::MAX);
        return Err(short(n));
    }
    let mut stream = got.into_stream();
    let mut at = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::from_store(what, shown, e))?;
        counters.add_bytes(chunk.len());
        let Some(place) = at.checked_add(chunk.len()).and_then(|end| dest.get_mut(at..end)) else {
            return Err(Error::new(
                ErrorKind::Request,
                shown,
                format!("{what}: the server sent more than the {want} bytes asked"),
            ));
        };
        place.copy_from_slice(&chunk);
        at += chunk.len();
    }
    if at != dest.len() {
        return Err(short(at));
    }
    Ok(())
}

pub(super) fn changed(shown: &str) -> Error {
    Error::new(
        ErrorKind::Changed,
        shown,
        "reading: the object changed while it was read (its ETag or size moved); nothing read from it is used",
    )
}

/// Whether a failed suffix request was the server refusing the range (an empty object answers
/// one with 416), which a HEAD then explains. Told by the status `object_store` quotes, not by
/// digits anywhere in its text: the endpoint's port or the time taken may hold "416".
pub(super) fn range_refused(e: &object_store::Error) -> bool {
    let text = e.to_string();
    crate::error::status_in_text(&text) == Some(416) || text.contains("Range Not Satisfiable")
}
