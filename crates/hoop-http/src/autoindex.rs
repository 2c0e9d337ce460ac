//! `--autoindex`: the HTML listing of a directory that has no index file (nginx's
//! `autoindex`).
//!
//! The directory is read through the fd that [`Root::open_beneath`](crate::resolve::Root::
//! open_beneath) returned (`O_DIRECTORY`, opened beneath the root like any file): `fdopendir`
//! on that fd, `readdir`, and `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)` for each entry. No
//! path is resolved again from the root and no symlink is followed, so nothing outside the
//! root is read or even stat'ed: a symlink is listed as itself (no size, no date, no trailing
//! slash; following it is the ordinary request, which the resolver confines to the root).
//! This blocks (getdents, one `fstatat` per entry), so it runs on the runtime's blocking pool.
//!
//! Entries starting with `.` are left out (the resolver answers 404 for them anyway); the rest
//! are sorted by name (bytewise), directories with a trailing `/`. Names are HTML-escaped in
//! text (`&<>"'`; bytes that are not UTF-8 shown as U+FFFD) and percent-encoded in links
//! (every byte but `A-Za-z0-9-._~`, so no name can read as a scheme or a query). At most
//! [`MAX_ENTRIES`] entries are listed (the first read, not the first by name), then a note says
//! the listing is truncated.
//!
//! With [`AutoindexFormat::Json`](crate::AutoindexFormat::Json) the same entries, in the same
//! order, are a JSON array ([`json`]): `{"name":"a.txt","type":"file","size":123,
//! "mtime":"2026-11-27T00:00:00Z"}`, written by hand (no serde in this crate). `type` is
//! `file`, `directory`, `symlink` or `other` (a FIFO, a socket, a device, or an entry gone
//! before its `fstatat`); `size` only for regular files; `mtime` for all but symlinks (and
//! gone entries). Names are JSON strings: `"` and `\` escaped, control characters as
//! `\u00XX`, bytes that are not UTF-8 as U+FFFD (as the HTML does). A truncated listing is the
//! [`MAX_ENTRIES`] entries read, with nothing added (the array stays a plain array: a client
//! that needs every name of a directory that big should not ask a listing).

use std::ffi::CStr;
use std::io::{self, Write as _};
use std::os::fd::{IntoRawFd, OwnedFd};

/// Most entries one listing shows.
pub const MAX_ENTRIES: usize = 10_000;

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The name (one path segment).
    pub name: Vec<u8>,
    /// A directory (listed with a trailing `/`).
    pub dir: bool,
    /// A symbolic link (listed as itself, never followed).
    pub link: bool,
    /// Size in bytes, for a regular file.
    pub size: Option<u64>,
    /// Modification time (seconds since the epoch), except for a symlink.
    pub mtime: Option<i64>,
}

/// A directory's entries, sorted by name.
#[derive(Debug, Default)]
pub struct Listing {
    /// The entries shown.
    pub entries: Vec<Entry>,
    /// More entries than [`MAX_ENTRIES`] were there.
    pub truncated: bool,
}

/// `closedir` on drop.
struct Dir(*mut libc::DIR);

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: a stream from fdopendir, closed once (it closes its fd too).
        unsafe { libc::closedir(self.0) };
    }
}

