//! The HTTPS side of `hoop bench http --tls`: a self-signed certificate made for the run, nginx
//! configured as hoop is (the same suites in the same server order, session tickets, HTTP/2
//! by ALPN, `gzip on` for the types hoop compresses), h2load's command line and summary, and
//! a blocking rustls client that checks every file byte for byte before the load.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

/// What the table says when h2load is missing.
pub(crate) const H2LOAD_MISSING: &str = "h2load not installed (apt-get install nghttp2-client)";

/// The TLS 1.3 suites and TLS 1.2 ciphers both servers offer, in the server's order (hoop's
/// `hoop_http::tls` list, in OpenSSL's names).
const NGINX_SUITES: &str =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
const NGINX_CIPHERS: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:\
                             ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:\
                             ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
/// The types compressed on the fly (hoop's `mime::compressible` list, as nginx's
/// `gzip_types`; text/html is always on).
const GZIP_TYPES: &str = "text/plain text/css text/javascript application/javascript \
                          application/json application/xml image/svg+xml application/wasm";

/// Every client read and write gives up after this long.
const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A self-signed ECDSA P-256 certificate for `localhost` and 127.0.0.1, written as
/// `DIR/cert.pem` and `DIR/key.pem` (made anew each run).
pub(crate) fn make_cert(dir: &Path) -> io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let cert = rcgen::generate_simple_self_signed(names)
        .map_err(|e| io::Error::other(format!("cannot make a certificate: {e}")))?;
    let (crt, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&crt, cert.cert.pem())?;
    std::fs::write(&key, cert.key_pair.serialize_pem())?;
    Ok((crt, key))
}

/// nginx's HTTPS configuration: [`super::nginx::config`]'s with `ssl` (and `http2`) on the
/// listener, the certificate, TLS 1.2 and 1.3, the suites in the server's order, session
/// tickets on, and with `gzip`: compression on the fly (level 1, nginx's default) for
/// bodies of 256 bytes and more of hoop's compressible types (`gzip_static` stays on: a
/// `.gz` variant still wins, as in hoop).
pub(crate) fn nginx_config(
    prefix: &Path,
    root: &Path,
    addr: SocketAddr,
    (cert, key): (&Path, &Path),
    h2: bool,
    gzip: bool,
) -> String {
    let mut extra = format!(
        "\x20       ssl_certificate {};\n\
         \x20       ssl_certificate_key {};\n\
         \x20       ssl_protocols TLSv1.2 TLSv1.3;\n\
         \x20       ssl_prefer_server_ciphers on;\n\
         \x20       ssl_conf_command Ciphersuites {NGINX_SUITES};\n\
         \x20       ssl_ciphers {NGINX_CIPHERS};\n\
         \x20       ssl_session_tickets on;\n\
         \x20       ssl_session_cache shared:SSL:10m;\n",
        cert.display(),
        key.display()
    );
    if gzip {
        extra.push_str(&format!(
            "\x20       gzip on;\n\
             \x20       gzip_min_length 256;\n\
             \x20       gzip_types {GZIP_TYPES};\n"
        ));
    }
    let text = super::nginx::config_with(prefix, root, addr, 1, &extra);
    let listen = format!("listen {addr} ");
    let tls_listen = match h2 {
        true => format!("listen {addr} ssl http2 "),
        false => format!("listen {addr} ssl "),
    };
    text.replacen(&listen, &tls_listen, 1)
}

/// `h2load` on PATH, if any.
pub(crate) fn h2load_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("h2load"))
        .find(|p| p.is_file())
}

/// One h2load run: `h2load -c CONNS -m 1 -D SECS [-H accept-encoding] (URL | -i URIS)`.
pub(crate) struct H2loadArgs<'a> {
    /// Connections (one stream in flight on each: as many requests in flight as wrk's).
    pub conns: usize,
    /// Seconds.
    pub secs_whole: u64,
    /// Pinned there with `taskset`.
    pub client_cpu: Option<usize>,
    /// `Accept-Encoding`, if any.
    pub accept_encoding: Option<&'a str>,
    /// The URL, or a file of URLs asked for in turn (`-i`).
    pub url: &'a str,
    pub uris: Option<&'a Path>,
}

/// The command line of one h2load run.
pub(crate) fn h2load_command(h2load: &Path, a: &H2loadArgs<'_>) -> Command {
    let mut cmd = match a.client_cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(h2load);
            c
        }
        None => Command::new(h2load),
    };
    cmd.arg(format!("-c{}", a.conns))
        .arg("-m1")
        .arg(format!("-D{}", a.secs_whole));
    if let Some(enc) = a.accept_encoding {
        cmd.arg("-H").arg(format!("accept-encoding: {enc}"));
    }
    match a.uris {
        Some(file) => cmd.arg("-i").arg(file),
        None => cmd.arg(a.url),
    };
    cmd
}

/// What h2load's summary says of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct H2loadSummary {
    /// Requests per second (all of them).
    pub req_per_sec: f64,
    /// Completed answers with a 2xx status.
    pub ok: u64,
    /// Requests that failed, errored or timed out, and responses not 2xx.
    pub bad: u64,
    /// Body bytes received (the `data` of `traffic:`).
    pub data_bytes: u64,
}

