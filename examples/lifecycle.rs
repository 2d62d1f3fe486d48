//! The key lifecycle, every operation through the KMS actor over a durable
//! store in a temporary directory: create, sign, rotate, export control,
//! `min_verify_version` (through the batch path), disable and enable,
//! trim, scheduled rotation, destroy, and a reopen that finds the
//! tombstone. Each step is checked; the audit events go to stderr.
//!
//! ```text
//! cargo run --example lifecycle
//! ```
//!
//! Exits 0 when every step behaves as it must, 1 otherwise.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kms::actor::{KmsActor, KmsClient, KmsConfig};
use kms::bus::Bus;
use kms::core::seal::SealKey;
use kms::core::{KeyId, Keystore, KmsError};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter("warn,kms::audit=info")
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lifecycle example: cannot start tokio: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => {
            println!("every lifecycle operation behaved as it must");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lifecycle example failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// A step that did not behave: what, and what happened instead.
fn wrong(what: &str, got: impl std::fmt::Debug) -> String {
    format!("{what}: got {got:?}")
}

/// Checks that `result` failed with an error `expected` accepts.
fn refused<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, KmsError>,
    expected: impl Fn(&KmsError) -> bool,
) -> Result<(), String> {
    match result {
        Err(e) if expected(&e) => {
            println!("  refused as it must be: {what} ({})", e.code());
            Ok(())
        }
        other => Err(wrong(what, other)),
    }
}

async fn run() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("kms-lifecycle-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let master = || SealKey::from_bytes("store-master", 1, &[0x42; 32]).map_err(|e| e.to_string());
    let keystore = Keystore::create(&dir, master()?).map_err(|e| e.to_string())?;
    // Every verify through the pool's batches, and a rotation check
    // every 200 ms instead of every minute.
    let config = KmsConfig::default()
        .with_verify_on_caller_when_idle(false)
        .with_combine_max(0)
        .with_inline_when_idle(false)
        .with_auto_rotate_check(Duration::from_millis(200));
    let handle = KmsActor::spawn(config, keystore, &Bus::new()).map_err(|e| e.to_string())?;
    let kms = handle.client().with_principal("lifecycle-example");
    let outcome = walk(&kms).await;
    handle.shutdown().await;
    let key = outcome?;

    println!("reopen: the tombstone is durable");
    let ks = Keystore::open(&dir, master()?).map_err(|e| e.to_string())?;
    refused(
        "attest a destroyed key after a reopen",
        ks.attest(&key),
        |e| matches!(e, KmsError::KeyDestroyed { .. }),
    )?;
    if !ks.key_ids().is_empty() {
        return Err(wrong("key_ids after destroy", ks.key_ids()));
    }
    drop(ks);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Every operation on one key; returns its id (destroyed at the end).
async fn walk(kms: &KmsClient) -> Result<KeyId, String> {
    let e = |e: KmsError| e.to_string();
    let v1 = kms.create_key("acme", "tokens").await.map_err(e)?;
    let (_, v1_signature) = kms.sign(&v1, &b"signed by v1"[..]).await.map_err(e)?;
    let v2 = kms.rotate(&v1).await.map_err(e)?;
    println!("created {v1}, signed, rotated to v{}", v2.version());

    let policy = kms.policy(&v1).await.map_err(e)?;
    println!("policy of a new key: {policy:?}");
    if policy.exportable || !policy.enabled || policy.min_verify_version != 1 {
        return Err(wrong("the default policy", policy));
    }

    println!("min_verify_version 2: v1's signatures are refused, not deleted");
    let mut raised = policy.clone();
    raised.min_verify_version = 2;
    kms.set_policy(&v1, raised.clone()).await.map_err(e)?;
    refused(
        "verify under v1",
        kms.verify(&v1, &b"signed by v1"[..], v1_signature).await,
        |e| matches!(e, KmsError::VersionDisallowed { .. }),
    )?;
    let attestation = kms.attest(&v1).await.map_err(e)?;
    if attestation.versions.len() != 2 {
        return Err(wrong("attest after raising", attestation));
    }

    println!("disable: no signing; verifying goes on");
    let mut disabled = raised.clone();
    disabled.enabled = false;
    kms.set_policy(&v1, disabled).await.map_err(e)?;
    refused(
        "sign with a disabled key",
        kms.sign(&v1, &b"m"[..]).await,
        |e| matches!(e, KmsError::KeyDisabled { .. }),
    )?;
    kms.set_policy(&v1, raised.clone()).await.map_err(e)?;
    let (_, v2_signature) = kms.sign(&v1, &b"signed by v2"[..]).await.map_err(e)?;
    kms.verify(&v2, &b"signed by v2"[..], v2_signature)
        .await
        .map_err(e)?;

    println!("exportable cannot be turned off once on");
    let mut exportable = raised.clone();
    exportable.exportable = true;
    kms.set_policy(&v1, exportable.clone()).await.map_err(e)?;
    let mut back = exportable.clone();
    back.exportable = false;
    refused(
        "turning exportable off",
        kms.set_policy(&v1, back).await,
        |e| matches!(e, KmsError::InvalidArgument { .. }),
    )?;

    println!("trim below v2: v1's secret is destroyed, its public key kept");
    refused(
        "trim past min_verify_version",
        kms.trim(&v1, 3).await,
        |e| matches!(e, KmsError::InvalidArgument { .. }),
    )?;
    kms.trim(&v1, 2).await.map_err(e)?;
    let attestation = kms.attest(&v1).await.map_err(e)?;
    if attestation.min_available_version != 2 || attestation.versions.len() != 2 {
        return Err(wrong("attest after trim", attestation));
    }

    println!("auto_rotate_after 1 s: the actor rotates the key on its own");
    let mut scheduled = exportable.clone();
    scheduled.auto_rotate_after = Some(Duration::from_secs(1));
    kms.set_policy(&v1, scheduled).await.map_err(e)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let head = kms.attest(&v1).await.map_err(e)?.head;
        if head.version() >= 3 {
            println!("  rotated to v{} by the schedule", head.version());
            break;
        }
        if Instant::now() > deadline {
            return Err(wrong("a scheduled rotation within 10 s", head));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    println!("destroy: every operation is refused from now on");
    kms.destroy(&v1).await.map_err(e)?;
    let destroyed = |e: &KmsError| matches!(e, KmsError::KeyDestroyed { .. });
    refused("sign", kms.sign(&v1, &b"m"[..]).await, destroyed)?;
    refused(
        "verify",
        kms.verify(&v2, &b"signed by v2"[..], v2_signature).await,
        destroyed,
    )?;
    refused("rotate", kms.rotate(&v1).await, destroyed)?;
    refused("policy", kms.policy(&v1).await, destroyed)?;
    refused("destroy again", kms.destroy(&v1).await, destroyed)?;
    let jwks = kms.jwks(&v1).await.map_err(e)?;
    if !jwks.keys.is_empty() {
        return Err(wrong("the JWK Set of a destroyed key", jwks.keys.len()));
    }
    Ok(v1)
}