/// Reads the directory `dir` (blocking): at most `max` entries not starting with `.`.
pub fn read(dir: OwnedFd, max: usize) -> io::Result<Listing> {
    let raw = dir.into_raw_fd();
    // SAFETY: `raw` is an open directory fd we own; on success the stream owns it.
    let stream = unsafe { libc::fdopendir(raw) };
    if stream.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so the fd is still ours to close.
        unsafe { libc::close(raw) };
        return Err(e);
    }
    let stream = Dir(stream);
    // SAFETY: a valid stream.
    let dfd = unsafe { libc::dirfd(stream.0) };
    let mut listing = Listing::default();
    loop {
        // readdir says "end" and "error" both with NULL: errno tells them apart.
        // SAFETY: errno is thread-local.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: a valid stream, used by this thread only.
        let ent = unsafe { libc::readdir(stream.0) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            if e.raw_os_error().is_some_and(|n| n != 0) {
                return Err(e);
            }
            break;
        }
        // SAFETY: `d_name` is NUL-terminated and valid until the next readdir.
        let cname = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        let name = cname.to_bytes();
        if name.is_empty() || name[0] == b'.' {
            continue;
        }
        if listing.entries.len() >= max {
            listing.truncated = true;
            break;
        }
        // SAFETY: a zeroed stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `dfd` is the stream's fd, `cname` a NUL-terminated single name, `st` ours.
        let ok = unsafe { libc::fstatat(dfd, cname.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        let (dir, link, size, mtime) = if ok != 0 {
            // Gone since it was read: listed without details.
            (false, false, None, None)
        } else {
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => (true, false, None, Some(st.st_mtime)),
                libc::S_IFREG => (false, false, Some(st.st_size as u64), Some(st.st_mtime)),
                libc::S_IFLNK => (false, true, None, None),
                _ => (false, false, None, Some(st.st_mtime)),
            }
        };
        listing.entries.push(Entry {
            name: name.to_vec(),
            dir,
            link,
            size,
            mtime,
        });
    }
    listing.entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listing)
}

/// The HTML page for `listing` of the directory `rel` (decoded, relative to the root, empty
/// for the root itself).
pub fn html(rel: &[u8], listing: &Listing) -> Vec<u8> {
    let mut path = Vec::with_capacity(rel.len() + 2);
    path.push(b'/');
    path.extend_from_slice(rel);
    if !rel.is_empty() {
        path.push(b'/');
    }
    let mut title = String::new();
    escape_html(&mut title, &path);
    let mut out = Vec::with_capacity(256 + listing.entries.len() * 128);
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n\
         <body>\n<h1>Index of {title}</h1>\n<table>\n\
         <tr><th>Name</th><th>Last modified</th><th>Size</th></tr>\n"
    );
    if !rel.is_empty() {
        out.extend_from_slice(b"<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    let mut text = String::new();
    for e in &listing.entries {
        text.clear();
        escape_html(&mut text, &e.name);
        let slash = if e.dir { "/" } else { "" };
        out.extend_from_slice(b"<tr><td><a href=\"");
        percent_encode(&mut out, &e.name);
        let mtime = e.mtime.map(super::date::format).unwrap_or_default();
        let size = e.size.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{slash}\">{text}{slash}</a></td><td>{mtime}</td><td>{size}</td></tr>"
        );
    }
    out.extend_from_slice(b"</table>\n");
    if listing.truncated {
        let _ = writeln!(
            out,
            "<p>Truncated: only {} entries are listed.</p>",
            listing.entries.len()
        );
    }
    out.extend_from_slice(b"</body>\n</html>\n");
    out
}

/// The JSON array for `listing` (see the module docs).
pub fn json(listing: &Listing) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + listing.entries.len() * 96);
    out.push(b'[');
    let mut name = String::new();
    for (i, e) in listing.entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        name.clear();
        escape_json(&mut name, &e.name);
        let kind = match (e.dir, e.link, e.size) {
            (true, _, _) => "directory",
            (_, true, _) => "symlink",
            (_, _, Some(_)) => "file",
            _ => "other",
        };
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{{\"name\":\"{name}\",\"type\":\"{kind}\"");
        if let (false, Some(size)) = (e.dir, e.size) {
            let _ = write!(out, ",\"size\":{size}");
        }
        if let Some(mtime) = e.mtime {
            let _ = write!(out, ",\"mtime\":\"{}\"", super::date::rfc3339(mtime));
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]\n");
    out
}

