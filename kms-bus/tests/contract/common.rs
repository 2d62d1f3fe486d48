//! Helpers shared by the contract tests.

#![allow(dead_code)] // each backend's binary uses a subset

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kms_bus::{Bus, Overflow, TopicConfig};

/// A payload whose `Clone` increments a shared counter.
#[derive(Debug)]
pub struct Counted {
    pub id: u64,
    pub clones: Arc<AtomicUsize>,
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Self {
            id: self.id,
            clones: Arc::clone(&self.clones),
        }
    }
}

/// A config with the given capacity and overflow policy, on the backend
/// under test.
pub fn config(capacity: usize, overflow: Overflow) -> TopicConfig {
    TopicConfig {
        capacity,
        overflow,
        backend: crate::BACKEND,
    }
}

/// A topic named "test" on a fresh bus, on the backend under test.
pub fn topic<T: Clone + Send + Sync + 'static>(
    capacity: usize,
    overflow: Overflow,
) -> kms_bus::Topic<T> {
    Bus::new()
        .topic::<T>("test", config(capacity, overflow))
        .expect("valid config on a fresh bus")
}
