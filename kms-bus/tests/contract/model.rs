//! Property test: random operation sequences against a simple model.
//!
//! The model keeps one `VecDeque` of pending sequence numbers per subscriber
//! plus a count of messages it has lost to overwrites. For a topic of
//! capacity `c`:
//! * Lag: a publish appends to every queue; a queue longer than `c` drops
//!   its front and counts one lost message.
//! * Reject: a publish is `Full` iff some queue already holds `c` messages.
//! * No subscriber: `NoSubscribers`, nothing stored.
//! * A read reports the lost count first (once), then the queue front, then
//!   `Closed` if no publisher is alive, else `Empty`.
//!
//! After every operation the number of live payloads must equal the number
//! of distinct messages pending in some queue (nothing leaked, nothing freed
//! early). At the end, for each subscriber, delivered + lagged = published
//! while it was subscribed.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use kms_bus::{
    Bus, Overflow, PublishError, Publisher, RejectCause, Subscriber, Topic, TopicConfig,
    TryRecvError,
};
use proptest::prelude::*;

/// A payload that counts its live instances.
#[derive(Debug)]
struct Msg {
    seq: u64,
    live: Arc<AtomicIsize>,
}

impl Msg {
    fn new(seq: u64, live: &Arc<AtomicIsize>) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        Self {
            seq,
            live: Arc::clone(live),
        }
    }
}

impl Clone for Msg {
    fn clone(&self) -> Self {
        Self::new(self.seq, &self.live)
    }
}

impl Drop for Msg {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug, Clone)]
enum Op {
    Publish,
    PublishBatch(usize),
    TryRecv(usize),
    Recv(usize),
    Drain(usize, usize),
    Subscribe,
    Unsubscribe(usize),
    TogglePublisher,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Publish),
        2 => (0..6usize).prop_map(Op::PublishBatch),
        4 => any::<usize>().prop_map(Op::TryRecv),
        1 => any::<usize>().prop_map(Op::Recv),
        2 => (any::<usize>(), 0..6usize).prop_map(|(s, m)| Op::Drain(s, m)),
        1 => Just(Op::Subscribe),
        1 => any::<usize>().prop_map(Op::Unsubscribe),
        1 => Just(Op::TogglePublisher),
    ]
}

/// One subscriber and its model.
struct Sub {
    real: Subscriber<Msg>,
    pending: VecDeque<u64>,
    lost: u64,
    delivered: u64,
    lagged: u64,
    published_while_subscribed: u64,
}

/// What the model says a read returns.
#[derive(Debug, PartialEq)]
enum Expect {
    Msg(u64),
    Lagged(u64),
    Empty,
    Closed,
}

/// What a real `try_recv` returned, in the model's terms.
fn observed(real: Result<Msg, TryRecvError>) -> Expect {
    match real {
        Ok(m) => Expect::Msg(m.seq),
        Err(TryRecvError::Lagged(n)) => Expect::Lagged(n),
        Err(TryRecvError::Empty) => Expect::Empty,
        Err(TryRecvError::Closed) => Expect::Closed,
        Err(e) => panic!("unexpected {e:?}"),
    }
}

struct Harness {
    capacity: usize,
    overflow: Overflow,
    topic: Topic<Msg>,
    publisher: Option<Publisher<Msg>>,
    subs: Vec<Sub>,
    next_seq: u64,
    live: Arc<AtomicIsize>,
    rt: tokio::runtime::Runtime,
}

impl Harness {
    fn new(capacity: usize, overflow: Overflow) -> Self {
        let config = TopicConfig {
            capacity,
            overflow,
            backend: crate::BACKEND,
        };
        let topic = Bus::new().topic::<Msg>("model", config).unwrap();
        let publisher = Some(topic.publisher());
        Self {
            capacity,
            overflow,
            topic,
            publisher,
            subs: Vec::new(),
            next_seq: 0,
            live: Arc::new(AtomicIsize::new(0)),
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        }
    }

