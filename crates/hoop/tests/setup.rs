//! A refused io_uring setup is explained, and the default (auto) falls back to epoll: the test
//! re-runs itself in a child process whose seccomp filter makes `io_uring_setup` fail with EPERM
//! (as Docker's default profile does), and checks that a forced io_uring fails with an error
//! naming EPERM, the cause and the remedy, while `Runtime::new()` runs on epoll, says why in one
//! line on stderr, and serves a TCP echo correctly.

use std::time::Duration;

use hoop::net::{TcpListener, TcpStream};
use hoop::DriverKind;

use common::block_io_uring_setup;
use hoop_test_support as common;

const CHILD_ENV: &str = "HOOP_TEST_SECCOMP_CHILD";

/// A TCP echo round trip over 127.0.0.1 on the current runtime: returns what came back.
async fn echo_round_trip(payload: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let l = TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    let server = hoop::spawn(async move {
        let (s, _) = l.accept().await?;
        // Large enough for the payload in a few reads: fewer operations for a reset to end.
        let mut buf = Vec::with_capacity(65536);
        loop {
            buf.clear();
            let (res, b) = s.read(buf).await;
            let n = res?;
            if n == 0 {
                return s.close().await;
            }
            let (res, b) = s.write_all(b).await;
            res?;
            buf = b;
        }
    });
    let c = TcpStream::connect(addr).await?;
    let (res, _) = c.write_all(payload.clone()).await;
    res?;
    let (res, echoed) = c.read_exact(vec![0u8; payload.len()]).await;
    res?;
    c.close().await?;
    server
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
    Ok(echoed)
}

/// The child's side: io_uring is blocked by seccomp; prints what it found on stdout.
fn seccomp_child() {
    block_io_uring_setup();
    // (a) A forced io_uring fails, with the explanation.
    match hoop::Runtime::builder().driver(DriverKind::Uring).build() {
        Ok(_) => println!("CHILD-URING: setup succeeded"),
        Err(e) => println!("CHILD-URING: {e}"),
    }
    // (b) The default falls back to epoll and works.
    let rt = match hoop::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            println!("CHILD-AUTO: failed: {e}");
            return;
        }
    };
    println!("CHILD-AUTO: driver={:?}", rt.driver_kind());
    let payload: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    // An echo that an injected reset ended is asked again on a new connection (bounded);
    // without injected resets the first error is the answer.
    let res = rt.block_on(hoop::time::timeout(Duration::from_secs(10), async {
        let mut attempt = 0;
        loop {
            match echo_round_trip(payload.clone()).await {
                Err(e)
                    if attempt < common::resets::MAX_RETRIES
                        && common::resets::is_reset(&e)
                        && common::resets::injected() =>
                {
                    attempt += 1;
                }
                r => return r,
            }
        }
    }));
    match res {
        Ok(Ok(echoed)) if echoed == payload => println!("CHILD-ECHO: ok"),
        Ok(Ok(echoed)) => println!("CHILD-ECHO: {} bytes came back, differing", echoed.len()),
        Ok(Err(e)) => println!("CHILD-ECHO: error: {e}"),
        Err(_) => println!("CHILD-ECHO: timed out"),
    }
}

#[test]
fn seccomp_eperm_is_explained() {
    let _faults = common::faults_off(
        &["setup"],
        "checks the message of a real EPERM from seccomp, which a made-up setup error \
         replaces",
    );
    if std::env::var_os(CHILD_ENV).is_some() {
        seccomp_child();
        return;
    }
    // The default must decide (auto), whatever the environment of this test says.
    let run = common::run_test_child("seccomp_eperm_is_explained", CHILD_ENV);
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    let result = |tag: &str| run.tagged(tag);
    // (a) A forced io_uring: the error names EPERM, the cause and the remedy.
    let line = result("CHILD-URING: ");
    assert!(line.contains("EPERM"), "{line}");
    assert!(line.contains("seccomp"), "{line}");
    assert!(line.contains("HOOP_DRIVER=epoll"), "{line}");
    // (b) The default: epoll, with one line on stderr saying why, and an echo that works.
    assert_eq!(result("CHILD-AUTO: "), "driver=Epoll", "stderr: {stderr}");
    let reasons: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("io_uring unavailable"))
        .collect();
    assert_eq!(reasons.len(), 1, "one line with the reason: {stderr}");
    assert!(reasons[0].contains("EPERM"), "{}", reasons[0]);
    assert_eq!(result("CHILD-ECHO: "), "ok", "stderr: {stderr}");
    assert!(run.status.success(), "child failed: {stdout}\n{stderr}");
}

#[test]
fn setup_error_kinds_are_io_error_kinds() {
    let e = hoop::setup::SetupError::classify(std::io::Error::from_raw_os_error(libc::ENOSYS), 256);
    assert_eq!(e.kind(), hoop::setup::SetupErrorKind::NotSupported);
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::Unsupported);
    assert!(io.to_string().contains("ENOSYS"), "{io}");
}
