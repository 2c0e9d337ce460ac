//! `hoop::signal` and `hoop::sync::CancellationToken`, on io_uring and on epoll. A signal sent
//! to the process goes to any thread that does not block it, so this test runs without the
//! test harness (`harness = false`): `main` runs every case on the main thread, the only
//! thread besides those a case starts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use futures::StreamExt;
use hoop::signal::{ctrl_c, signal, SignalKind};
use hoop::sync::CancellationToken;
use hoop::time::timeout;
use hoop::DriverKind;

const LIMIT: Duration = Duration::from_secs(10);

fn kill_self(sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(libc::getpid(), sig) }, 0);
}

/// One runtime on the main thread: two listeners of one signal both see each arrival (as a
/// `recv` and as a `Stream`), `ctrl_c` resolves on SIGINT, arrivals before a listener existed
/// are not reported to it, and refused signals are `InvalidInput`.
fn single_runtime(kind: DriverKind) {
    let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
    rt.block_on(async {
        let mut a = signal(SignalKind::user_defined1()).unwrap();
        let mut b = signal(SignalKind::user_defined1()).unwrap();
        for round in 0..3 {
            kill_self(libc::SIGUSR1);
            timeout(LIMIT, a.recv()).await.expect("listener a").unwrap();
            let got = timeout(LIMIT, b.next()).await.expect("listener b");
            assert_eq!(got, Some(()), "round {round}");
        }
        // A listener made afterwards does not see the old arrivals.
        let mut late = signal(SignalKind::user_defined1()).unwrap();
        assert!(timeout(Duration::from_millis(50), late.recv())
            .await
            .is_err());

        let c = ctrl_c();
        kill_self(libc::SIGINT);
        timeout(LIMIT, c).await.expect("ctrl_c").unwrap();

        for bad in [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, 0, 65] {
            let e = signal(SignalKind::from_raw(bad)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
        let e = timeout(LIMIT, async { ctrl_c_of(libc::SIGKILL).await })
            .await
            .unwrap();
        assert!(e.is_err());
    });
}

async fn ctrl_c_of(sig: i32) -> std::io::Result<()> {
    let mut s = signal(SignalKind::from_raw(sig))?;
    s.recv().await;
    Ok(())
}

static HUP_HANDLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_hup(_: libc::c_int) {
    HUP_HANDLED.store(true, Ordering::SeqCst);
}

/// `run_per_core`: a listener on every thread sees a SIGUSR2 sent by one of them, a
/// cancellation token cancelled on one thread wakes the others, and a signal nobody listens
/// for (SIGHUP, with a handler installed) still gets its usual disposition.
fn per_core(kind: DriverKind) {
    // run_per_core builds its runtimes from HOOP_DRIVER; only this thread exists now.
    std::env::set_var("HOOP_DRIVER", kind.to_string());
    HUP_HANDLED.store(false, Ordering::SeqCst);
    // SAFETY: installs a handler that only stores to an atomic (async-signal-safe).
    unsafe { libc::signal(libc::SIGHUP, on_hup as *const () as libc::sighandler_t) };

    const THREADS: usize = 3;
    let ready = Arc::new(Barrier::new(THREADS));
    let seen = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let (ready2, seen2, stop2) = (ready.clone(), seen.clone(), stop.clone());
    let out = hoop::run_per_core(THREADS, move |i| {
        let (ready, seen, stop) = (ready2.clone(), seen2.clone(), stop2.clone());
        async move {
            assert_eq!(hoop::runtime::current_driver(), Some(kind));
            let mut usr2 = signal(SignalKind::user_defined2()).unwrap();
            // Every listener exists before the signal is sent.
            ready.wait();
            if i == 0 {
                kill_self(libc::SIGUSR2);
            }
            timeout(LIMIT, usr2.recv())
                .await
                .expect("SIGUSR2 on every thread");
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == THREADS {
                kill_self(libc::SIGHUP);
                stop.cancel();
            }
            timeout(LIMIT, stop.cancelled())
                .await
                .expect("cancelled everywhere");
            assert!(stop.is_cancelled());
            i
        }
    })
    .unwrap();
    assert_eq!(out, (0..THREADS).collect::<Vec<_>>());
    assert_eq!(seen.load(Ordering::SeqCst), THREADS);
    assert!(
        HUP_HANDLED.load(Ordering::SeqCst),
        "SIGHUP, listened for by nobody, reached its handler"
    );
    std::env::remove_var("HOOP_DRIVER");
}

/// A token cancelled from a plain thread wakes a task on a sleeping runtime; a dropped
/// `cancelled()` future unregisters itself.
fn token_from_another_thread(kind: DriverKind) {
    let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
    let token = CancellationToken::new();
    let t2 = token.clone();
    rt.block_on(async {
        // Dropped before the cancel: must not matter.
        drop(token.cancelled());
        let th = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            t2.cancel();
        });
        timeout(LIMIT, token.cancelled()).await.expect("woken");
        th.join().unwrap();
    });
}
/// tokio's path, `hoop::signal::unix::{signal, SignalKind}`, gives the same listener as
/// `hoop::signal::signal`: both see one SIGTERM, through tokio's `recv() -> Option<()>`.
fn tokio_path(kind: DriverKind) {
    use hoop::signal::unix;
    let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
    rt.block_on(async {
        let mut term: unix::Signal = unix::signal(unix::SignalKind::terminate()).unwrap();
        let mut same: hoop::signal::Signal = signal(SignalKind::terminate()).unwrap();
        assert_eq!(term.kind(), SignalKind::terminate());
        kill_self(libc::SIGTERM);
        let got: Option<()> = timeout(LIMIT, term.recv()).await.expect("unix::signal");
        assert_eq!(got, Some(()));
        timeout(LIMIT, same.recv()).await.expect("signal").unwrap();
    });
}

