//! Whether a request's write may have reached the log: the one fact that tells a failure
//! that changed nothing from one whose outcome this node cannot know. A write's request runs
//! inside [`tracked`], with a [`WriteBegun`] its caller (the HTTP layer) keeps; the service
//! calls [`begun`] at the moment a write is handed to the store (a customer's create), and an
//! actor call marks it once the actor has begun writing (an update, an order's create or
//! change: the actor says so on the request's `Handoff`), before anything waits for the
//! disk. So when the request ends in a failure, is cut off at its deadline, or its answer
//! cannot go out (the lease lapsed), its caller knows which it is: never begun, nothing was
//! changed; begun and not acknowledged, the write may or may not be stored.
//!
//! A task-local, so that the fact travels with the request's future through every service
//! call without a parameter on each; outside [`tracked`] (the app, tools, tests) [`begun`]
//! does nothing. A future dropped at its deadline is dropped inside the scope, so a mark
//! made by a guard's `Drop` there still counts.
//!
//! Must not touch: status codes (the HTTP layer's), the store.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

tokio::task_local! {
    static BEGUN: Arc<AtomicBool>;
}

/// Whether the request it was given to began a write.
#[derive(Debug, Default, Clone)]
pub struct WriteBegun(Arc<AtomicBool>);

impl WriteBegun {
    /// Whether a write was handed to the store (it may or may not be durable).
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Runs `request` with `begun` told of every write it hands to the store.
pub async fn tracked<F: Future>(begun: &WriteBegun, request: F) -> F::Output {
    BEGUN.scope(begun.0.clone(), request).await
}

/// Says that the request being run has handed a write to the store.
pub fn begun() {
    let _ = BEGUN.try_with(|begun| begun.store(true, Ordering::Release));
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn a_mark_made_while_the_request_is_dropped_counts() {
        struct MarkOnDrop;
        impl Drop for MarkOnDrop {
            fn drop(&mut self) {
                begun();
            }
        }
        let flag = WriteBegun::default();
        let request = tracked(&flag, async {
            let _guard = MarkOnDrop;
            std::future::pending::<()>().await;
        });
        let mut request = Box::pin(request);
        assert!((&mut request).now_or_never().is_none());
        assert!(!flag.get(), "nothing begun yet");
        drop(request);
        assert!(flag.get(), "the guard's mark at the drop counts");
        // Outside a tracked request a mark is nothing.
        begun();
        let other = WriteBegun::default();
        tracked(&other, async {}).await;
        assert!(!other.get());
    }
}
