//! The contract suite (`contract/`) on the Soa backend.

/// The backend every contract test builds its topics on.
const BACKEND: kms_bus::Backend = kms_bus::Backend::Soa;

mod contract;
