//! The network's own round trip, measured beside gRPC by `rpcmeter ping` (docs/experiments.md,
//! "Ping vs gRPC latency"): an ICMP echo where the system lets this process send one, else
//! TCP connect time. In order of preference (`Method::Auto`):
//! 1. a datagram ICMP socket (`socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)`), which Linux
//!    allows to groups in `net.ipv4.ping_group_range`, without privileges;
//! 2. a raw ICMP socket (root, or CAP_NET_RAW);
//! 3. the system's `ping -c 1`, timed by ping itself (its `time=` field);
//! 4. the time a TCP connection to the target's port takes to be accepted (SYN to SYN-ACK, one
//!    round trip plus the kernel's accept path: not ICMP, and said so).
//!
//! Each probe is one blocking exchange with its own timeout; the caller spaces them.
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{ErrorKind, Read};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// How the network round trip is measured (`--icmp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// The first of the others that works here.
    Auto,
    /// Unprivileged ICMP datagram socket.
    Datagram,
    /// Raw ICMP socket (root or CAP_NET_RAW).
    Raw,
    /// The system's `ping` program, one echo per sample.
    System,
    /// TCP connect time to the target's port.
    Tcp,
}

impl Method {
    /// As `--icmp` takes it.
    pub fn flag(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Datagram => "datagram",
            Method::Raw => "raw",
            Method::System => "system",
            Method::Tcp => "tcp",
        }
    }

    /// As reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Datagram => "icmp-datagram",
            Method::Raw => "icmp-raw",
            Method::System => "system-ping",
            Method::Tcp => "tcp-connect",
        }
    }

    /// What a reader should know about the numbers of this method.
    pub fn describe(self) -> &'static str {
        match self {
            Method::Auto => "",
            Method::Datagram => "ICMP echo, datagram socket (unprivileged)",
            Method::Raw => "ICMP echo, raw socket",
            Method::System => "ICMP echo by the system's ping (its own time= field)",
            Method::Tcp => "TCP connect time (no ICMP available here: SYN to SYN-ACK plus the kernel's accept path)",
        }
    }
}

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Answered(Duration),
    /// No answer within the timeout, or an error answer; the reason in words.
    Lost(String),
}

/// A ready prober of one method against one address.
pub struct Prober {
    method: Method,
    address: SocketAddr,
    socket: Option<Socket>,
    /// ICMP identifier (raw sockets: ours to choose; datagram: the kernel's).
    id: u16,
    sequence: u16,
    timeout: Duration,
}

impl Prober {
    /// Opens the prober of `method` (`Auto`: the first that works here, each tried once with
    /// a real echo of the target); the error says why the method asked for cannot be used.
    pub fn open(method: Method, address: SocketAddr, timeout: Duration) -> anyhow::Result<Prober> {
        let new = |m: Method| Prober { method: m, address, socket: None, id: 0, sequence: 0, timeout };
        match method {
            Method::Auto => {
                for m in [Method::Datagram, Method::Raw, Method::System] {
                    if let Ok(mut p) = Prober::open(m, address, timeout) {
                        // A method that opens but gets no answer (a firewall dropping ICMP) is
                        // no baseline: the next one is tried.
                        if matches!(p.probe(), Outcome::Answered(_)) {
                            return Ok(p);
                        }
                    }
                }
                Prober::open(Method::Tcp, address, timeout)
            }
            Method::Datagram | Method::Raw => {
                let IpAddr::V4(_) = address.ip() else {
                    anyhow::bail!("--icmp {}: only IPv4 targets ({} is IPv6)", method.flag(), address.ip());
                };
                let kind = if method == Method::Datagram { Type::DGRAM } else { Type::RAW };
                let socket = Socket::new(Domain::IPV4, kind, Some(Protocol::ICMPV4)).map_err(|e| {
                    let hint = match method {
                        Method::Datagram => "net.ipv4.ping_group_range does not include this process's group",
                        _ => "raw sockets need root or CAP_NET_RAW",
                    };
                    anyhow::anyhow!("--icmp {}: {e} ({hint})", method.flag())
                })?;
                socket.set_read_timeout(Some(timeout))?;
                let mut p = new(method);
                p.id = (std::process::id() & 0xffff) as u16;
                p.socket = Some(socket);
                Ok(p)
            }
            Method::System => {
                let found = Command::new("ping").arg("-V").output();
                match found {
                    Ok(_) => Ok(new(method)),
                    Err(e) => anyhow::bail!("--icmp system: cannot run ping: {e}"),
                }
            }
            Method::Tcp => Ok(new(method)),
        }
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// One probe, waiting at most the timeout.
    pub fn probe(&mut self) -> Outcome {
        self.sequence = self.sequence.wrapping_add(1);
        let result = match self.method {
            Method::Datagram | Method::Raw => self.icmp(),
            Method::System => self.system(),
            Method::Tcp | Method::Auto => self.tcp(),
        };
        result.unwrap_or_else(|why| Outcome::Lost(why.to_string()))
    }

    fn icmp(&mut self) -> anyhow::Result<Outcome> {
        let socket = self.socket.as_mut().ok_or_else(|| anyhow::anyhow!("no socket"))?;
        let raw = self.method == Method::Raw;
        let packet = echo_request(self.id, self.sequence);
        let to = SockAddr::from(SocketAddr::new(self.address.ip(), 0));
        let sent = Instant::now();
        socket.send_to(&packet, &to)?;
        let mut buf = [0u8; 1500];
        loop {
            let left = self.timeout.saturating_sub(sent.elapsed());
            if left.is_zero() {
                return Ok(Outcome::Lost(format!("no echo reply within {}", humantime::format_duration(self.timeout))));
            }
            socket.set_read_timeout(Some(left))?;
            let n = match socket.read(&mut buf) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
                Err(e) => return Err(e.into()),
            };
            let took = sent.elapsed();
            // A raw socket hands over the IP header too, and every ICMP message of the host
            // (on loopback, our own request as well): only our reply counts.
            let icmp = if raw { &buf[ip_header_length(&buf[..n])..n] } else { &buf[..n] };
            if let Some(reply) = parse_reply(icmp) {
                // The kernel picks a datagram socket's identifier and only hands it its own replies.
                if reply.sequence == self.sequence && (!raw || reply.id == self.id) {
                    return Ok(Outcome::Answered(took));
                }
            }
        }
    }

