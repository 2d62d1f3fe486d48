//! The contract suite (`contract/`) on the Classic backend.

/// The backend every contract test builds its topics on.
const BACKEND: kms_bus::Backend = kms_bus::Backend::Classic;

mod contract;
