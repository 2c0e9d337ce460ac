//! Unit tests of the config file: the line computation, the merge on a command of their own
//! (a repeatable flag, counts, aliases, overriding switches), every error, and the sample file
//! (the `hoop` command's own tests give every flag of `hoop serve http` as a key with it).

use super::*;
use clap::Args;

#[test]
fn line_and_column_of_an_offset() {
    let text = "a = 1\nbb = 2\r\n\n  é = x";
    assert_eq!(line_col(text, 0), (1, 1));
    assert_eq!(line_col(text, 4), (1, 5));
    // The newline itself is the last column of its line.
    assert_eq!(line_col(text, 5), (1, 6));
    assert_eq!(line_col(text, 6), (2, 1));
    assert_eq!(line_col(text, 11), (2, 6));
    assert_eq!(line_col(text, 14), (3, 1));
    assert_eq!(line_col(text, 15), (4, 1));
    // Columns count characters: `é` is two bytes, one column.
    assert_eq!(line_col(text, 17), (4, 3));
    assert_eq!(line_col(text, 19), (4, 4));
    // Inside a character, and past the end: clamped.
    assert_eq!(line_col(text, 18), (4, 3));
    assert_eq!(line_col(text, 1000), line_col(text, text.len()));
    assert_eq!(line_col("", 0), (1, 1));
}

