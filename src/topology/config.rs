//! The YAML config model (SPEC section 4).

/// The parsed config file. TODO(helper): fields per SPEC section 4.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Config {}
