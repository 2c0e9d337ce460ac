//! What the configuration adds to responses, prepared once when the server is made
//! (`Server::new`, `Builder::build`) and shared by every thread: the `Cache-Control` rules with
//! their header lines formatted ([`crate::cache_control`]), the security header lines
//! ([`Config::security_headers`], [`Config::content_security_policy`]), and the custom error
//! pages read into memory ([`crate::error_page`]).
//!
//! With none of these set, a response pays one emptiness check for `Cache-Control` and two
//! empty slices appended to its head: no formatting, no allocation, no lookup.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

use crate::cache_control::CacheControlRule;
use crate::config::Config;
use crate::error_page::{ErrorPage, MAX_ERROR_PAGE_BYTES};
use crate::resolve::Root;
use crate::status::Status;

/// A custom error page in memory.
#[derive(Debug)]
pub(crate) struct Page {
    /// From the file's extension.
    pub content_type: &'static str,
    /// The file's bytes.
    pub body: Arc<[u8]>,
}

/// The response additions of one server (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Extras {
    /// Each rule with its `Cache-Control: VALUE\r\n` line, in order.
    rules: Vec<(CacheControlRule, Box<[u8]>)>,
    /// The lines every response carries (security headers), possibly none.
    always: Box<[u8]>,
    /// The page for 403, and for 404.
    forbidden: Option<Page>,
    not_found: Option<Page>,
}

impl Extras {
    /// Prepares `cfg`'s additions (checked already: [`Config::validate`]); reads the error
    /// pages beneath `root`, and says on stderr, one line each, which could not be read (the
    /// built-in page answers for those, as for every page without a root).
    pub fn load(cfg: &Config, root: Option<&Root>) -> Extras {
        let rules = cfg
            .cache_control
            .iter()
            .map(|r| {
                let line = format!("Cache-Control: {}\r\n", r.value());
                (r.clone(), line.into_bytes().into_boxed_slice())
            })
            .collect();
        let mut always = String::new();
        if cfg.security_headers {
            always.push_str("X-Content-Type-Options: nosniff\r\n");
        }
        if let Some(csp) = &cfg.content_security_policy {
            always.push_str(&format!("Content-Security-Policy: {csp}\r\n"));
        }
        let mut extras = Extras {
            rules,
            always: always.into_bytes().into_boxed_slice(),
            forbidden: None,
            not_found: None,
        };
        // The last page given for a status wins: the earlier ones are not even read.
        let Some(root) = root else {
            return extras;
        };
        for (i, page) in cfg.error_pages.iter().enumerate() {
            if cfg.error_pages[i + 1..]
                .iter()
                .any(|p| p.status() == page.status())
            {
                continue;
            }
            let loaded = match read_page(page, root) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!(
                        "hoop-http: error page {} {:?}: {e}; the built-in page answers",
                        page.status(),
                        page.path()
                    );
                    None
                }
            };
            match page.status() {
                403 => extras.forbidden = loaded,
                404 => extras.not_found = loaded,
                _ => {}
            }
        }
        extras
    }

    /// The `Cache-Control` line for what is served at `/rel` (`/rel/` with `slash`) with
    /// `content_type`: the first rule's that matches, else empty.
    pub fn cache_control(&self, rel: &[u8], slash: bool, content_type: &str) -> &[u8] {
        if self.rules.is_empty() {
            return b"";
        }
        self.rules
            .iter()
            .find(|(r, _)| r.matches_rel(rel, slash, content_type))
            .map_or(&b""[..], |(_, line)| line)
    }

    /// The lines every response carries.
    pub fn always(&self) -> &[u8] {
        &self.always
    }

    /// The custom page for `status`, if one was read.
    pub fn page(&self, status: Status) -> Option<&Page> {
        match status {
            Status::Forbidden => self.forbidden.as_ref(),
            Status::NotFound => self.not_found.as_ref(),
            _ => None,
        }
    }
}

