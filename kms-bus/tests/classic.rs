//! The contract suite (`contract/`) on the Classic backend.

/// The backend every contract test builds its topics on.
const BACKEND: kms_bus::Backend = kms_bus::Backend::Classic;

mod contract;

use kms_bus::{Overflow, TryRecvError};

#[test]
fn a_batch_is_visible_all_at_once() {
    // The batch goes in under one lock acquisition: a reader that sees the
    // first message of a batch finds the whole batch there. (Classic's
    // promise only: Soa commits a batch's slots one by one, so a reader
    // may see its first messages before the rest.)
    const BATCH: u32 = 8;
    const BATCHES: u32 = 500;
    let topic = contract::common::topic::<u32>((BATCH * BATCHES) as usize, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let producer = std::thread::spawn(move || {
        for b in 0..BATCHES {
            assert_eq!(
                publisher.publish_batch(b * BATCH..(b + 1) * BATCH),
                Ok(BATCH as usize)
            );
        }
    });
    let mut out = Vec::new();
    let mut expected = 0;
    while expected < BATCH * BATCHES {
        match sub.try_recv() {
            Ok(first) => {
                assert_eq!(first, expected);
                assert_eq!(first % BATCH, 0, "a read starts at a batch boundary");
                out.clear();
                assert_eq!(
                    sub.drain(&mut out, (BATCH - 1) as usize),
                    Ok((BATCH - 1) as usize)
                );
                assert_eq!(out, (first + 1..first + BATCH).collect::<Vec<_>>());
                expected += BATCH;
            }
            Err(TryRecvError::Empty) => std::thread::yield_now(),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    producer.join().unwrap();
}
