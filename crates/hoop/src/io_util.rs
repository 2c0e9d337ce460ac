//! The loops behind every `write_all` and `read_exact`.

use std::future::Future;
use std::io;

use hoop_driver::{BufResult, IoBuf, IoBufMut, Slice};

/// Runs `step` on `buf[done..total]` until `total` bytes are done, retrying on `Interrupted`.
/// A step that moves no byte ends the loop with `(zero_kind, zero_msg)` (a closed peer, end of
/// file). `step` gets the slice and the count done so far (for positional I/O).
pub(crate) async fn until_done<B, F, Fut>(
    buf: B,
    total: usize,
    zero_kind: io::ErrorKind,
    zero_msg: &'static str,
    mut step: F,
) -> BufResult<(), B>
where
    B: IoBuf,
    F: FnMut(Slice<B>, usize) -> Fut,
    Fut: Future<Output = BufResult<usize, Slice<B>>>,
{
    let mut done = 0;
    let mut buf = buf;
    while done < total {
        let (res, slice) = step(buf.slice(done..total), done).await;
        buf = slice.into_inner();
        match res {
            Ok(0) => return (Err(io::Error::new(zero_kind, zero_msg)), buf),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (Err(e), buf),
        }
    }
    (Ok(()), buf)
}

/// `read_exact`: reads into `buf` until exactly [`IoBufMut::bytes_to_fill`] bytes are there
/// (its length, or a slice's whole view). Each read goes into `buf.slice(done..total)`, so by
/// the read rule the buffer's length is always exactly the bytes read so far: on success
/// `total`, on an error or end of stream (`UnexpectedEof`, `eof_msg`) what arrived before it.
pub(crate) async fn fill_exact<B, F, Fut>(
    buf: B,
    eof_msg: &'static str,
    step: F,
) -> BufResult<(), B>
where
    B: IoBufMut,
    F: FnMut(Slice<B>, usize) -> Fut,
    Fut: Future<Output = BufResult<usize, Slice<B>>>,
{
    let total = buf.bytes_to_fill();
    until_done(buf, total, io::ErrorKind::UnexpectedEof, eof_msg, step).await
}

/// Reads a whole file: `read_at(buf.slice(len..), pos)` until a read returns 0. `size_hint` (the
/// file's size from its metadata) is a hint only: files in /proc say 0, and a file may grow
/// while it is read.
pub(crate) async fn read_to_end<F, Fut>(size_hint: u64, mut read_at: F) -> io::Result<Vec<u8>>
where
    F: FnMut(Slice<Vec<u8>>, u64) -> Fut,
    Fut: Future<Output = BufResult<usize, Slice<Vec<u8>>>>,
{
    let hint = usize::try_from(size_hint).unwrap_or(0);
    let mut buf = Vec::with_capacity(hint.saturating_add(1).max(64));
    let mut pos = 0u64;
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().max(8192));
        }
        let len = buf.len();
        let (res, slice) = read_at(buf.slice(len..), pos).await;
        buf = slice.into_inner();
        match res {
            Ok(0) => break,
            Ok(n) => pos += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}
