//! A load generator's own thread: named, pinned to a CPU when one is given, joined before the
//! run's result is used.

use std::io;

/// Runs `f` on a new thread called `name`, pinned to `pin` if given, and returns what it
/// returned; `what` names the thread in the error if it panicked ("the {what} thread
/// panicked").
pub(crate) fn run_pinned<T: Send>(
    name: &str,
    what: &str,
    pin: Option<usize>,
    f: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new().name(name.into()).spawn_scoped(
            s,
            move || -> io::Result<T> {
                if let Some(cpu) = pin {
                    hoop::runtime::pin_to_cpu(cpu).map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot pin the client to CPU {cpu}: {e}"))
                    })?;
                }
                f()
            },
        )?;
        handle
            .join()
            .map_err(|_| io::Error::other(format!("the {what} thread panicked")))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_is_named_and_its_result_returned() {
        let name = run_pinned("hoop-bench-test", "test", None, || {
            Ok(std::thread::current().name().map(String::from))
        });
        assert_eq!(name.unwrap().as_deref(), Some("hoop-bench-test"));
        let e = run_pinned("hoop-bench-test", "test", None, || -> io::Result<()> {
            panic!("on purpose")
        });
        assert_eq!(e.unwrap_err().to_string(), "the test thread panicked");
    }
}
