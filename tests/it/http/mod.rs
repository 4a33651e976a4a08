//! The HTTP side over real sockets: `POST /check` (answers, refusals, shaping), `/json` and the
//! health endpoints, hostile input, listener caps and timeouts, and the OpenAPI description
//! against the routers (and fuzzed by schemathesis).

mod api;
mod bounded_input;
mod check;
mod check_client_example;
mod check_concurrency;
mod check_input;
mod check_shaping;
mod check_shedding;
mod concurrency_display;
mod listeners;
mod openapi;
mod openapi_fuzz;
mod strict_domains;
