//! What the policy database holds: overrides as written through the API and as stored (their
//! types live in the core's limiter, which reads them), and the field errors the API returns
//! with 422.

use serde::Serialize;

pub(crate) use ratelimitd_core::limiter::{NewOverride, PathEntry, StoredOverride};

/// One problem with API input: where (a JSON path such as `descriptor[0].key`) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field's path in the request body.
    pub field: String,
    /// What is wrong with it (the YAML validator's text where it has one).
    pub message: String,
}

impl FieldError {
    /// An error at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}
