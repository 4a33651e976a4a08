//! `GET /openapi.json` on the main and admin listeners: the OpenAPI 3.1 description of every HTTP
//! endpoint, `docs/openapi.json`, compiled into the binary so the served document is the one of
//! the code that serves it (`tests/it/http/openapi.rs` checks it against the routers and fuzzes them).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The description, as kept in `docs/`.
pub(crate) const DOCUMENT: &str = include_str!("../../docs/openapi.json");

/// Serves [`DOCUMENT`]; needs no token (it describes the API, it holds no client data).
pub(crate) async fn handler() -> Response {
    let headers = [(header::CONTENT_TYPE, "application/json")];
    (StatusCode::OK, headers, DOCUMENT).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_openapi_3_1_json() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).expect("valid JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/check"]["post"].is_object());
    }
}
