//! A line-based protocol on `futures::io::BufReader::lines` over a hoop `TcpStream`.
//!
//! ```text
//! cargo run --release -p hoop --example lines -- 127.0.0.1:7070    # serve until Ctrl-C
//! cargo run --release -p hoop --example lines -- --self-test 50    # 50 requests, then exit
//! ```
//!
//! Requests, one per line: `ADD a b` (answers the sum), `UPPER text` (answers the text in
//! capitals), `QUIT` (closes the connection); anything else is answered `ERR ...`. The server
//! splits the stream into owned halves: it reads the read half with `BufReader::lines` (the
//! `AsyncRead` trait) and writes each answer with the write half's own `write_all` (an owned
//! buffer, handed to the kernel without a copy).

use std::io;

use futures::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use futures::StreamExt;
use hoop::net::{TcpListener, TcpStream};

fn answer(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    match words.next() {
        Some("ADD") => {
            let sum: Result<i64, _> = words.map(str::parse::<i64>).sum();
            Some(match sum {
                Ok(s) => s.to_string(),
                Err(e) => format!("ERR {e}"),
            })
        }
        Some("UPPER") => Some(line["UPPER".len()..].trim_start().to_uppercase()),
        Some("QUIT") => None,
        _ => Some(format!("ERR unknown request: {line}")),
    }
}

async fn session(stream: TcpStream) -> io::Result<()> {
    // Owned halves: no lock between the reader and the writer.
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    while let Some(line) = lines.next().await {
        let Some(reply) = answer(&line?) else { break };
        let (res, _) = writer.write_all(format!("{reply}\n").into_bytes()).await;
        res?;
    }
    // tokio's spelling: the write direction ends, the peer reads end of stream.
    writer.shutdown().await
}

async fn serve(listener: TcpListener) -> io::Result<()> {
    loop {
        let (s, _) = listener.accept().await?;
        hoop::spawn(async move {
            if let Err(e) = session(s).await {
                eprintln!("lines: session ended: {e}");
            }
        });
    }
}

type Lines = futures::io::Lines<BufReader<futures::io::ReadHalf<TcpStream>>>;
type Writer = futures::io::WriteHalf<TcpStream>;

/// The most times the self-test asks one request again on a new connection.
const RECONNECTS: usize = 20;

async fn connect(addr: std::net::SocketAddr) -> io::Result<(Lines, Writer)> {
    let stream = TcpStream::connect(addr).await?;
    let (reader, writer) = futures::io::AsyncReadExt::split(stream);
    Ok((BufReader::new(reader).lines(), writer))
}

/// Sends `req` and reads the line it is answered with (`None`: the stream ended).
async fn ask(conn: &mut (Lines, Writer), req: &str) -> io::Result<Option<String>> {
    conn.1.write_all(format!("{req}\n").as_bytes()).await?;
    conn.1.flush().await?;
    conn.0.next().await.transpose()
}

async fn self_test(requests: usize) -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    hoop::spawn(serve(listener));
    let mut conn = connect(addr).await?;
    let mut ok = 0;
    let mut reconnected = 0;
    for i in 0..requests {
        let (req, want) = if i % 2 == 0 {
            (
                format!("ADD {i} {} -1", i * 2),
                (3 * i as i64 - 1).to_string(),
            )
        } else {
            (format!("UPPER hello {i}"), format!("HELLO {i}"))
        };
        // A connection that was reset (or ended before the answer) is replaced, and the
        // request asked again, a bounded number of times.
        let mut tries = 0;
        let got = loop {
            let err = match ask(&mut conn, &req).await {
                Ok(Some(got)) => break got,
                Ok(None) => io::Error::new(io::ErrorKind::UnexpectedEof, "no answer"),
                Err(e) => e,
            };
            if !hoop::net::connection_lost(&err) || tries == RECONNECTS {
                return Err(err);
            }
            tries += 1;
            reconnected += 1;
            conn = connect(addr).await?;
        };
        if got == want {
            ok += 1;
        } else {
            eprintln!("{req:?}: got {got:?}, want {want:?}");
        }
    }
    // After QUIT the server closes: the stream ends (asked again on a new connection if a
    // reset ended this one first).
    let mut end = None;
    for _ in 0..=RECONNECTS {
        match ask(&mut conn, "QUIT").await {
            Err(e) if hoop::net::connection_lost(&e) => {
                reconnected += 1;
                conn = connect(addr).await?;
            }
            r => {
                end = Some(r?);
                break;
            }
        }
    }
    let end = end.ok_or_else(|| io::Error::other("QUIT was reset every time"))?;
    if reconnected > 0 {
        eprintln!("lines: reconnected {reconnected} times after resets");
    }
    println!(
        "{ok} of {requests} answers correct; end of stream after QUIT: {}",
        end.is_none()
    );
    if ok == requests && end.is_none() {
        Ok(())
    } else {
        Err(io::Error::other("wrong answers"))
    }
}

#[hoop::main]
async fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, n] if flag == "--self-test" => {
            let n = n
                .parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{n}: {e}")))?;
            self_test(n).await
        }
        [addr] => {
            let ctrl_c = hoop::signal::ctrl_c();
            let listener = TcpListener::bind(addr.as_str()).await?;
            println!("listening on {}", listener.local_addr()?);
            hoop::select! {
                r = serve(listener) => r,
                r = ctrl_c => r,
            }
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: lines ADDR | lines --self-test REQUESTS",
        )),
    }
}
