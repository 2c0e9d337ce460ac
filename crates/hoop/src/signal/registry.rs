//! The process-wide side of `hoop::signal`: arrivals counted per signal, listeners' wakers, the
//! readers' signalfds (one per runtime thread that polls a listener), and the calling thread
//! of `run_per_core`, which takes the common signals while its threads run.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::Duration;

use hoop_driver::error::cvt_libc;
use hoop_driver::{op, DriverKind, Op};

use crate::sync::WakerSet;

/// Signal numbers are 1..=64 on Linux.
const SIGNALS: usize = 65;

/// Size of one `struct signalfd_siginfo`.
const SIGINFO_BYTES: usize = std::mem::size_of::<libc::signalfd_siginfo>();

/// What [`run_per_core`](crate::run_per_core) blocks before it spawns its threads.
const PER_CORE: [i32; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

struct Registry {
    /// Arrivals seen so far, per signal.
    arrivals: [AtomicU64; SIGNALS],
    /// Live listeners, per signal.
    listeners: [AtomicUsize; SIGNALS],
    /// Listeners' wakers, per signal.
    wakers: Vec<WakerSet>,
    readers: Mutex<Readers>,
}

struct Readers {
    /// Every signal listened for so far: the mask of every reader's signalfd.
    mask: libc::sigset_t,
    /// The live readers' signalfds (a reader removes its own before closing it).
    fds: Vec<RawFd>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry {
        arrivals: std::array::from_fn(|_| AtomicU64::new(0)),
        listeners: std::array::from_fn(|_| AtomicUsize::new(0)),
        wakers: (0..SIGNALS).map(|_| WakerSet::new()).collect(),
        readers: Mutex::new(Readers {
            mask: empty_set(),
            fds: Vec::new(),
        }),
    })
}

impl Registry {
    fn readers(&self) -> MutexGuard<'_, Readers> {
        // Every update under this lock is a single push, remove or signalfd call.
        self.readers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn empty_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain old data; sigemptyset initializes it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    set
}

fn set_of(signals: &[i32]) -> libc::sigset_t {
    let mut set = empty_set();
    for &s in signals {
        // SAFETY: `set` is initialized; `s` is a valid signal number (callers check).
        unsafe { libc::sigaddset(&mut set, s) };
    }
    set
}

/// The signal's name for messages (`SIGINT`), or its number.
pub(super) fn name(signo: i32) -> String {
    let known = [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSTOP, "SIGSTOP"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == signo)
        .map_or_else(|| format!("signal {signo}"), |(_, s)| s.to_string())
}

fn check(signo: i32) -> io::Result<usize> {
    let refused = |why: &str| {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot listen for {}: {why}", name(signo)),
        ))
    };
    if signo <= 0 || signo >= SIGNALS as i32 {
        return refused("not a signal number");
    }
    if matches!(signo, libc::SIGKILL | libc::SIGSTOP) {
        return refused("it cannot be caught");
    }
    if matches!(
        signo,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE
    ) {
        return refused("a fault signal cannot be read from a signalfd");
    }
    if signo > libc::SIGSYS && signo < libc::SIGRTMIN() {
        return refused("reserved by the C library's threads");
    }
    Ok(signo as usize)
}

