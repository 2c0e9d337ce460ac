//! The chunked transfer coding of a request body (RFC 9112, 7.1), decoded incrementally: bytes
//! go in as they arrive, data comes out, and the decoder says where the body ended (the next
//! pipelined request starts there).
//!
//! Strict where leniency lets two parsers disagree (request smuggling): every line ends with
//! CRLF, a size is hex digits only (at most 15 of them), and the size line (with its
//! extensions, which are ignored) and the trailer section are bounded.

/// Longest chunk-size line, extensions included.
const MAX_LINE_BYTES: usize = 4096;
/// Largest trailer section (trailers are read and dropped).
const MAX_TRAILER_BYTES: usize = 8 * 1024;
/// Most hex digits of a chunk size (15: the size fits in 60 bits).
const MAX_SIZE_DIGITS: u32 = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// In the size's digits.
    Size { value: u64, digits: u32 },
    /// After the digits: extensions until CR.
    Ext,
    /// The CR of the size line was seen; LF next.
    SizeLf,
    /// Data bytes left in this chunk.
    Data(u64),
    /// After a chunk's data: CR next.
    DataCr,
    /// After a chunk's data and CR: LF next.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// In a trailer line.
    Trailer,
    /// A trailer line's CR was seen (`empty`: the line was empty, the body ends at its LF).
    TrailerLf { empty: bool },
    /// The body ended.
    Done,
}

/// An incremental chunked decoder.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    state: State,
    /// Bytes of the current size line, or of the trailer section.
    line_bytes: usize,
    /// The last size line's size was 0.
    last: bool,
    /// The size the current size line gave.
    pending_size: u64,
}

/// The framing is malformed (or past a limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            state: State::Size {
                value: 0,
                digits: 0,
            },
            line_bytes: 0,
            last: false,
            pending_size: 0,
        }
    }
}

impl Decoder {
    /// Whether the body ended.
    pub(crate) fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input`, appending data to `out`; returns the bytes of `input` taken (all
    /// of them unless the body ended inside it).
    pub(crate) fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Malformed> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Done => return Ok(i),
                State::Data(left) => {
                    let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                    out.extend_from_slice(&input[i..i + take]);
                    i += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data(left)
                    };
                    continue;
                }
                State::Size { value, digits } => {
                    self.count_line()?;
                    match hex(b) {
                        Some(d) if digits < MAX_SIZE_DIGITS => {
                            self.state = State::Size {
                                value: value << 4 | u64::from(d),
                                digits: digits + 1,
                            };
                        }
                        Some(_) => return Err(Malformed),
                        None if digits == 0 => return Err(Malformed),
                        None => {
                            self.last = value == 0;
                            self.state = State::Ext;
                            // The first byte after the digits is the extensions' (or the CR).
                            self.pending_size = value;
                            continue;
                        }
                    }
                }
                State::Ext => {
                    self.count_line()?;
                    match b {
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => return Err(Malformed),
                        // `;name=value` extensions and the whitespace before them.
                        _ => {}
                    }
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(Malformed);
                    }
                    self.line_bytes = 0;
                    self.state = if self.last {
                        State::TrailerStart
                    } else {
                        State::Data(self.pending_size)
                    };
                }
                State::DataCr => {
                    if b != b'\r' {
                        return Err(Malformed);
                    }
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(Malformed);
                    }
                    self.state = State::Size {
                        value: 0,
                        digits: 0,
                    };
                }
                State::TrailerStart => {
                    self.count_trailer()?;
                    self.state = if b == b'\r' {
                        State::TrailerLf { empty: true }
                    } else if b == b'\n' {
                        return Err(Malformed);
                    } else {
                        State::Trailer
                    };
                }
                State::Trailer => {
                    self.count_trailer()?;
                    match b {
                        b'\r' => self.state = State::TrailerLf { empty: false },
                        b'\n' => return Err(Malformed),
                        _ => {}
                    }
                }
                State::TrailerLf { empty } => {
                    if b != b'\n' {
                        return Err(Malformed);
                    }
                    self.state = if empty {
                        State::Done
                    } else {
                        self.count_trailer()?;
                        State::TrailerStart
                    };
                }
            }
            i += 1;
        }
        Ok(i)
    }

    fn count_line(&mut self) -> Result<(), Malformed> {
        self.line_bytes += 1;
        if self.line_bytes > MAX_LINE_BYTES {
            return Err(Malformed);
        }
        Ok(())
    }

    fn count_trailer(&mut self) -> Result<(), Malformed> {
        self.line_bytes += 1;
        if self.line_bytes > MAX_TRAILER_BYTES {
            return Err(Malformed);
        }
        Ok(())
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize), Malformed> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let n = d.decode(input, &mut out)?;
        assert!(d.done(), "not done after {input:?}");
        Ok((out, n))
    }

    #[test]
    fn chunks_extensions_and_trailers_decode_and_the_end_is_found() {
        let body =
            b"2\r\n20\r\n1a;name=v\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nGET /";
        let (out, n) = decode_all(body).unwrap();
        assert_eq!(out, b"20abcdefghijklmnopqrstuvwxyz");
        assert_eq!(&body[n..], b"GET /");
    }

    #[test]
    fn any_split_of_the_input_decodes_the_same() {
        let body = b"5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n";
        for split in 0..body.len() {
            let mut d = Decoder::default();
            let mut out = Vec::new();
            let a = d.decode(&body[..split], &mut out).unwrap();
            assert_eq!(a, split);
            let b = d.decode(&body[split..], &mut out).unwrap();
            assert_eq!(a + b, body.len());
            assert!(d.done());
            assert_eq!(out, b"hello0123456789");
        }
    }

    #[test]
    fn malformed_framing_is_refused() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"2\n20\r\n0\r\n\r\n",
            b"2\r\n20\n0\r\n\r\n",
            b"2\r\n201\r\n0\r\n\r\n",
            b"1000000000000000\r\n",
            b"0\r\nX: 1\n\r\n",
        ] {
            let mut d = Decoder::default();
            assert_eq!(d.decode(bad, &mut Vec::new()), Err(Malformed), "{bad:?}");
        }
        let long = vec![b'1'; 10];
        let mut line = long.clone();
        line.extend(std::iter::repeat_n(b' ', MAX_LINE_BYTES));
        let mut d = Decoder::default();
        assert_eq!(d.decode(&line, &mut Vec::new()), Err(Malformed));
    }
}
