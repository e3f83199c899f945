//! Strided views read as the contiguous tensors they show: offsets in order, a permutation
//! in place, a window of a storage read ahead.

use ztensor_io::ReadAt;

/// Calls `f` with the offset (in elements, from the view's first element) of every element of a
/// view of `shape` and `strides`, in C order. `at` never leaves the view's span: a dimension
/// steps forward only while it has elements left, and rewinds what it stepped.
pub(super) fn each_offset(
    shape: &[u64],
    strides: &[u64],
    numel: u64,
    mut f: impl FnMut(u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if numel == 0 {
        return Ok(());
    }
    let mut index = vec![0u64; shape.len()];
    let mut at = 0u64;
    for _ in 0..numel {
        f(at)?;
        for k in (0..shape.len()).rev() {
            if index[k] + 1 < shape[k] {
                index[k] += 1;
                at += strides[k];
                break;
            }
            at -= strides[k] * (shape[k] - 1);
            index[k] = 0;
        }
    }
    Ok(())
}

/// Reorders, in place, the elements (of `size` bytes) of a view whose span holds each of its
/// elements exactly once, from storage order to C order: element `c` of the result is the one
/// at the storage offset its index gives through `strides`. Cycles of the permutation are
/// followed with one bit per element to mark those placed, so no second buffer is needed.
pub(super) fn permute_in_place(
    data: &mut [u8],
    size: usize,
    shape: &[u64],
    strides: &[u64],
) -> std::io::Result<()> {
    let count = data.len() / size.max(1);
    let bad = || std::io::Error::other("a view whose elements are not a permutation of its span");
    // The storage offset of C-order element `c`.
    let source_of = |mut c: u64| -> u64 {
        let mut at = 0u64;
        for (d, s) in shape.iter().zip(strides).rev() {
            at += (c % d) * s;
            c /= d;
        }
        at
    };
    let mut placed = ztensor_io::try_zeroed(count.div_ceil(8) as u64, "a view's permutation")?;
    let mut held = vec![0u8; size];
    let mut moving = vec![0u8; size];
    for start in 0..count {
        if placed[start / 8] & (1 << (start % 8)) != 0 {
            continue;
        }
        // Follow the cycle through `start`: each place takes the element its source holds.
        held.copy_from_slice(&data[start * size..(start + 1) * size]);
        let mut here = start;
        loop {
            placed[here / 8] |= 1 << (here % 8);
            let from = usize::try_from(source_of(here as u64)).map_err(|_| bad())?;
            if from >= count {
                return Err(bad());
            }
            if from == start {
                data[here * size..(here + 1) * size].copy_from_slice(&held);
                break;
            }
            if placed[from / 8] & (1 << (from % 8)) != 0 {
                return Err(bad());
            }
            moving.copy_from_slice(&data[from * size..(from + 1) * size]);
            data[here * size..(here + 1) * size].copy_from_slice(&moving);
            here = from;
        }
    }
    Ok(())
}

/// A small window over a byte range of a source, moved to wherever the next element lies.
pub(super) struct Window {
    pub(super) base: u64,
    pub(super) len: u64,
    pub(super) start: u64,
    pub(super) bytes: Vec<u8>,
}

impl Window {
    pub(super) const SIZE: u64 = 1 << 20;

    pub(super) fn new(base: u64, len: u64) -> Window {
        Window { base, len, start: 0, bytes: Vec::new() }
    }

    /// `n` bytes at `at` (relative to the range), reading a new window when they are not in
    /// the current one.
    pub(super) fn get<S: ReadAt + ?Sized>(
        &mut self,
        source: &S,
        at: u64,
        n: usize,
    ) -> std::io::Result<&[u8]> {
        let end = at + n as u64;
        if end > self.len {
            return Err(std::io::Error::other("an element past its storage"));
        }
        let have = self.start..self.start + self.bytes.len() as u64;
        if !(have.contains(&at) && end <= have.end) {
            self.start = at;
            let take = Window::SIZE.max(n as u64).min(self.len - at);
            self.bytes.resize(usize::try_from(take).unwrap_or(n), 0);
            source.read_exact_at(self.base + at, &mut self.bytes)?;
        }
        let from = usize::try_from(at - self.start).unwrap_or(0);
        Ok(&self.bytes[from..from + n])
    }
}