fn block_in_this_thread(set: &libc::sigset_t, old: Option<&mut libc::sigset_t>) -> io::Result<()> {
    let old = old.map_or(std::ptr::null_mut(), |o| o as *mut _);
    // SAFETY: `set` is an initialized sigset_t; `old` is null or a writable sigset_t.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, old) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Makes a listener of `signo`: blocks it in the calling thread, adds it to every reader's
/// mask, counts the listener. Returns the arrivals so far (the listener reports later ones).
pub(super) fn listen(signo: i32) -> io::Result<u64> {
    let i = check(signo)?;
    block_in_this_thread(&set_of(&[signo]), None)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot block {}: {e}", name(signo))))?;
    let reg = registry();
    {
        let mut r = reg.readers();
        // SAFETY: `r.mask` is an initialized sigset_t; `signo` was checked.
        if unsafe { libc::sigismember(&r.mask, signo) } != 1 {
            // SAFETY: as above.
            unsafe { libc::sigaddset(&mut r.mask, signo) };
            for &fd in &r.fds {
                // SAFETY: `fd` is a live signalfd (readers remove theirs, under this lock,
                // before closing it); updating its mask has no memory-safety preconditions.
                unsafe { libc::signalfd(fd, &r.mask, 0) };
            }
        }
    }
    reg.listeners[i].fetch_add(1, Ordering::AcqRel);
    Ok(reg.arrivals[i].load(Ordering::Acquire))
}

/// A listener of `signo` is gone.
pub(super) fn unlisten(signo: i32, key: &mut Option<usize>) {
    let reg = registry();
    let i = signo as usize;
    reg.wakers[i].remove(key);
    reg.listeners[i].fetch_sub(1, Ordering::AcqRel);
}

/// Whether an arrival after `seen` happened (and then marks it seen).
pub(super) fn take_arrival(signo: i32, seen: &mut u64) -> bool {
    let now = registry().arrivals[signo as usize].load(Ordering::Acquire);
    if now > *seen {
        *seen = now;
        true
    } else {
        false
    }
}

pub(super) fn register_waker(signo: i32, key: &mut Option<usize>, waker: &Waker) {
    registry().wakers[signo as usize].register(key, waker);
}

fn is_listened(signo: i32) -> bool {
    check(signo).is_ok_and(|i| registry().listeners[i].load(Ordering::Acquire) > 0)
}

/// One arrival of `signo`: counted, and every listener woken.
fn deliver(signo: i32) {
    let Ok(i) = check(signo) else { return };
    let reg = registry();
    reg.arrivals[i].fetch_add(1, Ordering::AcqRel);
    reg.wakers[i].wake_all();
}

thread_local! {
    /// The id of the runtime on this thread whose reader task runs (0: none).
    static READER_RUNTIME: Cell<u64> = const { Cell::new(0) };
}

/// Starts this thread's runtime's reader task, once per runtime. Outside a runtime it does
/// nothing: arrivals then come from the readers of other threads.
pub(super) fn ensure_reader() {
    let Some(id) = crate::runtime::current_id() else {
        return;
    };
    if READER_RUNTIME.with(Cell::get) == id {
        return;
    }
    let kind = crate::runtime::current_driver().unwrap_or(DriverKind::Uring);
    match Reader::new(kind) {
        Ok(reader) => {
            READER_RUNTIME.with(|r| r.set(id));
            drop(crate::runtime::spawn_internal(read_signals(reader)));
        }
        Err(e) => eprintln!("hoop: cannot read signals on this thread: {e}"),
    }
}

/// A reader's signalfd: listed in the registry (so new listeners update its mask) until it is
/// dropped; closed through the ring like a `File`.
struct Reader {
    file: Option<crate::fs::File>,
    fd: RawFd,
}

impl Reader {
    fn new(kind: DriverKind) -> io::Result<Reader> {
        let reg = registry();
        let mut r = reg.readers();
        // The epoll driver needs a non-blocking fd (it waits for readiness); io_uring polls
        // the signalfd itself.
        let flags = libc::SFD_CLOEXEC
            | if kind == DriverKind::Epoll {
                libc::SFD_NONBLOCK
            } else {
                0
            };
        // SAFETY: `r.mask` is an initialized sigset_t; -1 asks for a new fd.
        let fd = cvt_libc(unsafe { libc::signalfd(-1, &r.mask, flags) })?;
        r.fds.push(fd);
        // SAFETY: signalfd returned a new fd that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Reader {
            file: Some(crate::fs::File::from(owned)),
            fd,
        })
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        registry().readers().fds.retain(|&fd| fd != self.fd);
        // Then the fd is closed (through the ring inside a runtime, behind any queued SQE).
        drop(self.file.take());
    }
}

