//! [`Reader`]: a cursor over untrusted bytes that never reads past the end.
//! Every parser of a byte format in this crate (envelopes, the durable
//! store's snapshot, sealed key exports) reads through it, so none indexes
//! past its input; each maps `None` to its own typed error.

/// Reads fields off the front of a byte slice.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader(bytes)
    }

    /// The next `n` bytes, or `None` if fewer are left.
    pub(crate) fn slice(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.slice(N)?.try_into().ok()
    }

    /// A length byte, then that many bytes.
    pub(crate) fn short_slice(&mut self) -> Option<&'a [u8]> {
        let [len] = self.take::<1>()?;
        self.slice(usize::from(len))
    }

    /// A big-endian `u32`.
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }

    /// A big-endian `u64`.
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_be_bytes)
    }

    /// How many bytes are not read yet.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Everything not read yet.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.0
    }
}
