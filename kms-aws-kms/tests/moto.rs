//! The AWS KMS root against moto's KMS (`moto_server`, PyPI's
//! `moto[server]`), started by this test on a loopback port it picks, its
//! keys made by the test. Built with the `moto-tests` feature; the server
//! is `$MOTO_SERVER`, or `moto_server` on the PATH.
//!
//! One test function: the SDK reads its credentials and region from the
//! environment, set once before any other thread runs.
#![cfg(feature = "moto-tests")]

use std::net::TcpListener;

use aws_sdk_kms::Client;
use kms_aws_kms::{AwsKmsRoot, MECHANISM};
use kms_core::root::{MasterKeyRoot, RootKind, StoreId};
use kms_core::{Keystore, KmsError};
use kms_testkit::moto::Moto;
use zeroize::Zeroizing;

fn reason(result: Result<impl std::fmt::Debug, KmsError>) -> String {
    match result {
        Err(KmsError::Root { root, reason }) => format!("{root}: {reason}"),
        other => panic!("expected a root error, got {other:?}"),
    }
}

#[test]
fn moto_kms_keys_wrap_and_unwrap_store_master_keys() {
    // Before the SDK reads them, with no other test thread alive.
    std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::remove_var("AWS_PROFILE");
    let moto = Moto::start().expect("moto_server");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime.block_on(async {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&moto.url)
            .load()
            .await;
        Client::new(&config)
    });
    let make_key = || {
        runtime.block_on(async {
            let made = client.create_key().send().await.expect("create_key");
            let meta = made.key_metadata().expect("metadata");
            (
                meta.key_id().to_owned(),
                meta.arn().expect("arn").to_owned(),
            )
        })
    };
    let (master, master_arn) = make_key();
    let (other, _) = make_key();
    runtime
        .block_on(
            client
                .create_alias()
                .alias_name("alias/kms-store")
                .target_key_id(&master)
                .send(),
        )
        .expect("create_alias");

    let root = AwsKmsRoot::new(&master, Some(&moto.url)).expect("root");
    assert_eq!(root.kind(), RootKind::AwsKms);
    let store = StoreId::generate().expect("id");
    let key = Zeroizing::new([5u8; 32]);
    let wrapped = root.wrap(&store, &key).expect("wraps").expect("recorded");
    assert_eq!(wrapped.mechanism, MECHANISM);
    assert!(!wrapped.bytes.windows(32).any(|w| w == key.as_slice()));
    assert_eq!(
        *root.unwrap(&store, Some(&wrapped)).expect("unwraps"),
        [5; 32]
    );
    // The same key by its ARN and by an alias.
    for name in [master_arn.as_str(), "alias/kms-store"] {
        let by = AwsKmsRoot::new(name, Some(&moto.url)).expect("root");
        assert_eq!(*by.unwrap(&store, Some(&wrapped)).expect(name), [5; 32]);
    }

    // What cannot unwrap: another store's identity, another KMS key.
    let elsewhere = StoreId::generate().expect("id");
    let said = reason(root.unwrap(&elsewhere, Some(&wrapped)));
    assert!(said.contains("cannot unwrap"), "{said}");
    let other_root = AwsKmsRoot::new(&other, Some(&moto.url)).expect("root");
    let said = reason(other_root.unwrap(&store, Some(&wrapped)));
    assert!(
        said.contains("cannot unwrap") && said.contains(&other),
        "{said}"
    );
    // A key that does not exist, an endpoint that does not answer.
    let said = reason(
        AwsKmsRoot::new("alias/absent", Some(&moto.url))
            .expect("root")
            .wrap(&store, &key),
    );
    assert!(said.contains("alias/absent"), "{said}");
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("port");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let said = reason(
        AwsKmsRoot::new(&master, Some(&closed))
            .expect("root")
            .wrap(&store, &key),
    );
    assert!(
        said.contains(&closed) && said.contains("cannot reach"),
        "{said}"
    );

    // A store under the key: created, reopened, signing; refused by the
    // other key, then opened by its own.
    let dir = tempfile::tempdir().expect("temp dir");
    let (signer, signed) = {
        let ks = Keystore::create_under(dir.path(), &root, "master").expect("create");
        let signer = ks.create_ed25519("acme", "tokens").expect("key");
        let signed = ks.sign(&signer, b"m").expect("sign");
        (signer, signed)
    };
    assert!(matches!(
        Keystore::open_under(dir.path(), &other_root, "master"),
        Err(KmsError::Root { .. })
    ));
    let ks = Keystore::open_under(dir.path(), &root, "master").expect("reopens");
    ks.verify(&signed.0, b"m", &signed.1).expect("verifies");
    ks.sign(&signer, b"again").expect("signs");
    drop(ks);
    drop(root);
    drop(other_root);
    drop(runtime);
}
