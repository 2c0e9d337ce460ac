//! What `hoop bench http` is asked to do: the flags as a plain plan, the servers it knows, and
//! its cells (file size, connections, keep-alive or close, or the static mix), checked before
//! anything runs.

use std::io;
use std::path::PathBuf;

use crate::plan::check::{check_conns, invalid};

/// `hoop bench http`'s flags, as the command line gave them (checked by the run).
#[derive(Debug, Clone, Default)]
pub struct HttpPlan {
    /// `--url`: the one file to load; none: the side-by-side runs.
    pub url: Option<String>,
    /// `-c`: connections.
    pub conns: Option<usize>,
    /// `-t`: seconds per run.
    pub secs: Option<f64>,
    /// `--close`: a connection per request.
    pub close: bool,
    /// `--pipeline`: requests in flight per keep-alive connection.
    pub pipeline: usize,
    /// `--verify`: the file every body is compared with (`--url`).
    pub verify: Option<PathBuf>,
    /// `--server-pid`: the server measured (`--url`).
    pub server_pid: Option<u32>,
    /// `--full`: the full matrix.
    pub full: bool,
    /// `--rounds`: repetitions of each configuration (default: 2; 3 with `--profile`).
    pub rounds: Option<u32>,
    /// `--servers`.
    pub servers: Option<Vec<String>>,
    /// `--cells`.
    pub cells: Option<Vec<String>>,
    /// `--wrk`: wrk beside the load generator.
    pub wrk: bool,
    /// `--dir`: files and nginx's prefix.
    pub dir: Option<PathBuf>,
    /// `--netns-mtu`: the runs again in a network namespace with this loopback MTU.
    pub netns_mtu: Option<u32>,
    /// `--attack`: the servers under a slowloris and idle keep-alive attack.
    pub attack: bool,
    /// `--slowloris`.
    pub slowloris: Option<usize>,
    /// `--idle`.
    pub idle: Option<usize>,
    /// `--attack-in-flight`.
    pub attack_in_flight: Option<usize>,
    /// `--profile`: HttpArena's profiles, side by side (`all`: the six).
    pub profiles: Option<Vec<String>>,
    /// `--tls`: HTTPS side by side with nginx (wrk, or h2load with `h2`).
    pub tls: bool,
    /// `--h2`: with `tls`, HTTP/2 by ALPN and h2load.
    pub h2: bool,
}

/// Most requests in flight per connection (`--pipeline`).
pub(crate) const MAX_PIPELINE: usize = 1024;
/// Planned overhead of one run (connect phase, stop), for the progress bar.
pub(crate) const RUN_OVERHEAD_SECS: f64 = 0.3;

/// The servers of the side-by-side runs by default (and of the main job), in run order.
pub(crate) const SERVERS: [&str; 4] = ["hoop", "hoop-epoll", "nginx", "hyper"];

/// Every server `--servers` accepts: the default ones, the hyper pair, and hyper on hoop's
/// own runtime.
pub(crate) const ALL_SERVERS: [&str; 7] = [
    "hoop",
    "hoop-epoll",
    "nginx",
    "hyper",
    "hyper-shared",
    "hyper-tokio",
    "hyper-hoop",
];

/// The hyper pair: hyper on hoop's shared sockets, and the same on tokio's (the baseline;
/// DESIGN.md, "`hoop bench http`: hyper on shared sockets against hyper on tokio's").
pub(crate) const HYPER_PAIR: (&str, &str) = ("hyper-shared", "hyper-tokio");

/// How a server is named in tables and charts.
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-epoll" => "hoop (epoll)",
        "hyper" => "tokio+hyper",
        "hyper-shared" => "hyper on hoop::shared",
        "hyper-tokio" => "hyper on tokio net",
        "hyper-hoop" => "hyper on hoop's runtime",
        other => other,
    }
}

/// Whether server `name` is a multi-thread server, left unpinned (every allowed CPU): the
/// hyper pair, and hyper on hoop's runtime (a thread per allowed CPU, against tokio's
/// multi-thread runtime with a worker per allowed CPU).
pub(crate) fn unpinned(name: &str) -> bool {
    name == HYPER_PAIR.0 || name == HYPER_PAIR.1 || name == "hyper-hoop"
}

/// Checks `--servers` and returns it (default: the four of [`SERVERS`]).
pub(crate) fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    let list = list.or_else(|| Some(SERVERS.iter().map(|s| s.to_string()).collect()));
    crate::plan::check::parse_server_list(list, &ALL_SERVERS)
}