/// hoop's helper threads never take a signal meant for a listener: a `spawn_blocking`, file
/// I/O and a shared-ring call, each of which may start a thread of hoop's (the blocking pool,
/// the epoll driver's file pool, the rings' reapers), all run *before* the listeners exist;
/// then SIGTERM, SIGINT and SIGHUP each reach their listener. A helper thread that did not
/// block them would take the signal and its default action would end this process (exit 143
/// for SIGTERM), so the case fails by dying.
fn helpers_started_before_listening(kind: DriverKind) {
    let rings = hoop::shared::Rings::builder()
        .rings(1)
        .driver(kind)
        .build()
        .unwrap();
    let path = std::env::temp_dir().join(format!("hoop-signal-{}-{kind}", std::process::id()));
    std::fs::write(&path, b"twenty-one").unwrap();
    let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
    rt.block_on(async {
        assert_eq!(hoop::spawn_blocking(|| 21 * 2).await.unwrap(), 42);
        let file = hoop::fs::File::open(&path).await.unwrap();
        let (res, buf) = file.read_at(Vec::with_capacity(64), 0).await;
        assert_eq!(res.unwrap(), 10);
        assert_eq!(&buf[..], b"twenty-one");
        file.close().await.unwrap();
        let shared = hoop::shared::fs::read(&rings, &path).await.unwrap();
        assert_eq!(&shared[..], b"twenty-one");
        for (kind, signo) in [
            (SignalKind::terminate(), libc::SIGTERM),
            (SignalKind::interrupt(), libc::SIGINT),
            (SignalKind::hangup(), libc::SIGHUP),
        ] {
            let mut listener = signal(kind).unwrap();
            kill_self(signo);
            timeout(LIMIT, listener.recv())
                .await
                .unwrap_or_else(|_| panic!("signal {signo} reached no listener"));
        }
    });
    drop(rings);
    let _ = std::fs::remove_file(&path);
}

/// A case: its name and its body, run once per driver.
type Case = (&'static str, fn(DriverKind));

/// `Signal::recv` in a `select!` loop against a 50 µs timer (cancel safety): 200 arrivals,
/// each sent after the previous one was seen (signals of one kind merge while pending), are
/// all seen, whichever branch the loop's rounds end on.
fn recv_in_select(kind: DriverKind) {
    let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
    rt.block_on(async {
        let mut sig = signal(SignalKind::user_defined2()).unwrap();
        let (mut seen, mut ticks) = (0u32, 0u32);
        let end = std::time::Instant::now() + LIMIT;
        kill_self(libc::SIGUSR2);
        while seen < 200 && std::time::Instant::now() < end {
            hoop::select! {
                biased;
                _ = hoop::time::sleep(Duration::from_micros(50)) => ticks += 1,
                got = sig.recv() => {
                    assert_eq!(got, Some(()));
                    seen += 1;
                    if seen < 200 {
                        kill_self(libc::SIGUSR2);
                    }
                }
            }
        }
        assert_eq!(seen, 200, "arrivals lost ({ticks} timer wins)");
    });
}

fn main() {
    // The harness's arguments that matter here: `--list`, and a name filter.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let list = args.iter().any(|a| a == "--list");
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let cases: [Case; 6] = [
        // In a process of its own (below), as a program meets it: no other case's threads or
        // listeners, and a helper thread that took SIGTERM ends that process, not this one.
        (
            "helpers_started_before_listening",
            helpers_started_before_listening,
        ),
        ("single_runtime", single_runtime),
        ("recv_in_select", recv_in_select),
        ("tokio_path", tokio_path),
        ("per_core", per_core),
        ("token_from_another_thread", token_from_another_thread),
    ];
    if list {
        for (name, _) in cases {
            println!("signal::{name}: test");
        }
        return;
    }
    // Each case builds a runtime of the driver it names, as the driver matrix does (which opts
    // out of the same kind): an injected ring setup failure is not what these tests check.
    let _faults = hoop::fault::opt_out_quietly(&hoop::__private::MATRIX_OPT_OUTS);
    let mut drivers = vec![DriverKind::Uring, DriverKind::Epoll];
    if let Some(reason) = hoop::__private::uring_unavailable() {
        hoop::__private::skip(
            DriverKind::Uring,
            &format!("io_uring unavailable: {reason}"),
        );
        drivers.remove(0);
    }
    let alone = "helpers_started_before_listening";
    if filter.is_none() {
        eprint!("test signal::{alone} (in a child process, every driver) ... ");
        let exe = std::env::current_exe().unwrap();
        let out = hoop_test_support::command(exe).arg(alone).output().unwrap();
        assert!(
            out.status.success(),
            "signal::{alone} failed ({}; a helper thread that takes SIGTERM ends the process \
             with signal 15):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("ok");
    }
    for kind in drivers {
        for (name, case) in cases {
            let chosen = match &filter {
                Some(f) => name.contains(f.as_str()),
                None => name != alone,
            };
            if !chosen {
                continue;
            }
            eprint!("test signal::{name} on {kind} ... ");
            case(kind);
            eprintln!("ok");
        }
    }
}
