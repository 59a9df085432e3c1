//! The call path (docs/design.md, "The call path: measured, not guessed"): gRPC calls over
//! HTTP/2, on one of two engines behind the one `Connection` API. The `h2` crate carries
//! streaming calls and every user but `run`'s unary hot path: h2 does framing, HPACK and
//! flow control, and what is written here is only the gRPC envelope (headers, the 5-byte
//! message prefix, `grpc-status` trailers). `run`'s unary calls take the lean transport
//! (`transport/lean.rs`, `Connector::unary_only`), a gRPC-only HTTP/2 client that costs
//! half as much CPU per call.
use bytes::{Buf, Bytes, BytesMut};
use h2::client::SendRequest;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, TE, USER_AGENT};
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http::{Method, Request, StatusCode};
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types;
use tonic::Code;

use super::tls::{self, TlsOptions};
use super::wire::{grpc_timeout, http_status_code, percent_decode, Deframer, Fault};
use crate::error::{bad_input, run_failed};

mod lean;
mod stream;
pub use stream::{Bidi, CallKind, CancelAfter, Script, StreamLimits, StreamObserver};

/// Where to call, as the user gave it (`HOST:PORT`) plus TLS choices.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// None: plaintext (h2c with prior knowledge).
    pub tls: Option<TlsOptions>,
    /// The :authority of every call (`--authority`), when not HOST:PORT.
    pub authority: Option<String>,
    /// Dial plus TLS plus HTTP/2 handshake: a target that does not answer within this is unreachable.
    pub connect_timeout: Duration,
    /// Send an HTTP/2 PING this often on every connection (`--keepalive`); one unanswered
    /// within `keepalive_timeout` closes the connection.
    pub keepalive: Option<Duration>,
    /// How long a keepalive PING may go unanswered: `KEEPALIVE_TIMEOUT` but in tests.
    pub keepalive_timeout: Duration,
    /// Dial this Unix socket instead of HOST:PORT (`unix:PATH`); the :authority is `localhost`.
    pub unix: Option<std::path::PathBuf>,
    /// Which addresses the target names (docs/targets.md); `host`/`port` are the first's.
    pub addresses: Addresses,
    /// How calls are spread over the addresses (`--lb`).
    pub lb: Lb,
}

/// The addresses a target names, as gRPC's name syntax gives them (docs/targets.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addresses {
    /// `HOST:PORT`: resolved once; every address it resolves to is tried in turn.
    Host,
    /// `ipv4:A:P,B:P` or `ipv6:[A]:P,...`: these addresses, in this order.
    List(Vec<SocketAddr>),
    /// `dns:///HOST:PORT`: every address HOST resolves to, resolved again during the run.
    Dns,
}

/// gRPC's load-balancing policies, by their names (`--lb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Lb {
    /// One connection per channel, to the first address that accepts.
    #[default]
    #[value(name = "pick_first")]
    PickFirst,
    /// One connection per address in every channel; calls take the ready ones in turn.
    #[value(name = "round_robin")]
    RoundRobin,
}

impl Lb {
    pub fn as_str(self) -> &'static str {
        match self {
            Lb::PickFirst => "pick_first",
            Lb::RoundRobin => "round_robin",
        }
    }
}

/// How long a keepalive PING may go unanswered.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The default of `--connect-timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Target {
    /// A plaintext target with every other choice at its default.
    pub fn new(host: impl Into<String>, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
            tls: None,
            authority: None,
            connect_timeout: CONNECT_TIMEOUT,
            keepalive: None,
            keepalive_timeout: KEEPALIVE_TIMEOUT,
            unix: None,
            addresses: Addresses::Host,
            lb: Lb::PickFirst,
        }
    }

    /// Whether results are broken down by backend address: a target naming its addresses
    /// by gRPC's syntax, or balanced over them.
    pub fn by_backend(&self) -> bool {
        self.unix.is_none() && (self.addresses != Addresses::Host || self.lb == Lb::RoundRobin)
    }

    /// Whether the target is this machine (a loopback address or localhost): then client
    /// and server share its cores.
    pub fn is_loopback(&self) -> bool {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        self.unix.is_some()
            || host.eq_ignore_ascii_case("localhost")
            || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The server as a message names it: a Unix socket by its path, an IPv6 address in
    /// brackets, an address list by its first address (the one dialled first).
    pub fn server(&self) -> String {
        match &self.unix {
            Some(path) => format!("unix:{}", path.display()),
            None if self.host.contains(':') && !self.host.starts_with('[') => format!("[{}]:{}", self.host, self.port),
            None => format!("{}:{}", self.host, self.port),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.unix.is_some() {
            f.write_str(&self.server())
        } else if let Addresses::List(list) = &self.addresses {
            let scheme = if list.first().is_some_and(|a| a.is_ipv6()) { "ipv6" } else { "ipv4" };
            let list: Vec<String> = list.iter().map(|a| a.to_string()).collect();
            write!(f, "{scheme}:{}", list.join(","))
        } else if self.addresses == Addresses::Dns {
            match self.host.contains(':') {
                true => write!(f, "dns:///[{}]:{}", self.host, self.port),
                false => write!(f, "dns:///{}:{}", self.host, self.port),
            }
        } else {
            f.write_str(&self.server())
        }
    }
}

/// What every call of a run sends besides its body: the method's path, metadata, deadline.
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// e.g. "/rpcmeter.lab.v1.TestService/Cpu"
    pub path: http::uri::PathAndQuery,
    pub metadata: http::HeaderMap,
    pub deadline: Option<Duration>,
    pub messages: MessageOptions,
}

