//! What the test file holds and how every I/O is checked: each 512-byte sector begins with its
//! own byte offset and the rest is a fixed pattern, so writes keep the file valid and a read
//! counts only when every sector carries its offset; also the aligned buffers and the random
//! offsets.

mod pattern;

pub use pattern::Rng;
pub(crate) use pattern::{poison, stamp, verify, verify_full, Picker, ALIGN, SECTOR};

pub(crate) use hoop::AlignedBuf;

/// A zeroed, page-aligned buffer of `len` bytes (O_DIRECT-safe; `len` > 0): hoop's
/// [`AlignedBuf`], which the engines that are not hoop's use through plain slices.
pub(crate) fn aligned(len: usize) -> std::io::Result<AlignedBuf> {
    AlignedBuf::zeroed(len, ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_and_plans_agree_on_the_sector() {
        assert_eq!(SECTOR, crate::plan::size::SECTOR);
    }

    #[test]
    fn stamped_blocks_verify_at_their_offset_only() {
        let mut b = aligned(4096).unwrap();
        assert_eq!(b.as_mut_slice_full().as_ptr() as usize % ALIGN, 0);
        stamp(b.as_mut_slice_full(), 8192);
        assert!(verify(b.as_slice_full(), 8192));
        assert!(verify_full(b.as_slice_full(), 8192));
        assert!(!verify(b.as_slice_full(), 4096));
        poison(b.as_mut_slice_full());
        assert!(!verify(b.as_slice_full(), 8192));
        stamp(b.as_mut_slice_full(), 8192);
        b.as_mut_slice_full()[100] = 0;
        assert!(verify(b.as_slice_full(), 8192));
        assert!(!verify_full(b.as_slice_full(), 8192));
    }

    #[test]
    fn picks_stay_inside_the_file() {
        let mut p = Picker::new(1, 3, 4096, 50);
        let mut writes = 0;
        for _ in 0..10_000 {
            let (off, w) = p.next();
            assert!(off < 3 * 4096 && off % 4096 == 0);
            writes += u32::from(w);
        }
        assert!((4000..6000).contains(&writes), "{writes}");
    }
}
