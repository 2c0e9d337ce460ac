//! The static mix (cell `mix-cCONNS`), in the manner of HttpArena's static test: 20 files with
//! web-like names, 3 KB to 300 KB, each with a precompressed `NAME.gz` made by `gzip` (none
//! without it, and a line says so), and the wrk script asking for them in turn.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::plan::http::{mix_sizes, MIX_LABEL};

/// The directory of the mix under the served root.
const DIR: &str = "mix";
/// The `Accept-Encoding` every request of the mix carries.
pub(crate) const ACCEPT_ENCODING: &str = "br, gzip";
/// The files' names, smallest first.
const NAMES: [&str; 20] = [
    "robots.txt",
    "favicon.ico",
    "manifest.json",
    "icons.svg",
    "about.html",
    "theme.css",
    "config.json",
    "logo.svg",
    "index.html",
    "font-regular.woff2",
    "router.js",
    "style.css",
    "thumb.png",
    "font-bold.woff2",
    "data.json",
    "app.js",
    "hero.webp",
    "photo.jpg",
    "banner.png",
    "vendor.js",
];

/// One file of the mix, as the client verifies it.
#[derive(Debug, Clone)]
pub(crate) struct MixFile {
    /// The request path (`/mix/index.html`).
    pub path: String,
    /// The file's bytes.
    pub identity: Arc<[u8]>,
    /// Its `.gz` variant's bytes, when made.
    pub gzip: Option<Arc<[u8]>>,
}

/// Whether a name is text (compressible content) rather than an image or font.
fn is_text(name: &str) -> bool {
    [".txt", ".json", ".svg", ".html", ".css", ".js"]
        .iter()
        .any(|e| name.ends_with(e))
}

/// Deterministic content of file `i` of the mix: text-like for text types (words of a small
/// vocabulary, so gzip shrinks it as it shrinks real markup), noise for images and fonts.
fn content(i: usize, name: &str, size: u64) -> Vec<u8> {
    if !is_text(name) {
        return crate::load::http::files::file_content(size + i as u64 * 7919);
    }
    const WORDS: [&str; 24] = [
        "<div",
        "class=",
        "\"item\"",
        "</div>",
        "function",
        "return",
        "const",
        "color:",
        "margin:",
        "0px;",
        "{",
        "}",
        "data",
        "value",
        "\"name\":",
        "true,",
        "null,",
        "path",
        "width=",
        "height=",
        "<span>",
        "</span>",
        "let",
        "=>",
    ];
    let mut x: u64 = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(size as usize + 16);
    while (v.len() as u64) < size {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        v.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
        v.push(if r >> 60 == 0 { b'\n' } else { b' ' });
    }
    v.truncate(size as usize);
    v
}

/// The request paths of the mix, in order.
pub(crate) fn paths() -> Vec<String> {
    NAMES.iter().map(|n| format!("/{DIR}/{n}")).collect()
}

/// The `gzip` binary, if installed.
fn gzip_path() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("gzip"))
        .find(|p| p.is_file())
}

/// `gzip -9 -n -c FILE` (no name, no timestamp: the same bytes every time).
fn gzip_file(gzip: &Path, file: &Path) -> io::Result<Vec<u8>> {
    let out = Command::new(gzip)
        .args(["-9", "-n", "-c"])
        .arg(file)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "gzip {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// Writes the mix under `root/mix` (files kept between runs when already right, `.gz`
/// variants remade when their file was) and returns its files, with a line for the table
/// when there are no `.gz` variants.
pub(crate) fn make(root: &Path) -> io::Result<(Vec<MixFile>, Option<String>)> {
    make_at(root, DIR)
}

/// [`make`] under `root/dir_name`, asked for as `/dir_name/NAME` (the arena's static profile
/// uses `static`, as HttpArena does).
pub(crate) fn make_at(root: &Path, dir_name: &str) -> io::Result<(Vec<MixFile>, Option<String>)> {
    let dir = root.join(dir_name);
    std::fs::create_dir_all(&dir)?;
    let gzip = gzip_path();
    let mut files = Vec::with_capacity(NAMES.len());
    for (i, (name, size)) in NAMES.iter().zip(mix_sizes()).enumerate() {
        let data = content(i, name, size);
        let path = dir.join(name);
        let gz_path = dir.join(format!("{name}.gz"));
        let fresh = std::fs::read(&path).ok().as_deref() != Some(&data[..]);
        if fresh {
            std::fs::write(&path, &data)?;
        }
        let gz = match &gzip {
            Some(g) => {
                let kept = if fresh {
                    None
                } else {
                    std::fs::read(&gz_path)
                        .ok()
                        .filter(|b| b.starts_with(&[0x1f, 0x8b]))
                };
                let bytes = match kept {
                    Some(b) => b,
                    None => {
                        let b = gzip_file(g, &path)?;
                        std::fs::write(&gz_path, &b)?;
                        b
                    }
                };
                Some(Arc::from(bytes))
            }
            None => {
                // No variant the client could check: none for a server to serve either.
                let _ = std::fs::remove_file(&gz_path);
                None
            }
        };
        files.push(MixFile {
            path: format!("/{dir_name}/{name}"),
            identity: Arc::from(data),
            gzip: gz,
        });
    }
    let note = gzip.is_none().then(|| {
        format!("{MIX_LABEL}: gzip not installed: no precompressed .gz variants, identity only")
    });
    Ok((files, note))
}

/// The mix under `root/dir_name` with no precompressed variants (any left from an earlier
/// run removed): what compression on the fly is measured on.
pub(crate) fn make_plain_at(root: &Path, dir_name: &str) -> io::Result<Vec<MixFile>> {
    let dir = root.join(dir_name);
    std::fs::create_dir_all(&dir)?;
    let mut files = Vec::with_capacity(NAMES.len());
    for (i, (name, size)) in NAMES.iter().zip(mix_sizes()).enumerate() {
        let data = content(i, name, size);
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(&data[..]) {
            std::fs::write(&path, &data)?;
        }
        for ext in ["gz", "br", "zst"] {
            let _ = std::fs::remove_file(dir.join(format!("{name}.{ext}")));
        }
        files.push(MixFile {
            path: format!("/{dir_name}/{name}"),
            identity: Arc::from(data),
            gzip: None,
        });
    }
    Ok(files)
}

/// A wrk script cycling over the mix's paths (headers from `-H`: `Accept-Encoding`, and
/// `Connection: close` in close cells).
pub(crate) fn wrk_script() -> String {
    wrk_script_of(&paths())
}

/// A wrk script cycling over `paths`.
pub(crate) fn wrk_script_of(paths: &[String]) -> String {
    let list = paths
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "-- hoop bench http: the static mix, one path after another.\n\
         local paths = {{ {list} }}\n\
         local i = 0\n\
         function request()\n\
         \x20   i = i % #paths + 1\n\
         \x20   return wrk.format(nil, paths[i])\n\
         end\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_and_paths() {
        assert_eq!(content(3, "a.css", 5000), content(3, "a.css", 5000));
        assert_eq!(content(3, "a.css", 5000).len(), 5000);
        assert_eq!(paths().len(), 20);
        assert!(wrk_script().contains("\"/mix/vendor.js\""));
    }
}
