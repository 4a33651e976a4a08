//! How the memcached store reaches its servers (`BACKEND_TYPE=memcache`): the servers, the idle
//! connections kept and the call timeout. Read from `MEMCACHE_*` by the settings.

use std::time::Duration;

/// How ratelimitd reaches memcached (`BACKEND_TYPE=memcache`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemcacheSettings {
    /// `MEMCACHE_HOST_PORT`: the servers, `host:port` each, in the order given; a key goes to
    /// the server `crc32(key) % len` as Go's client picks it, so both fleets agree.
    pub servers: Vec<String>,
    /// `MEMCACHE_MAX_IDLE_CONNS` (default 2): idle connections kept per server.
    pub max_idle_conns: usize,
    /// `MEMCACHE_TIMEOUT` (default 500ms, the Go client's default): connect and whole-call
    /// timeout of one server's commands of a request.
    pub timeout: Duration,
}

impl Default for MemcacheSettings {
    fn default() -> MemcacheSettings {
        MemcacheSettings {
            servers: Vec::new(),
            max_idle_conns: 2,
            timeout: Duration::from_millis(500),
        }
    }
}