/// Reads `page` beneath `root`: a regular file of at most [`MAX_ERROR_PAGE_BYTES`].
fn read_page(page: &ErrorPage, root: &Root) -> io::Result<Page> {
    use std::io::Read;
    let rel = page
        .rel()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let file = std::fs::File::from(open_beneath_now(root, &rel)?);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if meta.len() > MAX_ERROR_PAGE_BYTES {
        return Err(io::Error::other(format!(
            "{} bytes, over the {MAX_ERROR_PAGE_BYTES} an error page may have",
            meta.len()
        )));
    }
    let mut body = Vec::with_capacity(meta.len() as usize);
    // One byte past the limit tells a file that grew meanwhile.
    file.take(MAX_ERROR_PAGE_BYTES + 1).read_to_end(&mut body)?;
    if body.len() as u64 > MAX_ERROR_PAGE_BYTES {
        return Err(io::Error::other("over the size an error page may have"));
    }
    Ok(Page {
        content_type: crate::mime::content_type(&rel),
        body: body.into(),
    })
}

/// Opens `rel` beneath `root` now, on this thread (the server is being made: no runtime yet),
/// with the rules of [`Root::open_beneath`]: `openat2` with `RESOLVE_BENEATH |
/// RESOLVE_NO_MAGICLINKS`, else `openat` and the real path checked to lie under the root. A
/// symlink out of the root says so.
fn open_beneath_now(root: &Root, rel: &[u8]) -> io::Result<OwnedFd> {
    let path = CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: all-zero is a valid open_how (plain integers).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `path` is NUL-terminated and `how` a valid open_how of the size given; both
    // outlive the call; the root fd is open while `root` is borrowed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    let fd = if r >= 0 {
        // SAFETY: a new fd the call just returned, owned by no one else.
        unsafe { OwnedFd::from_raw_fd(r as i32) }
    } else {
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // No openat2 (before 5.6), or a seccomp filter that refuses it: the fallback.
            Some(libc::ENOSYS | libc::EPERM) => {
                // SAFETY: as above, with plain openat.
                let r = unsafe { libc::openat(root.raw_fd(), path.as_ptr(), flags) };
                if r < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: a new fd the call just returned.
                let fd = unsafe { OwnedFd::from_raw_fd(r) };
                root.check_beneath(&fd).map_err(outside)?;
                fd
            }
            _ => return Err(outside(e)),
        }
    };
    Ok(fd)
}

/// `EXDEV` (a symlink out of the root) in words.
fn outside(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::EXDEV) {
        return io::Error::other("outside the root");
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_lines_and_pages() {
        let dir = std::env::temp_dir().join(format!("hoop-extras-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root_dir = dir.join("www");
        std::fs::create_dir_all(root_dir.join("sub")).unwrap();
        std::fs::write(root_dir.join("404.html"), b"gone").unwrap();
        std::fs::write(dir.join("secret.txt"), b"secret").unwrap();
        std::os::unix::fs::symlink("../secret.txt", root_dir.join("out.html")).unwrap();
        let root = Root::open(&root_dir).unwrap();
        let cfg = Config {
            cache_control: vec![
                CacheControlRule::new("*.css", "max-age=1"),
                CacheControlRule::new("text/*", "no-cache"),
            ],
            security_headers: true,
            content_security_policy: Some("default-src 'self'".into()),
            error_pages: vec![
                ErrorPage::new(404, "/nope.html"),
                ErrorPage::new(404, "/404.html"),
                ErrorPage::new(403, "/out.html"),
            ],
            ..Config::default()
        };
        let x = Extras::load(&cfg, Some(&root));
        assert_eq!(
            x.cache_control(b"a.css", false, "text/css"),
            b"Cache-Control: max-age=1\r\n"
        );
        assert_eq!(
            x.cache_control(b"a.txt", false, "text/plain"),
            b"Cache-Control: no-cache\r\n"
        );
        assert_eq!(x.cache_control(b"a.png", false, "image/png"), b"");
        assert_eq!(
            x.always(),
            b"X-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'self'\r\n"
        );
        // The last page for a status wins; a link out of the root is not read.
        let page = x.page(Status::NotFound).expect("the 404 page");
        assert_eq!(
            (&page.body[..], page.content_type),
            (&b"gone"[..], "text/html")
        );
        assert!(x.page(Status::Forbidden).is_none());
        let e = read_page(&ErrorPage::new(403, "/out.html"), &root).unwrap_err();
        assert_eq!(e.to_string(), "outside the root");
        let e = read_page(&ErrorPage::new(403, "/sub"), &root).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let e = read_page(&ErrorPage::new(404, "/nope.html"), &root).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        // Nothing configured: nothing added.
        let none = Extras::load(&Config::default(), Some(&root));
        assert_eq!(none.cache_control(b"a.css", false, "text/css"), b"");
        assert!(none.always().is_empty() && none.page(Status::NotFound).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
