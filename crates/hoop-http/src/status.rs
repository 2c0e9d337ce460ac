//! The status codes the server answers with.

/// A response status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 200: the whole file.
    Ok,
    /// 206: one range of the file.
    PartialContent,
    /// 301: a directory asked without its trailing slash.
    MovedPermanently,
    /// 304: the client's copy is current.
    NotModified,
    /// 400: a malformed request line or header, bad percent-encoding, a NUL in the path.
    BadRequest,
    /// 403: a directory without an index (and no `--autoindex`), or a file the server may not
    /// read.
    Forbidden,
    /// 404: no such file (also dotfiles, and whatever lies outside the root).
    NotFound,
    /// 405: a method other than GET and HEAD.
    MethodNotAllowed,
    /// 412: `If-Match` or `If-Unmodified-Since` failed (RFC 9110, 13.1.1 and 13.1.4).
    PreconditionFailed,
    /// 413: a request with a body.
    PayloadTooLarge,
    /// 414: a request target over the limit.
    UriTooLong,
    /// 416: a range outside the file.
    RangeNotSatisfiable,
    /// 431: a header block too large or with too many fields.
    HeaderFieldsTooLarge,
    /// 500: the server failed to read a file it found.
    InternalServerError,
    /// 505: not HTTP/1.x.
    VersionNotSupported,
}

impl Status {
    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::PartialContent => 206,
            Status::MovedPermanently => 301,
            Status::NotModified => 304,
            Status::BadRequest => 400,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::PreconditionFailed => 412,
            Status::PayloadTooLarge => 413,
            Status::UriTooLong => 414,
            Status::RangeNotSatisfiable => 416,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalServerError => 500,
            Status::VersionNotSupported => 505,
        }
    }

    /// The reason phrase.
    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::PartialContent => "Partial Content",
            Status::MovedPermanently => "Moved Permanently",
            Status::NotModified => "Not Modified",
            Status::BadRequest => "Bad Request",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::PreconditionFailed => "Precondition Failed",
            Status::PayloadTooLarge => "Payload Too Large",
            Status::UriTooLong => "URI Too Long",
            Status::RangeNotSatisfiable => "Range Not Satisfiable",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }

    /// Whether the connection closes after this response: the request could not be framed
    /// (or carried a body the server will not read), so what follows it cannot be trusted.
    pub fn closes_connection(self) -> bool {
        matches!(
            self,
            Status::BadRequest
                | Status::PayloadTooLarge
                | Status::UriTooLong
                | Status::HeaderFieldsTooLarge
                | Status::VersionNotSupported
                | Status::InternalServerError
        )
    }
}
