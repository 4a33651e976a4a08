//! The xDS configuration source (`CONFIG_TYPE=GRPC_XDS_SOTW`, `docs/design/contract.md#xds`): a
//! state-of-the-world ADS stream of `RateLimitConfig` resources from a management server such as
//! Envoy Gateway.
//!
//! Each response is the whole configuration. [`convert`] turns every resource into a configuration
//! file named after the resource, and the files go through the reload pipeline
//! ([`crate::reload::Reloading::apply`]): validated and compiled exactly like files, swapped in
//! atomically, counted in `config_load_success`/`config_load_error`, reflected in health. The client
//! ([`client`]) ACKs what loaded and NACKs what did not, with the error text; [`backoff`] spaces the
//! reconnections.

pub(crate) mod backoff;
pub(crate) mod client;
pub(crate) mod convert;
mod options;
pub mod pb;
mod wiring;

pub(crate) use client::{XdsClient, XdsError};
pub(crate) use options::{BackoffSettings, XdsSettings, XdsTlsSettings};
pub(crate) use wiring::{XdsDeps, start};
