//! [`EtcdStorage`]: a [`Storage`] shared by the nodes of a fleet, on etcd v3.
//!
//! * **Layout:** record `name` is the etcd key `<prefix>/<name>`:
//!   `<prefix>/index`, per key `<prefix>/keys/<tenant>/<purpose>/<uuid>/head`,
//!   `…/v<N>` and `…/retired`, and per purpose with a signing key
//!   `<prefix>/signing/<tenant>:<purpose>`. Values are the keystore's record bytes as
//!   they are (a sequence and a sealed envelope): etcd never sees a secret
//!   in the clear, and a node without the master key cannot open one.
//!   Beside them, not one of them, `<prefix>/root` ([`ROOT_RECORD`]) holds
//!   the store's root record (`kms_core::root::RootRecord`: the root of
//!   trust, and the master key wrapped by it), replaced only by a
//!   transaction that compares its value.
//! * **Writes:** one commit is one etcd transaction. It compares the
//!   `mod_revision` of every record it writes or removes with the revision
//!   this node last saw ([`Mirror`]; 0 for a record it knows absent), and
//!   writes only if all are equal. Every change to a key writes the key's
//!   head, so two nodes changing one key at once serialise on its head:
//!   one transaction lands, the other writes nothing and fetches the key's
//!   records as they now are (the transaction's failure branch), and its
//!   keystore plans again on them ([`KmsError::Conflict`]). The per-key
//!   sequence sealed into each record orders them and refuses a rollback.
//! * **Deadlines:** every request to etcd is bounded by the configured
//!   request timeout (at most 5 s); past it the call answers
//!   [`KmsError::Unavailable`]. What did land reaches this node through
//!   the watch.
//! * **Blocking:** [`Storage`] is synchronous (the keystore calls it from
//!   the KMS's writer thread). The storage runs etcd's client on a runtime
//!   of its own (one per process, two threads named `kms-etcd`) and waits
//!   for each answer on a channel, so it may be called from any thread but
//!   that runtime's own, inside another tokio runtime or not.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, KeyValue,
    TlsOptions, Txn, TxnOp, TxnOpResponse,
};
use kms_core::storage::{RecordWrite, Storage};
use kms_core::KmsError;

use crate::config::EtcdConfig;
use crate::mirror::{Mirror, Scope};

/// The name of the root record under the prefix: not a keystore record
/// (`load`, `changes` and the watch leave it out).
pub(crate) const ROOT_RECORD: &str = "root";

/// The keystore's records in etcd, under a prefix; cheap to clone (clones
/// share the connection and the mirror).
#[derive(Clone)]
pub struct EtcdStorage {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) config: EtcdConfig,
    /// The etcd key prefix with its trailing `/`.
    pub(crate) prefix: String,
    pub(crate) mirror: Mutex<Mirror>,
}

/// The runtime every storage's client and watch run on: one per process,
/// two worker threads named `kms-etcd`, never dropped (so no storage's
/// drop has to stop a runtime, from whatever thread it happens on).
fn runtime() -> Result<&'static tokio::runtime::Runtime, KmsError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("kms-etcd")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| KmsError::Internal {
            reason: format!("kms-etcd: the client's runtime does not start: {e}"),
        })
}

impl fmt::Debug for EtcdStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "etcd {} prefix {}",
            self.inner.config.endpoints.join(","),
            self.inner.config.prefix
        )
    }
}

