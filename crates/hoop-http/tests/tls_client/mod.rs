//! A blocking TLS client for the HTTPS tests (rustls over a std socket, with a timeout on
//! every read and write), a certificate made per test (rcgen), and a raw HTTP/2 frame codec
//! small enough to send what a well-behaved client library never would (more streams than
//! allowed, a window that never opens).

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

/// Every client read and write gives up after this long.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A self-signed certificate for `localhost` written as `NAME.crt` and `NAME.key` in `dir`.
pub fn make_cert(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    (crt, key)
}

/// Accepts any certificate (the tests' are self-signed) but checks the handshake's
/// signatures with it, so the server must hold the certificate's key.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
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
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration offering `alpn`, TLS 1.3 and 1.2 (or only `versions`).
pub fn client_config(alpn: &[&[u8]], tls12_only: bool) -> Arc<rustls::ClientConfig> {
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match tls12_only {
        true => &[&rustls::version::TLS12],
        false => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cfg)
}

/// A TLS connection to `addr`.
pub type Tls = StreamOwned<ClientConnection, TcpStream>;

/// Connects and completes the handshake.
pub fn connect(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> io::Result<Tls> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    let conn = ClientConnection::new(cfg.clone(), ServerName::try_from("localhost").unwrap())
        .map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// The certificate the server presented.
pub fn peer_cert(tls: &Tls) -> Vec<u8> {
    tls.conn.peer_certificates().unwrap()[0].to_vec()
}

/// The DER of the first certificate in a PEM file.
pub fn cert_der(pem: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_file(pem).unwrap().to_vec()
}

// ===== raw HTTP/2 frames =====

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;

/// One frame.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The connection preface and a SETTINGS frame of `(id, value)` pairs.
pub fn preface(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut p = Vec::new();
    for (id, v) in settings {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&frame(SETTINGS, 0, 0, &p));
    out
}

/// A GET of `path` on `stream` (HPACK: indexed `:method GET`, `:scheme https`, literal
/// `:path` and `:authority`, no Huffman), ending the stream.
pub fn get(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x87];
    block.push(0x04);
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    block.push(0x01);
    block.push(9);
    block.extend_from_slice(b"localhost");
    frame(HEADERS, 0x4 | 0x1, stream, &block)
}

/// Reads one frame.
pub fn read_frame(s: &mut impl Read) -> io::Result<Frame> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head)?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let mut payload = vec![0; len];
    s.read_exact(&mut payload)?;
    Ok(Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload,
    })
}

/// Sends `bytes` and flushes.
pub fn send(s: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    s.write_all(bytes)?;
    s.flush()
}
