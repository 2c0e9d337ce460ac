//! `--config FILE`: a command's flags from a TOML file, for any command that flattens
//! [`ConfigArg`] (in the `hoop` command: `hoop serve http`, `echo` and `fanout`).
//!
//! The file is read before clap parses the command line for real, and turned into the words of
//! the flags it sets, placed right after the subcommand's name and before the command line's
//! own flags. Nothing here names a flag: the keys, whether each flag takes a value, is a switch
//! or may be repeated, and the checks of its values all come from the clap definition of the
//! command, so a flag added to the command is a key of the file with no code here.
//!
//! The rules, kept in `--help` (the doc comment of [`ConfigArg`]) and README's "Config file":
//! - a key is a flag's long name without the dashes, as written on the command line
//!   (`header-timeout-ms = 5000`); `config` is not a key; no tables or sections;
//! - a string, integer or float value becomes the text the flag would get (`--key=TEXT`), and
//!   that text is checked by the flag's own value parser, so a value is refused exactly as on the
//!   command line; a flag without a value takes `true` (given) or `false` (not given); a
//!   repeatable flag takes an array (or one value);
//! - a flag given on the command line wins over the same key in the file (for a repeatable flag,
//!   the command line's list replaces the file's): the file's words for that key are left out,
//!   which [`ArgMatches::value_source`] tells exactly (a default is not a given flag);
//! - an error names the file and the line (and column, for TOML syntax) in one line.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// The long name of the flag that names the file (not a key of the file itself).
const FLAG: &str = "config";

/// The clap id of that flag: a command has a config file when it has an argument of this id
/// (a `--config` of another meaning elsewhere is left alone).
const ID: &str = "hoop-config-file";

/// `--config FILE`, flattened into the arguments of a command that takes a config file.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArg {
    /// Read flags from a TOML file of `key = value` lines; flags given here win over it.
    ///
    /// Keys: the long names of the flags without their dashes, as written on the command line
    /// (`header-timeout-ms = 5000`; `root = "/srv/www"` gives the required --root); not
    /// `config`; no tables or sections.
    ///
    /// Values: a string, an integer or a float for a flag that takes a value, checked as that
    /// text on the command line would be (`cache-bytes = "256M"`); `true` (given) or `false`
    /// (not given) for a flag without a value (`access-log = true`; `--access-log=false` on
    /// the command line turns off what the file turned on); an array (or one value)
    /// for a flag that can be repeated. Paths are relative to the working directory, as on the
    /// command line.
    ///
    /// A flag given on the command line wins over its key in the file; for a repeatable flag,
    /// the command line's list replaces the file's. An unknown key, a value of the wrong type
    /// or a value the flag refuses stops the command with the file's name and line.
    #[arg(id = ID, long = FLAG, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The command line `argv` (program name first) with the flags of the config file given by
/// `--config FILE` put in, for [`clap::Parser::try_parse_from`]: `argv` itself when no
/// subcommand of `root` that takes `--config` is given one, or when the command line has an
/// error of its own (which the real parse then reports). `Err` is the one line to print after
/// `hoop: `.
pub fn apply(root: Command, argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    apply_with(root, argv, |path| {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    })
}

/// [`apply`], with `read` giving the text of the file (or the error line): for a caller (or a
/// test) that has the text at hand.
pub fn apply_with(
    root: Command,
    argv: Vec<OsString>,
    read: impl FnOnce(&Path) -> Result<String, String>,
) -> Result<Vec<OsString>, String> {
    // Most command lines name no file: no second parse for them.
    let long = format!("--{FLAG}");
    let names_file = argv.iter().skip(1).any(|w| {
        w.to_str()
            .is_some_and(|w| w == long || w.starts_with(&format!("{long}=")))
    });
    if !names_file {
        return Ok(argv);
    }
    // A first parse with nothing required (`--root` may come from the file): which
    // subcommand, which file, and which flags the command line gives.
    let relaxed = relax(root);
    let Ok(matches) = relaxed.clone().try_get_matches_from(&argv) else {
        return Ok(argv);
    };
    let mut cmd = &relaxed;
    let mut m = &matches;
    let mut path = Vec::new();
    let file = loop {
        if let Some(file) = config_given(cmd, m) {
            break file;
        }
        let Some((name, sub)) = m.subcommand() else {
            return Ok(argv);
        };
        let Some(sub_cmd) = cmd.find_subcommand(name) else {
            return Ok(argv);
        };
        cmd = sub_cmd;
        m = sub;
        path.push(cmd);
    };
    let text = read(&file)?;
    let words = file_words(cmd, m, &file.display().to_string(), &text)?;
    let at = after_subcommands(&argv, &path).ok_or_else(|| {
        format!(
            "{}: cannot place its flags on the command line",
            file.display()
        )
    })?;
    let mut out = argv;
    out.splice(at..at, words);
    Ok(out)
}

