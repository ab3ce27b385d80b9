//! A cursor over the fuzzer's bytes that never fails: past the end it
//! yields zeros and empty slices, so every input decodes to something.

/// Reads small fields off the front of the fuzzer's input.
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    /// Wraps the fuzzer's input.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((first, rest)) => {
                self.bytes = rest;
                *first
            }
            None => 0,
        }
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }

    /// The next three bytes, little-endian.
    pub fn u24(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u8()) << 16
    }

    /// Up to `n` bytes.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.bytes.split_at(n.min(self.bytes.len()));
        self.bytes = tail;
        head
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}
