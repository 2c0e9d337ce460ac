//! Helpers every hoop test file uses (a dev-only crate): one place for each rule a
//! test relies on, e.g. "settle the fd count before comparing".
//!
//! - The driver matrix: every runtime test runs once per driver (io_uring, then epoll).
//!   `each_driver(|kind| ...)` runs the closure for each driver and stops at the first
//!   failure; a panic's message then starts with `driver=Uring: ` or `driver=Epoll: `. Where
//!   io_uring is unavailable (seccomp, `kernel.io_uring_disabled`), its run is skipped with a
//!   line on stderr. A property only one driver has is asserted only on that driver, with a
//!   comment saying why; a test that cannot apply to a driver calls [`skip`], which prints a
//!   visible line.
//! - fds: [`fd_count`] (settled), [`fd_set`], [`assert_no_new_fds`], [`serial`] for the tests
//!   that count them.
//! - Children: [`command`] (a program a test runs, under the test's fault opt-outs),
//!   [`run_in_child`], [`run_test_child`], [`json_lines`], [`stderr_text`].
//! - Faults: [`faults_off`] (a test opts out of fault kinds by name, with the reason, visibly),
//!   [`injected_error`] and the retrying helpers.
//! - Blocking clients: [`ReadRetry::read_retry`], a `read` that takes `EINTR` as std's own
//!   `read_exact` does.
//!
//! Test files use it as `use hoop_test_support as common;`.

pub mod eintr;
pub mod fullfs;
pub mod http;
pub mod listen_diag;
pub mod resets;
pub mod tls;

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

pub use hoop::DriverKind;

pub use eintr::ReadRetry;

/// The drivers every runtime test runs on, in order.
pub const DRIVERS: [DriverKind; 2] = [DriverKind::Uring, DriverKind::Epoll];

/// Runs `f` once per driver (io_uring, then epoll); see the module docs.
pub fn each_driver(f: impl FnMut(DriverKind)) {
    hoop::__private::each_driver(&DRIVERS, false, f)
}

/// A runtime builder for `kind` (the driver is forced: `HOOP_DRIVER` does not apply).
pub fn builder(kind: DriverKind) -> hoop::Builder {
    hoop::Runtime::builder().driver(kind)
}

/// A runtime with default settings on `kind`.
pub fn runtime(kind: DriverKind) -> hoop::Runtime {
    // It names its driver: an injected setup failure would only fail the test.
    let _setup = hoop::fault::opt_out_quietly(&["setup"]);
    let rt = builder(kind)
        .build()
        .unwrap_or_else(|e| panic!("cannot start a runtime on {kind}: {e}"));
    assert_eq!(rt.driver_kind(), kind);
    rt
}