/// What goes with every call of a run but its method's path, which the schema gives: a
/// run's flags make this before any method is known (`CallOptions::spec` adds the path).
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    pub metadata: http::HeaderMap,
    pub deadline: Option<Duration>,
    pub messages: MessageOptions,
}

impl CallOptions {
    /// The call of the method at `path` with these options.
    pub fn spec(&self, path: http::uri::PathAndQuery) -> CallSpec {
        CallSpec { path, metadata: self.metadata.clone(), deadline: self.deadline, messages: self.messages }
    }
}

/// How a call's messages travel: the largest sent and received (`--max-msg-size`, gRPC's
/// usual 4 MiB) and whether requests are gzip-compressed (`--compression gzip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageOptions {
    pub send: usize,
    pub receive: usize,
    pub gzip: bool,
}

impl Default for MessageOptions {
    fn default() -> Self {
        MessageOptions { send: 4 << 20, receive: 4 << 20, gzip: false }
    }
}

/// The outcome of one call. Transport failures map to a gRPC code (UNAVAILABLE, ...).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: tonic::Code,
    /// Size of the response message(s) received, without framing.
    pub response_bytes: u64,
    /// The response message (unframed), only when asked for.
    pub response: Option<Bytes>,
    /// grpc-message or the transport error, when the status is not OK.
    pub message: Option<String>,
    /// The response's headers and trailers, only when the response is asked for too.
    pub metadata: Metadata,
}

/// A response's headers and trailers (pseudo-headers left out), as received; a
/// trailers-only response's are its trailers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    pub headers: Vec<(String, String)>,
    pub trailers: Vec<(String, String)>,
}

impl Metadata {
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn trailer(&self, key: &str) -> Option<&str> {
        self.trailers.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn of(map: &HeaderMap) -> Vec<(String, String)> {
        map.iter().map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
    }
}

impl Reply {
    /// A call that failed before or instead of a gRPC status (e.g. no connection to call on).
    pub fn error(status: Code, message: impl Into<String>) -> Reply {
        Reply {
            status,
            response_bytes: 0,
            response: None,
            message: Some(message.into()),
            metadata: Metadata::default(),
        }
    }
}

impl From<Fault> for Reply {
    fn from(fault: Fault) -> Reply {
        Reply::error(fault.code, fault.message)
    }
}

/// A `CallSpec` turned into what each call clones: the header block is built once per run,
/// not once per call. `Connection::call` is the hot path; `Connection::unary` prepares each time.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    path: PathAndQuery,
    headers: HeaderMap,
    /// The same headers HPACK-encoded for the lean transport (after its per-connection part).
    block: Bytes,
    deadline: Option<Duration>,
    messages: MessageOptions,
}

