//! `hoop::select!` (tokio's syntax and semantics) and the fused types that let
//! `futures::select!` go without `.fuse()`. Each test runs on io_uring and on epoll
//! (`#[hoop::test]`); loops are bounded by counts and every wait by `LIMIT`, and nothing is
//! asserted about speed.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::FusedFuture;
use futures::stream::FusedStream;
use hoop::net::{TcpListener, TcpStream};
use hoop::sync::CancellationToken;
use hoop::task::JoinSet;
use hoop::time::{interval, sleep, sleep_until, timeout, Instant};
use hoop_test_support as common;

const LIMIT: Duration = Duration::from_secs(20);

/// A future that counts its polls and stays pending.
struct Probe(Rc<Cell<u32>>);

impl Future for Probe {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.0.set(self.0.get() + 1);
        Poll::Pending
    }
}

/// Flags its drop: the futures are dropped before the handler runs.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

#[hoop::test]
async fn biased_polls_in_written_order() {
    for _ in 0..50 {
        let won = hoop::select! {
            biased;
            a = async { 'a' } => a,
            b = async { 'b' } => b,
            c = async { 'c' } => c,
        };
        assert_eq!(won, 'a');
    }
    // The first disabled: the second is the first polled.
    for _ in 0..50 {
        let won = hoop::select! {
            biased;
            a = async { 'a' }, if false => a,
            b = async { 'b' } => b,
            c = async { 'c' } => c,
        };
        assert_eq!(won, 'b');
    }
}

#[hoop::test]
async fn unbiased_gives_every_ready_branch_a_turn() {
    let mut wins = [0u32; 3];
    for _ in 0..200 {
        let i = hoop::select! {
            a = async { 0 } => a,
            b = async { 1 } => b,
            c = std::future::ready(2) => c,
        };
        wins[i] += 1;
    }
    assert!(wins.iter().all(|&n| n > 0), "{wins:?}");
    assert_eq!(wins.iter().sum::<u32>(), 200);

    let (mut a, mut b) = (0u32, 0u32);
    for _ in 0..200 {
        hoop::select! {
            _ = async {} => a += 1,
            _ = async {} => b += 1,
        }
    }
    assert!(a > 0 && b > 0, "a={a} b={b}");
}

macro_rules! first_of {
    ($p:pat, $a:expr, $b:expr, $h:expr) => {
        hoop::select! {
            biased;
            $p = $a => $h,
            $p = $b => $h,
        }
    };
}

#[hoop::test]
async fn or_patterns_and_fragments_from_macro_rules() {
    let v = hoop::select! {
        Ok(v) | Err(v) = async { Err::<u8, u8>(3) } => v,
    };
    assert_eq!(v, 3);
    // Fragments arrive wrapped in invisible groups.
    let v = first_of!(Some(x), async { None::<u8> }, async { Some(4u8) }, x * 2);
    assert_eq!(v, 8);
}

#[test]
fn a_select_over_send_futures_is_send() {
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    let token = CancellationToken::new();
    let fut = assert_send(async move {
        hoop::select! {
            _ = token.cancelled() => 1,
            _ = sleep(Duration::from_millis(1)) => 2,
        }
    });
    assert_eq!(common::block_on(fut), 2);
}

#[hoop::test]
async fn a_false_precondition_evaluates_the_future_but_never_polls_it() {
    let polls = Rc::new(Cell::new(0));
    let mut evaluated = 0;
    let mut preconditions = Vec::new();
    let v = hoop::select! {
        _ = { evaluated += 1; Probe(polls.clone()) }, if { preconditions.push(1); false } => 0,
        v = async { 7 }, if { preconditions.push(2); true } => v,
    };
    assert_eq!(v, 7);
    assert_eq!(
        evaluated, 1,
        "a disabled branch's future is still evaluated"
    );
    assert_eq!(polls.get(), 0, "but never polled");
    assert_eq!(preconditions, [1, 2]);

    // Only disabled branches: the else branch, without a poll.
    let r = hoop::select! {
        _ = Probe(polls.clone()), if false => "probe",
        else => "else",
    };
    assert_eq!(r, "else");
    assert_eq!(polls.get(), 0);
}

