//! HTTPS and HTTP/2 (`Config::tls`), on both drivers: files, ranges, conditionals and
//! variants over HTTP/1.1 in TLS and over HTTP/2 (ALPN), a handshake that fails (no protocol
//! in common), garbage instead of a ClientHello, a certificate reloaded mid-transfer, bad
//! certificate and key files refused with one line, an HTTP/2 client opening more streams
//! than allowed, and a window that never opens (bounded by the idle deadline).
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count. Under injected resets each exchange runs again
//! on a new connection (`resets::retry`).

mod serve;
mod site;
mod tls_client;

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use hoop::DriverKind;
use hoop_http::{Config, Server, TlsFiles};
use hoop_test_support::resets;
use site::{bytes, make_root, try_read_response, TestServer};
use tls_client::*;

fn tls_config(dir: &std::path::Path) -> (Config, TlsFiles) {
    let (cert, key) = make_cert(dir, "site");
    let files = TlsFiles { cert, key };
    let cfg = Config {
        tls: Some(files.clone()),
        idle_timeout: Duration::from_millis(1500),
        ..Config::default()
    };
    (cfg, files)
}

/// One request on a new HTTP/1.1-over-TLS connection.
fn get_tls(addr: std::net::SocketAddr, req: &str) -> io::Result<site::Response> {
    let cfg = client_config(&[b"http/1.1"], false);
    let mut tls = connect(addr, &cfg)?;
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    tls.write_all(req.as_bytes())?;
    tls.flush()?;
    try_read_response(&mut tls, req.starts_with("HEAD"))
}