impl PreparedCall {
    pub fn new(spec: &CallSpec) -> PreparedCall {
        let mut headers = HeaderMap::with_capacity(spec.metadata.len() + 6);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(TE, HeaderValue::from_static("trailers"));
        headers.insert(USER_AGENT, HeaderValue::from_static(concat!("rpcmeter/", env!("CARGO_PKG_VERSION"))));
        if let Some(deadline) = spec.deadline {
            headers.insert(HeaderName::from_static("grpc-timeout"), grpc_timeout(deadline));
        }
        for (name, value) in &spec.metadata {
            headers.append(name, value.clone());
        }
        if spec.messages.gzip {
            headers.insert(HeaderName::from_static("grpc-encoding"), HeaderValue::from_static("gzip"));
        }
        // Answers may come gzip-compressed (wire::Deframer inflates them), as from a grpc-go
        // client; identity goes without saying. A user's own `-m grpc-accept-encoding:...` rules.
        let accept = HeaderName::from_static("grpc-accept-encoding");
        if !headers.contains_key(&accept) {
            headers.insert(accept, HeaderValue::from_static("gzip"));
        }
        let mut block = BytesMut::new();
        lean::literal(&mut block, Some(4), b":path", spec.path.as_str().as_bytes());
        for (name, value) in &headers {
            // The static table's indices of content-type and user-agent (RFC 7541, appendix A).
            let index = match name.as_str() {
                "content-type" => Some(31),
                "user-agent" => Some(58),
                _ => None,
            };
            lean::literal(&mut block, index, name.as_str().as_bytes(), value.as_bytes());
        }
        let block = block.freeze();
        PreparedCall { path: spec.path.clone(), headers, block, deadline: spec.deadline, messages: spec.messages }
    }
}