#[hoop::test]
async fn a_refutable_pattern_that_fails_disables_its_branch() {
    // An empty JoinSet: `join_next()` gives `None` at once; no branch is left.
    let mut set: JoinSet<u32> = JoinSet::new();
    let r = hoop::select! {
        Some(r) = set.join_next() => r.ok(),
        else => Some(99),
    };
    assert_eq!(r, Some(99));

    // `None` disables the first branch; the second wins later.
    for _ in 0..20 {
        let r = hoop::select! {
            Some(v) = async { None::<u32> } => v,
            v = async { sleep(Duration::from_millis(1)).await; 5 } => v,
        };
        assert_eq!(r, 5);
    }

    // With a task in the set, the same branch wins.
    set.spawn(async { 3 });
    let r = timeout(LIMIT, async {
        hoop::select! {
            Some(Ok(v)) = set.join_next() => v,
            else => 0,
        }
    })
    .await
    .unwrap();
    assert_eq!(r, 3);

    // `mut` and `ref` in patterns.
    let r = hoop::select! {
        Some(mut v) = async { Some(vec![1]) } => { v.push(2); v }
    };
    assert_eq!(r, [1, 2]);
    let r = hoop::select! {
        (ref a, 2) = async { (String::from("x"), 1) } => a.clone(),
        (ref a, _) = async { sleep(Duration::from_millis(1)).await; (String::from("y"), 1) } => a.clone(),
    };
    assert_eq!(r, "y");
}

#[hoop::test]
#[should_panic(expected = "all branches are disabled and there is no else branch")]
async fn every_branch_disabled_without_else_panics() {
    let mut set: JoinSet<()> = JoinSet::new();
    hoop::select! {
        Some(_) = set.join_next() => {}
        _ = async {}, if false => {}
    }
}

#[hoop::test]
async fn futures_are_dropped_before_the_handler_runs() {
    let dropped = Rc::new(Cell::new(false));
    let flag = DropFlag(dropped.clone());
    let seen = hoop::select! {
        _ = async move { let _flag = flag; std::future::pending::<()>().await } => false,
        _ = async {} => dropped.get(),
    };
    assert!(seen, "the other branch's future was dropped first");
}

async fn handlers_use_the_callers_control_flow(fail_at: u32) -> io::Result<u32> {
    let mut sum = 0;
    let mut i = 0;
    let total = loop {
        i += 1;
        if i > 100 {
            return Err(io::Error::other("the loop did not end"));
        }
        hoop::select! {
            v = async { i } => {
                let checked: io::Result<()> = if v == fail_at {
                    Err(io::Error::other(format!("failed at {v}")))
                } else {
                    Ok(())
                };
                checked?;
                if v % 2 == 0 {
                    continue;
                }
                sleep(Duration::from_millis(1)).await;
                sum += v;
                if v >= 9 {
                    break sum;
                }
            }
        }
    };
    Ok(total)
}

#[hoop::test]
async fn handlers_may_await_and_use_question_mark_break_continue_and_return() {
    assert_eq!(
        handlers_use_the_callers_control_flow(0).await.unwrap(),
        1 + 3 + 5 + 7 + 9
    );
    let e = handlers_use_the_callers_control_flow(6).await.unwrap_err();
    assert_eq!(e.to_string(), "failed at 6");

    // `return` from a handler returns from the enclosing async fn.
    async fn early(leave: bool) -> &'static str {
        hoop::select! {
            _ = async {} => if leave { return "returned" },
        }
        "fell through"
    }
    assert_eq!(early(true).await, "returned");
    assert_eq!(early(false).await, "fell through");
}

