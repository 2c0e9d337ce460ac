//! `hoop-peer nop`: BATCH no-ops awaited together on one thread, until `--secs` are up.
//!
//! * `compio`: compio 0.19 has no no-op operation of its own, but its driver's `OpCode` trait
//!   is public, for users' own operations: [`Nop`] is `IORING_OP_NOP` defined through it and
//!   submitted with `compio::runtime::submit`, as compio's own operations are.
//! * `tokio-uring`: `tokio_uring::no_op()`.
//!
//! monoio 0.2 has none, and no way to define one (its `OpAble` trait is crate-private).

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use crate::{batch_loop, invalid, json_str, q_us, Flags, Usage, NOP_ENGINES};

/// `IORING_OP_NOP` as a compio operation.
struct Nop;

// SAFETY: a NOP carries no pointer, so nothing must stay valid until it completes.
unsafe impl compio::driver::OpCode for Nop {
    type Control = ();

    fn create_entry(&mut self, _: &mut ()) -> compio::driver::OpEntry {
        io_uring::opcode::Nop::new().build().into()
    }
}

pub(crate) fn run(f: &Flags) -> io::Result<()> {
    let engine = f.engine(&NOP_ENGINES)?;
    let secs: f64 = f.num("secs", 3.0)?;
    let batch: usize = f.num("batch", 32)?;
    let entries: u32 = f.num("entries", 128)?;
    if batch == 0 || batch > 65_536 || entries == 0 || !secs.is_finite() || secs <= 0.0 {
        return Err(invalid("--batch 1..=65536, --entries > 0, --secs > 0"));
    }
    if let Some(cpu) = f.get("cpu") {
        let cpu = cpu.parse().map_err(|_| invalid("--cpu: not a number"))?;
        crate::pin_to(cpu)?;
    }
    let dur = Duration::from_secs_f64(secs);
    let u0 = Usage::now();
    let start = Instant::now();
    let ((nops, errors, batches, hist), setup) = match engine.as_str() {
        "compio" => {
            let mut proactor = compio::driver::ProactorBuilder::new();
            proactor.capacity(entries);
            let rt = compio::runtime::RuntimeBuilder::new()
                .with_proactor(proactor)
                .build()
                .map_err(|e| io::Error::new(e.kind(), format!("compio's runtime: {e}")))?;
            let deadline = Instant::now() + dur;
            let r = rt.block_on(batch_loop(batch, deadline, || {
                ok_unit(compio::runtime::submit(Nop), |r| r.0.map(drop))
            }));
            (
                r,
                format!(
                    "compio 0.19 io_uring driver, {entries} entries; IORING_OP_NOP through \
                     compio's public OpCode trait (compio has no no-op of its own)"
                ),
            )
        }
        "tokio-uring" => {
            let deadline = Instant::now() + dur;
            let r =
                tokio_uring::builder()
                    .entries(entries)
                    .start(batch_loop(batch, deadline, || {
                        ok_unit(tokio_uring::no_op(), |r| r)
                    }));
            (
                r,
                format!("tokio-uring 0.5, {entries} entries; tokio_uring::no_op()"),
            )
        }
        other => return Err(invalid(format!("unknown engine {other:?}"))),
    };
    let secs = start.elapsed().as_secs_f64();
    let usage = Usage::now().since(&u0);
    let mean = if hist.is_empty() {
        "null".to_string()
    } else {
        format!("{:.3}", hist.mean() / 1000.0)
    };
    println!(
        "{{\"bench\":\"peer-nop\",\"engine\":{},\"batch\":{batch},\"entries\":{entries},\
         \"secs\":{secs:.6},\"nops\":{nops},\"errors\":{errors},\"batches\":{batches},\
         \"batch_mean_us\":{mean},\"batch_p50_us\":{},\"batch_p90_us\":{},\"batch_p99_us\":{},\
         \"batch_p999_us\":{},\"batch_p9999_us\":{},\"batch_p99999_us\":{},\
         \"batch_p999999_us\":{},\"batch_max_us\":{},\"cpu_user_s\":{:.6},\"cpu_sys_s\":{:.6},\
         \"setup\":{}}}",
        json_str(&engine),
        q_us(&hist, 0.5),
        q_us(&hist, 0.9),
        q_us(&hist, 0.99),
        q_us(&hist, 0.999),
        q_us(&hist, 0.9999),
        q_us(&hist, 0.99999),
        q_us(&hist, 0.999999),
        q_us(&hist, 1.0),
        usage.user,
        usage.sys,
        json_str(&setup),
    );
    Ok(())
}

/// `fut` with its output mapped to `io::Result<()>` by `map`, pinned in place by the batch loop.
fn ok_unit<F: Future, M: FnOnce(F::Output) -> io::Result<()>>(fut: F, map: M) -> MapOut<F, M> {
    MapOut {
        fut,
        map: Some(map),
    }
}

/// A future and what to do with its output (no allocation, unlike a boxed `async` block).
struct MapOut<F, M> {
    fut: F,
    map: Option<M>,
}

impl<F: Future, M: FnOnce(F::Output) -> io::Result<()>> Future for MapOut<F, M> {
    type Output = io::Result<()>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        // SAFETY: `fut` is structurally pinned (never moved out of `self`); `map` is not pinned
        // (taken by value, which is fine: it is `Option<M>` moved out with `take`).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `fut` stays where the pinned `self` is.
        let fut = unsafe { std::pin::Pin::new_unchecked(&mut this.fut) };
        match fut.poll(cx) {
            std::task::Poll::Ready(out) => {
                let map = this.map.take().expect("polled after completion");
                std::task::Poll::Ready(map(out))
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}