/// Built once per run: resolved address, TLS configuration, authority.
pub struct Connector {
    dial: Dial,
    scheme: Scheme,
    authority: Authority,
    tls: Option<(tokio_rustls::TlsConnector, pki_types::ServerName<'static>)>,
    timeout: Duration,
    keepalive: Option<Keepalive>,
    /// Connect with the lean transport (unary calls only) instead of h2.
    lean: bool,
    /// Spawn each connection's tasks on the thread's LocalSet instead of the runtime.
    local: bool,
}

/// Every address a TCP target names: its list as given, or what its host resolves to now
/// (a blocking look-up, as `std` does it).
pub fn resolve(target: &Target) -> anyhow::Result<Vec<SocketAddr>> {
    if let Addresses::List(list) = &target.addresses {
        return Ok(list.clone());
    }
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> =
        (host, target.port).to_socket_addrs().map_err(|e| run_failed(format!("cannot resolve {host}: {e}")))?.collect();
    if addrs.is_empty() {
        return Err(run_failed(format!("{host} resolves to no address")));
    }
    Ok(addrs)
}

/// Where connections are dialled.
enum Dial {
    /// Each resolved address in turn, the first that accepts.
    Tcp(Vec<SocketAddr>),
    Unix(std::path::PathBuf),
}

impl Connector {
    /// Resolves the target and loads TLS material; bad files are `bad_input` errors.
    pub fn new(target: &Target) -> anyhow::Result<Connector> {
        let host = target.host.trim_start_matches('[').trim_end_matches(']');
        let authority = match (&target.authority, &target.unix) {
            (Some(given), _) => given.clone(),
            (None, Some(_)) => "localhost".to_owned(),
            (None, None) if host.contains(':') => format!("[{host}]:{}", target.port),
            (None, None) => format!("{host}:{}", target.port),
        };
        let authority = Authority::try_from(authority.as_str())
            .map_err(|e| bad_input(format!("bad authority {authority}: {e}")))?;
        let dial = match &target.unix {
            Some(path) => Dial::Unix(path.clone()),
            None => Dial::Tcp(resolve(target)?),
        };
        let (scheme, tls) = match &target.tls {
            None => (Scheme::HTTP, None),
            Some(options) => {
                let name = options.servername.as_deref().unwrap_or(host);
                let name = pki_types::ServerName::try_from(name.to_owned())
                    .map_err(|e| bad_input(format!("bad server name {name}: {e}")))?;
                let config = tls::config(options)?;
                (Scheme::HTTPS, Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name)))
            }
        };
        let keepalive = target.keepalive.map(|every| Keepalive { every, timeout: target.keepalive_timeout });
        Ok(Connector {
            dial,
            scheme,
            authority,
            tls,
            timeout: target.connect_timeout,
            keepalive,
            lean: false,
            local: false,
        })
    }

    /// Connections from here on use the lean transport (`transport/lean.rs`): cheaper per
    /// call, but for unary calls only (`run`'s hot path); streaming calls need h2.
    pub fn unary_only(mut self) -> Connector {
        self.lean = true;
        self
    }

    /// Connections from here on spawn their driver on the current LocalSet (they must be
    /// opened inside one): the calls, local tasks too, then share one queue with it. A driver
    /// that wakes calls lets them run before it writes, so their next requests go out in the
    /// same write; were the calls the future `block_on` runs, the runtime would first poll the
    /// kernel (an epoll_wait) and the driver write twice. Against fortio at 8 calls in flight
    /// it cut the client's CPU per call by 14% (docs/design.md, "Calls and drivers in one queue").
    pub fn beside_local_tasks(mut self) -> Connector {
        self.local = true;
        self
    }

    /// Opens one HTTP/2 connection; its driver task is spawned on the current runtime, or
    /// LocalSet (`beside_local_tasks`).
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        self.connect_to(None).await.map(|(connection, _)| connection)
    }

    /// The addresses the target resolved to when the connector was made (none for a Unix socket).
    pub fn addresses(&self) -> &[SocketAddr] {
        match &self.dial {
            Dial::Tcp(addrs) => addrs,
            Dial::Unix(_) => &[],
        }
    }

    /// `connect`, dialling `addrs` (the first that accepts) instead of the target's own
    /// addresses when given; also says which address answered (None for a Unix socket).
    pub async fn connect_to(&self, addrs: Option<&[SocketAddr]>) -> anyhow::Result<(Connection, Option<SocketAddr>)> {
        let opened = tokio::time::timeout(self.timeout, self.open(addrs)).await;
        let whom = match (addrs, &self.dial) {
            (Some([one]), _) => one.to_string(),
            // Its authority is `localhost`: the socket is named by its path, as it was given.
            (_, Dial::Unix(path)) => format!("unix:{}", path.display()),
            _ => self.authority.to_string(),
        };
        opened
            .unwrap_or_else(|_| Err(format!("no answer within {:?} (--connect-timeout)", self.timeout)))
            .map_err(|e| run_failed(format!("cannot connect to {whom}: {e}")))
    }

    async fn open(&self, addrs: Option<&[SocketAddr]>) -> Result<(Connection, Option<SocketAddr>), String> {
        match &self.dial {
            Dial::Tcp(own) => {
                let tcp = TcpStream::connect(addrs.unwrap_or(&own[..])).await.map_err(|e| e.to_string())?;
                tcp.set_nodelay(true).map_err(|e| e.to_string())?;
                let peer = tcp.peer_addr().ok();
                self.over(tcp).await.map(|c| (c, peer))
            }
            Dial::Unix(path) => {
                let socket = tokio::net::UnixStream::connect(path).await.map_err(|e| e.to_string())?;
                self.over(socket).await.map(|c| (c, None))
            }
        }
    }

    /// TLS (when asked) and HTTP/2 over a connected stream.
    async fn over<S>(&self, io: S) -> Result<Connection, String>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        match &self.tls {
            None => self
                .handshake(io)
                .await
                .map_err(|e| format!("{e} (a TLS server? then drop --plaintext; gRPC also needs HTTP/2, not HTTP/1)")),
            Some((connector, name)) => {
                let tls = connector.connect(name.clone(), io).await.map_err(|e| match e.to_string() {
                    // What rustls reads when the server answers in plaintext HTTP/2 or HTTP/1.
                    text if text.contains("InvalidContentType") || text.contains("corrupt message") => {
                        format!("TLS: {text} (the server speaks plaintext, not TLS: add --plaintext)")
                    }
                    text => format!("TLS: {text}"),
                })?;
                // No ALPN answer is tolerated (some servers speak h2 without saying so).
                match tls.get_ref().1.alpn_protocol() {
                    // TLS 1.3 servers check a client certificate after the client's handshake
                    // ends, so a missing or refused one shows only as HTTP/2 fails.
                    None | Some(b"h2") => self.handshake(tls).await.map_err(|e| {
                        format!(
                            "{e} (closed right after TLS: does the server want a client certificate? --cert, --key)"
                        )
                    }),
                    Some(other) => Err(format!("server chose {} instead of h2", String::from_utf8_lossy(other))),
                }
            }
        }
    }

    /// HTTP/2 over a connected (and maybe TLS) stream, with the transport chosen.
    async fn handshake<T>(&self, io: T) -> Result<Connection, String>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let closed = Arc::new(AtomicBool::new(false));
        let engine = if self.lean {
            let block = lean::connection_block(self.scheme == Scheme::HTTPS, self.authority.as_str());
            Engine::Lean(Arc::new(lean::handshake(io, block, closed.clone(), self.keepalive, self.local).await?))
        } else {
            let sender = h2_handshake(io, self.keepalive, closed.clone(), self.local).await?;
            Engine::H2 { sender, scheme: self.scheme.clone(), authority: self.authority.clone() }
        };
        Ok(Connection { engine, closed })
    }
}

/// When keepalive PINGs go out and how long each may go unanswered.
#[derive(Debug, Clone, Copy)]
struct Keepalive {
    every: Duration,
    timeout: Duration,
}

