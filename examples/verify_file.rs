//! Verifies every case of a vector file and prints one verdict per case.
//!
//! ```text
//! cargo run --release --example verify_file -- [--single] [--expect] [--verdicts TSV] FILE
//! ```
//!
//! FILE is a sign.input-format file (optionally gzipped) or a Wycheproof
//! EdDSA JSON file (the other vector formats in `testdata/` are recognised
//! too). Output: one `<id>\t<valid|invalid>` line per case on stdout (id:
//! 1-based line number for sign.input, `tcId` for Wycheproof), a summary on
//! stderr.
//!
//! * default: every case goes over the bus to the KMS actor, which verifies
//!   them in batches;
//! * `--single`: each case goes through `kms_core::ed25519::verify`, one at
//!   a time, without the actor;
//! * `--expect`: exit 1 if any verdict differs from the file's own
//!   expectation (sign.input: all valid; Wycheproof: `result`);
//! * `--verdicts TSV`: with `--expect`, cases whose file carries no
//!   expectation are checked against this `suite\tid\tverdict` file (e.g.
//!   `testdata/expected_verdicts.tsv`).
//!
//! A case whose key or signature has the wrong length is `invalid` without
//! being sent: the API takes exactly 32 and 64 bytes. Exit codes: 0 all
//! well, 1 a verdict differs from its expectation, 2 bad usage or a
//! malformed file (the message names the line or case).

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use kms::actor::{KmsActor, KmsConfig};
use kms::bus::Bus;
use kms::core::{ed25519, Keystore};
use kms_vectors::{load_file, Case, ExpectedVerdicts};

struct Args {
    single: bool,
    expect: bool,
    verdicts: Option<PathBuf>,
    file: PathBuf,
}

const USAGE: &str = "usage: verify_file [--single] [--expect] [--verdicts TSV] FILE";

fn parse_args() -> Result<Args, String> {
    let mut single = false;
    let mut expect = false;
    let mut verdicts = None;
    let mut file = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--single") => single = true,
            Some("--expect") => expect = true,
            Some("--verdicts") => {
                verdicts = Some(PathBuf::from(args.next().ok_or("--verdicts needs a file")?))
            }
            Some("-h" | "--help") => return Err(USAGE.to_owned()),
            Some(flag) if flag.starts_with("--") => {
                return Err(format!("unknown flag {flag}\n{USAGE}"))
            }
            _ if file.is_none() => file = Some(PathBuf::from(arg)),
            _ => return Err(format!("more than one FILE given\n{USAGE}")),
        }
    }
    let file = file.ok_or_else(|| USAGE.to_owned())?;
    Ok(Args {
        single,
        expect,
        verdicts,
        file,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cases = match load_file(&args.file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let table = match args
        .verdicts
        .as_deref()
        .map(ExpectedVerdicts::load)
        .transpose()
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let verdicts = if args.single {
        cases.iter().map(verify_single).collect()
    } else {
        match verify_through_actor(&cases) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let elapsed = started.elapsed();

    let (mut valid, mut mismatched, mut unchecked) = (0usize, 0usize, 0usize);
    let mut stdout = Some(BufWriter::new(std::io::stdout().lock()));
    for (case, verdict) in cases.iter().zip(&verdicts) {
        // A closed stdout (e.g. piped into `head`) stops the listing, not
        // the checking.
        if let Some(out) = stdout.as_mut() {
            if writeln!(out, "{}\t{}", case.id, verdict_word(*verdict)).is_err() {
                stdout = None;
            }
        }
        valid += usize::from(*verdict);
        let expected = case
            .file_expectation
            .or_else(|| table.as_ref().and_then(|t| t.for_case(case)));
        match expected {
            Some(e) if e != *verdict => {
                mismatched += 1;
                eprintln!(
                    "MISMATCH {} {}: expected {}",
                    case.suite,
                    case.id,
                    verdict_word(e)
                );
            }
            Some(_) => {}
            None => unchecked += 1,
        }
    }
    if let Some(mut out) = stdout {
        let _ = out.flush();
    }
    eprintln!(
        "{}: {} cases, {} valid, {} invalid, {} differ from expectation, {} without expectation; {} in {:.1} ms",
        args.file.display(),
        cases.len(),
        valid,
        cases.len() - valid,
        mismatched,
        unchecked,
        if args.single { "single verify" } else { "KMS actor over the bus" },
        elapsed.as_secs_f64() * 1e3
    );
    if args.expect && mismatched > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn verdict_word(valid: bool) -> &'static str {
    if valid {
        "valid"
    } else {
        "invalid"
    }
}

fn verify_single(case: &Case) -> bool {
    case.fixed()
        .is_some_and(|(pk, sig)| ed25519::verify(pk, &case.message, sig).is_ok())
}

/// Sends every case to the actor (up to 256 in flight) and collects the
/// verdicts in file order.
///
/// # Errors
/// A request that got an error other than an invalid signature (e.g. the
/// actor shut down): the tool reports it rather than call it a verdict.
fn verify_through_actor(cases: &[Case]) -> Result<Vec<bool>, String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| format!("tokio runtime: {e}"))?;
    runtime.block_on(async {
        let bus = Bus::new();
        let handle = KmsActor::spawn(KmsConfig::default(), Keystore::new(), &bus)
            .map_err(|e| e.to_string())?;
        let kms = handle.client();
        let answers: Vec<Result<bool, String>> = stream::iter(cases)
            .map(|case| {
                let kms = kms.clone();
                async move {
                    let Some((pk, sig)) = case.fixed() else {
                        return Ok(false);
                    };
                    loop {
                        match kms
                            .verify_with_public_key(*pk, case.message.clone(), *sig)
                            .await
                        {
                            Ok(()) => return Ok(true),
                            Err(kms::core::KmsError::InvalidSignature(_)) => return Ok(false),
                            Err(e) if e.is_retryable() => tokio::task::yield_now().await,
                            Err(e) => return Err(format!("{} {}: {e}", case.suite, case.id)),
                        }
                    }
                }
            })
            .buffered(256)
            .collect()
            .await;
        handle.shutdown().await;
        answers.into_iter().collect()
    })
}
