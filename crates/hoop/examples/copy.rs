//! A file copier on `hoop::fs::copy`, and its benchmark against `std::fs::copy`.
//!
//! ```text
//! cargo run --release -p hoop --example copy -- SRC DST        # copy one file
//! cargo run --release -p hoop --example copy -- --bench 200    # 200 MiB: hoop vs std
//! cargo run --release -p hoop --example copy -- --bench 200 /some/dir
//! ```
//!
//! `--bench MIB [DIR]` writes a file of MIB MiB of pseudo-random bytes in DIR (default: the
//! temp dir), copies it 3 times with each (alternating, page cache warm), checks every copy
//! byte for byte, prints the best MiB/s of each and the ratio, and removes its files.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

fn same_contents(a: &Path, b: &Path) -> io::Result<bool> {
    Ok(std::fs::read(a)? == std::fs::read(b)?)
}

async fn bench(mib: u64, dir: PathBuf) -> io::Result<()> {
    let src = dir.join(format!("hoop-copy-src-{}", std::process::id()));
    let dst = dir.join(format!("hoop-copy-dst-{}", std::process::id()));
    // xorshift bytes: incompressible, and cheap to make.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..mib << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&src, &data)?;
    drop(data);
    let bytes = mib << 20;
    let (mut best_hoop, mut best_std) = (Duration::MAX, Duration::MAX);
    for round in 0..3 {
        let _ = std::fs::remove_file(&dst);
        let t = Instant::now();
        let n = hoop::fs::copy(&src, &dst).await?;
        best_hoop = best_hoop.min(t.elapsed());
        if n != bytes || !same_contents(&src, &dst)? {
            return Err(io::Error::other(format!(
                "hoop copy {round} differs ({n} bytes)"
            )));
        }
        let _ = std::fs::remove_file(&dst);
        let t = Instant::now();
        let n = std::fs::copy(&src, &dst)?;
        best_std = best_std.min(t.elapsed());
        if n != bytes || !same_contents(&src, &dst)? {
            return Err(io::Error::other(format!("std copy {round} differs")));
        }
    }
    let _ = std::fs::remove_file(&dst);
    let _ = std::fs::remove_file(&src);
    let (h, s) = (mib_per_s(bytes, best_hoop), mib_per_s(bytes, best_std));
    println!("file: {mib} MiB in {}", dir.display());
    println!("hoop::fs::copy  {h:8.0} MiB/s (best of 3, verified)");
    println!("std::fs::copy   {s:8.0} MiB/s (best of 3, verified)");
    println!("ratio hoop/std  {:8.2}", h / s);
    Ok(())
}

#[hoop::main]
async fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, mib, rest @ ..] if flag == "--bench" => {
            let mib: u64 = mib
                .parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{mib}: {e}")))?;
            let dir = rest.first().map_or_else(std::env::temp_dir, PathBuf::from);
            bench(mib.max(1), dir).await
        }
        [src, dst] => {
            let t = Instant::now();
            let n = hoop::fs::copy(src, dst).await?;
            println!(
                "copied {n} bytes in {:?} ({:.0} MiB/s)",
                t.elapsed(),
                mib_per_s(n, t.elapsed())
            );
            Ok(())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: copy SRC DST | copy --bench MIB [DIR]",
        )),
    }
}
