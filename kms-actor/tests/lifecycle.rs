//! The key lifecycle through the actor: policy, trim and destroy on the
//! priority lane, refusals through the batch path and `verify_jwt`, the
//! JWK Set following `min_verify_version`, scheduled rotation, and one
//! audit event per operation with its principal.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kms_actor::{KmsActor, KmsConfig, KmsHandle, AUDIT_TARGET};
use kms_bus::Bus;
use kms_core::{KeyId, Keystore, KmsError};
use kms_jose::Validation;
use serde_json::json;

/// One audit event's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Audit {
    operation: String,
    key: String,
    version: u64,
    outcome: String,
    principal: String,
    detail: String,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Audit>>>);

/// The one process-wide capture (events come from the writer's thread).
fn audits() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let capture = Capture::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(capture.clone()),
        )
        .expect("the only global subscriber in this test binary");
        capture
    })
}

impl Capture {
    /// The events about `key`'s key so far.
    fn of(&self, key: &KeyId) -> Vec<Audit> {
        let uuid = key.uuid().to_string();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|a| a.key.contains(&uuid))
            .cloned()
            .collect()
    }
}

impl tracing::field::Visit for Audit {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let slot = match field.name() {
            "operation" => &mut self.operation,
            "key" => &mut self.key,
            "outcome" => &mut self.outcome,
            "principal" => &mut self.principal,
            "detail" => &mut self.detail,
            _ => return,
        };
        *slot = value.to_owned();
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "version" {
            self.version = value;
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != AUDIT_TARGET {
            return;
        }
        let mut audit = Audit::default();
        event.record(&mut audit);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(audit);
    }
}

/// Every verify goes through the pool (no verifying on the caller's task
/// or inline on the actor's), so the batch path is what refuses.
fn batch_only() -> KmsConfig {
    KmsConfig::default()
        .with_verify_on_caller_when_idle(false)
        .with_combine_max(0)
        .with_inline_when_idle(false)
}

