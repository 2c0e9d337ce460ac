//! Starting an operation: completed at once when it can be, else queued where it waits (on
//! its fd's readiness, on the blocking pool, or as a timer).

use std::cmp::Reverse;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use super::call::{Call, Mode};
use super::fd::{fd_is_regular, make_nonblocking, Waiting};
use super::Epoll;
use crate::fault::Kind as Fault;
use crate::lifecycle::{Completion, Lifecycle};
use crate::sys::uring::PushError;

impl Epoll {
    /// Starts an operation: completes it at once if it can, else queues it where it waits.
    pub(crate) fn push(
        &mut self,
        call: Call,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        if self.shut_down {
            return Err(PushError::ShutDown);
        }
        if !self.table.may_push(granted, state.counts_against_cap()) {
            return Err(PushError::NoRoom);
        }
        self.table.counters.sqes_submitted += 1;
        let mut call = call;
        if self.faults.active() {
            if let Some(res) = self.fault_at_push(&mut call) {
                self.table.counters.cqes_reaped += 1;
                return self.insert(completed(state, res));
            }
        }
        let user_data = self.start(call, state)?;
        if let Some(d) = call.deadline {
            if self.waiting.get(&user_data).is_some() {
                self.timers.push(Reverse((Instant::now() + d, user_data)));
            }
        }
        Ok(user_data)
    }

    /// Starts `call` in a new slot that begins in `state`.
    pub(super) fn start(&mut self, call: Call, state: Lifecycle) -> Result<u64, PushError> {
        let initial = state;
        let res = match call.mode {
            Mode::Nop => 0,
            Mode::Fail(errno) => -errno,
            Mode::Inline => call.run(),
            Mode::Close(fd) => {
                self.forget_fd(fd);
                call.run()
            }
            Mode::Timer(d) => {
                let user_data = self.insert(initial)?;
                self.timers.push(Reverse((Instant::now() + d, user_data)));
                self.waiting.insert(user_data, Waiting::Timer);
                return Ok(user_data);
            }
            Mode::Blocking => return self.push_pool(call, initial),
            Mode::File {
                fd,
                write,
                stream_nr,
            } => {
                if self.is_regular(fd) {
                    return self.push_pool(call, initial);
                }
                return self.push_fd(call, stream_nr, fd, write, false, initial);
            }
            Mode::Readable(fd) => return self.push_fd(call, call.nr, fd, false, false, initial),
            Mode::Writable(fd) => return self.push_fd(call, call.nr, fd, true, false, initial),
            Mode::Accept(fd) => {
                self.set_nonblocking(fd);
                return self.push_fd(call, call.nr, fd, false, false, initial);
            }
            Mode::AcceptMulti(fd) => {
                self.set_nonblocking(fd);
                return self.push_accept_multi(call, fd, initial);
            }
            Mode::Connect(fd) => {
                self.set_nonblocking(fd);
                let res = call.run();
                if res == -libc::EINPROGRESS || res == -libc::EAGAIN {
                    return self.push_fd(call, call.nr, fd, true, true, initial);
                }
                res
            }
        };
        self.table.counters.cqes_reaped += 1;
        self.insert(completed(initial, res))
    }

    pub(super) fn insert(&mut self, state: Lifecycle) -> Result<u64, PushError> {
        self.table.slots.insert(state).ok_or(PushError::NoRoom)
    }

    pub(super) fn push_pool(&mut self, call: Call, state: Lifecycle) -> Result<u64, PushError> {
        let user_data = self.insert(state)?;
        match self.pool.submit(user_data, call) {
            Ok(()) => {
                self.waiting.insert(user_data, Waiting::Pool);
            }
            Err(e) => self.finish(user_data, -e.raw_os_error().unwrap_or(libc::EAGAIN)),
        }
        Ok(user_data)
    }

    /// A multishot accept kept armed in the driver: queued on the listener's readers, it takes
    /// every connection waiting whenever the listener is readable (now, if it is), each an item
    /// of the stream, and stays queued at `EAGAIN`. So the kernel's accept queue is emptied at
    /// every turn that sees the listener readable, whatever the stream's owner is doing, as
    /// io_uring's multishot accept empties it at every `io_uring_enter`: a burst of connects
    /// waits in the stream (unbounded) rather than overflowing the backlog while the
    /// accept loop runs the connections it already has. A shared ring's engine (which forgets
    /// the fds nothing waits on), or a stream that is not one, gets the loop of single accepts.
    fn push_accept_multi(
        &mut self,
        mut call: Call,
        fd: RawFd,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        if self.transient_fds || !matches!(state, Lifecycle::Streaming(_)) || !self.register(fd) {
            call.mode = Mode::Accept(fd);
            return self.push_fd(call, call.nr, fd, false, false, state);
        }
        let user_data = self.insert(state)?;
        self.waiting.insert(
            user_data,
            Waiting::Fd {
                call,
                nr: call.nr,
                fd,
                write: false,
                connect_check: false,
            },
        );
        let st = self.fds.entry(fd);
        st.readers.push_back(user_data);
        if st.readable && st.readers.len() == 1 {
            self.run_ready_queues(fd);
        }
        Ok(user_data)
    }