#[hoop::test]
async fn futures_by_mut_outlive_the_select() {
    // A long operation pinned once, raced against ticks in a loop: it keeps its progress.
    let slow = async { sleep(Duration::from_millis(20)).await }; // not `Unpin`
    hoop::pin_mut!(slow);
    let mut ticks = interval(Duration::from_millis(1));
    let (mut n, mut done) = (0u32, false);
    for _ in 0..100_000 {
        hoop::select! {
            biased;
            _ = &mut slow => { done = true; break; }
            _ = ticks.tick() => n += 1,
        }
    }
    assert!(done, "the sleep completed after {n} ticks");
    assert!(n > 0, "the interval ticked at once");

    // An `Unpin` future by `&mut` too, and the same future again after it lost.
    let mut rx = {
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        hoop::spawn(async move {
            sleep(Duration::from_millis(2)).await;
            let _ = tx.send(11);
        });
        rx
    };
    let first = hoop::select! {
        biased;
        v = &mut rx => v.ok(),
        _ = async {} => None,
    };
    assert_eq!(first, None);
    let v = timeout(LIMIT, async {
        hoop::select! {
            v = &mut rx => v.ok(),
        }
    })
    .await
    .unwrap();
    assert_eq!(v, Some(11));
}

#[hoop::test]
async fn accept_loop_with_a_shutdown_token_and_a_join_set() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let token = CancellationToken::new();
    const CLIENTS: u32 = 3;
    for i in 0..CLIENTS {
        // Each client's exchange (a byte, its answer) again on a new connection if a reset
        // (injected) ends it, as a client does: the loop serves every client once.
        hoop::spawn(async move {
            hoop_test_support::resets::retry_async(&format!("client {i}"), |_| async {
                let s = TcpStream::connect(addr).await?;
                let (res, _) = s.write_all(b"x".to_vec()).await;
                res?;
                let (res, buf) = s.read(Vec::with_capacity(1)).await;
                match res? {
                    1 if buf == b"y" => Ok(()),
                    _ => Err(hoop_test_support::resets::closed_early("the answer")),
                }
            })
            .await
        });
    }
    let mut incoming = listener.incoming();
    let mut set = JoinSet::new();
    let (mut accepted, mut served) = (0u32, 0u32);
    timeout(LIMIT, async {
        for _ in 0..1000 {
            hoop::select! {
                biased;
                _ = token.cancelled() => break,
                Some(r) = set.join_next(), if !set.is_empty() => {
                    served += r.unwrap_or(0);
                    if served == CLIENTS {
                        token.cancel();
                    }
                }
                Some(conn) = incoming.next() => {
                    let conn = conn?;
                    accepted += 1;
                    set.spawn(async move {
                        let (res, buf) = conn.read(Vec::with_capacity(8)).await;
                        if !(res.is_ok() && buf == b"x") {
                            return 0;
                        }
                        let (res, _) = conn.write_all(b"y".to_vec()).await;
                        u32::from(res.is_ok())
                    });
                }
            }
        }
        Ok::<(), io::Error>(())
    })
    .await??;
    assert_eq!(served, CLIENTS);
    // One more connection per exchange a reset ended.
    if hoop_test_support::resets::injected() {
        assert!(accepted >= CLIENTS, "{accepted} accepted");
    } else {
        assert_eq!(accepted, CLIENTS);
    }
    assert!(token.is_cancelled());
    Ok(())
}

#[hoop::test]
async fn cancellation_sleep_interval_and_channels() {
    let token = CancellationToken::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
    let stop = token.clone();
    hoop::spawn(async move {
        for i in 1..=3 {
            if tx.send(i).await.is_err() {
                return;
            }
        }
        sleep(Duration::from_millis(2)).await;
        stop.cancel();
    });
    let mut every = interval(Duration::from_millis(1));
    let deadline = Instant::now() + LIMIT;
    let (mut got, mut ticks, mut closed) = (Vec::new(), 0u32, false);
    let ended_by = loop {
        if got.len() > 3 || ticks > 100_000 {
            break "a bound";
        }
        hoop::select! {
            _ = token.cancelled() => break "the token",
            _ = sleep_until(deadline) => break "the deadline",
            Some(v) = rx.recv(), if !closed => got.push(v),
            _ = every.tick() => ticks += 1,
            else => break "nothing",
        }
        // The sender is gone once it cancelled; `recv()` then gives `None` (disabled).
        closed = rx.is_closed() && rx.is_empty();
    };
    assert_eq!(ended_by, "the token");
    assert_eq!(got, [1, 2, 3]);

    // `hoop::time::sleep` racing a pending future.
    let v = hoop::select! {
        _ = std::future::pending::<()>() => 0,
        _ = sleep(Duration::from_millis(1)) => 1,
    };
    assert_eq!(v, 1);
}

