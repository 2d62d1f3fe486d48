//! The command line, the one place that sees clap (a contract,
//! docs/DESIGN.md §5c: add flags, never rename them): no command runs the
//! main job with [`job::JobArgs`], `serve` the HTTP gateway with
//! [`serve::ServeArgs`], `rewrap` a store's move to another root with
//! [`rewrap::RewrapArgs`]; each turns into its typed configuration
//! (`config.rs`) in one function, `ServeArgs::config`, which makes every
//! cross-flag check and decides its exit code. `serve --config
//! FILE` reads its keys through the same parser (`config_file.rs`). Usage
//! errors exit 2 and `--help` 0, both through clap.

mod config_file;
mod etcd;
pub(crate) mod job;
mod rewrap;
mod root;
mod seconds;
pub(crate) mod serve;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::{ConfigError, JobConfig, RewrapConfig, ServeConfig};

/// The whole command line.
#[derive(Parser)]
#[command(
    name = "kms-gateway",
    version,
    about = "The KMS gateway: the main job (no command) or `serve`, an HTTP gateway.",
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) job: job::JobArgs,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve HTTP until SIGINT or SIGTERM: the public face (JWKS, /whoami,
    /// /healthz) and the admin face (POST /tokens, POST /keys/rotate,
    /// GET /metrics).
    Serve(Box<serve::ServeArgs>),
    /// Move a durable store to another root of trust: the same master
    /// key, unwrapped by the current root (--master-key-file,
    /// --master-key-pkcs11 or --master-key-aws-kms) and wrapped anew by the
    /// new one (--to-master-key-file, --to-master-key-pkcs11 or
    /// --to-master-key-aws-kms), atomically; a store (--store) must not be
    /// in use, a fleet (--etcd) is moved in one transaction.
    Rewrap(Box<rewrap::RewrapArgs>),
}

/// What to run, configured.
pub(crate) enum Program {
    /// The main job (no command).
    Job(JobConfig),
    /// `serve` (boxed: many times the main job's size).
    Serve(Box<ServeConfig>),
    /// `rewrap`.
    Rewrap(RewrapConfig),
}

/// The command line, parsed ([`parse`]) and configured: exits 2 on a usage
/// error (clap's, or a cross-flag check's) and 0 for `--help` and
/// `--version`.
///
/// # Errors
/// The two checks of the flags alone that exit 1
/// ([`ConfigError::Start`]), as their message.
pub(crate) fn configure() -> Result<Program, String> {
    let cli = parse();
    match cli.command {
        None => Ok(Program::Job(cli.job.config())),
        Some(Command::Serve(args)) => match args.config() {
            Ok(config) => Ok(Program::Serve(Box::new(config))),
            Err(ConfigError::Usage(message)) => Cli::command()
                .error(ErrorKind::ArgumentConflict, message)
                .exit(),
            Err(ConfigError::Start(message)) => Err(message),
        },
        Some(Command::Rewrap(args)) => match args.config() {
            Ok(config) => Ok(Program::Rewrap(config)),
            Err(message) => Cli::command()
                .error(ErrorKind::MissingRequiredArgument, message)
                .exit(),
        },
    }
}

