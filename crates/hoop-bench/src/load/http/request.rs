//! The request bytes the HTTP load sends: one file's, or one of the static mix's.

use crate::load::http::mix;

/// The request bytes for `path` on `host`.
pub(crate) fn request_bytes(host: &str, path: &str, close: bool) -> Vec<u8> {
    let conn = if close { "close" } else { "keep-alive" };
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: {conn}\r\n\r\n").into_bytes()
}

/// The request bytes of one file of the static mix (with `Accept-Encoding: br, gzip`).
pub(crate) fn mix_request_bytes(host: &str, path: &str, close: bool) -> Vec<u8> {
    let conn = if close { "close" } else { "keep-alive" };
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: {}\r\nConnection: {conn}\r\n\r\n",
        mix::ACCEPT_ENCODING
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::request_bytes;

    #[test]
    fn requests_name_host_and_connection() {
        let r = String::from_utf8(request_bytes("h:1", "/f", true)).unwrap();
        assert_eq!(
            r,
            "GET /f HTTP/1.1\r\nHost: h:1\r\nConnection: close\r\n\r\n"
        );
    }
}
