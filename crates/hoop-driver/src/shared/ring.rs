//! One ring of a shared set: an engine (io_uring, or hoop's epoll driver where io_uring is
//! refused) behind a lock, and the two ways its completions are waited for.
//!
//! Any thread pushes operations and drains completions while it holds the lock (never blocking
//! in the kernel there). What completes later is waited for either by the executor's own
//! reactor (a poller task attached through [`ReactorRing`]: hoop's tokio integration registers
//! the ring fd with tokio's reactor, so a completion wakes a tokio worker directly, with no
//! thread of hoop's in between) or, when no reactor is attached, by the ring's reaper thread,
//! which waits outside the lock and only while something is owed, so an idle ring costs no
//! CPU. Wakers and orphaned results collected under the lock run after it is released, so a
//! waker that runs at once never finds the ring locked.

use std::cell::Cell;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::handoff::{Handoff, HasTable, Locked};
use crate::config::{Config, DriverKind};
use crate::driver::Engine;
use crate::setup::SetupError;
use crate::sys::epoll::Epoll;
use crate::sys::uring::{wait_for_cqe, ShutdownReport, Uring};

/// How long the reaper waits in the kernel before it looks at its stop flag again.
const REAPER_WAIT: Duration = Duration::from_millis(100);

/// The engine of a shared ring.
pub(crate) struct SendEngine(pub(crate) Engine);

// SAFETY: an engine is `!Send` only because its slots may hold any operation's data (a
// `Box<dyn Orphan>`, which need not be `Send`) and because a per-thread io_uring engine may
// keep an `Rc` of its registered file table and a ring fd registered in the thread's table. A
// shared ring only ever receives operations through `Rings`, whose entry points require
// `T: Send`; it never registers a file table (`fixed_files` stays `None`) nor its ring fd
// (`register_ring_fd` is off); the epoll engine's pool threads and fds are plain `Send` data;
// wakers are `Send`. Every access goes through the ring's mutex.
unsafe impl Send for SendEngine {}

impl Engine {
    /// Submits what is queued and collects every completion, without blocking.
    pub(crate) fn submit_and_reap(&mut self) -> std::io::Result<()> {
        match self {
            Engine::Uring(u) => u.submit_and_reap(),
            Engine::Epoll(e) => e.poll_now(),
        }
    }

    /// Submits what is queued without collecting completions (io_uring); the epoll engine has
    /// nothing to submit and runs its queued calls as `submit_and_reap` does.
    fn submit_only(&mut self) -> std::io::Result<()> {
        match self {
            Engine::Uring(u) => u.submit_only(),
            Engine::Epoll(e) => e.poll_now(),
        }
    }

    /// Whether a completion can still come without anything more being submitted.
    fn owed(&mut self) -> bool {
        match self {
            Engine::Uring(u) => u.owed_cqes() > 0,
            Engine::Epoll(e) => e.has_pending(),
        }
    }

    /// Work the waiter must do without waiting (see `Uring::has_unsent`).
    pub(crate) fn has_unsent(&mut self) -> bool {
        match self {
            Engine::Uring(u) => u.has_unsent(),
            Engine::Epoll(e) => e.has_unsent(),
        }
    }

    /// When the engine's next timer expires (epoll keeps deadlines in user space; io_uring's
    /// are linked timeouts in the kernel).
    fn next_deadline(&self) -> Option<Instant> {
        match self {
            Engine::Uring(_) => None,
            Engine::Epoll(e) => e.next_timeout().map(|d| Instant::now() + d),
        }
    }

    pub(crate) fn shutdown(&mut self) -> ShutdownReport {
        match self {
            Engine::Uring(u) => u.shutdown(),
            Engine::Epoll(e) => e.shutdown(),
        }
    }

    pub(crate) fn in_use(&self) -> usize {
        self.table().slots.in_use()
    }
}

impl HasTable for SendEngine {
    fn table_mut(&mut self) -> &mut crate::table::OpTable {
        self.0.table_mut()
    }
}

/// Whether the reaper has work now: SQEs to send, or completions owed while no reactor waits.
fn reaper_due(e: &mut Engine, attached: bool) -> bool {
    e.has_unsent() || (!attached && e.owed())
}

