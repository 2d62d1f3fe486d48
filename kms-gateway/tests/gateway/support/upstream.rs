//! A small upstream service for the proxy tests, on a loopback port it
//! picks, on its own thread and runtime, stopped when dropped. Every
//! request is counted; the answer is JSON: the method, the request target
//! byte for byte, every header received (name, value) in order, and the
//! body's length in bytes, counted as it streams (never held). A path
//! under `/hang` never answers; one under `/stall` sends its head and a
//! first chunk, then nothing; one under `/slow` answers after a second.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{json, Value};

/// The running upstream.
pub struct Upstream {
    pub addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Upstream {
    pub fn start() -> Upstream {
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                ready_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("ready");
                let app = Router::new().fallback(move |request: Request| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    echo(request)
                });
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("serve");
            });
        });
        let addr = ready
            .recv_timeout(super::serving::HANG)
            .expect("upstream ready");
        Upstream {
            addr,
            requests,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A hanging request keeps the graceful shutdown waiting: do not
        // join (the thread ends with the test process).
        drop(self.thread.take());
    }
}

async fn echo(request: Request) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    if parts.uri.path().starts_with("/hang") {
        std::future::pending::<()>().await;
    }
    if parts.uri.path().starts_with("/slow") {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    if parts.uri.path().starts_with("/stall") {
        // The head and a first chunk, then nothing, ever.
        let chunks = futures::stream::once(async {
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"partial"))
        })
        .chain(futures::stream::pending());
        return axum::response::Response::builder()
            .header("x-upstream", "yes")
            .body(Body::from_stream(chunks))
            .expect("response");
    }
    let headers: Vec<Value> = parts
        .headers
        .iter()
        .map(|(name, value)| json!([name.as_str(), String::from_utf8_lossy(value.as_bytes())]))
        .collect();
    let mut body = body;
    let mut bytes: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    bytes += data.len() as u64;
                }
            }
            Err(_) => break,
        }
    }
    let answer = json!({
        "method": parts.method.as_str(),
        "target": parts.uri.to_string(),
        "headers": headers,
        "body_bytes": bytes,
    });
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .header("x-upstream", "yes")
        .body(Body::from(answer.to_string()))
        .expect("response")
}

/// The values of header `name` in an echo answer, in order.
pub fn received(echo: &Value, name: &str) -> Vec<String> {
    echo["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter(|pair| pair[0] == name)
        .map(|pair| pair[1].as_str().expect("value").to_owned())
        .collect()
}