impl Keepalive {
    /// Why calls ended on a PING gone unanswered, in the same words for both engines.
    fn unanswered(&self) -> String {
        format!("keepalive PING unanswered within {:?}", self.timeout)
    }
}

/// Spawns one of a connection's tasks where its calls run (`Connector::beside_local_tasks`).
fn spawn_beside_calls(local: bool, task: impl std::future::Future<Output = ()> + Send + 'static) {
    if local {
        tokio::task::spawn_local(task);
    } else {
        tokio::spawn(task);
    }
}

async fn h2_handshake<T>(
    io: T,
    keepalive: Option<Keepalive>,
    closed: Arc<AtomicBool>,
    local: bool,
) -> Result<SendRequest<Bytes>, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let lapse = keepalive.map(|_| Arc::new(Lapse::default()));
    // Windows larger than the 64 KiB default so large responses are not throttled by
    // WINDOW_UPDATE round trips; small ones never notice.
    let (sender, mut driver) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake::<_, Bytes>(Coalesce::new(io, lapse.clone()))
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    let mut ping = driver.ping_pong().expect("ping_pong is taken once, here");
    let flag = closed.clone();
    spawn_beside_calls(local, async move {
        let _ = driver.await;
        flag.store(true, Ordering::Relaxed);
    });
    // One round trip before the first call: the server's SETTINGS precede its PONG, so the
    // calls then keep to its stream limit instead of being refused while it is unknown.
    ping.ping(h2::Ping::opaque()).await.map_err(|e| format!("HTTP/2: {e}"))?;
    if let (Some(times), Some(lapse)) = (keepalive, lapse) {
        // A PING every `every`; one unanswered in time means the peer is gone: the connection
        // is closed, its calls end UNAVAILABLE, and the next call reconnects.
        let flag = closed.clone();
        spawn_beside_calls(local, async move {
            loop {
                tokio::time::sleep(times.every).await;
                let answered = tokio::time::timeout(times.timeout, ping.ping(h2::Ping::opaque())).await;
                if matches!(answered, Ok(Ok(_))) && !flag.load(Ordering::Relaxed) {
                    continue;
                }
                flag.store(true, Ordering::Relaxed);
                if answered.is_err() {
                    // h2 would wait on a silent peer forever: its socket fails from here on.
                    lapse.set(times.unanswered());
                }
                break;
            }
        });
    }
    Ok(sender)
}

/// Why the keepalive gave up on an h2 connection, once it has. h2's client cannot end a
/// connection with a reason of ours, so from then on its socket fails every read, write and
/// flush with this one: h2 ends the calls in flight as on a broken socket (UNAVAILABLE), with
/// the lean engine's message.
#[derive(Default)]
struct Lapse {
    why: std::sync::OnceLock<String>,
    /// h2's driver, woken to see the failure: a silent peer would never wake it.
    driver: futures::task::AtomicWaker,
}

impl Lapse {
    fn set(&self, why: String) {
        let _ = self.why.set(why);
        self.driver.wake();
    }

    /// The failure once the keepalive gave up; until then the driver is woken when it does.
    fn check(&self, cx: &Context<'_>) -> std::io::Result<()> {
        self.driver.register(cx.waker());
        match self.why.get() {
            Some(why) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why.clone())),
            None => Ok(()),
        }
    }
}

/// The connection under h2, holding back for one turn of the scheduler a flush that carries
/// only control frames right after a read. h2 flushes at the end of every poll of its driver:
/// a read that brings a server's PING (grpc-go sends one per round of data for its BDP
/// estimate) with responses would send the PING ACK alone and, once the woken calls have run,
/// their next requests in a second write. Letting those calls run first makes it one write;
/// a flush with requests in it goes at once, so no call waits for this.
struct Coalesce<T> {
    io: T,
    pending: BytesMut,
    /// Data came in since the last flush: the calls it woke may have requests to add.
    read: bool,
    /// The data pending has had its one turn of waiting (so reads cannot hold it back longer).
    waited: bool,
    /// With keepalive on: fails every read, write and flush once a PING went unanswered
    /// (all three: h2 may be waiting on any of them).
    lapse: Option<Arc<Lapse>>,
}

/// Beyond this much unwritten data, writes wait for the socket (backpressure for h2).
const COALESCE_LIMIT: usize = 256 << 10;

impl<T> Coalesce<T> {
    fn new(io: T, lapse: Option<Arc<Lapse>>) -> Self {
        Coalesce { io, pending: BytesMut::with_capacity(16 << 10), read: false, waited: false, lapse }
    }

