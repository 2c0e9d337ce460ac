//! The readiness driver's loop: one turn waits for readiness (`epoll_pwait2`), runs the
//! operations whose fd became ready, and collects pool results and expired timers.

use std::cmp::Reverse;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::call::Mode;
use super::fd::{socket_error, Waiting};
use super::{Epoll, WAKE_TOKEN};
use crate::fault::Kind as Fault;
use crate::lifecycle::Completion;
use crate::sys::uring::drain_eventfd;

/// `IORING_CQE_F_MORE`: the stream goes on (what an item of a multishot operation carries).
const IORING_CQE_F_MORE: u32 = 1 << 1;

impl Epoll {
    /// One turn: wait for readiness (if `block` and nothing is ready: until the next timer, or
    /// for ever), run what became ready, collect pool results and expired timers.
    /// One turn; a blocking wait lasts at most `wait` (the runtime's next timer).
    pub(crate) fn turn(&mut self, block: bool, wait: Option<Duration>) -> io::Result<()> {
        if !self.held.is_empty() {
            self.release_held();
        }
        let block = block
            && !self.table.has_ready()
            && self.ready_fds.is_empty()
            && wait.is_none_or(|w| !w.is_zero());
        self.busy_turns += 1;
        // While tasks are still ready, poll epoll only every 16th turn (as the io_uring driver
        // enters the ring): readiness is collected in one `epoll_wait` when the runtime idles.
        if !block && self.busy_turns < 16 {
            return Ok(());
        }
        self.busy_turns = 0;
        let timeout = if block {
            // The sooner of this driver's next timer and the runtime's; `None`: for ever.
            match (self.next_timeout(), wait) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            Some(Duration::ZERO)
        };
        self.wait(timeout)
    }