/// One ring of a [`Rings`](super::Rings) set.
pub(crate) struct Ring {
    /// The engine behind its lock, and the reaper's hand-off (`handoff`).
    hub: Handoff<SendEngine>,
    /// What the reaper or a reactor waits on: the ring fd, or the epoll fd.
    wait_fd: RawFd,
    /// The epoll engine's wake-up eventfd (to cut the reaper's wait short), or `None`.
    kick_fd: Option<Arc<std::os::fd::OwnedFd>>,
    pub(crate) kind: DriverKind,
    /// An `IORING_SETUP_IOPOLL` ring: O_DIRECT reads and writes (and no-ops) only.
    pub(crate) iopoll: bool,
    /// Slots in use, for picking the least-loaded ring (written under the lock).
    load: AtomicUsize,
    setup_flags: &'static str,
    /// The attached poller's waker, woken when the ring stops.
    poller_waker: Mutex<Option<Waker>>,
    stopped: AtomicBool,
}

thread_local! {
    /// Rings this thread pushed deferred operations to since its last park.
    static DEFERRED: Cell<Vec<Arc<Ring>>> = const { Cell::new(Vec::new()) };
    /// This thread's park has called [`submit_deferred`].
    static PARK_SUBMITS: Cell<bool> = const { Cell::new(false) };
    /// Operations this thread pushed deferred since its last [`submit_deferred`].
    static DEFERRED_PUSHES: Cell<usize> = const { Cell::new(0) };
}

/// Counts a deferred push of this thread.
pub(crate) fn count_deferred_push() {
    DEFERRED_PUSHES.with(|c| c.set(c.get() + 1));
}

/// Operations this thread pushed deferred and has not submitted yet (an upper bound: another
/// thread's submit may have sent some).
pub fn deferred_pushes() -> usize {
    DEFERRED_PUSHES.with(|c| c.get())
}

/// Notes that `ring` has an SQE pushed by this thread for its next park to submit.
pub(crate) fn defer_submit(ring: &Arc<Ring>) {
    DEFERRED.with(|d| {
        let mut list = d.take();
        if !list.iter().any(|r| Arc::ptr_eq(r, ring)) {
            list.push(ring.clone());
        }
        d.set(list);
    });
}

/// Submits, in one `io_uring_enter` per ring, the deferred operations this thread pushed
/// since its last call, and reaps what completed. Meant for an executor's park (tokio's
/// `Builder::on_thread_park`): from the first call on, the thread's poll-based socket writes
/// are deferred to it.
pub fn submit_deferred() {
    PARK_SUBMITS.with(|p| p.set(true));
    DEFERRED_PUSHES.with(|c| c.set(0));
    let list = DEFERRED.with(|d| d.take());
    if list.is_empty() {
        DEFERRED.with(|d| d.set(list));
        return;
    }
    let mut list = list;
    for ring in list.drain(..) {
        // Submitted only: tokio calls its park hook with the worker's core taken out of the
        // thread's context, so a task woken here would go to the shared inject queue and wake
        // another worker. The completions raise the ring fd instead, whose poller task drains
        // them on this worker's own queue when its park polls the reactor.
        let owed = ring.with(|e| {
            let _ = e.submit_only();
            e.owed()
        });
        if owed {
            ring.offer_to_reactor();
        }
    }
    // Keep the list's memory, and whatever was deferred while the lock's wakers ran.
    DEFERRED.with(|d| {
        let more = d.take();
        list.extend(more);
        d.set(list);
    });
}

/// Whether this thread's park submits deferred operations ([`submit_deferred`] has run here).
pub fn deferring_here() -> bool {
    PARK_SUBMITS.with(|p| p.get())
}

/// Called with a ring that has operations owed and no reactor attached (see
/// [`set_reactor_hook`]).
static REACTOR_HOOK: OnceLock<fn(ReactorRing)> = OnceLock::new();