fn spawn(ks: &Keystore, config: KmsConfig) -> KmsHandle {
    audits();
    KmsActor::spawn(config, ks.clone(), &Bus::new()).expect("spawn")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_below_min_verify_version_is_refused_through_the_batch_path_and_jwts() {
    let ks = Keystore::new();
    let v1 = ks.create_ed25519("gateway", "tokens").expect("create");
    let handle = spawn(&ks, batch_only());
    let kms = handle.client().with_principal("ops");
    let old_token = kms
        .sign_jwt(&v1, &json!({"sub": "alice", "exp": now() + 600}))
        .await
        .expect("sign");
    let (_, old_signature) = kms.sign(&v1, &b"message"[..]).await.expect("sign");
    let v2 = kms.rotate(&v1).await.expect("rotate");
    let mut policy = kms.policy(&v1).await.expect("policy");
    policy.min_verify_version = 2;
    assert_eq!(
        kms.set_policy(&v1, policy.clone()).await.expect("set"),
        policy
    );

    assert_eq!(
        kms.verify(&v1, &b"message"[..], old_signature).await,
        Err(KmsError::VersionDisallowed {
            key: v1.to_string(),
            version: 1,
            min_verify_version: 2
        })
    );
    let refused = kms
        .verify_jwt(&old_token, &keys(), &Validation::default())
        .await;
    assert!(
        matches!(
            refused,
            Err(KmsError::InvalidToken {
                code: "kms.version_disallowed",
                ..
            })
        ),
        "{refused:?}"
    );
    let jwks = kms.jwks(&v1).await.expect("jwks");
    let kids: Vec<&str> = jwks.keys.iter().map(|k| k.kid()).collect();
    assert_eq!(kids, vec![v2.to_string().as_str()], "v1 left the JWK Set");
    let new_token = kms
        .sign_jwt(&v1, &json!({"sub": "bob", "exp": now() + 600}))
        .await
        .expect("sign");
    kms.verify_jwt(&new_token, &keys(), &Validation::default())
        .await
        .expect("v2's token verifies");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trim_disable_and_destroy_through_the_actor_each_audited_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let master = || kms_core::seal::SealKey::from_bytes("m", 1, &[1; 32]).expect("key");
    let ks = Keystore::create(dir.path(), master()).expect("create");
    let handle = spawn(&ks, batch_only());
    let kms = handle.client().with_principal("ops@example");
    let v1 = kms.create_key("gateway", "tokens").await.expect("create");
    let v2 = kms.rotate(&v1).await.expect("rotate");
    let mut policy = kms.policy(&v1).await.expect("policy");
    policy.min_verify_version = 2;
    policy.enabled = false;
    kms.set_policy(&v1, policy.clone()).await.expect("set");
    assert!(matches!(
        kms.sign(&v2, &b"m"[..]).await,
        Err(KmsError::KeyDisabled { .. })
    ));
    policy.enabled = true;
    kms.set_policy(&v1, policy).await.expect("enable");
    assert!(matches!(
        kms.trim(&v1, 3).await,
        Err(KmsError::InvalidArgument { .. })
    ));
    kms.trim(&v1, 2).await.expect("trim");
    assert_eq!(
        kms.attest(&v1).await.expect("attest").min_available_version,
        2
    );
    let (_, signature) = kms.sign(&v1, &b"m"[..]).await.expect("sign");
    kms.destroy(&v1).await.expect("destroy");
    assert!(matches!(
        kms.verify(&v2, &b"m"[..], signature).await,
        Err(KmsError::KeyDestroyed { .. })
    ));
    assert!(matches!(
        kms.sign(&v1, &b"m"[..]).await,
        Err(KmsError::KeyDestroyed { .. })
    ));
    assert!(kms.jwks(&v1).await.expect("jwks").keys.is_empty());
    handle.shutdown().await;
    drop(ks);
    let reopened = Keystore::open(dir.path(), master()).expect("reopen");
    assert!(matches!(
        reopened.attest(&v1),
        Err(KmsError::KeyDestroyed { .. })
    ));

    let details: Vec<String> = audits()
        .of(&v1)
        .into_iter()
        .filter(|a| a.operation == "set_policy" || a.operation == "trim")
        .map(|a| a.detail)
        .collect();
    assert_eq!(
        details,
        [
            "min_verify_version=2 enabled=false exportable=false auto_rotate_after=none",
            "min_verify_version=2 enabled=true exportable=false auto_rotate_after=none",
            "below=3",
            "below=2"
        ]
    );
    let events: Vec<(String, u64, String)> = audits()
        .of(&v1)
        .into_iter()
        .map(|a| {
            assert_eq!(a.principal, "ops@example", "{a:?}");
            (a.operation, a.version, a.outcome)
        })
        .collect();
    let expected: Vec<(String, u64, String)> = [
        ("create_key", 1, "ok"),
        ("rotate", 2, "ok"),
        ("set_policy", 1, "ok"),
        ("sign", 2, "key_disabled"),
        ("set_policy", 1, "ok"),
        ("trim", 1, "invalid_argument"),
        ("trim", 1, "ok"),
        ("sign", 2, "ok"),
        ("destroy", 1, "ok"),
        ("sign", 1, "key_destroyed"),
    ]
    .iter()
    .map(|(op, v, outcome)| ((*op).to_owned(), *v, (*outcome).to_owned()))
    .collect();
    assert_eq!(events, expected, "one event per operation, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_a_principal_audits_as_unspecified() {
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    let handle = spawn(&ks, KmsConfig::default());
    handle.client().sign(&key, &b"m"[..]).await.expect("sign");
    let events = audits().of(&key);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].principal, "unspecified");
    assert_eq!(events[0].operation, "sign");
    handle.shutdown().await;
}

