//! `recv` and `publish_wait` take part in tokio's cooperative budget: a
//! task looping on a topic that is always ready still lets the other tasks
//! of its worker run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;

use kms_bus::{Overflow, RecvError};

use super::common::topic;

/// Iterations the looping task is allowed before the other task must have
/// run. tokio's budget is 128 units per poll; a non-cooperative loop never
/// yields, so it would run all of them.
const LIMIT: usize = 100_000;

/// Runs `looping` (given a flag that another task sets) on a current-thread
/// runtime, the other task queued behind it; returns after how many
/// iterations the looping task saw the flag, or `LIMIT`.
fn iterations_until_other_task_ran<F, Fut>(looping: F) -> usize
where
    F: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = usize> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let flag = Arc::new(AtomicBool::new(false));
        // Spawned first, so it runs first: the other task only runs when
        // this one yields.
        let looper = tokio::spawn(looping(Arc::clone(&flag)));
        let other = tokio::spawn(async move { flag.store(true, Ordering::Relaxed) });
        let n = looper.await.expect("looping task");
        other.await.expect("other task");
        n
    })
}

#[test]
fn recv_on_a_busy_topic_yields_to_other_tasks() {
    for overflow in [Overflow::Reject, Overflow::Lag, Overflow::Wait] {
        let topic = topic::<u64>(1024, overflow);
        let mut sub = topic.subscribe().expect("subscribe");
        let publisher = topic.publisher();
        for i in 0..512 {
            publisher.publish(i).expect("room");
        }
        let n = iterations_until_other_task_ran(move |flag| async move {
            for i in 0..LIMIT {
                if flag.load(Ordering::Relaxed) {
                    return i;
                }
                // Always one message ahead: every `recv` is ready.
                publisher.publish(512 + i as u64).expect("room");
                sub.recv().await.expect("a message is always ready");
            }
            LIMIT
        });
        assert!(
            n < 1_000,
            "{overflow:?}: the other task ran only after {n} ready recv calls"
        );
    }
}

#[test]
fn publish_wait_into_a_topic_with_room_yields_to_other_tasks() {
    let topic = topic::<u64>(1024, Overflow::Wait);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    let n = iterations_until_other_task_ran(move |flag| async move {
        for i in 0..LIMIT {
            if flag.load(Ordering::Relaxed) {
                return i;
            }
            publisher
                .publish_wait(i as u64)
                .await
                .expect("room: the loop reads each message");
            assert_eq!(sub.try_recv(), Ok(i as u64));
        }
        LIMIT
    });
    assert!(
        n < 1_000,
        "the other task ran only after {n} ready publish_wait calls"
    );
}

#[test]
fn a_yield_for_budget_loses_no_message() {
    // Cancel safety with the budget: each `recv` future is polled once and
    // dropped if it is pending, which happens exactly when the budget is
    // spent (the topic always has a message). Every message still arrives
    // exactly once, in order. (`tokio::select!` cannot show this: it checks
    // the budget itself before polling any branch.)
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let task = runtime.spawn(async {
        let topic = topic::<u64>(4096, Overflow::Reject);
        let mut sub = topic.subscribe().expect("subscribe");
        let publisher = topic.publisher();
        for i in 0..2048 {
            publisher.publish(i).expect("room");
        }
        drop(publisher);
        let mut got = Vec::new();
        let mut cancelled = 0;
        loop {
            let once = poll_fn(|cx| match pin!(sub.recv()).poll(cx) {
                Poll::Ready(r) => Poll::Ready(Some(r)),
                Poll::Pending => Poll::Ready(None),
            });
            match once.await {
                Some(Ok(v)) => got.push(v),
                Some(Err(e)) => {
                    assert_eq!(e, RecvError::Closed);
                    break;
                }
                None => {
                    cancelled += 1;
                    tokio::task::yield_now().await;
                }
            }
        }
        assert_eq!(got, (0..2048).collect::<Vec<_>>());
        assert!(
            cancelled >= 2048 / 128 - 1,
            "recv yielded {cancelled} times"
        );
    });
    runtime.block_on(task).expect("the task's assertions hold");
}
