//! A TCP echo server in a dozen lines: `cargo run --release -p hoop --example echo`.

#[hoop::main]
async fn main() -> std::io::Result<()> {
    let listener = hoop::net::TcpListener::bind("127.0.0.1:7000").await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        hoop::spawn(async move {
            let mut buf = Vec::with_capacity(64 * 1024);
            loop {
                buf.clear();
                let (res, b) = stream.read(buf).await;
                buf = b;
                if !matches!(res, Ok(n) if n > 0) {
                    return;
                }
                let (res, b) = stream.write_all(buf).await;
                buf = b;
                if res.is_err() {
                    return;
                }
            }
        });
    }
}
