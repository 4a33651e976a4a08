//! The admin listener and the insight features: who may reach them, the hot keys, the status
//! page (headless Chromium) and the sampled decision log.

mod access;
mod console;
mod console_shedding;
mod explain;
mod explain_matching;
mod insight;
mod login;
mod operator_views;
mod reset;
mod valid_for;
