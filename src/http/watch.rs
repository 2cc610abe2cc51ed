//! Per-connection deadlines. A connection is always in one of three phases, and two of them
//! have a deadline:
//!
//! - **head**: from the first byte of a request (or from the accept, for the first request)
//!   until its head is parsed, at most `header_timeout`;
//! - **busy**: a request is being handled; the handler's own deadlines (body, request) bound
//!   it, so the connection adds none;
//! - **idle**: from the moment a response is ready until the next request's first byte, at
//!   most `idle_timeout`. Writing the response happens in this phase, so a client that stops
//!   reading its answer is cut off too.
//!
//! [`WatchedStream`] wraps the socket and fails a read or write that is still pending past
//! the phase's deadline with `TimedOut`, which ends the connection. [`Watched`] wraps the
//! request handler and tells the stream when a request starts and when its response is
//! ready. hyper's own `header_read_timeout` starts at the end of the previous response, so
//! it cannot tell a slow head from an idle keep-alive connection; this can.
//!
//! Must not touch: requests, responses, routing.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The deadlines of a connection's phases.
#[derive(Debug, Clone, Copy)]
pub struct PhaseDeadlines {
    /// Longest a request head may take, from its first byte (or the accept).
    pub header_timeout: Duration,
    /// Longest a keep-alive connection may stay idle between requests.
    pub idle_timeout: Duration,
}

/// Deadlines are kept to this many milliseconds: a phase ends at most this much late.
const GRANULE_MS: u64 = 250;

/// What the stream and the handler of one connection share.
struct Watch {
    deadlines: PhaseDeadlines,
    accepted: Instant,
    /// Requests being handled.
    busy: AtomicU32,
    /// Bytes of the next request have arrived since the connection went idle.
    receiving: AtomicBool,
    /// When the current phase began, in milliseconds since `accepted`.
    phase_began_ms: AtomicU64,
}

impl Watch {
    fn now_ms(&self) -> u64 {
        self.accepted.elapsed().as_millis() as u64
    }

    fn request_started(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.receiving.store(false, Ordering::Release);
    }

    fn response_ready(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.phase_began_ms.store(self.now_ms(), Ordering::Release);
            self.receiving.store(false, Ordering::Release);
        }
    }

    fn bytes_arrived(&self) {
        if self.busy.load(Ordering::Acquire) == 0 && !self.receiving.swap(true, Ordering::AcqRel) {
            self.phase_began_ms.store(self.now_ms(), Ordering::Release);
        }
    }

    /// When the current phase must end, if it has a deadline: rounded up to a multiple of
    /// [`GRANULE_MS`] since the accept, so that the many requests of a busy keep-alive
    /// connection share one deadline and the timer is rarely reset.
    fn deadline(&self) -> Option<Instant> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        let limit = if self.receiving.load(Ordering::Acquire) {
            self.deadlines.header_timeout
        } else {
            self.deadlines.idle_timeout
        };
        let due_ms = self.phase_began_ms.load(Ordering::Acquire) + limit.as_millis() as u64;
        let rounded = due_ms.div_ceil(GRANULE_MS) * GRANULE_MS;
        Some(self.accepted + Duration::from_millis(rounded))
    }
}

/// Creates the stream wrapper and the handler wrapper of one new connection.
pub fn watch<S, H>(
    stream: S,
    handler: H,
    deadlines: PhaseDeadlines,
) -> (WatchedStream<S>, Watched<H>) {
    let watch = Arc::new(Watch {
        deadlines,
        accepted: Instant::now(),
        busy: AtomicU32::new(0),
        // The first request's head is due `header_timeout` after the accept.
        receiving: AtomicBool::new(true),
        phase_began_ms: AtomicU64::new(0),
    });
    let stream = WatchedStream {
        stream,
        watch: watch.clone(),
        timer: Box::pin(tokio::time::sleep_until(Instant::now())),
        armed_for: None,
    };
    (stream, Watched { handler, watch })
}

pin_project! {
    /// A socket whose pending reads and writes fail once the connection's phase is over its
    /// deadline.
    pub struct WatchedStream<S> {
        #[pin]
        stream: S,
        watch: Arc<Watch>,
        timer: Pin<Box<Sleep>>,
        armed_for: Option<Instant>,
    }
}

impl<S> WatchedStream<S> {
    /// Arms the timer for the current phase's deadline (so the connection is woken then)
    /// and says whether that deadline has passed. Called on every poll of the socket that
    /// may be the last before the connection waits: hyper writes a response after its
    /// request stopped being busy and then waits for the next read without polling it
    /// again, so the idle deadline must be armed by the write.
    ///
    /// The timer is moved only to an earlier instant. A keep-alive connection's deadline
    /// moves later with every request (head, then idle, then the next head), and moving the
    /// timer each time cost two timer-wheel updates a request; left armed for an earlier
    /// instant, it wakes the connection early once, and is then armed for the deadline.
    fn deadline_passed(
        watch: &Watch,
        timer: &mut Pin<Box<Sleep>>,
        armed_for: &mut Option<Instant>,
        cx: &mut Context<'_>,
    ) -> bool {
        let Some(deadline) = watch.deadline() else {
            return false;
        };
        if armed_for.is_none_or(|armed| deadline < armed) {
            timer.as_mut().reset(deadline);
            *armed_for = Some(deadline);
        }
        if timer.as_mut().poll(cx).is_pending() {
            return false;
        }
        if *armed_for == Some(deadline) {
            return true;
        }
        // Woken early: arm it for the deadline itself.
        timer.as_mut().reset(deadline);
        *armed_for = Some(deadline);
        timer.as_mut().poll(cx).is_ready()
    }