    fn system(&self) -> anyhow::Result<Outcome> {
        let wait = self.timeout.as_secs().max(1).to_string();
        let out =
            Command::new("ping").args(["-n", "-c", "1", "-W", &wait]).arg(self.address.ip().to_string()).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(match system_ping_time(&text) {
            Some(t) => Outcome::Answered(t),
            None => Outcome::Lost("ping got no reply".into()),
        })
    }

    fn tcp(&self) -> anyhow::Result<Outcome> {
        let sent = Instant::now();
        let connected = TcpStream::connect_timeout(&self.address, self.timeout);
        let took = sent.elapsed();
        Ok(match connected {
            Ok(_) => Outcome::Answered(took),
            Err(e) => Outcome::Lost(format!("TCP connect: {e}")),
        })
    }
}

/// An ICMP echo request: type 8, code 0, checksum, identifier, sequence, 16 bytes of payload.
pub fn echo_request(id: u16, sequence: u16) -> Vec<u8> {
    let mut p = vec![8, 0, 0, 0];
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&sequence.to_be_bytes());
    p.extend_from_slice(b"rpcmeter ping...");
    let sum = checksum(&p);
    p[2..4].copy_from_slice(&sum.to_be_bytes());
    p
}

/// The Internet checksum (RFC 1071): the ones' complement of the ones' complement sum of
/// 16-bit words.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[derive(Debug, PartialEq)]
pub struct Reply {
    pub id: u16,
    pub sequence: u16,
}

/// An ICMP echo reply (type 0) at the start of `icmp`.
pub fn parse_reply(icmp: &[u8]) -> Option<Reply> {
    (icmp.len() >= 8 && icmp[0] == 0 && icmp[1] == 0)
        .then(|| Reply { id: u16::from_be_bytes([icmp[4], icmp[5]]), sequence: u16::from_be_bytes([icmp[6], icmp[7]]) })
}

/// The length of the IPv4 header at the start of `packet` (IHL x 4); the whole packet when
/// it is too short to hold one.
fn ip_header_length(packet: &[u8]) -> usize {
    packet.first().map_or(0, |b| usize::from(b & 0x0f) * 4).min(packet.len())
}

/// `time=0.045 ms` in ping's output, read exactly (decimal digits, no float rounding).
pub fn system_ping_time(output: &str) -> Option<Duration> {
    let after = output.split("time=").nth(1)?;
    let number: String = after.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let unit = after[number.len()..].trim_start();
    // Digits after the point that make whole nanoseconds: 6 for ms, 3 for µs.
    let places = if unit.starts_with("ms") {
        6
    } else if unit.starts_with("us") || unit.starts_with("µs") {
        3
    } else {
        return None;
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((&number, ""));
    if whole.is_empty() || fraction.len() > places || fraction.contains('.') {
        return None;
    }
    let scale = 10u64.pow(places as u32);
    let fraction_nanos = format!("{fraction:0<places$}").parse::<u64>().ok()?;
    Some(Duration::from_nanos(whole.parse::<u64>().ok()?.checked_mul(scale)?.checked_add(fraction_nanos)?))
}

/// The first address of `host:port`, IPv4 preferred (ICMP here speaks IPv4 only).
pub fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let all: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    all.iter().find(|a| a.is_ipv4()).or(all.first()).copied().ok_or_else(|| anyhow::anyhow!("{host} has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_request_checks_out() {
        let p = echo_request(0x1234, 7);
        assert_eq!((p[0], p[1]), (8, 0));
        // A packet with its checksum in place sums to zero.
        assert_eq!(checksum(&p), 0);
        // RFC 1071's example: the words sum to 0xddf2 after the carries fold in.
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2u16);
        let mut reply = p.clone();
        reply[0] = 0;
        assert_eq!(parse_reply(&reply), Some(Reply { id: 0x1234, sequence: 7 }));
        assert_eq!(parse_reply(&p), None, "a request is not a reply");
        assert_eq!(ip_header_length(&[0x45, 0, 0]), 3);
        assert_eq!(ip_header_length(&[0x45; 40]), 20);
    }

    #[test]
    fn system_ping_output_is_read() {
        let out = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.045 ms\n";
        assert_eq!(system_ping_time(out), Some(Duration::from_nanos(45_000)));
        assert_eq!(system_ping_time("no answer"), None);
        assert_eq!(system_ping_time("time=12.5 ms"), Some(Duration::from_micros(12_500)));
        assert_eq!(system_ping_time("time=1 ms"), Some(Duration::from_millis(1)));
        assert_eq!(system_ping_time("time=1.2.3 ms"), None);
    }

    #[test]
    fn tcp_connect_time_against_a_listener() {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut p = Prober::open(Method::Tcp, listener.local_addr().unwrap(), Duration::from_secs(1)).unwrap();
        assert!(matches!(p.probe(), Outcome::Answered(d) if d < Duration::from_secs(1)));
        drop(listener);
        assert!(matches!(p.probe(), Outcome::Lost(_)));
    }
}
