//! Counting answered requests and handing them to the access log.

use std::time::SystemTime;

use super::Conn;
use crate::access_log::{AccessLogEntry, Hook, RequestLine};
use crate::parse::{Method, Request};
use crate::status::Status;

impl Conn<'_> {
    /// Counts the answered request and gives it to the access log, if any.
    pub(super) fn log(&self, req: &Request, status: Status) {
        let method = match req.method {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Other => "OTHER",
        };
        let body = match self.body_bytes(status) {
            _ if req.method == Method::Head => 0,
            n => n,
        };
        let line = RequestLine {
            method,
            target: &req.target,
            minor_version: req.minor_version,
            http2: self.stream.frames_bodies(),
            referer: req.referer.as_deref(),
            user_agent: req.user_agent.as_deref(),
        };
        self.log_entry(Some(line), status, body);
    }

    /// Counts an unparsed request (answered with `status`) and logs it as `"-"`.
    pub(super) fn log_line(&self, status: Status) {
        self.log_entry(None, status, self.body_bytes(status));
    }

    /// The body bytes of the response with `status` (not to `HEAD`).
    pub(super) fn body_bytes(&self, status: Status) -> u64 {
        match status {
            Status::Ok | Status::PartialContent => self.file_body.take(),
            Status::NotModified => 0,
            // `write_status`'s body, `CODE REASON\n`, or a custom error page.
            s => self.error_body_bytes(s),
        }
    }

    pub(super) fn log_entry(
        &self,
        request: Option<RequestLine<'_>>,
        status: Status,
        body_bytes: u64,
    ) {
        self.log_code(request, status.code(), body_bytes);
    }

    /// Counts an answered request with status `code` and gives it to the access log.
    pub(super) fn log_code(&self, request: Option<RequestLine<'_>>, code: u16, body_bytes: u64) {
        self.sh.requests.set(self.sh.requests.get() + 1);
        if let Some(Hook(hook)) = &self.sh.log {
            let time = SystemTime::now();
            // The hook cannot reach the date cache: borrowing it meanwhile is safe.
            let mut date = self.sh.date.borrow_mut();
            hook(&AccessLogEntry {
                remote: self.remote,
                request,
                status: code,
                body_bytes,
                time,
                date: date.now(),
            });
        }
    }
}
