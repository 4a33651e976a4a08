//! Limits shared by regions, against real redis-servers: one per region and a global one. Each
//! region runs two instances on its own Redis; a worldwide limit is split into static shares or
//! shares that follow demand through the global store, also while a region is cut off from it
//! (an in-test TCP proxy). `/rlconfig` and the console show the shares. The instances run on the manual clock and the tests drive the sync
//! rounds, so every share is exact.

mod bound;
mod cluster;
mod demand;
mod partition;
mod refused;
mod restart;
mod sporadic;
mod stall;
mod startup;
mod static_shares;
mod traffic;
mod world;
