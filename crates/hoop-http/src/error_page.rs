//! Custom error pages ([`Config::error_pages`](crate::Config::error_pages), `hoop serve http
//! --error-page 404=/404.html`), as nginx's `error_page` and static-web-server's
//! `page404`/`page50x`: a file under the root answers for 404 or 403 in place of the
//! built-in `404 Not Found` text.
//!
//! The page is read **once, when the server is made** (`Server::new`, `Builder::build`):
//! opened beneath the root as any request's file (no `..`, no segment starting with `.`, no
//! symlink out of the root), a regular file of at most [`MAX_ERROR_PAGE_BYTES`], kept in
//! memory and shared by every thread; its `Content-Type` comes from its extension. Editing the
//! file later changes nothing until the server is made again. A page that cannot be read
//! then (missing, unreadable, too big, outside the root) does not stop the server: that
//! status keeps the built-in page, and one line on stderr says so (`hoop-http: error page 404
//! "/404.html": No such file or directory (os error 2); the built-in page answers`). A path
//! that can never name a file under the root (`..`, a dotfile, empty) is a [`ConfigError`].
//!
//! The page is answered with the error status, its own type and `Content-Length`, no
//! validators and no `Cache-Control`; to HEAD, the head only; the connection stays open as
//! with the built-in page. The path is a file path relative to the root (a leading `/` or
//! not), not a URL: it is not percent-decoded.
//!
//! (Plain std only: the fuzz target compiles `config.rs`, which names this file's type.)

use std::fmt;

use super::config_error::ConfigError;

/// Largest error page file: bigger is reported at start and the built-in page answers.
pub const MAX_ERROR_PAGE_BYTES: u64 = 1 << 20;

/// The statuses a custom page may answer for.
pub const ERROR_PAGE_STATUSES: [u16; 2] = [403, 404];

/// A custom error page: the status it answers for (403 or 404) and the path of its file under
/// the root (`/404.html`). See the [module docs](self). Checked by
/// [`Config::validate`](crate::Config::validate) (or at once by [`parse`](ErrorPage::parse)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPage {
    status: u16,
    path: String,
}

impl fmt::Display for ErrorPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.status, self.path)
    }
}

impl ErrorPage {
    /// The page for `status` at `path` under the root (not checked yet: [`check`](Self::check)).
    pub fn new(status: u16, path: impl Into<String>) -> ErrorPage {
        ErrorPage {
            status,
            path: path.into(),
        }
    }

    /// `STATUS=PATH` (`404=/404.html`), checked.
    pub fn parse(s: &str) -> Result<ErrorPage, ConfigError> {
        let bad = |reason| ConfigError::BadErrorPage {
            page: s.to_string(),
            reason,
        };
        let (status, path) = s
            .split_once('=')
            .ok_or_else(|| bad("an error page is STATUS=PATH (404=/404.html)"))?;
        let status = status
            .trim()
            .parse::<u16>()
            .map_err(|_| bad("the status is 403 or 404"))?;
        let page = ErrorPage::new(status, path.trim());
        page.check()?;
        Ok(page)
    }

    /// The status it answers for.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The path of its file under the root, as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Checks the status (403 or 404) and that the path can name a file under the root.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |reason| ConfigError::BadErrorPage {
            page: self.to_string(),
            reason,
        };
        if !ERROR_PAGE_STATUSES.contains(&self.status) {
            return Err(bad("only 403 and 404 take a custom page"));
        }
        self.rel().map(drop).map_err(bad)
    }

    /// The path relative to the root, normalized as a request's: empty and `.` segments left
    /// out; `..`, a segment starting with `.`, a NUL or nothing at all refused.
    pub(crate) fn rel(&self) -> Result<Vec<u8>, &'static str> {
        let mut segs: Vec<&str> = Vec::new();
        for seg in self.path.split('/') {
            match seg {
                "" | "." => {}
                ".." => return Err("the path may not hold '..'"),
                s if s.starts_with('.') => {
                    return Err("the path may not name a dotfile (the server never serves one)")
                }
                s => segs.push(s),
            }
        }
        if segs.is_empty() {
            return Err("the path names no file");
        }
        if self.path.contains('\0') {
            return Err("a NUL in the path");
        }
        Ok(segs.join("/").into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_normalizes() {
        let p = ErrorPage::parse("404=/404.html").unwrap();
        assert_eq!((p.status(), p.path()), (404, "/404.html"));
        assert_eq!(p.rel().unwrap(), b"404.html");
        let p = ErrorPage::parse("403=errors//./denied.htm").unwrap();
        assert_eq!(p.rel().unwrap(), b"errors/denied.htm");
        for bad in [
            "500=/500.html",
            "200=/x.html",
            "x=/404.html",
            "404",
            "404=",
            "404=/",
            "404=/../x.html",
            "404=/a/../../x.html",
            "404=/.hidden.html",
            "404=/.git/x.html",
            "404=/a\0b",
        ] {
            let e = ErrorPage::parse(bad).unwrap_err();
            assert!(matches!(e, ConfigError::BadErrorPage { .. }), "{bad:?}");
            assert!(e.to_string().contains("error page"), "{e}");
        }
        let e = ErrorPage::parse("500=/500.html").unwrap_err().to_string();
        assert!(e.contains("500"), "{e}");
    }
}