    /// The model's publish of `seq`.
    fn model_publish(&mut self, seq: u64) -> Result<(), RejectCause> {
        if self.subs.is_empty() {
            return Err(RejectCause::NoSubscribers);
        }
        if self.overflow == Overflow::Reject
            && self.subs.iter().any(|s| s.pending.len() >= self.capacity)
        {
            return Err(RejectCause::Full);
        }
        for sub in &mut self.subs {
            sub.pending.push_back(seq);
            sub.published_while_subscribed += 1;
            if sub.pending.len() > self.capacity {
                sub.pending.pop_front();
                sub.lost += 1;
            }
        }
        Ok(())
    }

    /// The model's read for subscriber `i`.
    fn model_read(&mut self, i: usize) -> Expect {
        let closed = self.publisher.is_none();
        let sub = &mut self.subs[i];
        if sub.lost > 0 {
            let lost = std::mem::take(&mut sub.lost);
            sub.lagged += lost;
            return Expect::Lagged(lost);
        }
        match sub.pending.pop_front() {
            Some(seq) => {
                sub.delivered += 1;
                Expect::Msg(seq)
            }
            None if closed => Expect::Closed,
            None => Expect::Empty,
        }
    }

    /// A publisher to use: ours, or a temporary one dropped after use.
    fn with_publisher<R>(&self, f: impl FnOnce(&Publisher<Msg>) -> R) -> R {
        match &self.publisher {
            Some(p) => f(p),
            None => f(&self.topic.publisher()),
        }
    }