/// One side-by-side configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    /// File size.
    pub file_bytes: u64,
    /// Connections.
    pub conns: usize,
    /// Connection per request.
    pub close: bool,
    /// The static mix (`file_bytes` is then its mean size).
    pub mix: bool,
}

impl Cell {
    /// "keep-alive" or "close".
    pub(crate) fn mode(&self) -> &'static str {
        if self.close {
            "close"
        } else {
            "keep-alive"
        }
    }

    /// The cell's `--cells` name: `1k-c50`, `1m-c500`, `1k-c50-close`, `mix-c50`.
    pub(crate) fn name(&self) -> String {
        format!(
            "{}-c{}{}",
            if self.mix {
                "mix".to_string()
            } else {
                size_name(self.file_bytes)
            },
            self.conns,
            if self.close { "-close" } else { "" }
        )
    }

    /// How tables name the cell's file: `1 KiB`, or the static mix.
    pub(crate) fn file_label(&self) -> String {
        if self.mix {
            MIX_LABEL.to_string()
        } else {
            size_label(self.file_bytes)
        }
    }

    /// A cell of one file.
    pub(crate) fn file(file_bytes: u64, conns: usize, close: bool) -> Cell {
        Cell {
            file_bytes,
            conns,
            close,
            mix: false,
        }
    }

    /// A cell of the static mix.
    pub(crate) fn mix(conns: usize) -> Cell {
        Cell {
            file_bytes: mix_mean_bytes(),
            conns,
            close: false,
            mix: true,
        }
    }
}

/// A size as `--cells` names it: `1k`, `64k`, `1m`.
fn size_name(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}m", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{}k", b >> 10),
        b => b.to_string(),
    }
}

