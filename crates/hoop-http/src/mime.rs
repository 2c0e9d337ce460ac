//! `Content-Type` from the file name's extension, with the values of nginx's default
//! `mime.types` (no charset parameter).

/// The content type for `path` (the extension is matched without regard to case).
pub fn content_type(path: &[u8]) -> &'static str {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return DEFAULT;
    };
    let ext = &name[dot + 1..];
    if ext.is_empty() || ext.len() > 8 {
        return DEFAULT;
    }
    let mut lower = [0u8; 8];
    for (d, s) in lower.iter_mut().zip(ext) {
        *d = s.to_ascii_lowercase();
    }
    let ext = &lower[..ext.len()];
    TYPES
        .iter()
        .find(|(e, _)| e.as_bytes() == ext)
        .map_or(DEFAULT, |(_, t)| t)
}

const DEFAULT: &str = "application/octet-stream";

/// Whether files of this type are worth compressing, so worth looking for a precompressed
/// variant of (`a.css.gz`): text, XML, JavaScript, JSON, WebAssembly and a few other textual
/// or uncompressed formats. Images, audio, video, archives and unknown types are not (they
/// are compressed already, or nothing is known of them): no lookup, no `Vary`.
pub fn compressible(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || content_type.ends_with("+xml")
        || matches!(
            content_type,
            "application/javascript"
                | "application/json"
                | "application/wasm"
                | "application/rtf"
                | "application/postscript"
                | "application/vnd.apple.mpegurl"
                | "application/vnd.ms-fontobject"
                | "application/x-perl"
                | "application/x-tcl"
                | "application/x-x509-ca-cert"
                | "image/x-icon"
                | "image/x-ms-bmp"
        )
}

/// nginx 1.22 `conf/mime.types` (the common part).
const TYPES: &[(&str, &str)] = &[
    ("html", "text/html"),
    ("htm", "text/html"),
    ("shtml", "text/html"),
    ("css", "text/css"),
    ("xml", "text/xml"),
    ("gif", "image/gif"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "application/javascript"),
    ("mjs", "application/javascript"),
    ("atom", "application/atom+xml"),
    ("rss", "application/rss+xml"),
    ("mml", "text/mathml"),
    ("txt", "text/plain"),
    ("jad", "text/vnd.sun.j2me.app-descriptor"),
    ("wml", "text/vnd.wap.wml"),
    ("htc", "text/x-component"),
    ("avif", "image/avif"),
    ("png", "image/png"),
    ("svg", "image/svg+xml"),
    ("svgz", "image/svg+xml"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("wbmp", "image/vnd.wap.wbmp"),
    ("webp", "image/webp"),
    ("ico", "image/x-icon"),
    ("jng", "image/x-jng"),
    ("bmp", "image/x-ms-bmp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("jar", "application/java-archive"),
    ("war", "application/java-archive"),
    ("ear", "application/java-archive"),
    ("json", "application/json"),
    ("hqx", "application/mac-binhex40"),
    ("doc", "application/msword"),
    ("pdf", "application/pdf"),
    ("ps", "application/postscript"),
    ("eps", "application/postscript"),
    ("ai", "application/postscript"),
    ("rtf", "application/rtf"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("kml", "application/vnd.google-earth.kml+xml"),
    ("kmz", "application/vnd.google-earth.kmz"),
    ("xls", "application/vnd.ms-excel"),
    ("eot", "application/vnd.ms-fontobject"),
    ("ppt", "application/vnd.ms-powerpoint"),
    ("odg", "application/vnd.oasis.opendocument.graphics"),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("odt", "application/vnd.oasis.opendocument.text"),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ("wmlc", "application/vnd.wap.wmlc"),
    ("wasm", "application/wasm"),
    ("7z", "application/x-7z-compressed"),
    ("cco", "application/x-cocoa"),
    ("jardiff", "application/x-java-archive-diff"),
    ("jnlp", "application/x-java-jnlp-file"),
    ("run", "application/x-makeself"),
    ("pl", "application/x-perl"),
    ("pm", "application/x-perl"),
    ("prc", "application/x-pilot"),
    ("pdb", "application/x-pilot"),
    ("rar", "application/x-rar-compressed"),
    ("rpm", "application/x-redhat-package-manager"),
    ("sea", "application/x-sea"),
    ("swf", "application/x-shockwave-flash"),
    ("sit", "application/x-stuffit"),
    ("tcl", "application/x-tcl"),
    ("tk", "application/x-tcl"),
    ("der", "application/x-x509-ca-cert"),
    ("pem", "application/x-x509-ca-cert"),
    ("crt", "application/x-x509-ca-cert"),
    ("xpi", "application/x-xpinstall"),
    ("xhtml", "application/xhtml+xml"),
    ("xspf", "application/xspf+xml"),
    ("zip", "application/zip"),
    ("bin", "application/octet-stream"),
    ("exe", "application/octet-stream"),
    ("dll", "application/octet-stream"),
    ("deb", "application/octet-stream"),
    ("dmg", "application/octet-stream"),
    ("iso", "application/octet-stream"),
    ("img", "application/octet-stream"),
    ("msi", "application/octet-stream"),
    ("msp", "application/octet-stream"),
    ("msm", "application/octet-stream"),
    ("mid", "audio/midi"),
    ("midi", "audio/midi"),
    ("kar", "audio/midi"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("m4a", "audio/x-m4a"),
    ("ra", "audio/x-realaudio"),
    ("3gpp", "video/3gpp"),
    ("3gp", "video/3gpp"),
    ("ts", "video/mp2t"),
    ("mp4", "video/mp4"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("mov", "video/quicktime"),
    ("webm", "video/webm"),
    ("flv", "video/x-flv"),
    ("m4v", "video/x-m4v"),
    ("mng", "video/x-mng"),
    ("asx", "video/x-ms-asf"),
    ("asf", "video/x-ms-asf"),
    ("wmv", "video/x-ms-wmv"),
    ("avi", "video/x-msvideo"),
];

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn nginx_values() {
        for (name, t) in [
            ("a.html", "text/html"),
            ("a.css", "text/css"),
            ("a.js", "application/javascript"),
            ("a.jpg", "image/jpeg"),
            ("a.JPEG", "image/jpeg"),
            ("a.png", "image/png"),
            ("a.gif", "image/gif"),
            ("a.svg", "image/svg+xml"),
            ("a.swf", "application/x-shockwave-flash"),
            ("a.txt", "text/plain"),
            ("a.json", "application/json"),
            ("a.wasm", "application/wasm"),
            ("a.pdf", "application/pdf"),
            ("dir.d/noext", "application/octet-stream"),
            ("a.unknown", "application/octet-stream"),
            ("a.", "application/octet-stream"),
        ] {
            assert_eq!(content_type(name.as_bytes()), t, "{name}");
        }
    }

    #[test]
    fn compressible_types() {
        use super::compressible;
        for name in [
            "a.html", "a.css", "a.js", "a.json", "a.svg", "a.txt", "a.wasm", "a.xml",
        ] {
            assert!(compressible(content_type(name.as_bytes())), "{name}");
        }
        for name in [
            "a.png", "a.jpg", "a.gz", "a.zip", "a.mp4", "a.woff2", "noext",
        ] {
            assert!(!compressible(content_type(name.as_bytes())), "{name}");
        }
    }
}