    fn check_lapse(&self, cx: &Context<'_>) -> std::io::Result<()> {
        self.lapse.as_ref().map_or(Ok(()), |lapse| lapse.check(cx))
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.pending.is_empty() {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &self.pending))? {
                0 => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                n => self.pending.advance(n),
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// True for a non-empty run of whole PING, WINDOW_UPDATE and SETTINGS frames: what an h2
/// client writes on its own, with no request in it.
fn only_control_frames(mut bytes: &[u8]) -> bool {
    const SETTINGS: u8 = 4;
    const PING: u8 = 6;
    const WINDOW_UPDATE: u8 = 8;
    if bytes.is_empty() {
        return false;
    }
    while let [l0, l1, l2, kind, _, _, _, _, _, rest @ ..] = bytes {
        let len = u32::from_be_bytes([0, *l0, *l1, *l2]) as usize;
        if !matches!(*kind, SETTINGS | PING | WINDOW_UPDATE) || rest.len() < len {
            return false;
        }
        bytes = &rest[len..];
    }
    bytes.is_empty()
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.check_lapse(cx)?;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        this.read |= buf.filled().len() > before;
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.check_lapse(cx)?;
        if this.pending.len() >= COALESCE_LIMIT {
            ready!(this.poll_drain(cx))?;
        }
        this.pending.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.check_lapse(cx)?;
        if std::mem::take(&mut this.read) && !this.waited && only_control_frames(&this.pending) {
            // yield_now's wake-up is deferred until the tasks woken so far have run.
            this.waited = true;
            let _ = std::pin::pin!(tokio::task::yield_now()).poll(cx);
            return Poll::Pending;
        }
        ready!(this.poll_drain(cx))?;
        this.waited = false;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// One HTTP/2 connection; cheap to clone, calls on clones share it.
#[derive(Clone)]
pub struct Connection {
    engine: Engine,
    /// Set by the driver task when it ends, or by a call that saw the connection fail.
    closed: Arc<AtomicBool>,
}

/// Which HTTP/2 implementation carries the connection's calls.
#[derive(Clone)]
enum Engine {
    H2 { sender: SendRequest<Bytes>, scheme: Scheme, authority: Authority },
    Lean(Arc<lean::Handle>),
}

impl Connection {
    /// One unary call with an already framed request body.
    pub async fn unary(&self, spec: &CallSpec, framed_request: Bytes, keep_response: bool) -> Reply {
        self.send(&PreparedCall::new(spec), framed_request, keep_response).await
    }

    /// `unary` for the hot path: the call's headers are prepared once, in `call`. `send`'s own
    /// future, not one more around it: each layer is a future built and moved (a memcpy) on
    /// every call (docs/design.md, "The call path").
    pub fn call<'a>(
        &'a self,
        call: &'a PreparedCall,
        framed_request: Bytes,
        keep_response: bool,
    ) -> impl Future<Output = Reply> + 'a {
        self.send(call, framed_request, keep_response)
    }

    /// True once the connection can carry no more calls (peer gone, GOAWAY).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    async fn send(&self, call: &PreparedCall, body: Bytes, keep: bool) -> Reply {
        let size = body.len().saturating_sub(5);
        if size > call.messages.send {
            // As grpc-go says it: the call fails without being sent.
            let why = format!("trying to send message larger than max ({size} vs. {})", call.messages.send);
            return Reply::error(Code::ResourceExhausted, why);
        }
        let body = if call.messages.gzip { super::wire::gzip_frame(&body) } else { body };
        match &self.engine {
            Engine::Lean(lean) => within_deadline(call.deadline, lean.call(call, body, keep)).await,
            // h2 takes a HeaderMap of its own per request. Boxed: h2's exchange is about a KiB
            // of future, which a lean call's would otherwise carry and move on every call
            // (docs/design.md, "The call path"); h2 allocates per request anyway.
            Engine::H2 { .. } => {
                let exchange = self.exchange(&call.path, call.headers.clone(), body, keep, call.messages.receive);
                within_deadline(call.deadline, Box::pin(exchange)).await
            }
        }
    }

    /// The POST of a gRPC call to `path`.
    fn request(scheme: &Scheme, authority: &Authority, path: &PathAndQuery, headers: HeaderMap) -> Request<()> {
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(scheme.clone());
        uri.authority = Some(authority.clone());
        uri.path_and_query = Some(path.clone());
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = Uri::from_parts(uri).expect("scheme, authority and path are set");
        *request.headers_mut() = headers;
        request
    }

