//! Property test across threads: random scripts of publish (async
//! `publish_wait` and `blocking_publish_wait` on `Wait` topics),
//! publish_batch, recv, blocking_recv, try_recv, drain, resubscribe (drop
//! and subscribe again) and yields,
//! run by several publisher and subscriber threads at once, on the backend
//! under test and every overflow mode.
//!
//! Checked after every run:
//! * **order and duplicates:** per publisher, each subscriber life receives
//!   strictly increasing messages of that publisher's successful publishes;
//!   under `Reject` and `Wait` a contiguous run of them (nothing skipped),
//!   and for a life that reads until `Closed`, a suffix (nothing missed from
//!   its start on);
//! * **exact lag:** a subscriber present from before the first publish and
//!   reading until `Closed` has received + lagged = published, with lag 0
//!   under `Reject` and `Wait`;
//! * **drops:** every payload instance (the original and each clone) is
//!   dropped exactly once: per message, creations = drops once every handle
//!   is gone.
//!
//! A watchdog fails the run if it has not finished within
//! [`DEADLINE`] (a hang: a lost wake-up, a livelock).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use kms_bus::{Overflow, PublishError, Publisher, RecvError, Subscriber, Topic, TryRecvError};
use proptest::prelude::*;

use super::common::topic;

/// Most messages one publisher thread can make in a run (ops × batch size).
const MAX_PER_PUBLISHER: usize = 40 * 8;

/// How long one run may take before the watchdog calls it a hang.
const DEADLINE: Duration = Duration::from_secs(60);

/// Creations and drops of every payload instance, by message id.
struct Ledger {
    created: Vec<AtomicU32>,
    dropped: Vec<AtomicU32>,
}

impl Ledger {
    fn new(publishers: usize) -> Arc<Self> {
        let n = publishers * MAX_PER_PUBLISHER;
        Arc::new(Self {
            created: (0..n).map(|_| AtomicU32::new(0)).collect(),
            dropped: (0..n).map(|_| AtomicU32::new(0)).collect(),
        })
    }
}

/// A message: its publisher, that publisher's sequence number, and the
/// ledger that counts its instances.
#[derive(Debug)]
struct Msg {
    publisher: usize,
    seq: usize,
    ledger: Arc<Ledger>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ledger")
    }
}

impl Msg {
    fn new(publisher: usize, seq: usize, ledger: &Arc<Ledger>) -> Self {
        ledger.created[publisher * MAX_PER_PUBLISHER + seq].fetch_add(1, Ordering::SeqCst);
        Self {
            publisher,
            seq,
            ledger: Arc::clone(ledger),
        }
    }
}

impl Clone for Msg {
    fn clone(&self) -> Self {
        Self::new(self.publisher, self.seq, &self.ledger)
    }
}

impl Drop for Msg {
    fn drop(&mut self) {
        self.ledger.dropped[self.publisher * MAX_PER_PUBLISHER + self.seq]
            .fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Debug, Clone)]
enum PubOp {
    Publish,
    /// `blocking_publish_wait` (on a `Wait` topic it backs off and parks;
    /// on the others it is `publish`).
    BlockingPublish,
    Batch(usize),
    Yield,
}

#[derive(Debug, Clone)]
enum SubOp {
    Recv,
    BlockingRecv,
    TryRecv,
    Drain(usize),
    Resubscribe,
    Yield,
}

fn pub_op() -> impl Strategy<Value = PubOp> {
    prop_oneof![
        3 => Just(PubOp::Publish),
        1 => Just(PubOp::BlockingPublish),
        2 => (1..=8usize).prop_map(PubOp::Batch),
        1 => Just(PubOp::Yield),
    ]
}

fn sub_op() -> impl Strategy<Value = SubOp> {
    prop_oneof![
        2 => Just(SubOp::Recv),
        1 => Just(SubOp::BlockingRecv),
        3 => Just(SubOp::TryRecv),
        3 => (1..=8usize).prop_map(SubOp::Drain),
        1 => Just(SubOp::Resubscribe),
        1 => Just(SubOp::Yield),
    ]
}

/// What one subscriber life saw: per publisher, the sequence numbers
/// received in order; the lag it was told of; whether it read until
/// `Closed`; whether it existed before the first publish.
#[derive(Debug, Default)]
struct Life {
    received: Vec<Vec<usize>>,
    lagged: u64,
    to_closed: bool,
    from_start: bool,
}

impl Life {
    fn new(publishers: usize, from_start: bool) -> Self {
        Self {
            received: vec![Vec::new(); publishers],
            from_start,
            ..Self::default()
        }
    }

