//! `hoop serve http` over HTTPS, seen from outside: `--tls-cert`/`--tls-key` served on both
//! drivers, the certificate reloaded on SIGHUP (a pair that does not load said on stderr and
//! the old one kept), and each bad TLS or compression flag refused with exit 1 and one line.
//! (HTTPS and HTTP/2 themselves: hoop-http's `tests/tls.rs`.)
//!
//! Every client read and write has a timeout; every loop is bounded in count and time.

mod support;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use hoop_test_support as common;
use hoop_test_support::resets;
use hoop_test_support::tls::{cert_der, client_config, connect, make_cert, peer_cert};
use support::Served;

/// GET `path` on a new TLS connection: the status line's code, the body, the server's
/// certificate.
fn get(addr: SocketAddr, path: &str) -> io::Result<(u16, Vec<u8>, Vec<u8>)> {
    let mut tls = connect(addr, &client_config(&[b"http/1.1"], false))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    tls.write_all(req.as_bytes())?;
    tls.flush()?;
    let mut raw = Vec::new();
    tls.read_to_end(&mut raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| resets::closed_early("the response head"))?;
    let code = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
    Ok((code, raw[end + 4..].to_vec(), peer_cert(&tls)))
}

/// Waits for a stderr line containing `needle` (at most 10 s).
fn wait_line(lines: &mpsc::Receiver<String>, needle: &str) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(l) if l.contains(needle) => return l,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    panic!("no stderr line with {needle:?}");
}

fn sighup_reload(driver: &str) {
    let (base, root) = common::http::make_root(&format!("https-{driver}"));
    let (cert, key) = make_cert(&base.0, "site");
    let mut cmd = common::command(env!("CARGO_BIN_EXE_hoop"));
    cmd.args([
        "serve",
        "http",
        "--addr",
        "127.0.0.1:0",
        "--driver",
        driver,
        "--root",
    ])
    .arg(&root)
    .arg("--tls-cert")
    .arg(&cert)
    .arg("--tls-key")
    .arg(&key);
    let mut served = Served::start(&mut cmd, Stdio::piped(), Duration::from_secs(20));
    let stderr = served.child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let addr = served.addr;
    let (code, body, presented) = resets::retry("GET over HTTPS", |_| get(addr, "/a.txt"));
    assert_eq!((code, &body[..]), (200, &b"hello, world\n"[..]));
    assert_eq!(presented, cert_der(&cert));
    let pid = served.child.id() as libc::pid_t;

    // A new pair in place, then SIGHUP: new connections get it.
    let (c2, k2) = make_cert(&base.0, "next");
    std::fs::rename(&c2, &cert).unwrap();
    std::fs::rename(&k2, &key).unwrap();
    // SAFETY: kill(2) on our own child, not reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    wait_line(&lines, "SIGHUP: new connections use");
    let (_, _, presented) = resets::retry("GET after the reload", |_| get(addr, "/a.txt"));
    assert_eq!(presented, cert_der(&cert));

    // A key that is not the certificate's: said, and the pair in use stays.
    let (_, other) = make_cert(&base.0, "other");
    std::fs::copy(&other, &key).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    let line = wait_line(&lines, "SIGHUP: kept the certificate in use");
    assert!(line.contains("does not belong"), "{line}");
    let (code, _, kept) = resets::retry("GET after a failed reload", |_| get(addr, "/a.txt"));
    assert_eq!((code, kept), (200, cert_der(&cert)));

    // SIGTERM still stops it cleanly.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let until = std::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = served.child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < until, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn https_and_sighup_reload_uring() {
    sighup_reload("uring");
}

#[test]
fn https_and_sighup_reload_epoll() {
    sighup_reload("epoll");
}

/// Each bad TLS or compression flag (on the command line or in a config file): exit 1, one
/// line naming what is wrong, no panic.
#[test]
fn bad_tls_and_compression_flags_exit_one_with_one_line() {
    let (base, root) = common::http::make_root("https-bad");
    let dir = &base.0;
    let (cert, key) = make_cert(dir, "good");
    let (_, other_key) = make_cert(dir, "other");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.join("missing.pem");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let r = s(&root);
    let cfg = dir.join("site.toml");
    let text = format!(
        "root = {r:?}\ntls-cert = {:?}\ntls-key = {:?}\n",
        s(&missing),
        s(&key)
    );
    std::fs::write(&cfg, text).unwrap();
    let cfg_bad_bool = dir.join("bool.toml");
    std::fs::write(
        &cfg_bad_bool,
        format!("root = {r:?}\ncompress = \"maybe\"\n"),
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--tls-cert".into(),
                s(&missing),
                "--tls-key".into(),
                s(&key),
            ],
            "cannot read",
        ),
        (
            vec![
                "--tls-cert".into(),
                s(&cert),
                "--tls-key".into(),
                s(&missing),
            ],
            "cannot read",
        ),
        (vec!["--tls-cert".into(), s(&cert)], "--tls-key"),
        (vec!["--tls-key".into(), s(&key)], "--tls-cert"),
        (
            vec![
                "--tls-cert".into(),
                s(&cert),
                "--tls-key".into(),
                s(&other_key),
            ],
            "does not belong",
        ),
        (
            vec!["--tls-cert".into(), s(&empty), "--tls-key".into(), s(&key)],
            "no certificate",
        ),
        (
            vec!["--tls-cert".into(), s(&cert), "--tls-key".into(), s(&empty)],
            "no private key",
        ),
        (
            vec!["--tls-cert".into(), s(&key), "--tls-key".into(), s(&key)],
            "no certificate",
        ),
        (
            vec!["--tls-cert".into(), s(&cert), "--tls-key".into(), s(&cert)],
            "no private key",
        ),
        (vec!["--http2=maybe".into()], "--http2"),
        (vec!["--compress=maybe".into()], "--compress"),
        (vec!["--compress".into(), "yes".into()], "yes"),
    ];
    for (extra, needle) in cases {
        let mut args = vec![
            "serve".to_string(),
            "http".into(),
            "--root".into(),
            r.clone(),
        ];
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = support::run_hoop(&args);
        support::assert_refused(&out, &args, needle);
        let err = common::stderr_text(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    for (file, needle) in [
        (&cfg, "cannot read"),
        (&cfg_bad_bool, "bool.toml:2: bad value for `compress`"),
    ] {
        let args = ["serve", "http", "--config", file.to_str().unwrap()];
        let out = support::run_hoop(&args);
        support::assert_refused(&out, &args, needle);
    }
}
