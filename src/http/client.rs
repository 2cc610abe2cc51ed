//! Who a request comes from, for the limits per client (the app's sign-ins): the address of
//! the connection's peer, which the accept loop tells the requests of `/app` (and only
//! those: the API's requests carry nothing more), or, when that peer is a proxy the operator
//! trusts (`--trusted-proxies`), the address the proxy appended to `X-Forwarded-For` (the
//! last one: any before it came from the client and prove nothing). A request whose peer is
//! not trusted is its peer, whatever it says.
//!
//! Must not touch: what the limits are (`service::client_limits`), routing.

use std::net::IpAddr;

use warp::http::{HeaderMap, Request};

/// The address of a connection's peer, as a request extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddress(pub IpAddr);

/// A request handler that tells the app's requests which peer they came from.
#[derive(Clone)]
pub struct WithPeer<H> {
    handler: H,
    peer: PeerAddress,
}

impl<H> WithPeer<H> {
    /// `handler` for the requests of a connection from `peer`.
    pub fn new(handler: H, peer: IpAddr) -> WithPeer<H> {
        WithPeer {
            handler,
            peer: PeerAddress(peer),
        }
    }
}

impl<H, B> hyper::service::Service<Request<B>> for WithPeer<H>
where
    H: hyper::service::Service<Request<B>>,
{
    type Response = H::Response;
    type Error = H::Error;
    type Future = H::Future;

    fn call(&self, mut request: Request<B>) -> Self::Future {
        // Only the app asks (an extension costs an allocation, which the API's hot path is
        // spared).
        if crate::app::owns(request.uri().path()) {
            request.extensions_mut().insert(self.peer);
        }
        self.handler.call(request)
    }
}

/// The client's address: the forwarded one when `peer` is one of `trusted`, else `peer`;
/// `None` without a peer (a request made in-process).
pub fn client_address(
    peer: Option<PeerAddress>,
    headers: &HeaderMap,
    trusted: &[IpAddr],
) -> Option<IpAddr> {
    let PeerAddress(peer) = peer?;
    if !trusted.contains(&canonical(peer)) {
        return Some(peer);
    }
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .next_back()
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.rsplit(',').next())
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    Some(forwarded.unwrap_or(peer))
}

/// An IPv4 address as itself when it arrives IPv4-mapped on an IPv6 socket.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warp::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn only_a_trusted_proxy_says_who_the_client_is_and_only_with_its_own_entry() {
        let proxy = ip("10.0.0.5");
        let trusted = [proxy];
        let peer = Some(PeerAddress(proxy));
        // The proxy appends its client to whatever the client sent.
        let headers = forwarded(&["203.0.113.9, 198.51.100.1", "192.0.2.7"]);
        assert_eq!(
            client_address(peer, &headers, &trusted),
            Some(ip("192.0.2.7"))
        );
        let one_header = forwarded(&["203.0.113.9, 192.0.2.7"]);
        assert_eq!(
            client_address(peer, &one_header, &trusted),
            Some(ip("192.0.2.7"))
        );
        // Nothing usable: the proxy itself.
        for bad in [forwarded(&[]), forwarded(&["not an address"])] {
            assert_eq!(client_address(peer, &bad, &trusted), Some(proxy));
        }
        // An untrusted peer is itself, whatever it forwards.
        let stranger = Some(PeerAddress(ip("192.0.2.66")));
        assert_eq!(
            client_address(stranger, &headers, &trusted),
            Some(ip("192.0.2.66"))
        );
        // An IPv4 proxy seen on an IPv6 socket is still trusted.
        let mapped = Some(PeerAddress(ip("::ffff:10.0.0.5")));
        assert_eq!(
            client_address(mapped, &headers, &trusted),
            Some(ip("192.0.2.7"))
        );
        assert_eq!(client_address(None, &headers, &trusted), None);
    }
}