    /// Waits for readiness up to `timeout` (`None`: for ever), with `epoll_pwait2` (Linux
    /// 5.11), whose timeout is a `timespec`: a 50 µs sleep sleeps about 50 µs, not the whole
    /// millisecond `epoll_wait` would round it up to. Where the kernel lacks it (`ENOSYS`) or
    /// a seccomp filter refuses it (`EPERM`, which `epoll_pwait2` never says otherwise),
    /// `epoll_wait` from then on, its timeout rounded up to whole milliseconds so a timer has
    /// expired when the wait returns.
    pub(super) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.events.clear();
        let cap = self.events.capacity() as i32;
        // A wait a signal interrupted is tried again at once, without blocking (up to a few
        // times): what is ready now is collected on this turn. A caller that waits for the
        // epoll fd's own readiness (the shared rings' reactor path, edge-triggered) would
        // otherwise have consumed the edge and never see those events again.
        let mut timeout = timeout;
        let mut interrupted = 0;
        let n = loop {
            self.table.counters.enter_calls += 1;
            let n = if self.faults.active() && self.faults.fire(Fault::Eintr) {
                // Injected: the wait was interrupted by a signal before any event.
                // SAFETY: sets errno, a thread-local int, for the EINTR path below.
                unsafe { *libc::__errno_location() = libc::EINTR };
                -1
            } else {
                self.epoll_wait(cap, timeout)
            };
            if n >= 0 {
                break n;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
            interrupted += 1;
            if interrupted >= 8 {
                break -1;
            }
            timeout = Some(Duration::ZERO);
        };
        if n >= 0 {
            // SAFETY: epoll_wait initialized `n` events.
            unsafe { self.events.set_len(n as usize) };
        }
        let events = std::mem::take(&mut self.events);
        for ev in &events {
            let token = ev.u64;
            if token == WAKE_TOKEN {
                drain_eventfd(&self.wake_fd);
                continue;
            }
            let fd = token as RawFd;
            let bits = ev.events as i32;
            let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) != 0;
            if let Some(st) = self.fds.get_mut(fd) {
                if err || bits & (libc::EPOLLIN | libc::EPOLLRDHUP) != 0 {
                    st.readable = true;
                }
                if err || bits & libc::EPOLLRDHUP != 0 {
                    st.read_closed = true;
                }
                if err || bits & libc::EPOLLOUT != 0 {
                    st.writable = true;
                }
                if err {
                    st.write_closed = true;
                }
            }
            self.run_ready(fd);
        }
        self.events = events;
        let ready = std::mem::take(&mut self.ready_fds);
        for &fd in &ready {
            self.run_ready(fd);
        }
        self.ready_fds = ready;
        self.ready_fds.clear();
        self.collect_pool();
        self.expire_timers();
        self.expire_retries();
        self.table.grant();
        Ok(())
    }

    /// One `epoll_pwait2` (or `epoll_wait`, see [`wait`](Self::wait)) into the spare capacity
    /// of `self.events`: the number of events, or -1 with `errno` set.
    pub(super) fn epoll_wait(&mut self, cap: i32, timeout: Option<Duration>) -> i32 {
        let epfd = self.epfd.as_raw_fd();
        if self.pwait2 {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: libc::c_long::from(t.subsec_nanos()),
            });
            let ts_ptr = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: the kernel writes at most `cap` events into the vector's spare capacity
            // and reads the timespec (a local, or null: no timeout); no signal mask.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    epfd,
                    self.events.as_mut_ptr(),
                    cap,
                    ts_ptr,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            let refused = n < 0
                && matches!(
                    io::Error::last_os_error().raw_os_error(),
                    Some(libc::ENOSYS) | Some(libc::EPERM)
                );
            if !refused {
                return n as i32;
            }
            self.pwait2 = false;
        }
        let ms = timeout.map_or(-1, |t| {
            t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
        });
        // SAFETY: the kernel writes at most `cap` events into the vector's spare capacity.
        unsafe { libc::epoll_wait(epfd, self.events.as_mut_ptr(), cap, ms) }
    }

    /// Runs the operations queued on `fd` while it stays ready.
    pub(super) fn run_ready(&mut self, fd: RawFd) {
        self.run_ready_queues(fd);
        self.release_if_idle(fd);
    }

    /// A shared ring's engine forgets an fd once nothing waits on it (see `transient_fds`).
    pub(super) fn release_if_idle(&mut self, fd: RawFd) {
        if !self.transient_fds {
            return;
        }
        let idle = self
            .fds
            .get_mut(fd)
            .is_some_and(|st| st.readers.is_empty() && st.writers.is_empty());
        if idle {
            self.forget_fd(fd);
        }
    }

    pub(super) fn run_ready_queues(&mut self, fd: RawFd) {
        for write in [false, true] {
            loop {
                let Some(st) = self.fds.get_mut(fd) else {
                    return;
                };
                let (ready, q) = if write {
                    (st.writable, &mut st.writers)
                } else {
                    (st.readable, &mut st.readers)
                };
                if !ready || (write && st.write_retry_at.is_some()) {
                    break;
                }
                let Some(&user_data) = q.front() else {
                    break;
                };
                let Some(Waiting::Fd {
                    call,
                    nr,
                    connect_check,
                    ..
                }) = self.waiting.get(&user_data).copied()
                else {
                    q.pop_front();
                    continue;
                };
                let res = if connect_check {
                    socket_error(fd)
                } else {
                    call.run_nr(nr)
                };
                if let Some(at) = st.note(fd, write, res, &call) {
                    self.retries.push(Reverse((at, fd)));
                }
                if res == -libc::EAGAIN {
                    break;
                }
                if res >= 0 && matches!(call.mode, Mode::AcceptMulti(_)) {
                    // An item of a stream that stays armed (and first in the queue).
                    self.table.counters.cqes_reaped += 1;
                    self.table.item(
                        user_data,
                        Completion {
                            res,
                            flags: IORING_CQE_F_MORE,
                        },
                    );
                    continue;
                }
                if write {
                    st.writers.pop_front();
                } else {
                    st.readers.pop_front();
                }
                self.waiting.remove(&user_data);
                self.finish(user_data, res);
            }
        }
    }

    pub(super) fn collect_pool(&mut self) {
        let mut done = std::mem::take(&mut self.done);
        self.pool.take_done(&mut done);
        for (user_data, res) in done.drain(..) {
            self.waiting.remove(&user_data);
            self.finish(user_data, res);
        }
        self.done = done;
    }

    /// Runs the writes of fds whose retry timer expired (see `FdState::note`).
    pub(super) fn expire_retries(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, fd))) = self.retries.peek().copied() {
            if at > now {
                break;
            }
            self.retries.pop();
            // An entry for a timer since replaced, or an fd since forgotten, is stale.
            let Some(st) = self.fds.get_mut(fd) else {
                continue;
            };
            if st.write_retry_at != Some(at) {
                continue;
            }
            st.write_retry_at = None;
            st.writable = true;
            self.run_ready(fd);
        }
    }

    pub(super) fn expire_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, user_data))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            match self.waiting.get(&user_data).copied() {
                Some(Waiting::Timer) => {
                    self.waiting.remove(&user_data);
                    self.finish(user_data, -libc::ETIME);
                }
                // An operation's deadline: cancel it, as a linked timeout would.
                Some(_) => self.cancel(user_data),
                None => {}
            }
        }
    }
}
