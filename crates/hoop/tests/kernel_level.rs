//! The kernel level (`HOOP_KERNEL_LEVEL`): at each level CI runs, a child process of this test
//! binary reports the paths its runtime chose (driver, setup flags, buffer rings, zero-copy
//! send, bundles, incremental rings, the wake-up path, ...) and serves an echo over TCP (multishot
//! accept and a receive stream where the level has them) and a file round trip on every driver
//! the level can run; the parent checks that each level lacks what its kernel lacked and keeps
//! what this kernel has and the level had. An invalid level starts no runtime.

use hoop_test_support as common;

use std::time::Duration;

use common::DriverKind;
use hoop::driver::level::{Level, LEVELS};
use hoop::driver::Driver;

/// Set in the child processes (the level itself comes in `HOOP_KERNEL_LEVEL`).
const CHILD: &str = "HOOP_KERNEL_LEVEL_TEST_CHILD";

/// `IORING_OP_SEND_ZC` (linux/io_uring.h; 6.0).
const SEND_ZC: u8 = 47;

/// What a child found, one `name=value` per path (see [`report`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Report(Vec<(String, String)>);

impl Report {
    fn get(&self, key: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {key} in {self:?}"))
    }

    fn on(&self, key: &str) -> bool {
        match self.get(key) {
            "true" => true,
            "false" => false,
            other => panic!("{key}={other} is not a boolean"),
        }
    }
}

/// The paths the runtime of this process chose (the default runtime: `Auto`).
fn report() -> Report {
    let rt = hoop::Runtime::new().expect("the default runtime starts");
    let wake = format!("{:?}", rt.handle().wake_path());
    let flags = rt.setup_flags().to_owned();
    let kind = rt.driver_kind();
    let mut out = rt.block_on(async {
        let d = Driver::current().expect("inside a runtime");
        let ring = hoop::BufRing::new_incremental(8, 4096).expect("a buffer ring");
        vec![
            ("driver", kind.to_string()),
            ("buf_ring", d.supports_buf_ring().to_string()),
            ("kernel_ring", ring.is_kernel().to_string()),
            ("incremental", ring.is_incremental().to_string()),
            ("recv_bundle", d.supports_recv_bundle().to_string()),
            ("send_zc", d.supports_opcode(SEND_ZC).to_string()),
            ("direct_accept", d.supports_direct_accept().to_string()),
            (
                "ftruncate",
                d.supports_opcode(hoop::driver::op::Ftruncate::OPCODE)
                    .to_string(),
            ),
        ]
    });
    out.push(("setup_flags", flags));
    out.push(("wake", wake));
    Report(out.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// An echo over TCP (a multishot accept and a receive stream, where the level has them) and a
/// file written and read back, on `kind`.
fn serve_on(kind: DriverKind, dir: &std::path::Path) {
    let rt = common::runtime(kind);
    let path = dir.join(format!("file-{kind}"));
    rt.block_on(async {
        hoop::time::timeout(Duration::from_secs(30), async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            // A connection that a reset ended is dropped and the client comes back on a new
            // one: the server takes connections until the client says it has its echo (it
            // sets `done` and connects once more to wake the accept).
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let finished = done.clone();
            let server = hoop::spawn(async move {
                let mut incoming = l.incoming();
                for _ in 0..=common::resets::MAX_RETRIES + 1 {
                    let s = incoming.next().await.expect("a connection").unwrap();
                    if finished.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let ring = hoop::BufRing::new(16, 4096).expect("a buffer ring");
                    let mut rx = s.recv_stream(&ring);
                    let mut echoed = 0;
                    while echoed < 5 {
                        let buf = match rx.next().await {
                            Some(Ok(buf)) => buf,
                            Some(Err(e)) => {
                                common::resets::expect_reset("the echo's receive", &e);
                                break;
                            }
                            // The client's connection was reset on its side and closed.
                            None => break,
                        };
                        echoed += buf.len();
                        let (res, _) = s.write_all(buf.to_vec()).await;
                        if let Err(e) = res {
                            common::resets::expect_reset("the echo's send", &e);
                            break;
                        }
                    }
                }
                panic!("the client never said it had its echo");
            });
            common::resets::retry_async("an echo", |_| async move {
                let c = hoop::net::TcpStream::connect(addr).await?;
                let (res, _) = c.write_all(b"hello".to_vec()).await;
                res?;
                let (res, buf) = c.read_exact(vec![0u8; 5]).await;
                res?;
                assert_eq!(&buf[..], b"hello");
                Ok(())
            })
            .await;
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            let _last = hoop::net::TcpStream::connect(addr).await.unwrap();
            server.await.unwrap();

            let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
            hoop::fs::write(&path, data.clone()).await.unwrap();
            assert_eq!(hoop::fs::read(&path).await.unwrap(), data);
            let f = hoop::fs::File::open(&path).await.unwrap();
            let (res, buf) = f.read_exact_at(vec![0u8; 1000], 5000).await;
            res.unwrap();
            assert_eq!(&buf[..], &data[5000..6000]);
            f.close().await.unwrap();
            hoop::fs::remove_file(&path).await.unwrap();
        })
        .await
        .expect("echo and file round trip within 30 s");
    });
}

/// The child side: prints the report as `level-report: k=v ...` and serves on every driver
/// the level runs (the driver matrix skips io_uring, by name and level, where it cannot run).
#[test]
fn child_reports_and_serves() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    // One echo and one file per driver, no retries but after a reset (the client comes back
    // on a new connection): the errors injected for operations that did not run are the
    // subject of tests/faults.rs, net.rs and multishot.rs on every path.
    let _faults = common::faults_off(
        &["ecanceled", "enobufs"],
        "it checks the paths a level takes with one unretried echo and file",
    );
    // On a line of its own (the harness's `test NAME ... ` has no newline yet).
    println!();
    let r = report();
    let line: Vec<String> = r.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("level-report: {}", line.join(" "));
    let dir = common::TempDir::new("hoop-level", "serve");
    common::each_driver(|kind| serve_on(kind, &dir.0));
    println!("level-served: ok");
}