/// A command of its own: a required `--req`, a repeatable `--tag`, a switch, a count, a
/// number, and two switches overriding each other, under `top sub`.
fn command() -> Command {
    let sub = ConfigArg::augment_args(Command::new("sub"))
        .arg(Arg::new("req").long("req").required(true))
        .arg(Arg::new("tag").long("tag").action(ArgAction::Append))
        .arg(
            Arg::new("num")
                .long("num")
                .value_parser(clap::value_parser!(u16)),
        )
        .arg(Arg::new("on").long("on").action(ArgAction::SetTrue))
        .arg(
            Arg::new("verbose")
                .long("verbose")
                .alias("loud")
                .action(ArgAction::Count),
        )
        .arg(
            Arg::new("yes")
                .long("yes")
                .action(ArgAction::SetTrue)
                .overrides_with("no"),
        )
        .arg(
            Arg::new("no")
                .long("no")
                .action(ArgAction::SetTrue)
                .overrides_with("yes"),
        )
        .arg(
            Arg::new("listing")
                .long("listing")
                .action(ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .default_value("false")
                .value_parser(clap::value_parser!(bool)),
        );
    Command::new("top").subcommand(sub)
}

/// A switch that takes `=false`: the file sets it with a boolean, the command line turns it
/// off (or on) whatever the file says; anything but a boolean is refused with the line.
#[test]
fn a_toggle_from_the_file_is_turned_off_on_the_command_line() {
    let listing =
        |args: &[&str], file: &str| *parse(args, file).get_one::<bool>("listing").unwrap();
    let base = ["top", "sub", "--config", "f.toml", "--req", "r"];
    assert!(listing(&base, "listing = true"));
    assert!(!listing(&base, "listing = false"));
    assert!(!listing(&base, ""));
    assert!(!listing(
        &[&base[..], &["--listing=false"]].concat(),
        "listing = true"
    ));
    assert!(listing(
        &[&base[..], &["--listing"]].concat(),
        "listing = false"
    ));
    assert!(listing(&[&base[..], &["--listing=true"]].concat(), ""));
    assert_eq!(
        run(&base, "\nlisting = 'yes'").unwrap_err(),
        "f.toml:2: bad value for `listing`: --listing is a switch: true or false, not a string"
    );
}

fn run(args: &[&str], file: &str) -> Result<Vec<String>, String> {
    let argv = args.iter().map(OsString::from).collect();
    let out = apply_with(command(), argv, |p| {
        assert_eq!(p, Path::new("f.toml"));
        Ok(file.to_string())
    })?;
    Ok(out.into_iter().map(|w| w.into_string().unwrap()).collect())
}

/// The sub-matches of the full parse of the merged command line.
fn parse(args: &[&str], file: &str) -> ArgMatches {
    let argv = run(args, file).unwrap();
    let m = command().try_get_matches_from(&argv).unwrap();
    m.subcommand_matches("sub").unwrap().clone()
}

fn tags(m: &ArgMatches) -> Vec<String> {
    m.get_many::<String>("tag")
        .map(|v| v.cloned().collect())
        .unwrap_or_default()
}

#[test]
fn no_config_flag_leaves_the_command_line_alone() {
    let args = ["top", "sub", "--req", "x"];
    assert_eq!(run(&args, "req = 'y'").unwrap(), args);
}

#[test]
fn file_words_go_after_the_subcommand_before_the_flags() {
    let file = "req = 'r'\ntag = ['a', 'b=c']\nnum = 7\non = true\nverbose = 2\nyes = false";
    let out = run(&["top", "sub", "--config", "f.toml"], file).unwrap();
    assert_eq!(
        out,
        [
            "top",
            "sub",
            "--req=r",
            "--tag=a",
            "--tag=b=c",
            "--num=7",
            "--on",
            "--verbose",
            "--verbose",
            "--config",
            "f.toml"
        ]
    );
    let m = parse(&["top", "sub", "--config", "f.toml"], file);
    assert_eq!(m.get_one::<String>("req").unwrap(), "r");
    assert_eq!(tags(&m), ["a", "b=c"]);
    assert_eq!(m.get_one::<u16>("num"), Some(&7));
    assert!(m.get_flag("on"));
    assert_eq!(m.get_count("verbose"), 2);
}

#[test]
fn the_command_line_wins_and_its_list_replaces_the_files() {
    let file = "req = 'r'\ntag = ['a', 'b']\nnum = 7\nno = true";
    let args = [
        "top",
        "sub",
        "--tag",
        "c",
        "--config=f.toml",
        "--num",
        "9",
        "--yes",
    ];
    let m = parse(&args, file);
    assert_eq!(tags(&m), ["c"]);
    assert_eq!(m.get_one::<u16>("num"), Some(&9));
    assert_eq!(m.get_one::<String>("req").unwrap(), "r");
    // `--no` from the file, `--yes` on the command line: the command line's is last.
    assert!(m.get_flag("yes") && !m.get_flag("no"));
    // One value for a repeatable flag, and the file's list without a command-line one.
    let m = parse(
        &["top", "sub", "--config", "f.toml"],
        "tag = 'only'\nreq = 1",
    );
    assert_eq!(tags(&m), ["only"]);
    assert_eq!(m.get_one::<String>("req").unwrap(), "1");
    // A key through an alias; an empty list sets nothing.
    let m = parse(
        &["top", "sub", "--config", "f.toml", "--req", "x"],
        "loud = 3\ntag = []",
    );
    assert_eq!(m.get_count("verbose"), 3);
    assert!(tags(&m).is_empty());
}

#[test]
fn errors_name_the_line() {
    let args = ["top", "sub", "--config", "f.toml"];
    for (file, want) in [
        ("req = 'r'\n\nfoo = 1", "f.toml:3: unknown key `foo`"),
        ("# c\nreq_x = 1\n", "f.toml:2: unknown key `req_x`"),
        (
            "req = 1\n--tag = 'x'",
            "f.toml:2: unknown key `--tag` (did you mean `tag`?)",
        ),
        (
            "num = 1\nreq = 'r'\n\"--num\" = 2",
            "f.toml:3: unknown key `--num` (did you mean `num`?)",
        ),
        (
            "config = 'g.toml'",
            "f.toml:1: unknown key `config` (a config file cannot name another)",
        ),
        (
            "req = 'r'\nnum = 70000",
            "f.toml:2: bad value for `num`: invalid value '70000' for '--num <num>': \
             70000 is not in 0..=65535",
        ),
        (
            "req = 'r'\ntag = [\n  'a',\n  true,\n]",
            "f.toml:4: bad value for `tag`: --tag takes a string or a number, not a boolean",
        ),
        (
            "on = 'yes'",
            "f.toml:1: bad value for `on`: --on takes no value: true or false, not a string",
        ),
        (
            "num = [1, 2]",
            "f.toml:1: bad value for `num`: --num takes one value, not an array",
        ),
        (
            "req = 1979-05-27",
            "f.toml:1: bad value for `req`: --req takes a string or a number, not a date-time",
        ),
        (
            "req = 'r'\n[section]\nnum = 1",
            "f.toml:2: `section` is a table: the file takes `key = value` lines only, no \
             tables or sections",
        ),
        (
            "req = { a = 1 }",
            "f.toml:1: `req` is a table: the file takes `key = value` lines only, no \
             tables or sections",
        ),
        (
            "a.b = 1",
            "f.toml:1: `a` is a table: the file takes `key = value` lines only, no \
             tables or sections",
        ),
        (
            "verbose = 2\nloud = 1",
            "f.toml:2: `loud` sets --verbose again (line 1)",
        ),
        ("req = 'r'\nreq = 's'", "f.toml:2:1: duplicate key"),
        (
            "req = 'r\n",
            "f.toml:1:9: invalid literal string, expected `'`",
        ),
    ] {
        let err = run(&args, file).unwrap_err();
        assert_eq!(err, want, "{file:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // A key a flag on the command line overrides is checked all the same.
    let err = run(
        &["top", "sub", "--num", "1", "--config", "f.toml"],
        "num = 'x'",
    );
    assert!(err
        .unwrap_err()
        .starts_with("f.toml:1: bad value for `num`"));
}

#[test]
fn snake_case_keys_get_the_kebab_case_flag() {
    let cmd = Command::new("top").subcommand(
        ConfigArg::augment_args(Command::new("sub"))
            .arg(Arg::new("cache_bytes").long("cache-bytes")),
    );
    let argv = ["top", "sub", "--config", "f.toml"]
        .map(OsString::from)
        .to_vec();
    let err = apply_with(cmd, argv, |_| Ok("\ncache_bytes = 5".into())).unwrap_err();
    assert_eq!(
        err,
        "f.toml:2: unknown key `cache_bytes` (did you mean `cache-bytes`?)"
    );
}

#[test]
fn a_bad_command_line_is_left_to_the_real_parse() {
    // An unknown flag, --help: the first parse fails and the file is not read.
    for args in [
        &["top", "sub", "--config", "f.toml", "--bogus"][..],
        &["top", "sub", "--config", "f.toml", "--help"],
    ] {
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        let out = apply_with(command(), argv.clone(), |_| panic!("read")).unwrap();
        assert_eq!(out, argv);
    }
    // A file that cannot be read: its line.
    let argv = ["top", "sub", "--config", "f.toml"]
        .map(OsString::from)
        .to_vec();
    let err = apply_with(command(), argv, |_| Err("f.toml: gone".into())).unwrap_err();
    assert_eq!(err, "f.toml: gone");
}

/// The sample file sets every flag it can derive a value for, and the merged command line
/// parses with each of them given.
#[test]
fn sample_file_sets_every_flag() {
    let sub = command().find_subcommand("sub").expect("sub").clone();
    let (file, set) = sample_file(&sub, &[("req", "r")]).unwrap();
    assert!(file.contains("req = \"r\"\n"), "{file}");
    assert!(file.contains("on = true\n"), "{file}");
    assert!(!file.contains("config"), "{file}");
    let argv = ["top", "sub", "--config", "f.toml"]
        .map(OsString::from)
        .to_vec();
    let argv = apply_with(command(), argv, |_| Ok(file.clone())).unwrap();
    let m = command().try_get_matches_from(&argv).unwrap();
    let m = m.subcommand_matches("sub").unwrap();
    for (id, switch) in set {
        if !switch {
            assert_eq!(
                m.value_source(id.as_str()),
                Some(ValueSource::CommandLine),
                "{id}"
            );
        }
    }
    let no_help = Command::new("x").arg(Arg::new("h").long("h").action(ArgAction::Help));
    assert_eq!(
        sample_file(&no_help, &[]).unwrap_err(),
        "--h: a file cannot set it"
    );
}
