//! File reads through hoop (io_uring and the epoll driver's blocking pool) against tokio::fs,
//! one task reading 4 KiB blocks in turn from a cached file (queue depth 1: the per-operation
//! cost of each path).
//!
//! `cargo run --release -p hoop-cli --example fs_pool -- [SECS]`

use std::io::Write;
use std::time::{Duration, Instant};

use hoop::DriverKind;

const BLOCK: usize = 4096;
const FILE_BYTES: u64 = 64 << 20;

fn main() -> std::io::Result<()> {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let path = std::env::temp_dir().join(format!("hoop-fs-pool-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&path)?;
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..(FILE_BYTES >> 20) {
            f.write_all(&chunk)?;
        }
    }
    // Warm the page cache.
    let _ = std::fs::read(&path)?;
    let run = Duration::from_secs_f64(secs);
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        let rt = hoop::Runtime::builder().driver(kind).build()?;
        let p = path.clone();
        let (n, t) = rt.block_on(async move {
            let f = hoop::fs::File::open(&p).await?;
            let start = Instant::now();
            let mut n = 0u64;
            let mut buf = vec![0u8; BLOCK];
            while start.elapsed() < run {
                let pos = (n * BLOCK as u64) % FILE_BYTES;
                let (res, b) = f.read_at(buf, pos).await;
                buf = b;
                if res? != BLOCK {
                    return Err(std::io::Error::other("short read"));
                }
                n += 1;
            }
            Ok::<_, std::io::Error>((n, start.elapsed()))
        })?;
        println!("hoop ({kind}): {:.0} reads/s", n as f64 / t.as_secs_f64());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (n, t) = rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let mut f = tokio::fs::File::open(&path).await?;
        let start = Instant::now();
        let mut n = 0u64;
        let mut buf = vec![0u8; BLOCK];
        while start.elapsed() < run {
            let pos = (n * BLOCK as u64) % FILE_BYTES;
            f.seek(std::io::SeekFrom::Start(pos)).await?;
            f.read_exact(&mut buf).await?;
            n += 1;
        }
        Ok::<_, std::io::Error>((n, start.elapsed()))
    })?;
    println!("tokio::fs: {:.0} reads/s", n as f64 / t.as_secs_f64());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let p = path.clone();
    let (n, t) = rt.block_on(async move {
        use std::os::unix::fs::FileExt;
        let f = std::sync::Arc::new(std::fs::File::open(&p)?);
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < run {
            let pos = (n * BLOCK as u64) % FILE_BYTES;
            let f = f.clone();
            tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; BLOCK];
                f.read_exact_at(&mut buf, pos)
            })
            .await
            .map_err(std::io::Error::other)??;
            n += 1;
        }
        Ok::<_, std::io::Error>((n, start.elapsed()))
    })?;
    println!(
        "tokio spawn_blocking(pread): {:.0} reads/s",
        n as f64 / t.as_secs_f64()
    );
    std::fs::remove_file(&path)?;
    Ok(())
}
