//! `Cache-Control` per path pattern or content type ([`Config::cache_control`](crate::Config::cache_control),
//! `hoop serve http --cache-control 'PATTERN=VALUE'`), as static-web-server's cache-control
//! headers and nginx's `expires` per `location`.
//!
//! A rule is a pattern and a header value. The pattern is either
//! * a **path glob** when it starts with `/` or `*`, matched against the decoded path of what
//!   is served (`/a/b.css`; for a directory target answered by its index file, the index
//!   file's path, `/docs/index.html`, as nginx's internal redirect to the index does; for a
//!   listing, the directory's path with its trailing slash, `/docs/`): `*` matches any run of
//!   bytes, `/` included, and `?` one byte; every other byte matches itself (`*.css`,
//!   `/assets/*`, `/v?/app.js`);
//! * or a **content type** `type/subtype` or `type/*`, matched (ASCII case-insensitively)
//!   against the response's `Content-Type` without its parameters (`image/*`,
//!   `text/html`).
//!
//! The first rule that matches gives the value; with none, no header. The header goes on the
//! responses that carry the file's representation or refer to it: 200, 206 and 304 of a file,
//! and a listing; never on errors or redirects.
//!
//! The value must be non-empty visible ASCII and spaces (no control byte, so no header can be
//! smuggled in); the `Content-Security-Policy` line gets the same check.
//!
//! Matching costs nothing without rules; with rules, each request walks them in order, with
//! no allocation: the kind of each pattern is decided when the rule is made, and the header
//! line (`Cache-Control: VALUE\r\n`) is formatted once per server (`crate::extras`).
//!
//! (Plain std only: the fuzz target compiles `config.rs`, which names this file's type.)

use std::fmt;

use super::config_error::ConfigError;

/// One `Cache-Control` rule: a pattern (a path glob or a content type, see the
/// [module docs](self): `*.css`, `/assets/*`, `image/*`, `text/html`) and the header value
/// for what it matches. Checked by [`Config::validate`](crate::Config::validate)
/// (or at once by [`parse`](CacheControlRule::parse)).
#[derive(Clone, PartialEq, Eq)]
pub struct CacheControlRule {
    pattern: String,
    value: String,
    by_path: bool,
}

impl fmt::Debug for CacheControlRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheControlRule({:?})", self.to_string())
    }
}

impl fmt::Display for CacheControlRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.pattern, self.value)
    }
}

impl CacheControlRule {
    /// The rule `pattern` → `value` (not checked yet: [`check`](Self::check), which
    /// [`Config::validate`](crate::Config::validate) calls).
    pub fn new(pattern: impl Into<String>, value: impl Into<String>) -> CacheControlRule {
        let pattern = pattern.into();
        let by_path = pattern.starts_with('/') || pattern.starts_with('*');
        CacheControlRule {
            pattern,
            value: value.into(),
            by_path,
        }
    }

    /// `PATTERN=VALUE` (split at the first `=`: a value may hold more, `max-age=3600`),
    /// checked.
    pub fn parse(s: &str) -> Result<CacheControlRule, ConfigError> {
        let Some((pattern, value)) = s.split_once('=') else {
            return Err(ConfigError::BadCacheControl {
                rule: s.to_string(),
                reason: "a rule is PATTERN=VALUE",
            });
        };
        let rule = CacheControlRule::new(pattern.trim(), value.trim());
        rule.check()?;
        Ok(rule)
    }

    /// The pattern.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The header value.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether the pattern is a path glob (else a content type).
    pub fn is_path_glob(&self) -> bool {
        self.by_path
    }

    /// Checks the pattern (a path glob, or `type/subtype`, `type/*` of token bytes) and the
    /// value (not empty; visible ASCII and spaces only).
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |reason| ConfigError::BadCacheControl {
            rule: self.to_string(),
            reason,
        };
        if !self.by_path {
            let Some((ty, sub)) = self.pattern.split_once('/') else {
                return Err(bad(
                    "the pattern is a path glob (starting with '/' or '*') or a content type \
                     (type/subtype or type/*)",
                ));
            };
            if !is_token(ty) || !(sub == "*" || is_token(sub)) {
                return Err(bad("a content type is type/subtype or type/*"));
            }
        } else if self.pattern.bytes().any(|b| b.is_ascii_control()) {
            return Err(bad("a control byte in the pattern"));
        }
        check_header_value(&self.value).map_err(bad)
    }

    /// Whether the rule matches a response for `path` (the decoded path, see the module docs)
    /// with `content_type` (its parameters, if any, are left out here).
    pub fn matches(&self, path: &[u8], content_type: &str) -> bool {
        if self.by_path {
            return glob(self.pattern.as_bytes(), path);
        }
        type_matches(&self.pattern, content_type)
    }

    /// [`matches`](Self::matches) for the path `/` + `rel` (+ `/` with `slash`), without
    /// making it: the server's paths are relative to the root.
    pub(crate) fn matches_rel(&self, rel: &[u8], slash: bool, content_type: &str) -> bool {
        if !self.by_path {
            return type_matches(&self.pattern, content_type);
        }
        let len = 1 + rel.len() + usize::from(slash);
        glob_with(self.pattern.as_bytes(), len, |i| match i.checked_sub(1) {
            Some(j) if j < rel.len() => rel[j],
            _ => b'/',
        })
    }
}

/// Bytes of an HTTP token (RFC 9110 `tchar`).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b) && b != b'*')
}