/// Polls `key`'s head until it reaches `version`, for at most `within`.
async fn wait_for_head(ks: &Keystore, key: &KeyId, version: u32, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let head = ks.attest(key).expect("attest").head.version();
        if head >= version {
            assert_eq!(head, version, "rotated once");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not rotated to v{version} within {within:?} (head v{head})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_when_due_at_start_and_at_each_check() {
    let ks = Keystore::new();
    let due_at_start = ks.create_ed25519("gateway", "tokens").expect("create");
    let later = ks.create_ed25519("gateway", "other").expect("create");
    let never = ks.create_ed25519("gateway", "never").expect("create");
    for key in [&due_at_start, &later] {
        let mut policy = ks.policy(key).expect("policy");
        policy.auto_rotate_after = Some(Duration::from_secs(1));
        ks.set_policy(key, policy).expect("set");
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Both are due now; a check every 60 s means only the check at start
    // can rotate them within this test.
    let handle = spawn(&ks, KmsConfig::default());
    wait_for_head(&ks, &due_at_start, 2, Duration::from_secs(10)).await;
    wait_for_head(&ks, &later, 2, Duration::from_secs(10)).await;
    handle.shutdown().await;
    // Checked every 100 ms: rotated again once its new head is 1 s old.
    let handle = spawn(
        &ks,
        KmsConfig::default().with_auto_rotate_check(Duration::from_millis(100)),
    );
    wait_for_head(&ks, &later, 3, Duration::from_secs(10)).await;
    handle.shutdown().await;
    assert_eq!(ks.attest(&never).expect("attest").head.version(), 1);
    let events = audits().of(&due_at_start);
    assert!(
        events
            .iter()
            .any(|a| a.operation == "auto_rotate" && a.principal == "kms" && a.version == 2),
        "{events:?}"
    );
}

#[test]
fn auto_rotate_check_is_validated() {
    for bad in [Duration::ZERO, Duration::from_secs(61)] {
        assert!(KmsConfig::default()
            .with_auto_rotate_check(bad)
            .validate()
            .is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_follows_the_policy_and_export_and_import_are_audited() {
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    let handle = spawn(&ks, KmsConfig::default());
    let kms = handle.client().with_principal("migrator");
    let transport = Arc::new(kms_core::seal::SealKey::from_bytes("t", 1, &[7; 32]).expect("key"));
    assert!(matches!(
        kms.export_sealed(&key, Arc::clone(&transport)).await,
        Err(KmsError::NotExportable { .. })
    ));
    let mut policy = kms.policy(&key).await.expect("policy");
    policy.exportable = true;
    kms.set_policy(&key, policy).await.expect("set");
    let envelope = kms
        .export_sealed(&key, Arc::clone(&transport))
        .await
        .expect("export");
    let imported = kms
        .import_sealed("gateway", "copied", transport, envelope)
        .await
        .expect("import");
    assert_eq!(
        ks.public_key(&imported).expect("pk"),
        ks.public_key(&key).expect("pk")
    );
    let ops: Vec<(String, String)> = audits()
        .of(&key)
        .into_iter()
        .map(|a| (a.operation, a.outcome))
        .collect();
    assert_eq!(
        ops,
        [
            ("export", "not_exportable"),
            ("set_policy", "ok"),
            ("export", "ok")
        ]
        .map(|(o, r)| (o.to_owned(), r.to_owned()))
    );
    let import = audits().of(&imported);
    assert_eq!(import.len(), 1, "{import:?}");
    assert_eq!(
        (import[0].operation.as_str(), import[0].principal.as_str()),
        ("import", "migrator")
    );
    handle.shutdown().await;
}

/// The keystore keys these tests issue with ("gateway", purposes "tokens"
/// and "passports"), and the trusted external keys.
fn keys() -> kms_actor::TokenKeys {
    kms_actor::TokenKeys::keystore("gateway", "tokens").and_keystore("gateway", "passports")
}

#[cfg(feature = "ml-dsa")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ml_dsa_token_is_audited_alike_on_its_callers_task_and_on_the_pool() {
    let claims = json!({"sub": "alice", "exp": now() + 600});
    for on_caller in [true, false] {
        let ks = Keystore::new();
        let handle = spawn(
            &ks,
            KmsConfig::default().with_sign_on_caller_when_idle(on_caller),
        );
        let kms = handle.client().with_principal("issuer");
        let key = kms
            .create_key_of("gateway", "tokens", kms_core::Alg::MlDsa65)
            .await
            .expect("create");
        let before = handle.stats();
        kms.sign_jwt(&key, &claims).await.expect("sign");
        let mut policy = kms.policy(&key).await.expect("policy");
        policy.enabled = false;
        kms.set_policy(&key, policy).await.expect("disable");
        assert!(matches!(
            kms.sign_jwt(&key, &claims).await,
            Err(KmsError::KeyDisabled { .. })
        ));
        let stats = handle.stats().since(&before);
        let signed_here = if on_caller { 2 } else { 0 };
        assert_eq!(stats.caller_signed, signed_here, "{stats:?}");
        let events: Vec<(String, u64, String, String)> = audits()
            .of(&key)
            .into_iter()
            .filter(|a| a.operation == "sign")
            .map(|a| (a.operation, a.version, a.outcome, a.principal))
            .collect();
        let event = |outcome: &str| {
            (
                "sign".to_owned(),
                1,
                outcome.to_owned(),
                "issuer".to_owned(),
            )
        };
        assert_eq!(
            events,
            [event("ok"), event("key_disabled")],
            "on the caller's task: {on_caller}"
        );
        handle.shutdown().await;
    }
}