/// The reader task: one read of the signalfd in flight at a time; each arrival it takes is
/// delivered to every listener. Ends when the runtime shuts down (the read is cancelled).
async fn read_signals(reader: Reader) {
    let fd = reader.fd;
    let mut buf: Vec<u8> = Vec::with_capacity(SIGINFO_BYTES * 8);
    loop {
        let (res, b) = Op::new(op::Read::new(fd, buf, op::CURRENT_POS)).await;
        buf = b;
        match res {
            Ok(_) => {
                for info in buf.chunks_exact(SIGINFO_BYTES) {
                    let signo = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
                    deliver(signo as i32);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // A kernel that completes a read of an empty signalfd with EAGAIN instead of
                // waiting: look again shortly rather than spin.
                crate::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => {
                if !matches!(e.raw_os_error(), Some(libc::ECANCELED | libc::ENXIO)) {
                    eprintln!("hoop: reading signals stopped: {e}");
                }
                READER_RUNTIME.with(|r| r.set(0));
                drop(reader);
                return;
            }
        }
    }
}

/// Written once by each `run_per_core` thread when it ends (also on a panic).
pub(crate) struct ExitNotice(Arc<OwnedFd>);

impl Drop for ExitNotice {
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// The calling thread of `run_per_core`: blocks the common signals before the threads are
/// spawned (they inherit the mask), then, while they run, takes those signals: delivered to
/// listeners if any, else given their usual disposition. Restores the mask when dropped.
pub(crate) struct PerCoreSignals {
    old_mask: libc::sigset_t,
    /// The signals this thread takes: those of `PER_CORE` it did not block already.
    sigfd: Option<OwnedFd>,
    exits: Arc<OwnedFd>,
}

impl PerCoreSignals {
    pub(crate) fn block() -> io::Result<PerCoreSignals> {
        // SAFETY: eventfd has no memory-safety preconditions.
        let efd = cvt_libc(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: a new fd nothing else owns.
        let exits = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let mut old_mask = empty_set();
        block_in_this_thread(&set_of(&PER_CORE), Some(&mut old_mask))?;
        let mut mine = empty_set();
        for s in PER_CORE {
            // SAFETY: both sets are initialized; `s` is a valid signal.
            if unsafe { libc::sigismember(&old_mask, s) } != 1 {
                // SAFETY: as above.
                unsafe { libc::sigaddset(&mut mine, s) };
            }
        }
        // SAFETY: `mine` is initialized; -1 asks for a new fd.
        let sfd = unsafe { libc::signalfd(-1, &mine, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        let sigfd = match cvt_libc(sfd) {
            // SAFETY: a new fd nothing else owns.
            Ok(fd) => Some(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) => {
                restore(&old_mask);
                return Err(e);
            }
        };
        Ok(PerCoreSignals {
            old_mask,
            sigfd,
            exits,
        })
    }

    /// The notice a thread drops when it ends.
    pub(crate) fn exit_notice(&self) -> ExitNotice {
        ExitNotice(self.exits.clone())
    }

    /// Takes signals until `threads` exit notices arrived.
    pub(crate) fn serve_until_exited(&self, threads: usize) {
        let Some(sigfd) = &self.sigfd else { return };
        let mut exited = 0u64;
        while exited < threads as u64 {
            let mut fds = [
                libc::pollfd {
                    fd: sigfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.exits.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: `fds` is a live array of 2 pollfds.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if r < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // Cannot wait: fall back to joining the threads (the signals stay blocked
                // and pending).
                return;
            }
            if fds[0].revents != 0 {
                self.take_signals(sigfd.as_raw_fd());
            }
            if fds[1].revents != 0 {
                let mut n: u64 = 0;
                // SAFETY: reads 8 bytes into a live u64.
                let got =
                    unsafe { libc::read(self.exits.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
                if got == 8 {
                    exited += n;
                }
            }
        }
    }

    fn take_signals(&self, fd: RawFd) {
        let mut info = [0u8; SIGINFO_BYTES * 8];
        loop {
            // SAFETY: reads into a live, writable buffer of its own length.
            let n = unsafe { libc::read(fd, info.as_mut_ptr().cast(), info.len()) };
            if n <= 0 {
                return;
            }
            for one in info[..n as usize].chunks_exact(SIGINFO_BYTES) {
                let signo = u32::from_ne_bytes([one[0], one[1], one[2], one[3]]) as i32;
                if is_listened(signo) {
                    deliver(signo);
                } else {
                    redeliver(signo);
                }
            }
        }
    }
}

/// Gives `signo` the disposition it has without hoop: unblocks it in this thread, raises it
/// (the default action, a handler, or nothing if ignored), and blocks it again.
fn redeliver(signo: i32) {
    let set = set_of(&[signo]);
    // SAFETY: `set` is initialized; raise has no memory-safety preconditions.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signo);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn restore(old: &libc::sigset_t) {
    // SAFETY: `old` is an initialized sigset_t.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

impl Drop for PerCoreSignals {
    fn drop(&mut self) {
        // Signals taken by nobody after the threads ended: the usual disposition.
        if let Some(fd) = &self.sigfd {
            self.take_signals(fd.as_raw_fd());
        }
        restore(&self.old_mask);
    }
}