    /// `outcome`, or a `TimedOut` error in place of `Pending` once the deadline has passed.
    fn watched<T>(
        outcome: Poll<io::Result<T>>,
        watch: &Watch,
        timer: &mut Pin<Box<Sleep>>,
        armed_for: &mut Option<Instant>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        let passed = Self::deadline_passed(watch, timer, armed_for, cx);
        match outcome {
            Poll::Pending if passed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection phase deadline passed",
            ))),
            outcome => outcome,
        }
    }
}

impl<S: AsyncRead> AsyncRead for WatchedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let outcome = this.stream.poll_read(cx, buf);
        if matches!(outcome, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.bytes_arrived();
        }
        Self::watched(outcome, this.watch, this.timer, this.armed_for, cx)
    }
}

impl<S: AsyncWrite> AsyncWrite for WatchedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let outcome = this.stream.poll_write(cx, buf);
        Self::watched(outcome, this.watch, this.timer, this.armed_for, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let outcome = this.stream.poll_write_vectored(cx, bufs);
        Self::watched(outcome, this.watch, this.timer, this.armed_for, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let outcome = this.stream.poll_flush(cx);
        Self::watched(outcome, this.watch, this.timer, this.armed_for, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }
}

/// A request handler that reports to its connection's [`WatchedStream`] when each request
/// starts and when its response is ready.
#[derive(Clone)]
pub struct Watched<H> {
    handler: H,
    watch: Arc<Watch>,
}

/// Counts its request as being handled until its response is ready or it is dropped.
struct Busy(Option<Arc<Watch>>);

impl Busy {
    fn end(&mut self) {
        if let Some(watch) = self.0.take() {
            watch.response_ready();
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.end();
    }
}

pin_project! {
    /// A handler's response future, counted as busy until it completes.
    pub struct Handling<F> {
        #[pin]
        future: F,
        busy: Busy,
    }
}

impl<F: Future> Future for Handling<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let output = std::task::ready!(this.future.poll(cx));
        this.busy.end();
        Poll::Ready(output)
    }
}

impl<H, R> hyper::service::Service<R> for Watched<H>
where
    H: hyper::service::Service<R>,
{
    type Response = H::Response;
    type Error = H::Error;
    type Future = Handling<H::Future>;

    fn call(&self, request: R) -> Self::Future {
        self.watch.request_started();
        Handling {
            future: self.handler.call(request),
            busy: Busy(Some(self.watch.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadlines() -> PhaseDeadlines {
        PhaseDeadlines {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn phases_have_their_own_deadlines() {
        let (stream, handler) = watch((), (), deadlines());
        let watch = &stream.watch;
        let accepted = watch.accepted;
        assert_eq!(watch.deadline(), Some(accepted + Duration::from_secs(10)));

        tokio::time::advance(Duration::from_secs(3)).await;
        watch.bytes_arrived();
        assert_eq!(
            watch.deadline(),
            Some(accepted + Duration::from_secs(10)),
            "the first head is due ten seconds after the accept, however it trickles in"
        );
        watch.request_started();
        assert_eq!(
            watch.deadline(),
            None,
            "a request being handled has no deadline here"
        );

        tokio::time::advance(Duration::from_secs(20)).await;
        drop(Busy(Some(handler.watch.clone())));
        let idle_from = watch.deadline().unwrap() - Duration::from_secs(30);
        assert!(idle_from >= accepted + Duration::from_secs(23));

        tokio::time::advance(Duration::from_secs(5)).await;
        watch.bytes_arrived();
        let head_due = watch.deadline().unwrap();
        assert!(
            head_due >= accepted + Duration::from_secs(38),
            "{head_due:?}"
        );
        assert!(head_due <= accepted + Duration::from_secs(39));
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_moved_later_ends_the_phase_at_the_later_one() {
        use tokio::io::AsyncReadExt;
        let (client, _peer) = tokio::io::duplex(64);
        let (mut stream, handler) = watch(client, (), deadlines());
        // A read while the first head is due (10 s) arms the timer for then.
        let pending = std::future::poll_fn(|cx| {
            let mut buf = [0u8; 8];
            let read = Pin::new(&mut stream).poll_read(cx, &mut ReadBuf::new(&mut buf));
            Poll::Ready(read.is_pending())
        })
        .await;
        assert!(pending);
        // A request comes and is answered: now the connection is idle until about 30 s.
        handler.watch.request_started();
        drop(Busy(Some(handler.watch.clone())));
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            stream.read(&mut buf).await
        });

        tokio::time::advance(Duration::from_secs(15)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !reading.is_finished(),
            "the timer armed for the head's deadline ended the idle phase early"
        );

        tokio::time::advance(Duration::from_secs(16)).await;
        let outcome = tokio::time::timeout(Duration::from_secs(1), reading).await;
        let error = outcome.unwrap().unwrap().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }
}
