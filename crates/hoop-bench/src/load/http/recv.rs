//! A client connection's receive buffer: reads land after the unread bytes, parsers take
//! whole messages off the front, and the buffer is compacted or emptied before it grows.

use std::io;

use hoop::net::TcpStream;
use hoop::IoBuf;

/// Bytes one read asks for.
const READ_BYTES: usize = 64 * 1024;

/// Bytes `start..` of `buf` are received and not yet taken.
#[derive(Debug, Default)]
pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
}

impl RecvBuf {
    /// Empties the buffer for a new connection.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.start = 0;
    }

    /// Bytes received and not yet taken.
    pub(crate) fn unread(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Takes `n` unread bytes off the front.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
    }

    /// Reads once from `stream` after the unread bytes: the bytes read (0 at end of stream).
    pub(crate) async fn read_more(&mut self, stream: &TcpStream) -> io::Result<usize> {
        if self.start == self.buf.len() {
            self.reset();
        } else if self.buf.capacity() - self.buf.len() < READ_BYTES / 4 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.reserve(READ_BYTES);
        let at = self.buf.len();
        let cap = self.buf.capacity();
        let buf = std::mem::take(&mut self.buf);
        let (res, slice) = stream.read(buf.slice(at..cap)).await;
        self.buf = slice.into_inner();
        res
    }
}
