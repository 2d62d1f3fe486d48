// throwaway probe: idle latency under three pause mechanisms
use bytes::Bytes;
use ed25519_dalek::{Signer, SigningKey};
use hdrhistogram::Histogram;
use kms::actor::{KmsActor, KmsConfig};
use kms::bus::Bus;
use kms::core::ed25519::verify;
use kms::core::Keystore;
use std::time::{Duration, Instant};

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let key = SigningKey::from_bytes(&[7; 32]);
    let msg = Bytes::from_static(b"{\"sub\":\"user-1\",\"scope\":\"read\"}");
    let sig = key.sign(&msg).to_bytes();
    let pk = key.verifying_key().to_bytes();
    let handle = {
        let _g = rt.enter();
        KmsActor::spawn(
            KmsConfig {
                threads: 2,
                ..KmsConfig::default()
            },
            Keystore::new(),
            &Bus::new(),
        )
        .unwrap()
    };
    let kms = handle.client();
    let extra: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    let _others: Vec<_> = (0..extra)
        .map(|_| {
            let _g = rt.enter();
            KmsActor::spawn(
                KmsConfig {
                    threads: 2,
                    ..KmsConfig::default()
                },
                Keystore::new(),
                &Bus::new(),
            )
            .unwrap()
        })
        .collect();
    let mech = std::env::args().nth(1).unwrap_or("std".into());
    for rate in [100.0f64, 1000.0, 10000.0] {
        let n = if rate < 500.0 { 300 } else { 2000 };
        for actor in [0u8, 1] {
            let kms = kms.clone();
            let msg = msg.clone();
            let mech2 = mech.clone();
            let mech = mech2;
            let h = rt.block_on(async move {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
                if mech == "ext" {
                    std::thread::spawn(move || {
                        use rand::{RngExt, SeedableRng};
                        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
                        for _ in 0..n {
                            let u: f64 = rng.random_range(f64::EPSILON..1.0);
                            std::thread::sleep(Duration::from_secs_f64(-u.ln() / rate));
                            if tx.send(Instant::now()).is_err() {
                                break;
                            }
                        }
                    });
                }
                tokio::spawn(async move {
                    use rand::{RngExt, SeedableRng};
                    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
                    let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
                    for _ in 0..n {
                        let started = match mech.as_str() {
                            "ext" => rx.recv().await.unwrap(),
                            "tokio" => {
                                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                                tokio::time::sleep(Duration::from_secs_f64(-u.ln() / rate)).await;
                                Instant::now()
                            }
                            "spin" => {
                                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                                let until =
                                    Instant::now() + Duration::from_secs_f64(-u.ln() / rate);
                                while Instant::now() < until {
                                    std::hint::spin_loop();
                                }
                                Instant::now()
                            }
                            _ => {
                                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                                std::thread::sleep(Duration::from_secs_f64(-u.ln() / rate));
                                Instant::now()
                            }
                        };
                        match actor {
                            1 => kms
                                .verify_with_public_key(pk, msg.clone(), sig)
                                .await
                                .unwrap(),
                            3 => {
                                Y1(false).await;
                                verify(&pk, &msg, &sig).unwrap()
                            }
                            2 => {
                                tokio::task::yield_now().await;
                                verify(&pk, &msg, &sig).unwrap()
                            }
                            _ => verify(&pk, &msg, &sig).unwrap(),
                        }
                        h.saturating_record(started.elapsed().as_nanos() as u64);
                    }
                    h
                })
                .await
                .unwrap()
            });
            println!(
                "{} rate {rate} actor {actor}: p50 {} p99 {} µs",
                std::env::args().nth(1).unwrap_or_default(),
                h.value_at_quantile(0.5) / 1000,
                h.value_at_quantile(0.99) / 1000
            );
        }
    }
    rt.block_on(handle.shutdown());
}

struct Y1(bool);
impl std::future::Future for Y1 {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}