/// `cmd` and all its subcommands with no argument required.
fn relax(cmd: Command) -> Command {
    cmd.mut_args(|a| a.required(false)).mut_subcommands(relax)
}

/// The file `--config` names on the command line of `cmd`, if `cmd` has that flag
/// ([`ConfigArg`]).
fn config_given(cmd: &Command, m: &ArgMatches) -> Option<PathBuf> {
    cmd.get_arguments().find(|a| a.get_id() == ID)?;
    if m.value_source(ID) != Some(ValueSource::CommandLine) {
        return None;
    }
    let mut raw = m.try_get_raw(ID).ok()??;
    raw.next().map(PathBuf::from)
}

/// The index in `argv` right after the names of the subcommands `path` (outermost first):
/// where the file's words go, so that the command line's own flags come after them (of two
/// flags overriding each other, the last one wins: the command line's).
fn after_subcommands(argv: &[OsString], path: &[&Command]) -> Option<usize> {
    let mut at = 1;
    for sub in path {
        let found = argv[at..].iter().position(|w| {
            w.to_str().is_some_and(|w| {
                w == sub.get_name() || sub.get_all_aliases().any(|alias| alias == w)
            })
        })?;
        at += found + 1;
    }
    Some(at)
}

/// How a flag reads its value from the file, from its clap action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `--key=TEXT` once (`ArgAction::Set`).
    One,
    /// `--key=TEXT` for each value of an array (`ArgAction::Append`).
    Many,
    /// `--key` when `true` (`ArgAction::SetTrue`, `SetFalse`).
    Switch,
    /// `--key=true` or `--key=false`: a switch that also takes `=false` on the command line
    /// (`ArgAction::Set` with an optional value, see [`is_toggle`]).
    Toggle,
    /// `--key` N times (`ArgAction::Count`).
    Count,
}

fn kind(arg: &Arg) -> Option<Kind> {
    match arg.get_action() {
        ArgAction::Set if is_toggle(arg) => Some(Kind::Toggle),
        ArgAction::Set => Some(Kind::One),
        ArgAction::Append => Some(Kind::Many),
        ArgAction::SetTrue | ArgAction::SetFalse => Some(Kind::Switch),
        ArgAction::Count => Some(Kind::Count),
        // Help and version are not settings.
        _ => None,
    }
}

/// Whether `arg` is a switch that takes an optional `=true`/`=false` (so that the command line
/// can turn off what a file turned on): a value that may be left out, of `true` or `false`.
fn is_toggle(arg: &Arg) -> bool {
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .map(|v| v.get_name().to_string())
        .collect();
    arg.get_num_args().is_some_and(|n| n.min_values() == 0) && values == ["true", "false"]
}

