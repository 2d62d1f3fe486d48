//! Every token `verify_jwt` refuses is counted by its code
//! (`kms_token_refusals_total{topic,code}`), those refused before any
//! signature check included, and told by one debug event (never a warning)
//! whose reason holds no control character. Its own test binary: it
//! installs a global metrics recorder and a global `tracing` subscriber.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use kms_actor::{KmsActor, KmsConfig, TokenKeys};
use kms_bus::Bus;
use kms_core::{Keystore, KmsError};
use kms_jose::Validation;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;

/// The `kms_actor::jwt` events: (level, code, reason).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(tracing::Level, String, String)>>>);

#[derive(Default)]
struct Fields {
    code: String,
    reason: String,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "code" => self.code = value.to_owned(),
            "reason" => self.reason = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "kms_actor::jwt" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
            *event.metadata().level(),
            fields.code,
            fields.reason,
        ));
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_counted_by_code_and_told_at_debug_level() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder in this binary");
    let capture = Capture::default();
    {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(capture.clone()),
        )
        .expect("the only subscriber in this binary");
    }
    let ks = Keystore::new();
    let acme = ks.create_ed25519("acme", "tokens").expect("create");
    let beta = ks.create_ed25519("beta", "tokens").expect("create");
    let handle = KmsActor::spawn(
        KmsConfig::default().with_request_topic("refusals".to_owned()),
        ks,
        &Bus::new(),
    )
    .expect("spawn");
    let kms = handle.client();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let keys = TokenKeys::of(&acme);
    let v = Validation::default();
    let good = kms
        .sign_jwt(&acme, &json!({"sub": "a", "exp": now + 600}))
        .await
        .expect("sign");
    let expired = kms
        .sign_jwt(&acme, &json!({"sub": "a", "exp": 1}))
        .await
        .expect("sign");
    let other_tenant = kms
        .sign_jwt(&beta, &json!({"sub": "acme-root", "exp": now + 600}))
        .await
        .expect("sign");
    let mut forged = good.clone().into_bytes();
    let last = forged.len() - 2;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("ascii");
    // An alg with control characters: refused before any key is looked up.
    let injected = format!(
        "{}.{}.{}",
        b64(json!({"alg": "x\r\nSet-Cookie: a=b", "kid": "k"})
            .to_string()
            .as_bytes()),
        b64(br#"{"sub":"a"}"#),
        b64(&[0; 64])
    );
    let unknown = format!(
        "{}.{}.{}",
        b64(json!({"alg": "EdDSA", "kid": "nobody"})
            .to_string()
            .as_bytes()),
        b64(br#"{"sub":"a"}"#),
        b64(&[0; 64])
    );
    assert!(kms.verify_jwt(&good, &keys, &v).await.is_ok());
    for token in [
        "not a token",
        &injected,
        &unknown,
        &other_tenant,
        &expired,
        &forged,
    ] {
        assert!(matches!(
            kms.verify_jwt(token, &keys, &v).await,
            Err(KmsError::InvalidToken { .. })
        ));
    }
    handle.shutdown().await;

    let counts: HashMap<String, u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            if key.name() != kms_actor::metrics::TOKEN_REFUSALS_TOTAL {
                return None;
            }
            let label = |name: &str| {
                key.labels()
                    .find(|l| l.key() == name)
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default()
            };
            assert_eq!(label("topic"), "refusals");
            match value {
                DebugValue::Counter(n) => Some((label("code"), n)),
                _ => None,
            }
        })
        .collect();
    let expected: HashMap<String, u64> = [
        ("jose.malformed", 1),
        ("jose.unsupported_alg", 1),
        ("jose.unknown_kid", 2),
        ("jose.expired", 1),
        ("jose.invalid_signature", 1),
    ]
    .into_iter()
    .map(|(c, n)| (c.to_owned(), n))
    .collect();
    assert_eq!(counts, expected);

    let events = capture
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(events.len(), 6, "{events:?}");
    for (level, code, reason) in &events {
        assert_eq!(*level, tracing::Level::DEBUG, "{code}: {reason}");
        assert!(!reason.is_empty() && !code.is_empty());
        assert!(!reason.chars().any(char::is_control), "{reason:?}");
    }
    assert!(events
        .iter()
        .any(|(_, code, reason)| code == "jose.unsupported_alg" && reason.contains("Set-Cookie")));
}
