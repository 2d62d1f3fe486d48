//! `Bus`: the registry of named, typed topics.

use std::any::{self, Any};
use std::collections::HashMap;
use std::fmt;

use crate::config::TopicConfig;
use crate::error::BusError;
use crate::sync::{lock, Arc, Mutex};
use crate::topic::Topic;

/// An in-process publish/subscribe bus: hands out typed [`Topic`]s by name.
///
/// Cloning a `Bus` gives another handle to the same registry. Topics live as
/// long as the bus: a name, once opened, keeps its message type and
/// configuration.
///
/// ```
/// use kms_bus::{Bus, BusError, TopicConfig};
///
/// let bus = Bus::new();
/// let a = bus.topic::<u32>("jobs", TopicConfig::default())?;
/// let b = bus.topic::<u32>("jobs", TopicConfig::default())?; // the same topic
/// let mut sub = a.subscribe()?;
/// b.publisher().publish(7).map_err(|e| e.to_string())?;
/// assert_eq!(sub.try_recv()?, 7);
///
/// // Another type on the same name is an error, not a panic.
/// let err = bus.topic::<String>("jobs", TopicConfig::default()).unwrap_err();
/// assert_eq!(err.code(), "bus.type_mismatch");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Bus {
    /// Topics by name.
    ///
    /// Poisoning is recovered (see [`lock`]): the critical section in
    /// [`Bus::topic`] runs no user code, and its only change, one
    /// `HashMap::insert` of a fully built entry, either happens or does not,
    /// so the map is consistent at every point where a panic could occur.
    registry: Arc<Mutex<HashMap<String, Entry>>>,
}

/// One registered topic.
struct Entry {
    /// A `Topic<T>` for the `T` it was opened with.
    topic: Box<dyn Any + Send + Sync>,
    /// `std::any::type_name::<T>()`, for error messages only (matching is
    /// done by `downcast_ref`, which compares `TypeId`s).
    type_name: &'static str,
    /// The configuration it was opened with.
    config: TopicConfig,
}

impl Bus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the topic `name` carrying messages of type `T`, creating it
    /// with `config` if the name is new.
    ///
    /// Opening a name again with the same `T` and an equal `config` returns
    /// a handle to the same topic. `T: Send + Sync`: the Soa backend's
    /// readers clone one payload through `&T` at once.
    ///
    /// # Errors
    ///
    /// * [`BusError::InvalidConfig`] if `config` fails
    ///   [`TopicConfig::validate`] (capacity 0 or above
    ///   [`TopicConfig::MAX_CAPACITY`]).
    /// * [`BusError::TypeMismatch`] if `name` is open with another type.
    /// * [`BusError::ConfigMismatch`] if `name` is open with the same type
    ///   and a different configuration.
    pub fn topic<T: Clone + Send + Sync + 'static>(
        &self,
        name: &str,
        config: TopicConfig,
    ) -> Result<Topic<T>, BusError> {
        config.validate()?;
        let mut registry = lock(&self.registry);
        if let Some(entry) = registry.get(name) {
            let Some(topic) = entry.topic.downcast_ref::<Topic<T>>() else {
                return Err(BusError::TypeMismatch {
                    name: name.to_owned(),
                    existing: entry.type_name,
                    requested: any::type_name::<T>(),
                });
            };
            if entry.config != config {
                return Err(BusError::ConfigMismatch {
                    name: name.to_owned(),
                });
            }
            return Ok(topic.clone());
        }
        let topic = Topic::<T>::new(name, config);
        let entry = Entry {
            topic: Box::new(topic.clone()),
            type_name: any::type_name::<T>(),
            config,
        };
        registry.insert(name.to_owned(), entry);
        Ok(topic)
    }

    /// Number of topics opened on this bus (a snapshot).
    pub fn topic_count(&self) -> usize {
        lock(&self.registry).len()
    }
}

impl fmt::Debug for Bus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bus")
            .field("topics", &self.topic_count())
            .finish()
    }
}