/// The flags of `cmd` a file may set, with their keys: every flag with a long name (and its
/// aliases), but `--config` and help/version.
fn keyed_args(cmd: &Command) -> Vec<(&str, &Arg, Kind)> {
    let mut keys = Vec::new();
    for arg in cmd.get_arguments() {
        let (Some(long), Some(kind)) = (arg.get_long(), kind(arg)) else {
            continue;
        };
        if arg.get_id() == ID {
            continue;
        }
        keys.push((long, arg, kind));
        for alias in arg.get_all_aliases().unwrap_or_default() {
            keys.push((alias, arg, kind));
        }
    }
    keys
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The words the file `text` (named `origin` in errors) adds to the command line of `cmd`,
/// whose first parse is `given`: in the file's order, without the flags the command line gives.
fn file_words(
    cmd: &Command,
    given: &ArgMatches,
    origin: &str,
    text: &str,
) -> Result<Vec<OsString>, String> {
    let table = DeTable::parse(text).map_err(|e| {
        let msg = one_line(e.message());
        match e.span() {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                format!("{origin}:{line}:{col}: {msg}")
            }
            None => format!("{origin}: {msg}"),
        }
    })?;
    let at = |offset: usize| format!("{origin}:{}", line_col(text, offset).0);
    let keys = keyed_args(cmd);
    let mut entries: Vec<_> = table.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let mut seen: Vec<(&clap::Id, usize)> = Vec::new();
    let mut words = Vec::new();
    for (key, value) in entries {
        let name: &str = key.get_ref();
        let here = at(key.span().start);
        if is_table(value.get_ref()) {
            return Err(format!(
                "{here}: `{name}` is a table: the file takes `key = value` lines only, no \
                 tables or sections"
            ));
        }
        let Some(&(_, arg, kind)) = keys.iter().find(|(k, ..)| *k == name) else {
            return Err(format!("{here}: {}", unknown(name, &keys)));
        };
        let line = line_col(text, key.span().start).0;
        if let Some((_, first)) = seen.iter().find(|(id, _)| *id == arg.get_id()) {
            return Err(format!(
                "{here}: `{name}` sets --{} again (line {first})",
                arg.get_long().unwrap_or(name)
            ));
        }
        seen.push((arg.get_id(), line));
        let long = arg.get_long().unwrap_or(name);
        let key_words = words_of(cmd, long, kind, value, &|offset| at(offset), name)?;
        // The command line's flag wins (its whole list, for a repeatable one); the file's
        // value was checked all the same: a file is refused for a bad line whatever the
        // command line says.
        if given.value_source(arg.get_id().as_str()) != Some(ValueSource::CommandLine) {
            words.extend(key_words);
        }
    }
    Ok(words)
}

/// Whether `v` is a table or an array of tables (`[name]`, `name = {..}`, `[[name]]`).
fn is_table(v: &DeValue<'_>) -> bool {
    match v {
        DeValue::Table(_) => true,
        DeValue::Array(a) => !a.is_empty() && a.iter().all(|e| e.get_ref().is_table()),
        _ => false,
    }
}

/// "unknown key `NAME`", with the key meant when NAME is a flag's in snake_case or with its
/// dashes.
fn unknown(name: &str, keys: &[(&str, &Arg, Kind)]) -> String {
    if name == FLAG {
        return format!("unknown key `{FLAG}` (a config file cannot name another)");
    }
    let meant = name.trim_start_matches('-').replace('_', "-");
    match keys.iter().find(|(k, ..)| *k == meant) {
        Some((k, ..)) => format!("unknown key `{name}` (did you mean `{k}`?)"),
        None => format!("unknown key `{name}`"),
    }
}

/// The words of one key: `--long=TEXT` for each value, `--long` for a switch set to `true`,
/// each value checked by the flag's own parser.
fn words_of(
    cmd: &Command,
    long: &str,
    kind: Kind,
    value: &Spanned<DeValue<'_>>,
    at: &dyn Fn(usize) -> String,
    name: &str,
) -> Result<Vec<OsString>, String> {
    let bad = |span_start: usize, why: String| {
        format!("{}: bad value for `{name}`: {why}", at(span_start))
    };
    let start = value.span().start;
    let v = value.get_ref();
    match kind {
        Kind::Switch => match v {
            DeValue::Boolean(true) => Ok(vec![format!("--{long}").into()]),
            DeValue::Boolean(false) => Ok(Vec::new()),
            v => Err(bad(
                start,
                format!("--{long} takes no value: true or false, not {}", a_type(v)),
            )),
        },
        Kind::Toggle => match v {
            DeValue::Boolean(b) => Ok(vec![format!("--{long}={b}").into()]),
            v => Err(bad(
                start,
                format!("--{long} is a switch: true or false, not {}", a_type(v)),
            )),
        },
        Kind::Count => match v {
            DeValue::Integer(i) => {
                let n = i128::from_str_radix(i.as_str(), i.radix())
                    .ok()
                    .filter(|n| (0..=255).contains(n))
                    .ok_or_else(|| {
                        bad(start, format!("--{long} counts 0 to 255 times, not {i}"))
                    })?;
                Ok(vec![format!("--{long}").into(); n as usize])
            }
            v => Err(bad(
                start,
                format!("--{long} is counted: an integer, not {}", a_type(v)),
            )),
        },
        Kind::One => {
            if let DeValue::Array(_) = v {
                return Err(bad(
                    start,
                    format!("--{long} takes one value, not an array"),
                ));
            }
            let word = word(long, v).map_err(|why| bad(start, why))?;
            check(cmd, &word).map_err(|why| bad(start, why))?;
            Ok(vec![word])
        }
        Kind::Many => {
            let items: Vec<&Spanned<DeValue<'_>>> = match v {
                DeValue::Array(a) => a.iter().collect(),
                _ => vec![value],
            };
            let mut words = Vec::with_capacity(items.len());
            for item in items {
                let start = item.span().start;
                let word = word(long, item.get_ref()).map_err(|why| bad(start, why))?;
                check(cmd, &word).map_err(|why| bad(start, why))?;
                words.push(word);
            }
            Ok(words)
        }
    }
}