    fn take(&mut self, msg: Msg) {
        self.received[msg.publisher].push(msg.seq);
    }
}

/// Runs one subscriber's script, then reads until `Closed`.
fn run_subscriber(
    topic: Topic<Msg>,
    mut sub: Subscriber<Msg>,
    script: Vec<SubOp>,
    publishers: usize,
    start: &Barrier,
) -> Vec<Life> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    start.wait();
    let mut lives = Vec::new();
    let mut life = Life::new(publishers, true);
    let mut out = Vec::new();
    for op in script {
        match op {
            SubOp::Recv => match runtime.block_on(sub.recv()) {
                Ok(m) => life.take(m),
                Err(RecvError::Lagged(n)) => life.lagged += n,
                Err(RecvError::Closed) => {}
                Err(e) => panic!("recv: {e}"),
            },
            SubOp::BlockingRecv => match sub.blocking_recv() {
                Ok(m) => life.take(m),
                Err(RecvError::Lagged(n)) => life.lagged += n,
                Err(RecvError::Closed) => {}
                Err(e) => panic!("blocking_recv: {e}"),
            },
            SubOp::TryRecv => match sub.try_recv() {
                Ok(m) => life.take(m),
                Err(TryRecvError::Lagged(n)) => life.lagged += n,
                Err(TryRecvError::Empty | TryRecvError::Closed) => {}
                Err(e) => panic!("try_recv: {e}"),
            },
            SubOp::Drain(max) => match sub.drain(&mut out, max) {
                Ok(n) => {
                    assert!((1..=max).contains(&n) && n == out.len(), "drain count");
                    out.drain(..).for_each(|m| life.take(m));
                }
                Err(TryRecvError::Lagged(n)) => life.lagged += n,
                Err(TryRecvError::Empty | TryRecvError::Closed) => {}
                Err(e) => panic!("drain: {e}"),
            },
            SubOp::Resubscribe => {
                drop(sub);
                lives.push(std::mem::replace(&mut life, Life::new(publishers, false)));
                sub = topic.subscribe().expect("under the subscriber limit");
            }
            SubOp::Yield => std::thread::yield_now(),
        }
    }
    loop {
        match runtime.block_on(sub.recv()) {
            Ok(m) => life.take(m),
            Err(RecvError::Lagged(n)) => life.lagged += n,
            Err(RecvError::Closed) => break,
            Err(e) => panic!("recv: {e}"),
        }
    }
    life.to_closed = true;
    lives.push(life);
    lives
}

/// Runs one publisher's script; returns its successful publishes' sequence
/// numbers, in order.
fn run_publisher(
    publisher: Publisher<Msg>,
    wait: bool,
    index: usize,
    script: Vec<PubOp>,
    ledger: Arc<Ledger>,
    start: &Barrier,
) -> Vec<usize> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    start.wait();
    let mut next = 0;
    let mut published = Vec::new();
    for op in script {
        match op {
            PubOp::Publish | PubOp::BlockingPublish => {
                let msg = Msg::new(index, next, &ledger);
                let result = match (wait, op) {
                    (_, PubOp::BlockingPublish) => publisher.blocking_publish_wait(msg),
                    (true, _) => runtime.block_on(publisher.publish_wait(msg)),
                    (false, _) => publisher.publish(msg),
                };
                match result {
                    Ok(()) => published.push(next),
                    Err(PublishError::Full(_) | PublishError::NoSubscribers(_)) => {}
                    Err(e) => panic!("publish: {e}"),
                }
                next += 1;
            }
            PubOp::Batch(k) => {
                let msgs: Vec<Msg> = (next..next + k)
                    .map(|s| Msg::new(index, s, &ledger))
                    .collect();
                let n = match publisher.publish_batch(msgs) {
                    Ok(n) => n,
                    Err(e @ PublishError::Batch { .. }) => {
                        let (n, rejected) = (e.published(), e.into_rejected());
                        assert_eq!(n + rejected.len(), k, "batch accounting");
                        let expected: Vec<usize> = (next + n..next + k).collect();
                        let got: Vec<usize> = rejected.iter().map(|m| m.seq).collect();
                        assert_eq!(got, expected, "rejected in order");
                        n
                    }
                    Err(e) => panic!("publish_batch: {e}"),
                };
                published.extend(next..next + n);
                next += k;
            }
            PubOp::Yield => std::thread::yield_now(),
        }
    }
    published
}

/// Whether `run` is a contiguous run of `all`; with `suffix`, one that ends
/// at the end of `all`.
fn is_run_of(run: &[usize], all: &[usize], suffix: bool) -> bool {
    if run.is_empty() {
        return true;
    }
    let Some(k) = all.iter().position(|&s| s == run[0]) else {
        return false;
    };
    all.get(k..k + run.len()) == Some(run) && (!suffix || k + run.len() == all.len())
}

