//! A `multipart/byteranges` answer (the rules: `crate::ranges`): its head, with the exact
//! `Content-Length` and the boundary, then each part's framing written into `out` ahead of the
//! part's bytes, which go out by the body path the file has anyway: copied from the cache,
//! `sendfile(2)` (the framing sent first with `MSG_MORE`), spliced (the framing flushed
//! first), or read a chunk at a time behind the framing (sent a batch at a time, so that many
//! small parts go out in few sends). The close delimiter is left in `out` for the loop's next send. Only a
//! request whose range set has two parts or more comes here.

use super::Conn;
use crate::ranges::{boundary, Multipart, Part};
use crate::response::{FileMeta, Head};
use crate::splice::PipePool;
use crate::status::Status;

/// Where the parts' bytes come from, and how they go out.
pub(super) enum Source<'a> {
    /// The cached file, copied into `out` behind each part's head.
    Memory(&'a [u8]),
    /// An open file sent with `sendfile(2)`.
    Sendfile(&'a hoop::fs::File),
    /// An open file spliced through the thread's pipes.
    Splice(&'a hoop::fs::File, &'a PipePool),
    /// An open file read a chunk at a time into `out`, sent a batch at a time.
    Stream(&'a hoop::fs::File),
}

impl Conn<'_> {
    /// Appends the head of a 206 of `parts` of a file of type `content_type` (the other
    /// fields as in `base`); keeps the parts
    /// for the body sender unless `head_only`. Returns the status and `(0, body length)`.
    pub(super) fn multipart_head(
        &mut self,
        base: Head<'_>,
        (parts, content_type): (Vec<Part>, &'static str),
        meta: &FileMeta,
        etag: &str,
        head_only: bool,
    ) -> (Status, (u64, u64)) {
        let m = Multipart {
            boundary: boundary(etag),
            parts,
            content_type,
            size: meta.size,
        };
        let len = m.body_len();
        let content_type = m.content_type_value();
        Head {
            status: Status::PartialContent,
            content_type: &content_type,
            content_length: Some(len),
            ..base
        }
        .write(&mut self.out);
        self.file_body.set(len);
        if !head_only {
            self.parts = Some(Box::new(m));
        }
        (Status::PartialContent, (0, len))
    }

    /// Sends the body of `m` (its head is in `out` already, or sent): each part's framing,
    /// then its bytes from `source`; the close delimiter stays in `out`. False if the
    /// connection failed (or the file shrank: the promised length cannot be kept).
    pub(super) async fn send_parts(&mut self, source: Source<'_>, m: &Multipart) -> bool {
        let cfg = &self.sh.cfg;
        for (i, p) in m.parts.iter().enumerate() {
            m.write_part_head(&mut self.out, i);
            let sent = match source {
                Source::Memory(body) => {
                    let Some(bytes) = usize::try_from(p.start)
                        .ok()
                        .zip(usize::try_from(p.start + p.len).ok())
                        .and_then(|(a, b)| body.get(a..b))
                    else {
                        return false;
                    };
                    self.out.extend_from_slice(bytes);
                    self.out.len() < cfg.out_batch_bytes || self.flush().await
                }
                Source::Sendfile(file) => self.sendfile_body(file, p.start, p.len).await,
                Source::Splice(file, pipes) => {
                    let Some(direct) = self.stream.as_direct() else {
                        return false;
                    };
                    if !self.flush().await {
                        return false;
                    }
                    crate::splice::send_file(
                        pipes,
                        direct,
                        file,
                        p.start,
                        p.len,
                        self.timer,
                        cfg.idle_timeout,
                    )
                    .await
                }
                Source::Stream(file) => {
                    // Sent only when `out` holds a batch: the small parts of a big file go
                    // out together.
                    let batch = self.sh.cfg.out_batch_bytes;
                    self.stream_file(file, (p.start, p.len), batch).await
                }
            };
            if !sent {
                return false;
            }
        }
        m.write_end(&mut self.out);
        true
    }
}
