//! The table of `hoop bench http --attack`: every server's figures without and under attack.

use crate::plan::http::label;
use crate::record::attack::AttackResult;

/// The table of every server's figures.
pub(crate) fn attack_table(results: &[AttackResult], notes: &[String]) -> String {
    let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
    let mib =
        |v: Option<u64>| v.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1048576.0));
    let mut s = String::new();
    if let Some(r) = results.first() {
        s.push_str(&format!(
            "\n## Under attack: {} slowloris + {} idle keep-alive connections; legitimate load {} keep-alive connections on {} B, {} s per run\n\n",
            r.slowloris, r.idle, r.legit_conns, r.file_bytes, r.secs
        ));
    }
    s.push_str(&format!(
        "{:<16} {:>10} {:>10} {:>6} {:>8} {:>8} {:>8} {:>7} {:>9} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>9} {:>8}\n",
        "server",
        "req/s",
        "attacked",
        "ratio",
        "p99 ms",
        "p99 att",
        "p99 1st",
        "stalled",
        "fresh max",
        "ovfl",
        "held",
        "closed",
        "RSS MiB",
        "during",
        "after",
        "B/held",
        "CPU ms"
    ));
    for r in results {
        s.push_str(&format!(
            "{:<16} {:>10.0} {:>10.0} {:>6} {:>8} {:>8} {:>8} {:>7} {:>9} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>9} {:>8}\n",
            label(&r.server),
            r.legit_req_per_sec_unattacked,
            r.legit_req_per_sec_attacked,
            f(r.attacked_ratio, 2),
            f(r.p99_ms_unattacked, 2),
            f(r.p99_ms_attacked, 2),
            f(r.p99_ms_first_second, 2),
            if r.stalled { "yes" } else { "no" },
            f(r.fresh_max_ms, 1),
            r.listen_overflows.map_or("-".into(), |n| n.to_string()),
            r.held_connections,
            r.closed_by_server,
            mib(r.rss_bytes_before),
            mib(r.rss_bytes_during),
            mib(r.rss_bytes_after),
            f(r.rss_bytes_per_held_connection, 0),
            f(r.server_cpu_ms_attack_connect, 0),
        ));
    }
    s.push_str(
        "\nreq/s, p99: legitimate verified requests without and under attack (p99 1st: the attacked \
         run's first second); stalled: a second of it with no verified request; fresh max: the \
         slowest new-connection request from the attack's start; ovfl: connections the kernel \
         dropped meanwhile for a full accept queue (the whole machine's count); held: attackers still connected at the end \
         (closed: cut by the server's timeouts); RSS before / during / 2 s after the attackers \
         left; B/held: RSS growth per held connection; CPU ms: the server's CPU while the \
         attackers connected\n",
    );
    for n in notes {
        s.push_str(n);
        s.push('\n');
    }
    s
}