/// A header value the server may write as it is: not empty, visible ASCII and spaces only
/// (no CR, LF or other control byte); surrounding spaces are not allowed either (a header's
/// value has none).
pub(crate) fn check_header_value(v: &str) -> Result<(), &'static str> {
    if v.trim().is_empty() {
        return Err("the value is empty");
    }
    if v.bytes().any(|b| !(b == b' ' || b.is_ascii_graphic())) {
        return Err("the value must be visible ASCII and spaces (no control characters)");
    }
    if v.starts_with(' ') || v.ends_with(' ') {
        return Err("the value starts or ends with a space");
    }
    Ok(())
}

/// `pattern` (`type/subtype` or `type/*`) against `content_type` without its parameters.
fn type_matches(pattern: &str, content_type: &str) -> bool {
    let ct = content_type
        .split(';')
        .next()
        .unwrap_or(content_type)
        .trim_end();
    match pattern.strip_suffix("/*") {
        Some(ty) => ct
            .split_once('/')
            .is_some_and(|(t, _)| t.eq_ignore_ascii_case(ty)),
        None => ct.eq_ignore_ascii_case(pattern),
    }
}

/// A glob over bytes: `*` any run (`/` included), `?` one byte, anything else itself. Linear
/// backtracking to the last `*` only (no recursion, no allocation): O(pattern × text) at worst.
pub(crate) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    glob_with(pattern, text.len(), |i| text[i])
}

/// [`glob`] against the text of `len` bytes that `at` gives one at a time (a path made of
/// parts, without joining them).
pub(crate) fn glob_with(pattern: &[u8], len: usize, at: impl Fn(usize) -> u8) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while t < len {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == at(t) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    // The `*` takes one byte more.
                    star = Some((sp, st + 1));
                    p = sp + 1;
                    t = st + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, t, m) in [
            ("*.css", "/a.css", true),
            ("*.css", "/deep/er/a.css", true),
            ("*.css", "/a.css.map", false),
            ("*.css", "/a.cs", false),
            ("/assets/*", "/assets/", true),
            ("/assets/*", "/assets/x/y.js", true),
            ("/assets/*", "/asset/x", false),
            ("/assets/*", "/x/assets/y", false),
            ("/v?/a.js", "/v1/a.js", true),
            ("/v?/a.js", "/v12/a.js", false),
            ("*", "/", true),
            ("/", "/", true),
            ("/", "/a", false),
            ("/*/index.html", "/docs/index.html", true),
            ("/*/index.html", "/index.html", false),
            ("*a*b*c", "/xaybzc", true),
            ("*a*b*c", "/xaybzcd", false),
            ("**", "", true),
            ("*x", "", false),
        ] {
            assert_eq!(glob(p.as_bytes(), t.as_bytes()), m, "{p} ~ {t}");
        }
        // The path made of parts matches as the joined one.
        let r = CacheControlRule::new("*/docs/", "x");
        assert!(r.matches_rel(b"docs", true, "") && !r.matches_rel(b"docs", false, ""));
        assert!(CacheControlRule::new("*/x", "v").matches_rel(b"x", false, ""));
        assert!(CacheControlRule::new("/", "v").matches_rel(b"", false, ""));
        assert!(!CacheControlRule::new("/", "v").matches_rel(b"", true, ""));
        assert!(CacheControlRule::new("/a/*.css", "v").matches_rel(b"a/b/c.css", false, ""));
        // Not exponential: a pattern of many stars against a long text that does not match.
        let p = "*a".repeat(20) + "b";
        assert!(!glob(p.as_bytes(), "a".repeat(5000).as_bytes()));
    }

    #[test]
    fn content_types() {
        let r = |p: &str| CacheControlRule::new(p, "no-cache");
        assert!(r("text/html").matches(b"/x", "text/html"));
        assert!(r("text/html").matches(b"/x", "text/html; charset=utf-8"));
        assert!(r("TEXT/HTML").matches(b"/x", "text/html"));
        assert!(!r("text/html").matches(b"/x", "text/plain"));
        assert!(r("image/*").matches(b"/x", "image/png"));
        assert!(!r("image/*").matches(b"/x", "imagex/png"));
        assert!(!r("image/*").matches(b"/image/x", "text/plain"));
        assert!(r("*.png").is_path_glob() && !r("image/*").is_path_glob());
    }

    #[test]
    fn parse_and_check() {
        let r = CacheControlRule::parse("/assets/*=public, max-age=31536000, immutable").unwrap();
        assert_eq!(r.pattern(), "/assets/*");
        assert_eq!(r.value(), "public, max-age=31536000, immutable");
        assert_eq!(
            r.to_string(),
            "/assets/*=public, max-age=31536000, immutable"
        );
        assert!(CacheControlRule::parse("image/*=max-age=60").is_ok());
        for bad in [
            "no-equals",
            "*.css=",
            "*.css=  ",
            "html=no-cache",
            "text/=no-cache",
            "/text=x\r\nSet-Cookie: a=b",
            "*.css=a\nb",
            "*.css=caf\u{e9}",
            "te xt/html=no-cache",
        ] {
            let e = CacheControlRule::parse(bad).unwrap_err();
            assert!(
                matches!(e, ConfigError::BadCacheControl { .. }),
                "{bad:?}: {e:?}"
            );
            assert!(e.to_string().contains("cache-control"), "{e}");
        }
        assert!(check_header_value("default-src 'self'").is_ok());
        assert!(check_header_value("a\tb").is_err());
    }
}
