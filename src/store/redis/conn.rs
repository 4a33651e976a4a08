//! Connections to Redis for the three deployment kinds (single server, Sentinel-managed primary,
//! Cluster), with AUTH and TLS, behind one type that runs a script.
//!
//! Every connection is multiplexed: concurrent requests share it and pipeline on the wire, so
//! there is no pool to exhaust and no queue that can grow without bound (each call is bounded by
//! the response timeout). Reconnection happens in the background; a call made while Redis is down
//! fails at once or within the timeout.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use redis::aio::ConnectionLike;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo,
    RedisConnectionInfo, RedisError, Script, ServerErrorKind, TlsMode, Value,
};
use tokio::sync::Mutex;

use super::addr::{
    address, auth, certificates, has_tls_files, host_port, split_auth, without_hostname_check,
};
use super::pending::Pending;
use super::{RedisKind, RedisSettings, RedisTls};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::stripe;

/// A ready connection of any kind.
pub(crate) enum RedisConn {
    /// Single server: several auto-reconnecting multiplexed connections; each runtime thread
    /// sends on one of them ([`stripe::thread_number`] modulo the pool). A multiplexed
    /// connection writes every command queued since its last write in one `writev`, so the calls
    /// a runtime thread makes in one scheduler pass share a write only when they share a
    /// connection (round-robin per call made nearly one write per call, a fifth of the server's
    /// CPU: README "Redis ceiling").
    Single {
        /// The connections.
        conns: Vec<ConnectionManager>,
    },
    /// Redis Cluster (slot-aware routing and reconnection inside the client).
    Cluster(ClusterConnection),
    /// The primary behind Sentinel, re-resolved after a failure (failover).
    Sentinel(Arc<SentinelConn>),
    /// Not connected yet: dialled in the background; every call fails at once until then.
    Pending(Arc<Pending>),
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RedisConn::Single { .. } => "RedisConn::Single",
            RedisConn::Cluster(_) => "RedisConn::Cluster",
            RedisConn::Sentinel(_) => "RedisConn::Sentinel",
            RedisConn::Pending(_) => "RedisConn::Pending",
        })
    }
}

/// The Sentinel-resolved primary connection.
pub(crate) struct SentinelConn {
    client: Mutex<SentinelClient>,
    current: ArcSwapOption<MultiplexedConnection>,
    config: AsyncConnectionConfig,
}

// By hand: the Sentinel client has no `Debug`.
impl std::fmt::Debug for SentinelConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConn")
            .field("connected", &self.current.load().is_some())
            .finish_non_exhaustive()
    }
}

impl SentinelConn {
    pub(super) async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(c) = self.current.load_full() {
            return Ok((*c).clone());
        }
        // Ask the sentinels who the primary is now; one resolver at a time.
        let mut client = self.client.lock().await;
        if let Some(c) = self.current.load_full() {
            return Ok((*c).clone());
        }
        let conn = client
            .get_async_connection_with_config(&self.config)
            .await?;
        self.current.store(Some(Arc::new(conn.clone())));
        Ok(conn)
    }
}

impl SentinelConn {
    /// [`run_script`] on the primary; an I/O error, a timeout or READONLY make the next call ask
    /// the sentinels again (the primary may have moved). A joined call runs each request under
    /// `pcall` (`join.rs`), so a replica's READONLY comes back inside its reply, one part per
    /// request, and counts the same.
    async fn run_script(&self, script: &Script, cmd: &Cmd) -> Result<Value, RedisError> {
        let mut c = self.connection().await?;
        let r = run_script(&mut c, script, cmd).await;
        let moved = match &r {
            Err(e) => e.is_io_error() || e.is_timeout() || e.to_string().contains("READONLY"),
            Ok(Value::Array(parts)) => parts.iter().any(|part| {
                matches!(part, Value::ServerError(e)
                    if e.code() == "READONLY" || e.details().is_some_and(|d| d.contains("READONLY")))
            }),
            Ok(_) => false,
        };
        if moved {
            self.current.store(None);
        }
        r
    }
}

/// An owned connection a joined script call is sent on (`join.rs`).
pub(crate) enum ScriptConn {
    /// A connection of a single server's pool.
    Single(ConnectionManager),
    /// The primary behind Sentinel.
    Sentinel(Arc<SentinelConn>),
}

