//! The test file's content and the random block stream, with nothing but `std`: the one
//! definition of what every engine's read is checked against. `hoop bench file`'s own engines
//! use it through [`super`]; the peers' binary (`peers/`, a separate cargo project) includes
//! this very file (`#[path]`), so a peer's reads are checked exactly as hoop's are.

/// Sector size of the stamps (the smallest O_DIRECT unit there is; `plan::size::SECTOR`, which
/// the flags are checked against, is the same, as a test in `content` checks).
pub(crate) const SECTOR: usize = 512;
/// Alignment of every buffer (O_DIRECT needs the device's logical block size; a page covers
/// every device).
pub(crate) const ALIGN: usize = 4096;
/// The filler of bytes 8..512 of every sector.
const FILL: u8 = 0xA5;
/// What a read buffer holds before the read: no valid stamp (offsets are below 2^63).
const POISON: u64 = u64::MAX;

/// Fills `buf` (a whole number of sectors) with the content of the file at byte `offset`.
pub(crate) fn stamp(buf: &mut [u8], offset: u64) {
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        let at = offset + (i * SECTOR) as u64;
        sector[..8].copy_from_slice(&at.to_le_bytes());
        sector[8..].fill(FILL);
    }
}

/// Marks a read buffer as not read yet (its first stamp can match no offset), so a read that
/// reports success without delivering data cannot pass the check.
pub(crate) fn poison(buf: &mut [u8]) {
    if buf.len() >= 8 {
        buf[..8].copy_from_slice(&POISON.to_le_bytes());
    }
}

/// Whether `buf` holds the file's content at `offset`: the first 8 bytes of every 512-byte
/// sector equal that sector's offset (the stamps only; the filler is not compared, for speed).
pub(crate) fn verify(buf: &[u8], offset: u64) -> bool {
    buf.chunks_exact(SECTOR).enumerate().all(|(i, sector)| {
        let mut stamp = [0u8; 8];
        stamp.copy_from_slice(&sector[..8]);
        u64::from_le_bytes(stamp) == offset + (i * SECTOR) as u64
    })
}

/// Whether `buf` is the file's full content at `offset`, filler included (the reuse check).
pub(crate) fn verify_full(buf: &[u8], offset: u64) -> bool {
    verify(buf, offset)
        && buf
            .chunks_exact(SECTOR)
            .all(|sector| sector[8..].iter().all(|&b| b == FILL))
}

/// A small fast PRNG (SplitMix64): random block offsets and the read/write mix.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for stream `stream`, seeded from the clock (like fio's `randrepeat=0`).
    pub fn new(stream: u64) -> Rng {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut r = Rng(now ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    /// A generator for stream `stream` of a fixed `seed` (a soak's runs repeat).
    pub fn seeded(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    /// `n` pseudo-random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..n` (`n` > 0; multiply-shift, no modulo bias worth the name).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// The random I/O stream of one submitter: which block, read or write.
#[derive(Debug, Clone)]
pub(crate) struct Picker {
    rng: Rng,
    blocks: u64,
    bs: u64,
    /// Percent of operations that are writes: 0, 50 or 100.
    write_pct: u64,
}

impl Picker {
    /// A stream over `blocks` blocks of `bs` bytes, `write_pct` % writes.
    pub(crate) fn new(stream: u64, blocks: u64, bs: usize, write_pct: u64) -> Picker {
        Picker {
            rng: Rng::new(stream),
            blocks,
            bs: bs as u64,
            write_pct,
        }
    }

    /// The next operation: (byte offset, is a write).
    pub(crate) fn next(&mut self) -> (u64, bool) {
        let off = self.rng.below(self.blocks) * self.bs;
        let write = match self.write_pct {
            0 => false,
            100 => true,
            p => self.rng.below(100) < p,
        };
        (off, write)
    }
}
