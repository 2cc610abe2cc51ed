//! A failing network on loopback: [`Link`] is a small TCP proxy in front of one server (a
//! NATS server, for the replicated group's tests), through which one client (a boxsub
//! node) connects. A test can **cut** it: every byte stalls, both ways, and nothing is
//! closed (as when a cable or a switch dies: the peers learn of it only from their own
//! timeouts), then **heal** it, and the bytes held back flow on. It can also **slow** what
//! the client sends, to a number of bytes a second, while what it receives goes at full
//! speed, and **hold** the requests that begin with some bytes (a request routed to a slow
//! server: it arrives late) while everything else, health checks included, flows on.
//!
//! Only 127.0.0.1 is ever a target. Every task a link starts ends when it is dropped (its
//! connections are closed then); every wait is bounded by the test's own timeouts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Bytes a pump reads at once.
const CHUNK: usize = 16 * 1024;

/// What a link's pumps share.
struct LinkState {
    /// True while the link is cut.
    cut: watch::Sender<bool>,
    /// The client's bytes a second towards the server; 0 for no limit.
    upload_rate: AtomicU64,
    /// Connections through the link whose client has not closed them.
    open: AtomicU64,
    /// While set, what the client sends that begins with these bytes stalls (see
    /// [`Link::hold_requests`]).
    hold: watch::Sender<Option<Vec<u8>>>,
    /// How many sends have been held since the link began.
    held: AtomicU64,
    /// Every pump and the accept loop, aborted when the link is dropped.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// A TCP proxy on 127.0.0.1 in front of one server; see the module documentation.
pub struct Link {
    address: SocketAddr,
    state: Arc<LinkState>,
}

impl Link {
    /// A link to `target` (which must be on 127.0.0.1), listening on a free port.
    pub async fn to(target: SocketAddr) -> Link {
        assert!(target.ip().is_loopback(), "links only reach loopback");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a link's port");
        let address = listener.local_addr().expect("a link's address");
        let state = Arc::new(LinkState {
            cut: watch::Sender::new(false),
            upload_rate: AtomicU64::new(0),
            open: AtomicU64::new(0),
            hold: watch::Sender::new(None),
            held: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
        });
        let accepting = {
            let state = state.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let state2 = state.clone();
                    let task = tokio::spawn(async move { connect(client, target, state2).await });
                    state.tasks.lock().unwrap().push(task);
                }
            })
        };
        state.tasks.lock().unwrap().push(accepting);
        Link { address, state }
    }

    /// `127.0.0.1:PORT` of the link.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `nats://127.0.0.1:PORT` (or `tls://` with `tls`) of the link.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.address)
    }

    /// Stalls every byte both ways, closing nothing.
    pub fn cut(&self) {
        self.state.cut.send_replace(true);
    }

    /// Lets the bytes flow again, those held back first.
    pub fn heal(&self) {
        self.state.cut.send_replace(false);
    }

    /// Holds what the client sends that begins with `prefix` (a request's head, such as
    /// `POST /v1/customers`), on any connection, until [`Link::release_requests`]; nothing
    /// else stalls.
    pub fn hold_requests(&self, prefix: &[u8]) {
        self.state.hold.send_replace(Some(prefix.to_vec()));
    }

    /// Lets the held requests through, and holds no more.
    pub fn release_requests(&self) {
        self.state.hold.send_replace(None);
    }

    /// How many requests the link has held so far.
    pub fn requests_held(&self) -> u64 {
        self.state.held.load(Ordering::Relaxed)
    }

    /// How many connections through the link its client holds open (a NATS client holds
    /// one, to one server at a time).
    pub fn open_connections(&self) -> u64 {
        self.state.open.load(Ordering::Relaxed)
    }

    /// Limits what the client sends to `bytes_per_second` (0: no limit).
    pub fn limit_upload(&self, bytes_per_second: u64) {
        self.state
            .upload_rate
            .store(bytes_per_second, Ordering::Relaxed);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for task in self.state.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Connects `client` to `target` (once the link is not cut) and pumps both ways.
async fn connect(client: TcpStream, target: SocketAddr, state: Arc<LinkState>) {
    let mut cut = state.cut.subscribe();
    if cut.wait_for(|cut| !*cut).await.is_err() {
        return;
    }
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(pump(client_read, server_write, state.clone(), true));
    let down = tokio::spawn(pump(server_read, client_write, state.clone(), false));
    state.tasks.lock().unwrap().extend([up, down]);
}

/// Copies `from` to `to` while the link is not cut, at most at the upload rate for the
/// client's side; ends when either side closes.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<LinkState>,
    upload: bool,
) {
    let mut cut = state.cut.subscribe();
    let mut hold = state.hold.subscribe();
    let mut buffer = vec![0; CHUNK];
    // The client's side counts the connection open until the client closes it.
    let _open = upload.then(|| Open::count(&state));
    loop {
        // Nothing is read while cut, so the sender's socket fills and it stalls.
        if cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        // Bytes read just before a cut wait for the heal too.
        if cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        let held = |hold: &Option<Vec<u8>>| {
            hold.as_ref()
                .is_some_and(|prefix| buffer[..read].starts_with(prefix))
        };
        if upload && held(&hold.borrow_and_update()) {
            state.held.fetch_add(1, Ordering::Relaxed);
            if hold.wait_for(|hold| !held(hold)).await.is_err() {
                return;
            }
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
        let rate = state.upload_rate.load(Ordering::Relaxed);
        if upload && rate > 0 {
            tokio::time::sleep(Duration::from_secs_f64(read as f64 / rate as f64)).await;
        }
    }
}

/// A connection counted open until dropped.
struct Open(Arc<LinkState>);

impl Open {
    fn count(state: &Arc<LinkState>) -> Open {
        state.open.fetch_add(1, Ordering::Relaxed);
        Open(state.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback, for the link's own test.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0; 1024];
                    while let Ok(read) = stream.read(&mut buffer).await {
                        if read == 0 || stream.write_all(&buffer[..read]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        address
    }

    #[tokio::test]
    async fn a_cut_link_stalls_without_closing_and_a_healed_one_delivers_what_waited() {
        let link = Link::to(echo().await).await;
        let mut stream = TcpStream::connect(link.address).await.unwrap();
        let mut answer = [0; 5];
        stream.write_all(b"hello").await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut answer))
            .await
            .expect("an open link answers")
            .unwrap();
        assert_eq!(&answer, b"hello");
        link.cut();
        stream.write_all(b"again").await.unwrap();
        let stalled =
            tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut answer)).await;
        assert!(stalled.is_err(), "nothing comes back through a cut link");
        link.heal();
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut answer))
            .await
            .expect("the held bytes come through once healed")
            .unwrap();
        assert_eq!(&answer, b"again");
    }

    #[tokio::test]
    async fn a_held_request_waits_for_its_release_while_others_pass() {
        let link = Link::to(echo().await).await;
        let mut held = TcpStream::connect(link.address).await.unwrap();
        let mut passing = TcpStream::connect(link.address).await.unwrap();
        let mut answer = [0; 5];
        link.hold_requests(b"POST ");
        held.write_all(b"POST ").await.unwrap();
        passing.write_all(b"GET /").await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), passing.read_exact(&mut answer))
            .await
            .expect("what does not begin with the prefix passes")
            .unwrap();
        let stalled =
            tokio::time::timeout(Duration::from_millis(300), held.read_exact(&mut answer)).await;
        assert!(stalled.is_err(), "a held request does not arrive");
        assert_eq!(link.requests_held(), 1);
        link.release_requests();
        tokio::time::timeout(Duration::from_secs(5), held.read_exact(&mut answer))
            .await
            .expect("a released request arrives")
            .unwrap();
        assert_eq!(&answer, b"POST ");
    }
}