impl EtcdStorage {
    /// Connects to the etcd cluster `config` names (any of its endpoints;
    /// the client moves to another member when one fails). Nothing is read
    /// or written until the keystore loads.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] if `config` is invalid
    /// ([`EtcdConfig::validate`]); [`KmsError::Unavailable`] if no
    /// endpoint answers within the request timeout;
    /// [`KmsError::Internal`] if the client's runtime cannot start.
    pub fn connect(config: EtcdConfig) -> Result<EtcdStorage, KmsError> {
        config.validate()?;
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.request_timeout)
            .with_timeout(config.request_timeout)
            .with_keep_alive(Duration::from_secs(2), config.request_timeout)
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            let mut tls_options =
                TlsOptions::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
            if let Some((cert, key)) = &tls.client {
                tls_options = tls_options.identity(Identity::from_pem(cert, key.as_slice()));
            }
            options = options.with_tls(tls_options);
        }
        if let Some(user) = &config.user {
            // etcd's auth tokens expire (a simple token after 300 s unused,
            // a JWT at its lifetime or at any change of the auth store):
            // the client authenticates again when one is refused.
            options = options
                .with_user(user.name.clone(), user.password.as_str())
                .with_auto_token_refresh(true);
        }
        let endpoints = config.endpoints.clone();
        let label = config.endpoints.join(",");
        let client = block(
            runtime()?,
            config.request_timeout,
            &label.clone(),
            async move {
                Client::connect(endpoints, Some(options))
                    .await
                    .map_err(|e| unavailable_of(&label, e))
            },
        )?;
        let prefix = format!("{}/", config.prefix);
        Ok(EtcdStorage {
            inner: Arc::new(Inner {
                client,
                config,
                prefix,
                mirror: Mutex::new(Mirror::default()),
            }),
        })
    }

    /// The configuration this storage was made with.
    pub fn config(&self) -> &EtcdConfig {
        &self.inner.config
    }

    pub(crate) fn mirror(&self) -> MutexGuard<'_, Mirror> {
        self.inner
            .mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn label(&self) -> String {
        self.inner.config.endpoints.join(",")
    }

    /// Runs `future` on the client's runtime and waits for it, at most
    /// the request timeout.
    pub(crate) fn block<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, KmsError>> + Send + 'static,
    ) -> Result<T, KmsError> {
        block(
            runtime()?,
            self.inner.config.request_timeout,
            &self.label(),
            future,
        )
    }

    /// Starts `future` on the client's runtime.
    pub(crate) fn spawn(
        &self,
        future: impl Future<Output = ()> + Send + 'static,
    ) -> Result<tokio::task::JoinHandle<()>, KmsError> {
        Ok(runtime()?.spawn(future))
    }

    /// Every record under the prefix, `(name, value, mod_revision)`, and
    /// the store's revision then.
    pub(crate) async fn fetch_all(&self) -> Result<(Vec<(String, Vec<u8>, i64)>, i64), KmsError> {
        let mut client = self.inner.client.clone();
        let prefix = self.inner.prefix.as_str();
        let response = client
            .get(prefix, Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| unavailable_of(&self.label(), e))?;
        let revision = response.header().map_or(0, |h| h.revision());
        let records = records_of(prefix, response.kvs())?;
        Ok((records, revision))
    }

    /// Refuses a prefix that nests with another fleet's, before this
    /// node's first load is used: `records` (what the prefix holds) must
    /// hold no other store's index (`<prefix>/<x>/index`), and no prefix
    /// this one starts with (each part up to a `/`) may hold one. The
    /// records of two nested fleets would be read as one store's.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] naming the other store's prefix;
    /// [`KmsError::Unavailable`] if etcd does not answer.
    async fn refuse_nesting(&self, records: &[(String, Vec<u8>, i64)]) -> Result<(), KmsError> {
        let prefix = self.inner.config.prefix.as_str();
        let nested = |other: &str| KmsError::InvalidConfig {
            reason: format!(
                "etcd: prefix {prefix} nests with the store under {other}; the prefixes of two \
                 fleets on one cluster must not nest"
            ),
        };
        if let Some(inner) = records
            .iter()
            .find_map(|(name, _, _)| name.strip_suffix("/index"))
        {
            return Err(nested(&format!("{prefix}/{inner}")));
        }
        let mut client = self.inner.client.clone();
        for (end, _) in prefix.match_indices('/').skip(1) {
            let outer = &prefix[..end];
            let response = client
                .get(
                    format!("{outer}/index"),
                    Some(GetOptions::new().with_count_only()),
                )
                .await
                .map_err(|e| unavailable_of(&self.label(), e))?;
            if response.count() > 0 {
                return Err(nested(outer));
            }
        }
        Ok(())
    }

    /// Compacts the cluster's history up to `revision` (the commit that
    /// removed records), so the removed records' older revisions are gone
    /// ([`EtcdConfig::compact`]): at once for every reader (a read at an
    /// older revision is refused as compacted), and from the members'
    /// backends as etcd's compaction runs on, without holding this commit
    /// (and the keystore's writes) until it has. The commit stood
    /// whatever happens here: a failure is logged (`warn`, target
    /// `kms_etcd`) and the next removal compacts past it too.
    fn compact(&self, revision: i64) {
        let mut client = self.inner.client.clone();
        let label = self.label();
        let compacted = self.block(async move {
            client
                .compact(revision, None)
                .await
                .map_err(|e| unavailable_of(&label, e))
        });
        match compacted {
            Ok(_) => {
                tracing::info!(target: "kms_etcd", revision, "compacted etcd's history after a removal");
            }
            Err(e) => tracing::warn!(
                target: "kms_etcd",
                revision,
                error = %e,
                "compacting etcd's history after a removal failed; removed records stay in its history until a later compaction"
            ),
        }
    }

    /// The record name of etcd key `key`, if it is under the prefix and
    /// not the root record.
    pub(crate) fn name_of<'a>(&self, key: &'a [u8]) -> Option<&'a str> {
        name_of(&self.inner.prefix, key)
            .ok()
            .filter(|name| *name != ROOT_RECORD)
    }
}