/// `--long=TEXT` for a string, integer or float: the text the flag would get on the command
/// line (an integer in decimal, a float as written).
fn word(long: &str, v: &DeValue<'_>) -> Result<OsString, String> {
    let text = match v {
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .map(|n| n.to_string())
            .unwrap_or_else(|_| i.to_string()),
        DeValue::Float(f) => f.as_str().to_string(),
        v => {
            return Err(format!(
                "--{long} takes a string or a number, not {}",
                a_type(v)
            ))
        }
    };
    Ok(format!("--{long}={text}").into())
}

/// "a string", "an array"...: the TOML type of `v`, for messages.
fn a_type(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Parses `word` alone with `cmd` (nothing required), so that its value meets the flag's own
/// value parser, as on the command line; `Err` is clap's reason in one line. Errors that are
/// about other flags (one this flag requires or conflicts with) are left to the real parse.
fn check(cmd: &Command, word: &OsStr) -> Result<(), String> {
    use clap::error::ErrorKind;
    match cmd
        .clone()
        .no_binary_name(true)
        .try_get_matches_from([word])
    {
        Ok(_) => Ok(()),
        Err(e) => match e.kind() {
            ErrorKind::MissingRequiredArgument
            | ErrorKind::ArgumentConflict
            | ErrorKind::MissingSubcommand
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => Ok(()),
            _ => Err(clap_reason(&e)),
        },
    }
}

/// clap's message for `e` in one line, as `hoop` prints its other usage errors: the text up
/// to the first blank line or `Usage:`, without the `error: ` prefix.
fn clap_reason(e: &clap::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    lines.join(" ").trim_start_matches("error: ").to_string()
}

/// A message that may run over several lines, in one.
fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A config file that sets every key of `cmd` (a command that flattens [`ConfigArg`]) to a
/// value its flag accepts: its default, else the value `given` for it, else its first possible
/// value (a switch `true`, a count `1`); a flag with none of these is left out. Returned with
/// the id of each flag it sets and whether that flag is a switch. For a test that every flag
/// of a command, present and future, is a key: `Err` names a flag a file cannot set.
pub fn sample_file(
    cmd: &Command,
    given: &[(&str, &str)],
) -> Result<(String, Vec<(clap::Id, bool)>), String> {
    let mut file = String::new();
    let mut set = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if arg.get_id() == ID {
            continue;
        }
        let kind = kind(arg).ok_or_else(|| format!("--{long}: a file cannot set it"))?;
        let value = match kind {
            Kind::Switch | Kind::Toggle => "true".to_string(),
            Kind::Count => "1".to_string(),
            Kind::One | Kind::Many => {
                let given = given.iter().find(|(k, _)| *k == long).map(|(_, v)| *v);
                let text = match (arg.get_default_values().first(), given) {
                    (Some(v), _) => v.to_string_lossy().into_owned(),
                    (None, Some(v)) => v.to_string(),
                    (None, None) => match arg.get_possible_values().first() {
                        Some(v) => v.get_name().to_string(),
                        // Nothing to derive a valid value from.
                        None => continue,
                    },
                };
                format!("{text:?}")
            }
        };
        file.push_str(&format!("{long} = {value}\n"));
        set.push((arg.get_id().clone(), kind == Kind::Switch));
    }
    Ok((file, set))
}

#[cfg(test)]
mod tests;
