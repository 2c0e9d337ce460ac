//! The head of a file response: the conditionals and the range decide the status, and the
//! head goes into `out` with the validators, the coding and `Vary`.

use super::Conn;
use crate::encoding::Coding;
use crate::parse::Request;
use crate::response::{decide, write_status, Decision, FileMeta, Head};
use crate::status::Status;

/// How a file's body goes out: the content type of the file asked for (also when a
/// precompressed variant is sent), the variant's coding, and whether `Vary: Accept-Encoding`
/// goes with it (every response of a compressible file while precompressed files are on, so
/// that a shared cache keeps the variants apart whichever one it saw first).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rep {
    pub(super) content_type: &'static str,
    pub(super) coding: Option<Coding>,
    pub(super) vary: bool,
}

impl Conn<'_> {
    /// Decides the answer for a file of identity `meta` with `(etag, last_modified)` (the
    /// conditionals and the range) and appends its head; returns the status and the body
    /// range to send (`head_only`: a HEAD, whose response never has a body).
    pub(super) fn answer_head(
        &mut self,
        req: &Request,
        meta: &FileMeta,
        (etag, last_modified): (&str, &str),
        rep: Rep,
        date: &str,
        (keep, head_only): (bool, bool),
    ) -> (Status, (u64, u64)) {
        let decision = decide(req, meta, (etag, last_modified), self.sh.cfg.max_ranges);
        let validators = (etag, last_modified);
        self.write_file_head(decision, meta, date, (keep, head_only), validators, rep)
    }

    /// Appends the head for `decision`; returns the status and the body range to send.
    /// `head_only` (a HEAD) leaves out the body of a 416 too, whose head keeps the
    /// `Content-Length` a GET would get.
    pub(super) fn write_file_head(
        &mut self,
        decision: Decision,
        meta: &FileMeta,
        date: &str,
        (keep, head_only): (bool, bool),
        (etag, last_modified): (&str, &str),
        rep: Rep,
    ) -> (Status, (u64, u64)) {
        let base = Head {
            content_type: rep.content_type,
            validators: Some((last_modified, etag)),
            accept_ranges: self.sh.cfg.max_ranges > 0,
            content_encoding: rep.coding.map(Coding::name),
            vary: rep.vary,
            cache_control: self.cache_control,
            ..self.head(Status::Ok, date, keep)
        };
        match decision {
            Decision::NotModified => {
                Head {
                    status: Status::NotModified,
                    ..base
                }
                .write(&mut self.out);
                (Status::NotModified, (0, 0))
            }
            Decision::PreconditionFailed => {
                // An error about the file, not the file: its text, no validators, no ranges.
                let head = Head {
                    status: Status::PreconditionFailed,
                    content_type: "text/plain",
                    validators: None,
                    accept_ranges: false,
                    content_encoding: None,
                    vary: false,
                    cache_control: b"",
                    ..base
                };
                write_status(&mut self.out, head, head_only);
                (Status::PreconditionFailed, (0, 0))
            }
            Decision::Unsatisfiable => {
                let head = Head {
                    status: Status::RangeNotSatisfiable,
                    content_range: Some((0, 0, meta.size)),
                    validators: None,
                    // The body is the status text, and says so.
                    content_type: "text/plain",
                    content_encoding: None,
                    // An error: no Cache-Control.
                    cache_control: b"",
                    ..base
                };
                write_status(&mut self.out, head, head_only);
                (Status::RangeNotSatisfiable, (0, 0))
            }
            Decision::Full => {
                Head {
                    content_length: Some(meta.size),
                    ..base
                }
                .write(&mut self.out);
                self.file_body.set(meta.size);
                (Status::Ok, (0, meta.size))
            }
            Decision::Partial { start, len } => {
                Head {
                    status: Status::PartialContent,
                    content_length: Some(len),
                    content_range: Some((start, len, meta.size)),
                    ..base
                }
                .write(&mut self.out);
                self.file_body.set(len);
                (Status::PartialContent, (start, len))
            }
            Decision::Multi(parts) => {
                self.multipart_head(base, (parts, rep.content_type), meta, etag, head_only)
            }
        }
    }
}