fn https_http1(kind: DriverKind) {
    let (base, root) = make_root(&format!("tls-h1-{kind}"));
    let body = bytes(300_000, 7);
    std::fs::write(root.join("big.bin"), &body).unwrap();
    std::fs::write(root.join("a.txt"), b"hello over tls\n").unwrap();
    let (cfg, _) = tls_config(&base.0);
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let addr = server.addr;
    let r = resets::retry("GET /a.txt over TLS", |_| {
        get_tls(addr, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
    });
    assert_eq!((r.status, &r.body[..]), (200, &b"hello over tls\n"[..]));
    let etag = r.header("etag").unwrap().to_string();
    let r = resets::retry("GET /big.bin over TLS", |_| {
        get_tls(addr, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    });
    assert_eq!(r.status, 200);
    assert!(r.body == body, "the 300 KB body over TLS");
    let r = resets::retry("a range over TLS", |_| {
        get_tls(
            addr,
            "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000-1999\r\n\r\n",
        )
    });
    assert_eq!((r.status, &r.body[..]), (206, &body[1000..2000]));
    let req = format!("GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\n");
    let r = resets::retry("a conditional over TLS", |_| get_tls(addr, &req));
    assert_eq!(r.status, 304);
    let r = resets::retry("HEAD over TLS", |_| {
        get_tls(addr, "HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    });
    assert_eq!(r.header("content-length"), Some("300000"));
    let r = resets::retry("a 404 over TLS", |_| {
        get_tls(addr, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
    });
    assert_eq!(r.status, 404);

    // Keep-alive and a TLS 1.2 client.
    resets::retry("two requests on one TLS 1.2 connection", |_| {
        let cfg = client_config(&[b"http/1.1"], true);
        let mut tls = connect(addr, &cfg)?;
        assert_eq!(
            tls.conn.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_2)
        );
        for _ in 0..2 {
            tls.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")?;
            tls.flush()?;
            let r = try_read_response(&mut tls, false)?;
            assert_eq!(r.body, b"hello over tls\n");
        }
        Ok(())
    });
}

#[test]
fn https_http1_uring() {
    https_http1(DriverKind::Uring);
}

#[test]
fn https_http1_epoll() {
    https_http1(DriverKind::Epoll);
}

/// A failed handshake, then garbage instead of a ClientHello: each connection is closed
/// (an alert at most), and the server goes on serving.
fn bad_handshakes(kind: DriverKind) {
    let (base, root) = make_root(&format!("tls-bad-{kind}"));
    std::fs::write(root.join("a.txt"), b"still here\n").unwrap();
    let (cfg, _) = tls_config(&base.0);
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let addr = server.addr;
    // No application protocol in common: rustls refuses (no_application_protocol).
    let only_spdy = client_config(&[b"spdy/3"], false);
    match connect(addr, &only_spdy) {
        Ok(_) => panic!("a handshake with no protocol in common succeeded"),
        Err(e) => assert!(
            e.to_string().contains("NoApplicationProtocol")
                || e.to_string().contains("no_application_protocol")
                || resets::injected(),
            "{e}"
        ),
    }
    // Plain HTTP and random bytes at a TLS port.
    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"[..],
        &bytes(600, 3)[..],
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0, 0, 0][..],
    ] {
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let _ = tcp.write_all(garbage);
        let mut got = Vec::new();
        let started = Instant::now();
        // The server answers with an alert (a record of type 21) at most, then closes.
        let end = tcp.read_to_end(&mut got);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the connection stayed open"
        );
        if end.is_ok() && !got.is_empty() {
            assert_eq!(got[0], 21, "an alert record, got {got:?}");
        }
    }
    let r = resets::retry("GET after bad handshakes", |_| {
        get_tls(addr, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
    });
    assert_eq!(r.body, b"still here\n");
    server.assert_running();
}

#[test]
fn bad_handshakes_uring() {
    bad_handshakes(DriverKind::Uring);
}

#[test]
fn bad_handshakes_epoll() {
    bad_handshakes(DriverKind::Epoll);
}

/// The certificate is replaced and reloaded while a download runs: the download finishes on
/// the old one, new connections get the new one, and a reload of a bad pair keeps it.
fn reload_mid_transfer(kind: DriverKind) {
    let (base, root) = make_root(&format!("tls-reload-{kind}"));
    // Bigger than the sockets' buffers, so the server is still sending at the reload (a
    // smaller body under injected resets, which would rarely let 4 MiB through whole).
    let len = if resets::injected() {
        512 << 10
    } else {
        4 << 20
    };
    let body = bytes(len, 11);
    std::fs::write(root.join("big.bin"), &body).unwrap();
    let (cfg, files) = tls_config(&base.0);
    let old_der = cert_der(&files.cert);
    let server = Server::new(&root, cfg).unwrap();
    let reloader = server.tls_reloader().expect("a TLS server has a reloader");
    let Some(server) = TestServer::from_server(kind, server) else {
        return;
    };
    let addr = server.addr;
    let cfg = client_config(&[b"http/1.1"], false);
    let mut reloaded = false;
    resets::retry("a download across a reload", |_| {
        let mut tls = connect(addr, &cfg)?;
        let before = peer_cert(&tls);
        tls.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")?;
        tls.flush()?;
        let head = site::try_read_head(&mut tls)?;
        assert!(head.starts_with(b"HTTP/1.1 200"));
        let mut got = vec![0u8; body.len()];
        let first = len / 4;
        site::read_fully(&mut tls, &mut got[..first], "the first quarter")?;
        if !reloaded {
            reloaded = true;
            assert_eq!(before, old_der);
            // A new pair in place of the old: new connections get it.
            let (c2, k2) = make_cert(&base.0, "next");
            std::fs::rename(&c2, &files.cert).unwrap();
            std::fs::rename(&k2, &files.key).unwrap();
            reloader.reload().expect("the new pair loads");
        }
        // A client of its own: one sharing `cfg` would resume the first session (its
        // ticket survives the reload) and be shown the certificate of that session.
        let fresh = connect(addr, &client_config(&[b"http/1.1"], false))?;
        assert_eq!(peer_cert(&fresh), cert_der(&files.cert));
        assert_ne!(peer_cert(&fresh), old_der);
        site::read_fully(&mut tls, &mut got[first..], "the rest")?;
        assert!(got == body, "the download across the reload");
        Ok(())
    });
    // A key that is not the certificate's: the reload fails and the pair in use stays.
    let kept = cert_der(&files.cert);
    let (_, other_key) = make_cert(&base.0, "other");
    std::fs::copy(&other_key, &files.key).unwrap();
    let e = reloader.reload().unwrap_err();
    assert!(e.to_string().contains("does not belong"), "{e}");
    let fresh = resets::retry("a handshake after a failed reload", |_| {
        connect(addr, &client_config(&[b"http/1.1"], false))
    });
    assert_eq!(peer_cert(&fresh), kept);
}

#[test]
fn reload_mid_transfer_uring() {
    reload_mid_transfer(DriverKind::Uring);
}

#[test]
fn reload_mid_transfer_epoll() {
    reload_mid_transfer(DriverKind::Epoll);
}

/// Each bad pair is refused when the server is made, with one line naming the file.
#[test]
fn bad_certificate_files_are_refused() {
    let (base, root) = make_root("tls-files");
    let dir = &base.0;
    let (cert, key) = make_cert(dir, "good");
    let (_, other_key) = make_cert(dir, "other");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, b"").unwrap();
    let garbage = dir.join("garbage.pem");
    std::fs::write(
        &garbage,
        b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.join("missing.pem");
    let cases = [
        (&missing, &key, "cannot read"),
        (&cert, &missing, "cannot read"),
        (&empty, &key, "no certificate in"),
        (&cert, &empty, "no private key in"),
        (&key, &key, "no certificate in"),
        (&cert, &cert, "no private key in"),
        (&garbage, &key, "is not valid PEM"),
        (&cert, &other_key, "does not belong to the certificate"),
    ];
    for (c, k, want) in cases {
        let e = Server::builder(&root).tls(c, k).build().unwrap_err();
        let line = e.to_string();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{line}");
        assert!(line.contains(want), "{c:?} {k:?}: {line}");
        assert!(!line.contains('\n'), "one line: {line}");
    }
    assert!(Server::builder(&root).tls(&cert, &key).build().is_ok());
}

// ===== HTTP/2 =====

/// One request over HTTP/2 with h2's client: status, headers and body.
async fn h2_get(
    addr: std::net::SocketAddr,
    reqs: Vec<http::Request<()>>,
) -> io::Result<Vec<(u16, http::HeaderMap, Vec<u8>)>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let connector = tokio_rustls::TlsConnector::from(client_config(&[b"h2"], false));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await?;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (client, conn) = h2::client::handshake(tls).await.map_err(h2_err)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for req in reqs {
        let mut client = client.clone().ready().await.map_err(h2_err)?;
        let (resp, _) = client.send_request(req, true).map_err(h2_err)?;
        pending.push(resp);
    }
    for resp in pending {
        let resp = resp.await.map_err(h2_err)?;
        let (parts, mut body) = resp.into_parts();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(h2_err)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        out.push((parts.status.as_u16(), parts.headers, bytes));
    }
    Ok(out)
}

/// h2's error as the I/O error under it where there is one (a reset, an end of stream), so
/// that `resets::retry` can tell a lost connection.
fn h2_err(e: h2::Error) -> io::Error {
    match e.get_io() {
        Some(io) => io::Error::new(io.kind(), e.to_string()),
        None if e.is_go_away() || e.is_reset() => {
            io::Error::new(io::ErrorKind::ConnectionAborted, e.to_string())
        }
        None => io::Error::other(e),
    }
}

fn h2_run(
    addr: std::net::SocketAddr,
    what: &str,
    make: impl Fn() -> Vec<http::Request<()>>,
) -> Vec<(u16, http::HeaderMap, Vec<u8>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    resets::retry(what, |_| {
        rt.block_on(async {
            tokio::time::timeout(IO_TIMEOUT, h2_get(addr, make()))
                .await
                .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
        })
    })
}

fn get_req(path: &str, headers: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::get(format!("https://localhost{path}"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

fn http2_files(kind: DriverKind) {
    let (base, root) = make_root(&format!("tls-h2-{kind}"));
    // Under injected resets (2% of socket operations) a big body would rarely get through
    // whole: a smaller one keeps the retries few.
    let len = if resets::injected() {
        256 << 10
    } else {
        2 << 20
    };
    let body = bytes(len, 5);
    std::fs::write(root.join("big.bin"), &body).unwrap();
    let css = b"body { color: red; }\n".repeat(50);
    std::fs::write(root.join("a.css"), &css).unwrap();
    std::fs::write(root.join("a.css.gz"), b"PRE-GZ").unwrap();
    let (cfg, _) = tls_config(&base.0);
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let addr = server.addr;
    let got = h2_run(addr, "files over HTTP/2", || {
        vec![
            get_req("/big.bin", &[]),
            get_req("/a.css", &[]),
            get_req("/a.css", &[("accept-encoding", "gzip")]),
            get_req("/big.bin", &[("range", "bytes=100-199")]),
            get_req("/big.bin", &[("range", "bytes=100-199,300-399")]),
            get_req("/nope", &[]),
            get_req("/big.bin", &[("range", "bytes=9999999-")]),
        ]
    });
    assert_eq!(got[0].0, 200);
    assert!(got[0].2 == body, "the big body over HTTP/2");
    assert_eq!(got[0].1["content-length"], &*len.to_string());
    assert!(got[0].1.get("connection").is_none());
    assert_eq!((got[1].0, &got[1].2[..]), (200, &css[..]));
    assert_eq!(got[1].1["vary"], "Accept-Encoding");
    assert_eq!(
        (
            got[2].0,
            &got[2].2[..],
            got[2].1["content-encoding"].to_str().unwrap()
        ),
        (200, &b"PRE-GZ"[..], "gzip")
    );
    assert_eq!((got[3].0, &got[3].2[..]), (206, &body[100..200]));
    assert_eq!(got[4].0, 206);
    let ct = got[4].1["content-type"].to_str().unwrap();
    assert!(ct.starts_with("multipart/byteranges"), "{ct}");
    assert_eq!(got[5].0, 404);
    assert_eq!(got[6].0, 416);

    // Conditionals: If-None-Match, If-Match (412), a HEAD with no body.
    let etag = got[1].1["etag"].to_str().unwrap().to_string();
    let got = h2_run(addr, "conditionals over HTTP/2", || {
        vec![
            get_req("/a.css", &[("if-none-match", &etag)]),
            get_req("/a.css", &[("if-match", "\"other\"")]),
            http::Request::head("https://localhost/big.bin")
                .body(())
                .unwrap(),
        ]
    });
    assert_eq!((got[0].0, got[0].2.len()), (304, 0));
    assert_eq!(got[1].0, 412);
    assert_eq!((got[2].0, got[2].2.len()), (200, 0));
    assert_eq!(got[2].1["content-length"], &*len.to_string());
}

#[test]
fn http2_files_uring() {
    http2_files(DriverKind::Uring);
}

#[test]
fn http2_files_epoll() {
    http2_files(DriverKind::Epoll);
}

/// Opens a raw HTTP/2 connection: preface and `settings`, the server's SETTINGS acked.
fn raw_h2(addr: std::net::SocketAddr, settings: &[(u16, u32)]) -> io::Result<Tls> {
    let cfg = client_config(&[b"h2"], false);
    let mut tls = connect(addr, &cfg)?;
    send(&mut tls, &preface(settings))?;
    send(&mut tls, &frame(SETTINGS, 0x1, 0, &[]))?;
    Ok(tls)
}

/// 300 streams opened at once past the limit of 128: each is answered or refused
/// (RST_STREAM REFUSED_STREAM), some are refused, and the connection still serves.
fn too_many_streams(kind: DriverKind) {
    let (base, root) = make_root(&format!("tls-streams-{kind}"));
    std::fs::write(root.join("a.txt"), b"x").unwrap();
    let (cfg, _) = tls_config(&base.0);
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let addr = server.addr;
    let (answered, refused) = resets::retry("more streams than allowed", |_| {
        let mut tls = raw_h2(addr, &[])?;
        let mut burst = Vec::new();
        for i in 0..300u32 {
            burst.extend_from_slice(&get(1 + 2 * i, "/a.txt"));
        }
        send(&mut tls, &burst)?;
        let (mut answered, mut refused) = (0u32, 0u32);
        let mut ended = std::collections::HashSet::new();
        for _ in 0..5000 {
            if ended.len() == 300 {
                break;
            }
            let f = read_frame(&mut tls)?;
            match f.kind {
                HEADERS if f.stream > 0 => {
                    // `:status 200` is static-table index 8.
                    assert_eq!(f.payload.first(), Some(&0x88), "{f:?}");
                }
                DATA if f.flags & 0x1 != 0 => {
                    answered += 1;
                    ended.insert(f.stream);
                }
                RST_STREAM => {
                    assert_eq!(f.payload, 7u32.to_be_bytes(), "REFUSED_STREAM");
                    refused += 1;
                    ended.insert(f.stream);
                }
                GOAWAY => panic!("the connection was closed: {f:?}"),
                _ => {}
            }
        }
        assert_eq!(ended.len(), 300, "every stream answered or refused");
        // The connection still serves.
        send(&mut tls, &get(1001, "/a.txt"))?;
        for _ in 0..100 {
            let f = read_frame(&mut tls)?;
            if f.stream == 1001 && f.kind == DATA && f.flags & 0x1 != 0 {
                return Ok((answered, refused));
            }
        }
        panic!("no answer after the burst");
    });
    assert!(refused > 0, "none of 300 streams was refused");
    assert!(answered >= 128, "answered {answered}");
}

#[test]
fn too_many_streams_uring() {
    too_many_streams(DriverKind::Uring);
}

#[test]
fn too_many_streams_epoll() {
    too_many_streams(DriverKind::Epoll);
}

/// A client whose windows never open (SETTINGS_INITIAL_WINDOW_SIZE 0, no WINDOW_UPDATE):
/// the response head goes out, the body waits, and after the idle deadline the stream is
/// reset; other connections are served meanwhile.
fn window_never_opens(kind: DriverKind) {
    let (base, root) = make_root(&format!("tls-window-{kind}"));
    std::fs::write(root.join("big.bin"), bytes(200_000, 1)).unwrap();
    std::fs::write(root.join("a.txt"), b"ok").unwrap();
    let (cfg, _) = tls_config(&base.0);
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let addr = server.addr;
    resets::retry("a window that never opens", |_| {
        let mut tls = raw_h2(addr, &[(0x4, 0)])?;
        send(&mut tls, &get(1, "/big.bin"))?;
        let started = Instant::now();
        let mut saw_head = false;
        for _ in 0..100 {
            let f = read_frame(&mut tls)?;
            match (f.kind, f.stream) {
                (HEADERS, 1) => saw_head = true,
                (DATA, 1) => assert!(f.payload.is_empty(), "DATA past a closed window"),
                (RST_STREAM, 1) => {
                    assert!(saw_head);
                    // Bounded by the idle deadline (1.5 s), not by the client.
                    assert!(started.elapsed() < Duration::from_secs(15));
                    return Ok(());
                }
                (GOAWAY, _) => return Ok(()),
                (PING, _) => send(&mut tls, &frame(PING, 0x1, 0, &f.payload))?,
                _ => {}
            }
            // Meanwhile another connection is served.
            if !saw_head {
                continue;
            }
        }
        panic!("the stream was never reset");
    });
    let r = resets::retry("GET beside a stalled stream", |_| {
        get_tls(addr, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
    });
    assert_eq!(r.body, b"ok");
}

#[test]
fn window_never_opens_uring() {
    window_never_opens(DriverKind::Uring);
}

#[test]
fn window_never_opens_epoll() {
    window_never_opens(DriverKind::Epoll);
}

/// Where the kernel has kTLS the probe says so; here it usually does not, and says why.
#[test]
fn ktls_probe() {
    if !hoop_http::ktls_available() {
        eprintln!(
            "SKIPPED ktls_probe: this kernel has no `tls` module (setsockopt(TCP_ULP, \"tls\") \
             failed): records are encrypted by rustls"
        );
        return;
    }
    eprintln!("ktls_probe: the kernel's `tls` module is present");
}
