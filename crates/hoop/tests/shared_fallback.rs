//! `hoop::shared` where io_uring is refused: the test re-runs itself in a child process whose
//! seccomp filter makes `io_uring_setup` fail with EPERM (as Docker's default profile does).
//! There `Rings::new()` builds the set on hoop's epoll driver and says why in one line on
//! stderr, a forced io_uring set fails with the reason, and the same API keeps working from a
//! tokio multi-thread runtime: a TCP echo through the owned-buffer methods and through tokio's
//! I/O traits, and a file written and read back, every byte checked.

use std::time::Duration;

use hoop::shared::{Rings, TcpListener, TcpStream};
use hoop::DriverKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use hoop_test_support as common;

const CHILD_ENV: &str = "HOOP_TEST_SHARED_SECCOMP_CHILD";

fn payload(len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i % 251) as u8).collect()
}

/// An echo through the owned-buffer methods on one side and tokio's traits on the other.
async fn echo(rings: Rings) -> std::io::Result<bool> {
    let listener = TcpListener::bind(&rings, "127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        let mut buf = vec![0u8; 8192];
        loop {
            // tokio's traits (the inherent methods take owned buffers).
            let n = AsyncReadExt::read(&mut s, &mut buf[..]).await?;
            if n == 0 {
                return std::io::Result::Ok(());
            }
            AsyncWriteExt::write_all(&mut s, &buf[..n]).await?;
        }
    });
    let data = payload(200_000);
    let c = TcpStream::connect(&rings, addr).await?;
    let writer = {
        let c = c.clone();
        let data = data.clone();
        tokio::spawn(async move {
            let (res, _) = hoop::shared::TcpStream::write_all(&c, data).await;
            res
        })
    };
    let reader = async {
        let (res, echoed) = c.read_exact(vec![0u8; data.len()]).await;
        res.map(|()| echoed)
    };
    // A failed write (a reset) ends the echo at once, its connection dropped, rather than
    // leave the read waiting for bytes that will never come.
    let written = async { writer.await.map_err(std::io::Error::other)? };
    let (echoed, ()) = tokio::try_join!(reader, written)?;
    c.shutdown_with(std::net::Shutdown::Write).await?;
    server.await.map_err(std::io::Error::other)??;
    Ok(echoed == data)
}

async fn file_round_trip(rings: Rings) -> std::io::Result<bool> {
    let path = std::env::temp_dir().join(format!("hoop-shared-fallback-{}", std::process::id()));
    let data = payload(300_000);
    hoop::shared::fs::write(&rings, &path, data.clone()).await?;
    let back = hoop::shared::fs::read(&rings, &path).await?;
    let _ = std::fs::remove_file(&path);
    Ok(back == data)
}

/// The child's side: io_uring is blocked by seccomp; prints what it found on stdout.
fn child() {
    common::block_io_uring_setup();
    match Rings::builder().driver(DriverKind::Uring).build() {
        Ok(_) => println!("CHILD-URING: setup succeeded"),
        Err(e) => println!("CHILD-URING: {e}"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rings = match Rings::new() {
        Ok(r) => r,
        Err(e) => return println!("CHILD-AUTO: failed: {e}"),
    };
    println!("CHILD-AUTO: driver={:?}", rings.driver_kind());
    println!(
        "CHILD-REASON: {}",
        rings.fallback_reason().unwrap_or("(none)")
    );
    let run = |what: &str, ok: std::io::Result<bool>| match ok {
        Ok(true) => println!("CHILD-{what}: ok"),
        Ok(false) => println!("CHILD-{what}: bytes differ"),
        Err(e) => println!("CHILD-{what}: error: {e}"),
    };
    let r = rings.clone();
    run(
        "ECHO",
        rt.block_on(async move {
            // A reset (injected) ends an echo: again on a new connection.
            let echo =
                common::resets::retry_async("an echo through the fallback", |_| echo(r.clone()));
            tokio::time::timeout(Duration::from_secs(20), echo)
                .await
                .map_err(|_| std::io::Error::other("timed out"))
        }),
    );
    let r = rings.clone();
    run(
        "FILE",
        rt.block_on(async move {
            tokio::time::timeout(Duration::from_secs(20), file_round_trip(r))
                .await
                .unwrap_or_else(|_| Err(std::io::Error::other("timed out")))
        }),
    );
    println!("CHILD-IN-FLIGHT: {}", rings.in_flight());
}

#[test]
fn shared_rings_fall_back_to_epoll_under_seccomp() {
    let _faults = common::faults_off(
        &["setup"],
        "checks the reason a real seccomp EPERM gives, which a made-up setup error replaces",
    );
    if std::env::var_os(CHILD_ENV).is_some() {
        child();
        return;
    }
    let run = common::run_test_child("shared_rings_fall_back_to_epoll_under_seccomp", CHILD_ENV);
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    let result = |tag: &str| run.tagged(tag);
    // A forced io_uring set: the error names EPERM and the cause.
    let line = result("CHILD-URING: ");
    assert!(line.contains("EPERM"), "{line}");
    assert!(line.contains("seccomp"), "{line}");
    // The default: epoll, the reason kept and said once on stderr.
    assert_eq!(result("CHILD-AUTO: "), "driver=Epoll", "stderr: {stderr}");
    assert!(result("CHILD-REASON: ").contains("EPERM"), "{stdout}");
    let reasons: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("shared rings use the epoll driver"))
        .collect();
    assert_eq!(reasons.len(), 1, "one line with the reason: {stderr}");
    assert!(reasons[0].contains("EPERM"), "{}", reasons[0]);
    assert_eq!(result("CHILD-ECHO: "), "ok", "stderr: {stderr}");
    assert_eq!(result("CHILD-FILE: "), "ok", "stderr: {stderr}");
    assert_eq!(result("CHILD-IN-FLIGHT: "), "0");
    assert!(run.status.success(), "child failed: {stdout}\n{stderr}");
}