impl ScriptConn {
    /// [`RedisConn::evalsha`] on this connection.
    pub(super) async fn run(&self, script: &Script, cmd: &Cmd) -> Result<Value, RedisError> {
        match self {
            ScriptConn::Single(c) => run_script(&mut c.clone(), script, cmd).await,
            ScriptConn::Sentinel(s) => s.run_script(script, cmd).await,
        }
    }
}

/// The `EVALSHA` of `script` with `keys` and `args`, written straight into one command (no
/// vector per argument, as redis-rs's `ScriptInvocation` makes, and no copy of them).
pub(crate) fn evalsha<A: redis::ToRedisArgs>(script: &Script, keys: &[&str], args: &[A]) -> Cmd {
    let bytes: usize = keys.iter().map(|k| k.len()).sum();
    let mut cmd = Cmd::with_capacity(3 + keys.len() + args.len(), 64 + bytes + 12 * args.len());
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(a);
    }
    cmd
}

/// Sends `cmd`, an `EVALSHA` of `script`, on `c`; on NOSCRIPT (Redis restarted, or `SCRIPT
/// FLUSH`) loads the script and sends it again. Returns the reply with errors inside it kept as
/// values; an error reply of the whole command is an error.
async fn run_script<C: ConnectionLike>(
    c: &mut C,
    script: &Script,
    cmd: &Cmd,
) -> Result<Value, RedisError> {
    match c.req_packed_command(cmd).await? {
        Value::ServerError(e) => {
            let e = RedisError::from(e);
            if e.kind() != ErrorKind::Server(ServerErrorKind::NoScript) {
                return Err(e);
            }
            script.load_async(c).await?;
            match c.req_packed_command(cmd).await? {
                Value::ServerError(e) => Err(e.into()),
                v => Ok(v),
            }
        }
        v => Ok(v),
    }
}

/// Connects to the deployment `s` describes. Fails if it cannot be reached now (the caller retries
/// with backoff at startup).
pub(crate) async fn connect(
    s: &RedisSettings,
    tls: &RedisTls,
    response_timeout: Duration,
) -> Result<RedisConn, RedisError> {
    match s.kind {
        RedisKind::Single => single(s, tls, response_timeout).await,
        RedisKind::Cluster => cluster(s, tls, response_timeout).await,
        RedisKind::Sentinel => sentinel(s, tls, response_timeout).await,
    }
}

/// A pool of managed connections to one Redis (at most eight, reconnecting on their own).
async fn single(
    s: &RedisSettings,
    tls: &RedisTls,
    response_timeout: Duration,
) -> Result<RedisConn, RedisError> {
    let info = address(&s.url, s)?.into_connection_info()?;
    let info = info.set_redis_settings(auth(RedisConnectionInfo::default(), &s.auth.0));
    let mut client = if s.tls && has_tls_files(tls) {
        Client::build_with_tls(info, certificates(tls)?)?
    } else {
        Client::open(info)?
    };
    if s.tls && tls.skip_hostname_verification {
        client = without_hostname_check(&client)?;
    }
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(s.connect_timeout))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1));
    let mut conns = Vec::with_capacity(s.pool_size.min(8));
    for _ in 0..s.pool_size.clamp(1, 8) {
        conns.push(ConnectionManager::new_with_config(client.clone(), config.clone()).await?);
    }
    Ok(RedisConn::Single { conns })
}

