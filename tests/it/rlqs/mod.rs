//! The Rate Limit Quota Service over real gRPC with a tonic client: the protocol and budget split,
//! and hostile or idle clients.

mod hostile;
mod protocol;
