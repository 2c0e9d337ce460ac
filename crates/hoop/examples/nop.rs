//! Pushes batches of no-op operations through the runtime and prints the rate.
//!
//! `cargo run --release -p hoop --example nop -- [SECS] [BATCH]`

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use hoop::driver::{op, Op};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let batch: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let rt = hoop::Runtime::builder().entries(128).build()?;
    let (nops, elapsed) = rt.block_on(async move {
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(secs);
        let mut nops = 0u64;
        let mut ops: Vec<Option<Op<op::Nop>>> = Vec::with_capacity(batch);
        while Instant::now() < deadline {
            ops.clear();
            ops.extend((0..batch).map(|_| Some(Op::new(op::Nop))));
            let mut left = batch;
            std::future::poll_fn(|cx| {
                for slot in ops.iter_mut() {
                    if let Some(o) = slot {
                        if let Poll::Ready(r) = Pin::new(o).poll(cx) {
                            let _ = r;
                            *slot = None;
                            left -= 1;
                        }
                    }
                }
                if left == 0 {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            nops += batch as u64;
        }
        (nops, start.elapsed())
    });
    let c = rt.counters();
    println!(
        "{nops} nops in {:.2} s: {:.0} nops/s, {:.4} enter calls per nop ({})",
        elapsed.as_secs_f64(),
        nops as f64 / elapsed.as_secs_f64(),
        c.enter_calls as f64 / nops as f64,
        rt.setup_flags()
    );
    Ok(())
}
