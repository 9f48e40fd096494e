//! Where a request comes from: the peer address, or, when the server is configured to sit behind
//! N proxies that each append the address they saw to `X-Forwarded-For` (a load balancer; a CDN
//! and then a load balancer), the N-th hop from the end: the one the outermost trusted proxy
//! wrote. Hops before it are whatever the client sent and are never believed.

use crate::infra::config::Config;
use axum::{
    extract::{ConnectInfo, FromRef, FromRequestParts},
    http::request::Parts,
};
use std::{
    convert::Infallible,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::Arc,
};

#[derive(Clone, Copy, Debug)]
pub struct ClientIp(pub IpAddr);

impl<S> FromRequestParts<S> for ClientIp
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
{
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Infallible> {
        let trusted = usize::from(Arc::<Config>::from_ref(state).trusted_proxies);
        if trusted > 0 {
            let hops: Vec<IpAddr> = parts
                .headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .filter_map(|hop| hop.trim().parse::<IpAddr>().ok())
                .collect();
            // Fewer hops than proxies: the earliest is still one a trusted proxy wrote.
            if let Some(ip) = hops
                .len()
                .checked_sub(trusted)
                .map_or(hops.first(), |i| hops.get(i))
            {
                return Ok(ClientIp(*ip));
            }
        }
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        Ok(ClientIp(peer))
    }
}