/// The child side of [`an_invalid_level_starts_no_runtime`].
#[test]
fn child_invalid_level() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    println!();
    for kind in [DriverKind::Auto, DriverKind::Uring, DriverKind::Epoll] {
        match hoop::Runtime::builder().driver(kind).build() {
            Ok(_) => println!("invalid-level: {kind} started"),
            Err(e) => println!("invalid-level: {kind} {:?} {e}", e.kind()),
        }
    }
    match hoop::shared::Rings::builder().rings(1).build() {
        Ok(_) => println!("invalid-level: shared started"),
        Err(e) => println!("invalid-level: shared {:?} {e}", e.kind()),
    }
}

/// Runs `test` of this binary in a child at `level`.
fn child(test: &str, level: &str) -> common::ChildRun {
    let exe = std::env::current_exe().unwrap();
    let out = common::command(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env(hoop::driver::level::VAR, level)
        .env_remove("HOOP_DRIVER")
        .output()
        .unwrap();
    common::ChildRun {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status,
    }
}

fn level_report(level: &str) -> (Report, common::ChildRun) {
    let run = child("child_reports_and_serves", level);
    assert!(
        run.status.success() && run.stdout.contains("level-served: ok"),
        "child at {level} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        run.status,
        run.stdout,
        run.stderr
    );
    let pairs = run
        .tagged("level-report: ")
        .split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("k=v");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (Report(pairs), run)
}

/// Every level CI runs, and native: what each lacks is absent, what it had is as this kernel
/// has it, and an echo and a file round trip work on every driver it runs.
#[test]
fn each_level_lacks_what_its_kernel_lacked_and_still_serves() {
    // The children name their driver (`Auto`): an injected setup failure would only move them
    // to epoll, which is what is checked here.
    let _faults = common::faults_off(&["setup"], "it checks which driver each level picks");
    let (native, _) = level_report("native");
    for level in LEVELS {
        let (r, run) = level_report(level);
        let l = Level::parse(level).unwrap();
        // A feature the level had is there as natively; one it lacked is off.
        let as_kernel = |key: &str, since: (u32, u32)| {
            let want = l.has(since) && native.on(key);
            assert_eq!(
                r.on(key),
                want,
                "{key} at {level}: {r:?} (native {native:?})"
            );
        };
        if !l.has((5, 15)) {
            // Below hoop's io_uring driver (SHUTDOWN 5.11, MKDIRAT 5.15): epoll, saying why, as
            // a kernel without the opcodes would; the matrix skips io_uring by name and level.
            assert_eq!(r.get("driver"), "epoll", "{level}: {r:?}");
            assert!(
                run.stderr
                    .contains("io_uring unavailable, using the epoll driver")
                    && run
                        .stderr
                        .contains(&format!("kernel level {level} (HOOP_KERNEL_LEVEL={level})"))
                    && run.stderr.contains("MKDIRAT 5.15")
                    && !run.stderr.contains("SOCKET"),
                "{level}: {}",
                run.stderr
            );
            if native.get("driver") == "uring" {
                assert!(
                    run.stderr.contains(&format!(
                        "hoop level: child_reports_and_serves skipped at {level} on uring"
                    )),
                    "{level}: {}",
                    run.stderr
                );
            }
            continue;
        }
        if native.get("driver") != "uring" {
            assert_eq!(r.get("driver"), "epoll");
            continue;
        }
        assert_eq!(r.get("driver"), "uring", "{level}: {r:?}");
        let flags = r.get("setup_flags");
        if l.has((6, 1)) {
            // NO_SQARRAY only on a ring that may be resized (6.13).
            let native_flags = native.get("setup_flags");
            let want = if l.has((6, 13)) {
                native_flags.to_owned()
            } else {
                native_flags.replace("|NO_SQARRAY", "")
            };
            assert_eq!(flags, want, "{level}");
        } else {
            assert!(
                !flags.contains("SINGLE_ISSUER") && !flags.contains("DEFER_TASKRUN"),
                "{level}: {flags}"
            );
            // COOP_TASKRUN and SUBMIT_ALL from 5.19 and 5.18: a 5.15 ring has neither.
            assert_eq!(
                flags.contains("COOP_TASKRUN"),
                l.has((5, 19)),
                "{level}: {flags}"
            );
            assert_eq!(
                flags.contains("SUBMIT_ALL"),
                l.has((5, 18)),
                "{level}: {flags}"
            );
        }
        as_kernel("buf_ring", (6, 0));
        as_kernel("kernel_ring", (6, 0));
        as_kernel("send_zc", (6, 0));
        as_kernel("recv_bundle", (6, 10));
        as_kernel("incremental", (6, 12));
        as_kernel("ftruncate", (6, 9));
        as_kernel("direct_accept", (5, 19));
        let wake = if l.has((6, 13)) {
            native.get("wake")
        } else {
            "EventFd"
        };
        assert_eq!(r.get("wake"), wake, "{level}");
    }
}

/// A value that is not a level refuses every runtime and shared ring, with an error that
/// names the variable and the accepted values (no silent native run).
#[test]
fn an_invalid_level_starts_no_runtime() {
    let _faults = common::faults_off(&["setup"], "it checks the setup error itself");
    for bad in ["5.4x", "4.19", "latest"] {
        let run = child("child_invalid_level", bad);
        let lines: Vec<&str> = run
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("invalid-level: "))
            .collect();
        assert_eq!(lines.len(), 4, "{bad}: {}\n{}", run.stdout, run.stderr);
        for line in lines {
            assert!(!line.ends_with("started"), "{bad}: {line}");
            assert!(line.contains("InvalidInput"), "{bad}: {line}");
            assert!(line.contains("HOOP_KERNEL_LEVEL="), "{bad}: {line}");
            assert!(
                line.contains("5.10, 5.15, 5.19, 6.1, 6.10, 6.12, 6.13 or native"),
                "{bad}: {line}"
            );
        }
        // No fallback line: epoll is refused too.
        assert!(
            !run.stderr.contains("using the epoll driver"),
            "{}",
            run.stderr
        );
    }
}