impl Storage for EtcdStorage {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        let this = self.clone();
        let first = !self.mirror().is_loaded();
        let (records, revision) = self.block(async move {
            let (records, revision) = this.fetch_all().await?;
            if first {
                this.refuse_nesting(&records).await?;
            }
            Ok((records, revision))
        })?;
        let out = records
            .iter()
            .map(|(name, value, _)| (name.clone(), value.clone()))
            .collect();
        // A later load (a rewrap, or a resync for a signing pointer that
        // came before its key) merges: replacing the mirror would drop
        // news the keystore has not taken (mirror.rs).
        self.mirror().read_all(records, revision);
        Ok(out)
    }

    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        let prefix = &self.inner.prefix;
        let (compares, scopes): (Vec<Compare>, Vec<Scope>) = {
            let mirror = self.mirror();
            // News the keystore has not taken: its plan is older than the
            // revisions here (mirror.rs).
            if let Some(w) = writes.iter().find(|w| mirror.is_pending(w.name)) {
                metrics::counter!(crate::metrics::CONFLICTS).increment(1);
                return Err(KmsError::Conflict {
                    record: w.name.to_owned(),
                    attempts: 1,
                });
            }
            let compares = writes
                .iter()
                .map(|w| {
                    Compare::mod_revision(
                        format!("{prefix}{}", w.name),
                        CompareOp::Equal,
                        mirror.expected(w.name),
                    )
                })
                .collect();
            let mut scopes: Vec<Scope> = Vec::new();
            for scope in writes.iter().map(|w| Scope::of(w.name)) {
                if !scopes.contains(&scope) {
                    scopes.push(scope);
                }
            }
            (compares, scopes)
        };
        let ops: Vec<TxnOp> = writes
            .iter()
            .map(|w| {
                let key = format!("{prefix}{}", w.name);
                match w.value {
                    Some(value) => TxnOp::put(key, value, None),
                    None => TxnOp::delete(key, None),
                }
            })
            .collect();
        let fetches: Vec<TxnOp> = scopes
            .iter()
            .map(|scope| match scope {
                Scope::Group(g) => TxnOp::get(
                    format!("{prefix}{g}"),
                    Some(GetOptions::new().with_prefix()),
                ),
                Scope::Record(n) => TxnOp::get(format!("{prefix}{n}"), None),
            })
            .collect();
        let txn = Txn::new().when(compares).and_then(ops).or_else(fetches);
        let mut client = self.inner.client.clone();
        let label = self.label();
        let prefix = prefix.clone();
        let outcome = self.block(async move {
            // A request that never reached a member (it refused the
            // connection: it died) goes to another at once; the deadline
            // of `block` bounds the attempts. One that may have reached
            // it is not sent again: if it landed, a second could land
            // on top of it.
            let response = loop {
                match client.txn(txn.clone()).await {
                    Ok(response) => break response,
                    Err(e) if never_sent(&e) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(e) => return Err(unavailable_of(&label, e)),
                }
            };
            let revision = response.header().map_or(0, |h| h.revision());
            if response.succeeded() {
                return Ok((revision, None));
            }
            let mut fetched = Vec::new();
            for op in response.op_responses() {
                if let TxnOpResponse::Get(get) = op {
                    fetched.push(records_of(&prefix, get.kvs())?);
                }
            }
            Ok((revision, Some(fetched)))
        })?;
        let mut mirror = self.mirror();
        match outcome {
            (revision, None) => {
                mirror.committed(writes.iter().map(|w| (w.name, w.value)), revision);
                drop(mirror);
                metrics::counter!(crate::metrics::COMMITS).increment(1);
                if self.inner.config.compact && writes.iter().any(|w| w.value.is_none()) {
                    self.compact(revision);
                }
                Ok(())
            }
            (revision, Some(fetched)) => {
                let before: Vec<i64> = writes.iter().map(|w| mirror.expected(w.name)).collect();
                for (scope, records) in scopes.iter().zip(fetched) {
                    mirror.fetched(scope, records, revision);
                }
                let record = writes
                    .iter()
                    .zip(before)
                    .find(|(w, before)| mirror.expected(w.name) != *before)
                    .map_or_else(|| writes.first().map_or("", |w| w.name), |(w, _)| w.name);
                metrics::counter!(crate::metrics::CONFLICTS).increment(1);
                Err(KmsError::Conflict {
                    record: record.to_owned(),
                    attempts: 1,
                })
            }
        }
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn changes(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        Ok(self.mirror().changes())
    }

    fn root_record(&self) -> Result<Option<Vec<u8>>, KmsError> {
        let key = format!("{}{ROOT_RECORD}", self.inner.prefix);
        let mut client = self.inner.client.clone();
        let label = self.label();
        self.block(async move {
            let response = client
                .get(key, None)
                .await
                .map_err(|e| unavailable_of(&label, e))?;
            Ok(response.kvs().first().map(|kv| kv.value().to_vec()))
        })
    }

    fn replace_root_record(&self, previous: Option<&[u8]>, text: &[u8]) -> Result<(), KmsError> {
        let key = format!("{}{ROOT_RECORD}", self.inner.prefix);
        let compare = match previous {
            None => Compare::create_revision(key.clone(), CompareOp::Equal, 0),
            Some(value) => Compare::value(key.clone(), CompareOp::Equal, value.to_vec()),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::put(key, text.to_vec(), None)]);
        let mut client = self.inner.client.clone();
        let label = self.label();
        let landed = self.block(async move {
            let response = client
                .txn(txn)
                .await
                .map_err(|e| unavailable_of(&label, e))?;
            Ok(response.succeeded())
        })?;
        if landed {
            Ok(())
        } else {
            Err(KmsError::Conflict {
                record: ROOT_RECORD.to_owned(),
                attempts: 1,
            })
        }
    }
}