/// Human size of a file.
pub(crate) fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Parses one `--cells` name (`1k-c50`, `64k-c500`, `1m-c50-close`, `mix-c50`;
/// case-insensitive): the size must be one of the bench's files ([`FILES`]) or `mix`, the
/// static mix.
pub(crate) fn parse_cell(name: &str) -> io::Result<Cell> {
    let lower = name.trim().to_ascii_lowercase();
    let bad = || {
        invalid(format!(
            "--cells: {name:?} is not SIZE-cCONNS[-close] with SIZE 1k, 64k, 1m or mix \
             (examples: 1k-c50, 1k-c500, 1m-c50-close, mix-c50)"
        ))
    };
    let mut parts = lower.split('-');
    let size = parts.next().ok_or_else(bad)?;
    let conns = parts
        .next()
        .and_then(|c| c.strip_prefix('c'))
        .ok_or_else(bad)?;
    let close = match parts.next() {
        None => false,
        Some("close") => true,
        Some(_) => return Err(bad()),
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    let conns: usize = conns.parse().map_err(|_| bad())?;
    if size == "mix" {
        check_conns(conns).map_err(|e| invalid(format!("--cells {name:?}: {e}")))?;
        return Ok(Cell {
            close,
            ..Cell::mix(conns)
        });
    }
    // One of the bench's files, named as `Cell::name` names it.
    let file_bytes = FILES
        .iter()
        .copied()
        .find(|&f| size_name(f) == size)
        .ok_or_else(bad)?;
    check_conns(conns).map_err(|e| invalid(format!("--cells {name:?}: {e}")))?;
    Ok(Cell::file(file_bytes, conns, close))
}

/// Parses `--cells` (duplicates dropped, order kept).
pub(crate) fn parse_cells(names: &[String]) -> io::Result<Vec<Cell>> {
    let mut cells: Vec<Cell> = Vec::new();
    for n in names {
        let c = parse_cell(n)?;
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    if cells.is_empty() {
        return Err(invalid("--cells needs at least one cell"));
    }
    Ok(cells)
}

/// The files of the side-by-side runs.
pub(crate) const FILES: [u64; 3] = [1024, 64 * 1024, 1 << 20];

/// Connections of the static mix's cell.
pub(crate) const MIX_CONNS: usize = 50;

/// The quick matrix (the main job's): 1 KiB at 50 and 500 keep-alive, 64 KiB and 1 MiB at 50,
/// 1 KiB connection-per-request at 50, the static mix at 50.
pub(crate) fn quick_cells() -> Vec<Cell> {
    vec![
        Cell::file(1024, 50, false),
        Cell::file(1024, 500, false),
        Cell::file(64 * 1024, 50, false),
        Cell::file(1 << 20, 50, false),
        Cell::file(1024, 50, true),
        Cell::mix(MIX_CONNS),
    ]
}

/// The full matrix: every file at 50 and 500 keep-alive and 50 connection-per-request, 1 KiB
/// at 10,000 keep-alive, and the static mix at 50.
pub(crate) fn full_cells() -> Vec<Cell> {
    let mut v = Vec::new();
    for &f in &FILES {
        for (conns, close) in [(50, false), (500, false), (50, true)] {
            v.push(Cell::file(f, conns, close));
        }
    }
    v.push(Cell::file(1024, 10_000, false));
    v.push(Cell::mix(MIX_CONNS));
    v
}

/// How tables name the static mix.
pub(crate) const MIX_LABEL: &str = "static mix (20 files, 3-300 KB)";
/// The static mix's smallest and largest file, bytes.
const MIX_MIN_BYTES: f64 = 3_000.0;
const MIX_MAX_BYTES: f64 = 300_000.0;

/// The sizes of the static mix's 20 files, smallest first: geometric from 3 KB to 300 KB.
pub(crate) fn mix_sizes() -> [u64; 20] {
    let mut v = [0u64; 20];
    let n = v.len() as f64 - 1.0;
    for (i, s) in v.iter_mut().enumerate() {
        *s = (MIX_MIN_BYTES * (MIX_MAX_BYTES / MIX_MIN_BYTES).powf(i as f64 / n)).round() as u64;
    }
    v
}

/// The static mix's mean size (its cell's `file_bytes`).
pub(crate) fn mix_mean_bytes() -> u64 {
    mix_sizes().iter().sum::<u64>() / mix_sizes().len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_parse_and_name_themselves() {
        let c = parse_cells(&["1k-c50".into(), "1K-C500".into(), "1k-c50".into()]).unwrap();
        assert_eq!(
            c,
            vec![Cell::file(1024, 50, false), Cell::file(1024, 500, false)]
        );
        let close = parse_cell("1m-c50-close").unwrap();
        assert_eq!(
            (close.file_bytes, close.conns, close.close),
            (1 << 20, 50, true)
        );
        assert_eq!(parse_cell("64k-c10").unwrap().file_bytes, 64 * 1024);
        let m = parse_cell("MIX-c50").unwrap();
        assert_eq!(m, Cell::mix(50));
        assert!(m.mix && !m.close && m.file_bytes == mix_mean_bytes());
        assert_eq!(m.name(), "mix-c50");
        assert_eq!(m.file_label(), "static mix (20 files, 3-300 KB)");
        for c in quick_cells().iter().chain(full_cells().iter()) {
            assert_eq!(parse_cell(&c.name()).unwrap(), *c, "{}", c.name());
        }
        for bad in [
            "",
            "1k",
            "2k-c50",
            "1k-50",
            "1k-c",
            "1k-cx",
            "1k-c50-ka",
            "1k-c50-close-x",
            "1k-c0",
            "mix",
            "mix-50",
            "mix-c0",
            "mixed-c50",
            "mix-c50-keep",
        ] {
            assert!(parse_cell(bad).is_err(), "{bad:?}");
        }
        assert!(parse_cells(&[]).is_err());
    }

    #[test]
    fn servers_default_to_four_and_accept_the_hyper_pair() {
        assert_eq!(parse_servers(None).unwrap(), SERVERS.map(String::from));
        let pair = parse_servers(Some(vec!["hyper-shared".into(), "hyper-tokio".into()]));
        assert_eq!(pair.unwrap(), ["hyper-shared", "hyper-tokio"]);
        assert!(unpinned("hyper-shared") && unpinned("hyper-tokio") && !unpinned("hoop"));
    }

    #[test]
    fn matrices() {
        assert_eq!(quick_cells().len(), 6);
        assert!(quick_cells().contains(&Cell::mix(50)) && full_cells().contains(&Cell::mix(50)));
        assert!(full_cells().iter().any(|c| c.conns == 10_000));
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(65536), "64 KiB");
    }

    #[test]
    fn the_mix_spreads_from_3_to_300_kb() {
        let s = mix_sizes();
        assert_eq!((s[0], s[19]), (3_000, 300_000));
        assert!(s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
        let mean = mix_mean_bytes();
        assert!(mean > 50_000 && mean < 100_000, "{mean}");
    }
}
