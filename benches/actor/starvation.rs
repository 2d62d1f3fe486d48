//! `actor/starvation`: whether the callers that verify batches on their
//! own tasks under load (combining, `KmsConfig::combine_max`) starve the
//! other tasks of their runtime. Not a Criterion timing.
//!
//! For 16, 64 and 256 client tasks on the 2-worker runtime, each verifying
//! one request at a time and yielding between requests (as a handler
//! awaits its next request), a probe task on the same runtime is woken
//! every 200 µs from a thread outside the runtime (as an I/O event wakes a
//! task) and records how long after its wake it ran: its scheduling delay.
//! The clients verify through the actor (defaults, so combining), then, as
//! the comparator, each with `verify` inline on its own task. It prints
//! the probe's p50 and p99 each way and the ratio of the p99s (median of
//! three runs, and their spread). Target: ≤ 2.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use kms::actor::KmsClient;
use kms::core::ed25519::verify;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use crate::Item;

/// How often the probe is woken.
const PROBE_EVERY: Duration = Duration::from_micros(200);

/// How the clients verify.
#[derive(Clone, Copy)]
enum Clients {
    /// Through the actor.
    Actor,
    /// With `verify` on their own task.
    Inline,
}

/// The probe's scheduling delays (µs) while `clients` tasks verify every
/// item `how`.
fn probe_delays(
    rt: &Runtime,
    kms: &KmsClient,
    items: &Arc<Vec<Item>>,
    clients: usize,
    how: Clients,
) -> Histogram<u64> {
    rt.block_on(async {
        let done = Arc::new(AtomicBool::new(false));
        let (wake, mut woken) = mpsc::unbounded_channel::<Instant>();
        let waker = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(PROBE_EVERY);
                    if wake.send(Instant::now()).is_err() {
                        break;
                    }
                }
            })
        };
        let probe = tokio::spawn(async move {
            let mut delays =
                Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).expect("histogram");
            while let Some(sent) = woken.recv().await {
                delays.saturating_record(sent.elapsed().as_micros() as u64);
            }
            delays
        });
        let next = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (kms, items, next) = (kms.clone(), Arc::clone(items), Arc::clone(&next));
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        match how {
                            Clients::Actor => kms
                                .verify_with_public_key(
                                    item.public_key,
                                    item.message.clone(),
                                    item.signature,
                                )
                                .await
                                .expect("valid"),
                            Clients::Inline => {
                                verify(&item.public_key, &item.message, &item.signature)
                                    .expect("valid")
                            }
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("client task");
        }
        done.store(true, Ordering::Relaxed);
        waker.join().expect("waker thread");
        probe.await.expect("probe task")
    })
}

/// Prints `actor/starvation` (module docs).
pub(crate) fn starvation(rt: &Runtime, kms: &KmsClient, items: &Arc<Vec<Item>>) {
    const RUNS: usize = 3;
    for clients in [16, 64, 256] {
        let mut runs: Vec<(u64, u64, u64, u64, f64)> = (0..RUNS)
            .map(|_| {
                let actor = probe_delays(rt, kms, items, clients, Clients::Actor);
                let inline = probe_delays(rt, kms, items, clients, Clients::Inline);
                let (a99, i99) = (
                    actor.value_at_quantile(0.99),
                    inline.value_at_quantile(0.99),
                );
                (
                    actor.value_at_quantile(0.5),
                    a99,
                    inline.value_at_quantile(0.5),
                    i99,
                    a99 as f64 / i99.max(1) as f64,
                )
            })
            .collect();
        runs.sort_by(|a, b| a.4.total_cmp(&b.4));
        let (a50, a99, i50, i99, ratio) = runs[RUNS / 2];
        println!(
            "actor/starvation {clients:>3} clients: probe delay through the actor p50 {a50} µs, \
             p99 {a99} µs; verifying inline p50 {i50} µs, p99 {i99} µs; p99 actor / inline \
             {ratio:.2} (median of {RUNS}; spread {:.2}-{:.2})",
            runs[0].4,
            runs[RUNS - 1].4,
        );
    }
}
