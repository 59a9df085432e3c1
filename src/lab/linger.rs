//! How the lab closes a connection: a lingering close (tests/serve_h2.rs). A socket closed
//! while bytes of the client's lie unread in it is reset by the kernel, not closed (RST, not
//! FIN: RFC 2525 section 2.17), and a reset may make the client's kernel discard what the
//! server sent just before, a GOAWAY among them. h2's server (0.4, `ReadPreface`) reads exactly
//! the 24 bytes of the client's preface and, when they are wrong, fails the handshake without a
//! GOAWAY (RFC 9113 section 3.4 allows that); hyper then drops the socket with the rest of
//! what the client sent unread, and h2spec's http2/3.5/2 read ECONNRESET where it wants the
//! connection closed. Neither crate has a setting for it, so the close is done here, on the
//! socket under them: once hyper has let go of a connection whose client has not ended its
//! side, the server's side is ended (FIN) and the client's bytes are read and dropped until it
//! ends its side too, for at most `LINGER` and `LINGER_BYTES`, then the socket is closed.
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How long a closing connection waits for the client to end its side.
const LINGER: Duration = Duration::from_secs(1);
/// How much of what the client still sends a closing connection reads (and drops).
const LINGER_BYTES: u64 = 64 * 1024;

/// A connection's socket, as tonic's server reads and writes it, closed lingering when dropped.
pub struct Lingering {
    /// Always there until `drop` takes it.
    stream: Option<TcpStream>,
    /// The client ended its side (a read found the end) or the socket failed: nothing to linger for.
    read_ended: bool,
}

impl Lingering {
    pub fn new(stream: TcpStream) -> Self {
        Lingering { stream: Some(stream), read_ended: false }
    }

    fn stream(&mut self) -> io::Result<Pin<&mut TcpStream>> {
        match self.stream.as_mut() {
            Some(stream) => Ok(Pin::new(stream)),
            None => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }
}

impl AsyncRead for Lingering {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let (before, room) = (buf.filled().len(), buf.remaining());
        let read = std::task::ready!(self.stream()?.poll_read(cx, buf));
        if read.is_err() || (room > 0 && buf.filled().len() == before) {
            self.read_ended = true;
        }
        Poll::Ready(read)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stream()?.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.stream()?.poll_write_vectored(cx, bufs)
    }

    /// As the socket's, so that h2 still writes a read's answers in one `writev` (network.rs).
    fn is_write_vectored(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream()?.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream()?.poll_shutdown(cx)
    }
}

/// The socket's addresses, which the lab reads (`Stats/Reset` answers only its loopback).
impl Connected for Lingering {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match &self.stream {
            Some(stream) => stream.connect_info(),
            None => TcpConnectInfo { local_addr: None, remote_addr: None },
        }
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else { return };
        if self.read_ended {
            return;
        }
        // Dropped outside a runtime (never, in the lab): the socket closes at once, as before.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(linger(stream));
    }
}

/// Ends the server's side at once, so that the client reads the end now, then reads until the
/// client ends its side too, within the bounds; the socket closes when this returns.
async fn linger(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let (mut rest, mut dropped) = ((&mut stream).take(LINGER_BYTES), tokio::io::sink());
    let _ = tokio::time::timeout(LINGER, tokio::io::copy(&mut rest, &mut dropped)).await;
}