    /// Opens one HTTP/2 stream for a call; its body is sent by the caller.
    async fn open(
        &self,
        path: &PathAndQuery,
        headers: HeaderMap,
    ) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), Reply> {
        // ready() waits for a free stream slot, so calls share the connection up to the
        // server's max concurrent streams instead of queueing inside h2.
        let Engine::H2 { sender, scheme, authority } = &self.engine else {
            return Err(Reply::error(Code::Unimplemented, "streaming calls need an h2 connection, not a lean one"));
        };
        let mut sender = sender.clone().ready().await.map_err(|e| self.failure(&e))?;
        let request = Self::request(scheme, authority, path, headers);
        sender.send_request(request, false).map_err(|e| self.failure(&e))
    }

    async fn exchange(&self, path: &PathAndQuery, headers: HeaderMap, body: Bytes, keep: bool, max: usize) -> Reply {
        let (response, mut stream) = match self.open(path, headers).await {
            Ok(pair) => pair,
            Err(reply) => return reply,
        };
        if let Err(e) = stream.send_data(body, true) {
            return self.failure(&e);
        }
        let response = match response.await {
            Ok(response) => response,
            Err(e) => return self.failure(&e),
        };
        if response.status() != StatusCode::OK {
            return Reply::error(http_status_code(response.status()), format!("HTTP status {}", response.status()));
        }
        // Trailers-only response: the status is in the headers and there is no body.
        if response.headers().contains_key("grpc-status") {
            let mut reply = finish(response.headers(), &Deframer::default(), None, Some(1));
            if keep {
                reply.metadata.trailers = Metadata::of(response.headers());
            }
            return reply;
        }
        let headers = keep.then(|| Metadata::of(response.headers()));
        let mut body = response.into_body();
        let mut messages = Deframer::new(max);
        let mut kept = keep.then(Vec::new);
        while let Some(chunk) = body.data().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => return self.failure(&e),
            };
            if let Err(fault) = messages.feed(&chunk, kept.as_mut()) {
                // Dropping the stream resets it: the rest is not read.
                return fault.into();
            }
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = match body.trailers().await {
            Ok(Some(trailers)) => trailers,
            Ok(None) => return Reply::error(Code::Internal, "stream ended without trailers"),
            Err(e) => return self.failure(&e),
        };
        let mut reply = finish(&trailers, &messages, kept, Some(1));
        if let Some(headers) = headers {
            reply.metadata = Metadata { headers, trailers: Metadata::of(&trailers) };
        }
        reply
    }

    /// An h2 error as a gRPC outcome; a connection-level one marks the connection closed.
    fn failure(&self, err: &h2::Error) -> Reply {
        if err.is_go_away() || err.is_io() {
            self.closed.store(true, Ordering::Relaxed);
        }
        h2_failure(err)
    }
}

/// A call's exchange, ended DEADLINE_EXCEEDED when `deadline` passes first; the deadline
/// covers the whole call, a stream's every message included, as grpc-timeout does. Dropping
/// the exchange on expiry resets its stream (RST_STREAM CANCEL).
async fn within_deadline(deadline: Option<Duration>, exchange: impl Future<Output = Reply>) -> Reply {
    let Some(d) = deadline else { return exchange.await };
    let end = tokio::time::Instant::now() + d;
    let expired = || Reply::error(Code::DeadlineExceeded, "deadline exceeded (local)");
    match tokio::time::timeout_at(end, exchange).await {
        // Our timer is a millisecond coarse (and late on a busy client), so an answer may be
        // read after the deadline before it fires: a call that ends after its deadline ended
        // by it, whatever it brought, as grpc-go's client says (tests/transport.rs, a deadline
        // below the timer tick). That covers a server's reset at the deadline too (grpc-go's
        // server resets with CANCEL; tests/transport_corners.rs). Same words as the timer's,
        // so a run's error list does not split one cause by which side noticed it first.
        Ok(_) if tokio::time::Instant::now() >= end => expired(),
        Ok(reply) => reply,
        Err(_) => expired(),
    }
}

/// An h2 error as a gRPC outcome: a stream reset by the peer maps per gRPC's HTTP/2 error
/// code table; anything else (refused, GOAWAY, I/O, closed) is UNAVAILABLE.
fn h2_failure(err: &h2::Error) -> Reply {
    match err.reason() {
        Some(reason) if err.is_reset() && err.is_remote() => Reply::error(reset_code(reason), err.to_string()),
        Some(reason) if err.is_go_away() && err.is_remote() => {
            // h2 shows the debug data only in its Display, as ` (b"...")`.
            let text = err.to_string();
            let debug = text.split_once(" (b\"").and_then(|(_, rest)| rest.strip_suffix("\")")).unwrap_or("");
            Reply::error(Code::Unavailable, goaway_message(reason, debug))
        }
        _ => Reply::error(Code::Unavailable, err.to_string()),
    }
}

