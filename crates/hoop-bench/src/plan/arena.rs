//! What `hoop bench http --profile` is asked to do: HttpArena's profiles (baseline, pipelined,
//! short-lived, json, upload, static), the servers each runs against, their connection counts,
//! and the thread counts of the rows (one thread pinned: the targets; two unpinned: no target).

use std::io;
use std::path::PathBuf;

use crate::plan::check::{check_conns, invalid};

/// One HttpArena profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `/baseline11`: GET, POST with a length, POST chunked, keep-alive.
    Baseline,
    /// 16 `GET /pipeline` per write.
    Pipelined,
    /// The baseline shapes, 10 requests per connection.
    ShortLived,
    /// `/json/{count}?m={m}` against the dataset.
    Json,
    /// `POST /upload` of 500 KB to 20 MB.
    Upload,
    /// The static mix, precompressed variants.
    Static,
}

impl Profile {
    /// Every profile, in run order (`--profile all`).
    pub(crate) const ALL: [Profile; 6] = [
        Profile::Baseline,
        Profile::Pipelined,
        Profile::ShortLived,
        Profile::Json,
        Profile::Upload,
        Profile::Static,
    ];

    /// Its name on the command line and in the JSON lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Profile::Baseline => "baseline",
            Profile::Pipelined => "pipelined",
            Profile::ShortLived => "short-lived",
            Profile::Json => "json",
            Profile::Upload => "upload",
            Profile::Static => "static",
        }
    }

    /// Its connection counts (HttpArena's).
    pub(crate) fn conns(self) -> [usize; 2] {
        match self {
            Profile::Upload => [32, 256],
            _ => [512, 4096],
        }
    }

    /// How a connection behaves, for the table and the JSON's `mode`.
    pub(crate) fn mode(self) -> &'static str {
        match self {
            Profile::Pipelined => "pipeline-16",
            Profile::ShortLived => "10-per-connection",
            _ => "keep-alive",
        }
    }

    /// Whether server `name` runs this profile: nginx and h2o only serve files and
    /// `/pipeline`; hoop without its cache is a static-only row.
    pub(crate) fn served_by(self, name: &str) -> bool {
        match name {
            "nginx" | "h2o" => matches!(self, Profile::Static | Profile::Pipelined),
            "hoop-nocache" => self == Profile::Static,
            // The static profile compares file servers: the Router baselines serve no files.
            "axum-tokio" | "actix" => self != Profile::Static,
            _ => true,
        }
    }

    /// The profile's servers by default, in run order.
    pub(crate) fn default_servers(self) -> Vec<String> {
        ARENA_SERVERS
            .iter()
            .filter(|s| self.served_by(s))
            .map(|s| s.to_string())
            .collect()
    }
}

/// Every server `--servers` accepts with `--profile`, in run order.
pub(crate) const ARENA_SERVERS: [&str; 7] = [
    "hoop",
    "hoop-nocache",
    "hoop-epoll",
    "axum-tokio",
    "actix",
    "nginx",
    "h2o",
];

/// How a server is named in the profile tables.
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-nocache" => "hoop (io_uring, --cache-bytes 0)",
        "hoop-epoll" => "hoop (epoll)",
        "axum-tokio" => "axum on tokio",
        "actix" => "actix-web",
        other => other,
    }
}

/// Parses `--profile` (`all` is the six; duplicates dropped, order kept).
pub(crate) fn parse_profiles(list: &[String]) -> io::Result<Vec<Profile>> {
    let mut v: Vec<Profile> = Vec::new();
    for name in list {
        let name = name.trim().to_ascii_lowercase();
        let found: Vec<Profile> = if name == "all" {
            Profile::ALL.to_vec()
        } else {
            let p = Profile::ALL
                .into_iter()
                .find(|p| p.name() == name)
                .ok_or_else(|| {
                    invalid(format!(
                        "--profile: {name:?} is not one of baseline, pipelined, short-lived, \
                         json, upload, static, all"
                    ))
                })?;
            vec![p]
        };
        for p in found {
            if !v.contains(&p) {
                v.push(p);
            }
        }
    }
    if v.is_empty() {
        return Err(invalid("--profile needs at least one profile"));
    }
    Ok(v)
}

/// The profile runs, checked.
#[derive(Debug, Clone)]
pub(crate) struct ArenaPlan {
    /// The profiles, in order.
    pub profiles: Vec<Profile>,
    /// `--servers` (none: each profile's own default).
    pub servers: Option<Vec<String>>,
    /// `-c`: one connection count for every profile (none: each profile's two).
    pub conns: Option<usize>,
    /// Only each profile's first connection count (the main job's short runs).
    pub first_conns_only: bool,
    /// Seconds per run.
    pub secs: f64,
    /// Rounds, servers in alternating order.
    pub rounds: u32,
    /// Server threads of the rows: 1 (pinned, the targets), 2 (unpinned, no target).
    pub threads: Vec<usize>,
    /// The dataset, the static files and the servers' configurations.
    pub dir: PathBuf,
}