    fn fresh(&mut self) -> Msg {
        let msg = Msg::new(self.next_seq, &self.live);
        self.next_seq += 1;
        msg
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Publish => {
                let msg = self.fresh();
                let seq = msg.seq;
                let real = self.with_publisher(|p| p.publish(msg));
                match (self.model_publish(seq), real) {
                    (Ok(()), Ok(())) => {}
                    (Err(RejectCause::Full), Err(PublishError::Full(m)))
                    | (Err(RejectCause::NoSubscribers), Err(PublishError::NoSubscribers(m))) => {
                        assert_eq!(m.seq, seq)
                    }
                    (model, real) => panic!("publish {seq}: model {model:?}, real {real:?}"),
                }
            }
            Op::PublishBatch(n) => {
                let msgs: Vec<Msg> = (0..n).map(|_| self.fresh()).collect();
                let seqs: Vec<u64> = msgs.iter().map(|m| m.seq).collect();
                let real = self.with_publisher(|p| p.publish_batch(msgs));
                let mut published = 0;
                let mut cause = None;
                for &seq in &seqs {
                    match self.model_publish(seq) {
                        Ok(()) => published += 1,
                        Err(c) => {
                            cause = Some(c);
                            break;
                        }
                    }
                }
                match (cause, real) {
                    (None, Ok(count)) => assert_eq!(count, n),
                    (
                        Some(c),
                        Err(PublishError::Batch {
                            published: p,
                            rejected,
                            cause: rc,
                        }),
                    ) => {
                        assert_eq!((p, rc), (published, c));
                        let back: Vec<u64> = rejected.iter().map(|m| m.seq).collect();
                        assert_eq!(back, seqs[published..]);
                    }
                    (model, real) => {
                        panic!("batch {seqs:?}: model {model:?} after {published}, real {real:?}")
                    }
                }
            }
            Op::TryRecv(i) | Op::Recv(i) | Op::Drain(i, _) if self.subs.is_empty() => {
                let _ = i;
            }
            Op::TryRecv(i) => {
                let i = i % self.subs.len();
                let real = self.subs[i].real.try_recv();
                let expect = self.model_read(i);
                let got = observed(real);
                assert_eq!(got, expect, "try_recv of subscriber {i}");
            }
            Op::Recv(i) => {
                let i = i % self.subs.len();
                let sub = &self.subs[i];
                // Only when the model says it would not wait.
                if sub.lost == 0 && sub.pending.is_empty() && self.publisher.is_some() {
                    return;
                }
                let real = self.rt.block_on(self.subs[i].real.recv());
                let expect = self.model_read(i);
                let got = match real {
                    Ok(m) => Expect::Msg(m.seq),
                    Err(kms_bus::RecvError::Lagged(n)) => Expect::Lagged(n),
                    Err(kms_bus::RecvError::Closed) => Expect::Closed,
                    Err(e) => panic!("unexpected {e:?}"),
                };
                assert_eq!(got, expect, "recv of subscriber {i}");
            }
            Op::Drain(i, max) => {
                let i = i % self.subs.len();
                let mut out = Vec::new();
                let real = self.subs[i].real.drain(&mut out, max);
                let got: Vec<u64> = out.iter().map(|m| m.seq).collect();
                drop(out);
                if max == 0 {
                    assert_eq!(real, Ok(0));
                    assert!(got.is_empty());
                    return;
                }
                let first = self.model_read(i);
                match (first, real) {
                    (Expect::Msg(seq), Ok(n)) => {
                        let mut expected = vec![seq];
                        while expected.len() < max && self.subs[i].lost == 0 {
                            match self.subs[i].pending.front() {
                                Some(_) => match self.model_read(i) {
                                    Expect::Msg(s) => expected.push(s),
                                    other => panic!("model gave {other:?}"),
                                },
                                None => break,
                            }
                        }
                        assert_eq!(n, expected.len());
                        assert_eq!(got, expected, "drain of subscriber {i}");
                    }
                    (Expect::Lagged(a), Err(TryRecvError::Lagged(b))) => assert_eq!(a, b),
                    (Expect::Empty, Err(TryRecvError::Empty))
                    | (Expect::Closed, Err(TryRecvError::Closed)) => {}
                    (model, real) => {
                        panic!("drain of subscriber {i}: model {model:?}, real {real:?} {got:?}")
                    }
                }
            }
            Op::Subscribe => {
                let real = self.topic.subscribe().unwrap();
                self.subs.push(Sub {
                    real,
                    pending: VecDeque::new(),
                    lost: 0,
                    delivered: 0,
                    lagged: 0,
                    published_while_subscribed: 0,
                });
            }
            Op::Unsubscribe(i) => {
                if !self.subs.is_empty() {
                    let i = i % self.subs.len();
                    drop(self.subs.remove(i));
                }
            }
            Op::TogglePublisher => {
                self.publisher = match self.publisher.take() {
                    Some(p) => {
                        drop(p);
                        None
                    }
                    None => Some(self.topic.publisher()),
                };
            }
        }
    }

    /// Live payloads equal the distinct pending messages.
    fn check_no_leak(&self) {
        let pending: BTreeSet<u64> = self
            .subs
            .iter()
            .flat_map(|s| s.pending.iter().copied())
            .collect();
        assert_eq!(
            self.live.load(Ordering::SeqCst),
            pending.len() as isize,
            "live payloads"
        );
        assert_eq!(self.topic.subscriber_count(), self.subs.len());
        assert_eq!(
            self.topic.publisher_count(),
            usize::from(self.publisher.is_some())
        );
    }

    /// Reads everything left and checks delivered + lagged = published.
    fn finish(mut self) {
        self.publisher = None;
        for i in 0..self.subs.len() {
            loop {
                let real = self.subs[i].real.try_recv();
                let expect = self.model_read(i);
                let got = observed(real);
                assert_eq!(got, expect);
                if got == Expect::Closed {
                    break;
                }
            }
            let sub = &self.subs[i];
            assert_eq!(sub.delivered + sub.lagged, sub.published_while_subscribed);
        }
        self.subs.clear();
        assert_eq!(self.live.load(Ordering::SeqCst), 0, "payloads leaked");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn classic_matches_the_model(
        capacity in 1..6usize,
        reject in any::<bool>(),
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let overflow = if reject { Overflow::Reject } else { Overflow::Lag };
        let mut harness = Harness::new(capacity, overflow);
        // Start with one subscriber so that most sequences publish something.
        harness.apply(Op::Subscribe);
        for op in ops {
            harness.apply(op);
            harness.check_no_leak();
        }
        harness.finish();
    }
}
