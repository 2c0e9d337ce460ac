//! One runtime per thread, each pinned to a CPU, with the signals the threads share.

use std::future::Future;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

use hoop_driver::ShutdownReport;

use super::executor::Runtime;
use super::os::pin_to_cpu;

/// Runs `f(i)` on `threads` threads, each with its own runtime (its own ring) and pinned to CPU
/// `i % cpus`; returns every thread's output. For one port served by every thread, bind a
/// [`ReuseportGroup::bind_n`](crate::net::ReuseportGroup::bind_n)`(addr, threads)` before the
/// call and take a listener of it on each thread (`group.listener()`): its `threads` sockets
/// all listen from the start, so the kernel spreads connections over every thread from the
/// first one (`TcpListener::bind_reuseport` per thread works too, but connections that arrive
/// before a thread has bound go to the threads that have).
///
/// Signals: before spawning, the calling thread blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT,
/// SIGUSR1, SIGUSR2 and SIGWINCH, so every runtime thread inherits the mask and
/// [`hoop::signal`](crate::signal) listeners on any of them see those signals; while the
/// threads run, the calling thread takes them and gives any signal nobody listens for its
/// usual disposition (Ctrl-C still ends a program that does not listen for it). The mask is
/// restored on return. See [`signal`](crate::signal) for other signals.
pub fn run_per_core<F, Fut>(threads: usize, f: F) -> io::Result<Vec<Fut::Output>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let out = run_per_core_reports(threads, f)?;
    Ok(out.into_iter().map(|(output, _)| output).collect())
}

/// [`run_per_core`], also giving each thread's [`ShutdownReport`] (its runtime shut down after
/// `f(i)` returned): `(output, report)` per thread, in thread order. A report with `leaked` or
/// `still_in_flight` above 0 means operations outlived their thread's program.
pub fn run_per_core_reports<F, Fut>(
    threads: usize,
    f: F,
) -> io::Result<Vec<(Fut::Output, ShutdownReport)>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let f = Arc::new(f);
    let signals = crate::signal::PerCoreSignals::block()?;
    // Every thread sets up its runtime before `f` runs on any: if one cannot (its ring
    // refused, `Builder` errors), none runs `f` and the call returns that thread's error,
    // rather than serving short of a thread, or waiting for ever on servers that never end.
    let start = Arc::new(StartGate::default());
    let threads = threads.max(1);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let f = f.clone();
            let start = start.clone();
            let exit = signals.exit_notice();
            // Fault opt-outs (test builds only) carry to the threads started here.
            let opted_out = crate::fault::opted_out();
            std::thread::Builder::new().name(format!("hoop-{i}")).spawn(
                move || -> io::Result<Option<(Fut::Output, ShutdownReport)>> {
                    let _exit = exit;
                    let _faults = crate::fault::opt_out_inherited(opted_out);
                    let _ = pin_to_cpu(i % cpus);
                    let rt = match Runtime::new() {
                        Ok(rt) => rt,
                        Err(e) => {
                            start.report(false);
                            return Err(e);
                        }
                    };
                    if !start.report_and_wait(threads) {
                        return Ok(None);
                    }
                    let output = rt.block_on(f(i));
                    Ok(Some((output, rt.shutdown())))
                },
            )
        })
        .collect::<io::Result<_>>()?;
    if start.wait_all(threads) {
        signals.serve_until_exited(handles.len());
    }
    let mut out = Vec::with_capacity(handles.len());
    let mut failed = None;
    for h in handles {
        match h.join() {
            Ok(Ok(Some(r))) => out.push(r),
            // Stopped before `f`: another thread's runtime could not start.
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                failed.get_or_insert(e);
            }
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The threads of [`run_per_core_reports`] each report whether their runtime started; `f`
/// runs once all did, on none if one did not.
#[derive(Default)]
struct StartGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    started: usize,
    failed: bool,
}

impl StartGate {
    /// This thread's runtime started (`ok`) or could not.
    fn report(&self, ok: bool) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if ok {
            s.started += 1;
        } else {
            s.failed = true;
        }
        self.changed.notify_all();
    }

    /// Reports a started runtime, then waits until all `threads` started (`true`) or one
    /// failed (`false`).
    fn report_and_wait(&self, threads: usize) -> bool {
        self.report(true);
        self.wait_all(threads)
    }

    /// Waits until all `threads` started (`true`) or one failed (`false`).
    fn wait_all(&self, threads: usize) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while !s.failed && s.started < threads {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        !s.failed
    }
}
