//! The fields several records share: latency percentiles and what the server cost, each one
//! struct that a record flattens into its JSON line.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::measure::latency::{max_us, quantile_us, round3};
use crate::measure::usage::ServerMetrics;

/// Latency percentiles of one run, microseconds (null when nothing was measured).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Latency {
    /// 50th percentile.
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile.
    pub p999_us: Option<f64>,
    /// Largest.
    pub max_us: Option<f64>,
}

impl Latency {
    /// The percentiles of a histogram in nanoseconds.
    pub(crate) fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            p50_us: quantile_us(h, 0.5),
            p99_us: quantile_us(h, 0.99),
            p999_us: quantile_us(h, 0.999),
            max_us: max_us(h),
        }
    }
}

/// What the server cost over a run, measured from outside (null: unknown PID, no perf).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct ServerUse {
    /// Server process CPU time over the window, % of wall time.
    pub server_cpu_pct: Option<f64>,
    /// Server process CPU time per verified request, microseconds.
    pub server_cpu_us_per_req: Option<f64>,
    /// Server syscalls per verified request (perf's raw_syscalls:sys_enter; null without perf).
    pub syscalls_per_req: Option<f64>,
}

impl From<&ServerMetrics> for ServerUse {
    fn from(m: &ServerMetrics) -> ServerUse {
        ServerUse {
            server_cpu_pct: m.cpu_pct,
            server_cpu_us_per_req: m.cpu_us_per_req,
            syscalls_per_req: m.syscalls_per_req,
        }
    }
}

/// A thread's CPU time as % of `wall` (0 for an empty window).
pub(crate) fn cpu_pct(cpu: std::time::Duration, wall: std::time::Duration) -> f64 {
    let wall = wall.as_secs_f64();
    if wall > 0.0 {
        round3(cpu.as_secs_f64() / wall * 100.0)
    } else {
        0.0
    }
}

/// Whether the client, not the server, was the bottleneck: its CPU at 90% of wall time or more
/// while the server's was under 90% (or unknown).
pub(crate) fn client_bound(client_cpu_pct: f64, server_cpu_pct: Option<f64>) -> bool {
    client_cpu_pct >= 90.0 && server_cpu_pct.is_none_or(|s| s < 90.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct R {
        a: u32,
        #[serde(flatten)]
        latency: Latency,
        b: u32,
    }

    #[test]
    fn flattened_fields_keep_their_names_and_place() {
        let r = R {
            a: 1,
            latency: Latency {
                p50_us: Some(1.5),
                ..Latency::default()
            },
            b: 2,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"a":1,"p50_us":1.5,"p99_us":null,"p999_us":null,"max_us":null,"b":2}"#
        );
    }

    #[test]
    fn the_client_is_the_bottleneck_only_when_the_server_is_not() {
        assert!(client_bound(95.0, Some(50.0)));
        assert!(client_bound(95.0, None));
        assert!(!client_bound(95.0, Some(99.0)));
        assert!(!client_bound(50.0, Some(10.0)));
    }
}
