//! A benchmark of file copies through the poll-based traits (`futures::io::copy`, and
//! `tokio::io::copy` with feature `tokio`) against `hoop::fs::copy`, on both drivers.
//!
//! ```text
//! cargo run --release -p hoop --features tokio --example file_copy_traits            # 1 GiB in the temp dir
//! cargo run --release -p hoop --features tokio --example file_copy_traits -- 256 /some/dir 3
//! ```
//!
//! Arguments: `[MIB] [DIR] [ROUNDS] [KIB,KIB,...]` (defaults 1024, the temp dir, 2, and
//! `16,256,4096`: the `set_max_buf_size` values tried besides the default). It writes a file of MIB
//! MiB of pseudo-random bytes in DIR, copies it once with `std::fs::copy` to warm the page
//! cache (the page cache cannot be dropped without root: every figure is a warm-cache copy, and
//! the source is synced first so that its writeback does not run under the copies),
//! then, on io_uring and on epoll, copies it ROUNDS times with each method (alternating),
//! checks the first copy of each byte for byte, prints the best MiB/s of each, and removes its
//! files. It runs by hand only; nothing asserts on speed.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hoop::DriverKind;

fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

/// Compares two files in 1 MiB chunks (no 1 GiB allocations).
fn same_contents(a: &Path, b: &Path) -> io::Result<bool> {
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// How a copy is made.
#[derive(Debug, Clone, Copy)]
enum Method {
    /// `hoop::fs::copy` (splice through pipes, or owned-buffer reads and writes).
    FsCopy,
    /// `futures::io::copy` between two `hoop::fs::File`s; `Some(n)`: `set_max_buf_size(n)` on
    /// both first.
    Futures(Option<usize>),
    /// `tokio::io::copy` through tokio's traits.
    #[cfg(feature = "tokio")]
    Tokio(Option<usize>),
}

impl Method {
    fn name(self) -> String {
        let size = |s: Option<usize>| match s {
            None => "default".to_string(),
            Some(n) => format!("{} KiB", n >> 10),
        };
        match self {
            Method::FsCopy => "hoop::fs::copy".to_string(),
            Method::Futures(s) => format!("futures::io::copy, {}", size(s)),
            #[cfg(feature = "tokio")]
            Method::Tokio(s) => format!("tokio::io::copy, {}", size(s)),
        }
    }
}

fn set_size(f: &mut hoop::fs::File, size: Option<usize>) {
    if let Some(n) = size {
        f.set_max_buf_size(n);
    }
}

async fn copy_once(method: Method, src: &Path, dst: &Path) -> io::Result<u64> {
    let open = || async {
        let from = hoop::fs::File::open(src).await?;
        let to = hoop::fs::File::create(dst).await?;
        io::Result::Ok((from, to))
    };
    match method {
        Method::FsCopy => hoop::fs::copy(src, dst).await,
        Method::Futures(size) => {
            let (mut from, mut to) = open().await?;
            set_size(&mut from, size);
            set_size(&mut to, size);
            let n = futures::io::copy(&mut from, &mut to).await?;
            futures::io::AsyncWriteExt::close(&mut to).await?;
            Ok(n)
        }
        #[cfg(feature = "tokio")]
        Method::Tokio(size) => {
            let (mut from, mut to) = open().await?;
            set_size(&mut from, size);
            set_size(&mut to, size);
            let n = tokio::io::copy(&mut from, &mut to).await?;
            tokio::io::AsyncWriteExt::shutdown(&mut to).await?;
            Ok(n)
        }
    }
}

/// Copies with each method on `kind`; false if a copy failed or differed.
fn bench(
    kind: DriverKind,
    methods: &[Method],
    src: &Path,
    dst: &Path,
    bytes: u64,
    rounds: u32,
) -> bool {
    let rt = match hoop::Runtime::builder().driver(kind).build() {
        Ok(rt) => rt,
        Err(e) => {
            println!("{kind:?}: no runtime ({e})");
            return true;
        }
    };
    let mut ok = true;
    let mut best = vec![Duration::MAX; methods.len()];
    for round in 0..rounds {
        for (i, &m) in methods.iter().enumerate() {
            let _ = std::fs::remove_file(dst);
            // Every copy starts with no dirty pages: the writeback of the one before (1 GiB
            // of dirty pages each) must not throttle this one's writes.
            // SAFETY: sync(2) has no arguments and no memory-safety preconditions.
            unsafe { libc::sync() };
            let t = Instant::now();
            let r = rt.block_on(copy_once(m, src, dst));
            let took = t.elapsed();
            match r {
                Ok(n) if n == bytes => {}
                other => {
                    println!("{kind:?} {}: failed: {other:?}", m.name());
                    ok = false;
                    continue;
                }
            }
            if round == 0 && !same_contents(src, dst).unwrap_or(false) {
                println!("{kind:?} {}: the copy differs", m.name());
                ok = false;
                continue;
            }
            best[i] = best[i].min(took);
        }
    }
    for (m, d) in methods.iter().zip(best) {
        if d != Duration::MAX {
            println!(
                "{:<6} {:<32} {:8.0} MiB/s",
                format!("{kind:?}"),
                m.name(),
                mib_per_s(bytes, d)
            );
        }
    }
    ok
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bad =
        |s: &String| io::Error::new(io::ErrorKind::InvalidInput, format!("{s}: not a number"));
    let mib: u64 = args
        .first()
        .map_or(Ok(1024), |s| s.parse().map_err(|_| bad(s)))?;
    let dir = args.get(1).map_or_else(std::env::temp_dir, PathBuf::from);
    let rounds: u32 = args
        .get(2)
        .map_or(Ok(2), |s| s.parse().map_err(|_| bad(s)))?;
    let src = dir.join(format!("hoop-copy-traits-src-{}", std::process::id()));
    let dst = dir.join(format!("hoop-copy-traits-dst-{}", std::process::id()));
    let bytes = mib.max(1) << 20;
    {
        // xorshift bytes in 1 MiB pieces: incompressible, cheap, and no 1 GiB allocation.
        use std::io::Write;
        let mut f = io::BufWriter::new(std::fs::File::create(&src)?);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut chunk = vec![0u8; 1 << 20];
        for _ in 0..mib.max(1) {
            for b in chunk.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
            }
            f.write_all(&chunk)?;
        }
        // On the device before the copies: its writeback does not run under them.
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    // Warm the page cache with one copy that is not measured. Each copy's destination is
    // removed before the next (its dirty pages go with it), so every copy starts alike.
    std::fs::copy(&src, &dst)?;
    std::fs::remove_file(&dst)?;
    let mut methods = vec![Method::FsCopy, Method::Futures(None)];
    let sizes: Vec<usize> = match args.get(3) {
        Some(list) => list
            .split(',')
            .map(|k| k.parse().map_err(|_| bad(&k.to_string())))
            .collect::<io::Result<_>>()?,
        None => vec![16, 256, 4096],
    };
    for kib in sizes {
        methods.push(Method::Futures(Some(kib << 10)));
    }
    #[cfg(feature = "tokio")]
    methods.push(Method::Tokio(None));
    println!(
        "{} MiB in {}, best of {rounds}, page cache warm",
        bytes >> 20,
        dir.display()
    );
    let mut ok = true;
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        ok &= bench(kind, &methods, &src, &dst, bytes, rounds);
    }
    let _ = std::fs::remove_file(&dst);
    let _ = std::fs::remove_file(&src);
    if ok {
        Ok(())
    } else {
        Err(io::Error::other("a copy failed or differed"))
    }
}