/// Why calls ended on a server's GOAWAY, in the same words for both engines, so that a run's
/// errors (counted by status and message) do not depend on which one carried the call.
fn goaway_message(reason: h2::Reason, debug: &str) -> String {
    match debug.is_empty() {
        true => format!("connection closed by the server (GOAWAY {reason})"),
        false => format!("connection closed by the server (GOAWAY {reason}: {debug})"),
    }
}

/// gRPC's code for a stream reset by the peer with `reason` (its HTTP/2 error code table).
fn reset_code(reason: h2::Reason) -> Code {
    match reason {
        h2::Reason::REFUSED_STREAM => Code::Unavailable,
        h2::Reason::CANCEL => Code::Cancelled,
        h2::Reason::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
        h2::Reason::INADEQUATE_SECURITY => Code::PermissionDenied,
        _ => Code::Internal,
    }
}

/// The reply that `grpc-status`/`grpc-message` say (in trailers, or in the headers of a
/// trailers-only response), given the messages that came before them: an OK must bring
/// `expected` whole messages (unary and client-streaming calls: one) when given.
fn finish(map: &HeaderMap, messages: &Deframer, kept: Option<Vec<u8>>, expected: Option<u64>) -> Reply {
    let status = map.get("grpc-status").map(|s| Code::from_bytes(s.as_bytes()));
    let message = map.get("grpc-message").map(|m| percent_decode(m.as_bytes()));
    status_reply(status, message, messages, kept, expected)
}

/// `finish` given the decoded `grpc-status` and `grpc-message`.
fn status_reply(
    status: Option<Code>,
    message: Option<String>,
    messages: &Deframer,
    kept: Option<Vec<u8>>,
    expected: Option<u64>,
) -> Reply {
    let response = kept.map(Bytes::from);
    let Some(status) = status else {
        return Reply { response, ..Reply::error(Code::Unknown, "no grpc-status in trailers") };
    };
    let message = if status != Code::Ok {
        message
    } else if expected.is_some_and(|n| messages.count != n) || !messages.complete() {
        // A unary OK carries exactly one whole message; anything else is a broken server.
        let problem = match messages.count {
            0 => "OK without a response message".to_owned(),
            _ if !messages.complete() => "response message cut short".to_owned(),
            n => format!("{n} response messages to a unary call"),
        };
        return Reply { response, ..Reply::error(Code::Internal, problem) };
    } else {
        None
    };
    Reply { status, response_bytes: messages.payload, response, message, metadata: Metadata::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_control_frame_flush_right_after_a_read_waits_one_turn() {
        use futures::FutureExt;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, mut far) = tokio::io::duplex(1024);
        let mut io = Coalesce::new(near, None);
        let ping_ack: &[u8] = &[0, 0, 8, 6, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let request: &[u8] = &[0, 0, 1, 1, 4, 0, 0, 0, 1, 0x83];
        let mut read_one = async |io: &mut Coalesce<_>| {
            far.write_all(b"x").await.unwrap();
            io.read_exact(&mut [0]).await.unwrap();
        };
        io.write_all(ping_ack).await.unwrap();
        assert!(io.flush().now_or_never().is_some(), "nothing read: written at once");
        read_one(&mut io).await;
        io.write_all(request).await.unwrap();
        assert!(io.flush().now_or_never().is_some(), "a request: written at once");
        read_one(&mut io).await;
        io.write_all(ping_ack).await.unwrap();
        assert!(io.flush().now_or_never().is_none(), "a PING ACK just after a read waits a turn");
        io.write_all(request).await.unwrap();
        io.flush().await.unwrap();
        let mut written = vec![0; 2 * ping_ack.len() + 2 * request.len()];
        far.read_exact(&mut written).await.unwrap();
        assert_eq!(written, [ping_ack, request, ping_ack, request].concat());
    }

    #[test]
    fn control_frames_are_told_from_requests() {
        let ping_ack = [0, 0, 8, 6, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let window_update = [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 1, 0, 0];
        let headers = [0, 0, 1, 1, 4, 0, 0, 0, 1, 0x83];
        assert!(only_control_frames(&[&ping_ack[..], &window_update].concat()));
        assert!(!only_control_frames(&[&ping_ack[..], &headers].concat()));
        assert!(!only_control_frames(&ping_ack[..12]));
        assert!(!only_control_frames(&[]));
    }
}