/// The command line, with `serve --config FILE`'s keys put before the
/// command line's own flags (`config_file.rs`); exits 2 on a usage error
/// (naming the file, line and column when it is the file's) and 0 for
/// `--help` and `--version`.
fn parse() -> Cli {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let mut command = Cli::command();
    let matches = match command.clone().try_get_matches_from(&argv) {
        Ok(matches) => matches,
        // A flag may need another that only the file gives
        // (--strip-authorization needs --upstream): find --config leniently, and let the parse of
        // the whole below judge.
        Err(e) => match command
            .clone()
            .ignore_errors(true)
            .try_get_matches_from(&argv)
        {
            Ok(lenient) if config_of(&lenient).is_some() => lenient,
            _ => e.exit(),
        },
    };
    let (Some((path, given)), Some(serve)) =
        (config_of(&matches), command.find_subcommand("serve"))
    else {
        return Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    };
    let (file_args, origins) = match config_file::arguments(path, serve, given) {
        Ok(found) => found,
        Err(message) => command.error(ErrorKind::InvalidValue, message).exit(),
    };
    // [program, "serve", the file's flags, the command line's after serve]
    let at = argv.iter().position(|a| a == "serve").unwrap_or(1);
    let mut all = argv[..=at].to_vec();
    all.extend(file_args);
    all.extend(argv[at + 1..].iter().cloned());
    match Cli::try_parse_from(all) {
        Ok(cli) => cli,
        Err(e) => {
            // A value of the file's refused by its flag: say where it is.
            let flag = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(arg)) => arg
                    .trim_start_matches('-')
                    .split([' ', '='])
                    .next()
                    .map(str::to_owned),
                _ => None,
            };
            match flag.and_then(|flag| origins.get(&flag)) {
                Some((line, col)) => {
                    let text = e.to_string();
                    let first = text.lines().next().unwrap_or_default();
                    let message = first.trim_start_matches("error: ");
                    command
                        .error(
                            e.kind(),
                            format!("{}:{line}:{col}: {message}", path.display()),
                        )
                        .exit()
                }
                None => e.exit(),
            }
        }
    }
}

/// `serve --config`'s path, if given, and `serve`'s matches.
fn config_of(matches: &clap::ArgMatches) -> Option<(&PathBuf, &clap::ArgMatches)> {
    match matches.subcommand() {
        Some(("serve", serve)) => serve.get_one::<PathBuf>("config").map(|path| (path, serve)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serve`'s flags as given, configured.
    fn serve(flags: &[&str]) -> Result<ServeConfig, ConfigError> {
        let argv = ["kms-gateway", "serve"].iter().chain(flags);
        match Cli::try_parse_from(argv).expect("the flags parse").command {
            Some(Command::Serve(args)) => args.config(),
            _ => panic!("not serve"),
        }
    }

    #[test]
    fn serve_with_no_flags_is_the_default_configuration() {
        // The main job's HTTP phase serves `ServeConfig::default()`: it must
        // be what `kms-gateway serve` runs with.
        let parsed = serve(&[]).expect("the defaults pass every check");
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", ServeConfig::default())
        );
    }

    #[test]
    fn each_check_of_the_flags_alone_declares_its_exit_code() {
        // The exit a refusal must take: its variant of `ConfigError`.
        type Exit = fn(String) -> ConfigError;
        let (usage, start): (Exit, Exit) = (ConfigError::Usage, ConfigError::Start);
        for (flags, exit, says) in [
            (&["--key", "gateway"][..], usage, "expected TENANT:PURPOSE"),
            (
                &["--token-cache", "10", "--token-cache-bytes", "9"],
                usage,
                "--token-cache-bytes 9",
            ),
            (
                &["--audience", "a", "--token-audience", "b"],
                usage,
                "--audience",
            ),
            (&["--issuer", "http://idp.example"], usage, "--issuer"),
            (
                &["--claim-header", "sub=X-A", "--claim-header", "iss=X-A"],
                usage,
                "x-a",
            ),
            (
                &["--admin-listen", "192.0.2.1:8081"],
                start,
                "not a loopback address",
            ),
            (
                &[
                    "--admin-listen",
                    "0.0.0.0:8081",
                    "--admin-token-file",
                    "/nonexistent",
                ],
                start,
                "--admin-host",
            ),
        ] {
            let refused = serve(flags).expect_err("refused");
            let message = match &refused {
                ConfigError::Usage(m) | ConfigError::Start(m) => m.clone(),
            };
            assert_eq!(refused, exit(message.clone()), "{flags:?}");
            assert!(message.contains(says), "{flags:?}: {message}");
        }
    }
}
