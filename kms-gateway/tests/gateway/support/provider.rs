//! A small OpenID provider for the `--issuer` tests: its discovery
//! document and its JWK Set, served over plain HTTP on a loopback listener
//! the test hands it (so a test can pick the port before the provider is
//! up), on its own thread and runtime, stopped when dropped. Its keys can
//! change while it runs.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The running provider.
pub struct Provider {
    /// Its issuer, `http://ADDR`.
    pub issuer: String,
    keys: Arc<Mutex<Vec<Value>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Provider {
    /// Serves on `listener` with `keys` (JWKs) as its set.
    pub fn start_on(listener: std::net::TcpListener, keys: Vec<Value>) -> Provider {
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let issuer = format!("http://{addr}");
        let keys = Arc::new(Mutex::new(keys));
        let served = Arc::clone(&keys);
        let discovery = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")});
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = Router::new()
                    .route(
                        "/.well-known/openid-configuration",
                        get(move || async move { Json(discovery) }),
                    )
                    .route(
                        "/jwks",
                        get(move || async move {
                            let keys = served.lock().expect("keys").clone();
                            Json(json!({ "keys": keys }))
                        }),
                    );
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("serve");
            });
        });
        Provider {
            issuer,
            keys,
            stop: Some(stop),
        }
    }

    /// Replaces its JWK Set.
    pub fn set_keys(&self, keys: Vec<Value>) {
        *self.keys.lock().expect("keys") = keys;
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
