//! The Rate Limit Quota Service over real gRPC with a tonic client: the protocol and budget split,
//! hostile or idle clients, and what the service costs Redis.

mod cost;
mod hostile;
mod protocol;
