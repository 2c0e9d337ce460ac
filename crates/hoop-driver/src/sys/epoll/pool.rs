//! The blocking pool of the readiness driver: file operations run here, as in tokio.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};

use super::call::Call;

struct Queue {
    jobs: VecDeque<(u64, Call)>,
    idle: usize,
    threads: usize,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    cv: Condvar,
    done: Mutex<Vec<(u64, i32)>>,
    notify: Arc<OwnedFd>,
}

/// Threads that run blocking system calls and report `(user_data, res)` back through an
/// eventfd the driver polls.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    max_threads: usize,
    handles: std::cell::RefCell<Vec<std::thread::JoinHandle<()>>>,
}

impl Pool {
    pub(crate) fn new(max_threads: usize, notify: Arc<OwnedFd>) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    jobs: VecDeque::new(),
                    idle: 0,
                    threads: 0,
                    closed: false,
                }),
                cv: Condvar::new(),
                done: Mutex::new(Vec::new()),
                notify,
            }),
            max_threads: max_threads.max(1),
            handles: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// Queues a call; starts a thread if none is idle and the pool is not full.
    pub(crate) fn submit(&self, user_data: u64, call: Call) -> std::io::Result<()> {
        let spawn = {
            let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.jobs.push_back((user_data, call));
            let spawn = q.idle == 0 && q.threads < self.max_threads;
            if spawn {
                q.threads += 1;
            }
            spawn
        };
        if spawn {
            let shared = self.shared.clone();
            let r = crate::thread::spawn(
                std::thread::Builder::new().name("hoop-blocking".into()),
                move || worker(shared),
            );
            match r {
                Ok(h) => self.handles.borrow_mut().push(h),
                Err(e) => {
                    let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
                    q.threads -= 1;
                    if q.threads == 0 {
                        // Nobody can run it: take the job back and fail.
                        q.jobs.retain(|(u, _)| *u != user_data);
                        return Err(e);
                    }
                }
            }
        }
        self.shared.cv.notify_one();
        Ok(())
    }

    /// Removes a job that has not started; true if it was still queued.
    pub(crate) fn cancel_queued(&self, user_data: u64) -> bool {
        let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        let before = q.jobs.len();
        q.jobs.retain(|(u, _)| *u != user_data);
        q.jobs.len() != before
    }

    /// Moves finished results to `out`.
    pub(crate) fn take_done(&self, out: &mut Vec<(u64, i32)>) {
        let mut d = self.shared.done.lock().unwrap_or_else(|e| e.into_inner());
        out.append(&mut d);
    }
}

impl Drop for Pool {
    /// Tells the threads to exit once the queue is empty and joins them, for up to a second: a
    /// thread stuck in a system call (a read of a pipe nobody writes) is left to finish on its
    /// own rather than block the runtime's drop (its operation's memory was leaked by the
    /// driver's shutdown).
    fn drop(&mut self) {
        let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.closed = true;
        drop(q);
        self.shared.cv.notify_all();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut handles = std::mem::take(&mut *self.handles.borrow_mut());
        while !handles.is_empty() && std::time::Instant::now() < deadline {
            let (done, running): (Vec<_>, Vec<_>) =
                handles.into_iter().partition(|h| h.is_finished());
            for h in done {
                let _ = h.join();
            }
            handles = running;
            if !handles.is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

fn worker(shared: Arc<Shared>) {
    loop {
        let job = {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break Some(job);
                }
                if q.closed {
                    break None;
                }
                q.idle += 1;
                q = shared.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                q.idle -= 1;
            }
        };
        let Some((user_data, call)) = job else {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.threads -= 1;
            return;
        };
        let res = call.run();
        shared
            .done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((user_data, res));
        let one = 1u64;
        // SAFETY: writes 8 bytes from a local u64 to an eventfd this Arc keeps open.
        let _ = unsafe {
            libc::write(
                shared.notify.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}
