//! `hoop bench http --profile LIST`: HttpArena's profiles side by side, from the flags to the
//! printed tables and the exit status.

use std::io;

use crate::compare::http::arena::{pinning_note, run_profiles};
use crate::output::Out;
use crate::plan::arena::{parse_profiles, ArenaPlan};
use crate::plan::http::HttpPlan;
use crate::plan::{check_secs, invalid};
use crate::report::arena::profile_tables;

/// Most rounds of a profile run.
const MAX_ROUNDS: u32 = 100;

/// The profile plan of `hoop bench http`'s flags: `--profile`, `--servers`, `-c`, `-t`
/// (default 2 s), `--rounds` (default 3), `--dir`; the flags of the other modes are refused.
pub(crate) fn arena_plan(args: &HttpPlan) -> io::Result<ArenaPlan> {
    let names = args.profiles.as_deref().unwrap_or(&[]);
    let profiles = parse_profiles(names)?;
    let other = [
        (args.url.is_some(), "--url"),
        (args.attack, "--attack"),
        (args.cells.is_some(), "--cells"),
        (args.full, "--full"),
        (args.close, "--close"),
        (args.pipeline != 1, "--pipeline"),
        (args.wrk, "--wrk"),
        (args.verify.is_some(), "--verify"),
        (args.server_pid.is_some(), "--server-pid"),
        (args.netns_mtu.is_some(), "--netns-mtu"),
    ];
    if let Some((_, flag)) = other.iter().find(|(given, _)| *given) {
        return Err(invalid(format!(
            "{flag} does not go with --profile (each profile fixes its own requests)"
        )));
    }
    let rounds = args.rounds.unwrap_or(3);
    if rounds == 0 || rounds > MAX_ROUNDS {
        return Err(invalid(format!(
            "--rounds must be between 1 and {MAX_ROUNDS} with --profile (got {rounds})"
        )));
    }
    let secs = args.secs.unwrap_or(2.0);
    check_secs("-t/--secs", secs)?;
    let plan = ArenaPlan {
        profiles,
        servers: args.servers.clone(),
        conns: args.conns,
        first_conns_only: false,
        secs,
        rounds,
        threads: vec![1, 2],
        dir: args
            .dir
            .clone()
            .unwrap_or_else(|| crate::machine::default_out_dir().join("http")),
    };
    plan.check()?;
    Ok(plan)
}

/// Runs the profiles: the machine and pinning lines, a JSON line per run (`json`), a table per
/// profile, and the exit status.
pub(crate) fn run_profiles_command(args: &HttpPlan, json: bool) -> io::Result<()> {
    let plan = arena_plan(args)?;
    let out = Out::new(json, plan.planned_secs());
    out.human(&pinning_note(&plan));
    let outcome = run_profiles(&plan, &out);
    out.finish();
    out.human(&format!(
        "\n## HttpArena profiles ({} s per run, {} round(s), servers in alternating order, \
         medians; every answer verified)\n\n{}",
        plan.secs,
        plan.rounds,
        profile_tables(&outcome.results, &outcome.notes)
    ));
    outcome.status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_flags_default_and_refuse_the_other_modes() {
        let args = HttpPlan {
            profiles: Some(vec!["baseline".into(), "upload".into()]),
            pipeline: 1,
            ..HttpPlan::default()
        };
        let plan = arena_plan(&args).unwrap();
        assert_eq!((plan.rounds, plan.secs), (3, 2.0));
        assert_eq!(plan.threads, [1, 2]);
        let full = HttpPlan {
            full: true,
            ..args.clone()
        };
        assert!(arena_plan(&full)
            .unwrap_err()
            .to_string()
            .contains("--full"));
        let bad = HttpPlan {
            servers: Some(vec!["caddy".into()]),
            ..args
        };
        assert!(arena_plan(&bad).is_err());
    }
}
