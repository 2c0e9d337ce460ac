//! A TLS client for the HTTPS tests: certificates made per test (rcgen), a rustls client that
//! accepts them while checking the handshake's signatures, and a blocking connection with a
//! timeout on every read and write.

use std::io;
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

/// The DER of the first certificate in a PEM file.
pub fn cert_der(pem: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_file(pem).unwrap().to_vec()
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

/// A client configuration offering `alpn`, TLS 1.3 and 1.2 (only 1.2 with `tls12_only`).
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

/// A TLS connection.
pub type Tls = StreamOwned<ClientConnection, TcpStream>;

/// Connects to `addr` and completes the handshake.
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