/// Installs the function shared rings call when an operation is left in the kernel on a ring
/// no reactor waits on: hoop's tokio integration attaches a poller task on the caller's
/// runtime. The first call wins; later ones are ignored.
#[doc(hidden)]
pub fn set_reactor_hook(hook: fn(ReactorRing)) {
    let _ = REACTOR_HOOK.set(hook);
}

impl Ring {
    pub(crate) fn new(cfg: &Config) -> Result<Ring, SetupError> {
        let engine = match cfg.driver {
            DriverKind::Epoll => {
                let mut e = Epoll::new(cfg)?;
                e.set_transient_fds();
                Engine::Epoll(e)
            }
            kind => {
                // As `Driver::new`: a set whose caller named io_uring gets no injected setup
                // failure (`Auto`'s fallback is where one is tested).
                let _named =
                    (kind == DriverKind::Uring).then(|| crate::fault::opt_out_quietly(&["setup"]));
                Engine::Uring(Uring::new(cfg)?)
            }
        };
        let (wait_fd, kick_fd, kind, iopoll, setup_flags) = match &engine {
            Engine::Uring(u) => (
                u.ring_fd(),
                None,
                DriverKind::Uring,
                u.is_iopoll(),
                u.setup_flags(),
            ),
            Engine::Epoll(e) => (
                e.epoll_fd(),
                Some(e.wake_fd()),
                DriverKind::Epoll,
                false,
                "epoll",
            ),
        };
        Ok(Ring {
            wait_fd,
            kick_fd,
            kind,
            iopoll,
            setup_flags,
            hub: Handoff::new(SendEngine(engine)),
            load: AtomicUsize::new(0),
            poller_waker: Mutex::new(None),
            stopped: AtomicBool::new(false),
        })
    }

    pub(crate) fn load(&self) -> usize {
        self.load.load(Ordering::Relaxed)
    }

