//! One arena connection's receive side: a buffer read into from the socket, whole responses
//! taken off it (either framing, the body decoded into a buffer of its own), and the wait for
//! the server's close after a `Connection: close` request.

use std::io;
use std::time::Duration;

use hoop::net::TcpStream;

use crate::load::http::arena::response::{decode_chunked, parse_head, Framing, Head};
use crate::load::http::recv::RecvBuf;
use crate::load::resets::is_reset;

/// Why an exchange failed: the error's kind (as the table counts it) and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// connect, write, read, eof, parse, status, body, json, close.
    pub kind: &'static str,
    /// What happened.
    pub what: String,
    /// The connection was reset or ended under the exchange (a reconnect while resets are
    /// injected: `crate::load::resets`).
    pub lost: bool,
}

impl Failure {
    /// A failure of `kind`.
    pub(crate) fn new(kind: &'static str, what: impl Into<String>) -> Failure {
        Failure {
            kind,
            what: what.into(),
            lost: false,
        }
    }

    /// A failure of `kind` from the socket's error `e`.
    pub(crate) fn io(kind: &'static str, e: &io::Error) -> Failure {
        Failure {
            lost: is_reset(e),
            ..Failure::new(kind, e.to_string())
        }
    }
}

/// A connection's receive buffer and the last body.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    recv: RecvBuf,
    /// The last response's body, decoded.
    pub body: Vec<u8>,
}

impl Reader {
    /// Empties the buffer for a new connection.
    pub(crate) fn reset(&mut self) {
        self.recv.reset();
    }

    /// Bytes received and not yet taken.
    fn unread(&self) -> &[u8] {
        self.recv.unread()
    }

    /// Reads more; an end of stream or an error fails, `what` naming where it was.
    async fn fill(&mut self, stream: &TcpStream, what: &str) -> Result<(), Failure> {
        match self.recv.read_more(stream).await {
            Ok(0) => Err(Failure {
                lost: true,
                ..Failure::new("eof", format!("the server closed the connection in {what}"))
            }),
            Ok(_) => Ok(()),
            Err(e) => Err(Failure::io("read", &e)),
        }
    }

    /// Reads one whole response: its head, and its body into [`Reader::body`].
    pub(crate) async fn response(&mut self, stream: &TcpStream) -> Result<Head, Failure> {
        let head = loop {
            match parse_head(self.unread()) {
                Ok(Some(h)) => break h,
                Ok(None) => self.fill(stream, "a response head").await?,
                Err(e) => return Err(Failure::new("parse", e)),
            }
        };
        self.recv.consume(head.head_bytes);
        match head.framing {
            Framing::Empty => self.body.clear(),
            Framing::Length(n) => {
                while self.unread().len() < n {
                    self.fill(stream, "a body").await?;
                }
                self.body.clear();
                self.body.extend_from_slice(&self.recv.unread()[..n]);
                self.recv.consume(n);
            }
            Framing::Chunked => loop {
                match decode_chunked(self.recv.unread(), &mut self.body) {
                    Ok(Some(n)) => {
                        self.recv.consume(n);
                        break;
                    }
                    Ok(None) => self.fill(stream, "a chunked body").await?,
                    Err(e) => return Err(Failure::new("parse", e)),
                }
            },
        }
        Ok(head)
    }

    /// After the answer to a `Connection: close` request: the server must close, sending
    /// nothing more, within `wait`.
    pub(crate) async fn expect_close(
        &mut self,
        stream: &TcpStream,
        wait: Duration,
    ) -> Result<(), Failure> {
        if !self.unread().is_empty() {
            return Err(Failure::new(
                "close",
                format!(
                    "{} byte(s) after the answer to Connection: close",
                    self.unread().len()
                ),
            ));
        }
        let buf = vec![0u8; 512];
        match hoop::time::timeout(wait, stream.read(buf)).await {
            Ok((Ok(0), _)) => Ok(()),
            // A reset is a close too (a server may close with unread bytes pending).
            Ok((Err(e), _)) if e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
            Ok((Ok(n), _)) => Err(Failure::new(
                "close",
                format!("{n} byte(s) after the answer to Connection: close"),
            )),
            Ok((Err(e), _)) => Err(Failure::io("read", &e)),
            Err(_) => Err(Failure::new(
                "close",
                format!(
                    "the server kept the connection open {} ms after answering Connection: close",
                    wait.as_millis()
                ),
            )),
        }
    }
}