    /// A readiness operation: tried at once unless others wait on the same fd and direction
    /// (order is kept), queued on `EAGAIN`.
    pub(super) fn push_fd(
        &mut self,
        call: Call,
        nr: libc::c_long,
        fd: RawFd,
        write: bool,
        connect_check: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        if self.transient_fds && !connect_check {
            // Nothing is known of an fd nothing waits on: try the call first, and register
            // the fd only if it has to wait (an edge that comes before the registration is
            // reported by the registration itself).
            let idle = self.fds.get_mut(fd).is_none_or(|st| {
                if write {
                    st.writers.is_empty()
                } else {
                    st.readers.is_empty()
                }
            });
            if idle {
                // A wait for readiness alone learns it from the registration below.
                let mut tried = None;
                if !call.ready_only {
                    let res = call.run_nr(nr);
                    if res != -libc::EAGAIN || call.try_once {
                        self.release_if_idle(fd);
                        self.table.counters.cqes_reaped += 1;
                        return self.insert(completed(state, res));
                    }
                    tried = Some(res);
                }
                if !self.register(fd) {
                    return self.push_pool(call, state);
                }
                let st = self.fds.entry(fd);
                if write {
                    st.writable = false;
                } else {
                    st.readable = false;
                }
                if let Some(at) = tried.and_then(|res| st.note(fd, write, res, &call)) {
                    self.retries.push(Reverse((at, fd)));
                }
            }
        }
        if !self.register(fd) {
            // epoll refuses this fd (a regular file): run it on the pool instead.
            return self.push_pool(call, state);
        }
        let st = self.fds.entry(fd);
        let may_try = if write {
            st.writers.is_empty() && st.writable && st.write_retry_at.is_none()
        } else {
            st.readers.is_empty() && st.readable
        };
        if may_try && !connect_check {
            let res = call.run_nr(nr);
            if let Some(at) = st.note(fd, write, res, &call) {
                self.retries.push(Reverse((at, fd)));
            }
            if res != -libc::EAGAIN {
                self.table.counters.cqes_reaped += 1;
                return self.insert(completed(state, res));
            }
        }
        if call.try_once {
            // Not ready (or others wait first): the caller waits its own way.
            self.table.counters.cqes_reaped += 1;
            return self.insert(completed(state, -libc::EAGAIN));
        }
        let user_data = self.insert(state)?;
        self.waiting.insert(
            user_data,
            Waiting::Fd {
                call,
                nr,
                fd,
                write,
                connect_check,
            },
        );
        let st = self.fds.entry(fd);
        if write {
            st.writers.push_back(user_data);
        } else {
            st.readers.push_back(user_data);
        }
        // Already ready (the edge came before this op queued): run it on the next turn.
        let ready = if write { st.writable } else { st.readable };
        if ready && !connect_check {
            self.ready_fds.push(fd);
        }
        Ok(user_data)
    }

    pub(super) fn is_regular(&mut self, fd: RawFd) -> bool {
        if self.transient_fds {
            // Nothing cached: the fd number may name another file next time.
            let r = fd_is_regular(fd);
            if !r {
                make_nonblocking(fd);
            }
            return r;
        }
        let st = self.fds.entry(fd);
        if let Some(r) = st.regular {
            return r;
        }
        let r = fd_is_regular(fd);
        st.regular = Some(r);
        if !r {
            self.set_nonblocking(fd);
        }
        r
    }

    pub(super) fn set_nonblocking(&mut self, fd: RawFd) {
        if self.transient_fds {
            make_nonblocking(fd);
            return;
        }
        let st = self.fds.entry(fd);
        if st.nonblocking {
            return;
        }
        st.nonblocking = true;
        make_nonblocking(fd);
    }

    /// Registers `fd` (edge-triggered, both directions) once. False if epoll refuses it.
    pub(super) fn register(&mut self, fd: RawFd) -> bool {
        let st = self.fds.entry(fd);
        if st.registered {
            return true;
        }
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: fd as u64,
        };
        let epfd = self.epfd.as_raw_fd();
        // SAFETY: `ev` is a valid event; epoll_ctl only reads it.
        let mut r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
            // SAFETY: as above.
            r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
        }
        if r < 0 {
            return false;
        }
        st.registered = true;
        true
    }

    /// The fd is being closed: forget what we knew of it (its number will be reused). Anything
    /// still queued on it fails with `EBADF` instead of waiting forever.
    pub(crate) fn forget_fd(&mut self, fd: RawFd) {
        if let Some(st) = self.fds.remove(fd) {
            if st.registered {
                // SAFETY: removes a registration; a null event is allowed for DEL.
                unsafe {
                    libc::epoll_ctl(
                        self.epfd.as_raw_fd(),
                        libc::EPOLL_CTL_DEL,
                        fd,
                        std::ptr::null_mut(),
                    )
                };
            }
            for user_data in st.readers.into_iter().chain(st.writers) {
                if self.waiting.remove(&user_data).is_some() {
                    self.finish(user_data, -libc::EBADF);
                }
            }
        }
    }

    pub(super) fn finish(&mut self, user_data: u64, res: i32) {
        if self.faults.active() && !self.shut_down && self.faults.fire(Fault::Late) {
            self.held.push((user_data, res));
            return;
        }
        self.table.counters.cqes_reaped += 1;
        self.table.complete(user_data, Completion { res, flags: 0 });
    }
}

/// The state of a slot whose operation completed at once with `res`.
pub(super) fn completed(initial: Lifecycle, res: i32) -> Lifecycle {
    let c = Completion { res, flags: 0 };
    match initial {
        Lifecycle::Streaming(s) => Lifecycle::Streaming(s.ended_with(c)),
        _ => Lifecycle::Completed(c),
    }
}