/// `name` inside a JSON string: UTF-8 (invalid bytes as U+FFFD), `"` and `\` escaped, control
/// characters as `\u00XX`.
fn escape_json(out: &mut String, name: &[u8]) {
    use std::fmt::Write as _;
    for c in String::from_utf8_lossy(name).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// `name` as HTML text: UTF-8 (invalid bytes as U+FFFD) with `&<>"'` escaped.
fn escape_html(out: &mut String, name: &[u8]) {
    for c in String::from_utf8_lossy(name).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// `name` percent-encoded for a relative link: only unreserved bytes left as they are.
fn percent_encode(out: &mut Vec<u8>, name: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in name {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_names_in_text_and_links() {
        let listing = Listing {
            entries: vec![
                Entry {
                    name: b"a<b>&\"c'.txt".to_vec(),
                    dir: false,
                    link: false,
                    size: Some(3),
                    mtime: Some(0),
                },
                Entry {
                    name: b"sub dir:x".to_vec(),
                    dir: true,
                    link: false,
                    size: None,
                    mtime: None,
                },
            ],
            truncated: true,
        };
        let page = String::from_utf8(html(b"d&x", &listing)).unwrap();
        assert!(page.contains("<title>Index of /d&amp;x/</title>"), "{page}");
        assert!(
            page.contains("<a href=\"a%3Cb%3E%26%22c%27.txt\">a&lt;b&gt;&amp;&quot;c&#39;.txt</a>")
        );
        assert!(page.contains("<a href=\"sub%20dir%3Ax/\">sub dir:x/</a>"));
        assert!(page.contains("<a href=\"../\">"));
        assert!(page.contains("Truncated"));
        let root = String::from_utf8(html(b"", &Listing::default())).unwrap();
        assert!(root.contains("Index of /<") && !root.contains("../"));
    }

    #[test]
    fn json_escapes_and_types() {
        let e = |name: &[u8], dir, link, size, mtime| Entry {
            name: name.to_vec(),
            dir,
            link,
            size,
            mtime,
        };
        let listing = Listing {
            entries: vec![
                e(
                    b"a\"b\\c\n\x01.txt",
                    false,
                    false,
                    Some(3),
                    Some(784_111_777),
                ),
                e(b"bad\xff", false, false, Some(0), Some(0)),
                e(b"dir", true, false, None, Some(0)),
                e(b"link", false, true, None, None),
                e(b"fifo", false, false, None, Some(0)),
            ],
            truncated: true,
        };
        let text = String::from_utf8(json(&listing)).unwrap();
        assert_eq!(
            text,
            "[{\"name\":\"a\\\"b\\\\c\\u000a\\u0001.txt\",\"type\":\"file\",\"size\":3,\
             \"mtime\":\"1994-11-06T08:49:37Z\"},\
             {\"name\":\"bad\u{fffd}\",\"type\":\"file\",\"size\":0,\"mtime\":\"1970-01-01T00:00:00Z\"},\
             {\"name\":\"dir\",\"type\":\"directory\",\"mtime\":\"1970-01-01T00:00:00Z\"},\
             {\"name\":\"link\",\"type\":\"symlink\"},\
             {\"name\":\"fifo\",\"type\":\"other\",\"mtime\":\"1970-01-01T00:00:00Z\"}]\n"
        );
        assert_eq!(json(&Listing::default()), b"[]\n");
    }

    #[test]
    fn reads_sorted_without_hidden_entries_and_bounded() {
        let dir = std::env::temp_dir().join(format!("hoop-autoindex-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for n in ["b.txt", "a.txt", ".hidden"] {
            std::fs::write(dir.join(n), b"xy").unwrap();
        }
        std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
        let open = || OwnedFd::from(std::fs::File::open(&dir).unwrap());
        let l = read(open(), 100).unwrap();
        let names: Vec<&[u8]> = l.entries.iter().map(|e| &e.name[..]).collect();
        assert_eq!(names, [&b"a.txt"[..], b"b.txt", b"link", b"sub"]);
        assert_eq!(l.entries[0].size, Some(2));
        assert!(l.entries[3].dir && !l.entries[2].dir && l.entries[2].size.is_none());
        assert!(l.entries[2].link && !l.entries[0].link);
        assert!(!l.truncated);
        let l = read(open(), 2).unwrap();
        assert_eq!(l.entries.len(), 2);
        assert!(l.truncated);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
