//! `#[hoop::test]` runs the body on each driver (io_uring, then epoll); `#[hoop::main]` expands
//! to a runtime running the body.

use std::cell::RefCell;
use std::io;

use hoop::DriverKind;

#[hoop::test]
async fn test_macro_runs_the_body_on_a_runtime() {
    let h = hoop::spawn(async { 21 * 2 });
    assert_eq!(h.await.unwrap(), 42);
    assert!(hoop::runtime::current_counters().is_some());
}

#[hoop::test(entries = 8)]
async fn test_macro_takes_entries() -> std::io::Result<()> {
    hoop::time::sleep(std::time::Duration::from_millis(1)).await;
    Ok(())
}

thread_local! {
    /// The drivers the `records_*` tests ran on, on this thread.
    static SEEN: RefCell<Vec<DriverKind>> = const { RefCell::new(Vec::new()) };
}

fn record() {
    let kind = hoop::runtime::current_driver().expect("the body runs inside a runtime");
    SEEN.with(|s| s.borrow_mut().push(kind));
}

/// Calls `test` (a `#[hoop::test]` function is still an ordinary function) and returns the
/// drivers it ran on.
fn drivers_of<R>(test: fn() -> R) -> (R, Vec<DriverKind>) {
    SEEN.with(|s| s.borrow_mut().clear());
    let r = test();
    (r, SEEN.with(|s| s.borrow().clone()))
}

/// The drivers a test without `driver = ...` runs on, here.
fn both() -> Vec<DriverKind> {
    if hoop::__private::uring_unavailable().is_some() {
        vec![DriverKind::Epoll]
    } else {
        vec![DriverKind::Uring, DriverKind::Epoll]
    }
}

#[hoop::test]
async fn records_both() {
    record();
}

#[hoop::test(driver = "epoll")]
async fn records_epoll_only() {
    record();
}

#[hoop::test(driver = "uring", entries = 16)]
async fn records_uring_only() {
    record();
}

#[hoop::test]
async fn records_result() -> io::Result<()> {
    record();
    // `?` converts into the declared error type, as in any `async fn`.
    let n: u32 = "7".parse().map_err(io::Error::other)?;
    assert_eq!(n, 7);
    Ok(())
}

#[test]
fn test_macro_runs_uring_then_epoll() {
    assert_eq!(drivers_of(records_both).1, both());
}

#[test]
fn test_macro_driver_argument_restricts() {
    assert_eq!(drivers_of(records_epoll_only).1, [DriverKind::Epoll]);
    let expected: &[DriverKind] = if hoop::__private::uring_unavailable().is_some() {
        &[] // skipped, with a line on stderr
    } else {
        &[DriverKind::Uring]
    };
    assert_eq!(drivers_of(records_uring_only).1, expected);
}

#[test]
fn test_macro_result_bodies_run_on_both() {
    let (r, seen) = drivers_of(records_result);
    r.unwrap();
    assert_eq!(seen, both());
}

/// The runtime support behind the macro: the first `Err` wins and stops the run.
#[test]
fn first_error_wins_and_stops() {
    let mut runs = 0;
    let r: Result<(), String> =
        hoop::__private::run_test(&[DriverKind::Uring, DriverKind::Epoll], None, false, || {
            runs += 1;
            async {
                let kind = hoop::runtime::current_driver().unwrap();
                Err(format!("failed on {kind}"))
            }
        });
    assert_eq!(r, Err(format!("failed on {}", both()[0])));
    assert_eq!(runs, 1);
}

/// A panic on one driver names that driver.
#[test]
fn panic_names_the_driver() {
    let panic = std::panic::catch_unwind(|| {
        hoop::__private::run_test(
            &[DriverKind::Uring, DriverKind::Epoll],
            None,
            false,
            || async {
                if hoop::runtime::current_driver() == Some(DriverKind::Epoll) {
                    panic!("only on epoll");
                }
            },
        )
    })
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert_eq!(msg, "driver=Epoll: only on epoll");
}

#[hoop::test]
#[should_panic(expected = "panics on every driver")]
async fn should_panic_needs_every_driver_to_panic() {
    panic!("panics on every driver");
}

/// With `#[should_panic]`, a driver that does not panic fails the test.
#[test]
fn should_panic_fails_if_one_driver_does_not_panic() {
    let mut runs = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hoop::__private::run_test(&[DriverKind::Epoll, DriverKind::Epoll], None, true, || {
            runs += 1;
            let n = runs;
            async move {
                if n == 1 {
                    panic!("first run panics");
                }
            }
        })
    }));
    assert!(
        r.is_ok(),
        "the second run did not panic: the test must not count as panicking"
    );
    assert_eq!(runs, 2);
}

#[hoop::main]
async fn not_the_real_main() -> u32 {
    hoop::yield_now().await;
    7
}

#[test]
fn main_macro_builds_a_sync_fn() {
    assert_eq!(not_the_real_main(), 7);
}