    pub(crate) fn setup_flags(&self) -> &'static str {
        self.setup_flags
    }

    fn attached(&self) -> bool {
        self.hub.attached()
    }

    /// Runs `f` on the engine under the ring's lock. Then, with the lock released, wakes the
    /// tasks the call woke and finishes the results nobody waits for. Wakes the reaper when it
    /// has become its turn to wait (something owed and no reactor attached, or an earlier
    /// epoll deadline).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        self.hub.with(
            crate::deferred::Section::enter(),
            |e| f(&mut e.0),
            |g| {
                self.load.store(g.engine.0.in_use(), Ordering::Relaxed);
                self.wake_reaper_if_due(g);
            },
        )
    }

    fn wake_reaper_if_due(&self, g: &mut Locked<SendEngine>) {
        if self
            .hub
            .unpark_if(g, |e, attached| reaper_due(&mut e.0, attached))
        {
            return;
        }
        // An epoll deadline earlier than the reaper's next look (timers are the reaper's
        // whether or not a reactor is attached).
        if matches!(g.engine.0, Engine::Uring(_)) {
            return;
        }
        if let Some(due) = g.engine.0.next_deadline() {
            if g.until.is_none_or(|until| due < until) {
                g.until = Some(due);
                if !self.hub.unpark(g) {
                    if let Some(fd) = &self.kick_fd {
                        kick(fd.as_raw_fd());
                    }
                }
            }
        }
    }

    /// Submits what is queued and drains every completion, waking outside the lock.
    pub(crate) fn drain(&self) {
        self.with(|e| {
            let _ = e.submit_and_reap();
        });
    }

    /// An operation was left in the kernel: offer the ring to a reactor if none waits on it.
    #[inline]
    pub(crate) fn offer_to_reactor(self: &Arc<Ring>) {
        if self.attached() || self.stopped.load(Ordering::Relaxed) {
            return;
        }
        if let Some(hook) = REACTOR_HOOK.get() {
            hook(ReactorRing { ring: self.clone() });
        }
    }

    /// The reaper's loop: park while the kernel owes nothing or a reactor waits; otherwise
    /// wait for a completion (outside the lock), then drain.
    pub(crate) fn reap_until_stopped(&self) {
        loop {
            let work = self.hub.next_work(|e, attached| {
                let e = &mut e.0;
                let unsent = e.has_unsent();
                let deadline = e.next_deadline();
                let due = deadline.is_some_and(|d| d <= Instant::now());
                if unsent || due || (!attached && e.owed()) {
                    Ok((unsent, deadline))
                } else {
                    Err(deadline)
                }
            });
            let Some((mut g, (mut unsent, wait_until))) = work else {
                return;
            };
            g.until = wait_until;
            drop(g);
            // A signal, a timeout or an error all lead back to the checks above; the drain
            // below finds whatever arrived. Held-back completions and SQEs a refused submit
            // left queued are handled by the submit-and-drain below, not waited for; a kernel
            // that keeps refusing is retried after a millisecond, not in a spin.
            if !unsent {
                let wait = wait_until.map_or(REAPER_WAIT, |d| {
                    d.saturating_duration_since(Instant::now()).min(REAPER_WAIT)
                });
                match self.kind {
                    DriverKind::Epoll => wait_readable(self.wait_fd, wait),
                    _ => {
                        let _ = wait_for_cqe(self.wait_fd, wait);
                    }
                }
            }
            unsent = self.with(|e| {
                let _ = e.submit_and_reap();
                e.has_unsent()
            });
            if unsent {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Tells the reaper and the attached poller to exit.
    pub(crate) fn stop_reaper(&self) {
        self.stopped.store(true, Ordering::Release);
        self.hub.stop();
        if let Some(fd) = &self.kick_fd {
            kick(fd.as_raw_fd());
        }
        let waker = self
            .poller_waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Waits until `fd` is readable or `timeout` passes (a signal or an error just returns).
fn wait_readable(fd: RawFd, timeout: Duration) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one live pollfd, read and written by the kernel for the call only.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Adds one to an eventfd (cuts a wait on the epoll fd short).
fn kick(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local to an eventfd.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// A ring of a shared set, handed to an executor's reactor so that it waits for the ring's
/// completions itself (hoop's tokio integration; see [`set_reactor_hook`]). Not part of the
/// stable API.
#[doc(hidden)]
pub struct ReactorRing {
    ring: Arc<Ring>,
}

impl std::fmt::Debug for ReactorRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactorRing")
            .field("fd", &self.ring.wait_fd)
            .finish()
    }
}

impl ReactorRing {
    /// The fd that turns readable when completions are ready (the ring fd, or the epoll fd).
    /// It stays open while this handle lives.
    pub fn fd(&self) -> RawFd {
        self.ring.wait_fd
    }

    /// Claims the ring for one reactor: `None` if one is attached already. While the guard
    /// lives the reaper leaves the waiting to the reactor; dropping it hands it back.
    pub fn try_attach(&self) -> Option<ReactorGuard> {
        if !self.ring.hub.try_attach() {
            return None;
        }
        Some(ReactorGuard {
            ring: self.ring.clone(),
        })
    }

    /// Submits what is queued and drains every completion, waking the tasks (outside every
    /// lock).
    pub fn drain(&self) {
        self.ring.drain();
    }

    /// Whether the ring has stopped (its set was shut down): the poller should end.
    pub fn stopped(&self) -> bool {
        self.ring.stopped.load(Ordering::Acquire)
    }

    /// The waker to wake when the ring stops.
    pub fn set_waker(&self, waker: &Waker) {
        let mut w = self
            .ring
            .poller_waker
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !w.as_ref().is_some_and(|old| old.will_wake(waker)) {
            *w = Some(waker.clone());
        }
    }
}

/// A reactor's claim on a ring (see [`ReactorRing::try_attach`]).
#[doc(hidden)]
pub struct ReactorGuard {
    ring: Arc<Ring>,
}

impl std::fmt::Debug for ReactorGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReactorGuard")
    }
}

impl Drop for ReactorGuard {
    /// The reactor is gone (its runtime shut down, or it failed): the reaper waits again, and
    /// drains at once whatever came in meanwhile.
    fn drop(&mut self) {
        // The poller's waker keeps its task, and through it the executor's runtime (tokio's
        // I/O driver fds included), alive: let go of it with the poller.
        drop(
            self.ring
                .poller_waker
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        self.ring.hub.detach();
    }
}