/// One run: spawn everything, join under the watchdog, check.
fn run(overflow: Overflow, capacity: usize, pubs: Vec<Vec<PubOp>>, subs: Vec<Vec<SubOp>>) {
    let ledger = Ledger::new(pubs.len());
    let topic = topic::<Msg>(capacity, overflow);
    let publishers = pubs.len();
    // Subscribed before any publisher thread starts: "from start" lives.
    let first: Vec<Subscriber<Msg>> = subs
        .iter()
        .map(|_| topic.subscribe().expect("subscribe"))
        .collect();
    // Created here, so the topic is open (not `Closed`) from the start until
    // each publisher thread ends.
    let senders: Vec<Publisher<Msg>> = pubs.iter().map(|_| topic.publisher()).collect();
    let wait = overflow == Overflow::Wait;
    // Every thread starts its script at once, so the scripts overlap.
    let start = Arc::new(Barrier::new(pubs.len() + subs.len()));
    let (done_tx, done_rx) = mpsc::channel();
    let worker = {
        let topic = topic.clone();
        let ledger = Arc::clone(&ledger);
        std::thread::spawn(move || {
            let sub_threads: Vec<_> = first
                .into_iter()
                .zip(subs)
                .map(|(sub, script)| {
                    let (topic, start) = (topic.clone(), Arc::clone(&start));
                    std::thread::spawn(move || {
                        run_subscriber(topic, sub, script, publishers, &start)
                    })
                })
                .collect();
            let pub_threads: Vec<_> = pubs
                .into_iter()
                .zip(senders)
                .enumerate()
                .map(|(i, (script, publisher))| {
                    let (ledger, start) = (Arc::clone(&ledger), Arc::clone(&start));
                    std::thread::spawn(move || {
                        run_publisher(publisher, wait, i, script, ledger, &start)
                    })
                })
                .collect();
            let published: Vec<Vec<usize>> =
                pub_threads.into_iter().map(|t| t.join().unwrap()).collect();
            let lives: Vec<Vec<Life>> =
                sub_threads.into_iter().map(|t| t.join().unwrap()).collect();
            let _ = done_tx.send(());
            (published, lives)
        })
    };
    if done_rx.recv_timeout(DEADLINE).is_err() {
        panic!("{overflow:?} cap {capacity}: not done within {DEADLINE:?} (a hang)");
    }
    let (published, lives) = worker.join().expect("no thread panicked");
    let total: usize = published.iter().map(Vec::len).sum();
    let strict = overflow != Overflow::Lag;
    for life in lives.iter().flatten() {
        let mut got = 0;
        for (p, received) in life.received.iter().enumerate() {
            assert!(
                received.windows(2).all(|w| w[0] < w[1]),
                "publisher {p}: order or duplicate in {received:?}"
            );
            assert!(
                received
                    .iter()
                    .all(|s| published[p].binary_search(s).is_ok()),
                "publisher {p}: a message never published"
            );
            if strict {
                assert!(
                    is_run_of(received, &published[p], life.to_closed),
                    "publisher {p}: {received:?} is not a contiguous run{} of {:?}",
                    if life.to_closed { " to the end" } else { "" },
                    published[p]
                );
            }
            got += received.len();
        }
        if strict {
            assert_eq!(life.lagged, 0, "no lag under {overflow:?}");
        }
        if life.from_start && life.to_closed {
            assert_eq!(
                got as u64 + life.lagged,
                total as u64,
                "received + lagged = published"
            );
        }
    }
    drop(topic);
    for id in 0..ledger.created.len() {
        let created = ledger.created[id].load(Ordering::SeqCst);
        let dropped = ledger.dropped[id].load(Ordering::SeqCst);
        assert_eq!(
            created, dropped,
            "message {id}: {created} instances, {dropped} drops"
        );
    }
}

fn overflow() -> impl Strategy<Value = Overflow> {
    prop_oneof![
        Just(Overflow::Reject),
        Just(Overflow::Lag),
        Just(Overflow::Wait)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn threads_keep_the_delivery_contract(
        overflow in overflow(),
        capacity in prop_oneof![1..=4usize, 5..=64usize],
        pubs in prop::collection::vec(prop::collection::vec(pub_op(), 1..40), 1..=3),
        subs in prop::collection::vec(prop::collection::vec(sub_op(), 1..40), 1..=3),
    ) {
        run(overflow, capacity, pubs, subs);
    }
}
