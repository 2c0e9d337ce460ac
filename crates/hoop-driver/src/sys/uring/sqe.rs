//! Reading and changing fields of a built SQE, for fault injection (the `io-uring` crate's
//! `Entry` exposes its opcode and user_data but not its flags or length).

use io_uring::squeue::Entry;

/// `IOSQE_BUFFER_SELECT` (linux/io_uring.h): the operation picks a buffer from a buffer ring.
pub(super) const IOSQE_BUFFER_SELECT: u8 = 1 << 5;

/// `IOSQE_FIXED_FILE`: the SQE's `fd` is an index into the registered file table.
pub(super) const IOSQE_FIXED_FILE: u8 = 1 << 0;

/// Size of `struct io_uring_sqe`.
const SQE_BYTES: usize = 64;
/// Offset of `__u8 flags` in `struct io_uring_sqe`.
const FLAGS_AT: usize = 1;
/// Offset of `__s32 fd` in `struct io_uring_sqe`.
const FD_AT: usize = 4;
/// Offset of `__u32 len` in `struct io_uring_sqe`.
const LEN_AT: usize = 24;

// `Entry` is `#[repr(C)] struct Entry(io_uring_sqe)`: exactly the kernel's 64-byte SQE.
const _: () = assert!(std::mem::size_of::<Entry>() == SQE_BYTES);

fn bytes(entry: &Entry) -> &[u8; SQE_BYTES] {
    // SAFETY: `Entry` is a `repr(C)` wrapper of `io_uring_sqe`, 64 bytes (asserted above) of
    // plain integers and unions of integers, every byte initialized (the builders start from a
    // zeroed SQE); reading them as bytes is sound, and the borrow keeps `entry` alive.
    unsafe { &*(entry as *const Entry).cast::<[u8; SQE_BYTES]>() }
}

/// The SQE's flags and `len` (the byte count of a read, write, send or receive).
pub(super) fn flags_and_len(entry: &Entry) -> (u8, u32) {
    let b = bytes(entry);
    let len = u32::from_ne_bytes([b[LEN_AT], b[LEN_AT + 1], b[LEN_AT + 2], b[LEN_AT + 3]]);
    (b[FLAGS_AT], len)
}

/// The SQE's `fd` (a registered file's index under `IOSQE_FIXED_FILE`).
pub(super) fn fd(entry: &Entry) -> i32 {
    let b = bytes(entry);
    i32::from_ne_bytes([b[FD_AT], b[FD_AT + 1], b[FD_AT + 2], b[FD_AT + 3]])
}

/// Sets the SQE's `len`.
pub(super) fn set_len(entry: &mut Entry, len: u32) {
    // SAFETY: as in `bytes`; any value is a valid `__u32 len`, and the exclusive borrow of
    // `entry` makes this the only access.
    let b = unsafe { &mut *(entry as *mut Entry).cast::<[u8; SQE_BYTES]>() };
    b[LEN_AT..LEN_AT + 4].copy_from_slice(&len.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::{opcode, squeue::Flags, types::Fd};

    #[test]
    fn reads_and_sets_the_length_and_flags() {
        let mut buf = [0u8; 100];
        let mut e = opcode::Read::new(Fd(3), buf.as_mut_ptr(), 100).build();
        assert_eq!(flags_and_len(&e), (0, 100));
        assert_eq!(fd(&e), 3);
        set_len(&mut e, 40);
        assert_eq!(flags_and_len(&e).1, 40);
        let e = opcode::Recv::new(Fd(3), std::ptr::null_mut(), 4096)
            .buf_group(1)
            .build()
            .flags(Flags::BUFFER_SELECT);
        assert_eq!(flags_and_len(&e), (IOSQE_BUFFER_SELECT, 4096));
    }
}
