//! Operating the service: the real binary (CLI, loud configuration errors, signals, log
//! injection), configuration reload and xDS, the settings reference, the container image, the
//! Kubernetes recipes, and the load generator example the benchmarks drive it with.

mod cli;
mod container_image;
mod go_settings;
mod k8s_recipes;
mod large_config;
mod load_history;
mod loadgen;
mod log_injection;
pub(crate) mod loud_config;
mod reload;
mod reload_outcomes;
mod settings_reference;
mod signals;
mod startup_texts;
mod xds;
