//! Authenticated gossip: a chitchat [`Transport`] over UDP that appends an HMAC-SHA256 tag
//! (truncated to 128 bits) keyed by `FLEET_SECRET` to every datagram it sends, and drops every
//! datagram whose tag does not verify before chitchat decodes it. A peer without the secret can
//! therefore neither join the membership nor inject counts. Messages are authenticated, not
//! encrypted: counts and key names travel in clear text, so the gossip port belongs on a private
//! network. A replayed message carries only versions the receivers already hold, which chitchat
//! ignores.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use async_trait::async_trait;
use chitchat::transport::{Socket, Transport};
use chitchat::{ChitchatMessage, Deserializable, Serializable};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of the tag appended to each datagram.
pub(crate) const TAG_BYTES: usize = 16;

/// The largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65_507;

/// Counts of what the transport refused, for the metrics and the status page.
#[derive(Debug, Default)]
pub struct AuthCounts {
    /// Datagrams dropped because their tag did not verify (or they had none).
    pub rejected: AtomicU64,
    /// Messages not sent because the tag would have taken them past the datagram size.
    pub oversize: AtomicU64,
    /// Bytes sent, tags included.
    pub sent_bytes: AtomicU64,
}

/// Opens UDP sockets that seal and open datagrams with one secret.
#[derive(Clone)]
pub struct SignedTransport {
    key: Arc<[u8]>,
    counts: Arc<AuthCounts>,
}

impl std::fmt::Debug for SignedTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedTransport").finish_non_exhaustive()
    }
}

impl SignedTransport {
    /// A transport signing with `secret`, counting refusals into `counts`.
    pub fn new(secret: &[u8], counts: Arc<AuthCounts>) -> SignedTransport {
        SignedTransport {
            key: secret.into(),
            counts,
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!())
    }

    /// `payload` with its tag appended.
    pub fn seal(&self, mut payload: Vec<u8>) -> Vec<u8> {
        let mut mac = self.mac();
        mac.update(&payload);
        let tag = mac.finalize().into_bytes();
        payload.extend_from_slice(&tag[..TAG_BYTES]);
        payload
    }

    /// The payload of `datagram` when its tag verifies (in constant time).
    pub fn open<'a>(&self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        let split = datagram.len().checked_sub(TAG_BYTES)?;
        let (payload, tag) = datagram.split_at(split);
        let mut mac = self.mac();
        mac.update(payload);
        mac.verify_truncated_left(tag).ok().map(|()| payload)
    }
}

#[async_trait]
impl Transport for SignedTransport {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let socket = tokio::net::UdpSocket::bind(listen_addr)
            .await
            .with_context(|| {
                format!("cannot bind {listen_addr}/UDP for fleet gossip (FLEET_BIND)")
            })?;
        Ok(Box::new(SignedSocket {
            transport: self.clone(),
            socket,
            buf: vec![0; MAX_DATAGRAM].into_boxed_slice(),
        }))
    }
}

/// One bound UDP socket of a [`SignedTransport`].
struct SignedSocket {
    transport: SignedTransport,
    socket: tokio::net::UdpSocket,
    buf: Box<[u8]>,
}

#[async_trait]
impl Socket for SignedSocket {
    async fn send(&mut self, to: SocketAddr, message: ChitchatMessage) -> anyhow::Result<()> {
        let datagram = self.transport.seal(message.serialize_to_vec());
        if datagram.len() > MAX_DATAGRAM {
            // Chitchat sizes its deltas to a bare datagram; the next round sends another one.
            self.transport
                .counts
                .oversize
                .fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if let Err(e) = self.socket.send_to(&datagram, to).await {
            // An unreachable peer is the failure detector's business, not a broken transport.
            tracing::debug!(peer = %to, error = %e, "fleet gossip send failed");
        }
        let sent = datagram.len() as u64;
        self.transport
            .counts
            .sent_bytes
            .fetch_add(sent, Ordering::Relaxed);
        Ok(())
    }

    async fn recv(&mut self) -> anyhow::Result<(SocketAddr, ChitchatMessage)> {
        loop {
            let (len, from_addr) = match self.socket.recv_from(&mut self.buf).await {
                Ok(r) => r,
                // ICMP errors of earlier sends surface here; they are not fatal.
                Err(e) if transient(&e) => {
                    tracing::debug!(error = %e, "fleet gossip receive error");
                    continue;
                }
                // Anything else ends the gossip (the status page then shows no peer alive)
                // rather than spinning on a broken socket.
                Err(e) => return Err(anyhow::Error::new(e).context("fleet gossip socket failed")),
            };
            let Some(mut payload) = self.transport.open(&self.buf[..len]) else {
                self.transport
                    .counts
                    .rejected
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(peer = %from_addr, "fleet gossip datagram failed authentication; dropped");
                continue;
            };
            match ChitchatMessage::deserialize(&mut payload) {
                Ok(message) => return Ok((from_addr, message)),
                Err(e) => {
                    tracing::warn!(peer = %from_addr, error = %e, "authenticated fleet gossip datagram did not decode");
                }
            }
        }
    }
}

/// Receive errors that say something about an earlier datagram, not about the socket.
fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionRefused, ConnectionReset, Interrupted, OutOfMemory};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionReset | Interrupted | OutOfMemory
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_secret_opens_a_sealed_datagram() {
        let counts = Arc::new(AuthCounts::default());
        let a = SignedTransport::new(b"0123456789abcdef", counts.clone());
        let b = SignedTransport::new(b"0123456789abcdeX", counts);
        let sealed = a.seal(b"counts".to_vec());
        assert_eq!(a.open(&sealed), Some(&b"counts"[..]));
        assert_eq!(b.open(&sealed), None);
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        assert_eq!(a.open(&flipped), None);
        assert_eq!(a.open(b"short"), None);
    }
}