#[hoop::test]
async fn nested_selects_and_select_inside_a_future() {
    let v = hoop::select! {
        a = async {
            hoop::select! {
                biased;
                x = async { 1 } => x,
                y = async { 2 } => y,
            }
        } => hoop::select! {
            b = async { a * 10 } => b,
        },
    };
    assert_eq!(v, 10);
}

#[hoop::test]
async fn tokio_select_works_on_hoop_futures() {
    let token = CancellationToken::new();
    token.cancel();
    let mut set: JoinSet<u32> = JoinSet::new();
    let r = tokio::select! {
        Some(_) = set.join_next() => "join",
        _ = token.cancelled() => "cancelled",
        _ = sleep(LIMIT) => "sleep",
    };
    assert_eq!(r, "cancelled");
}

#[hoop::test]
async fn futures_select_without_fuse() -> io::Result<()> {
    use futures::StreamExt;

    // Sleep and cancelled(): fused, terminated once they returned.
    let mut short = sleep(Duration::from_millis(1));
    let token = CancellationToken::new();
    let mut cancelled = token.cancelled();
    assert!(!short.is_terminated() && !cancelled.is_terminated());
    futures::select! {
        _ = short => {}
        _ = cancelled => unreachable!("not cancelled"),
    }
    assert!(short.is_terminated());
    let again = futures::select! {
        _ = short => "again",
        _ = cancelled => "cancelled",
        default => "skipped",
    };
    assert_eq!(again, "skipped", "a completed sleep is not polled again");
    std::pin::Pin::new(&mut short).reset(Instant::now());
    assert!(!short.is_terminated(), "a reset sleep can fire again");
    token.cancel();
    futures::select! {
        _ = cancelled => {}
    }
    assert!(cancelled.is_terminated());

    // A JoinHandle: terminated once it returned the output.
    let mut handle = hoop::spawn(async { 4 });
    let v = futures::select! {
        v = handle => v.unwrap(),
    };
    assert_eq!(v, 4);
    assert!(handle.is_terminated());

    // Incoming and Interval: fused streams, `next()` without `.fuse()`.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mut incoming = listener.incoming();
    let mut ticks = interval(Duration::from_millis(1));
    assert!(!incoming.is_terminated() && !ticks.is_terminated());
    hoop::spawn(async move {
        let _ = TcpStream::connect(addr).await;
    });
    let mut n = 0;
    let conn = timeout(LIMIT, async {
        loop {
            futures::select! {
                c = StreamExt::next(&mut incoming) => break c,
                _ = ticks.next() => n += 1,
            }
        }
    })
    .await
    .map_err(io::Error::from)?;
    assert!(matches!(conn, Some(Ok(_))), "{conn:?}");

    // IncomingDirect is a stream now (on a listener of its own: `incoming` still accepts).
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mut direct = listener.incoming_direct();
    hoop::spawn(async move {
        let _ = TcpStream::connect(addr).await;
    });
    let conn = timeout(LIMIT, StreamExt::next(&mut direct)).await?;
    assert!(matches!(conn, Some(Ok(_))), "{conn:?}");
    assert!(!direct.is_terminated());
    Ok(())
}

/// The fused flags are plain state: checked outside any runtime too.
#[test]
fn fused_flags_outside_a_runtime() {
    let past = Instant::now();
    let mut s = sleep_until(past);
    assert!(!s.is_terminated(), "not polled yet: it must be polled");
    assert!(common::poll_once(&mut s).is_ok());
    assert!(s.is_terminated());
}
