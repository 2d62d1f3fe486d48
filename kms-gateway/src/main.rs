//! `kms-gateway`: the main job, and `serve`, an HTTP gateway on the KMS.
//!
//! ```text
//! kms-gateway [--clients N] [--duration SECS]
//!     [--invalid-share F] [--keys N] [--metrics-addr HOST:PORT]
//! kms-gateway serve [--listen ADDR]
//!     [--admin-listen ADDR] [--admin-token-file FILE] [--trust-jwks FILE]...
//!     [--store DIR | --etcd URL[,URL...] [--etcd-prefix P]]
//!     [--master-key-file FILE | --master-key-pkcs11 M ... | --master-key-aws-kms KEY ...]
//!     [--key TENANT:PURPOSE] [--alg EdDSA|Ed25519]
//! kms-gateway rewrap (--store DIR | --etcd URL[,URL...] ...)
//!     (--master-key-file F | --master-key-pkcs11 M ... | --master-key-aws-kms KEY ...)
//!     (--to-master-key-file F | --to-master-key-pkcs11 M ... | --to-master-key-aws-kms KEY ...)
//! ```
//!
//! `cargo install --path kms-gateway` installs it (`--features etcd` for
//! `serve --etcd`); `cargo run --release -p kms-gateway` runs the main job
//! from the repository.
//!
//! With no command, the main job (`job/`): a bus and a KMS actor over an
//! in-memory keystore, metrics as Prometheus text at
//! `http://127.0.0.1:9600/metrics` while it runs, `--keys` signing keys
//! created through the actor, and `--clients` concurrent client tasks that
//! verify through the actor
//! * first, every vector of the repository's `testdata/` (sign.input,
//!   Wycheproof, RFC 8032, speccheck, CCTV, ZIP-215), embedded in the
//!   binary (`job/vectors.rs`), with the verdict `expected_verdicts.tsv`
//!   requires, by raw public key (`job/workload.rs`), and
//! * then, for `--duration` seconds, tokens signed by the keystore and
//!   verified by key id (half of the keys are rotated after signing, so
//!   those tokens verify under a version that is no longer the head), of
//!   which a share `--invalid-share` is forged and must be rejected.
//!
//! A live line shows throughput, p99 latency and mean batch size over the
//! last half second. It reports (`job/report.rs`) (requests, verdicts against expectation,
//! throughput, latency p50/p99, mean batch size, requests verified on their
//! caller's task), then runs the HTTP phase (`job/http_phase.rs`): the public
//! face of `gateway serve` on an ephemeral loopback port, `--clients`
//! keep-alive HTTP/1.1 connections sending real tokens of eight kinds for
//! `--duration` seconds, every status checked, and a second report. It
//! exits 1 if any verdict or status differs from its expectation.
//! Defaults: 256 clients, 3 s, 5 % forged, 8 keys; nothing to set up.
//!
//! `serve` (`serve/`) serves HTTP until SIGINT or SIGTERM: a public face
//! (`serve/public.rs`: JWKS, `/whoami` behind the bearer layer, `/healthz`) and
//! an admin face (token issuance, rotation, key policy, metrics), over
//! keys in memory, in a durable store or on etcd (`serve/store.rs`), with
//! its secrets read from files (`serve/secrets.rs`).
//!
//! The command line (`args/`, the one place that sees clap) is a contract
//! (docs/DESIGN.md §5c): every subcommand, flag, route and exit code keeps
//! its name and meaning. It becomes a typed configuration (`config.rs`),
//! built and checked once, whose pieces go each to its subsystem.
//!
//! Events go to stderr through a `tracing` subscriber filtered by
//! `RUST_LOG` (default `warn`; `logging.rs`); metrics are Prometheus text
//! (`telemetry.rs`).
//!
//! Exit codes: 0 success (and `--help`), 1 a wrong verdict or a start-up
//! error, 2 a usage error (`--version` exits 0 too).

#![forbid(unsafe_code)]

mod args;
mod config;
mod files;
mod job;
mod logging;
mod rewrap;
mod roots;
mod serve;
mod telemetry;
mod timestamp;

use std::process::ExitCode;

/// mimalloc, not the system allocator: the request path allocates on the
/// tokio workers and frees on the verify pool's threads, which glibc's
/// malloc serialises on its arenas' locks (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use args::Program;

fn main() -> ExitCode {
    // Usage errors exit 2 and `--help` 0, both by clap; the two checks of
    // the flags alone that exit 1 come back here.
    let program = match args::configure() {
        Ok(program) => program,
        Err(message) => {
            eprintln!("gateway serve: {message}");
            return ExitCode::from(1);
        }
    };
    match &program {
        Program::Serve(config) => logging::install(true, config.logs.format),
        Program::Job(_) | Program::Rewrap(_) => logging::install(false, logging::LogFormat::Text),
    }
    // The process's one rustls crypto provider, explicitly (the faces'
    // TLS, TLS to etcd; an error means one is installed already, which can
    // only be this).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gateway: cannot start tokio: {e}");
            return ExitCode::from(1);
        }
    };
    match program {
        Program::Serve(config) => match runtime.block_on(serve::run(*config)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                // In the chosen --log-format, as every other line.
                logging::say(logging::Level::Error, format_args!("gateway serve: {e}"));
                ExitCode::from(1)
            }
        },
        // On this thread, outside the runtime: the store's and the token's
        // calls block.
        Program::Rewrap(config) => match rewrap::run(&config) {
            Ok(done) => {
                eprintln!("{done}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gateway rewrap: {e}");
                ExitCode::from(1)
            }
        },
        Program::Job(config) => match runtime.block_on(job::run(&config)) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("gateway: {e}");
                ExitCode::from(1)
            }
        },
    }
}