/// Says, visibly, that a test (or a part of it) does not apply to `kind`: prints
/// `skip on KIND: REASON` on stderr, past the harness's output capture.
pub fn skip(kind: DriverKind, reason: &str) {
    hoop::__private::skip(kind, reason);
}

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`; a panic in
/// `f` is raised again on the caller's thread with its own message.
pub fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            let _ = handle.join();
            v
        }
        // The thread ended without sending: it panicked.
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("test body ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test body did not finish within {secs} s (hang)")
        }
    }
}

/// Set in a child process started by [`run_in_child`].
const CHILD_ENV: &str = "HOOP_TEST_CHILD";

/// Whether this process is a child started by [`run_in_child`] (then the test runs its body
/// once, on the driver `HOOP_DRIVER` names).
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Re-runs test `name` of this test binary in a child process with `HOOP_DRIVER=kind`, for
/// code that builds its runtimes with `Runtime::new()` (where the environment chooses the
/// driver), and fails if the child fails, with its output. The child must check
/// [`is_child`] and run the body once.
pub fn run_in_child(name: &str, kind: DriverKind) {
    let exe = std::env::current_exe().unwrap();
    let out = command(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("HOOP_DRIVER", kind.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The child's fault lines (its opt-outs, its retries after resets) go past this harness's
    // capture too, in one write, so a run's lists (`.ci/run` collects them) include children.
    let fault_lines: String = stderr
        .lines()
        .filter(|l| l.starts_with("hoop faults: "))
        .map(|l| format!("{l}\n"))
        .collect();
    if !fault_lines.is_empty() {
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(fault_lines.as_bytes());
    }
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child with HOOP_DRIVER={kind} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

/// A pipe `(read end, write end)`, both close-on-exec.
pub fn pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 returned two new fds that nothing else owns.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

/// The seccomp filter program that makes `io_uring_setup` return EPERM and allows every other
/// system call (what Docker's default profile does to io_uring). Built before a `fork`, so a
/// `pre_exec` hook can install it without allocating.
pub fn io_uring_setup_filter() -> Vec<libc::sock_filter> {
    syscall_filter(libc::SYS_io_uring_setup, libc::EPERM)
}

/// A seccomp filter program that makes system call `nr` fail with `errno` and allows every
/// other.
pub fn syscall_filter(nr: libc::c_long, errno: i32) -> Vec<libc::sock_filter> {
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
    let arch = if cfg!(target_arch = "x86_64") {
        AUDIT_ARCH_X86_64
    } else {
        AUDIT_ARCH_AARCH64
    };
    let stmt = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    let ld_w_abs = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq_k = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let ret_k = (libc::BPF_RET | libc::BPF_K) as u16;
    vec![
        // seccomp_data.arch at offset 4: other architectures are let through untouched.
        stmt(ld_w_abs, 4),
        jump(jeq_k, arch, 0, 3),
        // seccomp_data.nr at offset 0.
        stmt(ld_w_abs, 0),
        jump(jeq_k, nr as u32, 0, 1),
        stmt(ret_k, SECCOMP_RET_ERRNO | errno as u32),
        stmt(ret_k, SECCOMP_RET_ALLOW),
    ]
}

/// Installs [`io_uring_setup_filter`] on this process: `io_uring_setup` returns EPERM,
/// everything else is allowed.
pub fn block_io_uring_setup() {
    install_filter(io_uring_setup_filter());
}

/// Makes system call `nr` fail with `errno` on the calling thread only (and the threads it
/// starts from then on), as a kernel without it (`ENOSYS`) or a seccomp profile (`EPERM`)
/// would.
pub fn refuse_syscall_on_this_thread(nr: libc::c_long, errno: i32) {
    install_filter(syscall_filter(nr, errno));
}

/// Installs a seccomp filter on the calling thread (no `SECCOMP_FILTER_FLAG_TSYNC`: other
/// threads keep theirs); a child process started afterwards inherits it.
fn install_filter(filter: Vec<libc::sock_filter>) {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(
        r,
        0,
        "PR_SET_NO_NEW_PRIVS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `prog` points to a live filter array for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &prog as *const libc::sock_fprog,
        )
    };
    assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
}

/// Waits (at most 10 s) until no dropped set of shared rings is still being torn down.
pub fn settle_teardowns() {
    let start = std::time::Instant::now();
    while hoop::shared::Rings::teardowns_in_progress() > 0
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The fds open now, each with what it names (its `/proc/self/fd` link), without the one
/// that lists them.
pub fn fd_set() -> std::collections::BTreeSet<(String, std::path::PathBuf)> {
    hoop::__private::keep_fd_reserve();
    settle_teardowns();
    let listing = std::path::PathBuf::from(format!("/proc/{}/fd", std::process::id()));
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            (target != listing).then(|| (e.file_name().to_string_lossy().into_owned(), target))
        })
        .collect()
}

/// Waits (up to `secs` seconds) until every fd open is one of `before` (same number, same
/// file), and fails listing the others. Fds other threads close meanwhile do not matter, so
/// the threads a failed test left behind do not fail this one.
pub fn assert_no_new_fds(
    before: &std::collections::BTreeSet<(String, std::path::PathBuf)>,
    secs: u64,
) {
    let start = std::time::Instant::now();
    loop {
        let new: Vec<_> = fd_set().difference(before).cloned().collect();
        if new.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "fds not closed after {secs} s: {new:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Tests that count fds (or slots in flight) take this lock and run one at a time.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits, polling every 5 ms, until `done()` holds; fails with `what` after `secs` seconds.
pub fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "{what}: still not so after {secs} s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `f` once with a no-op waker (a shared operation's first poll puts its SQE in the
/// ring; its second submits it). `Err(f)`: still pending, here it is back; `Ok`: finished.
pub fn poll_once<F: std::future::Future + Unpin>(mut f: F) -> Result<F::Output, F> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(&mut f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Ok(v),
        std::task::Poll::Pending => Err(f),
    }
}

/// Shared rings for a test that is not about ring setup: opts out of the injected `setup`
/// fault while building them, quietly as the driver matrix does (under it the test would
/// only be skipped). `None` (and a
/// line on stderr) where io_uring is unavailable.
pub fn shared_rings(entries: u32) -> Option<hoop::shared::Rings> {
    let _setup = hoop::fault::opt_out_quietly(&["setup"]);
    match hoop::shared::Rings::builder()
        .rings(2)
        .entries(entries)
        .build()
    {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("SKIP: io_uring unavailable for shared rings: {e}");
            None
        }
    }
}

/// An error an injected fault makes up for an operation that did not run (`ECANCELED`,
/// `ECONNRESET`, `ENOBUFS`): the caller tries again.
pub fn injected_error(e: &std::io::Error) -> bool {
    hoop::fault::enabled()
        && matches!(
            e.raw_os_error(),
            Some(libc::ECANCELED) | Some(libc::ECONNRESET) | Some(libc::ENOBUFS)
        )
}

/// Sends all of `data` on a `hoop::shared` stream, one send at a time, retrying what an
/// injected error says did not run (bounded).
pub async fn shared_send_all(s: &hoop::shared::TcpStream, data: &[u8]) {
    let (mut at, mut retries) = (0, 0);
    while at < data.len() {
        match s.write(data[at..].to_vec()).await.0 {
            Ok(n) => at += n,
            Err(e) if injected_error(&e) && retries < 1000 => retries += 1,
            Err(e) => panic!("send at byte {at} of {}: {e}", data.len()),
        }
    }
}

/// Receives exactly `len` bytes from a `hoop::shared` stream, retrying what an injected error
/// says did not run (bounded); fails if the peer closes first.
pub async fn shared_recv_exact(s: &hoop::shared::TcpStream, len: usize) -> Vec<u8> {
    let (mut got, mut retries) = (Vec::with_capacity(len), 0);
    while got.len() < len {
        match s.read(Vec::with_capacity(len - got.len())).await {
            (Ok(0), _) => panic!("peer closed after {} of {len} bytes", got.len()),
            (Ok(_), buf) => got.extend_from_slice(&buf),
            (Err(e), _) if injected_error(&e) && retries < 1000 => retries += 1,
            (Err(e), _) => panic!("recv after {} of {len} bytes: {e}", got.len()),
        }
    }
    got
}

/// What a child run of one test printed (see [`run_test_child`]).
pub struct ChildRun {
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// How it exited.
    pub status: std::process::ExitStatus,
}

impl ChildRun {
    /// The rest of the child's first stdout line starting with `tag` (it prints its findings
    /// as `TAG: value` lines); fails the test, with the child's output, if there is none.
    pub fn tagged(&self, tag: &str) -> String {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| {
                panic!(
                    "child printed no {tag}\nstdout: {}\nstderr: {}",
                    self.stdout, self.stderr
                )
            })
            .to_owned()
    }
}

/// Runs test `name` of this test binary again in a child process with `env_key=1` set (the
/// test checks it to run its child side) and `HOOP_DRIVER` removed (the default must decide,
/// whatever the environment of the parent says).
pub fn run_test_child(name: &str, env_key: &str) -> ChildRun {
    let exe = std::env::current_exe().unwrap();
    let out = command(exe)
        .args(["--exact", name, "--nocapture"])
        .env(env_key, "1")
        .env_remove("HOOP_DRIVER")
        .output()
        .unwrap();
    ChildRun {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status,
    }
}

/// Runs `f` on this thread, parking between polls (for futures woken from any thread: the
/// shared rings'). A future that stays pending without its waker being called for 10 s is a
/// lost wake-up: the test fails (it does not poll again).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct Unpark {
        thread: std::thread::Thread,
        woken: AtomicBool,
    }
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.woken.store(true, Ordering::SeqCst);
            self.thread.unpark();
        }
    }
    let unpark = std::sync::Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = std::task::Waker::from(unpark.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        unpark.woken.store(false, Ordering::SeqCst);
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let start = std::time::Instant::now();
        while !unpark.woken.load(Ordering::SeqCst) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "lost wake-up: pending for 10 s without its waker being called"
            );
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

/// The fds this process has open, once the count is stable: every dropped set of shared rings
/// torn down ([`settle_teardowns`]) and the count unchanged over 5 ms (an fd an earlier test's
/// runtime closed may still be on its way out: epoll's pool threads close the wake-up eventfd
/// as they exit). Waits at most 250 ms for stability; a leaked fd stays counted. The directory
/// handle that lists them counts once, every time. The process's reserve descriptor (kept for
/// refusing clients past the descriptor limit, opened with the first listener) is opened first,
/// so that a listener made inside a test's window does not count as a leak.
pub fn fd_count() -> usize {
    hoop::__private::keep_fd_reserve();
    settle_teardowns();
    let mut last = fd_count_now();
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(5));
        let now = fd_count_now();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

/// The fds this process has open right now, without waiting (for tests about *when* an fd is
/// closed).
pub fn fd_count_now() -> usize {
    hoop::__private::keep_fd_reserve();
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// The reason a test gives for opting out of `econnreset`: a kernel says `ECONNRESET` only
/// when the peer reset the connection, and this test's peers never do while it checks that
/// every exchange completes. How resets are handled (the error reaches the caller, the fd is
/// closed, the server goes on) is tested by `tests/faults.rs`, `hoop soak` and the tests of
/// resetting clients, all under the kind.
pub const NO_RESETS: &str = "its peers never reset a connection and it checks every exchange";

/// Opts the calling test (its thread, the threads it starts with [`spawn`] and the programs
/// it runs with [`command`]) out of fault `kinds` until the guard drops, printing
/// `hoop faults: TEST opts out of KINDS: REASON` past the harness's capture, so the opt-outs
/// of a run are a visible list of tests by name (`.ci/run` prints it). Without
/// `HOOP_FAULTS` it does nothing visible.
#[must_use = "the opt-out ends when the guard drops"]
pub fn faults_off(kinds: &[&str], reason: &str) -> hoop::fault::OptOut {
    hoop::fault::opt_out_because(kinds, reason)
}

/// Opts the calling thread out of what the driver matrix opts out of (`setup`:
/// see `hoop::__private::each_driver`), quietly (the matrix says it once per run): for a
/// test's own loop over named drivers, such as a server thread per driver.
#[must_use = "the opt-out ends when the guard drops"]
pub fn matrix_faults_off() -> hoop::fault::OptOut {
    hoop::fault::opt_out_quietly(&hoop::__private::MATRIX_OPT_OUTS)
}

/// `std::thread::spawn`, with the calling thread's fault opt-outs carried to the new thread,
/// which also takes the caller's name (a test's, under the harness: panics and fault lines
/// then name the test, and its drivers draw their own fault streams).
pub fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let opted_out = hoop::fault::opted_out();
    let mut builder = std::thread::Builder::new();
    if let Some(name) = std::thread::current().name() {
        builder = builder.name(name.to_owned());
    }
    builder
        .spawn(move || {
            let _faults = hoop::fault::opt_out_inherited(opted_out);
            f()
        })
        .expect("spawn a test thread")
}

/// A command for a program the test runs (the `hoop` binary, an example): under a fault plan
/// the child gets it without the kinds the calling thread opted out of ([`faults_off`]).
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    if let Some(plan) = hoop::fault::describe_for_child() {
        cmd.env("HOOP_FAULTS", plan);
    }
    cmd
}

/// The JSON lines of a program's stdout (blank lines skipped); fails on a line that is not
/// JSON.
pub fn json_lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// A program's stderr as text.
pub fn stderr_text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A directory of the test's own under the system's temp dir (`hoop-{prefix}-{pid}-{name}`),
/// emptied when made and removed on drop.
#[derive(Debug)]
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// Makes (or empties) a directory of its own: `hoop-PREFIX-PID-NAME-N` in the system's
    /// temporary directory, `N` counting the calls of this process, so two tests (or two
    /// drivers of one test) asking for the same name never share one.
    pub fn new(prefix: &str, name: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("hoop-{prefix}-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads a child's stdout on a thread: the first line goes to the receiver, the rest is drained
/// so that the child never blocks on a full pipe.
pub fn first_line(
    stdout: impl std::io::Read + Send + 'static,
) -> std::sync::mpsc::Receiver<std::io::Result<String>> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        let res = reader.read_line(&mut line).map(|_| line);
        let _ = tx.send(res);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    rx
}
