//! What a failed DynamoDB call means for a decision: another writer won an optimistic race (read
//! and try again), or DynamoDB could not serve it — throttled
//! (`ProvisionedThroughputExceededException`, `ThrottlingException`, `RequestLimitExceeded`),
//! timed out, unreachable, or refused (a missing table, denied access) — which is an outage for
//! the breaker and the limit's failure mode. The error text never carries credentials: the
//! SDK's errors name the operation and the service's message only.

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// Why an op got no decision from DynamoDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The condition on the item did not hold: another instance wrote it first.
    Conflict,
    /// The optimistic update lost [`super::CAS_ATTEMPTS`] races in a row: DynamoDB is fine, the
    /// key is hot; not an outage.
    Contended,
    /// The item holds something this version cannot read (written by hand?); not an outage.
    Unreadable(String),
    /// DynamoDB did not serve the call: an outage for the breaker.
    Down(String),
}

/// The error codes DynamoDB answers when it sheds load.
const THROTTLED: [&str; 3] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// Classifies a service error by its code: a failed condition is a race, anything else (throttling
/// included) is DynamoDB not serving the call.
pub(super) fn classify_code(code: Option<&str>, text: impl FnOnce() -> String) -> Failure {
    match code {
        Some("ConditionalCheckFailedException" | "TransactionConflictException") => {
            Failure::Conflict
        }
        Some(c) if THROTTLED.contains(&c) => Failure::Down(format!("throttled ({c}): {}", text())),
        _ => Failure::Down(text()),
    }
}

/// The error code of an SDK error (service errors only) and its full text.
pub(super) fn code_and_text<E, R>(e: &SdkError<E, R>) -> (Option<String>, String)
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    (
        e.code().map(str::to_owned),
        DisplayErrorContext(&e).to_string(),
    )
}

/// Classifies an SDK error (service errors by their code; timeouts, dispatch and response
/// failures are DynamoDB not serving the call).
pub(super) fn classify<E, R>(e: &SdkError<E, R>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let (code, text) = code_and_text(e);
    classify_code(code.as_deref(), || text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_condition_is_a_race_and_throttling_an_outage() {
        let text = || "message".to_string();
        assert_eq!(
            classify_code(Some("ConditionalCheckFailedException"), text),
            Failure::Conflict
        );
        for code in THROTTLED {
            match classify_code(Some(code), text) {
                Failure::Down(t) => assert!(t.contains("throttled") && t.contains(code), "{t}"),
                other => panic!("{code}: {other:?}"),
            }
        }
        for code in [
            Some("ResourceNotFoundException"),
            Some("AccessDeniedException"),
            None,
        ] {
            assert!(
                matches!(classify_code(code, text), Failure::Down(_)),
                "{code:?}"
            );
        }
    }

    #[test]
    fn a_timeout_or_a_dispatch_failure_is_an_outage() {
        use aws_sdk_dynamodb::config::http::HttpResponse;
        use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
        type E = SdkError<UpdateItemError, HttpResponse>;
        let timeout = E::timeout_error("operation timed out");
        assert!(matches!(classify(&timeout), Failure::Down(t) if t.contains("timed out")));
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let dispatch = E::dispatch_failure(aws_sdk_dynamodb::error::ConnectorError::io(io.into()));
        assert!(matches!(classify(&dispatch), Failure::Down(_)));
    }
}
