//! Channels found not to serve `/v1/responses` (B-responses-discovery): an `openai` channel left at
//! `responses: auto` whose upstream answered a Responses request with a 404 that names no
//! model (vLLM, DeepSeek: `{"detail":"Not Found"}`) is chat-only for [`RECHECK`]. Its
//! Responses requests are translated to Chat Completions meanwhile; when the mark expires the
//! next one is sent as it is again, so a server that gained the API is found.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::lock::lock;

/// How long a channel stays chat-only before `/v1/responses` is tried on it again.
pub const RECHECK: Duration = Duration::from_secs(600);

/// One channel's "serves no `/v1/responses`" mark.
#[derive(Debug, Default)]
pub struct ResponsesPath {
    until: Mutex<Option<Instant>>,
}

impl ResponsesPath {
    /// Is the channel marked chat-only at `now`?
    pub fn chat_only(&self, now: Instant) -> bool {
        lock(&self.until).is_some_and(|u| u > now)
    }

    /// Mark the channel chat-only from `now` for [`RECHECK`].
    pub fn mark(&self, now: Instant) {
        *lock(&self.until) = Some(now + RECHECK);
    }

    /// Time left of the mark (`None`: not marked), for the admin views.
    pub fn left(&self, now: Instant) -> Option<Duration> {
        lock(&self.until).filter(|u| *u > now).map(|u| u - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_lasts_its_recheck_time() {
        let p = ResponsesPath::default();
        let now = Instant::now();
        assert!(!p.chat_only(now));
        assert_eq!(p.left(now), None);
        p.mark(now);
        assert!(p.chat_only(now));
        assert!(p.chat_only(now + RECHECK - Duration::from_millis(1)));
        assert!(!p.chat_only(now + RECHECK), "re-checked when it expires");
        assert_eq!(p.left(now), Some(RECHECK));
    }
}
