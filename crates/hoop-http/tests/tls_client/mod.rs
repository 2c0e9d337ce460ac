//! The HTTPS tests' client (`hoop_test_support::tls`: a certificate made per test, a blocking
//! rustls client), and a raw HTTP/2 frame codec small enough to send what a well-behaved
//! client library never would (more streams than allowed, a window that never opens).

#![allow(dead_code)]

use std::io::{self, Read, Write};

pub use hoop_test_support::tls::*;

// ===== raw HTTP/2 frames =====

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;

/// One frame.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The connection preface and a SETTINGS frame of `(id, value)` pairs.
pub fn preface(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut p = Vec::new();
    for (id, v) in settings {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&frame(SETTINGS, 0, 0, &p));
    out
}

/// A GET of `path` on `stream` (HPACK: indexed `:method GET`, `:scheme https`, literal
/// `:path` and `:authority`, no Huffman), ending the stream.
pub fn get(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x87];
    block.push(0x04);
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    block.push(0x01);
    block.push(9);
    block.extend_from_slice(b"localhost");
    frame(HEADERS, 0x4 | 0x1, stream, &block)
}

/// Reads one frame.
pub fn read_frame(s: &mut impl Read) -> io::Result<Frame> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head)?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let mut payload = vec![0; len];
    s.read_exact(&mut payload)?;
    Ok(Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload,
    })
}

/// Sends `bytes` and flushes.
pub fn send(s: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    s.write_all(bytes)?;
    s.flush()
}