/// Runs `future` on `runtime` and waits for it on this thread, at most
/// `timeout`.
fn block<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    timeout: Duration,
    label: &str,
    future: impl Future<Output = Result<T, KmsError>> + Send + 'static,
) -> Result<T, KmsError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let label_owned = label.to_owned();
    runtime.spawn(async move {
        let answer = match tokio::time::timeout(timeout, future).await {
            Ok(answer) => answer,
            Err(_) => Err(KmsError::Unavailable {
                store: label_owned,
                reason: format!("no answer within {} ms", timeout.as_millis()),
            }),
        };
        // The caller waits for this; if it is gone there is no one to tell.
        let _ = tx.send(answer);
    });
    rx.recv().unwrap_or_else(|_| {
        Err(KmsError::Unavailable {
            store: label.to_owned(),
            reason: "the client's runtime stopped".to_owned(),
        })
    })
}

/// `(name, value, mod_revision)` of each of `kvs` but the root record.
///
/// # Errors
/// [`KmsError::StoreCorrupt`] for a key outside the prefix or not UTF-8.
fn records_of(prefix: &str, kvs: &[KeyValue]) -> Result<Vec<(String, Vec<u8>, i64)>, KmsError> {
    let mut records = Vec::with_capacity(kvs.len());
    for kv in kvs {
        let name = name_of(prefix, kv.key())?;
        if name != ROOT_RECORD {
            records.push((name.to_owned(), kv.value().to_vec(), kv.mod_revision()));
        }
    }
    Ok(records)
}

fn name_of<'a>(prefix: &str, key: &'a [u8]) -> Result<&'a str, KmsError> {
    std::str::from_utf8(key)
        .ok()
        .and_then(|k| k.strip_prefix(prefix))
        .ok_or_else(|| KmsError::StoreCorrupt {
            store: format!("etcd prefix {prefix}"),
            reason: format!("key {} is not a record name", String::from_utf8_lossy(key)),
        })
}

/// Whether `e` says the request never reached a member: the connection
/// was refused or could not be made.
fn never_sent(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) => true,
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::Unavailable && status.message().contains("connect error")
        }
        _ => false,
    }
}

/// An etcd client error as [`KmsError::Unavailable`] of store `label`.
pub(crate) fn unavailable_of(label: &str, e: etcd_client::Error) -> KmsError {
    KmsError::Unavailable {
        store: label.to_owned(),
        reason: e.to_string(),
    }
}