/// The servers of the main job's short profile runs (each profile keeps those that serve it).
pub(crate) const QUICK_SERVERS: [&str; 4] = ["hoop", "axum-tokio", "actix", "nginx"];
/// Seconds per run of the main job's profile runs.
pub(crate) const QUICK_SECS: f64 = 1.0;

impl ArenaPlan {
    /// The main job's short runs: every profile once at its first connection count (upload 32,
    /// the others 512), 1 s, one round, one pinned thread, hoop against axum on tokio, actix
    /// (unless `peers` is false) and nginx where it applies.
    pub(crate) fn quick(dir: PathBuf, peers: bool) -> ArenaPlan {
        ArenaPlan {
            profiles: Profile::ALL.to_vec(),
            servers: Some(
                QUICK_SERVERS
                    .iter()
                    .filter(|s| peers || **s != "actix")
                    .map(|s| s.to_string())
                    .collect(),
            ),
            conns: None,
            first_conns_only: true,
            secs: QUICK_SECS,
            rounds: 1,
            threads: vec![1],
            dir,
        }
    }

    /// Checks `--servers` and `-c`.
    pub(crate) fn check(&self) -> io::Result<()> {
        if let Some(c) = self.conns {
            check_conns(c)?;
        }
        if let Some(list) = &self.servers {
            crate::plan::check::parse_server_list(Some(list.clone()), &ARENA_SERVERS)?;
        }
        Ok(())
    }

    /// The servers of `p`: `--servers` less those that do not serve it, or its default.
    pub(crate) fn servers_of(&self, p: Profile) -> Vec<String> {
        match &self.servers {
            Some(list) => list.iter().filter(|s| p.served_by(s)).cloned().collect(),
            None => p.default_servers(),
        }
    }

    /// The connection counts of `p`.
    pub(crate) fn conns_of(&self, p: Profile) -> Vec<usize> {
        match self.conns {
            Some(c) => vec![c],
            None if self.first_conns_only => vec![p.conns()[0]],
            None => p.conns().to_vec(),
        }
    }

    /// Planned seconds, for progress bars.
    pub(crate) fn planned_secs(&self) -> f64 {
        let runs: usize = self
            .profiles
            .iter()
            .map(|&p| self.servers_of(p).len() * self.conns_of(p).len())
            .sum::<usize>()
            * self.threads.len()
            * self.rounds as usize;
        runs as f64 * (self.secs + RUN_OVERHEAD_SECS)
    }
}

/// Planned overhead of one run (connects, warm-up, stop), for the progress bar.
pub(crate) const RUN_OVERHEAD_SECS: f64 = 0.7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_pick_their_servers() {
        let all = parse_profiles(&["all".into(), "json".into()]).unwrap();
        assert_eq!(all, Profile::ALL);
        let two = parse_profiles(&["Upload".into(), "short-lived".into()]).unwrap();
        assert_eq!(two, [Profile::Upload, Profile::ShortLived]);
        assert!(parse_profiles(&["fortunes".into()]).is_err());
        assert!(parse_profiles(&[]).is_err());
        assert_eq!(
            Profile::Baseline.default_servers(),
            ["hoop", "hoop-epoll", "axum-tokio", "actix"]
        );
        assert_eq!(
            Profile::Static.default_servers(),
            ["hoop", "hoop-nocache", "hoop-epoll", "nginx", "h2o"]
        );
        assert!(Profile::Pipelined.served_by("nginx") && !Profile::Json.served_by("h2o"));
        assert_eq!(Profile::Upload.conns(), [32, 256]);
        let plan = ArenaPlan {
            profiles: vec![Profile::Json, Profile::Upload],
            servers: Some(vec!["hoop".into(), "nginx".into()]),
            conns: None,
            first_conns_only: true,
            secs: 1.0,
            rounds: 1,
            threads: vec![1],
            dir: PathBuf::from("/nonexistent"),
        };
        assert_eq!(plan.servers_of(Profile::Json), ["hoop"]);
        assert_eq!(plan.conns_of(Profile::Upload), [32]);
        assert!((plan.planned_secs() - 2.0 * (1.0 + RUN_OVERHEAD_SECS)).abs() < 1e-9);
        assert!(plan.check().is_ok());
        let quick = ArenaPlan::quick(PathBuf::from("/nonexistent"), false);
        assert_eq!(quick.servers_of(Profile::Static), ["hoop", "nginx"]);
        assert_eq!(quick.servers_of(Profile::Json), ["hoop", "axum-tokio"]);
        // The main job's share stays well under two minutes.
        let with_peers = ArenaPlan::quick(PathBuf::from("/nonexistent"), true);
        assert!(
            with_peers.planned_secs() < 60.0,
            "{}",
            with_peers.planned_secs()
        );
    }
}
