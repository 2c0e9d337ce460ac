//! `hoop-peer echo --engine compio`: compio's TCP echo server, the same work per connection as
//! hoop's baselines (`apps/hoop-cli/src/baseline.rs`): a 64 KiB buffer owned by the connection,
//! read whatever is there, write all of it back, until EOF or an error (which closes only that
//! connection); `TCP_NODELAY` on every accepted socket. Prints `listening on IP:PORT` once
//! bound; runs until the process is killed (SIGTERM's default action).

use std::io::{self, Write};

use compio::io::{AsyncRead, AsyncWriteExt};

use crate::{Flags, ECHO_ENGINES};

const BUF_SIZE: usize = 64 * 1024;

pub(crate) fn run(f: &Flags) -> io::Result<()> {
    f.engine(&ECHO_ENGINES)?;
    let addr = f.get("addr").unwrap_or("127.0.0.1:0").to_string();
    let rt = compio::runtime::Runtime::new()
        .map_err(|e| io::Error::new(e.kind(), format!("compio's runtime: {e}")))?;
    rt.block_on(async move {
        let listener = compio::net::TcpListener::bind(addr.as_str()).await?;
        println!("listening on {}", listener.local_addr()?);
        io::stdout().flush()?;
        loop {
            match listener.accept().await {
                Ok((stream, _)) => compio::runtime::spawn(conn(stream)).detach(),
                Err(e) => match e.raw_os_error() {
                    Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT) => {
                        return Err(e)
                    }
                    _ => eprintln!("compio echo: accept failed: {e}"),
                },
            }
        }
    })
}

async fn conn(mut stream: compio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    loop {
        buf.clear();
        let compio::BufResult(res, b) = stream.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let compio::BufResult(res, b) = stream.write_all(buf).await;
        buf = b;
        if res.is_err() {
            return;
        }
    }
}