/// A Cluster connection from the seed nodes of the URL (comma-separated).
async fn cluster(
    s: &RedisSettings,
    tls: &RedisTls,
    response_timeout: Duration,
) -> Result<RedisConn, RedisError> {
    let nodes = s
        .url
        .split(',')
        .filter(|n| !n.is_empty())
        .map(|n| address(n, s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut b = redis::cluster::ClusterClientBuilder::new(nodes)
        .connection_timeout(s.connect_timeout)
        .response_timeout(response_timeout)
        .retries(1);
    if let Some((user, pass)) = split_auth(&s.auth.0) {
        if let Some(user) = user {
            b = b.username(user);
        }
        b = b.password(pass);
    }
    if s.tls {
        // `TlsMode::Insecure` would accept any certificate at all; skipping the hostname
        // check is its own switch, which keeps verifying the chain.
        b = b
            .tls(TlsMode::Secure)
            .danger_accept_invalid_hostnames(tls.skip_hostname_verification);
        if has_tls_files(tls) {
            b = b.certs(certificates(tls)?);
        }
    }
    Ok(RedisConn::Cluster(b.build()?.get_async_connection().await?))
}

/// A connection to the primary that the sentinels of the URL (the master name, then the
/// sentinels, comma-separated) name; a refused password says whose it was.
async fn sentinel(
    s: &RedisSettings,
    tls: &RedisTls,
    response_timeout: Duration,
) -> Result<RedisConn, RedisError> {
    let mut parts = s.url.split(',').filter(|p| !p.is_empty());
    let master = parts.next().unwrap_or_default().to_string();
    let sentinels = parts
        .map(|p| host_port(p).map(|(h, port)| ConnectionAddr::Tcp(h, port)))
        .collect::<Result<Vec<_>, _>>()?;
    let first = sentinels.first().cloned();
    let mut b = SentinelClientBuilder::new(sentinels, master, SentinelServerType::Master)?;
    if let Some((user, pass)) = split_auth(&s.auth.0) {
        if let Some(user) = user {
            b = b.set_client_to_redis_username(user);
        }
        b = b.set_client_to_redis_password(pass);
    }
    if !s.sentinel_auth.0.is_empty() {
        b = b.set_client_to_sentinel_password(&s.sentinel_auth.0);
    }
    // REDIS_TLS is for the primary the sentinels name; the sentinels themselves are
    // asked over plain TCP. Skipping the hostname check is refused with Sentinel when
    // the settings are read: the client checks the primary's role over a connection it
    // builds itself, which would verify the name anyway.
    if s.tls {
        b = b.set_client_to_redis_tls_mode(TlsMode::Secure);
        if has_tls_files(tls) {
            b = b.set_client_to_redis_certificates(certificates(tls)?);
        }
    }
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(s.connect_timeout))
        .set_response_timeout(Some(response_timeout));
    let conn = Arc::new(SentinelConn {
        client: Mutex::new(b.build()?),
        current: ArcSwapOption::empty(),
        config,
    });
    if let Err(e) = conn.connection().await {
        return Err(match first {
            Some(sentinel) => refused_by(e, sentinel, s, &conn.config).await,
            None => e,
        });
    }
    Ok(RedisConn::Sentinel(conn))
}

/// The detail of a password refused by the sentinels themselves.
pub(crate) const SENTINELS_REFUSED: &str = "refused by the sentinels";
/// The detail of a password refused by the primary the sentinels named.
pub(crate) const PRIMARY_REFUSED: &str = "refused by the primary the sentinels named";

/// A refused password through Sentinel names the side that refused it: the client reports the
/// sentinels' refusal and the primary's alike, and the two passwords are separate settings. The
/// first sentinel is asked again with its password alone to tell them apart.
async fn refused_by(
    e: RedisError,
    sentinel: ConnectionAddr,
    s: &RedisSettings,
    config: &AsyncConnectionConfig,
) -> RedisError {
    if e.kind() != redis::ErrorKind::AuthenticationFailed {
        return e;
    }
    let mut redis = RedisConnectionInfo::default();
    if !s.sentinel_auth.0.is_empty() {
        redis = redis.set_password(&s.sentinel_auth.0);
    }
    let probe = async {
        let info = sentinel.into_connection_info()?.set_redis_settings(redis);
        let mut c = Client::open(info)?
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        redis::cmd("PING").query_async::<()>(&mut c).await
    };
    let side = match probe.await {
        Err(p) if p.kind() == redis::ErrorKind::AuthenticationFailed => SENTINELS_REFUSED,
        // The sentinels let us in, so the refusal came from the primary they named.
        Ok(()) => PRIMARY_REFUSED,
        Err(_) => return e,
    };
    RedisError::from((
        redis::ErrorKind::AuthenticationFailed,
        "Password authentication failed",
        side.to_string(),
    ))
}

impl RedisConn {
    /// The connection to call: for a [`Pending`] one, what it became once connected (itself until
    /// then, which fails every call at once).
    pub(crate) fn resolved(&self) -> &RedisConn {
        match self {
            RedisConn::Pending(p) => p.ready().unwrap_or(self),
            c => c,
        }
    }

    /// Runs `script` (EVALSHA, loading it on NOSCRIPT) with `keys` and `args` (numbers, or
    /// strings where a script takes text such as a holder id).
    pub(crate) async fn eval<A: redis::ToRedisArgs + Sync>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[A],
    ) -> Result<Vec<i64>, RedisError> {
        let reply = self.evalsha(script, &evalsha(script, keys, args)).await?;
        Ok(redis::from_redis_value(reply.extract_error()?)?)
    }

    /// Sends `cmd`, an `EVALSHA` of `script`, and returns its reply as it came (errors inside an
    /// array kept as values); an error reply of the whole call is an error.
    pub(crate) async fn evalsha(&self, script: &Script, cmd: &Cmd) -> Result<Value, RedisError> {
        match self.resolved() {
            RedisConn::Single { conns } => {
                let mut c = conns[stripe::thread_number() % conns.len()].clone();
                run_script(&mut c, script, cmd).await
            }
            RedisConn::Cluster(c) => run_script(&mut c.clone(), script, cmd).await,
            RedisConn::Sentinel(s) => s.run_script(script, cmd).await,
            RedisConn::Pending(p) => Err(p.not_connected()),
        }
    }

    /// The connection of this runtime thread, owned, for a call that joins several requests'
    /// (`join.rs`): none for Cluster (each slot has its own calls) or a connection not made yet.
    pub(super) fn script_conn(&self) -> Option<ScriptConn> {
        match self.resolved() {
            RedisConn::Single { conns } => Some(ScriptConn::Single(
                conns[stripe::thread_number() % conns.len()].clone(),
            )),
            RedisConn::Sentinel(s) => Some(ScriptConn::Sentinel(s.clone())),
            RedisConn::Cluster(_) | RedisConn::Pending(_) => None,
        }
    }

    /// Whether calls on this connection can be joined ([`RedisConn::script_conn`]).
    pub(super) fn joins_calls(&self) -> bool {
        matches!(
            self.resolved(),
            RedisConn::Single { .. } | RedisConn::Sentinel(_)
        )
    }

    /// The server's clock (`TIME`), for `REDIS_USE_SERVER_TIME`.
    pub(crate) async fn time(&self) -> Result<Timestamp, RedisError> {
        let cmd = redis::cmd("TIME");
        let (secs, micros): (u64, u64) = match self.resolved() {
            RedisConn::Single { conns, .. } => cmd.query_async(&mut conns[0].clone()).await?,
            RedisConn::Cluster(c) => cmd.query_async(&mut c.clone()).await?,
            RedisConn::Sentinel(s) => cmd.query_async(&mut s.connection().await?).await?,
            RedisConn::Pending(p) => return Err(p.not_connected()),
        };
        Ok(Timestamp::from_micros(
            secs.saturating_mul(1_000_000).saturating_add(micros),
        ))
    }

    /// PING, for health checks.
    pub(crate) async fn ping(&self) -> Result<(), RedisError> {
        let cmd = redis::cmd("PING");
        match self.resolved() {
            RedisConn::Single { conns, .. } => cmd.query_async::<()>(&mut conns[0].clone()).await,
            RedisConn::Cluster(c) => cmd.query_async::<()>(&mut c.clone()).await,
            RedisConn::Sentinel(s) => {
                let r = cmd.query_async::<()>(&mut s.connection().await?).await;
                if r.is_err() {
                    s.current.store(None);
                }
                r
            }
            RedisConn::Pending(p) => Err(p.not_connected()),
        }
    }
}

impl RedisConn {
    /// PING on every connection of the pool (one for Cluster and Sentinel): a connection that
    /// broke while Redis was down starts reconnecting on its first failed command, so pinging
    /// them all off the request path lets each be ready again soon after Redis is.
    pub(crate) async fn ping_all(&self) -> Result<(), RedisError> {
        match self.resolved() {
            RedisConn::Single { conns, .. } => {
                let pings = conns.iter().map(|c| async move {
                    redis::cmd("PING").query_async::<()>(&mut c.clone()).await
                });
                futures_util::future::join_all(pings)
                    .await
                    .into_iter()
                    .collect()
            }
            c => c.ping().await,
        }
    }

    /// Runs `pipe` (all its keys in one hash slot on Cluster) and returns its replies.
    pub(crate) async fn pipeline<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, RedisError> {
        match self.resolved() {
            RedisConn::Single { conns, .. } => pipe.query_async(&mut conns[0].clone()).await,
            RedisConn::Cluster(c) => pipe.query_async(&mut c.clone()).await,
            RedisConn::Sentinel(s) => pipe.query_async(&mut s.connection().await?).await,
            RedisConn::Pending(p) => Err(p.not_connected()),
        }
    }
}