/// Reads h2load's summary.
pub(crate) fn parse_h2load(text: &str) -> Option<H2loadSummary> {
    let line = |prefix: &str| text.lines().find(|l| l.trim_start().starts_with(prefix));
    let req_per_sec = line("finished in")?
        .split(',')
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // "requests: 10 total, 10 started, 10 done, 9 succeeded, 1 failed, 0 errored, 0 timeout"
    let counts = line("requests:")?;
    let count = |what: &str| -> Option<u64> {
        counts
            .split(',')
            .find(|p| p.trim().ends_with(what))?
            .split_whitespace()
            .rev()
            .nth(1)?
            .parse()
            .ok()
    };
    let (failed, errored, timeout) = (count("failed")?, count("errored")?, count("timeout")?);
    // "status codes: 9 2xx, 0 3xx, 1 4xx, 0 5xx"
    let codes = line("status codes:")?;
    let code = |class: &str| -> Option<u64> {
        codes
            .split(':')
            .nth(1)?
            .split(',')
            .find(|p| p.trim().ends_with(class))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    // A status is counted when its head arrives, an answer as succeeded when it completes:
    // the answers that count are the completed ones, less those of another class than 2xx.
    // (h2load's `failed` holds the 4xx and 5xx answers already.)
    let redirects = code("3xx")?;
    let ok = count("succeeded")?.saturating_sub(redirects);
    // "traffic: 1.17MB (1226030) total, 1.04KB (1065) headers (space savings 90.0%), 1.17MB (1224000) data"
    let traffic = line("traffic:")?;
    let data_bytes = traffic
        .split(',')
        .find(|p| p.trim().ends_with("data"))?
        .split('(')
        .nth(1)?
        .split(')')
        .next()?
        .parse()
        .ok()?;
    Some(H2loadSummary {
        req_per_sec,
        ok,
        bad: failed + errored + timeout + redirects,
        data_bytes,
    })
}

// ===== the checking client =====

/// Accepts the run's own self-signed certificate (it is made for the run) while checking the
/// handshake's signatures with it.
#[derive(Debug)]
struct RunCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for RunCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One response as the checking client read it.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub status: u16,
    pub content_encoding: Option<String>,
    pub alpn: Option<Vec<u8>>,
    pub body: Vec<u8>,
}

/// GET `path` over a new TLS connection (ALPN http/1.1), with `accept_encoding` if given.
pub(crate) fn fetch(
    addr: SocketAddr,
    path: &str,
    accept_encoding: Option<&str>,
) -> io::Result<Fetched> {
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(RunCert(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
    let conn = ClientConnection::new(Arc::new(cfg), name).map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(conn, tcp);
    let enc = accept_encoding
        .map(|e| format!("Accept-Encoding: {e}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{enc}Connection: close\r\n\r\n");
    tls.write_all(req.as_bytes())?;
    tls.flush()?;
    let alpn = tls.conn.alpn_protocol().map(|p| p.to_vec());
    let mut raw = Vec::new();
    // The server closes after the response (`Connection: close`); a close without
    // close_notify after a complete body is fine here.
    if let Err(e) = tls.read_to_end(&mut raw) {
        if e.kind() != io::ErrorKind::UnexpectedEof || raw.is_empty() {
            return Err(e);
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let end = match resp.parse(&raw) {
        Ok(httparse::Status::Complete(end)) => end,
        _ => return Err(io::Error::other(format!("{path}: no response head"))),
    };
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).to_string())
    };
    let length: Option<usize> = header("content-length").and_then(|v| v.trim().parse().ok());
    let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let body = match chunked {
        true => dechunk(&raw[end..])
            .ok_or_else(|| io::Error::other(format!("{path}: bad chunked body")))?,
        false => raw[end..].to_vec(),
    };
    if length.is_some_and(|n| n != body.len()) {
        return Err(io::Error::other(format!(
            "{path}: Content-Length {length:?}, {} body bytes",
            body.len()
        )));
    }
    Ok(Fetched {
        status: resp.code.unwrap_or(0),
        content_encoding: header("content-encoding"),
        alpn,
        body,
    })
}

/// A whole chunked body (as nginx sends what it compresses on the fly), decoded; `None` if
/// its framing is wrong or it is cut short.
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        if raw.len() < size + 2 || &raw[size..size + 2] != b"\r\n" {
            return None;
        }
        body.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunked_bodies_decode() {
        assert_eq!(
            super::dechunk(b"3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n").as_deref(),
            Some(&b"abcde"[..])
        );
        assert_eq!(super::dechunk(b"3\r\nab"), None);
    }

    use super::*;

    #[test]
    fn h2load_summary_parses() {
        let text = "finished in 2.00s, 44578.50 req/s, 45.91MB/s\n\
                    requests: 89157 total, 89207 started, 89157 done, 89150 succeeded, 7 failed, 0 errored, 0 timeout\n\
                    status codes: 89150 2xx, 0 3xx, 7 4xx, 0 5xx\n\
                    traffic: 91.83MB (96292560) total, 1.53MB (1605010) headers (space savings 90.00%), 89.39MB (91289600) data\n";
        assert_eq!(
            parse_h2load(text),
            Some(H2loadSummary {
                req_per_sec: 44578.5,
                ok: 89150,
                bad: 7,
                data_bytes: 91289600
            })
        );
    }

    #[test]
    fn nginx_is_configured_as_hoop() {
        let c = nginx_config(
            Path::new("/tmp/p"),
            Path::new("/srv"),
            "127.0.0.1:9443".parse().unwrap(),
            (Path::new("/c.pem"), Path::new("/k.pem")),
            true,
            true,
        );
        for needle in [
            "listen 127.0.0.1:9443 ssl http2 ",
            "ssl_certificate /c.pem;",
            "ssl_prefer_server_ciphers on;",
            "Ciphersuites TLS_AES_128_GCM_SHA256:",
            "ssl_session_tickets on;",
            "gzip on;",
        ] {
            assert!(c.contains(needle), "{needle} in {c}");
        }
    }
}
