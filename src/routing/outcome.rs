//! What one attempt's outcome means, derived once: the low-cardinality class the metrics
//! and the request log label it with (R12.1).

use super::policy::{Outcome, TransportKind};

/// Low-cardinality label of an outcome (metrics and the request log).
pub fn error_class(o: &Outcome) -> &'static str {
    match o {
        Outcome::Success => "success",
        Outcome::Status { code: 429, .. } => "http_429",
        Outcome::Status { code, .. } if *code >= 500 => "http_5xx",
        Outcome::Status { .. } => "http_4xx",
        Outcome::Transport(TransportKind::HeaderTimeout) => "header_timeout",
        Outcome::Transport(TransportKind::FirstByteTimeout) => "first_byte_timeout",
        Outcome::Transport(TransportKind::BodyTimeout) => "body_timeout",
        Outcome::Transport(TransportKind::EmptyBody) => "empty_body",
        Outcome::Transport(TransportKind::Broken) => "broken",
        Outcome::Transport(_) => "connect",
        Outcome::ChannelError(_) => "channel_error",
        Outcome::SkipRetry(_) => "skip_retry",
        Outcome::ClientGone => "client_gone",
        Outcome::LocalAdapter(_) => "local_error",
        Outcome::DeadlineExceeded => "deadline",
    }
}
