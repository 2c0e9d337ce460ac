//! Serves a directory over HTTP/1.1 until Ctrl-C (or SIGTERM), with an access log on stderr.
//!
//! ```text
//! cargo run --release -p hoop-http --example static_files -- ./public 127.0.0.1:8080 [THREADS]
//! ```

use std::time::Duration;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next() else {
        eprintln!("usage: static_files DIR [ADDR] [THREADS]");
        std::process::exit(2);
    };
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".to_string());
    let threads = match args.next() {
        Some(t) => t.parse().map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "THREADS: a number")
        })?,
        None => 1,
    };

    let server = hoop_http::Server::builder(&root)
        .threads(threads)
        .idle_timeout(Duration::from_secs(30))
        .shutdown_grace(Duration::from_secs(3))
        .access_log(|e| {
            let who = e.remote.map_or("-".to_string(), |a| a.ip().to_string());
            eprintln!("{who} {e} {}", e.body_bytes);
        })
        .shutdown_on_signal()
        .build()?;
    let bound = server.bind(&addr)?;
    println!(
        "serving {root} on http://{} with {threads} thread(s); Ctrl-C to stop",
        bound.local_addr()
    );
    let stats = bound.run()?;
    println!(
        "stopped: {} connections, {} requests, {} cut off",
        stats.accepted, stats.requests, stats.cut_off
    );
    Ok(())
}
